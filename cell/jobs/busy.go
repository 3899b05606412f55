package jobs

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/internal/httpjson"
)

// Defaults for BusyRetry.
const (
	// DefaultBusyWait bounds how long one URL of a batch or job waits out
	// a busy browser fleet: inside the 120 s a client gives a scrape.
	DefaultBusyWait = 2 * time.Minute
	// DefaultBusyBackoff is the first pause after a fleet-busy answer.
	DefaultBusyBackoff = time.Second
	// maxBusyPause caps one pause; with the pool's own 5 s wait for a
	// page slot, a URL asks again at least every 20 s or so.
	maxBusyPause = 15 * time.Second
)

// BusyRetry says how a batch's or a job's URLs wait out a busy browser
// fleet (fetch.ErrFleetBusy: no page slot came free within the pool's
// wait). A single /scrape answers 503 fleet-busy at once and its caller
// repeats it; a batch or a job has many URLs in flight (16 job workers
// against 4 page slots by default), so a URL that meets a full fleet
// pauses and asks again rather than failing. The zero value uses the
// defaults.
type BusyRetry struct {
	// Wait bounds the time one URL spends being refused for a busy fleet,
	// from its first refusal; after it the fleet-busy error is the URL's
	// result. Default DefaultBusyWait; negative: no retry.
	Wait time.Duration
	// Backoff is the first pause; each next one doubles, up to 15 s, and
	// each is drawn at random between half and all of that, so URLs
	// refused together do not come back together. Default
	// DefaultBusyBackoff.
	Backoff time.Duration
}

func (b BusyRetry) withDefaults() BusyRetry {
	if b.Wait == 0 {
		b.Wait = DefaultBusyWait
	}
	if b.Backoff <= 0 {
		b.Backoff = DefaultBusyBackoff
	}
	return b
}

// isBusy reports whether err is the fleet-busy refusal.
func isBusy(err error) bool {
	return errors.Is(err, fetch.ErrFleetBusy) || httpjson.AsHTTPError(err).Code == "fleet-busy"
}

// scrapeWaiting is fn, retried with jittered backoff while it answers
// fleet-busy, for at most b.Wait from the first refusal. When ctx ends
// during a pause it returns ctx's error.
func scrapeWaiting(ctx context.Context, fn ScrapeFunc, u string, opts scrape.Options, b BusyRetry) (*scrape.Outcome, error) {
	return waitingOut(ctx, b, func() (*scrape.Outcome, error) { return fn(ctx, u, opts) })
}

// waitingOut is call, retried as scrapeWaiting retries a scrape.
func waitingOut[T any](ctx context.Context, b BusyRetry, call func() (T, error)) (T, error) {
	b = b.withDefaults()
	var (
		deadline time.Time
		pause    = b.Backoff
		zero     T
	)
	for {
		out, err := call()
		if err == nil || b.Wait < 0 || !isBusy(err) || ctx.Err() != nil {
			return out, err
		}
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(b.Wait)
		}
		d := pause/2 + rand.N(pause/2+1)
		if left := deadline.Sub(now); d > left {
			if left <= 0 {
				return zero, err
			}
			d = left // one last try at the deadline
		}
		pause = min(2*pause, maxBusyPause)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return zero, ctx.Err()
		}
	}
}

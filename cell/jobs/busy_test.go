package jobs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/internal/httpjson"
)

// busyScrape answers fleet-busy, as the scrape service does, busy times,
// then succeeds.
func busyScrape(busy int, calls *int) ScrapeFunc {
	return func(ctx context.Context, u string, _ scrape.Options) (*scrape.Outcome, error) {
		*calls++
		if *calls <= busy {
			return nil, &httpjson.HTTPError{Status: http.StatusServiceUnavailable, Code: "fleet-busy", Message: "busy",
				Err: fmt.Errorf("fetch %s: %w", u, fetch.ErrFleetBusy)}
		}
		return &scrape.Outcome{}, nil
	}
}

func TestScrapeWaitingRetriesFleetBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		start := time.Now()
		_, err := scrapeWaiting(t.Context(), busyScrape(4, &calls), "http://a.example/", scrape.Options{}, BusyRetry{})
		took := time.Since(start)
		// Pauses of 0.5-1, 1-2, 2-4 and 4-8 s.
		if err != nil || calls != 5 || took < 7500*time.Millisecond || took > 15*time.Second {
			t.Fatalf("err %v after %d calls in %s", err, calls, took)
		}
	})
}

func TestScrapeWaitingIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		start := time.Now()
		_, err := scrapeWaiting(t.Context(), busyScrape(1<<30, &calls), "http://a.example/", scrape.Options{}, BusyRetry{})
		took := time.Since(start)
		if !errors.Is(err, fetch.ErrFleetBusy) || took != DefaultBusyWait || calls < 8 || calls > 20 {
			t.Fatalf("err %v after %d calls in %s; want fleet-busy after exactly %s", err, calls, took, DefaultBusyWait)
		}

		calls = 0
		_, err = scrapeWaiting(t.Context(), busyScrape(1<<30, &calls), "http://a.example/", scrape.Options{}, BusyRetry{Wait: -1})
		if !errors.Is(err, fetch.ErrFleetBusy) || calls != 1 {
			t.Fatalf("no wait: err %v after %d calls", err, calls)
		}
	})
}

func TestScrapeWaitingEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		calls := 0
		done := make(chan error)
		go func() {
			_, err := scrapeWaiting(ctx, busyScrape(1<<30, &calls), "http://a.example/", scrape.Options{}, BusyRetry{})
			done <- err
		}()
		time.Sleep(3 * time.Second)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v; want context.Canceled", err)
		}
	})
}

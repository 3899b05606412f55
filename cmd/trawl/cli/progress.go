package cli

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// counts is the state of long work as the gate reports it.
type counts struct {
	Total, Done, Error, Pending int
	// Credits is what the work was charged so far, "" when not known (a
	// job picked up again by `job status` was charged at submission).
	Credits string
}

// progress shows long work: a bar on a terminal (mpb) with done / error /
// pending, rate, time left and credits, and a summary line at the end.
// Without a terminal, or with --quiet, only the summary (and not that
// with --quiet).
type progress struct {
	name  string
	quiet bool
	out   io.Writer

	mu      sync.Mutex
	c       counts
	start   time.Time
	base    int // finished when first seen: the rate counts from here
	seen    bool
	p       *mpb.Progress
	bar     *mpb.Bar
	stopped bool
}

func (a *app) newProgress(name string) *progress {
	pr := &progress{name: name, quiet: a.quiet, out: a.stderr, start: time.Now()}
	if a.showProgress() {
		pr.p = mpb.New(mpb.WithOutput(a.stderr), mpb.WithWidth(30), mpb.WithRefreshRate(150*time.Millisecond))
		pr.bar = pr.p.AddBar(0,
			mpb.PrependDecorators(
				decor.Name(name+" ", decor.WCSyncSpaceR),
				decor.Any(func(decor.Statistics) string { return pr.countsText() }, decor.WCSyncSpaceR),
			),
			mpb.AppendDecorators(
				decor.Percentage(decor.WCSyncSpace),
				decor.Any(func(decor.Statistics) string { return pr.rateText() }, decor.WCSyncSpace),
			),
		)
	}
	return pr
}

func (pr *progress) finished() int { return pr.c.Done + pr.c.Error }

// update records the latest counts and moves the bar.
func (pr *progress) update(c counts) {
	pr.mu.Lock()
	if !pr.seen {
		pr.seen, pr.base, pr.start = true, c.Done+c.Error, time.Now()
	}
	if c.Credits == "" {
		c.Credits = pr.c.Credits
	}
	pr.c = c
	pr.mu.Unlock()
	if pr.bar != nil {
		pr.bar.SetTotal(int64(max(c.Total, 1)), false)
		pr.bar.SetCurrent(int64(c.Done + c.Error))
	}
}

// counts are the latest counts.
func (pr *progress) counts() counts {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.c
}

func (pr *progress) countsText() string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	s := fmt.Sprintf("%d/%d  done %d  error %d  pending %d", pr.finished(), pr.c.Total, pr.c.Done, pr.c.Error, pr.c.Pending)
	if pr.c.Credits != "" {
		s += "  credits " + pr.c.Credits
	}
	return s
}

// rate is pages a second since the work was first seen.
func (pr *progress) rate() float64 {
	el := time.Since(pr.start).Seconds()
	if el <= 0 {
		return 0
	}
	return float64(pr.finished()-pr.base) / el
}

func (pr *progress) rateText() string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	r := pr.rate()
	left := pr.c.Total - pr.finished()
	eta := "--"
	if left <= 0 {
		eta = "0s"
	} else if r > 0 {
		eta = (time.Duration(float64(left) / r * float64(time.Second))).Round(time.Second).String()
	}
	return fmt.Sprintf("%.1f/s  left %s", r, eta)
}

// stop ends the bar: complete when the work is, else aborted where it is.
func (pr *progress) stop() {
	pr.mu.Lock()
	if pr.stopped {
		pr.mu.Unlock()
		return
	}
	pr.stopped = true
	c := pr.c
	pr.mu.Unlock()
	if pr.bar == nil {
		return
	}
	if c.Pending == 0 && c.Total > 0 && c.Done+c.Error >= c.Total {
		pr.bar.SetTotal(int64(c.Total), true)
	} else {
		pr.bar.Abort(false)
	}
	pr.p.Wait()
}

// summary stops the bar and prints the final line: "NAME: D done, E
// failed, P pending of T in 12s (24.4/s), C credits".
func (pr *progress) summary(extra string) {
	pr.stop()
	if pr.quiet {
		return
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	s := fmt.Sprintf("%s: %d done, %d failed, %d pending of %d", pr.name, pr.c.Done, pr.c.Error, pr.c.Pending, pr.c.Total)
	if pr.finished() > pr.base {
		// The rate of what was watched (a job picked up when done has none).
		s += fmt.Sprintf(" in %s (%.1f pages/s)", time.Since(pr.start).Round(100*time.Millisecond), pr.rate())
	}
	if pr.c.Credits != "" {
		s += ", " + pr.c.Credits + " credits"
	}
	if extra != "" {
		s += "; " + extra
	}
	fmt.Fprintln(pr.out, s)
}

package jobs

import (
	"context"
	"io"
	"sync"

	"github.com/trawlhq/trawl/cell/scrape"
)

// MaxBatchURLs is the spec's limit for POST /scrape/batch.
const MaxBatchURLs = 50

// Batch scrapes urls with at most concurrency fetches at a time and writes one
// NDJSON line per URL to w as each finishes, calling flush after every line.
// A URL that meets a busy browser fleet waits it out as busy says, rather
// than failing at once. Cancelling ctx (the client went away) stops the
// fetches not yet finished, and their waits; Batch then returns ctx's
// error.
func Batch(ctx context.Context, fn ScrapeFunc, urls []string, opts scrape.Options, concurrency int, busy BusyRetry, w io.Writer, flush func()) error {
	if concurrency < 1 {
		concurrency = 1
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	lines := make(chan []byte)
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	go func() {
		defer close(lines)
		for _, u := range urls {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				wg.Wait()
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				line, _ := runOne(ctx, fn, u, opts, busy)
				if ctx.Err() != nil {
					return // the client is gone; nobody reads this line
				}
				select {
				case lines <- line:
				case <-ctx.Done():
				}
			}()
		}
		wg.Wait()
	}()

	var werr error
	for line := range lines {
		if werr != nil {
			continue // drain so the producers finish
		}
		line = append(line, '\n')
		if _, err := w.Write(line); err != nil {
			werr = err
			cancel()
			continue
		}
		flush()
	}
	if werr != nil {
		return werr
	}
	return ctx.Err()
}

package jobs

import (
	"context"
	"io"
	"sync"

	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/internal/metering"
)

// MaxBatchURLs is the spec's limit for POST /scrape/batch.
const MaxBatchURLs = 50

// Frame turns line i (from 0, in the order written) of a batch into the
// bytes written, given how it was produced (nil: the URL failed). Nil
// frames write the line as it is.
type Frame func(i int, line []byte, usage *metering.Usage) []byte

// Batch scrapes urls with at most concurrency fetches at a time and writes one
// NDJSON line per URL to w as each finishes (through frame), calling flush
// after every line.
// A URL that meets a busy browser fleet waits it out as busy says, rather
// than failing at once. Cancelling ctx (the client went away) stops the
// fetches not yet finished, and their waits; Batch then returns ctx's
// error.
func Batch(ctx context.Context, fn ScrapeFunc, urls []string, opts scrape.Options, concurrency int, busy BusyRetry, frame Frame, w io.Writer, flush func()) error {
	if concurrency < 1 {
		concurrency = 1
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	type done struct {
		line  []byte
		usage *metering.Usage
	}
	lines := make(chan done)
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
				line, _, usage := runOne(ctx, fn, u, opts, busy)
				if ctx.Err() != nil {
					return // the client is gone; nobody reads this line
				}
				select {
				case lines <- done{line, usage}:
				case <-ctx.Done():
				}
			}()
		}
		wg.Wait()
	}()

	var werr error
	i := 0
	for d := range lines {
		if werr != nil {
			continue // drain so the producers finish
		}
		line := d.line
		if frame != nil {
			line = frame(i, line, d.usage)
		}
		i++
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

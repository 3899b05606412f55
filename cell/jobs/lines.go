// Package jobs runs many scrapes: streamed batches of up to 50 URLs and
// durable background jobs of up to 10,000 URLs that survive a crash.
package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/metering"
)

// ScrapeFunc scrapes one URL; *scrape.Service.Scrape satisfies it.
type ScrapeFunc func(ctx context.Context, url string, opts scrape.Options) (*scrape.Outcome, error)

// ShapedFunc produces one URL of a job that carries a shape (Extra.Shape)
// as that shape asks. Its errors are read as a ScrapeFunc's
// (httpjson.AsHTTPError): a 502 is tried again, fleet-busy waited out.
type ShapedFunc func(ctx context.Context, t Target, shape json.RawMessage) (Produced, error)

// Target is the URL of a job a ShapedFunc produces.
type Target struct {
	Job string
	// Account owns the job.
	Account string
	URL     string
	// Depth is how many links away from a submitted URL it was found
	// (Extra.Grow): 0 for a submitted URL.
	Depth int
}

// Produced is what a ShapedFunc made of its URL.
type Produced struct {
	// Result is the URL's line's result (a JSON value, e.g. a Firecrawl
	// document).
	Result json.RawMessage
	// Links are the URLs the page leads to, as the job should fetch them
	// (normalised and filtered by the shape's rules): a growing job
	// (Extra.Grow) adds those it has not seen; any other job ignores them.
	Links []string
	// Usage is what the URL cost, handed to Config.Events (a crawl
	// charges each page as it is produced).
	Usage *metering.Usage
}

// Line is one NDJSON line of a batch or of job results (docs/spec/hosted-api.md §2.5): ok lines
// carry the scrape response as `result`, failed ones the error code and
// message of the API.
type Line struct {
	URL     string          `json:"url"`
	OK      bool            `json:"ok"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   string          `json:"error,omitempty"`
	Message string          `json:"message,omitempty"`
}

// runOne scrapes u, waiting out a busy browser fleet as busy says, and
// renders its line (without the trailing newline). The returned error is
// the scrape error (nil when ok) so callers can decide on retries; the
// usage is how an ok line was produced (nil for a failed one).
func runOne(ctx context.Context, fn ScrapeFunc, u string, opts scrape.Options, busy BusyRetry) ([]byte, *httpjson.HTTPError, *metering.Usage) {
	start := time.Now()
	out, err := scrapeWaiting(ctx, fn, u, opts, busy)
	var line []byte
	if err == nil {
		line = append(line, `{"url":`...)
		line = appendJSONString(line, u)
		line = append(line, `,"ok":true,"result":`...)
		line = out.AppendJSON(line, time.Since(start))
		usage := out.Usage
		return append(line, '}'), nil, &usage
	}
	line, e := failedLine(u, err)
	return line, e, nil
}

// runShaped is runOne for a job with a shape: fn produces the line's
// result.
func runShaped(ctx context.Context, fn ShapedFunc, t Target, shape json.RawMessage, busy BusyRetry) ([]byte, Produced, *httpjson.HTTPError) {
	if fn == nil {
		line, e := failedLine(t.URL, errors.New("jobs: no Config.Shaped for a job with a shape"))
		return line, Produced{}, e
	}
	p, err := waitingOut(ctx, busy, func() (Produced, error) { return fn(ctx, t, shape) })
	if err != nil {
		line, e := failedLine(t.URL, err)
		return line, Produced{}, e
	}
	line := make([]byte, 0, len(p.Result)+len(t.URL)+32)
	line = append(line, `{"url":`...)
	line = appendJSONString(line, t.URL)
	line = append(line, `,"ok":true,"result":`...)
	line = append(line, p.Result...)
	return append(line, '}'), p, nil
}

// failedLine is the line of a URL that failed with err, and err as the
// API answers it.
func failedLine(u string, err error) ([]byte, *httpjson.HTTPError) {
	e := httpjson.AsHTTPError(err)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		e = &httpjson.HTTPError{Status: http.StatusBadGateway, Code: "fetch_failed", Message: "the site did not answer in time", Err: err}
	}
	line, _ := json.Marshal(Line{URL: u, OK: false, Error: e.Code, Message: e.Message})
	return line, e
}

func appendJSONString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s)
	return append(dst, b...)
}

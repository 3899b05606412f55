package search

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/trawlhq/trawl/internal/fcapi"
)

// Firecrawl's POST /v2/search with scrapeOptions.formats (docs/firecrawl.md):
// each result is scraped as POST /v2/scrape with those options, sent
// through the gate's own pipeline (trawl_trace → trawl_auth →
// trawl_ratelimit → trawl_meter → trawl_route → a cell) with the
// caller's credentials, as the tool server's calls are (gate/mcp). So
// every scrape is authenticated, rate limited, routed to a cell, billed
// through the usage contract and receipted exactly as the caller's own
// /v2/scrape call would be; the search is billed as without them. The
// options are the cell's to check: the first result's scrape refusing them
// is the search's 400.

const (
	// fcScrapeDeadline bounds the scrapes of a search without a timeout
	// (Firecrawl's default timeout).
	fcScrapeDeadline = 60 * time.Second
	// fcSearchMaxAge is the maxAge of a search's scrapes unless the
	// options give one: Firecrawl's (3 days).
	fcSearchMaxAge = 3 * 24 * time.Hour
	// fcScrapePath is the route each result is scraped at.
	fcScrapePath = "/v2/scrape"
	// Codes of the gate's refusals (caddy-modules/ratelimit).
	codeTooManyConcurrent = "too_many_concurrent"
)

// fcCaller is what a search's scrapes take of the search's request: its
// credentials and the address the gate saw. The key stays in the gate:
// the scrapes are requests to the gate's own handler, in process.
type fcCaller struct {
	header     http.Header // Authorization, X-Api-Key, X-Forwarded-For, trace context
	remoteAddr string
	host       string
}

func callerOf(r *http.Request) *fcCaller {
	h := http.Header{}
	for _, k := range []string{"Authorization", "X-Api-Key", "X-Forwarded-For", "Traceparent", "Tracestate"} {
		if v := r.Header.Values(k); len(v) > 0 {
			h[k] = v
		}
	}
	host := r.Host
	if host == "" {
		host = "localhost"
	}
	return &fcCaller{header: h, remoteAddr: r.RemoteAddr, host: host}
}

// member is a member of a JSON object, in the order it was sent.
type member struct {
	key string
	raw json.RawMessage
}

// objectMembers reads a JSON object's members in order.
func objectMembers(b []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var out []member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, member{k, v})
	}
	return out, nil
}

// fcScraped is the outcome of one result's scrape: the document, or
// why there is none.
type fcScraped struct {
	status int      // of the /v2/scrape answer; 0: none
	doc    []member // data of a 200
	// The refusal, from Firecrawl's envelope.
	code, message string
	details       json.RawMessage
	retryAfter    time.Duration
}

// busy: the account had as many calls in flight as its plan allows.
func (o *fcScraped) busy() bool {
	return o.status == http.StatusTooManyRequests && o.code == codeTooManyConcurrent
}

// stops: a refusal no other scrape of the search would escape (no credit,
// the spend cap, the rate per minute used up).
func (o *fcScraped) stops() bool {
	return o.status == http.StatusPaymentRequired || (o.status == http.StatusTooManyRequests && !o.busy())
}

// optionsRefusal is the search's 400 for a scrape that refused its
// options (any 400 BAD_REQUEST or UNSUPPORTED_FEATURE but for the url),
// its field named under scrapeOptions; nil for anything else.
func (o *fcScraped) optionsRefusal() *fcapi.Error {
	if o.status != http.StatusBadRequest || (o.code != fcapi.CodeBadRequest && o.code != fcapi.CodeUnsupported) {
		return nil
	}
	var ds []struct {
		Path    []string `json:"path"`
		Message string   `json:"message"`
	}
	path, msg := []string{"scrapeOptions"}, o.message
	if json.Unmarshal(o.details, &ds) == nil && len(ds) > 0 {
		if len(ds[0].Path) > 0 && ds[0].Path[0] == "url" {
			return nil
		}
		path = append(path, ds[0].Path...)
		if ds[0].Message != "" {
			msg = ds[0].Message
		}
	}
	return &fcapi.Error{Status: o.status, Code: o.code, Message: o.message,
		Details: []map[string]any{{"path": path, "message": msg}}}
}

// fcFailed is a result whose scrape failed: Firecrawl's metadata of a
// failed scrape, with the status /v2/scrape answered.
func fcFailed(status int, message string) []member {
	if message == "" {
		message = http.StatusText(status)
	}
	md := marshal(map[string]any{"statusCode": status, "error": message, "proxyUsed": "basic"})
	return []member{{"metadata", md}}
}

// document is the outcome as the result's members.
func (o *fcScraped) document() []member {
	if o.status == http.StatusOK {
		return o.doc
	}
	return fcFailed(o.status, o.message)
}

// fcScraper scrapes a search's results through the pipeline.
type fcScraper struct {
	pipeline http.Handler
	caller   *fcCaller
	options  map[string]json.RawMessage // scrapeOptions as sent, with the maxAge
	bound    int

	mu       sync.Mutex
	finished chan struct{} // closed (and replaced) as a scrape ends, giving back its place in flight
	stop     *fcScraped    // the refusal that stopped the search's scrapes
}

func newScraper(pipeline http.Handler, c *fcCaller, opts map[string]json.RawMessage, bound int) *fcScraper {
	o := maps.Clone(opts)
	if _, ok := o["maxAge"]; !ok {
		o["maxAge"] = json.RawMessage(strconv.FormatInt(fcSearchMaxAge.Milliseconds(), 10))
	}
	return &fcScraper{pipeline: pipeline, caller: c, options: o, bound: max(bound, 1), finished: make(chan struct{})}
}

// waitFinished is closed when a scrape of the search next ends.
func (sc *fcScraper) waitFinished() <-chan struct{} {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.finished
}

func (sc *fcScraper) ended(o *fcScraped) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	close(sc.finished)
	sc.finished = make(chan struct{})
	if o.stops() && sc.stop == nil {
		sc.stop = o
	}
}

func (sc *fcScraper) stopped() *fcScraped {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.stop
}

// scrape scrapes one URL within ctx. Refused for the calls the account
// has in flight (the search holds one of its places), it tries again as
// another scrape of the search ends, or after the refusal's Retry-After.
func (sc *fcScraper) scrape(ctx context.Context, url string) *fcScraped {
	for {
		if o := sc.stopped(); o != nil {
			return o
		}
		finished := sc.waitFinished()
		o := sc.call(ctx, url)
		if ctx.Err() != nil && o.status != http.StatusOK {
			return sc.late(ctx)
		}
		if !o.busy() {
			sc.ended(o)
			return o
		}
		wait := min(max(o.retryAfter, 100*time.Millisecond), 5*time.Second)
		t := time.NewTimer(wait)
		select {
		case <-finished:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return sc.late(ctx)
		}
		t.Stop()
	}
}

// late is a result the search's deadline left unscraped.
func (sc *fcScraper) late(ctx context.Context) *fcScraped {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &fcScraped{status: http.StatusRequestTimeout, code: fcapi.CodeScrapeTimeout, message: "the search's timeout ended before this result was scraped"}
	}
	return &fcScraped{status: http.StatusInternalServerError, message: "the search was cancelled before this result was scraped"}
}

// all scrapes urls, at most sc.bound at once; out[i] is urls[i]'s. Once
// a scrape is refused for want of credit or rate, no other starts.
func (sc *fcScraper) all(ctx context.Context, urls []string, out []*fcScraped) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(sc.bound, len(urls)) {
		wg.Go(func() {
			for i := range next {
				out[i] = sc.scrape(ctx, urls[i])
			}
		})
	}
	for i := range urls {
		if sc.stopped() != nil || ctx.Err() != nil {
			break
		}
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	for i := range out {
		if out[i] != nil {
			continue
		}
		if o := sc.stopped(); o != nil {
			out[i] = o
		} else {
			out[i] = sc.late(ctx)
		}
	}
}

// call sends POST /v2/scrape for url through the pipeline as the caller
// and reads the answer. The request runs on a context of its own (none of
// the search request's values, which carry its identity), ended with ctx.
func (sc *fcScraper) call(ctx context.Context, url string) *fcScraped {
	body := maps.Clone(sc.options)
	body["url"] = marshal(url)
	b := marshal(body)
	inner, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	req, err := http.NewRequestWithContext(inner, http.MethodPost, "http://"+sc.caller.host+fcScrapePath, bytes.NewReader(b))
	if err != nil {
		return &fcScraped{status: http.StatusInternalServerError, message: err.Error()}
	}
	req.RequestURI = fcScrapePath
	req.RemoteAddr = sc.caller.remoteAddr
	req.ContentLength = int64(len(b))
	for k, v := range sc.caller.header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "trawl-search")
	// The scrape is a child of the search's span when one is recorded.
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header))

	rec := &recorder{header: http.Header{}}
	if err := serve(sc.pipeline, rec, req); err != nil {
		return &fcScraped{status: http.StatusBadGateway, message: err.Error()}
	}
	o := &fcScraped{status: rec.status}
	if o.status == 0 {
		o.status = http.StatusOK
	}
	if o.status == http.StatusOK {
		var ans struct {
			Success bool            `json:"success"`
			Data    json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(rec.body.Bytes(), &ans); err != nil || !ans.Success {
			return &fcScraped{status: http.StatusBadGateway, message: "the scrape's answer could not be read"}
		}
		if o.doc, err = objectMembers(ans.Data); err != nil {
			return &fcScraped{status: http.StatusBadGateway, message: "the scrape's document could not be read"}
		}
		return o
	}
	var env struct {
		Error   string          `json:"error"`
		Code    string          `json:"code"`
		Details json.RawMessage `json:"details"`
	}
	json.Unmarshal(rec.body.Bytes(), &env)
	o.code, o.message, o.details = env.Code, env.Error, env.Details
	if s, err := strconv.Atoi(rec.header.Get("Retry-After")); err == nil && s > 0 {
		o.retryAfter = time.Duration(s) * time.Second
	}
	return o
}

// serve runs h for req; a panic of the chain (reverse_proxy ends an
// answer it could not finish with http.ErrAbortHandler) fails this call
// only.
func serve(h http.Handler, w http.ResponseWriter, req *http.Request) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the gate failed while scraping this result: %v", v)
		}
	}()
	h.ServeHTTP(w, req)
	return nil
}

// recorder keeps an answer of the pipeline in memory: a scrape's
// document is answered whole.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *recorder) Header() http.Header { return w.header }

func (w *recorder) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status
	}
}

func (w *recorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(p)
}

// Flush has nothing to do: the answer is read once the handler returns.
func (w *recorder) Flush() {}

// scrapeTargets are the distinct URLs of the results, web first, then
// news: a page in both is scraped once.
func scrapeTargets(d *fcSearchData) []string {
	seen := map[string]bool{}
	var out []string
	add := func(u string) {
		if u != "" && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	for _, x := range d.Web {
		add(x.URL)
	}
	for _, x := range d.News {
		add(x.URL)
	}
	return out
}

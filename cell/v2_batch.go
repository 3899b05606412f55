package cell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/firecrawl"
	"github.com/trawlhq/trawl/cell/jobs"
	"github.com/trawlhq/trawl/internal/fcapi"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

// Firecrawl's batch scrape (docs/firecrawl.md, "Batch scrape") is a job
// of the cell's jobs manager: held, charged per fetchable URL by the gate
// and released as POST /scrape/jobs is (handleJobSubmit), owned by the
// cell its id names. The job keeps the batch's Firecrawl scrape options
// as its shape (jobs.Extra.Shape), and its URLs are produced by
// v2JobScrape: the steps of POST /v2/scrape, the document as the URL's
// result line.

// v2BatchPage bounds the documents of one status answer; past it the
// answer gives the next page's URL (Firecrawl's 10 MB).
const v2BatchPage = 10 << 20

// v2BatchKind marks a job's shape as a batch scrape's.
const v2BatchKind = "firecrawl_batch_scrape"

// v2BatchShape is what a batch scrape job keeps (jobs.Extra.Shape).
type v2BatchShape struct {
	Kind    string                  `json:"kind"`
	Options firecrawl.ScrapeOptions `json:"options"`
	// Webhook is the batch's webhook with the account's secret
	// (v2Webhook), read by the webhooks' observer (cell/fchook).
	Webhook *firecrawl.Webhook `json:"webhook,omitempty"`
}

// v2BatchHandlers are the handlers of Firecrawl's v2 batch routes
// (docs/firecrawl.md).
func (c *Cell) v2BatchHandlers() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{
		"POST /v2/batch/scrape":            c.handleV2BatchStart,
		"GET /v2/batch/scrape/{id}":        c.withV2Batch(c.handleV2BatchStatus),
		"DELETE /v2/batch/scrape/{id}":     c.withV2Batch(c.handleV2BatchCancel),
		"GET /v2/batch/scrape/{id}/errors": c.withV2Batch(c.handleV2BatchErrors),
	}
}

// handleV2BatchStart serves POST /v2/batch/scrape: the batch is recorded
// as a held job and answered with its usage, one unit per fetchable URL;
// the gate charges it and releases it (handleJobRelease).
func (c *Cell) handleV2BatchStart(w http.ResponseWriter, r *http.Request) {
	for _, h := range []string{"X-Idempotency-Key", "Idempotency-Key"} {
		if r.Header.Get(h) != "" {
			firecrawl.WriteError(w, firecrawl.Unsupported("", "idempotency keys on a batch scrape are not supported yet ("+h+")"))
			return
		}
	}
	var req firecrawl.BatchRequest
	if err := fcapi.Decode(w, r, &req); err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	plan, err := req.Compile(jobs.MaxJobURLs)
	if err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	if opts := plan.Options; opts.Proxy != fetch.ProxyNone || opts.NeedsBrowser() {
		if err := c.scrape.Check(opts); err != nil {
			firecrawl.WriteError(w, err)
			return
		}
	}
	var valid, invalid []string
	for i, u := range req.URLs {
		if _, err := urlpolicy.Validate(u, c.cfg.AllowPrivateNetworks); err != nil {
			if !req.Ignore() {
				firecrawl.WriteError(w, &firecrawl.Error{Status: http.StatusBadRequest, Code: firecrawl.CodeBadRequest,
					Message: fmt.Sprintf("Bad Request: urls.%d: %v", i, err),
					Details: []map[string]any{{"path": []string{"urls", strconv.Itoa(i)}, "message": err.Error()}}})
				return
			}
			invalid = append(invalid, u)
			continue
		}
		valid = append(valid, u)
	}
	if len(valid) == 0 {
		firecrawl.WriteError(w, firecrawl.BadRequest("urls", "none of urls is a URL trawl can fetch (http or https, a public host)"))
		return
	}
	hook, err := c.v2Webhook(r, req.Webhook) // cell/v2_webhooks.go
	if err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	ok := c.fetchableFunc(r.Context(), valid)
	n := 0
	for _, u := range valid {
		if ok(u) {
			n++
		}
	}
	shape, err := json.Marshal(v2BatchShape{Kind: v2BatchKind, Options: req.ScrapeOptions, Webhook: hook})
	if err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	x := jobs.Extra{Shape: shape, Units: n, Placed: true}
	if req.MaxConcurrency != nil {
		x.Concurrency = *req.MaxConcurrency
	}
	id, token, err := c.jobs.HoldWith(accountOf(r), valid, plan.Options, x)
	if err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	usage := metering.PerURL(metering.KindJob, n)
	usage.Job, usage.Hold = id, token
	w.Header().Set(UsageHeader, usage.String())
	httpjson.Write(w, http.StatusOK, firecrawl.BatchStarted{Success: true, ID: id, URL: v2BatchURL(r, id), InvalidURLs: invalid})
}

// v2BatchURL is the absolute URL of batch id's status, at the address
// the client called (the gate passes its Host and X-Forwarded-Proto on).
func v2BatchURL(r *http.Request, id string) string { return v2JobURL(r, "/v2/batch/scrape/", id) }

// v2JobURL is the absolute URL of path + id at the address the client
// called.
func v2JobURL(r *http.Request, path, id string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "http" || p == "https" {
		scheme = p
	}
	return scheme + "://" + r.Host + path + id
}

// withV2Batch answers Firecrawl's 404 unless {id} names a batch scrape of
// the caller (a job of another account, or a native job, is no batch),
// and hands h its status.
func (c *Cell) withV2Batch(h func(http.ResponseWriter, *http.Request, *jobs.Status)) http.HandlerFunc {
	return c.withV2Job(v2BatchKind, "Batch scrape job not found", h)
}

// withV2Job answers Firecrawl's 404 (message) unless {id} names a job of
// the caller whose shape is of kind, and hands h its status.
func (c *Cell) withV2Job(kind, message string, h func(http.ResponseWriter, *http.Request, *jobs.Status)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		notFound := &firecrawl.Error{Status: http.StatusNotFound, Code: firecrawl.CodeNotFound, Message: message}
		if _, _, ok := jobs.ParseJobID(id); !ok {
			firecrawl.WriteError(w, notFound)
			return
		}
		st, err := c.jobs.Status(id, accountOf(r), false)
		if errors.Is(err, jobs.ErrNoJob) {
			firecrawl.WriteError(w, notFound)
			return
		}
		if err != nil {
			firecrawl.WriteError(w, err)
			return
		}
		var shape struct {
			Kind string `json:"kind"`
		}
		if len(st.Shape) == 0 || json.Unmarshal(st.Shape, &shape) != nil || shape.Kind != kind {
			firecrawl.WriteError(w, notFound)
			return
		}
		h(w, r, st)
	}
}

// handleV2BatchStatus serves GET /v2/batch/scrape/{id}[?skip=N]: the
// documents from the Nth on, up to v2BatchPage bytes of them, and the
// next page's URL when more are waiting.
func (c *Cell) handleV2BatchStatus(w http.ResponseWriter, r *http.Request, st *jobs.Status) {
	if isWebSocket(r) {
		c.serveJobSocket(w, r, st, func(string) float64 { return batchCredits(st) })
		return
	}
	c.v2JobStatus(w, r, st, "/v2/batch/scrape/", batchCredits(st))
}

// v2JobStatus writes the status of a batch scrape or crawl (its documents
// from ?skip=N on, up to v2BatchPage bytes, and the next page's URL, at
// path + id, when more are waiting), with the credits it has used.
func (c *Cell) v2JobStatus(w http.ResponseWriter, r *http.Request, st *jobs.Status, path string, credits float64) {
	var skip int64
	if s := r.URL.Query().Get("skip"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			firecrawl.WriteError(w, firecrawl.BadRequest("skip", "skip is a non-negative integer"))
			return
		}
		skip = n
	}
	out := firecrawl.BatchStatus{
		Success: true, Total: st.Total, Completed: st.Done,
		CreditsUsed: credits, ExpiresAt: st.ExpiresAt.UTC().Format(time.RFC3339), Data: []json.RawMessage{},
	}
	out.Status, out.Error = firecrawlState(st), st.Failure
	// The status was read first: a completed batch's documents are all
	// written by now.
	size, taken, more := 0, int64(0), false
	var bad error
	err := c.jobs.ScanResults(st.JobID, accountOf(r), skip, func(line []byte) bool {
		var l jobs.Line
		if err := json.Unmarshal(line, &l); err != nil {
			bad = fmt.Errorf("batch %s: result line %d: %w", st.JobID, skip+taken, err)
			return false
		}
		if len(out.Data) > 0 && size+len(l.Result) > v2BatchPage {
			more = true
			return false
		}
		out.Data = append(out.Data, l.Result)
		size += len(l.Result)
		taken++
		return true
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	if more {
		out.Next = v2JobURL(r, path, st.JobID) + "?skip=" + strconv.FormatInt(skip+taken, 10)
	}
	httpjson.Write(w, http.StatusOK, out)
}

// handleV2BatchCancel serves DELETE /v2/batch/scrape/{id}: the batch's
// URLs not yet fetched never are (jobs.Manager.Cancel).
func (c *Cell) handleV2BatchCancel(w http.ResponseWriter, r *http.Request, st *jobs.Status) {
	if err := c.jobs.Cancel(st.JobID, accountOf(r)); err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"success": true, "status": firecrawl.BatchCancelled})
}

// handleV2BatchErrors serves GET /v2/batch/scrape/{id}/errors: the URLs
// that failed, in submission order. trawl keeps no robots.txt list.
func (c *Cell) handleV2BatchErrors(w http.ResponseWriter, r *http.Request, st *jobs.Status) {
	c.v2JobErrors(w, r, st)
}

// v2JobErrors writes the failed URLs of a batch scrape or crawl, in the
// order they were found; those robots.txt kept the crawl from are listed
// apart.
func (c *Cell) v2JobErrors(w http.ResponseWriter, r *http.Request, st *jobs.Status) {
	fs, err := c.jobs.Failures(st.JobID, accountOf(r))
	if err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	out := firecrawl.BatchErrors{Errors: []firecrawl.BatchError{}, RobotsBlocked: []string{}}
	for _, f := range fs {
		if f.Error == codeRobotsBlocked {
			out.RobotsBlocked = append(out.RobotsBlocked, f.URL)
			continue
		}
		e := firecrawl.BatchError{ID: st.JobID + "-" + strconv.Itoa(f.Index), URL: f.URL,
			Code: firecrawl.CodeFor(f.Status, f.Error), Error: f.Message}
		if !f.At.IsZero() {
			e.Timestamp = f.At.UTC().Format(time.RFC3339Nano)
		}
		out.Errors = append(out.Errors, e)
	}
	httpjson.Write(w, http.StatusOK, out)
}

// v2JobScrape produces one URL of a batch scrape job (jobs.Config.Shaped):
// the steps of POST /v2/scrape with the batch's options, the document as
// the result. Its usage is not reported: the batch was charged per URL
// when it was submitted.
func (c *Cell) v2JobScrape(ctx context.Context, t jobs.Target, raw json.RawMessage) (jobs.Produced, error) {
	var shape v2BatchShape
	if err := json.Unmarshal(raw, &shape); err != nil || shape.Kind != v2BatchKind {
		return jobs.Produced{}, fmt.Errorf("a job shape that is not a batch scrape's (%q): %v", shape.Kind, err)
	}
	plan, err := shape.Options.Compile("")
	if err != nil {
		return jobs.Produced{}, v2JobError(err)
	}
	doc, _, err := c.v2Scrape(ctx, t.URL, plan)
	if err == nil {
		err = c.v2Track(ctx, t.Account, t.URL, plan, doc)
	}
	if err != nil {
		return jobs.Produced{}, v2JobError(err)
	}
	res, err := json.Marshal(doc)
	return jobs.Produced{Result: res}, err
}

// v2JobError keeps a Firecrawl refusal's status, code and sentence in the
// jobs manager's terms; trawl's own errors pass as they are (the manager
// retries a 502 and waits out a busy fleet by them).
func v2JobError(err error) error {
	if fe, ok := errors.AsType[*firecrawl.Error](err); ok {
		return &httpjson.HTTPError{Status: fe.Status, Code: fe.Code, Message: fe.Message}
	}
	return err
}

// batchCredits is a batch's creditsUsed: what the gate charged for its
// start and retries, as each release said; the units charged when a
// release did not say (a gate of an older version).
func batchCredits(st *jobs.Status) float64 {
	if st.CreditsKnown {
		return float64(st.CreditsMC) / 1000
	}
	return float64(st.Charged)
}

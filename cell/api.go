package cell

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/jobs"
	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/internal/fcapi"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

// Request body limits: the route table's (internal/routes).
const (
	maxScrapeBody = routes.ScrapeBody
	maxJobBody    = routes.JobBody
)

// UsageHeader carries how a response was produced, for the gate to price
// (the usage contract of internal/metering). The gate removes it before the
// client sees it.
const UsageHeader = metering.Header

// handlers are the cell's handlers by route pattern: one for each route of
// Rows() and no other.
func (c *Cell) handlers() map[string]http.HandlerFunc {
	hs := map[string]http.HandlerFunc{
		"GET /health":                    c.health,
		"POST /scrape":                   c.handleScrape,
		"POST /scrape/batch":             c.handleBatch,
		"POST /scrape/jobs":              c.handleJobSubmit,
		"GET /scrape/jobs/{id}":          withJobID(c.handleJobStatus),
		"GET /scrape/jobs/{id}/results":  withJobID(c.handleJobResults),
		"POST /scrape/jobs/{id}/retry":   withJobID(c.handleJobRetry),
		"POST /scrape/jobs/{id}/release": withJobID(c.handleJobRelease),
		"POST /extract":                  c.handleExtract,
		// Monitors (cell/monitors.go).
		"POST /monitors":                        c.handleMonitorCreate,
		"GET /monitors":                         c.handleMonitorList,
		"GET /monitors/{id}":                    withMonitorID(c.handleMonitorGet),
		"PATCH /monitors/{id}":                  withMonitorID(c.handleMonitorPatch),
		"DELETE /monitors/{id}":                 withMonitorID(c.handleMonitorDelete),
		"GET /monitors/{id}/events":             withMonitorID(c.handleMonitorEvents),
		"GET /monitors/{id}/versions/{version}": withMonitorID(c.handleMonitorVersion),
		"GET /monitor-charges":                  c.handleMonitorCharges,
		"POST /monitor-charges/ack":             c.handleMonitorChargesAck,
		"GET /search/local":                     c.handleSearchLocal,
		"POST /search/generate":                 c.handleSearchGenerate,
		// Recipes (cell/recipes.go).
		"GET /recipes":              c.handleRecipeList,
		"GET /recipes/health/local": c.handleRecipeHealth,
		"POST /recipes/{name}":      c.handleRecipeRun,
		"GET /recipes/jobs/{id}":    c.handleRecipeJob,
	}
	// Firecrawl's v2 routes, one file a feature (cell/v2*.go).
	for _, v2 := range []map[string]http.HandlerFunc{c.v2ScrapeHandlers(), c.v2MapHandlers(), c.v2BatchHandlers(), c.v2CrawlHandlers(), c.v2ExtractHandlers()} {
		maps.Copy(hs, v2)
	}
	return hs
}

// Rows are the routes a cell serves: the route table's routes for a cell
// or an owner cell, and the cell's own (routes.CellLocal). The table's
// prefixes are the cell's 404.
func Rows() []routes.Route {
	var rows []routes.Route
	for _, r := range routes.Default().Rows() {
		if (r.Server == routes.Cell || r.Server == routes.Owner) && !r.Prefix() {
			rows = append(rows, r)
		}
	}
	return append(rows, routes.CellLocal...)
}

// Handler returns the cell API: each route of Rows with its handler, 405
// with Allow for another method on a route's path, 404 elsewhere. It panics
// when a route has no handler or a handler no route (TestRouteTable).
func (c *Cell) Handler() http.Handler {
	hs := routes.Handlers{}
	for pattern, h := range c.handlers() {
		hs[pattern] = h
	}

	// The span (started by traced) is named for the row's pattern, so
	// names carry no job, monitor or recipe id.
	mux, err := routes.Mux(Rows(), hs, routes.MuxOptions{SpanPrefix: "cell "})
	if err != nil {
		panic("cell: " + err.Error())
	}
	for pattern, h := range c.cfg.Pages {
		mux.Handle(pattern, h)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v2/") {
			// Firecrawl's clients read their envelope's sentence
			// (docs/firecrawl.md: the routes trawl does not serve).
			fcapi.WriteError(w, &fcapi.Error{Status: http.StatusNotFound, Code: fcapi.CodeNotFound,
				Message: "trawl does not serve " + r.Method + " " + r.URL.Path + " (docs/firecrawl.md lists the Firecrawl routes it serves)"})
			return
		}
		httpjson.Error(w, http.StatusNotFound, "not_found", "no such route: "+r.URL.Path)
	})
	return traced(c.fromGate(c.recoverer(mux)))
}

// recoverer turns a handler panic into a 500 JSON error and a log line, so
// one bad page never takes the cell down.
func (c *Cell) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				c.cfg.Logger.Error("handler panic", "path", r.URL.Path, "panic", v)
				httpjson.WriteError(w, fmt.Errorf("handler panic: %v", v))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func (c *Cell) health(w http.ResponseWriter, r *http.Request) {
	body := map[string]any{
		"status":     "ok",
		"store_disk": c.store.Metrics().DiskBytes,
		"jetstream":  c.JetStreamHealth(),
		// job_log: the region's job log's replicas and how many are
		// current; null before the cell shares work.
		"job_log": c.JobLogReplicas(),
		// jobs_shared: this cell's job URLs go to the region's work
		// queue, and it fetches the region's (cell/jobs/share.go).
		"jobs_shared": c.jobs.Shared(),
		"job_share":   c.jobs.ShareStats(),
		// coordinator: this cell holds the region's lease and feeds the
		// jobs of cells that are down (cell/jobs/adopt.go).
		"coordinator": c.Coordinating(),
		// page_copies: the pages this cell sends the cell that indexes
		// them beside it, and those it indexes for the others (pages.go).
		"page_copies": c.PageCopies(),
		// check_queue: the region's queue of monitor checks (checks.go):
		// whether this cell schedules them, what it queued and ran; null
		// before the cell shares its work.
		"check_queue": c.CheckQueueStats(),
		// recipe_share: the background recipe runs this cell queued on
		// the region, ran for any cell and recorded (cell/recipe/share.go).
		"recipe_share": c.recipes.ShareStats(),
	}
	if c.pool != nil {
		st := c.pool.Stats()
		pss := st.PSS
		if r.URL.Query().Get("browser_pss") == "1" {
			// Measured now rather than at the pool's last check (benchmarks).
			if v, err := c.pool.PSS(); err == nil {
				pss = v
			}
		}
		body["browser"] = map[string]any{
			"browsers": st.Browsers, "draining": st.Draining, "pages_in_use": st.PagesInUse,
			"pages_served": st.PagesServed, "launches": st.Launches, "launch_failures": st.LaunchFailures,
			"recycles": st.Recycles, "crashes": st.Crashes, "retries": st.Retries,
			"fleet_busy": st.FleetBusy, "driver_restarts": st.DriverRestarts, "healthy": st.Healthy,
			"pss_bytes": pss,
		}
		if !st.Healthy {
			// Still 200: plain pages, cached ones and jobs' bookkeeping
			// work, and the pool keeps retrying. Pages that need the
			// browser fail until it recovers.
			body["status"] = "degraded"
		}
	}
	httpjson.Write(w, http.StatusOK, body)
}

func (c *Cell) handleScrape(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req scrape.Request
	if err := httpjson.Decode(w, r, maxScrapeBody, &req); err != nil {
		httpjson.WriteError(w, err)
		return
	}
	if err := req.Normalize(); err != nil {
		httpjson.WriteError(w, err)
		return
	}
	if req.URL == "" {
		httpjson.WriteError(w, scrape.BadInput("url is required"))
		return
	}
	if req.Proxy != fetch.ProxyNone || req.NeedsBrowser() {
		if err := c.scrape.Check(req.Options); err != nil {
			httpjson.WriteError(w, err)
			return
		}
	}
	bp := bufPool.Get().(*[]byte)
	out, err := c.scrape.ScrapeAppend(r.Context(), *bp, req.URL, req.Options)
	if err == nil && out.Usage.Cache == metering.CacheHit && cap(out.Body) <= 4<<20 {
		defer func() { *bp = out.Body[:0]; bufPool.Put(bp) }() // the body aliases the buffer
	} else {
		defer bufPool.Put(bp) // untouched
	}
	if r.Context().Err() != nil {
		return // the client is gone
	}
	if err != nil {
		c.logFailure(r, req.URL, err)
		httpjson.WriteError(w, err)
		return
	}
	w.Header().Set(UsageHeader, out.Usage.String())
	w.Header().Set("Content-Type", "application/json")
	var tailBuf [32]byte
	tail := append(out.AppendTail(tailBuf[:0], time.Since(start)), '\n')
	w.Header().Set("Content-Length", strconv.Itoa(len(out.Body)+len(tail)))
	w.WriteHeader(http.StatusOK)
	w.Write(out.Body)
	w.Write(tail)
}

// checkHostsWithin bounds the name lookups of fetchableFunc.
const checkHostsWithin = 5 * time.Second

// fetchableFunc returns whether each of urls can be fetched: it passes
// the URL checks and its host does not resolve to an address the SSRF
// guard refuses at dial time (what a job bills in advance must not
// include what the guard will refuse). Each host is looked up once, 16 at
// a time, within checkHostsWithin; a host not resolved by then, or not at
// all (an ordinary failing site), counts as fetchable.
func (c *Cell) fetchableFunc(ctx context.Context, urls []string) func(string) bool {
	var names []string
	seen := map[string]bool{}
	for _, raw := range urls {
		if u, err := urlpolicy.Validate(raw, c.cfg.AllowPrivateNetworks); err == nil && !c.cfg.AllowPrivateNetworks && !seen[u.Hostname()] {
			seen[u.Hostname()] = true
			names = append(names, u.Hostname())
		}
	}
	refused := map[string]bool{}
	if len(names) > 0 {
		ctx, cancel := context.WithTimeout(ctx, checkHostsWithin)
		defer cancel()
		var mu sync.Mutex
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for _, h := range names {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if err := c.engine.CheckHost(ctx, h); errors.Is(err, fetch.ErrNotPublic) {
					mu.Lock()
					refused[h] = true
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	return func(raw string) bool {
		u, err := urlpolicy.Validate(raw, c.cfg.AllowPrivateNetworks)
		return err == nil && !refused[u.Hostname()]
	}
}

// bufPool holds cache-hit buffers so a hit reads the store without
// allocating.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// manyRequest is the body of batch and job submissions: urls plus any
// scrape field.
type manyRequest struct {
	URLs []string `json:"urls"`
	scrape.Options
}

func (c *Cell) decodeMany(w http.ResponseWriter, r *http.Request, limit int64, max int) (*manyRequest, error) {
	var req manyRequest
	if err := httpjson.Decode(w, r, limit, &req); err != nil {
		return nil, err
	}
	if len(req.URLs) == 0 || len(req.URLs) > max {
		return nil, scrape.BadInput(fmt.Sprintf("urls must hold 1 to %d URLs (got %d)", max, len(req.URLs)))
	}
	if err := req.Normalize(); err != nil {
		return nil, err
	}
	if err := c.scrape.Check(req.Options); err != nil {
		return nil, err
	}
	return &req, nil
}

func (c *Cell) handleBatch(w http.ResponseWriter, r *http.Request) {
	req, err := c.decodeMany(w, r, maxScrapeBody, jobs.MaxBatchURLs)
	if err != nil {
		httpjson.WriteError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// A batch bills per line as the gate passes it on: each line carries
	// its own signed usage (metering.Usage.PerLine); the header bills
	// nothing.
	head := metering.PerURL(metering.KindBatch, 0)
	head.PerLine = true
	w.Header().Set(UsageHeader, head.String())
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	rc.Flush()
	err = jobs.Batch(r.Context(), c.scrape.Scrape, req.URLs, req.Options, c.cfg.BatchConcurrency, c.cfg.busy(), lineFrame(w), w, func() { rc.Flush() })
	if err != nil && r.Context().Err() == nil {
		c.cfg.Logger.Warn("batch stream ended early", "err", err)
	}
}

// lineFrame puts each batch line's usage in front of it, signed over the
// request's nonce and the line's place (metering.LinePrefix): an ok line
// bills one URL as it was produced, a failed one (a site that did not
// answer, a host the SSRF guard refused at dial time) bills nothing.
func lineFrame(w http.ResponseWriter) jobs.Frame {
	sw := signerOf(w)
	return func(i int, line []byte, u *metering.Usage) []byte {
		usage := metering.PerURL(metering.KindBatch, 0)
		if u != nil {
			usage = *u
			usage.Kind, usage.Count = metering.KindBatch, metering.Count(1)
		}
		raw := usage.String()
		var sig string
		if sw != nil {
			sig = sw.keys.SignAnswer(metering.LineNonce(sw.nonce, i), http.StatusOK, raw)
		}
		out := make([]byte, 0, len(line)+len(raw)+128)
		out = append(append(append(out, metering.LinePrefix...), raw...), metering.LineSig...)
		out = append(append(out, sig...), `",`...)
		return append(out, line[1:]...)
	}
}

// signerOf finds the writer that signs the answer (fromGate's).
func signerOf(w http.ResponseWriter) *signingWriter {
	for {
		switch v := w.(type) {
		case *signingWriter:
			return v
		case interface{ Unwrap() http.ResponseWriter }:
			w = v.Unwrap()
		default:
			return nil
		}
	}
}

// handleJobSubmit records the job held and answers with its usage: the
// gate charges it, then releases the job (handleJobRelease). A job whose
// charge is refused, or whose gate never comes back, is never started and
// expires (jobs.Config.HoldTTL).
func (c *Cell) handleJobSubmit(w http.ResponseWriter, r *http.Request) {
	req, err := c.decodeMany(w, r, maxJobBody, jobs.MaxJobURLs)
	if err != nil {
		httpjson.WriteError(w, err)
		return
	}
	ok := c.fetchableFunc(r.Context(), req.URLs)
	n := 0
	for _, u := range req.URLs {
		if ok(u) {
			n++
		}
	}
	var id, token string
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		// A repeat of a keyed submission is the same job, free: the
		// first one was charged (docs/api.md, "Job idempotency").
		var existed bool
		id, token, existed, err = c.jobs.HoldKeyed(accountOf(r), key, req.URLs, req.Options)
		if errors.Is(err, jobs.ErrKeyReused) {
			httpjson.Error(w, http.StatusConflict, "idempotency_key_reused", "this Idempotency-Key was used for a job of other URLs or options; use a new key")
			return
		}
		if err == nil && existed {
			st, serr := c.jobs.Status(id, accountOf(r), false)
			status := jobs.StatusPending
			if serr == nil {
				status = st.Status
			}
			w.Header().Set("Location", "/scrape/jobs/"+id)
			w.Header().Set("Idempotency-Key", key)
			httpjson.Write(w, http.StatusOK, map[string]any{"job_id": id, "status": status, "repeated": true})
			return
		}
		w.Header().Set("Idempotency-Key", key)
	} else {
		id, token, err = c.jobs.Hold(accountOf(r), req.URLs, req.Options)
	}
	if err != nil {
		httpjson.WriteError(w, err)
		return
	}
	usage := metering.PerURL(metering.KindJob, n)
	usage.Job, usage.Hold = id, token
	w.Header().Set("Location", "/scrape/jobs/"+id)
	w.Header().Set(UsageHeader, usage.String())
	httpjson.Write(w, http.StatusAccepted, map[string]string{"job_id": id, "status": jobs.StatusPending})
}

func (c *Cell) handleJobStatus(w http.ResponseWriter, r *http.Request) {
	full := false
	switch r.URL.Query().Get("full") {
	case "", "0", "false":
	case "1", "true":
		full = true
	default:
		httpjson.WriteError(w, scrape.BadInput("full must be 0 or 1"))
		return
	}
	st, err := c.jobs.Status(r.PathValue("id"), accountOf(r), full)
	if err != nil {
		httpjson.WriteError(w, jobError(err))
		return
	}
	httpjson.Write(w, http.StatusOK, st)
}

func (c *Cell) handleJobResults(w http.ResponseWriter, r *http.Request) {
	var after int64
	if s := r.URL.Query().Get("after"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			httpjson.WriteError(w, scrape.BadInput("after must be a non-negative integer offset"))
			return
		}
		after = n
	}
	id := r.PathValue("id")
	if _, err := c.jobs.Status(id, accountOf(r), false); err != nil {
		httpjson.WriteError(w, jobError(err))
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	if _, err := c.jobs.Results(id, accountOf(r), after, w); err != nil && r.Context().Err() == nil {
		c.cfg.Logger.Warn("job results stream ended early", "job", id, "err", err)
	}
}

// handleJobRetry holds the job's failed URLs that can be fetched and
// answers with their usage; the gate charges it, then releases the retry
// (handleJobRelease), which queues them.
func (c *Cell) handleJobRetry(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	st, err := c.jobs.Status(id, accountOf(r), true)
	if err != nil {
		httpjson.WriteError(w, jobError(err))
		return
	}
	var failed []string
	for _, u := range st.URLs {
		if u.State == "error" {
			failed = append(failed, u.URL)
		}
	}
	n, token, err := c.jobs.HoldRetry(id, accountOf(r), c.fetchableFunc(r.Context(), failed))
	if err != nil {
		httpjson.WriteError(w, jobError(err))
		return
	}
	status := st.Status
	if n > 0 {
		usage := metering.PerURL(metering.KindJob, n)
		if v2ChargedLater(st.Shape) {
			usage.Count = metering.Count(0) // each page is charged as it is produced
		}
		usage.Job, usage.Hold = id, token
		w.Header().Set(UsageHeader, usage.String())
		status = jobs.StatusRunning
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"job_id": id, "status": status, "retried": n})
}

// handleJobRelease starts what the gate charged: the held job or retry
// whose token is in metering.HoldHeader. Only the gate knows a token (it
// removes the usage report that carries it), so no client can start a job
// it has not paid for.
//
// With ?drop=1 the gate says it could not charge it: the hold ends at
// once, nothing of it started.
func (c *Cell) handleJobRelease(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if r.URL.Query().Get("drop") == "1" {
		if err := c.jobs.Drop(id, accountOf(r), r.Header.Get(metering.HoldHeader)); err != nil {
			httpjson.WriteError(w, jobError(err))
			return
		}
		httpjson.Write(w, http.StatusOK, map[string]any{"job_id": id, "dropped": true})
		return
	}
	charged := int64(-1) // the gate did not say
	if mc, ok := milliCredits(r.Header.Get(metering.ChargedHeader)); ok {
		charged = mc
	}
	if err := c.jobs.ReleaseCharged(id, accountOf(r), r.Header.Get(metering.HoldHeader), charged); err != nil {
		httpjson.WriteError(w, jobError(err))
		return
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"job_id": id, "released": true})
}

// withJobID answers 404 for an {id} that is not a job id before h looks at
// anything else: such an id could not have been routed to its owner.
func withJobID(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := jobs.ParseJobID(r.PathValue("id")); !ok {
			httpjson.WriteError(w, jobError(jobs.ErrNoJob))
			return
		}
		h(w, r)
	}
}

// jobError is the answer to the jobs manager's sentinel errors.
func jobError(err error) error {
	switch {
	case errors.Is(err, jobs.ErrNoJob):
		return &httpjson.HTTPError{Status: http.StatusNotFound, Code: "not_found", Message: "no such job"}
	case errors.Is(err, jobs.ErrRetryHeld):
		return &httpjson.HTTPError{Status: http.StatusConflict, Code: "retry_pending",
			Message: "a retry of this job is already starting; repeat the call in a few seconds"}
	case errors.Is(err, jobs.ErrNoHold):
		return &httpjson.HTTPError{Status: http.StatusConflict, Code: "no_hold", Message: "no such hold, or it expired"}
	}
	return err
}

func (c *Cell) logFailure(r *http.Request, url string, err error) {
	e := httpjson.AsHTTPError(err)
	if e.Status >= 500 && e.Code != "fleet-busy" { // a busy fleet is counted in /health, not logged per request
		c.cfg.Logger.Warn("scrape failed", "url", urlpolicy.Redact(url), "status", e.Status, "err", err)
	}
}

package cell

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/temoto/robotstxt"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/firecrawl"
	"github.com/trawlhq/trawl/cell/jobs"
	"github.com/trawlhq/trawl/cell/sitemap"
	"github.com/trawlhq/trawl/internal/crawler"
	"github.com/trawlhq/trawl/internal/fcapi"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

// Firecrawl's site crawl (docs/firecrawl.md, "Crawl") is a growing job of
// the cell's jobs manager (jobs.Extra.Grow): it starts with the start URL,
// and each page it scrapes adds the links it leads to that the crawl's
// scope follows (and, on the start page, the site's sitemap URLs), in the
// write that records the page, each URL once. So a crash or restart
// loses no page and fetches none twice. It is owned by the cell its id
// names, like any job.
//
// Billing: a crawl's size is unknown when it starts and the ledger has
// no refunds, so nothing is charged upfront. Each page scraped writes a
// charge (kind crawl, its engine and cache outcome) into the cell's
// charge outbox in that same write; the gate collects the outbox (GET
// /monitor-charges), charges each page once and acknowledges with the
// credits it charged, which the crawl adds up as its creditsUsed. A page
// the gate could not charge (no credit, the spend cap) stops the crawl:
// failed, with the reason.

// v2CrawlKind marks a job's shape as a crawl's. It must be the first
// member of the shape (v2CrawlShape), so shapes are told apart by prefix.
const v2CrawlKind = "firecrawl_crawl"

var v2CrawlShapePrefix = []byte(`{"kind":"` + v2CrawlKind + `"`)

// codeRobotsBlocked is a crawl's URL robots.txt keeps it from: listed in
// the errors' robotsBlocked, never charged.
const codeRobotsBlocked = "robots_blocked"

// v2CrawlShape is what a crawl job keeps (jobs.Extra.Shape).
type v2CrawlShape struct {
	Kind      string                  `json:"kind"`
	Options   firecrawl.ScrapeOptions `json:"options"`
	KeepLinks bool                    `json:"keep_links,omitempty"`
	Scope     firecrawl.CrawlScope    `json:"scope"`
	Limit     int                     `json:"limit"`
	Delay     float64                 `json:"delay,omitempty"`
	// Webhook is the crawl's webhook with the account's secret
	// (v2Webhook), read by the webhooks' observer (cell/fchook).
	Webhook *firecrawl.Webhook `json:"webhook,omitempty"`
}

// v2CrawlHandlers are the handlers of Firecrawl's v2 crawl routes
// (docs/firecrawl.md).
func (c *Cell) v2CrawlHandlers() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{
		"POST /v2/crawl":            c.handleV2CrawlStart,
		"GET /v2/crawl/{id}":        c.withV2Crawl(c.handleV2CrawlStatus),
		"DELETE /v2/crawl/{id}":     c.withV2Crawl(c.handleV2BatchCancel),
		"GET /v2/crawl/{id}/errors": c.withV2Crawl(c.v2JobErrors),
		"GET /crawls/active":        c.handleCrawlsActive,
		"GET /jobs/queue":           c.handleJobsQueue,
	}
}

// handleJobsQueue serves GET /jobs/queue to the gate, which merges every
// live cell's answer for GET /v2/team/queue-status.
func (c *Cell) handleJobsQueue(w http.ResponseWriter, r *http.Request) {
	active, waiting, last := c.jobs.Queue(accountOf(r))
	out := map[string]any{"active": active, "waiting": waiting}
	if !last.IsZero() {
		out["last"] = last.UTC().Format(time.RFC3339Nano)
	}
	httpjson.Write(w, http.StatusOK, out)
}

func (c *Cell) withV2Crawl(h func(http.ResponseWriter, *http.Request, *jobs.Status)) http.HandlerFunc {
	return c.withV2Job(v2CrawlKind, "Crawl job not found", h)
}

// handleV2CrawlStart serves POST /v2/crawl: the crawl is recorded and
// started at once; it is charged page by page (above).
func (c *Cell) handleV2CrawlStart(w http.ResponseWriter, r *http.Request) {
	var req firecrawl.CrawlRequest
	if err := fcapi.Decode(w, r, &req); err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	plan, err := req.Compile()
	if err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	if _, err := urlpolicy.Validate(plan.Scope.Start, c.cfg.AllowPrivateNetworks); err != nil {
		firecrawl.WriteError(w, &firecrawl.Error{Status: http.StatusBadRequest, Code: firecrawl.CodeUnsupportedURL, Message: err.Error()})
		return
	}
	if opts := plan.Scrape.Options; opts.Proxy != fetch.ProxyNone || opts.NeedsBrowser() {
		if err := c.scrape.Check(opts); err != nil {
			firecrawl.WriteError(w, err)
			return
		}
	}
	hook, err := c.v2Webhook(r, req.Webhook) // cell/v2_webhooks.go
	if err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	shape, err := json.Marshal(v2CrawlShape{Kind: v2CrawlKind, Options: plan.Options, KeepLinks: plan.KeepLinks,
		Scope: plan.Scope, Limit: plan.Limit, Delay: plan.Delay, Webhook: hook})
	if err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	// A crawl's pages are fetched by any cell of a clustered region
	// (each cell reads robots.txt for itself); one with a delay between
	// pages stays on this cell, whose clock keeps the delay.
	// Every route of a crawl is answered by any cell (its credits are in
	// the log too: noteCrawlCredits), so its id names no cell.
	x := jobs.Extra{Shape: shape, Concurrency: plan.Concurrency, Grow: &jobs.Growth{Limit: plan.Limit, MaxDepth: plan.MaxDepth},
		Local: plan.Delay > 0, Placed: true}
	id, err := c.jobs.SubmitWith(accountOf(r), []string{plan.Scope.Start}, plan.Scrape.Options, x)
	if err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"success": true, "id": id, "url": v2JobURL(r, "/v2/crawl/", id)})
}

// handleV2CrawlStatus serves GET /v2/crawl/{id}: as a batch's status,
// with the credits the gate has charged for its pages so far.
func (c *Cell) handleV2CrawlStatus(w http.ResponseWriter, r *http.Request, st *jobs.Status) {
	if isWebSocket(r) {
		c.serveV2CrawlSocket(w, r, st)
		return
	}
	c.v2JobStatus(w, r, st, "/v2/crawl/", c.crawlCredits(st.JobID, accountOf(r)))
}

// handleCrawlsActive serves GET /crawls/active to the gate, which merges
// every live cell's answer for GET /v2/crawl/active: the caller's crawls
// still running on this cell.
func (c *Cell) handleCrawlsActive(w http.ResponseWriter, r *http.Request) {
	acct := accountOf(r)
	out := []firecrawl.ActiveCrawl{}
	if acct != "" {
		for _, st := range c.jobs.Running(acct, v2CrawlShapePrefix) {
			var shape v2CrawlShape
			if json.Unmarshal(st.Shape, &shape) != nil {
				continue
			}
			opts, _ := json.Marshal(shape.Options)
			out = append(out, firecrawl.ActiveCrawl{ID: st.JobID, TeamID: acct, URL: shape.Scope.Start, Options: opts})
		}
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"success": true, "crawls": out})
}

// crawlRun is what the pages of one crawl share while it runs: its shape
// decoded, its scope and scrape plan compiled, the robots.txt of its
// hosts. Rebuilt from the shape after a restart.
type crawlRun struct {
	shape v2CrawlShape
	scope *firecrawl.Scope
	plan  *firecrawl.Plan

	mu     sync.Mutex
	robots map[string]*robotstxt.RobotsData // by scheme://host
	last   time.Time                        // the last page's start (delay)
	mapped atomic.Bool
	used   atomic.Int64 // unix nanoseconds of the last page begun (sweepCrawlRuns)
}

// crawlRunIdle is how long a crawl's shared state is kept unused: a
// cell that fetched pages of another cell's crawl hears no end of it.
const crawlRunIdle = 10 * time.Minute

// sweepCrawlRuns forgets the crawls whose pages this cell has not
// fetched for crawlRunIdle; one still running is rebuilt from its shape
// at its next page (its robots.txt read again).
func (c *Cell) sweepCrawlRuns() int {
	n := 0
	cut := c.cfg.Now().Add(-crawlRunIdle).UnixNano()
	c.crawlRuns.Range(func(k, v any) bool {
		if v.(*crawlRun).used.Load() < cut {
			c.crawlRuns.Delete(k)
			n++
		}
		return true
	})
	return n
}

// maxCrawlRobots bounds the robots.txt files one crawl keeps (a crawl
// that may follow external links meets many hosts).
const maxCrawlRobots = 1000

func (c *Cell) crawlRunOf(job string, raw json.RawMessage) (*crawlRun, error) {
	if v, ok := c.crawlRuns.Load(job); ok {
		return v.(*crawlRun), nil
	}
	run := &crawlRun{robots: map[string]*robotstxt.RobotsData{}}
	if err := json.Unmarshal(raw, &run.shape); err != nil {
		return nil, fmt.Errorf("a crawl's shape: %w", err)
	}
	var err error
	if run.scope, err = run.shape.Scope.Ready(); err != nil {
		return nil, fmt.Errorf("a crawl's scope: %w", err)
	}
	if run.plan, err = run.shape.Options.Compile("scrapeOptions."); err != nil {
		return nil, v2JobError(err)
	}
	v, _ := c.crawlRuns.LoadOrStore(job, run)
	return v.(*crawlRun), nil
}

// v2CrawlPage produces one page of a crawl (jobs.Config.Shaped): robots.txt
// asked, the page scraped as POST /v2/scrape would with the crawl's
// scrape options, and the links the crawl follows from it.
func (c *Cell) v2CrawlPage(ctx context.Context, t jobs.Target, raw json.RawMessage) (jobs.Produced, error) {
	run, err := c.crawlRunOf(t.Job, raw)
	if err != nil {
		return jobs.Produced{}, err
	}
	run.used.Store(c.cfg.Now().UnixNano())
	if err := run.wait(ctx, c.cfg.Now); err != nil {
		return jobs.Produced{}, err
	}
	if !c.robotsAllow(ctx, run, t.URL) {
		return jobs.Produced{}, &httpjson.HTTPError{Status: http.StatusForbidden, Code: codeRobotsBlocked,
			Message: "the site's robots.txt does not allow trawl to fetch this URL"}
	}
	doc, usage, err := c.v2Scrape(ctx, t.URL, run.plan)
	if err == nil {
		err = c.v2Track(ctx, t.Account, t.URL, run.plan, doc)
	}
	if err != nil {
		return jobs.Produced{}, v2JobError(err)
	}
	var links []string
	if t.Depth == 0 && run.shape.Scope.Sitemap != firecrawl.SitemapSkip && run.mapped.CompareAndSwap(false, true) {
		links = c.crawlSitemaps(ctx, run)
	}
	if run.shape.Scope.Sitemap != firecrawl.SitemapOnly {
		for _, l := range doc.Links {
			if cl, ok := run.scope.Canonical(l); ok && run.scope.Follow(cl) {
				links = append(links, cl)
			}
		}
	}
	if !run.shape.KeepLinks {
		doc.Links = nil
	}
	res, err := json.Marshal(doc)
	if err != nil {
		return jobs.Produced{}, err
	}
	usage.Kind = metering.KindCrawl
	return jobs.Produced{Result: res, Links: links, Usage: &usage}, nil
}

// wait holds a page until the crawl's delay has passed since the last
// page started.
func (run *crawlRun) wait(ctx context.Context, now func() time.Time) error {
	if run.shape.Delay <= 0 {
		return nil
	}
	d := time.Duration(run.shape.Delay * float64(time.Second))
	run.mu.Lock()
	next := run.last.Add(d)
	wait := next.Sub(now())
	if wait < 0 || run.last.IsZero() {
		wait = 0
	}
	run.last = now().Add(wait)
	run.mu.Unlock()
	if wait == 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// crawlSitemaps is the start site's sitemap URLs the crawl follows, read
// once per crawl through the cell's HTTP engine (cell/sitemap, as POST
// /v2/map reads them), at most the crawl's limit. A site without a
// sitemap gives none.
func (c *Cell) crawlSitemaps(ctx context.Context, run *crawlRun) []string {
	req := sitemap.NewRequest(run.shape.Scope.Start)
	req.Sitemap, req.Limit = sitemap.SitemapOnly, min(run.shape.Limit, sitemap.MaxLimit)
	req.IncludeSubdomains, req.IgnoreQueryParameters = run.shape.Scope.Subdomains, run.shape.Scope.IgnoreQuery
	req.AnyPath = run.shape.Scope.EntireDomain
	var docs atomic.Int64
	res, err := sitemap.Map(ctx, c.mapFetcher(&docs), req)
	if err != nil {
		c.cfg.Logger.Info("crawl: no sitemap URLs", "url", urlpolicy.Redact(run.shape.Scope.Start), "err", err)
		return nil
	}
	var out []string
	for _, l := range res.Links {
		if cl, ok := run.scope.Canonical(l.URL); ok && run.scope.Follow(cl) {
			out = append(out, cl)
		}
	}
	return out
}

// robotsAllow reports whether the robots.txt of u's host lets the agent
// trawl (internal/crawler.Agent) fetch u. The file is read once per host
// and crawl; one that cannot be read allows everything, a 5xx answer
// nothing (robotstxt's reading of the standard).
func (c *Cell) robotsAllow(ctx context.Context, run *crawlRun, u string) bool {
	pu, err := url.Parse(u)
	if err != nil {
		return false
	}
	root := pu.Scheme + "://" + pu.Host
	run.mu.Lock()
	rd, ok := run.robots[root]
	run.mu.Unlock()
	if !ok {
		resp, err := c.engine.Fetch(ctx, &fetch.Request{URL: root + "/robots.txt"})
		if err == nil {
			rd, err = robotstxt.FromStatusAndBytes(resp.Status, resp.Body)
		}
		if err != nil {
			rd = nil // unreadable: allowed
		}
		run.mu.Lock()
		if len(run.robots) >= maxCrawlRobots {
			clear(run.robots)
		}
		run.robots[root] = rd
		run.mu.Unlock()
	}
	if rd == nil {
		return true
	}
	p := pu.EscapedPath()
	if pu.RawQuery != "" {
		p += "?" + pu.RawQuery
	}
	return rd.TestAgent(p, crawler.Agent)
}

// The crawls' page charges (above), kept in the cell's store until the
// gate acknowledges them.
type crawlCharge struct {
	ID      string         `json:"id"`
	Account string         `json:"account"`
	Crawl   string         `json:"crawl"`
	URL     string         `json:"url"`
	At      time.Time      `json:"at"`
	Usage   metering.Usage `json:"usage"`
}

const crawlChargeID = "fcc-"

func crawlChargeKey(id string) []byte { return []byte(store.PrefixFirecrawlCharge + id) }

func crawlCreditsKey(job string) []byte { return []byte(store.PrefixFirecrawlCredits + job) }

// crawlEvents is the crawls' observer of the jobs manager: each page
// scraped writes its charge with the page; the end of a crawl drops what
// its pages shared; every event wakes the crawl's WebSocket watchers.
type crawlEvents struct{ c *Cell }

func (o crawlEvents) Stage(b *store.Batch, e *jobs.Event) error {
	if !bytes.HasPrefix(e.Shape, v2CrawlShapePrefix) || e.Kind != jobs.EventPage || e.Err != nil || e.Usage == nil {
		return nil
	}
	ch := crawlCharge{ID: crawlChargeID + e.Job + "-" + strconv.FormatUint(e.Seq, 10), Account: e.Account, Crawl: e.Job,
		URL: e.URL, At: e.At, Usage: *e.Usage}
	raw, err := json.Marshal(ch)
	if err != nil {
		return err
	}
	b.Set(crawlChargeKey(ch.ID), raw)
	return nil
}

func (o crawlEvents) Committed(e *jobs.Event) {
	o.c.crawlWatch.notify(e.Job) // a batch's watchers too
	if !bytes.HasPrefix(e.Shape, v2CrawlShapePrefix) {
		return
	}
	switch e.Kind {
	case jobs.EventCompleted, jobs.EventCancelled, jobs.EventFailed:
		o.c.crawlRuns.Delete(e.Job)
	}
}

// crawlCharges lists the crawls' page charges waiting for the gate.
func (c *Cell) crawlCharges(limit int) ([]crawlCharge, error) {
	out := []crawlCharge{}
	err := c.store.Scan([]byte(store.PrefixFirecrawlCharge), nil, func(_, v []byte) (bool, error) {
		var ch crawlCharge
		if err := json.Unmarshal(v, &ch); err != nil {
			return false, err
		}
		out = append(out, ch)
		return len(out) < limit, nil
	})
	return out, err
}

// ackCrawlCharges forgets the crawl charges the gate has collected: those
// it charged add their credits to their crawl's, those it refused (no
// credit) stop their crawl.
func (c *Cell) ackCrawlCharges(ids []string, credits map[string]string, refused []string) (int, error) {
	b := c.store.NewBatch()
	defer b.Discard()
	n := 0
	sums := map[string]pageCharges{}
	for _, id := range ids {
		if !strings.HasPrefix(id, crawlChargeID) {
			continue
		}
		if _, err := c.store.Get(crawlChargeKey(id)); err != nil {
			continue // acknowledged before
		}
		b.Delete(crawlChargeKey(id))
		n++
		sum := sums[crawlOfCharge(id)]
		sum.Acked++
		if mc, ok := milliCredits(credits[id]); ok {
			sum.MC += mc
		}
		sums[crawlOfCharge(id)] = sum
	}
	c.crawlCreditsMu.Lock()
	defer c.crawlCreditsMu.Unlock()
	for job, sum := range sums {
		old, _ := c.readCredits(job)
		b.Set(crawlCreditsKey(job), pageCharges{MC: old.MC + sum.MC, Acked: old.Acked + sum.Acked}.encode())
	}
	if n > 0 {
		if err := b.Commit(store.Sync); err != nil {
			return 0, err
		}
	}
	c.noteCrawlCredits(slices.Collect(maps.Keys(sums)))
	for _, id := range refused {
		if !strings.HasPrefix(id, crawlChargeID) {
			continue
		}
		job := crawlOfCharge(id)
		if err := c.jobs.Stop(job, "the account has no credit left for more pages (402); the pages scraped so far are kept"); err != nil && err != jobs.ErrNoJob {
			c.cfg.Logger.Warn("crawl: stop for no credit", "crawl", job, "err", err)
		}
	}
	return n, nil
}

func crawlOfCharge(id string) string {
	id = strings.TrimPrefix(id, crawlChargeID)
	if i := strings.LastIndexByte(id, '-'); i > 0 {
		return id[:i]
	}
	return id
}

// milliCredits reads a credit amount ("1.500") as thousandths.
func milliCredits(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	whole, frac, _ := strings.Cut(s, ".")
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || len(frac) > 3 {
		return 0, false
	}
	frac += strings.Repeat("0", 3-len(frac))
	f, err := strconv.ParseInt(frac, 10, 64)
	if err != nil {
		return 0, false
	}
	return w*1000 + f, true
}

// pageCharges is what the gate acknowledged of a job's page charges
// (a crawl's or an extraction's): the credits it charged, in thousandths,
// and how many charges it acknowledged, charged or refused. Stored under
// crawlCreditsKey and noted in the region's log as "<mc> <acked>" (a
// figure of before the count is "<mc>").
type pageCharges struct {
	MC    int64
	Acked int64
}

func (p pageCharges) encode() []byte {
	return fmt.Appendf(nil, "%d %d", p.MC, p.Acked)
}

func parsePageCharges(raw []byte) (pageCharges, error) {
	mc, acked, _ := strings.Cut(string(raw), " ")
	var p pageCharges
	var err error
	if p.MC, err = strconv.ParseInt(mc, 10, 64); err != nil {
		return pageCharges{}, fmt.Errorf("page charges %q: %w", raw, err)
	}
	if acked != "" {
		if p.Acked, err = strconv.ParseInt(acked, 10, 64); err != nil {
			return pageCharges{}, fmt.Errorf("page charges %q: %w", raw, err)
		}
	}
	return p, nil
}

func (c *Cell) readCredits(job string) (pageCharges, error) {
	raw, err := c.store.Get(crawlCreditsKey(job))
	if err != nil {
		return pageCharges{}, err
	}
	return parsePageCharges(raw)
}

// jobCharges is what the gate acknowledged of job's page charges: the
// figure in the owner's store, or on another cell the one the owner
// noted in the region's log (zero before any). (An owner back on an
// empty disk sums them again as its restored pages' charges, each
// charged once by the gate, are acknowledged with their first price.)
func (c *Cell) jobCharges(job, account string) pageCharges {
	p, err := c.readCredits(job)
	if errors.Is(err, store.ErrNotFound) && !c.jobs.Exists(job) {
		if raw, err := c.jobs.Note(job, account, noteCredits); err == nil && raw != nil {
			p, _ = parsePageCharges(raw)
		}
	}
	return p
}

// crawlCredits is the credits the gate has charged for job's pages.
func (c *Cell) crawlCredits(job, account string) float64 {
	return float64(c.jobCharges(job, account).MC) / 1000
}

// noteCredits names a crawl's credits in the log (jobs.Manager.PutNote).
const noteCredits = "credits"

// noteCrawlCredits writes the credits of crawls to the log, as the store
// has them now; c.crawlCreditsMu is held, so a later figure (credits
// only grow) is never overwritten by an earlier one. A note not written
// is written again by the next sweep (renoteCrawlCredits), or with the
// job's next charge: an extraction's last note is what tells another
// cell it is complete.
func (c *Cell) noteCrawlCredits(jobs []string) {
	for _, job := range jobs {
		p, err := c.readCredits(job)
		if err != nil {
			delete(c.unnoted, job)
			continue
		}
		if err := c.jobs.PutNote(job, noteCredits, p.encode()); err != nil {
			c.cfg.Logger.Warn("crawl: credits not written to the region's log", "crawl", job, "err", err)
			if c.unnoted == nil {
				c.unnoted = map[string]bool{}
			}
			c.unnoted[job] = true
			continue
		}
		delete(c.unnoted, job)
	}
}

// renoteCrawlCredits writes again the notes noteCrawlCredits could not.
func (c *Cell) renoteCrawlCredits() {
	c.crawlCreditsMu.Lock()
	defer c.crawlCreditsMu.Unlock()
	if len(c.unnoted) > 0 {
		c.noteCrawlCredits(slices.Collect(maps.Keys(c.unnoted)))
	}
}

// sweepCrawlCredits forgets the credits of crawls the jobs manager swept.
func (c *Cell) sweepCrawlCredits() error {
	var gone [][]byte
	err := c.store.Scan([]byte(store.PrefixFirecrawlCredits), nil, func(k, _ []byte) (bool, error) {
		if !c.jobs.Exists(string(k[len(store.PrefixFirecrawlCredits):])) {
			gone = append(gone, bytes.Clone(k))
		}
		return true, nil
	})
	for _, k := range gone {
		if err := c.store.Delete(k, store.NoSync); err != nil {
			return err
		}
	}
	return err
}

package cell

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/trawlhq/trawl/cell/extract"
	"github.com/trawlhq/trawl/cell/monitor"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/monid"
	"github.com/trawlhq/trawl/internal/monstore"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/internal/store"
)

// startMonitors opens the monitor service and starts its scheduler.
func (c *Cell) startMonitors(st *store.Store) error {
	mc := c.cfg.Monitor
	mc.Region, mc.Cell = c.cfg.Region, c.cfg.Name
	mc.AllowPrivateNetworks = c.cfg.AllowPrivateNetworks
	mc.CheckHost = c.engine.CheckHost
	mc.Fetcher = monitor.FetcherFunc(c.fetchMonitored)
	mc.Now = c.cfg.Now
	if mc.Extractor == nil {
		// A monitor's schema is filled as /extract fills one (the
		// operator's model when configured).
		mc.Extractor = monitorExtractor{&c.extractor}
	}
	if mc.Logger == nil {
		mc.Logger = c.cfg.Logger
	}
	if m := c.cfg.Model; m != nil && m.Client != nil {
		// The operator's model (the client /extract uses) splits the
		// watch sentence and judges facts; the rules stay the fallback.
		model := &monitor.Model{Client: m.Client}
		if mc.Split == nil {
			mc.Split = model.Split
		}
		if mc.Judge == nil {
			mc.Judge = model.Judge
		}
	}
	svc, err := monitor.New(st, mc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { svc.Run(ctx); close(done) }()
	c.monitors = svc
	c.stopMonitors = func() { cancel(); <-done; svc.Close() }
	return nil
}

// fetchMonitored fetches a watched page live (fetchLive: a check must see
// the page as it is now) and keeps its main content as Markdown.
func (c *Cell) fetchMonitored(ctx context.Context, raw, _ string) (*monitor.Page, error) {
	lr, err := c.fetchLive(ctx, raw, "", monitor.ErrBlocked)
	if err != nil {
		return nil, err
	}
	if lr.Status >= 400 {
		return nil, errors.New("the site answered HTTP " + http.StatusText(lr.Status))
	}
	final, err := url.Parse(lr.URL)
	if err != nil {
		final, _ = url.Parse(raw) // checked by fetchLive
	}
	md, err := monitor.MainContent(lr.Body, final)
	if err != nil {
		return nil, err
	}
	return &monitor.Page{Markdown: md, Engine: lr.Engine, Level: lr.Level}, nil
}

// Monitors is the cell's monitor service (tests drive its clock).
func (c *Cell) Monitors() *monitor.Service { return c.monitors }

func (c *Cell) handleMonitorCreate(w http.ResponseWriter, r *http.Request) {
	var req monitor.Request
	if err := httpjson.Decode(w, r, routes.MonitorBody, &req); err != nil {
		httpjson.WriteError(w, err)
		return
	}
	v, err := c.monitors.Create(r.Context(), accountOf(r), &req)
	if err != nil {
		httpjson.WriteError(w, monitorError(err))
		return
	}
	status := http.StatusOK
	if v.Created {
		status = http.StatusCreated
		w.Header().Set("Location", "/monitors/"+v.ID)
	}
	httpjson.Write(w, status, v)
}

func (c *Cell) handleMonitorList(w http.ResponseWriter, r *http.Request) {
	l, err := c.monitors.List(r.Context(), accountOf(r))
	if err != nil {
		httpjson.WriteError(w, monitorError(err))
		return
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"monitors": l})
}

func (c *Cell) handleMonitorGet(w http.ResponseWriter, r *http.Request) {
	v, err := c.monitors.Get(r.Context(), accountOf(r), r.PathValue("id"))
	if err != nil {
		httpjson.WriteError(w, monitorError(err))
		return
	}
	httpjson.Write(w, http.StatusOK, v)
}

func (c *Cell) handleMonitorPatch(w http.ResponseWriter, r *http.Request) {
	// An id that is not ours is 404 before the body is looked at.
	if _, err := c.monitors.Get(r.Context(), accountOf(r), r.PathValue("id")); err != nil {
		httpjson.WriteError(w, monitorError(err))
		return
	}
	var req monitor.Request
	if err := httpjson.Decode(w, r, routes.MonitorBody, &req); err != nil {
		httpjson.WriteError(w, err)
		return
	}
	v, err := c.monitors.Patch(r.Context(), accountOf(r), r.PathValue("id"), &req)
	if err != nil {
		httpjson.WriteError(w, monitorError(err))
		return
	}
	httpjson.Write(w, http.StatusOK, v)
}

func (c *Cell) handleMonitorDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := c.monitors.Delete(r.Context(), accountOf(r), id); err != nil {
		httpjson.WriteError(w, monitorError(err))
		return
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"id": id, "deleted": true})
}

func (c *Cell) handleMonitorEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, err := monitor.ParseSince(q.Get("since"))
	if err != nil {
		httpjson.WriteError(w, monitorError(err))
		return
	}
	limit, err := monitor.ParseLimit(q.Get("limit"))
	if err != nil {
		httpjson.WriteError(w, monitorError(err))
		return
	}
	evs, err := c.monitors.Events(r.Context(), accountOf(r), r.PathValue("id"), since, limit)
	if err != nil {
		httpjson.WriteError(w, monitorError(err))
		return
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"events": evs})
}

func (c *Cell) handleMonitorVersion(w http.ResponseWriter, r *http.Request) {
	md, err := c.monitors.Version(r.Context(), accountOf(r), r.PathValue("id"), r.PathValue("version"))
	if err != nil {
		httpjson.WriteError(w, monitorError(err))
		return
	}
	w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(md))
}

// notTheGate answers a customer's request that reaches the charge routes.
var notTheGate = &httpjson.HTTPError{Status: http.StatusForbidden, Code: "forbidden", Message: "only the region's gate collects monitor charges"}

// handleMonitorCharges lists the background charges for the gate. Only
// the gate's own request, signed without an account, gets them; a
// customer's request that reaches this path is refused.
func (c *Cell) handleMonitorCharges(w http.ResponseWriter, r *http.Request) {
	if accountOf(r) != "" {
		httpjson.WriteError(w, notTheGate)
		return
	}
	cs, err := c.monitors.Charges(r.Context(), 500)
	if err != nil {
		httpjson.WriteError(w, monitorError(err))
		return
	}
	all := make([]any, 0, len(cs))
	for _, c := range cs {
		all = append(all, c)
	}
	// Finished recipe jobs' charges ride along (cell/recipe, jobs.go).
	rcs, err := c.recipes.Charges(500)
	if err != nil {
		httpjson.WriteError(w, err)
		return
	}
	for _, c := range rcs {
		all = append(all, c)
	}
	// And the crawls' pages (cell/v2_crawl.go).
	ccs, err := c.crawlCharges(500)
	if err != nil {
		httpjson.WriteError(w, err)
		return
	}
	for _, c := range ccs {
		all = append(all, c)
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"charges": all})
}

func (c *Cell) handleMonitorChargesAck(w http.ResponseWriter, r *http.Request) {
	if accountOf(r) != "" {
		httpjson.WriteError(w, notTheGate)
		return
	}
	var req struct {
		IDs []string `json:"ids"`
		// Credits are what the gate charged for each id it charged
		// ("1.000"), Refused the ids it could not charge for want of
		// credit: a crawl adds up the one and stops on the other.
		Credits map[string]string `json:"credits"`
		Refused []string          `json:"refused"`
	}
	if err := httpjson.Decode(w, r, 1<<20, &req); err != nil {
		httpjson.WriteError(w, err)
		return
	}
	n, err := c.monitors.AckCharges(r.Context(), req.IDs)
	if err != nil {
		httpjson.WriteError(w, monitorError(err))
		return
	}
	k, err := c.recipes.AckCharges(req.IDs)
	if err != nil {
		httpjson.WriteError(w, err)
		return
	}
	n += k
	if k, err = c.ackCrawlCharges(req.IDs, req.Credits, req.Refused); err != nil {
		httpjson.WriteError(w, err)
		return
	}
	n += k
	httpjson.Write(w, http.StatusOK, map[string]any{"acked": n})
}

// withMonitorID answers 404 for an {id} that is not a monitor id.
func withMonitorID(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := monid.Parse(r.PathValue("id")); !ok {
			httpjson.WriteError(w, monitor.ErrNoMonitor)
			return
		}
		h(w, r)
	}
}

// monitorError is err as answered: the monitor service's own refusals
// are *httpjson.HTTPError already; an unreachable monitor store is a 503.
func monitorError(err error) error {
	if errors.Is(err, monstore.ErrNoGate) {
		return &httpjson.HTTPError{Status: http.StatusServiceUnavailable, Code: "store_unavailable",
			Message: "the region's monitor store is not reachable right now; nothing was changed, repeat the request in a few seconds",
			Err:     err, Private: true, RetryAfter: 5 * time.Second}
	}
	return err
}

// monitorExtractor fills a monitor's `custom` from a version's Markdown
// with the extract service's extractor. The schema is a JSON Schema, or a
// sample of the structure ({"price": "number"}) as /extract's example.
type monitorExtractor struct{ e *extract.Extractor }

func (m monitorExtractor) Extract(ctx context.Context, md string, schema json.RawMessage) (json.RawMessage, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(schema, &probe); err != nil {
		return nil, err
	}
	raw := schema
	if probe["type"] == nil && probe["properties"] == nil {
		var err error
		if raw, err = extract.SchemaFromExample(schema); err != nil {
			return nil, err
		}
	}
	sch, err := extract.CompileSchema(raw)
	if err != nil {
		return nil, err
	}
	res, err := m.e.Extract(ctx, extract.Page{HTML: extract.ToHTML(md, extract.Markdown), Markdown: md}, &extract.Plan{Schema: sch, Inferred: "schema"})
	if err != nil {
		return nil, err
	}
	return json.Marshal(res.Data)
}

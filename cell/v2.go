package cell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"strconv"
	"strings"

	"github.com/trawlhq/trawl/cell/extract"
	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/fetch/browser"
	"github.com/trawlhq/trawl/cell/firecrawl"
	"github.com/trawlhq/trawl/cell/jobs"
	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/internal/fcapi"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

// The Firecrawl v2 routes (docs/firecrawl.md): Firecrawl's shapes over the
// cell's own services. cell/firecrawl decodes and shapes; these handlers
// run the scrape service, the extractor and the site mapper.

// v2Answer is Firecrawl's success envelope of a single document.
type v2Answer struct {
	Success bool                `json:"success"`
	Data    *firecrawl.Document `json:"data"`
}

// v2ScrapeHandlers are the scrape routes' handlers.
func (c *Cell) v2ScrapeHandlers() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{"POST /v2/scrape": c.handleV2Scrape}
}

// handleV2Scrape serves POST /v2/scrape.
func (c *Cell) handleV2Scrape(w http.ResponseWriter, r *http.Request) {
	var req firecrawl.ScrapeRequest
	if err := fcapi.Decode(w, r, &req); err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	if strings.TrimSpace(req.URL) == "" {
		firecrawl.WriteError(w, firecrawl.BadRequest("url", "url is required"))
		return
	}
	plan, err := req.Compile("")
	if err == nil && plan.Summary && c.extractor.Model == nil {
		// Refused before the page is fetched for nothing.
		err = firecrawl.Unsupported("formats.summary", "the summary format needs the operator's model (trawl cell --llm-provider)")
	}
	if err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	doc, usage, err := c.v2Scrape(r.Context(), req.URL, plan)
	if err == nil {
		err = c.v2Track(r.Context(), accountOf(r), req.URL, plan, doc) // cell/v2_change.go
	}
	if r.Context().Err() != nil {
		return // the client is gone
	}
	if err != nil {
		c.logFailure(r, req.URL, v2JobError(err)) // logged with its own status
		firecrawl.WriteError(w, err)
		return
	}
	w.Header().Set(UsageHeader, usage.String())
	httpjson.Write(w, http.StatusOK, v2Answer{Success: true, Data: doc})
}

// v2Scrape is one page in Firecrawl's shape, and what it cost: from the
// archive when a copy there is young enough (plan.MaxAge), else through
// the scrape service (its cache, the engine ladder), then the json and
// summary formats through the extractor.
func (c *Cell) v2Scrape(ctx context.Context, rawURL string, plan *firecrawl.Plan) (*firecrawl.Document, metering.Usage, error) {
	u, err := urlpolicy.Validate(rawURL, c.cfg.AllowPrivateNetworks)
	if err != nil {
		return nil, metering.Usage{}, &firecrawl.Error{Status: http.StatusBadRequest, Code: firecrawl.CodeUnsupportedURL, Message: err.Error()}
	}
	target := u.String()
	pg, usage, err := c.v2Page(ctx, rawURL, target, plan)
	if err != nil {
		return nil, usage, err
	}
	doc, err := firecrawl.Shape(plan, pg)
	if err != nil {
		return nil, usage, err
	}
	if plan.JSON != nil || plan.Summary {
		if err := c.v2Extract(ctx, plan, pg, doc, &usage); err != nil {
			return nil, usage, err
		}
	}
	return doc, usage, nil
}

// v2Page fetches or finds the page.
func (c *Cell) v2Page(ctx context.Context, rawURL, target string, plan *firecrawl.Plan) (*firecrawl.Page, metering.Usage, error) {
	if plan.MinAge == 0 && !plan.Reprocess() && plan.JSON == nil && !plan.Options.PDF.Skip {
		// A fresh copy in the scrape cache: its result as it is (free,
		// and no conversion).
		if out, err := c.scrape.Cached(rawURL, plan.Options); err == nil {
			if res, err := out.Result(); err == nil && c.cfg.Now().Sub(res.FetchedAt) <= plan.MaxAge {
				return &firecrawl.Page{Requested: rawURL, Result: res, Cached: true, CachedAt: res.FetchedAt}, out.Usage, nil
			}
		}
	}
	if pg := c.v2Archived(rawURL, target, plan); pg != nil {
		return pg, metering.Usage{Engine: metering.EngineCache, Cache: metering.CacheArchive}, nil
	}
	if plan.MinAge > 0 {
		return nil, metering.Usage{}, &firecrawl.Error{Status: http.StatusNotFound, Code: firecrawl.CodeNotFound,
			Message: "no copy of this page at least minAge old is in trawl's archive"}
	}
	opts := plan.Options
	if opts.Proxy != fetch.ProxyNone || opts.NeedsBrowser() {
		if err := c.scrape.Check(opts); err != nil {
			return nil, metering.Usage{}, err
		}
	}
	sctx := ctx
	if plan.Timeout > 0 {
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeout(ctx, plan.Timeout)
		defer cancel()
	}
	out, err := c.scrape.Scrape(sctx, rawURL, opts)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, metering.Usage{}, &firecrawl.Error{Status: http.StatusRequestTimeout, Code: firecrawl.CodeScrapeTimeout,
				Message: "the page did not load within timeout (" + plan.Timeout.String() + ")"}
		}
		if ae, ok := errors.AsType[*browser.ActionError](err); ok {
			return nil, metering.Usage{}, v2ActionError(ae)
		}
		return nil, metering.Usage{}, err
	}
	res, err := out.Result()
	if err != nil {
		return nil, metering.Usage{}, err
	}
	pg := &firecrawl.Page{Requested: rawURL, Result: res, Raw: out.Fetched(), Proxy: out.Usage.Proxy}
	if out.Usage.Cache == metering.CacheHit {
		pg.Cached, pg.CachedAt = true, res.FetchedAt
	}
	if pg.Raw == nil && (plan.Reprocess() || plan.JSON != nil || plan.Options.PDF.Skip) {
		// A cache hit: the page is in the archive.
		if ap, err := c.scrape.Archived(target); err == nil {
			pg.Raw = ap
		}
	}
	return pg, out.Usage, nil
}

// v2ActionError is a failed page action as Firecrawl answers it: a 500
// SCRAPE_ACTION_ERROR, its message Firecrawl's sentence with the action
// and the browser's reason, its details the action's path.
func v2ActionError(ae *browser.ActionError) *firecrawl.Error {
	path := []string{"actions", strconv.Itoa(ae.Index)}
	reason := fmt.Sprintf("actions.%d (%s): %v", ae.Index, ae.Type, ae.Err)
	return &firecrawl.Error{Status: http.StatusInternalServerError, Code: firecrawl.CodeScrapeAction,
		Message: "Action(s) failed to complete. Error code: " + reason,
		Details: []map[string]any{{"path": path, "message": reason}}}
}

// v2Archived is the archived copy of target when plan may be served from
// it: young enough (and old enough for minAge), fetched without a
// caller's script, not an error page, and nothing asked that only a fresh
// fetch gives (a screenshot, the browser, a proxy).
func (c *Cell) v2Archived(rawURL, target string, plan *firecrawl.Plan) *firecrawl.Page {
	o := plan.Options
	if plan.MaxAge <= 0 || o.NoStore || o.Screenshot || o.NeedsBrowser() || o.Proxy != fetch.ProxyNone {
		return nil
	}
	ap, err := c.scrape.Archived(target)
	if err != nil || ap.Private || ap.Status >= 400 {
		return nil
	}
	age := c.cfg.Now().Sub(ap.FetchedAt)
	if age > plan.MaxAge || age < plan.MinAge {
		return nil
	}
	if !strings.Contains(ap.ContentType, "html") && !strings.HasPrefix(ap.ContentType, "text/") {
		return nil
	}
	res := &scrape.Result{URL: rawURL, FinalURL: ap.URL, Status: ap.Status, ContentType: ap.ContentType, FetchedAt: ap.FetchedAt}
	return &firecrawl.Page{Requested: rawURL, Result: res, Raw: ap, Cached: true, CachedAt: ap.FetchedAt, FromArchive: true}
}

// summarySchema is what the summary format asks the model for.
const summarySchema = `{"type":"object","properties":{"summary":{"type":"string","description":"a summary of the page in a few sentences"}},"required":["summary"]}`

// v2Extract fills the json and summary formats with the extractor (the
// deterministic one, or the operator's model), adding their steps to
// usage as /extract does.
func (c *Cell) v2Extract(ctx context.Context, plan *firecrawl.Plan, pg *firecrawl.Page, doc *firecrawl.Document, usage *metering.Usage) error {
	page := extract.Page{URL: pg.Result.FinalURL, Fetched: pg.Result.FetchedAt}
	switch {
	case pg.IsPDF():
		// The PDF's text, not its bytes.
		if doc.HTML != nil {
			page.HTML = *doc.HTML
		} else if pg.Result.HTML != nil {
			page.HTML = *pg.Result.HTML
		} else if pg.Result.Markdown != nil {
			page.HTML = "<pre>" + html.EscapeString(*pg.Result.Markdown) + "</pre>"
		}
	case pg.Raw != nil:
		page.HTML = string(pg.Raw.Body)
	case pg.Result.HTML != nil:
		page.HTML = *pg.Result.HTML
	}
	withModel := c.extractor.Model != nil
	if withModel && doc.Markdown != nil {
		page.Markdown = *doc.Markdown
	} else if withModel && pg.Result.Markdown != nil {
		page.Markdown = *pg.Result.Markdown
	}
	run := func(field string, req extract.Request) (any, error) {
		req.Content = nil
		req.URL = pg.Result.FinalURL
		xp, err := req.CheckFor(&c.extractor)
		if err != nil {
			return nil, firecrawl.BadRequest(field, httpjson.AsHTTPError(err).Message)
		}
		res, err := c.extractor.Extract(ctx, page, xp)
		if err != nil {
			return nil, httpjson.Errorf(http.StatusBadGateway, "model_failed", "the extraction model did not answer usably: %v", err)
		}
		for _, s := range res.Steps {
			usage.InTokens += s.InTokens
			usage.OutTokens += s.OutTokens
			usage.Lines = append(usage.Lines, metering.Line{Call: metering.KindExtract, Step: s.Name, InTokens: s.InTokens, OutTokens: s.OutTokens})
		}
		return xp.Schema.Ordered(res.Data), nil
	}
	if plan.JSON != nil {
		v, err := run("formats.json", extract.Request{Schema: plan.JSON.Schema, Instruction: plan.JSON.Prompt})
		if err != nil {
			return err
		}
		doc.JSON = v
	}
	if plan.Summary {
		if !withModel {
			return firecrawl.Unsupported("formats.summary", "the summary format needs the operator's model (trawl cell --llm-provider)")
		}
		v, err := run("formats.summary", extract.Request{Schema: []byte(summarySchema), Instruction: "Summarize the page in a few sentences."})
		if err != nil {
			return err
		}
		if m, ok := v.(map[string]any); ok {
			if s, ok := m["summary"].(string); ok {
				doc.Summary = &s
			}
		}
	}
	// Priced as an extraction of the page: the scrape is its first line.
	usage.Lines = append([]metering.Line{{Call: metering.KindScrape, URL: pg.Result.FinalURL, Engine: usage.Engine,
		Level: usage.EffectiveLevel(), Cache: usage.Cache, Count: 1}}, usage.Lines...)
	usage.Kind = metering.KindExtract
	usage.Boxes = append(usage.Boxes, usage.Engine, boxExtract)
	if withModel {
		usage.Boxes = append(usage.Boxes, boxModel)
	}
	return nil
}

// v2Shaped produces one URL of a job with a shape (jobs.Config.Shaped):
// the shape's kind says which of Firecrawl's routes the job serves.
func (c *Cell) v2Shaped(ctx context.Context, t jobs.Target, raw json.RawMessage) (jobs.Produced, error) {
	var k struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &k); err != nil {
		return jobs.Produced{}, fmt.Errorf("a job shape that is not JSON: %w", err)
	}
	switch k.Kind {
	case v2BatchKind:
		return c.v2JobScrape(ctx, t, raw)
	case v2CrawlKind:
		return c.v2CrawlPage(ctx, t, raw)
	case v2ExtractKind:
		return c.v2JobExtract(ctx, t, raw)
	}
	return jobs.Produced{}, fmt.Errorf("a job shape of an unknown kind %q", k.Kind)
}

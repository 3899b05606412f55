package cell

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/trawlhq/trawl/cell/content"
	"github.com/trawlhq/trawl/cell/extract"
	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

// Engine of an extraction from pasted content: nothing was fetched, the
// call bills the base price at the light level (plus tokens).
const engineContent = "content"

// Boxes of an extraction (docs/spec/hosted-api.md §2.8).
const (
	boxExtract = "extract"
	boxModel   = "llm"
)

// extractAnswer is the body of a POST /extract answer (the gate puts the
// usage object first).
type extractAnswer struct {
	OK   bool   `json:"ok"`
	URL  string `json:"url"`
	Data any    `json:"data"`
	MS   int64  `json:"ms"`
}

// handleExtract serves POST /extract (docs/spec/hosted-api.md §2.4a):
// the page from url (through the scrape service: cache, engine ladder,
// archive) or the pasted content, filled into the schema by the
// deterministic extractor, or by the operator's model when one is
// configured. A refused request and a failed fetch or model call carry
// no usage: nothing is charged.
func (c *Cell) handleExtract(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req extract.Request
	if err := httpjson.Decode(w, r, routes.ExtractBody, &req); err != nil {
		httpjson.WriteError(w, err)
		return
	}
	plan, err := req.CheckFor(&c.extractor)
	if err != nil {
		httpjson.WriteError(w, err)
		return
	}
	var pg extract.Page
	usage := metering.Usage{Engine: engineContent, Cache: metering.CacheMiss, Boxes: []string{boxExtract}}
	withModel := c.extractor.Model != nil
	if req.URL != "" {
		opts := scrape.Options{}
		if err := opts.Normalize(); err != nil {
			httpjson.WriteError(w, err)
			return
		}
		out, err := c.scrape.Scrape(r.Context(), req.URL, opts)
		if r.Context().Err() != nil {
			return
		}
		if err != nil {
			c.logFailure(r, req.URL, err)
			httpjson.WriteError(w, err)
			return
		}
		pg, err = c.extractPage(req.URL, out, withModel)
		if err != nil {
			httpjson.WriteError(w, err)
			return
		}
		usage = out.Usage
		usage.Boxes = []string{out.Usage.Engine, boxExtract}
		usage.Lines = []metering.Line{{Call: metering.KindScrape, URL: pg.URL, Engine: out.Usage.Engine,
			Level: out.Usage.EffectiveLevel(), Cache: out.Usage.Cache, Count: 1}}
	} else {
		text := *req.Content
		kind := extract.Detect(text)
		pg.HTML = extract.ToHTML(text, kind)
		if withModel {
			if kind == extract.HTML {
				if doc, err := content.Process([]byte(text), nil, content.Options{}); err == nil {
					pg.Markdown = doc.Markdown
				}
			} else {
				pg.Markdown = text
			}
		}
	}
	res, err := c.extractor.Extract(r.Context(), pg, plan)
	if r.Context().Err() != nil {
		return
	}
	if err != nil {
		c.cfg.Logger.Warn("extract: model failed", "err", err)
		httpjson.Error(w, http.StatusBadGateway, "model_failed", "the extraction model did not answer usably; nothing was charged: "+err.Error())
		return
	}
	if len(res.Steps) > 0 {
		usage.Boxes = append(usage.Boxes, boxModel)
		for _, s := range res.Steps {
			usage.InTokens += s.InTokens
			usage.OutTokens += s.OutTokens
			usage.Lines = append(usage.Lines, metering.Line{Call: metering.KindExtract, Step: s.Name, InTokens: s.InTokens, OutTokens: s.OutTokens})
		}
	}
	usage.Kind = metering.KindExtract
	w.Header().Set(UsageHeader, usage.String())
	httpjson.Write(w, http.StatusOK, extractAnswer{OK: true, URL: pg.URL, Data: plan.Schema.Ordered(res.Data), MS: time.Since(start).Milliseconds()})
}

// extractPage is the page a scrape of rawURL produced: the archived copy
// as fetched (structured data and all), its final URL, and the main
// content's Markdown from the scrape result when a model will read it.
func (c *Cell) extractPage(rawURL string, out *scrape.Outcome, withModel bool) (extract.Page, error) {
	var pg extract.Page
	u, err := urlpolicy.Validate(rawURL, c.cfg.AllowPrivateNetworks)
	if err != nil {
		return pg, scrape.BadInput(err.Error())
	}
	pg.URL = u.String()
	if withModel {
		// The model's input is the result's Markdown.
		res, err := out.Result()
		if err != nil {
			return pg, err
		}
		if res.Markdown != nil {
			pg.Markdown = *res.Markdown
		}
	}
	if ap, err := c.scrape.Archived(u.String()); err == nil {
		if ap.URL != "" {
			pg.URL = ap.URL
		}
		pg.Fetched = ap.FetchedAt // relative dates ("3 hours ago") are read against it
		if ct := strings.ToLower(ap.ContentType); strings.HasPrefix(ct, "text/plain") || strings.HasPrefix(ct, "text/markdown") {
			kind := extract.Text
			if strings.HasPrefix(ct, "text/markdown") {
				kind = extract.Markdown
			}
			pg.HTML = extract.ToHTML(string(ap.Body), kind)
		} else {
			pg.HTML = string(ap.Body)
		}
		return pg, nil
	}
	// No archived copy (swept): the scrape result's own HTML.
	res, err := out.Result()
	if err != nil {
		return pg, err
	}
	if res.FinalURL != "" {
		if fu, err := url.Parse(res.FinalURL); err == nil {
			pg.URL = fu.String()
		}
	}
	pg.Fetched = res.FetchedAt
	if res.HTML != nil {
		pg.HTML = *res.HTML
	}
	return pg, nil
}

package cell

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/trawlhq/trawl/cell/extract"
	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/firecrawl"
	"github.com/trawlhq/trawl/cell/jobs"
	"github.com/trawlhq/trawl/cell/sitemap"
	"github.com/trawlhq/trawl/internal/fcapi"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

// Firecrawl's extraction (docs/firecrawl.md, "Extract") is a job of the
// cell's jobs manager whose shape is kind v2ExtractKind: one URL a page,
// each page fetched as POST /v2/scrape fetches it and filled by the
// cell's extractor (deterministic without a model, the operator's model
// with one) from the request's schema and prompt; its result line is the
// page's data. GET /v2/extract/{id} merges the pages' data into
// Firecrawl's one data (firecrawl.MergeExtract). The job is owned by the
// cell its id names and belongs to the account that started it.
//
// Billing: what an extraction costs is its pages and, with the operator's
// model, the model's tokens, which are known only once each page has been
// read. So nothing is charged when it starts (the gate's meter checks the
// account can pay one extraction per URL before it forwards the call);
// each page extracted writes its charge, priced as POST /v2/scrape with
// the json format prices that page (kind extract: its engine, cache
// outcome and tokens), in the write that records the page, into the
// cell's Firecrawl charge outbox, which the crawls' pages use too
// (cell/v2_crawl.go). The gate collects it (GET /monitor-charges),
// charges each page once and acknowledges with the credits it charged.
// The status says completed only once every page's charge is
// acknowledged, so its creditsUsed is what the ledger charged and its
// tokensUsed the tokens in those charges. A page that failed is not
// charged.

// v2ExtractKind marks a job's shape as an extraction's. It is the first
// member of the shape (v2ExtractShape), so shapes are told apart by
// prefix.
const v2ExtractKind = "firecrawl_extract"

var v2ExtractShapePrefix = []byte(`{"kind":"` + v2ExtractKind + `"`)

// Bounds of the expansion of wildcard URLs (ending in /*): every map of
// one request together, within the gate's wait for the start's answer.
const v2ExtractMapTimeout = 60 * time.Second

// v2ExtractShape is what an extraction job keeps (jobs.Extra.Shape).
type v2ExtractShape struct {
	Kind    string                  `json:"kind"`
	Options firecrawl.ScrapeOptions `json:"options"`
	Schema  json.RawMessage         `json:"schema,omitempty"`
	// Instruction is the prompt, with the system prompt before it.
	Instruction string `json:"instruction,omitempty"`
	Sources     bool   `json:"sources,omitempty"`
}

// v2ExtractHandlers are the handlers of Firecrawl's v2 extract routes
// (docs/firecrawl.md).
func (c *Cell) v2ExtractHandlers() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{
		"POST /v2/extract":     c.handleV2ExtractStart,
		"GET /v2/extract/{id}": c.withV2Job(v2ExtractKind, "Extract job not found", c.handleV2ExtractStatus),
	}
}

// handleV2ExtractStart serves POST /v2/extract: the request checked, its
// wildcard URLs expanded, the job recorded and started. Nothing is
// charged here (above).
func (c *Cell) handleV2ExtractStart(w http.ResponseWriter, r *http.Request) {
	var req firecrawl.ExtractRequest
	if err := fcapi.Decode(w, r, &req); err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	p, err := req.Compile()
	if err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	instruction, err := c.v2ExtractInstruction(p)
	if err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	if opts := p.Plan.Options; opts.Proxy != fetch.ProxyNone || opts.NeedsBrowser() {
		if err := c.scrape.Check(opts); err != nil {
			firecrawl.WriteError(w, err)
			return
		}
	}
	urls, invalid, err := c.v2ExtractURLs(r.Context(), p)
	if r.Context().Err() != nil {
		return // the client is gone
	}
	if err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	shape, err := json.Marshal(v2ExtractShape{Kind: v2ExtractKind, Options: p.Options, Schema: p.Schema,
		Instruction: instruction, Sources: p.Sources})
	if err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	id, err := c.jobs.SubmitWith(accountOf(r), urls, p.Plan.Options, jobs.Extra{Shape: shape, Placed: true})
	if err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	httpjson.Write(w, http.StatusOK, firecrawl.ExtractStarted{Success: true, ID: id, URLTrace: []any{}, InvalidURLs: invalid})
}

// v2ExtractInstruction checks what the request asks to extract against
// the cell's extractor, as every page will be read, and returns the
// instruction the pages are read with: the system prompt (a model's
// only), then the prompt.
func (c *Cell) v2ExtractInstruction(p *firecrawl.ExtractPlan) (string, error) {
	withModel := c.extractor.Model != nil
	if p.SystemPrompt != "" && !withModel {
		return "", firecrawl.Unsupported("systemPrompt", "systemPrompt is guidance for a model, and this trawl has none configured (trawl cell --llm-provider): its extractor reads the schema and prompt only")
	}
	instruction := p.Prompt
	if p.SystemPrompt != "" {
		instruction = strings.TrimSpace(p.SystemPrompt + "\n\n" + p.Prompt)
	}
	if len(instruction) > extractMaxInstruction {
		field := "prompt"
		if p.SystemPrompt != "" {
			field = "systemPrompt"
		}
		return "", firecrawl.Unsupported(field, fmt.Sprintf("trawl's extractor takes at most %d bytes of prompt and systemPrompt together (got %d)", extractMaxInstruction, len(instruction)))
	}
	xr := extract.Request{URL: "http://example.com/", Schema: p.Schema, Instruction: p.Prompt}
	if _, err := xr.CheckFor(&c.extractor); err != nil {
		msg := strings.ReplaceAll(httpjson.AsHTTPError(err).Message, "instruction", "prompt")
		if len(p.Schema) > 0 {
			return "", firecrawl.BadRequest("schema", "Invalid JSON schema: "+msg)
		}
		return "", firecrawl.BadRequest("prompt", msg)
	}
	return instruction, nil
}

// extractMaxInstruction is the extractor's bound on an instruction
// (extract.Request.Check).
const extractMaxInstruction = 8 << 10

// v2ExtractURLs is the pages of an extraction: the request's URLs that
// trawl can fetch, each wildcard replaced by the pages its map finds,
// each page once, at most firecrawl.ExtractMaxPages; and the URLs left
// out as invalid (ignoreInvalidURLs; otherwise such a URL is a 400).
func (c *Cell) v2ExtractURLs(ctx context.Context, p *firecrawl.ExtractPlan) ([]string, []string, error) {
	var urls, invalid []string
	seen := map[string]bool{}
	add := func(u string) {
		if !seen[u] && len(urls) < firecrawl.ExtractMaxPages {
			seen[u] = true
			urls = append(urls, u)
		}
	}
	refuse := func(eu firecrawl.ExtractURL, code string, err error) error {
		if p.Ignore {
			invalid = append(invalid, eu.Raw)
			return nil
		}
		return &firecrawl.Error{Status: http.StatusBadRequest, Code: code,
			Message: fmt.Sprintf("Bad Request: urls.%d: %v", eu.Index, err),
			Details: []map[string]any{{"path": []string{"urls", strconv.Itoa(eu.Index)}, "message": err.Error()}}}
	}
	mctx, cancel := context.WithTimeout(ctx, v2ExtractMapTimeout)
	defer cancel()
	for _, eu := range p.URLs {
		u, err := urlpolicy.Validate(eu.URL, c.cfg.AllowPrivateNetworks)
		if err != nil {
			if err := refuse(eu, firecrawl.CodeBadRequest, err); err != nil {
				return nil, nil, err
			}
			continue
		}
		if !eu.Wildcard {
			add(u.String())
			continue
		}
		if err := c.v2MapHost(mctx, u.String()); err != nil {
			if err := refuse(eu, firecrawl.CodeUnsupportedURL, err); err != nil {
				return nil, nil, err
			}
			continue
		}
		links, err := c.v2ExtractExpand(mctx, u.String(), p)
		if err != nil {
			return nil, nil, err
		}
		for _, l := range links {
			add(l)
		}
	}
	if len(urls) == 0 {
		return nil, nil, firecrawl.BadRequest("urls", "none of urls is a page trawl can fetch (http or https, a public host)")
	}
	return urls, invalid, nil
}

// v2ExtractExpand is the pages a wildcard URL stands for: its site's
// URLs as POST /v2/map finds them (cell/sitemap: the sitemaps and the
// start page's links, through the cell's HTTP engine), those that match
// the prompt's words first, at most the request's limit.
func (c *Cell) v2ExtractExpand(ctx context.Context, base string, p *firecrawl.ExtractPlan) ([]string, error) {
	req := sitemap.NewRequest(base)
	req.Limit, req.IncludeSubdomains = p.Limit, p.Subdomains
	if !p.Sitemap {
		req.Sitemap = sitemap.SitemapSkip
	}
	req.Search = p.Prompt
	if r := []rune(req.Search); len(r) > mapMaxSearch {
		req.Search = string(r[:mapMaxSearch])
	}
	if err := req.Normalize(); err != nil {
		return nil, firecrawl.BadRequest("urls", err.Error())
	}
	var docs atomic.Int64
	res, err := sitemap.Map(ctx, c.mapFetcher(&docs), req)
	if err != nil {
		return nil, c.v2MapError(ctx, base, v2ExtractMapTimeout, err)
	}
	out := make([]string, 0, len(res.Links))
	for _, l := range res.Links {
		out = append(out, l.URL)
	}
	return out, nil
}

// v2JobExtract produces one page of an extraction job (jobs.Config.Shaped):
// the page fetched as POST /v2/scrape would with the extraction's scrape
// options and filled with its schema and instruction; its usage is the
// page's charge (extractEvents).
func (c *Cell) v2JobExtract(ctx context.Context, t jobs.Target, raw json.RawMessage) (jobs.Produced, error) {
	var shape v2ExtractShape
	if err := json.Unmarshal(raw, &shape); err != nil || shape.Kind != v2ExtractKind {
		return jobs.Produced{}, fmt.Errorf("a job shape that is not an extraction's (%q): %v", shape.Kind, err)
	}
	plan, err := shape.Options.Compile("scrapeOptions.")
	if err != nil {
		return jobs.Produced{}, v2JobError(err)
	}
	plan.JSON = &firecrawl.Format{Type: "json", Schema: shape.Schema, Prompt: shape.Instruction}
	u, err := urlpolicy.Validate(t.URL, c.cfg.AllowPrivateNetworks)
	if err != nil {
		return jobs.Produced{}, &httpjson.HTTPError{Status: http.StatusBadRequest, Code: firecrawl.CodeUnsupportedURL, Message: err.Error()}
	}
	pg, usage, err := c.v2Page(ctx, t.URL, u.String(), plan)
	if err != nil {
		return jobs.Produced{}, v2JobError(err)
	}
	if s := pg.Result.Status; s >= 400 {
		// An error page has no data of the site's: a failure, not charged.
		return jobs.Produced{}, &httpjson.HTTPError{Status: http.StatusUnprocessableEntity, Code: firecrawl.CodeScrapeFailed,
			Message: fmt.Sprintf("the site answered %d %s: no data is extracted from an error page", s, http.StatusText(s))}
	}
	doc, err := firecrawl.Shape(plan, pg)
	if err != nil {
		return jobs.Produced{}, v2JobError(err)
	}
	if err := c.v2Extract(ctx, plan, pg, doc, &usage); err != nil {
		return jobs.Produced{}, v2JobError(err)
	}
	data, err := json.Marshal(doc.JSON)
	if err != nil {
		return jobs.Produced{}, err
	}
	res, err := json.Marshal(firecrawl.ExtractPart{URL: t.URL, Data: data, InTokens: usage.InTokens, OutTokens: usage.OutTokens})
	if err != nil {
		return jobs.Produced{}, err
	}
	return jobs.Produced{Result: res, Usage: &usage}, nil
}

// extractEvents is the extractions' observer of the jobs manager: each
// page extracted writes its charge with the page, into the Firecrawl
// charge outbox the crawls' pages use (cell/v2_crawl.go, crawlCharge):
// the same record, id and acknowledgement, so the gate collects both
// alike and the credits it acknowledges add up per job.
type extractEvents struct{}

func (extractEvents) Stage(b *store.Batch, e *jobs.Event) error {
	if !bytes.HasPrefix(e.Shape, v2ExtractShapePrefix) || e.Kind != jobs.EventPage || e.Err != nil || e.Usage == nil {
		return nil
	}
	ch := crawlCharge{ID: v2ChargePrefix(e.Job) + strconv.FormatUint(e.Seq, 10), Account: e.Account, Crawl: e.Job,
		URL: e.URL, At: e.At, Usage: *e.Usage}
	raw, err := json.Marshal(ch)
	if err != nil {
		return err
	}
	b.Set(crawlChargeKey(ch.ID), raw)
	return nil
}

func (extractEvents) Committed(*jobs.Event) {}

// v2ChargePrefix begins the ids of job's page charges in the outbox.
func v2ChargePrefix(job string) string { return crawlChargeID + job + "-" }

// v2ChargesPending reports whether a charge of job's pages (done of
// them have their data, each charged once) waits for the gate: in its
// owner's outbox, or, read on another cell, beyond the charges acked
// says the owner noted as acknowledged (jobCharges).
func (c *Cell) v2ChargesPending(job string, acked pageCharges, done int) (bool, error) {
	if c.jobs.Exists(job) {
		return c.store.HasPrefix(crawlChargeKey(v2ChargePrefix(job)))
	}
	return acked.Acked < int64(done), nil
}

// v2ChargedLater reports whether a job's pages are charged in the
// background as each is produced (an extraction's), so that a retry of
// its failed URLs charges nothing when it starts (handleJobRetry).
func v2ChargedLater(shape json.RawMessage) bool {
	return bytes.HasPrefix(shape, v2ExtractShapePrefix)
}

// handleV2ExtractStatus serves GET /v2/extract/{id}: processing until
// every page has its outcome and its charge has been acknowledged, then
// the pages' data merged (firecrawl.MergeExtract) with the tokens and
// credits charged for them; failed when no page gave data.
func (c *Cell) handleV2ExtractStatus(w http.ResponseWriter, r *http.Request, st *jobs.Status) {
	var shape v2ExtractShape
	if err := json.Unmarshal(st.Shape, &shape); err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	out := firecrawl.ExtractStatus{Success: true, Status: firecrawl.ExtractProcessing, Data: []any{},
		ExpiresAt: st.ExpiresAt.UTC().Format(time.RFC3339)}
	charges := c.jobCharges(st.JobID, accountOf(r))
	out.CreditsUsed = float64(charges.MC) / 1000
	switch st.Status {
	case jobs.StatusFailed:
		out.Success, out.Status, out.Error = false, firecrawl.ExtractFailed, st.Failure
	case jobs.StatusCancelled:
		out.Status = firecrawl.ExtractCancelled
	case jobs.StatusDone:
		pending, err := c.v2ChargesPending(st.JobID, charges, st.Done)
		if err != nil {
			firecrawl.WriteError(w, err)
			return
		}
		if !pending {
			if err := c.v2ExtractResult(r, st, &shape, &out); err != nil {
				firecrawl.WriteError(w, err)
				return
			}
		}
	}
	httpjson.Write(w, http.StatusOK, out)
}

// v2ExtractResult fills out with a finished extraction's result.
func (c *Cell) v2ExtractResult(r *http.Request, st *jobs.Status, shape *v2ExtractShape, out *firecrawl.ExtractStatus) error {
	acct := accountOf(r)
	full, err := c.jobs.Status(st.JobID, acct, true)
	if err != nil {
		return err
	}
	order := map[string]int{}
	for i, u := range full.URLs {
		if _, ok := order[u.URL]; !ok {
			order[u.URL] = i
		}
	}
	var parts []firecrawl.ExtractPart
	var bad error
	err = c.jobs.ScanResults(st.JobID, acct, 0, func(line []byte) bool {
		var l jobs.Line
		var p firecrawl.ExtractPart
		if err := json.Unmarshal(line, &l); err != nil || !l.OK {
			bad = fmt.Errorf("extraction %s: a result line that is not a page's: %v", st.JobID, err)
			return false
		}
		if err := json.Unmarshal(l.Result, &p); err != nil {
			bad = fmt.Errorf("extraction %s: a page's result: %w", st.JobID, err)
			return false
		}
		parts = append(parts, p)
		return true
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		return err
	}
	sort.SliceStable(parts, func(a, b int) bool { return order[parts[a].URL] < order[parts[b].URL] })
	fs, err := c.jobs.Failures(st.JobID, acct)
	if err != nil {
		return err
	}
	if len(parts) == 0 {
		out.Success, out.Status = false, firecrawl.ExtractFailed
		out.Error = "no page could be extracted"
		if len(fs) > 0 {
			out.Error += ": " + fs[0].URL + ": " + fs[0].Message
		}
		return nil
	}
	data, sources, err := firecrawl.MergeExtract(parts)
	if err != nil {
		return err
	}
	if len(shape.Schema) > 0 {
		if sch, err := extract.CompileSchema(shape.Schema); err == nil {
			data = sch.Ordered(data)
		}
	}
	out.Status, out.Data = firecrawl.ExtractCompleted, data
	for _, p := range parts {
		out.TokensUsed += p.InTokens + p.OutTokens
	}
	if shape.Sources {
		out.Sources = sources
	}
	if len(fs) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "%d of %d pages could not be extracted: ", len(fs), len(fs)+len(parts))
		for i, f := range fs {
			if i == 5 {
				fmt.Fprintf(&b, "; and %d more", len(fs)-i)
				break
			}
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%s (%s)", f.URL, f.Message)
		}
		out.Warning = b.String()
	}
	return nil
}

package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tools of docs/spec/hosted-api.md §4.1, each the HTTP route it stands
// for.

// Job limits of the tool server (§8).
const (
	JobsMinURLs    = 50
	JobsMaxURLs    = 500
	ResultsPerCall = 50
)

type scrapeIn struct {
	URL     string `json:"url" jsonschema:"the public http or https page to fetch"`
	Format  string `json:"format,omitempty" jsonschema:"which content comes back: both (default), md or html"`
	Proxy   string `json:"proxy,omitempty" jsonschema:"exit network: none (default), isp or residential, for sites that block datacenters; costs more"`
	Country string `json:"country,omitempty" jsonschema:"two-letter exit country (us, sg, ...) with an isp or residential proxy"`
	Parse   any    `json:"parse,omitempty" jsonschema:"also return structured page data: true for everything, or an object of booleans links, media, metadata, tables"`
}

type batchIn struct {
	URLs    []string `json:"urls" jsonschema:"1 to 50 public http or https pages"`
	Format  string   `json:"format,omitempty" jsonschema:"both (default), md or html"`
	Proxy   string   `json:"proxy,omitempty" jsonschema:"none (default), isp or residential"`
	Country string   `json:"country,omitempty" jsonschema:"two-letter exit country with an isp or residential proxy"`
}

type searchIn struct {
	Q    string `json:"q" jsonschema:"the query, at most 512 characters"`
	Rich bool   `json:"rich,omitempty" jsonschema:"also return the rich block (related queries, entity, did_you_mean...); slightly slower"`
}

type answerIn struct {
	Q            string `json:"q" jsonschema:"the question, at most 512 characters"`
	Experimental bool   `json:"experimental,omitempty" jsonschema:"acknowledges that answers are experimental (their shape may change); the answer says experimental: true either way"`
	Deep         *bool  `json:"deep,omitempty" jsonschema:"true (default) runs the full pipeline and may read a couple of result pages; false answers only when an answer is readily available"`
}

type extractIn struct {
	URL         string         `json:"url,omitempty" jsonschema:"the page to read; give url or content"`
	Content     string         `json:"content,omitempty" jsonschema:"your own text, Markdown or HTML, used instead of a url"`
	Instruction string         `json:"instruction,omitempty" jsonschema:"what to extract, in plain language; give instruction and/or schema"`
	Schema      map[string]any `json:"schema,omitempty" jsonschema:"a JSON schema each returned record must match"`
	Example     map[string]any `json:"example,omitempty" jsonschema:"a sample of the wanted structure (structure, not values)"`
}

type jobsSubmitIn struct {
	URLs           []string `json:"urls" jsonschema:"50 to 500 public http or https pages"`
	Proxy          string   `json:"proxy,omitempty" jsonschema:"none (default), isp or residential"`
	Country        string   `json:"country,omitempty" jsonschema:"two-letter exit country with an isp or residential proxy"`
	BypassCache    bool     `json:"bypass_cache,omitempty" jsonschema:"fetch every page again even when a fresh copy is cached"`
	IdempotencyKey string   `json:"idempotency_key,omitempty" jsonschema:"1 to 100 printable characters, no spaces: the same key again returns the same job and bills it once; always set one so a retry after a timeout is safe"`
}

type jobRef struct {
	JobID string `json:"job_id" jsonschema:"the job_id jobs_submit returned (j_...)"`
}

type jobsResultsIn struct {
	JobID  string `json:"job_id" jsonschema:"the job_id jobs_submit returned (j_...)"`
	Offset int    `json:"offset,omitempty" jsonschema:"index of the first result line to return (0 first); the previous call's next_offset"`
}

type none struct{}

type recipeRunIn struct {
	Name        string         `json:"name" jsonschema:"the recipe's name, from recipes_list"`
	Inputs      map[string]any `json:"inputs,omitempty" jsonschema:"the recipe's inputs by name (recipes_list shows each input's type, default and whether it is required)"`
	BypassCache bool           `json:"bypass_cache,omitempty" jsonschema:"run again even when the same inputs were run within the recipe's fresh_for_s"`
}

type estimateIn struct {
	Endpoint string   `json:"endpoint" jsonschema:"the call to price: scrape, batch, jobs, extract, search, answer, ..."`
	URL      string   `json:"url,omitempty" jsonschema:"the page of a one-page call"`
	URLs     []string `json:"urls,omitempty" jsonschema:"the pages of a batch or job"`
}

type topupIn struct {
	Amount   float64 `json:"amount" jsonschema:"USD, one of the packs of the price table (the balance tool's 402 actions and GET /v1/prices list them)"`
	Checkout bool    `json:"checkout,omitempty" jsonschema:"answer a checkout_url for a person to pay on, instead of charging the saved card"`
}

type spendCapIn struct {
	Credits float64 `json:"credits" jsonschema:"the monthly spend cap in credits (three decimals at most); 0 removes the cap"`
}

type rechargeIn struct {
	On           bool   `json:"on" jsonschema:"turn auto-recharge on or off"`
	UnderCredits *int64 `json:"under_credits,omitempty" jsonschema:"recharge when the balance falls under this many credits"`
	PackUSD      *int   `json:"pack_usd,omitempty" jsonschema:"the pack to buy, in USD (one of the price table's packs)"`
	MaxPerMonth  *int   `json:"max_per_month,omitempty" jsonschema:"at most this many recharges a month"`
}

type reportIn struct {
	Title        string `json:"title" jsonschema:"one line, at most 200 characters"`
	WhatHappened string `json:"what_happened" jsonschema:"what you called, what you expected and what you got (receipt ids, job ids, URLs); at most 8000 characters"`
}

func add[In any](srv *sdk.Server, name, title, desc string, h func(context.Context, *sdk.CallToolRequest, In) (*sdk.CallToolResult, out, error)) {
	sdk.AddTool(srv, &sdk.Tool{Name: name, Title: title, Description: desc}, h)
}

// register adds the tools to srv, in the order tools/list names them.
func (s *server) register(srv *sdk.Server) {
	s.registerContent(srv)
	s.registerJobs(srv)
	s.registerRecipes(srv)
	s.registerAccount(srv)
}

// registerContent adds the tools of one call's content: scrape, search,
// answer and extract.
func (s *server) registerContent(srv *sdk.Server) {
	add(srv, "scrape", "Scrape a page",
		"Fetch one public web page and return its main content as Markdown and/or HTML (navigation, banners and footers stripped), optionally with links, media, metadata and tables (parse). "+
			"Costs 1 credit for a plain page, more when the page needs a browser or a proxy (the effort level's multiplier, named on the receipt), 0 when the same call was made within 10 minutes (cache). "+
			"Most pages take 1 to 2 s; a page that needs the browser usually 10 to 60 s and up to 90 s: allow 120 s, do not cancel and retry. Same as POST /scrape.",
		func(ctx context.Context, req *sdk.CallToolRequest, in scrapeIn) (*sdk.CallToolResult, out, error) {
			body := map[string]any{"url": in.URL}
			setStr(body, "format", in.Format)
			setStr(body, "proxy", in.Proxy)
			setStr(body, "country", in.Country)
			if in.Parse != nil {
				body["parse"] = in.Parse
			}
			return s.call(ctx, req, "scrape", request{Method: http.MethodPost, Path: "/scrape", Body: body}, nil)
		})

	add(srv, "search", "Search the web archive",
		"Search the pages this service has crawled: ranked results with title, url and snippet; rich=true adds the rich block (related queries, entity, did_you_mean). "+
			"Costs the search price (half when answered from the archive); takes about a second. Same as GET /search.",
		func(ctx context.Context, req *sdk.CallToolRequest, in searchIn) (*sdk.CallToolResult, out, error) {
			q := url.Values{"q": {in.Q}}
			if in.Rich {
				q.Set("rich", "1")
			}
			return s.call(ctx, req, "search", request{Method: http.MethodGet, Path: "/search", Query: q}, nil)
		})

	add(srv, "answer", "Answer a question (experimental)",
		"A direct, quoted and attributed answer from the crawled pages, or answered: false (then use search). Experimental: the shape may change. "+
			"Costs the search plus language-model tokens when a model runs (half when archived); deep (default) may read a couple of result pages and take several seconds. Same as GET /answer.",
		func(ctx context.Context, req *sdk.CallToolRequest, in answerIn) (*sdk.CallToolResult, out, error) {
			q := url.Values{"q": {in.Q}}
			if in.Deep != nil && !*in.Deep {
				q.Set("deep", "0")
			}
			return s.call(ctx, req, "answer", request{Method: http.MethodGet, Path: "/answer", Query: q}, nil)
		})

	add(srv, "extract", "Extract typed JSON",
		"Extract typed JSON from a page (url) or from your own content, guided by an instruction and/or a JSON schema (records are validated against it), with an optional example of the structure. "+
			"Costs the page fetch plus language-model tokens when a model runs (priced per 5,000 tokens). A page that needs the browser can take up to 90 s: allow 120 s. Same as POST /extract.",
		func(ctx context.Context, req *sdk.CallToolRequest, in extractIn) (*sdk.CallToolResult, out, error) {
			body := map[string]any{}
			setStr(body, "url", in.URL)
			setStr(body, "content", in.Content)
			setStr(body, "instruction", in.Instruction)
			if in.Schema != nil {
				body["schema"] = in.Schema
			}
			if in.Example != nil {
				body["example"] = in.Example
			}
			return s.call(ctx, req, "extract", request{Method: http.MethodPost, Path: "/extract", Body: body}, nil)
		})
}

// registerJobs adds the tools of many pages: batch and the background
// jobs' submit, status and results.
func (s *server) registerJobs(srv *sdk.Server) {
	add(srv, "batch", "Scrape up to 50 pages",
		"Scrape 1 to 50 pages in one call; each page's result is one line in lines (url, ok, result or error, usage). "+
			"Costs one scrape per page delivered (a failed page is free). Sends a progress notification as each page finishes; with browser pages it can take a few minutes: allow 120 s or more. "+
			"For 50 to 500 pages use jobs_submit; for more, the HTTP jobs API. Same as POST /scrape/batch.",
		s.batch)

	add(srv, "jobs_submit", "Submit a background job (50 to 500 URLs)",
		"Scrape 50 to 500 pages in the background and return a job_id at once; poll jobs_status, then read jobs_results. "+
			"Costs one light-level scrape per URL that can be fetched, charged when the job is accepted (a URL refused before any fetch is free). "+
			"Give an idempotency_key: the same key again returns the same job and bills it once. Fewer than 50 URLs: use batch; more than 500: use the HTTP jobs API (POST /scrape/jobs, up to 10,000). Same as POST /scrape/jobs.",
		s.jobsSubmit)

	add(srv, "jobs_status", "A job's status",
		"The status of a job (pending, running, done) and its counts of pending, done and error URLs, with poll_after_s: when to ask again (10 to 30 s while it runs). Free. Same as GET /scrape/jobs/{id}.",
		func(ctx context.Context, req *sdk.CallToolRequest, in jobRef) (*sdk.CallToolResult, out, error) {
			if in.JobID == "" {
				return refuse("bad_input", "job_id is required", nil)
			}
			return s.call(ctx, req, "jobs_status", request{Method: http.MethodGet, Path: "/scrape/jobs/" + url.PathEscape(in.JobID)}, pollAdvice)
		})

	add(srv, "jobs_results", "A job's results, 50 per call",
		"The results of a job, 50 lines per call from offset (0 first): each line has the url and its result or error. Call again with next_offset while more is true. Free. Same as GET /scrape/jobs/{id}/results?after=offset.",
		s.jobsResults)
}

// registerRecipes adds the recipe catalog and a recipe's run.
func (s *server) registerRecipes(srv *sdk.Server) {
	add(srv, "recipes_list", "The recipe catalog",
		"The recipes (ready-made named scrapers): name, version, title, stage, health, kind, inputs (type, default, required, secret), output fields, fresh_for_s, tags, a cost hint, run and description. Free. Same as GET /recipes.",
		func(ctx context.Context, req *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, out, error) {
			return s.call(ctx, req, "recipes_list", request{Method: http.MethodGet, Path: "/recipes"}, nil)
		})

	add(srv, "recipe_run", "Run a recipe",
		"Run a recipe by name with its inputs; returns recipe, version, rows (one object per row, exactly the recipe's output fields), usage and meta. "+
			"Costs the recipe's units (recipes_list shows a cost hint); a repeat with the same inputs within fresh_for_s is served from cache at 0 unless bypass_cache. A run may take up to 300 s. Same as POST /recipes/{name}.",
		func(ctx context.Context, req *sdk.CallToolRequest, in recipeRunIn) (*sdk.CallToolResult, out, error) {
			if in.Name == "" {
				return refuse("bad_input", "name is required", nil)
			}
			body := map[string]any{}
			for k, v := range in.Inputs {
				body[k] = v
			}
			if in.BypassCache {
				body["bypass_cache"] = true
			}
			return s.call(ctx, req, "recipe_run", request{Method: http.MethodPost, Path: "/recipes/" + url.PathEscape(in.Name), Body: body}, nil)
		})
}

// registerAccount adds the account's tools: balance, estimate, topup,
// spend_cap, recharge and report_issue.
func (s *server) registerAccount(srv *sdk.Server) {
	add(srv, "balance", "Credit balance",
		"The account's credit: balance (what can still be spent), buckets, holds, the monthly spend cap and what is left of it, auto-recharge settings. Free. Same as GET /v1/billing/balance.",
		func(ctx context.Context, req *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, out, error) {
			return s.call(ctx, req, "balance", request{Method: http.MethodGet, Path: "/v1/billing/balance"}, nil)
		})

	add(srv, "estimate", "Price a call first",
		"What a call would cost before making it: min and max credits, a text and the parts (the fixed part is exact; effort and tokens are a band from real traffic). Free. Same as POST /v1/estimate.",
		func(ctx context.Context, req *sdk.CallToolRequest, in estimateIn) (*sdk.CallToolResult, out, error) {
			body := map[string]any{"endpoint": in.Endpoint}
			setStr(body, "url", in.URL)
			if in.URLs != nil {
				body["urls"] = in.URLs
			}
			return s.call(ctx, req, "estimate", request{Method: http.MethodPost, Path: "/v1/estimate", Body: body}, nil)
		})

	add(srv, "topup", "Buy credits",
		"Buy a credit pack: amount is the pack's price in USD. Charges the saved card (paid, credits, invoice_url, balance), or with checkout=true (or when no card is saved) answers a checkout_url a person must open to pay. A paid top-up moves the account to the Supporter limits. The call itself is free; the pack costs its USD price. Same as POST /v1/billing/topup.",
		func(ctx context.Context, req *sdk.CallToolRequest, in topupIn) (*sdk.CallToolResult, out, error) {
			if in.Amount <= 0 || math.IsInf(in.Amount, 0) || math.IsNaN(in.Amount) {
				return refuse("bad_input", "amount must be the USD price of one of the price table's packs", nil)
			}
			q := url.Values{"amount": {strconv.FormatFloat(in.Amount, 'f', -1, 64)}}
			if in.Checkout {
				q.Set("checkout", "1")
			}
			return s.call(ctx, req, "topup", request{Method: http.MethodPost, Path: "/v1/billing/topup", Query: q}, nil)
		})

	add(srv, "spend_cap", "Set the monthly spend cap",
		"Set the account's monthly spend cap in credits (0 removes it); calls that would pass it are refused with spend_cap. It resets on the 1st. Free. Same as POST /v1/billing/settings {spend_cap_mc}.",
		func(ctx context.Context, req *sdk.CallToolRequest, in spendCapIn) (*sdk.CallToolResult, out, error) {
			mc := math.Round(in.Credits * 1000)
			if in.Credits < 0 || math.IsNaN(mc) || mc > 1e15 {
				return refuse("bad_input", "credits must be 0 (no cap) or a positive number of credits", nil)
			}
			return s.call(ctx, req, "spend_cap", request{Method: http.MethodPost, Path: "/v1/billing/settings", Body: map[string]any{"spend_cap_mc": int64(mc)}}, nil)
		})

	add(srv, "recharge", "Auto-recharge",
		"Turn auto-recharge on or off: when the balance falls under under_credits, buy the pack_usd pack with the saved card, at most max_per_month times a month. Free to set. Same as POST /v1/billing/settings {recharge}.",
		func(ctx context.Context, req *sdk.CallToolRequest, in rechargeIn) (*sdk.CallToolResult, out, error) {
			rc := map[string]any{"on": in.On}
			if in.UnderCredits != nil {
				rc["under_credits"] = *in.UnderCredits
			}
			if in.PackUSD != nil {
				rc["pack_usd"] = *in.PackUSD
			}
			if in.MaxPerMonth != nil {
				rc["max_per_month"] = *in.MaxPerMonth
			}
			return s.call(ctx, req, "recharge", request{Method: http.MethodPost, Path: "/v1/billing/settings", Body: map[string]any{"recharge": rc}}, nil)
		})

	add(srv, "report_issue", "Report a problem",
		"Tell the operators about a problem (a wrong result, a failure, a charge that looks wrong): stored for them to read, answered with a reference to quote. Free. Same as POST /v1/issues.",
		func(ctx context.Context, req *sdk.CallToolRequest, in reportIn) (*sdk.CallToolResult, out, error) {
			return s.call(ctx, req, "report_issue", request{Method: http.MethodPost, Path: "/v1/issues",
				Body: map[string]any{"title": in.Title, "what_happened": in.WhatHappened}, Header: http.Header{"Trawl-Via": {"mcp"}}}, nil)
		})
}

func setStr(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

// pollAdvice adds poll_after_s to a job's status: 10 s for a small
// remainder, up to 30 s for a large one; 0 once it is done.
func pollAdvice(o out, _ http.Header) string {
	status, _ := o["status"].(string)
	pending, _ := o["pending"].(float64)
	after := 0
	switch {
	case status == "done":
	case pending <= 50:
		after = 10
	case pending <= 200:
		after = 20
	default:
		after = 30
	}
	o["poll_after_s"] = after
	if after == 0 {
		return "The job is done: read its results with jobs_results (50 per call, from offset 0)."
	}
	return fmt.Sprintf("The job is %s with %d URLs pending: call jobs_status again in %d s.", status, int(pending), after)
}

func (s *server) batch(ctx context.Context, req *sdk.CallToolRequest, in batchIn) (*sdk.CallToolResult, out, error) {
	if len(in.URLs) == 0 {
		return refuse("bad_input", "urls must hold 1 to 50 URLs", nil)
	}
	body := map[string]any{"urls": in.URLs}
	setStr(body, "format", in.Format)
	setStr(body, "proxy", in.Proxy)
	setStr(body, "country", in.Country)
	c, _ := ctx.Value(callerKey{}).(*caller)
	if c == nil {
		c = &caller{header: http.Header{}}
	}
	p := newProgress(ctx, req)
	stop := p.heartbeat(s.cfg.ProgressEvery, "batch")
	resp, err := do(ctx, s.cfg.Pipeline(ctx), c, request{Method: http.MethodPost, Path: "/scrape/batch", Body: body})
	if err != nil {
		stop()
		return refuse("unavailable", "the call could not be made: "+err.Error(), nil)
	}
	defer resp.Body.Close()
	if resp.Status >= 400 {
		stop()
		var o out
		var raw []byte
		raw, _ = readAll(resp)
		if json.Unmarshal(raw, &o) != nil {
			o = out{"body": string(raw)}
		}
		return s.failed(o, resp, receiptOf(resp.Header, resp.Trailer()))
	}
	var got []any
	ok, failed := 0, 0
	err = lines(resp.Body, func(line []byte) bool {
		var v map[string]any
		if json.Unmarshal(line, &v) != nil {
			v = map[string]any{"line": string(line)}
		}
		got = append(got, v)
		if v["ok"] == true {
			ok++
		} else {
			failed++
		}
		u, _ := v["url"].(string)
		p.send(float64(len(got)), float64(len(in.URLs)), fmt.Sprintf("%d of %d pages: %s", len(got), len(in.URLs), u))
		return true
	})
	stop()
	resp.Body.Close()
	b := receiptOf(resp.Header, resp.Trailer())
	o := out{"lines": got, "count": len(got), "ok": ok, "failed": failed}
	if got == nil {
		o["lines"] = []any{}
	}
	if err != nil {
		o["error"], o["message"] = "unavailable", "the batch was cut off: "+err.Error()
		return finish(o, b, true, "The batch was cut off after "+strconv.Itoa(len(got))+" lines; the lines delivered were charged.")
	}
	return finish(o, b, false, "")
}

func readAll(resp *response) ([]byte, error) { return io.ReadAll(resp.Body) }

func (s *server) jobsSubmit(ctx context.Context, req *sdk.CallToolRequest, in jobsSubmitIn) (*sdk.CallToolResult, out, error) {
	n := len(in.URLs)
	actions := out{"batch": "batch tool (1 to 50 URLs)", "http": "POST /scrape/jobs with urls (up to 10,000) and your API key; then GET /scrape/jobs/{id} and GET /scrape/jobs/{id}/results?after=N"}
	switch {
	case n < JobsMinURLs:
		return refuse("too_few_urls", fmt.Sprintf("jobs_submit takes %d to %d URLs (got %d): for up to 50 URLs use the batch tool; the HTTP jobs API (POST /scrape/jobs) takes any number up to 10,000.", JobsMinURLs, JobsMaxURLs, n), out{"actions": actions})
	case n > JobsMaxURLs:
		return refuse("too_many_urls", fmt.Sprintf("jobs_submit takes %d to %d URLs (got %d): submit this job with the HTTP jobs API, POST /scrape/jobs (up to 10,000 URLs), with the same API key.", JobsMinURLs, JobsMaxURLs, n), out{"actions": actions})
	}
	body := map[string]any{"urls": in.URLs}
	setStr(body, "proxy", in.Proxy)
	setStr(body, "country", in.Country)
	if in.BypassCache {
		body["bypass_cache"] = true
	}
	r := request{Method: http.MethodPost, Path: "/scrape/jobs", Body: body}
	if in.IdempotencyKey != "" {
		r.Header = http.Header{"Idempotency-Key": {in.IdempotencyKey}}
	}
	return s.call(ctx, req, "jobs_submit", r, func(o out, _ http.Header) string {
		o["poll_after_s"] = 10
		if o["repeated"] == true {
			return fmt.Sprintf("This idempotency key already submitted job %v: the same job, not billed again. Poll jobs_status in 10 s.", o["job_id"])
		}
		return fmt.Sprintf("Job %v accepted with %d URLs. Poll jobs_status in 10 s, then read jobs_results.", o["job_id"], n)
	})
}

func (s *server) jobsResults(ctx context.Context, req *sdk.CallToolRequest, in jobsResultsIn) (*sdk.CallToolResult, out, error) {
	if in.JobID == "" {
		return refuse("bad_input", "job_id is required", nil)
	}
	if in.Offset < 0 {
		return refuse("bad_input", "offset must be 0 or more", nil)
	}
	c, _ := ctx.Value(callerKey{}).(*caller)
	if c == nil {
		c = &caller{header: http.Header{}}
	}
	resp, err := do(ctx, s.cfg.Pipeline(ctx), c, request{Method: http.MethodGet, Path: "/scrape/jobs/" + url.PathEscape(in.JobID) + "/results",
		Query: url.Values{"after": {strconv.Itoa(in.Offset)}}})
	if err != nil {
		return refuse("unavailable", "the call could not be made: "+err.Error(), nil)
	}
	defer resp.Body.Close()
	if resp.Status >= 400 {
		var o out
		raw, _ := readAll(resp)
		if json.Unmarshal(raw, &o) != nil {
			o = out{"body": string(raw)}
		}
		return s.failed(o, resp, receiptOf(resp.Header, http.Header{}))
	}
	got := []any{}
	more := false
	err = lines(resp.Body, func(line []byte) bool {
		if len(got) == ResultsPerCall {
			more = true
			return false
		}
		var v map[string]any
		if json.Unmarshal(line, &v) != nil {
			v = map[string]any{"line": string(line)}
		}
		got = append(got, v)
		return true
	})
	// The rest of the page is not needed: closing ends the read at the cell.
	resp.Body.Close()
	b := receiptOf(resp.Header, http.Header{})
	o := out{"job_id": in.JobID, "offset": in.Offset, "lines": got, "count": len(got), "next_offset": in.Offset + len(got), "more": more}
	if err != nil {
		o["error"], o["message"] = "unavailable", "the results were cut off: "+err.Error()
		return finish(o, b, true, "The results were cut off; call again with the same offset.")
	}
	return finish(o, b, false, "")
}

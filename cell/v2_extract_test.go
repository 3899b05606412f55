package cell

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/extract"
	"github.com/trawlhq/trawl/cell/llm"
	"github.com/trawlhq/trawl/cell/llm/llmtest"
	"github.com/trawlhq/trawl/internal/jobid"
	"github.com/trawlhq/trawl/internal/jsnode/jsnodetest"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/testwait"
)

// tentSite serves the extraction tests' shop (testdata/extract): two
// product pages, two pages of a table of tents, an index, a sitemap,
// and a 404. It counts the fetches of product pages.
type tentSite struct {
	*httptest.Server
	products atomic.Int64
}

func newTentSite(t *testing.T) *tentSite {
	t.Helper()
	page := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", "extract", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	pages := map[string]string{
		"/tents/ridge": page("ridge.html"), "/tents/dome": page("dome.html"),
		"/tents/list1": page("list1.html"), "/tents/list2": page("list2.html"),
		"/tents": page("index.html"), "/tents/": page("index.html"),
		"/about": `<html><head><title>About</title></head><body><main><p>A shop of tents since 1990.</p></main></body></html>`,
	}
	sm := page("sitemap.xml")
	s := &tentSite{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/sitemap.xml" {
			w.Header().Set("Content-Type", "application/xml")
			io.WriteString(w, strings.ReplaceAll(sm, "HOST", "http://"+r.Host))
			return
		}
		body, ok := pages[r.URL.Path]
		if !ok {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `<html><head><title>Not found</title></head><body><main><h1>Page not found</h1><p>Nothing here, sorry.</p></main></body></html>`)
			return
		}
		if r.URL.Path == "/tents/ridge" || r.URL.Path == "/tents/dome" {
			s.products.Add(1)
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

const tentSchema = `{"type":"object","properties":{"name":{"type":"string"},"price":{"type":"number"},"currency":{"type":"string"},"in_stock":{"type":"boolean"}}}`

type extractStarted struct {
	Success     bool     `json:"success"`
	ID          string   `json:"id"`
	URLTrace    []any    `json:"urlTrace"`
	InvalidURLs []string `json:"invalidURLs"`
	Error       string   `json:"error"`
	Code        string   `json:"code"`
	Details     []struct {
		Path []string `json:"path"`
	} `json:"details"`
}

type extractStatus struct {
	Success     bool                `json:"success"`
	Status      string              `json:"status"`
	Data        json.RawMessage     `json:"data"`
	Error       string              `json:"error"`
	Warning     string              `json:"warning"`
	ExpiresAt   string              `json:"expiresAt"`
	TokensUsed  int                 `json:"tokensUsed"`
	CreditsUsed float64             `json:"creditsUsed"`
	Sources     map[string][]string `json:"sources"`
	Code        string              `json:"code"`
}

// startExtract posts an extraction: it starts at once, and nothing is
// charged (no usage report).
func (tc *testCell) startExtract(t *testing.T, body string) extractStarted {
	t.Helper()
	resp, b := tc.postHeld(t, "/v2/extract", body)
	r := decode[extractStarted](t, b)
	if resp.StatusCode != 200 || !r.Success || r.ID == "" || r.URLTrace == nil {
		t.Fatalf("start: %d %s", resp.StatusCode, b)
	}
	if u := resp.Header.Get(metering.Header); u != "" {
		t.Fatalf("the start of an extraction reports usage %s", u)
	}
	return r
}

func (tc *testCell) extractStatus(t *testing.T, id string) extractStatus {
	t.Helper()
	resp, b := tc.get(t, "/v2/extract/"+id)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v2/extract/%s: %d %s", id, resp.StatusCode, b)
	}
	return decode[extractStatus](t, b)
}

// pageCharge is a charge of the cell's Firecrawl outbox as the gate
// reads it.
type pageCharge struct {
	ID      string         `json:"id"`
	Account string         `json:"account"`
	URL     string         `json:"url"`
	Usage   metering.Usage `json:"usage"`
}

// collect does what the gate does with the background charges: lists
// them (a request it signs without an account) and acknowledges them,
// each at price(charge) credits. It returns the charges of job.
func (tc *testCell) collect(t *testing.T, job string, price func(pageCharge) string) []pageCharge {
	t.Helper()
	req, _ := http.NewRequest("GET", tc.srv.URL+"/monitor-charges", nil)
	req.Header[testAccountHeader] = []string{""}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var list struct {
		Charges []pageCharge `json:"charges"`
	}
	if err := json.Unmarshal(b, &list); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /monitor-charges: %d %s", resp.StatusCode, b)
	}
	ack := map[string]any{}
	var ids []string
	credits := map[string]string{}
	var mine []pageCharge
	for _, c := range list.Charges {
		ids = append(ids, c.ID)
		credits[c.ID] = price(c)
		if strings.HasPrefix(c.ID, "fcc-"+job+"-") {
			mine = append(mine, c)
		}
	}
	ack["ids"], ack["credits"] = ids, credits
	body, _ := json.Marshal(ack)
	req, _ = http.NewRequest("POST", tc.srv.URL+"/monitor-charges/ack", strings.NewReader(string(body)))
	req.Header[testAccountHeader] = []string{""}
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST /monitor-charges/ack: %d %s", resp.StatusCode, b)
	}
	return mine
}

// An extraction of several pages: started at once and free to start;
// each page extracted writes its charge; once the gate has charged them
// the status is the pages' data merged, with the credits charged, the
// sources, and a warning naming the page that failed.
func TestV2Extract(t *testing.T) {
	site := newTentSite(t)
	tc := newTestCell(t, nil)
	body, _ := json.Marshal(map[string]any{
		"urls":   []string{site.URL + "/tents/ridge", site.URL + "/tents/dome", site.URL + "/missing", "ftp://nope/", site.URL + "/tents/ridge"},
		"schema": json.RawMessage(tentSchema), "showSources": true, "origin": "js-sdk@4.42.0", "integration": "test",
	})
	r := tc.startExtract(t, string(body))
	if !slices.Equal(r.InvalidURLs, []string{"ftp://nope/"}) {
		t.Errorf("invalidURLs %v", r.InvalidURLs)
	}
	// Every page has its outcome (the repeated URL once); the charges
	// wait for the gate, so the extraction is still processing.
	js := tc.waitJob(t, r.ID, func(s jobStatus) bool { return s.Status == "done" })
	if js.Total != 3 || js.Done != 2 || js.Error != 1 {
		t.Fatalf("native status %+v", js)
	}
	s := tc.extractStatus(t, r.ID)
	if s.Status != "processing" || !s.Success || string(s.Data) != "[]" || s.CreditsUsed != 0 || s.ExpiresAt != "2026-11-29T12:00:00Z" {
		t.Fatalf("before the gate charged it: %+v", s)
	}

	// The gate collects a charge per page extracted, kind extract as
	// POST /v2/scrape's json format bills a page; the 404 page has none.
	charges := tc.collect(t, r.ID, func(pageCharge) string { return "1.000" })
	var urls []string
	for _, c := range charges {
		urls = append(urls, c.URL)
		if c.Account != testAccount || c.Usage.Kind != metering.KindExtract || c.Usage.Engine != metering.EngineHTTP ||
			c.Usage.Cache != metering.CacheMiss || c.Usage.InTokens != 0 || c.Usage.Count != nil {
			t.Errorf("charge %+v", c)
		}
	}
	slices.Sort(urls)
	if !slices.Equal(urls, []string{site.URL + "/tents/dome", site.URL + "/tents/ridge"}) {
		t.Fatalf("charged pages %v", urls)
	}

	s = tc.extractStatus(t, r.ID)
	if s.Status != "completed" || !s.Success || s.CreditsUsed != 2 || s.TokensUsed != 0 || s.Error != "" {
		t.Fatalf("completed: %+v", s)
	}
	// The first page's values, in the schema's order.
	if string(s.Data) != `{"name":"Ridge Tent","price":199,"currency":"EUR","in_stock":true}` {
		t.Errorf("data %s", s.Data)
	}
	ridge := []string{site.URL + "/tents/ridge"}
	if fmt.Sprint(s.Sources) != fmt.Sprint(map[string][]string{"name": ridge, "price": ridge, "currency": append(ridge, site.URL+"/tents/dome"), "in_stock": ridge}) {
		t.Errorf("sources %v", s.Sources)
	}
	if !strings.Contains(s.Warning, "1 of 3 pages") || !strings.Contains(s.Warning, site.URL+"/missing") || !strings.Contains(s.Warning, "404") {
		t.Errorf("warning %q", s.Warning)
	}

	// Another account's extraction, a native job, a malformed id: 404.
	resp, b := tc.do(t, "GET", "/v2/extract/"+r.ID, "", "acct_other", nil)
	if e := decode[extractStatus](t, b); resp.StatusCode != 404 || e.Success || e.Code != "NOT_FOUND" {
		t.Errorf("another account: %d %s", resp.StatusCode, b)
	}
	_, b = tc.post(t, "/scrape/jobs", `{"urls":["`+site.URL+`/about"]}`)
	native := decode[map[string]string](t, b)["job_id"]
	for _, id := range []string{native, "nope", "j_eu.c1.00000000000000000000"} {
		resp, b := tc.get(t, "/v2/extract/"+id)
		if e := decode[extractStatus](t, b); resp.StatusCode != 404 || e.Code != "NOT_FOUND" {
			t.Errorf("GET /v2/extract/%s: %d %s", id, resp.StatusCode, b)
		}
	}
	// Nor is an extraction a batch scrape.
	if resp, _ := tc.get(t, "/v2/batch/scrape/"+r.ID); resp.StatusCode != 404 {
		t.Errorf("an extraction as a batch scrape: %d", resp.StatusCode)
	}

	// A retry of its failed page through the native route charges
	// nothing at its start: the page is charged when it is extracted.
	resp, b = tc.postHeld(t, "/scrape/jobs/"+r.ID+"/retry", "")
	u, err := metering.Parse(resp.Header.Get(metering.Header))
	if err != nil || resp.StatusCode != 200 || u.Count == nil || *u.Count != 0 || u.Hold == "" || u.Job != r.ID {
		t.Fatalf("retry: %d %s, usage %+v (%v)", resp.StatusCode, b, u, err)
	}
	tc.release(t, resp)
	tc.waitJob(t, r.ID, func(s jobStatus) bool { return s.Status == "done" })
	if s := tc.extractStatus(t, r.ID); s.Status != "completed" || s.CreditsUsed != 2 {
		t.Errorf("after the retry: %+v", s)
	}
}

// Arrays are concatenated across pages, an equal row once; a page
// without a table adds nothing.
func TestV2ExtractMergesArrays(t *testing.T) {
	site := newTentSite(t)
	tc := newTestCell(t, nil)
	schema := `{"type":"object","properties":{"tents":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"price":{"type":"number"}}}}}}`
	body, _ := json.Marshal(map[string]any{"urls": []string{site.URL + "/tents/list1", site.URL + "/tents/list2"}, "schema": json.RawMessage(schema)})
	r := tc.startExtract(t, string(body))
	tc.waitJob(t, r.ID, func(s jobStatus) bool { return s.Status == "done" })
	tc.collect(t, r.ID, func(pageCharge) string { return "1.000" })
	s := tc.extractStatus(t, r.ID)
	var data struct {
		Tents []struct {
			Name  string  `json:"name"`
			Price float64 `json:"price"`
		} `json:"tents"`
	}
	if err := json.Unmarshal(s.Data, &data); err != nil || s.Status != "completed" {
		t.Fatalf("status %+v (%v)", s, err)
	}
	var names []string
	for _, x := range data.Tents {
		names = append(names, fmt.Sprintf("%s %g", x.Name, x.Price))
	}
	if want := []string{"Ridge Tent 199", "Dome Tent 149", "Tunnel Tent 249", "Bell Tent 399", "Pop-up Tent 59"}; !slices.Equal(names, want) {
		t.Errorf("tents %v, want %v", names, want)
	}
	if s.Sources != nil {
		t.Errorf("sources without showSources: %v", s.Sources)
	}
}

// A URL ending in /* is its site: the pages its map finds under that
// path, those matching the prompt first, at most limit.
func TestV2ExtractWildcard(t *testing.T) {
	site := newTentSite(t)
	tc := newTestCell(t, nil)
	body, _ := json.Marshal(map[string]any{"urls": []string{site.URL + "/tents/*"}, "schema": json.RawMessage(tentSchema),
		"prompt": "the ridge tent's price", "limit": 2})
	r := tc.startExtract(t, string(body))
	js := tc.waitJob(t, r.ID, func(s jobStatus) bool { return s.Status == "done" })
	_, b := tc.get(t, "/scrape/jobs/"+r.ID+"?full=1")
	full := decode[jobStatus](t, b)
	var urls []string
	for _, u := range full.URLs {
		urls = append(urls, u.URL)
	}
	if js.Total != 2 || len(urls) != 2 || !slices.Contains(urls, site.URL+"/tents/ridge") {
		t.Fatalf("pages %v", urls)
	}
	for _, u := range urls {
		if !strings.HasPrefix(u, site.URL+"/tents") {
			t.Errorf("a page outside /tents: %s", u)
		}
	}
	tc.collect(t, r.ID, func(pageCharge) string { return "1.000" })
	if s := tc.extractStatus(t, r.ID); s.Status != "completed" || !strings.Contains(string(s.Data), `"price":199`) {
		t.Errorf("status %+v %s", s, s.Data)
	}

	// A site that cannot be mapped: Firecrawl's map error, no job.
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	resp, b := tc.do(t, "POST", "/v2/extract", `{"urls":["`+gone.URL+`/*"],"prompt":"the price"}`, "", nil)
	if e := decode[extractStarted](t, b); resp.StatusCode != 502 || e.Code != "MAP_FAILED" {
		t.Errorf("an unmappable site: %d %s", resp.StatusCode, b)
	}
}

// With the operator's model: the page's Markdown and the system prompt
// go to it, its tokens are in the page's charge, and tokensUsed is their
// sum once charged.
func TestV2ExtractModelTokens(t *testing.T) {
	site := newTentSite(t)
	var prompts atomic.Value
	srv := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) {
		prompts.Store(fmt.Sprint(r.Body.Messages))
		llmtest.CompletionUsage(w, `{"data":{"name":"Ridge Tent","price":199}}`, 6000, 100)
	})
	client, err := llm.New(llm.Config{BaseURLs: map[string]string{"test": srv.URL + "/v1"}}, "test/m", "k")
	if err != nil {
		t.Fatal(err)
	}
	tc := newTestCell(t, func(c *Config) { c.Model = &extract.ModelConfig{Client: client} })
	body, _ := json.Marshal(map[string]any{"urls": []string{site.URL + "/tents/ridge", site.URL + "/tents/dome"},
		"prompt": "the tent's name and price", "systemPrompt": "Prices in euros."})
	r := tc.startExtract(t, string(body))
	tc.waitJob(t, r.ID, func(s jobStatus) bool { return s.Status == "done" })
	if p, _ := prompts.Load().(string); !strings.Contains(p, "Prices in euros.") || !strings.Contains(p, "the tent's name and price") || !strings.Contains(p, "Pitches in five minutes") && !strings.Contains(p, "light dome") {
		t.Errorf("the model's prompt: %.600s", p)
	}
	charges := tc.collect(t, r.ID, func(c pageCharge) string {
		// 1 (the page) + 2 × 0.5 (6,000 input tokens) + 2 (100 output).
		return "4.000"
	})
	if len(charges) != 2 {
		t.Fatalf("charges %+v", charges)
	}
	for _, c := range charges {
		if c.Usage.Kind != metering.KindExtract || c.Usage.InTokens != 6000 || c.Usage.OutTokens != 100 || !slices.Contains(c.Usage.Boxes, "llm") {
			t.Errorf("charge %+v", c)
		}
	}
	s := tc.extractStatus(t, r.ID)
	if s.Status != "completed" || s.TokensUsed != 12200 || s.CreditsUsed != 8 || string(s.Data) != `{"name":"Ridge Tent","price":199}` {
		t.Errorf("status %+v %s", s, s.Data)
	}
}

// Firecrawl's refusals: a wrong type names its JSON path, what trawl
// does not honour is UNSUPPORTED_FEATURE. None creates a job.
func TestV2ExtractRefusals(t *testing.T) {
	tc := newTestCell(t, nil)
	ok := `"urls":["http://a.example/"],"prompt":"the title"`
	tests := []struct{ name, body, code, path string }{
		{"urls not a list", `{"urls":"http://a.example/","prompt":"x"}`, "BAD_REQUEST", "urls"},
		{"prompt a number", `{"urls":["http://a.example/"],"prompt":3}`, "BAD_REQUEST", "prompt"},
		{"limit a string", `{` + ok + `,"limit":"3"}`, "BAD_REQUEST", "limit"},
		{"showSources a string", `{` + ok + `,"showSources":"yes"}`, "BAD_REQUEST", "showSources"},
		{"scrapeOptions.formats a string", `{` + ok + `,"scrapeOptions":{"formats":"markdown"}}`, "BAD_REQUEST", "scrapeOptions.formats"},
		{"schema not an object", `{"urls":["http://a.example/"],"schema":"price"}`, "BAD_REQUEST", "schema"},
		{"schema that does not compile", `{"urls":["http://a.example/"],"schema":{"type":"nope"}}`, "BAD_REQUEST", "schema"},
		{"prompt naming no field", `{"urls":["http://a.example/"],"prompt":"?"}`, "BAD_REQUEST", "prompt"},
		{"neither urls nor prompt", `{}`, "BAD_REQUEST", "urls"},
		{"a prompt without urls", `{"prompt":"the cheapest tent"}`, "UNSUPPORTED_FEATURE", "urls"},
		{"neither schema nor prompt", `{"urls":["http://a.example/"]}`, "UNSUPPORTED_FEATURE", "schema"},
		{"enableWebSearch", `{` + ok + `,"enableWebSearch":true}`, "UNSUPPORTED_FEATURE", "enableWebSearch"},
		{"agent", `{` + ok + `,"agent":{"model":"FIRE-1"}}`, "UNSUPPORTED_FEATURE", "agent"},
		{"systemPrompt without a model", `{` + ok + `,"systemPrompt":"be brief"}`, "UNSUPPORTED_FEATURE", "systemPrompt"},
		{"a prompt longer than the extractor's", `{"urls":["http://a.example/"],"prompt":"the title ` + strings.Repeat("x", 9000) + `"}`, "UNSUPPORTED_FEATURE", "prompt"},
		{"invalid URL not ignored", `{"urls":["http://a.example/","ftp://nope/"],"prompt":"the title","ignoreInvalidURLs":false}`, "BAD_REQUEST", "urls.1"},
		{"no valid URL", `{"urls":["ftp://nope/","not a url"],"prompt":"the title"}`, "BAD_REQUEST", "urls"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := tc.do(t, "POST", "/v2/extract", tt.body, "", nil)
			r := decode[extractStarted](t, b)
			if resp.StatusCode != 400 || r.Success || r.Code != tt.code || r.Error == "" {
				t.Fatalf("%d %s, want 400 %s", resp.StatusCode, b, tt.code)
			}
			if len(r.Details) == 0 || strings.Join(r.Details[0].Path, ".") != tt.path {
				t.Errorf("details %s, want the path %s", b, tt.path)
			}
			if resp.Header.Get(metering.Header) != "" {
				t.Errorf("a refusal carries usage %q", resp.Header.Get(metering.Header))
			}
		})
	}
	n := 0
	tc.store.Scan([]byte("ji/"), nil, func(_, _ []byte) (bool, error) { n++; return true, nil })
	if n != 0 {
		t.Fatalf("%d jobs stored after refusals", n)
	}
}

// waitExtract polls an extraction's status until cond holds.
func (tc *testCell) waitExtract(t *testing.T, id string, cond func(extractStatus) bool) extractStatus {
	t.Helper()
	var s extractStatus
	if err := testwait.Poll(60*time.Second, func() bool {
		s = tc.extractStatus(t, id)
		return cond(s)
	}); err != nil {
		t.Fatalf("extraction %s: %v; last %+v", id, err, s)
	}
	return s
}

// Every page failed: the extraction failed, saying why; nothing charged.
func TestV2ExtractEveryPageFailed(t *testing.T) {
	site := newTentSite(t)
	tc := newTestCell(t, nil)
	r := tc.startExtract(t, `{"urls":["`+site.URL+`/gone"],"schema":`+tentSchema+`}`)
	s := tc.waitExtract(t, r.ID, func(s extractStatus) bool { return s.Status != "processing" })
	if s.Status != "failed" || s.Success || !strings.Contains(s.Error, site.URL+"/gone") || s.CreditsUsed != 0 || string(s.Data) != "[]" {
		t.Errorf("status %+v %s", s, s.Data)
	}
	if cs := tc.collect(t, r.ID, func(pageCharge) string { return "1.000" }); len(cs) != 0 {
		t.Errorf("a failed page charged: %+v", cs)
	}
}

// An extraction of a clustered cell has an id that names no cell, and
// another cell of the region answers its status from the region's log
// as its owner does (the gate sends it there while the owner is down, or
// once the region's cells changed): processing until the owner has
// noted every page's charge acknowledged, then the same data, sources
// and credits; another account's 404.
func TestV2ExtractAnsweredByAnyCell(t *testing.T) {
	site := newTentSite(t)
	seed := startSeed(t)
	c1 := newClusteredTestCell(t, seed, "c1")
	c2 := newClusteredTestCell(t, seed, "c2")
	jsnodetest.WaitFor(t, 90*time.Second, "both cells sharing jobs", func() (bool, string) {
		return c1.jobs.Shared() && c2.jobs.Shared(), fmt.Sprintf("c1 %+v, c2 %+v", c1.JetStreamHealth(), c2.JetStreamHealth())
	})
	body, _ := json.Marshal(map[string]any{
		"urls":   []string{site.URL + "/tents/ridge", site.URL + "/tents/dome", site.URL + "/missing"},
		"schema": json.RawMessage(tentSchema), "showSources": true,
	})
	r := c1.startExtract(t, string(body))
	if region, cell, ok := jobid.Parse(r.ID); !ok || region != "eu" || cell != "" {
		t.Fatalf("a clustered cell's extraction id %q: region %q, cell %q", r.ID, region, cell)
	}
	c1.waitJob(t, r.ID, func(s jobStatus) bool { return s.Status == "done" })
	// Every page has its outcome, in the log too; the charges wait for
	// the gate.
	jsnodetest.WaitFor(t, 30*time.Second, "c2 reading the extraction's outcomes", func() (bool, string) {
		resp, b := c2.get(t, "/scrape/jobs/"+r.ID)
		s := decode[jobStatus](t, b)
		return resp.StatusCode == 200 && s.Status == "done", string(b)
	})
	if s := c2.extractStatus(t, r.ID); s.Status != "processing" || s.CreditsUsed != 0 {
		t.Fatalf("c2, before the gate charged the pages: %+v", s)
	}
	if cs := c1.collect(t, r.ID, func(pageCharge) string { return "1.500" }); len(cs) != 2 {
		t.Fatalf("%d charges, want 2", len(cs))
	}
	want := c1.extractStatus(t, r.ID)
	if want.Status != "completed" || want.CreditsUsed != 3 {
		t.Fatalf("c1, once charged: %+v", want)
	}
	got := c2.waitExtract(t, r.ID, func(s extractStatus) bool { return s.Status != "processing" })
	if got.Status != "completed" || got.CreditsUsed != 3 || string(got.Data) != string(want.Data) ||
		fmt.Sprint(got.Sources) != fmt.Sprint(want.Sources) || got.Warning != want.Warning || got.ExpiresAt != want.ExpiresAt {
		t.Errorf("c2 answers\n%+v %s\nc1 answers\n%+v %s", got, got.Data, want, want.Data)
	}
	if resp, b := c2.do(t, "GET", "/v2/extract/"+r.ID, "", "acct_other", nil); resp.StatusCode != 404 {
		t.Errorf("another account at c2: %d %s", resp.StatusCode, b)
	}

	// An extraction whose only page failed has nothing to charge: c2
	// says failed without waiting for a note.
	r = c1.startExtract(t, `{"urls":["`+site.URL+`/gone"],"schema":`+tentSchema+`}`)
	jsnodetest.WaitFor(t, 30*time.Second, "c2 reading the failed extraction's outcome", func() (bool, string) {
		resp, b := c2.get(t, "/scrape/jobs/"+r.ID)
		return resp.StatusCode == 200 && decode[jobStatus](t, b).Status == "done", string(b)
	})
	if s := c2.extractStatus(t, r.ID); s.Status != "failed" || !strings.Contains(s.Error, site.URL+"/gone") {
		t.Errorf("c2, a failed extraction: %+v", s)
	}
}

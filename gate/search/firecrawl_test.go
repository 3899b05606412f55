package search

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/members"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/internal/searchapi"
)

// fakeCell is a cell of the region at searchapi.LocalPath: it checks the
// gate's signature and signs its answer, as a real cell does. With
// scrape, it answers POST /v2/scrape too (signed the same way).
func fakeCell(t *testing.T, keys *regionauth.Keys, hits []searchapi.Hit, asked *atomic.Int32, scrape ...http.HandlerFunc) members.Meta {
	t.Helper()
	v := regionauth.NewVerifier(keys, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := v.Verify(r)
		if err == nil && r.URL.Path == "/v2/scrape" && len(scrape) > 0 {
			rec := httptest.NewRecorder()
			scrape[0](rec, r)
			for k, vs := range rec.Header() {
				w.Header()[k] = vs
			}
			w.Header().Set(regionauth.HeaderUsageSig, keys.SignAnswer(c.Nonce, rec.Code, rec.Header().Get(metering.Header)))
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
			return
		}
		if err != nil || r.URL.Path != searchapi.LocalPath {
			http.Error(w, "refused", http.StatusForbidden)
			return
		}
		asked.Add(1)
		n := 10
		fmt.Sscan(r.URL.Query().Get("n"), &n)
		out := searchapi.Local{Results: hits[:min(n, len(hits))]}
		b, _ := json.Marshal(out)
		w.Header().Set(regionauth.HeaderUsageSig, keys.SignAnswer(c.Nonce, http.StatusOK, ""))
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return members.Meta{Role: members.RoleCell, Region: "eu", Name: srv.URL[len(srv.URL)-5:], API: strings.TrimPrefix(srv.URL, "http://")}
}

func TestFirecrawlSearch(t *testing.T) {
	keys, err := regionauth.ParseKeys(regionauth.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	// Distinct pages: simhashes far apart (Collapse keeps them all).
	var a, b []searchapi.Hit
	for i := range 8 {
		a = append(a, searchapi.Hit{Title: fmt.Sprintf("A%d", i), URL: fmt.Sprintf("https://a.test/%d", i), Snippet: fmt.Sprintf("about <b>tea</b> %d", i), Score: float64(20 - 2*i), Sim: uint64(i+1) * 0x9E3779B97F4A7C15})
		b = append(b, searchapi.Hit{Title: fmt.Sprintf("B%d", i), URL: fmt.Sprintf("https://b.test/%d", i), Snippet: "b", Score: float64(19 - 2*i), Sim: uint64(i+101) * 0x9E3779B97F4A7C15})
	}
	b[1].Type, b[1].Date = "NewsArticle", time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	var asked atomic.Int32
	cells := []members.Meta{fakeCell(t, keys, a, &asked), fakeCell(t, keys, b, &asked)}
	hs := Handlers(Config{Cells: func() []members.Meta { return cells }, Keys: keys, Account: func(*http.Request) string { return "acct_1" }})
	mux, err := routes.Mux(routes.Default().Service("search"), hs, routes.MuxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gate := httptest.NewServer(mux)
	defer gate.Close()

	post := func(body string) (int, http.Header, map[string]any) {
		t.Helper()
		resp, err := http.Post(gate.URL+"/v2/search", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, m
	}
	usage := func(h http.Header) metering.Usage {
		t.Helper()
		var u metering.Usage
		if err := json.Unmarshal([]byte(h.Get(metering.Header)), &u); err != nil {
			t.Fatalf("usage header %q: %v", h.Get(metering.Header), err)
		}
		return u
	}

	// The default: five web results by score across cells, positions from 1,
	// billed as one search; unknown keys ignored.
	st, h, m := post(`{"query":"tea","origin":"js-sdk","highlights":true,"country":"us","ignoreInvalidURLs":true,"scrapeOptions":{}}`)
	if st != 200 || m["success"] != true {
		t.Fatalf("%d %v", st, m)
	}
	data := m["data"].(map[string]any)
	web := data["web"].([]any)
	var urls []string
	for i, x := range web {
		r := x.(map[string]any)
		urls = append(urls, r["url"].(string))
		if r["position"] != float64(i+1) || r["title"] == "" || r["description"] == nil {
			t.Errorf("web[%d] %v", i, r)
		}
	}
	if want := "https://a.test/0 https://b.test/0 https://a.test/1 https://b.test/1 https://a.test/2"; strings.Join(urls, " ") != want {
		t.Errorf("web %q, want %s", urls, want)
	}
	if web[0].(map[string]any)["description"] != "about <b>tea</b> 0" {
		t.Errorf("description is the snippet: %v", web[0])
	}
	if _, ok := data["news"]; ok {
		t.Errorf("news not asked: %v", data)
	}
	if u := usage(h); u.Kind != metering.KindSearch || u.Cache != metering.CacheMiss || u.Engine != EngineIndex {
		t.Errorf("usage %+v", u)
	}
	// Asked again: the archive, at GET /search's archive price, no cell asked.
	before := asked.Load()
	if st, h, _ := post(`{"query":"tea"}`); st != 200 || usage(h).Cache != metering.CacheArchive || asked.Load() != before {
		t.Errorf("again: %d %+v, cells asked %d times", st, usage(h), asked.Load()-before)
	}

	// limit, and news with web.
	st, _, m = post(`{"query":"tea","limit":12,"sources":["web",{"type":"news"}]}`)
	if st != 200 {
		t.Fatalf("%d %v", st, m)
	}
	data = m["data"].(map[string]any)
	if n := len(data["web"].([]any)); n != 12 {
		t.Errorf("limit 12: %d web results", n)
	}
	news := data["news"].([]any)
	if len(news) != 1 || news[0].(map[string]any)["url"] != "https://b.test/1" || news[0].(map[string]any)["date"] != "2026-05-01T00:00:00Z" {
		t.Errorf("news %v", news)
	}
	st, _, m = post(`{"query":"tea","limit":1}`)
	if st != 200 || len(m["data"].(map[string]any)["web"].([]any)) != 1 {
		t.Errorf("limit 1: %d %v", st, m)
	}

	// Refusals in Firecrawl's envelope, and never billed.
	for _, c := range []struct {
		body, code, path string
	}{
		{`{"query":"tea","limit":"3"}`, "BAD_REQUEST", "limit"},
		{`{"query":42}`, "BAD_REQUEST", "query"},
		{`{"query":"tea","scrapeOptions":{"formats":7}}`, "BAD_REQUEST", "scrapeOptions.formats"},
		{`{"query":"  "}`, "BAD_REQUEST", "query"},
		{`{"query":"tea","limit":101}`, "BAD_REQUEST", "limit"},
		{`{"query":"tea","limit":0}`, "BAD_REQUEST", "limit"},
		{`{"query":"tea","sources":["videos"]}`, "BAD_REQUEST", "sources.0"},
		{`{"query":"tea","sources":["web","images"]}`, "UNSUPPORTED_FEATURE", "sources.1"},
		{`{"query":"tea","sources":[{"type":"images"}]}`, "UNSUPPORTED_FEATURE", "sources.0"},
		{`{"query":"tea","tbs":"qdr:d"}`, "UNSUPPORTED_FEATURE", "tbs"},
		{`{"query":"tea","location":"Berlin,Germany"}`, "UNSUPPORTED_FEATURE", "location"},
		{`{"query":"tea","country":"DE"}`, "UNSUPPORTED_FEATURE", "country"},
		{`{"query":"tea","categories":["github"]}`, "UNSUPPORTED_FEATURE", "categories"},
		{`{"query":"tea","scrapeOptions":7}`, "BAD_REQUEST", "scrapeOptions"},
		{`{"query":"tea","scrapeOptions":{"formats":{"type":"markdown"}}}`, "BAD_REQUEST", "scrapeOptions.formats"},
		// Without the gate's pipeline (a bare handler), nothing to scrape with.
		{`{"query":"tea","scrapeOptions":{"formats":["markdown"]}}`, "INTERNAL_ERROR", ""},
	} {
		st, h, m := post(c.body)
		want := 400
		if c.code == "INTERNAL_ERROR" {
			want = 500
		}
		if st != want || m["success"] != false || m["code"] != c.code || h.Get(metering.Header) != "" {
			t.Errorf("%s: %d %v (usage %q)", c.body, st, m, h.Get(metering.Header))
			continue
		}
		d, _ := m["details"].([]any)
		if c.path == "" {
			continue
		}
		if len(d) != 1 || fmt.Sprint(d[0].(map[string]any)["path"]) != fmt.Sprint(strings.Split(c.path, ".")) {
			t.Errorf("%s: details %v, want path %s", c.body, m["details"], c.path)
		}
	}
}

// pipelineStub stands for the gate's pipeline in front of the cells, as
// the search's scrapes see it: it takes the caller's key (401 without
// it), counts the account's calls in flight against its plan's
// concurrency (the search request holds a place, as trawl_ratelimit
// counts it; over it, Firecrawl's envelope of too_many_concurrent with
// Retry-After), refuses a scrape once the account's credit is spent (402
// no_credit, as trawl_meter), sends the scrape to a cell signed with the
// region's keys (as trawl_route), and keeps a billing line for each
// answered scrape.
type pipelineStub struct {
	keys  *regionauth.Keys
	cells []members.Meta

	mu          sync.Mutex
	concurrency int // 0: no limit
	credit      int // scrapes the account can still pay for
	inflight    int
	maxInflight int
	next        int
	calls       []stubCall // every scrape call, as it came
	lines       []string   // the URLs charged, in order
	refused     map[int]int
}

type stubCall struct {
	auth, uri string
	body      map[string]any
	leaked    bool // the search request's context values reached it
}

const stubKey = "Bearer trawl_test_key"

type outerKey struct{}

func (g *pipelineStub) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.concurrency > 0 && g.inflight >= g.concurrency {
		return false
	}
	g.inflight++
	g.maxInflight = max(g.maxInflight, g.inflight)
	return true
}

func (g *pipelineStub) leave() {
	g.mu.Lock()
	g.inflight--
	g.mu.Unlock()
}

func (g *pipelineStub) refuse(w http.ResponseWriter, status int, code, msg string) {
	g.mu.Lock()
	g.refused[status]++
	g.mu.Unlock()
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"success": false, "error": msg, "code": code})
}

// front is the pipeline before the search's own handler.
func (g *pipelineStub) front(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != stubKey {
			g.refuse(w, http.StatusUnauthorized, "unauthorized", "no key")
			return
		}
		if !g.enter() {
			g.refuse(w, http.StatusTooManyRequests, "too_many_concurrent", "busy")
			return
		}
		defer g.leave()
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), outerKey{}, "the search request")))
	})
}

// ServeHTTP is a scrape through the pipeline.
func (g *pipelineStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	c := stubCall{auth: r.Header.Get("Authorization"), uri: r.Method + " " + r.RequestURI, leaked: r.Context().Value(outerKey{}) != nil}
	json.Unmarshal(b, &c.body)
	g.mu.Lock()
	g.calls = append(g.calls, c)
	g.mu.Unlock()
	if c.auth != stubKey {
		g.refuse(w, http.StatusUnauthorized, "unauthorized", "no key")
		return
	}
	if !g.enter() {
		g.refuse(w, http.StatusTooManyRequests, "too_many_concurrent", "Too many requests at once")
		return
	}
	defer g.leave()
	g.mu.Lock()
	credit := g.credit
	cell := g.cells[g.next%len(g.cells)]
	g.next++
	g.mu.Unlock()
	if credit <= 0 {
		g.refuse(w, http.StatusPaymentRequired, "no_credit", "Your balance is 0.000 credits")
		return
	}
	req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, "http://"+cell.API+"/v2/scrape", bytes.NewReader(b))
	a, err := g.keys.Do(http.DefaultClient, req, regionauth.Claims{Account: "acct_1"}, time.Now(), 1<<20)
	if err != nil {
		g.refuse(w, http.StatusBadGateway, "cell_unavailable", err.Error())
		return
	}
	if a.Status == http.StatusOK && a.Usage != "" {
		g.mu.Lock()
		g.credit--
		g.lines = append(g.lines, c.body["url"].(string))
		g.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.Status)
	w.Write(a.Body)
}

func (g *pipelineStub) reset(concurrency, credit int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.concurrency, g.credit, g.maxInflight = concurrency, credit, 0
	g.calls, g.lines, g.refused = nil, nil, map[int]int{}
}

func (g *pipelineStub) snapshot() (calls []stubCall, lines []string, refused map[int]int, maxInflight, credit int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.calls), slices.Clone(g.lines), maps.Clone(g.refused), g.maxInflight, g.credit
}

// Issue 30: scrapeOptions on POST /v2/search. Each result is scraped as
// POST /v2/scrape through the gate's pipeline with the caller's key, at
// most a few at once and within the account's concurrency, each billed
// as a scrape; the document's fields are merged into the result; a failed
// scrape leaves Firecrawl's metadata; the first result's refusal of the
// options is the search's 400; no credit stops the scrapes; the search's
// timeout bounds them.
func TestFirecrawlSearchScrapes(t *testing.T) {
	keys, err := regionauth.ParseKeys(regionauth.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	var a, b []searchapi.Hit
	for i := range 8 {
		a = append(a, searchapi.Hit{Title: fmt.Sprintf("A%d", i), URL: fmt.Sprintf("https://a.test/%d", i), Snippet: fmt.Sprintf("about <b>tea</b> %d", i), Score: float64(20 - 2*i), Sim: uint64(i+1) * 0x9E3779B97F4A7C15})
		b = append(b, searchapi.Hit{Title: fmt.Sprintf("B%d", i), URL: fmt.Sprintf("https://b.test/%d", i), Snippet: "b", Score: float64(19 - 2*i), Sim: uint64(i+101) * 0x9E3779B97F4A7C15})
	}
	b[1].Type = "NewsArticle"
	var broken, slow atomic.Bool
	broken.Store(true)
	// The cells' POST /v2/scrape: a document, Firecrawl's refusal of an
	// unknown format, a failed fetch of a.test/1 while broken, a page
	// that never answers (a.test/2 while slow).
	scrape := func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			URL     string `json:"url"`
			Formats []any  `json:"formats"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		for i, f := range req.Formats {
			if f == "bogus" {
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintf(w, `{"success":false,"code":"BAD_REQUEST","error":"Bad Request: unknown format \"bogus\"","details":[{"path":["formats","%d"],"message":"unknown format \"bogus\""}]}`, i)
				return
			}
		}
		switch {
		case req.URL == "https://a.test/1" && broken.Load():
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, `{"success":false,"code":"SCRAPE_FAILED","error":"the site did not answer"}`)
			return
		case req.URL == "https://a.test/2" && slow.Load():
			<-r.Context().Done()
			return
		}
		w.Header().Set(metering.Header, metering.Usage{Kind: metering.KindScrape, Engine: "http", Cache: metering.CacheMiss}.String())
		fmt.Fprintf(w, `{"success":true,"data":{"markdown":"# page %[1]s","links":["%[1]s/next"],"metadata":{"title":"page <b>%[1]s</b>","sourceURL":"%[1]s","url":"%[1]s","statusCode":200,"proxyUsed":"basic"}}}`, req.URL)
	}
	var asked atomic.Int32
	cells := []members.Meta{fakeCell(t, keys, a, &asked, scrape), fakeCell(t, keys, b, &asked, scrape)}
	stub := &pipelineStub{keys: keys, cells: cells}
	hs := Handlers(Config{
		Cells: func() []members.Meta { return cells }, Keys: keys, Account: func(*http.Request) string { return "acct_1" },
		Pipeline: func(context.Context) http.Handler { return stub },
	})
	mux, err := routes.Mux(routes.Default().Service("search"), hs, routes.MuxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gate := httptest.NewServer(stub.front(mux))
	defer gate.Close()
	post := func(body string) (int, http.Header, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, gate.URL+"/v2/search", strings.NewReader(body))
		req.Header.Set("Authorization", stubKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, m
	}
	results := func(m map[string]any, source string) []map[string]any {
		t.Helper()
		var out []map[string]any
		for _, x := range m["data"].(map[string]any)[source].([]any) {
			out = append(out, x.(map[string]any))
		}
		return out
	}
	scraped := func(r map[string]any) bool {
		md, _ := r["markdown"].(string)
		return md == "# page "+r["url"].(string)
	}

	// Web and news, the plan allowing two calls at once (the search holds
	// one, so its scrapes go one at a time, four workers waiting their
	// turn). b.test/1 is both a web and a news result: scraped once.
	stub.reset(2, 100)
	body := `{"query":"tea","limit":4,"sources":["web","news"],"scrapeOptions":{"formats":["markdown","links"],"onlyMainContent":false}}`
	st, h, m := post(body)
	if st != 200 || m["success"] != true {
		t.Fatalf("%d %v", st, m)
	}
	if u := h.Get(metering.Header); !strings.Contains(u, `"kind":"search"`) || !strings.Contains(u, `"cache":"miss"`) {
		t.Errorf("the search is billed as without scrapes: %s", u)
	}
	web, news := results(m, "web"), results(m, "news")
	if len(web) != 4 || len(news) != 1 {
		t.Fatalf("web %v news %v", web, news)
	}
	for i, r := range web {
		if r["position"] != float64(i+1) || r["title"] == "" || r["description"] == "" {
			t.Errorf("web[%d] lost its search fields: %v", i, r)
		}
		if r["url"] == "https://a.test/1" {
			// The failed scrape: Firecrawl's metadata, no document.
			md, _ := r["metadata"].(map[string]any)
			if _, ok := r["markdown"]; ok || md["statusCode"] != float64(502) || md["error"] != "the site did not answer" || md["proxyUsed"] != "basic" {
				t.Errorf("a failed scrape: %v", r)
			}
			continue
		}
		md, _ := r["metadata"].(map[string]any)
		if !scraped(r) || fmt.Sprint(r["links"]) != "["+r["url"].(string)+"/next]" || md["sourceURL"] != r["url"] || !strings.HasPrefix(r["title"].(string), strings.ToUpper(r["url"].(string)[8:9])) {
			t.Errorf("web[%d] not merged with its document: %v", i, r)
		}
	}
	if web[0]["description"] != "about <b>tea</b> 0" || web[0]["metadata"].(map[string]any)["title"] != "page <b>https://a.test/0</b>" {
		t.Errorf("marks unescaped: %v", web[0])
	}
	if !scraped(news[0]) || news[0]["snippet"] != "b" {
		t.Errorf("news: %v", news[0])
	}
	calls, lines, refused, most, _ := stub.snapshot()
	forwarded := map[string]int{}
	for _, c := range calls {
		if c.auth != stubKey || c.uri != "POST /v2/scrape" || c.leaked {
			t.Errorf("a scrape not sent as the caller's own /v2/scrape: %+v", c)
		}
		if fmt.Sprint(c.body["formats"]) != "[markdown links]" || c.body["onlyMainContent"] != false || c.body["maxAge"] != float64(3*24*3600*1000) {
			t.Errorf("options not forwarded as sent (with Firecrawl's maxAge): %v", c.body)
		}
		forwarded[c.body["url"].(string)]++
	}
	if len(forwarded) != 4 || most > 2 || refused[http.StatusPaymentRequired] != 0 {
		t.Errorf("scraped %v (calls %d, %v refused), at most %d in flight", forwarded, len(calls), refused, most)
	}
	if want := "https://a.test/0"; len(lines) != 3 || lines[0] != want || slices.Contains(lines, "https://a.test/1") {
		t.Errorf("billing lines %q: want one per document, a.test/0 first", lines)
	}

	// Again: the search from the archive, its results scraped anew, each
	// billed again.
	stub.reset(2, 100)
	if st, h, m = post(body); st != 200 || !strings.Contains(h.Get(metering.Header), `"cache":"archive"`) || !scraped(results(m, "web")[0]) {
		t.Errorf("again: %d %s %v", st, h.Get(metering.Header), m)
	}
	if _, lines, _, _, _ := stub.snapshot(); len(lines) != 3 {
		t.Errorf("again: billing lines %q", lines)
	}

	// Options the cell refuses: the search's 400, the field under
	// scrapeOptions, from the first result's scrape alone; nothing billed.
	stub.reset(0, 100)
	st, h, m = post(`{"query":"tea","limit":5,"scrapeOptions":{"formats":["markdown","bogus"]}}`)
	calls, lines, _, _, _ = stub.snapshot()
	if st != 400 || m["code"] != "BAD_REQUEST" || h.Get(metering.Header) != "" || len(calls) != 1 || len(lines) != 0 {
		t.Errorf("refused options: %d %v usage %q, %d scrapes", st, m, h.Get(metering.Header), len(calls))
	} else if d := m["details"].([]any)[0].(map[string]any); fmt.Sprint(d["path"]) != "[scrapeOptions formats 1]" {
		t.Errorf("refused options: details %v", d)
	}

	// Credit for two scrapes: the third is refused (402) and no other
	// starts; the search itself is answered and billed, the results not
	// scraped carry the refusal.
	broken.Store(false)
	stub.reset(2, 2)
	st, h, m = post(`{"query":"tea","limit":5,"scrapeOptions":{"formats":["markdown"]}}`)
	if st != 200 || h.Get(metering.Header) == "" {
		t.Fatalf("no credit: %d %v", st, m)
	}
	var ok, noCredit int
	for _, r := range results(m, "web") {
		md, _ := r["metadata"].(map[string]any)
		switch {
		case scraped(r):
			ok++
		case md["statusCode"] == float64(402) && md["error"] != "":
			noCredit++
		default:
			t.Errorf("no credit: %v", r)
		}
	}
	calls, lines, refused, _, credit := stub.snapshot()
	if !scraped(results(m, "web")[0]) || ok != 2 || noCredit != 3 || len(lines) != 2 || credit != 0 {
		t.Errorf("no credit: %d scraped, %d refused, lines %q", ok, noCredit, lines)
	}
	// At most the workers already waiting for a place ask again.
	if n := refused[http.StatusPaymentRequired]; n < 1 || n > 4 {
		t.Errorf("no credit: %d scrapes refused with 402 (calls %d)", n, len(calls))
	}

	// The search's timeout bounds the scrapes: a page that never answers
	// is the result's 408, the others are answered.
	slow.Store(true)
	stub.reset(0, 100)
	start := time.Now()
	st, _, m = post(`{"query":"tea","limit":5,"timeout":1500,"scrapeOptions":{"formats":["markdown"]}}`)
	if st != 200 || time.Since(start) > 10*time.Second {
		t.Fatalf("timeout: %d after %v: %v", st, time.Since(start), m)
	}
	for _, r := range results(m, "web") {
		md, _ := r["metadata"].(map[string]any)
		if r["url"] == "https://a.test/2" {
			if md["statusCode"] != float64(408) || scraped(r) {
				t.Errorf("timeout: the page that never answered: %v", r)
			}
		} else if !scraped(r) {
			t.Errorf("timeout: %v", r)
		}
	}
}

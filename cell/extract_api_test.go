package cell

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/trawlhq/trawl/cell/extract"
	"github.com/trawlhq/trawl/cell/llm"
	"github.com/trawlhq/trawl/cell/llm/llmtest"
	"github.com/trawlhq/trawl/internal/metering"
)

type extractResp struct {
	OK      bool           `json:"ok"`
	URL     string         `json:"url"`
	Data    map[string]any `json:"data"`
	MS      *int64         `json:"ms"`
	Error   string         `json:"error"`
	Message string         `json:"message"`
}

const productSchema = `{"type":"object","properties":{"name":{"type":"string"},"price":{"type":"number"},"in_stock":{"type":"boolean"},"release_date":{"type":"string","format":"date"},"sku":{"type":"string"},"email":{"type":"string","format":"email"},"related":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"price":{"type":"number"},"url":{"type":"string"}}}}}}`

func productSite(t *testing.T) *httptest.Server {
	page, err := os.ReadFile("extract/testdata/product.html")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(page)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Issue 16: /extract from a URL with a schema, no model: the page's own
// values, typed; the usage report bills the fetch; a repeat is a cache hit.
func TestExtractFromURL(t *testing.T) {
	tc := newTestCell(t, nil)
	site := productSite(t)
	body := `{"url":"` + site.URL + `/p/ridge","schema":` + productSchema + `,"model":"x","provider":"y","api_key":"z"}`
	resp, b := tc.post(t, "/extract", body)
	if resp.StatusCode != 200 {
		t.Fatalf("extract: %d %s", resp.StatusCode, b)
	}
	r := decode[extractResp](t, b)
	want := map[string]any{"name": "Ridge Tent 2P", "price": 1299.0, "in_stock": true, "release_date": "2024-03-03", "sku": "RT-2P", "email": "help@shop.example"}
	for k, v := range want {
		if r.Data[k] != v {
			t.Errorf("%s = %#v, want %#v", k, r.Data[k], v)
		}
	}
	rel, _ := r.Data["related"].([]any)
	if len(rel) != 3 || fmt.Sprint(rel[1]) != "map[name:Camp Stove price:1020 url:"+site.URL+"/p/2]" {
		t.Errorf("related = %v", r.Data["related"])
	}
	if !r.OK || r.URL != site.URL+"/p/ridge" || r.MS == nil {
		t.Errorf("answer %s", b)
	}
	u, err := metering.Parse(resp.Header.Get(metering.Header))
	if err != nil || u.Kind != metering.KindExtract || u.Engine != metering.EngineHTTP || u.Cache != metering.CacheMiss || len(u.Lines) != 1 || u.Lines[0].Call != "scrape" || u.InTokens != 0 {
		t.Errorf("usage %q", resp.Header.Get(metering.Header))
	}
	resp, _ = tc.post(t, "/extract", body)
	if u, _ := metering.Parse(resp.Header.Get(metering.Header)); u.Cache != metering.CacheHit {
		t.Errorf("repeat usage %q", resp.Header.Get(metering.Header))
	}
}

// Pasted HTML, Markdown and text; instruction alone; example alone.
func TestExtractFromContent(t *testing.T) {
	tc := newTestCell(t, nil)
	md := "# Ridge Tent\n\n| Spec | Value |\n|---|---|\n| Price | $199.00 |\n| Weight | 2.1 kg |\n\nIn stock: yes\n"
	text := "Ridge Tent\nPrice: 199 USD\nContact: sales@example.com\nPublished: 3 March 2024\n"
	cases := []struct {
		name, body string
		want       map[string]any
	}{
		{"html", `{"content":` + js(`<html><body><h1>Ridge Tent</h1><p>Price: $199.00</p></body></html>`) + `,"schema":{"type":"object","properties":{"title":{"type":"string"},"price":{"type":"number"}}}}`,
			map[string]any{"title": "Ridge Tent", "price": 199.0}},
		{"markdown", `{"content":` + js(md) + `,"schema":{"type":"object","properties":{"name":{"type":"string"},"price":{"type":"number"},"weight":{"type":"string"},"in_stock":{"type":"boolean"}}}}`,
			map[string]any{"name": "Ridge Tent", "price": 199.0, "weight": "2.1 kg", "in_stock": true}},
		{"text instruction", `{"content":` + js(text) + `,"instruction":"the price, the contact email and the published date"}`,
			map[string]any{"price": 199.0, "contact_email": "sales@example.com", "published_date": "2024-03-03"}},
		{"example", `{"content":` + js(text) + `,"example":{"price":1,"contact":"a@b.c"}}`,
			map[string]any{"price": 199.0, "contact": "sales@example.com"}},
		{"never invents", `{"content":` + js(text) + `,"schema":{"type":"object","properties":{"author":{"type":"string"},"rating":{"type":"number"}}}}`,
			map[string]any{"author": nil, "rating": nil}},
	}
	for _, c := range cases {
		resp, b := tc.post(t, "/extract", c.body)
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", c.name, resp.StatusCode, b)
			continue
		}
		r := decode[extractResp](t, b)
		for k, v := range c.want {
			if got, ok := r.Data[k]; !ok || got != v {
				t.Errorf("%s: %s = %#v, want %#v (%s)", c.name, k, got, v, b)
			}
		}
		if u, _ := metering.Parse(resp.Header.Get(metering.Header)); u.Kind != metering.KindExtract || u.Engine != "content" {
			t.Errorf("%s: usage %q", c.name, resp.Header.Get(metering.Header))
		}
	}
}

func js(s string) string { b, _ := json.Marshal(s); return string(b) }

// Bad requests: 400/413 with a clear error, no usage (nothing charged).
func TestExtractRefusals(t *testing.T) {
	tc := newTestCell(t, nil)
	big := strings.Repeat("a", extract.MaxContent+1)
	cases := []struct {
		body   string
		status int
		msg    string
	}{
		{`{"schema":{"type":"object"}}`, 400, "one of url or content"},
		{`{"content":"x"}`, 400, "one of instruction or schema"},
		{`{"content":"x","schema":{"type":"object","properties":{"a":{"type":"strin"}}}}`, 400, "schema does not compile"},
		{`{"content":"x","schema":{"$ref":"file:///etc/passwd"}}`, 400, "schema does not compile"},
		{`{"content":"x","instruction":"!!!"}`, 400, "names no field"},
		{`{"content":` + js(big) + `,"instruction":"the title"}`, 413, "at most"},
		{`{"url":"ftp://x/","instruction":"the title"}`, 400, ""},
		{`{"content":"x","schema":"nope"}`, 400, ""},
		{`{"content":"x","instruction":"the title","extra":1}`, 400, "extra"},
	}
	for _, c := range cases {
		resp, b := tc.post(t, "/extract", c.body)
		r := decode[extractResp](t, b)
		if resp.StatusCode != c.status || r.Error == "" || !strings.Contains(r.Message, c.msg) {
			t.Errorf("%.80s: %d %s", c.body, resp.StatusCode, b)
		}
		if h := resp.Header.Get(metering.Header); h != "" {
			t.Errorf("%.80s: refused but usage %q", c.body, h)
		}
	}
	// A site that does not answer: as /scrape, 502 and nothing charged.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	resp, b := tc.post(t, "/extract", `{"url":"http://`+dead+`/","instruction":"the title"}`)
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get(metering.Header) != "" {
		t.Errorf("dead site: %d %s", resp.StatusCode, b)
	}
}

func modelCell(t *testing.T, srv *llmtest.Server, mod func(*extract.ModelConfig)) *testCell {
	client, err := llm.New(llm.Config{BaseURLs: map[string]string{"test": srv.URL + "/v1"}, RetryBase: 1}, "test/model-1", "secret-key")
	if err != nil {
		t.Fatal(err)
	}
	mc := &extract.ModelConfig{Client: client}
	if mod != nil {
		mod(mc)
	}
	return newTestCell(t, func(c *Config) { c.Model = mc })
}

// The model path: the request's shape (model, temperature 0, json_schema
// with the caller's schema, the page's Markdown), tokens from the
// server's usage on the report, one line per call.
func TestExtractWithModel(t *testing.T) {
	srv := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) {
		llmtest.CompletionUsage(w, `{"data":{"name":"Ridge Tent 2P","price":"not a number"}}`, 1200, 30)
	})
	tc := modelCell(t, srv, nil)
	site := productSite(t)
	resp, b := tc.post(t, "/extract", `{"url":"`+site.URL+`/p","instruction":"name and price","schema":{"type":"object","properties":{"name":{"type":"string"},"price":{"type":"number"}}}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	r := decode[extractResp](t, b)
	// The price failed validation twice (answer and repair): null.
	if r.Data["name"] != "Ridge Tent 2P" || r.Data["price"] != nil {
		t.Errorf("data %v", r.Data)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want the call and one repair", len(reqs))
	}
	first := reqs[0]
	rf, _ := first.Raw["response_format"].(map[string]any)
	if first.Body.Model != "model-1" || first.Raw["temperature"] != 0.0 || rf["type"] != "json_schema" || first.Auth != "Bearer secret-key" ||
		!strings.Contains(fmt.Sprint(rf), "price") || !strings.Contains(first.Body.Messages[1].Content, "Ridge Tent 2P") ||
		strings.Contains(first.Body.Messages[1].Content, "<h1>") {
		t.Errorf("request %+v", first.Raw)
	}
	u, _ := metering.Parse(resp.Header.Get(metering.Header))
	if u.InTokens != 2400 || u.OutTokens != 60 || len(u.Lines) != 3 || u.Lines[1].Step != "chunk 1/1" || u.Lines[2].Step != "repair 1/1" {
		t.Errorf("usage %q", resp.Header.Get(metering.Header))
	}
}

// A 200 kB page is cut into chunks that overlap, asked concurrently
// within the bound, with a 429 retried after its Retry-After, and the
// answers merged: arrays joined without duplicates, objects field by
// field. A server without json_schema gets JSON mode.
func TestExtractChunksAndMerges(t *testing.T) {
	var inFlight, peak atomic.Int32
	srv := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) {
		cur := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); cur > p && !peak.CompareAndSwap(p, cur); p = peak.Load() {
		}
		rf, _ := r.Raw["response_format"].(map[string]any)
		if rf["type"] == "json_schema" {
			llmtest.APIError(w, 400, "response_format json_schema is not supported")
			return
		}
		if n == 3 {
			w.Header().Set("Retry-After", "0")
			llmtest.APIError(w, 429, "slow down")
			return
		}
		msg := r.Body.Messages[len(r.Body.Messages)-1].Content
		var part int
		fmt.Sscanf(msg[strings.Index(msg, "part ")+5:], "%d", &part)
		llmtest.CompletionUsage(w, fmt.Sprintf(`{"data":{"title":%s,"items":["shared","item %d"]}}`, map[bool]string{true: `"The Title"`, false: "null"}[part == 2], part), 100, 10)
	})
	tc := modelCell(t, srv, func(m *extract.ModelConfig) { m.ChunkTokens = 6000; m.Concurrency = 2 })
	var page strings.Builder
	for i := 0; page.Len() < 200<<10; i++ {
		fmt.Fprintf(&page, "Paragraph %d of a long page, with enough words to fill the chunk in good time.\n\n", i)
	}
	resp, b := tc.post(t, "/extract", `{"content":`+js(page.String())+`,"schema":{"type":"object","properties":{"title":{"type":"string"},"items":{"type":"array","items":{"type":"string"}}}}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	r := decode[extractResp](t, b)
	items, _ := r.Data["items"].([]any)
	chunks := len(llm.ChunkTokens(page.String(), 6000, extract.DefaultOverlapTokens, extract.DefaultMaxChunks))
	if chunks < 9 || r.Data["title"] != "The Title" || len(items) != chunks+1 || items[0] != "shared" {
		t.Errorf("%d chunks; data %v", chunks, r.Data)
	}
	if p := peak.Load(); p > 2 {
		t.Errorf("%d calls in flight, bound 2", p)
	}
	u, _ := metering.Parse(resp.Header.Get(metering.Header))
	if u.InTokens != 100*chunks || len(u.Lines) != chunks {
		t.Errorf("usage %q", resp.Header.Get(metering.Header))
	}
	// Overlap: each chunk after the first repeats the end of the one before.
	reqs := srv.Requests()
	var second string
	for _, q := range reqs {
		if c := q.Body.Messages[len(q.Body.Messages)-1].Content; strings.Contains(c, "part 2 of") {
			second = c
		}
	}
	if !strings.Contains(second, "Paragraph") || second == "" {
		t.Errorf("no second chunk")
	}
}

// With a model, an instruction alone lets the model shape the data: no
// schema is imposed beyond "an object or an array".
func TestExtractModelInstructionOnly(t *testing.T) {
	srv := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) {
		llmtest.CompletionUsage(w, `{"data":[{"product":"Ridge Tent","colours":["green","sand"]}]}`, 300, 20)
	})
	tc := modelCell(t, srv, nil)
	resp, b := tc.post(t, "/extract", `{"content":"# Ridge Tent\n\nIn green and sand.","instruction":"every product with its colours","example":null}`)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"data":[{"colours":["green","sand"],"product":"Ridge Tent"}]`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	msg := srv.Requests()[0].Body.Messages[1].Content
	if !strings.Contains(msg, "every product with its colours") || !strings.Contains(msg, "Choose the structure") {
		t.Errorf("prompt %q", msg)
	}
}

package regiontest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/cell"
	"github.com/trawlhq/trawl/cell/extract"
	"github.com/trawlhq/trawl/cell/llm"
	"github.com/trawlhq/trawl/cell/llm/llmtest"
	"github.com/trawlhq/trawl/ledger"
)

const extractPage = `<!doctype html><html><head><title>Ridge Tent | Shop</title>
<script type="application/ld+json">{"@context":"https://schema.org","@graph":[{"@type":"WebSite","name":"Shop"},
{"@type":"Product","name":"Ridge Tent","offers":{"@type":"Offer","price":"199.00","priceCurrency":"EUR","availability":"https://schema.org/InStock"}}]}</script>
</head><body><main><h1>Ridge Tent</h1><p>A tent for two, with a porch and a footprint.</p></main></body></html>`

type extractAnswer struct {
	OK    bool           `json:"ok"`
	URL   string         `json:"url"`
	Data  map[string]any `json:"data"`
	Usage map[string]any `json:"usage"`
	MS    *int64         `json:"ms"`
}

// Issue 16: /extract through the gate: the usage object (units, cache,
// engine, total_tokens, lines) equal to the history's line of its
// receipt; a cache hit is free; refused requests cost nothing.
func TestExtractBilledThroughTheGate(t *testing.T) {
	g := Start(t, Options{})
	pages := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, extractPage)
	}))
	t.Cleanup(pages.Close)
	key := g.Account(t, ledger.PlanFree, 100)
	schema := `{"type":"object","properties":{"name":{"type":"string"},"price":{"type":"number"},"currency":{"type":"string"},"in_stock":{"type":"boolean"}}}`
	r := call(t, "POST", g.URL+"/extract", key, `{"url":"`+pages.URL+`/tent","schema":`+schema+`}`)
	var a extractAnswer
	if err := json.Unmarshal([]byte(r.body), &a); r.status != 200 || err != nil {
		t.Fatalf("extract: %d %v %s", r.status, err, r.body)
	}
	if fmt.Sprint(a.Data) != "map[currency:EUR in_stock:true name:Ridge Tent price:199]" || !a.OK || a.URL != pages.URL+"/tent" {
		t.Errorf("data %s", r.body)
	}
	lines, _ := a.Usage["lines"].([]any)
	if a.Usage["units"] != "1.000" || r.header.Get("X-Svc-Cost") != "1.000" || a.Usage["receipt"] != r.header.Get("X-Svc-Receipt") ||
		a.Usage["cache"] != "miss" || a.Usage["engine"] != "http" || a.Usage["total_tokens"] != 0.0 || len(lines) != 1 ||
		!strings.Contains(fmt.Sprint(lines[0]), "call:scrape") || a.Usage["llm_tokens"] != nil {
		t.Errorf("usage %v (cost %q)", a.Usage, r.header.Get("X-Svc-Cost"))
	}
	history := usageLines(t, g, key)
	sameAsHistory(t, "extract", a.Usage, history)

	// The same page again: served from the cache, free as a /scrape hit
	// is (the price table prices a hit at 0; tokens would still bill).
	r = call(t, "POST", g.URL+"/extract", key, `{"url":"`+pages.URL+`/tent","schema":`+schema+`}`)
	var hit extractAnswer
	if json.Unmarshal([]byte(r.body), &hit); hit.Usage["cache"] != "hit" || hit.Usage["units"] != "0.000" || fmt.Sprint(hit.Data) != fmt.Sprint(a.Data) {
		t.Errorf("hit: %s", r.body)
	}

	// Refused: nothing charged.
	for _, body := range []string{`{"schema":{}}`, `{"content":"x"}`, `{"content":"x","schema":{"type":"nope"}}`, `{"url":"http://127.0.0.1:1/","instruction":"the title"}`} {
		r := call(t, "POST", g.URL+"/extract", key, body)
		if r.status < 400 || r.header.Get("X-Svc-Cost") != "0.000" || !strings.Contains(r.body, `"error"`) {
			t.Errorf("%s: %d cost %q %s", body, r.status, r.header.Get("X-Svc-Cost"), r.body)
		}
	}
}

// With the operator's model: tokens from the model server's usage are
// billed per 5,000, input and output priced apart (0.5 and 2 credits in
// the launch table), and shown as llm_tokens, total_tokens and one line
// per call.
func TestExtractModelTokensBilled(t *testing.T) {
	srv := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) {
		llmtest.CompletionUsage(w, `{"data":{"name":"Ridge Tent"}}`, 6000, 100)
	})
	client, err := llm.New(llm.Config{BaseURLs: map[string]string{"test": srv.URL + "/v1"}}, "test/m", "k")
	if err != nil {
		t.Fatal(err)
	}
	g := Start(t, Options{Cell: func(c *cell.Config) { c.Model = &extract.ModelConfig{Client: client} }})
	key := g.Account(t, ledger.PlanFree, 100)
	r := call(t, "POST", g.URL+"/extract", key, `{"content":"# Ridge Tent\n\nA tent.","instruction":"the name"}`)
	var a extractAnswer
	if err := json.Unmarshal([]byte(r.body), &a); r.status != 200 || err != nil || a.Data["name"] != "Ridge Tent" {
		t.Fatalf("extract: %d %v %s", r.status, err, r.body)
	}
	// 1 (the call, light) + 2 × 0.5 (6,000 input tokens) + 2 (100 output tokens).
	if r.header.Get("X-Svc-Cost") != "4.000" || a.Usage["units"] != "4.000" || a.Usage["total_tokens"] != 6100.0 ||
		fmt.Sprint(a.Usage["llm_tokens"]) != "map[in:6000 out:100]" || !strings.Contains(fmt.Sprint(a.Usage["lines"]), "step:chunk 1/1") ||
		!strings.Contains(fmt.Sprint(a.Usage["boxes"]), "llm") {
		t.Errorf("usage %v, cost %q", a.Usage, r.header.Get("X-Svc-Cost"))
	}
	sameAsHistory(t, "extract", a.Usage, usageLines(t, g, key))
}

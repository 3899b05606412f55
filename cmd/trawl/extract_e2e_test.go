package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/cell/llm/llmtest"
)

type extractAnswer struct {
	OK    bool           `json:"ok"`
	URL   string         `json:"url"`
	Data  map[string]any `json:"data"`
	Usage map[string]any `json:"usage"`
}

func startDev(t *testing.T, args ...string) *proc {
	t.Helper()
	gateAddr := fmt.Sprintf("127.0.0.1:%d", freeRun(t, 1))
	return launch(t, []string{"TRAWL_DEV_KEY=" + e2eKey, "TEST_API_KEY=sk-e2e"}, "gate serving", append([]string{"dev",
		"--listen", gateAddr, "--ledger-raft", fmt.Sprintf("127.0.0.1:%d", freeRun(t, 1)),
		"--data", t.TempDir(), "--allow-private-networks", "--browsers", "0", "--prices", pricesFile(t, 100000)}, args...)...)
}

func extractCall(t *testing.T, dev *proc, body string) extractAnswer {
	t.Helper()
	a := gateCall(t, "POST", dev.base+"/extract", body)
	var x extractAnswer
	if err := json.Unmarshal(a.body, &x); a.status != 200 || err != nil || !x.OK {
		t.Fatalf("extract %.200s: %d %v %s", body, a.status, err, a.body)
	}
	return x
}

// Issue 16 through `trawl dev`: extract with a schema from a URL, from
// pasted HTML and from pasted Markdown (the default extractor), billed
// with the usage object.
func TestExtractThroughDev(t *testing.T) {
	page, err := os.ReadFile("../../cell/extract/testdata/product.html")
	if err != nil {
		t.Fatal(err)
	}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(page)
	}))
	t.Cleanup(site.Close)
	dev := startDev(t)
	schema := `{"type":"object","properties":{"name":{"type":"string"},"price":{"type":"number"},"in_stock":{"type":"boolean"},"release_date":{"type":"string","format":"date"}}}`
	want := "map[in_stock:true name:Ridge Tent 2P price:1299 release_date:2024-03-03]"

	x := extractCall(t, dev, `{"url":"`+site.URL+`/p/ridge","schema":`+schema+`}`)
	if fmt.Sprint(x.Data) != want || x.URL != site.URL+"/p/ridge" || x.Usage["units"] != "1.000" || x.Usage["engine"] != "http" {
		t.Errorf("from a URL: %+v", x)
	}
	html, _ := json.Marshal(string(page))
	x = extractCall(t, dev, `{"content":`+string(html)+`,"schema":`+schema+`}`)
	if fmt.Sprint(x.Data) != want || x.Usage["engine"] != "content" {
		t.Errorf("from pasted HTML: %+v", x)
	}
	md, _ := json.Marshal("# Ridge Tent 2P\n\n| | |\n|---|---|\n| Price | €1.299,00 |\n| Availability | In stock |\n\nReleased: March 3, 2024\n")
	x = extractCall(t, dev, `{"content":`+string(md)+`,"schema":`+schema+`}`)
	if fmt.Sprint(x.Data) != want {
		t.Errorf("from pasted Markdown: %+v", x)
	}
	a := gateCall(t, "POST", dev.base+"/extract", `{"content":"x","schema":{"type":"nope"}}`)
	if a.status != 400 || a.header.Get("X-Svc-Cost") != "0.000" || !strings.Contains(string(a.body), "schema does not compile") {
		t.Errorf("bad schema: %d %s %s", a.status, a.header.Get("X-Svc-Cost"), a.body)
	}
}

// Issue 16 through `trawl dev --llm-provider`: a 200 kB page chunked
// through the scripted model server and reassembled; tokens billed.
func TestExtractModelThroughDev(t *testing.T) {
	srv := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) {
		msg := r.Body.Messages[len(r.Body.Messages)-1].Content
		var part int
		if i := strings.Index(msg, "part "); i >= 0 {
			fmt.Sscanf(msg[i+5:], "%d", &part)
		}
		title := "null"
		if part == 1 {
			title = `"Long Page"`
		}
		llmtest.CompletionUsage(w, fmt.Sprintf(`{"data":{"title":%s,"sections":["section %d","shared"]}}`, title, part), 1000, 20)
	})
	dev := startDev(t, "--llm-provider", "test/tiny-1", "--llm-base-url", "test="+srv.URL+"/v1")
	var page strings.Builder
	for i := 0; page.Len() < 200<<10; i++ {
		fmt.Fprintf(&page, "## Section %d\n\nA paragraph of the long page, long enough to take some room.\n\n", i)
	}
	content, _ := json.Marshal(page.String())
	x := extractCall(t, dev, `{"content":`+string(content)+`,"instruction":"the title and the sections","schema":{"type":"object","properties":{"title":{"type":"string"},"sections":{"type":"array","items":{"type":"string"}}}}}`)
	calls := int(srv.Calls())
	sections, _ := x.Data["sections"].([]any)
	if calls < 9 || x.Data["title"] != "Long Page" || len(sections) != calls+1 {
		t.Errorf("%d calls; data %v", calls, x.Data)
	}
	if r := srv.Requests()[0]; r.Auth != "Bearer sk-e2e" || r.Body.Model != "tiny-1" {
		t.Errorf("request %+v", r.Raw)
	}
	if x.Usage["total_tokens"] != float64(1020*calls) || x.Usage["llm_tokens"] == nil {
		t.Errorf("usage %v", x.Usage)
	}
}

// --llm-provider with --llm-api-key-file: the extract model and the crawl
// server's default provider come from the same flags; errors name what to
// set.
func TestLLMFlags(t *testing.T) {
	keyFile := t.TempDir() + "/key"
	os.WriteFile(keyFile, []byte("sk-from-file\n"), 0o600)
	o := crawlOpts{llmProvider: "acme/m-1", llmKeyFile: keyFile, llmBase: map[string]string{"acme": "http://127.0.0.1:9/v1"}, viewport: "1080x600"}
	mc, err := o.model()
	if err != nil || mc == nil || mc.Client.Provider() != "acme/m-1" {
		t.Fatalf("%v %v", mc, err)
	}
	getenv, err := o.getenv()
	if err != nil || getenv("ACME_API_KEY") != "sk-from-file" {
		t.Errorf("key from file: %v", err)
	}
	cfg, err := o.config(t.TempDir(), false, 1<<20, 1, nil)
	if err != nil || cfg.Extract.DefaultProvider != "acme/m-1" || cfg.Extract.Getenv("ACME_API_KEY") != "sk-from-file" {
		t.Errorf("crawl config: %v", err)
	}
	if mc, err := (&crawlOpts{}).model(); mc != nil || err != nil {
		t.Errorf("no provider: %v %v", mc, err)
	}
	_, err = (&crawlOpts{llmProvider: "nokey/m"}).model()
	if err == nil || !strings.Contains(err.Error(), "NOKEY_BASE_URL") {
		t.Errorf("no endpoint: %v", err)
	}
	_, err = (&crawlOpts{llmProvider: "acme/m", llmBase: map[string]string{"acme": "http://127.0.0.1:9/v1"}}).model()
	if err == nil || !strings.Contains(err.Error(), "ACME_API_KEY") {
		t.Errorf("no key: %v", err)
	}
}

// The README's first request through `trawl dev`: the demo page at /demo/
// (served by the cell, through its gate, signed like every answer) scraped
// through the gate. Before, the gate refused the demo page's unsigned
// answer with 502 cell_unavailable, and the README's example failed.
func TestReadmeDemoThroughDev(t *testing.T) {
	dev := startDev(t)
	resp, err := http.Get(dev.base + "/demo/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /demo/: %s", resp.Status)
	}
	a := gateCall(t, "POST", dev.base+"/scrape", `{"url":"`+dev.base+`/demo/"}`)
	if a.status != 200 || !strings.Contains(string(a.body), "Brewing a pot of tea") {
		t.Fatalf("scrape of the demo page: %d %.300s", a.status, a.body)
	}
}

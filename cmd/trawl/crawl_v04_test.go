package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/browsertest"
	"github.com/trawlhq/trawl/internal/testwait"
)

// v04Business stands in for the news section Crawl4AI's v0.4 example
// crawls: teaser cards, a Load More button that adds cards from a script,
// and descriptions long enough for word_count_threshold 10.
const v04Business = `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Business news</title>
<meta name="description" content="Markets, companies and the economy"></head><body>
<header><nav><a href="/">Home</a> <a href="/business">Business</a></nav></header>
<main><h1>Business</h1><section id="cards"></section>
<button id="more" type="button">Load More</button></main>
<script>
var n = 0;
function add(k) {
  var s = document.getElementById('cards');
  for (var i = 0; i < k; i++) {
    n++;
    var a = document.createElement('article');
    a.className = 'tease-card';
    a.innerHTML = '<h2>Story ' + n + ': the harbour economy</h2><div class="wide-tease-item__description">' +
      'Shipping rates at the harbour rose again this quarter as grain exports kept the quays busy well into the night, story ' + n + '.</div>';
    s.appendChild(a);
  }
}
add(6);
document.getElementById('more').addEventListener('click', function () { setTimeout(function () { add(6); }, 100); });
</script></body></html>`

// v04Explore stands in for the prices table of the example's structured
// extraction.
const v04Explore = `<!DOCTYPE html><html><head><title>Explore</title></head><body><main><h1>Prices</h1><table><tbody>
<tr class="cds-tableRow-t45thuk"><td><h2>Bitcoin</h2><p>BTC</p></td><td>$91,204.10</td></tr>
<tr class="cds-tableRow-t45thuk"><td><h2>Ethereum</h2><p>ETH</p></td><td>$3,120.55</td></tr>
<tr class="cds-tableRow-t45thuk"><td><h2>Solana</h2><p>SOL</p></td><td>$141.02</td></tr>
</tbody></table><p>Prices move every few seconds; these are the last traded values shown to visitors of the page.</p></main></body></html>`

// TestCrawlV04Example replays Crawl4AI v0.4's docs/examples/docker_example.py
// against `trawl crawl`, request for request, with only its target URLs
// moved to a loopback site: the health check, /crawl_direct, /crawl twice,
// /crawl_sync, cosine (the example's "full" variant), js_code + wait_for,
// css_selector, json_css and the screenshot. The two LLM steps are the
// ones left out (they need a model). The client sends
// "Authorization: Bearer test_api_code", as the script does when no token
// is given, so the server runs with that token. Polling follows the
// script's loop (GET /task until completed, 300 s at most) at a shorter
// interval.
func TestCrawlV04Example(t *testing.T) {
	browsertest.Require(t)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/business":
			io.WriteString(w, v04Business)
		case "/explore":
			io.WriteString(w, v04Explore)
		default:
			http.NotFound(w, r)
		}
	}))
	defer site.Close()
	const token = "test_api_code"
	p := launch(t, []string{"SERVICE_API_TOKEN=" + token}, "crawl server serving",
		"crawl", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--allow-private-networks")
	business, explore := site.URL+"/business", site.URL+"/explore"

	post := func(path string, req map[string]any) (int, map[string]any) {
		t.Helper()
		b, _ := json.Marshal(req)
		hr, _ := http.NewRequest("POST", p.base+path, bytes.NewReader(b))
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set("Authorization", "Bearer "+token)
		resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(hr)
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer resp.Body.Close()
		var m map[string]any
		raw, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, raw)
		}
		return resp.StatusCode, m
	}
	submitAndWait := func(req map[string]any) map[string]any {
		t.Helper()
		code, m := post("/crawl", req)
		id, _ := m["task_id"].(string)
		if code != 200 || id == "" {
			t.Fatalf("POST /crawl: %d %v", code, m)
		}
		var st map[string]any
		testwait.Until(t, 300*time.Second, "task "+id, func() bool {
			_, st = crawlCall(t, p.base, token, "GET", "/task/"+id, "")
			if st["status"] == "failed" {
				t.Fatalf("task failed: %v", st["error"])
			}
			return st["status"] == "completed"
		})

		return st
	}
	result := func(step string, m map[string]any) map[string]any {
		t.Helper()
		r, _ := m["result"].(map[string]any)
		if r == nil {
			t.Fatalf("%s: no result in %v", step, m)
		}
		// The script reads these keys with [], so they must be present.
		for _, k := range []string{"success", "markdown", "extracted_content", "screenshot", "error_message"} {
			if _, ok := r[k]; !ok {
				t.Errorf("%s: result has no %q", step, k)
			}
		}
		if r["success"] != true {
			t.Fatalf("%s: success %v, error %v", step, r["success"], r["error_message"])
		}
		return r
	}
	markdown := func(r map[string]any) string { s, _ := r["markdown"].(string); return s }

	// Health check.
	if code, h := crawlCall(t, p.base, "", "GET", "/health", ""); code != 200 || h["status"] != "ok" {
		t.Fatalf("health: %d %v", code, h)
	}
	// test_basic_crawl_direct
	code, m := post("/crawl_direct", map[string]any{"urls": business, "priority": 10, "cache_mode": "bypass"})
	if r := result("crawl_direct", m); code != 200 || len(markdown(r)) == 0 {
		t.Fatalf("crawl_direct: %d, markdown %q", code, markdown(r))
	}
	// test_basic_crawl, twice
	for i := range 2 {
		r := result(fmt.Sprintf("basic crawl %d", i+1), submitAndWait(map[string]any{"urls": business, "priority": 10, "session_id": "test"}))
		if len(markdown(r)) == 0 {
			t.Fatalf("basic crawl %d: empty markdown", i+1)
		}
	}
	// test_basic_crawl_sync
	code, m = post("/crawl_sync", map[string]any{"urls": business, "priority": 10, "session_id": "test"})
	if r := result("crawl_sync", m); code != 200 || m["status"] != "completed" || len(markdown(r)) == 0 {
		t.Fatalf("crawl_sync: %d %v", code, m["status"])
	}
	// test_cosine_extraction (the example's full variant)
	r := result("cosine", submitAndWait(map[string]any{"urls": business, "priority": 8, "extraction_config": map[string]any{
		"type": "cosine", "params": map[string]any{"semantic_filter": "business finance economy", "word_count_threshold": 10, "max_dist": 0.2, "top_k": 3}}}))
	var clusters []map[string]any
	if s, _ := r["extracted_content"].(string); json.Unmarshal([]byte(s), &clusters) != nil || len(clusters) == 0 {
		t.Fatalf("cosine: extracted_content %v", r["extracted_content"])
	} else if _, ok := clusters[0]["tags"]; !ok {
		t.Errorf("cosine: first cluster has no tags: %v", clusters[0])
	}
	// test_js_execution
	r = result("js", submitAndWait(map[string]any{"urls": business, "priority": 8,
		"js_code":        []string{"const loadMoreButton = Array.from(document.querySelectorAll('button')).find(button => button.textContent.includes('Load More')); loadMoreButton && loadMoreButton.click();"},
		"wait_for":       "article.tease-card:nth-child(10)",
		"crawler_params": map[string]any{"headless": true}}))
	if !strings.Contains(markdown(r), "Story 12") {
		t.Errorf("js: the cards the button adds are not in the markdown")
	}
	// test_css_selector
	r = result("css", submitAndWait(map[string]any{"urls": business, "priority": 7, "css_selector": ".wide-tease-item__description",
		"crawler_params": map[string]any{"headless": true}, "extra": map[string]any{"word_count_threshold": 10}}))
	if md := markdown(r); !strings.Contains(md, "grain exports") || strings.Contains(md, "Load More") {
		t.Errorf("css: markdown %q", md)
	}
	// test_structured_extraction
	schema := map[string]any{"name": "Coinbase Crypto Prices", "baseSelector": ".cds-tableRow-t45thuk", "fields": []map[string]any{
		{"name": "crypto", "selector": "td:nth-child(1) h2", "type": "text"},
		{"name": "symbol", "selector": "td:nth-child(1) p", "type": "text"},
		{"name": "price", "selector": "td:nth-child(2)", "type": "text"}}}
	r = result("json_css", submitAndWait(map[string]any{"urls": explore, "priority": 9, "extraction_config": map[string]any{"type": "json_css", "params": map[string]any{"schema": schema}}}))
	var items []map[string]any
	if s, _ := r["extracted_content"].(string); json.Unmarshal([]byte(s), &items) != nil || len(items) != 3 ||
		items[0]["crypto"] != "Bitcoin" || items[0]["symbol"] != "BTC" || items[0]["price"] != "$91,204.10" {
		t.Fatalf("json_css: %v", r["extracted_content"])
	}
	// test_screenshot
	r = result("screenshot", submitAndWait(map[string]any{"urls": business, "priority": 5, "screenshot": true, "crawler_params": map[string]any{"headless": true}}))
	s, _ := r["screenshot"].(string)
	png, err := base64.StdEncoding.DecodeString(s)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("screenshot: %d base64 characters, %v", len(s), err)
	}
}

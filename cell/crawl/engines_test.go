package crawl

import (
	"strings"
	"testing"
	"time"
)

// TestEngines: a request that needs no browser is served by plain HTTP,
// then from the page cache until bypass_cache or cache_mode says
// otherwise, and a JavaScript-only page climbs the ladder to the
// permanent browser; a request with a browser option goes to the browser
// at once. Each result says which engine served it.
func TestEngines(t *testing.T) {
	st := startSite(t)
	clock := newFakeClock()
	ts := startServer(t, Config{Now: clock.Now})
	crawl := func(req map[string]any) *Result {
		t.Helper()
		a := poll(t, ts.URL, "", submit(t, ts.URL, "", req), 20*time.Millisecond, time.Minute)
		if a.Result == nil {
			t.Fatalf("task: %+v", a)
		}
		return a.Result
	}
	hits := func(path string) int { st.mu.Lock(); defer st.mu.Unlock(); return st.seen[path] }
	article := st.URL + "/article.html"

	r := crawl(map[string]any{"urls": article})
	if r.Engine != EngineHTTP || r.BrowserID != "" || !r.Success || !strings.Contains(r.Markdown, "busy weekend") || hits("/article.html") != 1 {
		t.Fatalf("plain page: engine %q browser %q success %v, %d hits", r.Engine, r.BrowserID, r.Success, hits("/article.html"))
	}
	r2 := crawl(map[string]any{"urls": article})
	if r2.Engine != EngineCache || r2.Markdown != r.Markdown || hits("/article.html") != 1 {
		t.Errorf("repeat: engine %q, %d hits; want the cache and 1 hit", r2.Engine, hits("/article.html"))
	}
	for i, req := range []map[string]any{
		{"urls": article, "extra": map[string]any{"bypass_cache": true}},
		{"urls": article, "cache_mode": "bypass"},
		{"urls": article, "cache_mode": "write_only"},
	} {
		if r := crawl(req); r.Engine != EngineHTTP || hits("/article.html") != 2+i {
			t.Errorf("%v: engine %q, %d hits; want a fresh fetch", req, r.Engine, hits("/article.html"))
		}
	}
	// Past the freshness window the page is fetched again.
	clock.Advance(DefaultFreshFor + time.Second)
	if r := crawl(map[string]any{"urls": article}); r.Engine != EngineHTTP || hits("/article.html") != 5 {
		t.Errorf("after %s: engine %q, %d hits", DefaultFreshFor, r.Engine, hits("/article.html"))
	}
	// A JavaScript shell: plain HTTP sees no content, the browser does.
	r = crawl(map[string]any{"urls": st.URL + "/app.html"})
	if r.Engine != EngineBrowser || r.BrowserID != "permanent" || !strings.Contains(r.Markdown, "forty minutes after the lighthouse") {
		t.Errorf("JS page: engine %q browser %q markdown %.200q", r.Engine, r.BrowserID, r.Markdown)
	}
	// Browser options go to the browser whatever the cache holds.
	for _, req := range []map[string]any{
		{"urls": article, "wait_for": "main"},
		{"urls": article, "js_code": []string{"document.title = 'x'"}},
		{"urls": article, "screenshot": true},
		{"urls": article, "browser_config": map[string]any{"viewport": map[string]int{"width": 1280, "height": 720}}},
	} {
		if r := crawl(req); r.Engine != EngineBrowser || r.BrowserID == "" || !r.Success {
			t.Errorf("%v: engine %q browser %q success %v", req, r.Engine, r.BrowserID, r.Success)
		}
	}
	var e errorBody
	if code := call(t, "POST", ts.URL+"/crawl", "", map[string]any{"urls": article, "cache_mode": "sometimes"}, &e); code != 400 || !strings.Contains(e.Message, "cache_mode") {
		t.Errorf("bad cache_mode: %d %+v", code, e)
	}
}

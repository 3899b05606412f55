package crawl

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/crawl/extract"
	"github.com/trawlhq/trawl/cell/llm/llmtest"
	"github.com/trawlhq/trawl/internal/testwait"
)

// Crawl4AI 0.5+'s API (issue 32): the typed-config parser, the body-shape
// dispatch and every route, against real Chromium on loopback pages.
// scripts/crawl4ai-e2e runs Crawl4AI's own tests and client against the
// binary.

func TestC4AParseAllowList(t *testing.T) {
	for _, tc := range []struct {
		name, body, wantErr string
	}{
		{"unknown type named", `{"type":"CrawlerRunConfig","params":{"extraction_strategy":{"type":"os.system","params":{"cmd":"rm"}}}}`, `unknown type "os.system"`},
		{"unknown nested", `{"type":"CrawlerRunConfig","params":{"markdown_generator":{"type":"DefaultMarkdownGenerator","params":{"content_filter":{"type":"EvilFilter","params":{}}}}}}`, `unknown type "EvilFilter"`},
		{"bad enum", `{"type":"CrawlerRunConfig","params":{"cache_mode":{"type":"CacheMode","params":"sometimes"}}}`, `not a CacheMode`},
		{"dict value not an object", `{"type":"CrawlerRunConfig","params":{"x":{"type":"dict","value":3}}}`, `needs an object`},
		{"wrong config type", `{"type":"BrowserConfig","params":{}}`, `want type "CrawlerRunConfig"`},
		{"ok", `{"type":"CrawlerRunConfig","params":{"cache_mode":{"type":"CacheMode","params":"bypass"},"extraction_strategy":{"type":"JsonCssExtractionStrategy","params":{"schema":{"type":"dict","value":{"name":"n","baseSelector":"li","fields":[{"name":"t","selector":"a","type":"text"}]}}}}}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseConfig(json.RawMessage(tc.body), "crawler_config", "CrawlerRunConfig")
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				cm, _, _ := o.str("cache_mode")
				es, _ := o.object("extraction_strategy", "JsonCssExtractionStrategy")
				schema, _ := es.Params["schema"].(map[string]any)
				fields, _ := schema["fields"].([]any)
				f0, _ := fields[0].(map[string]any)
				if cm != "bypass" || schema["baseSelector"] != "li" || f0["type"] != "text" {
					t.Fatalf("parsed: cache_mode %q, schema %v", cm, schema)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			var br *BadRequest
			if !asBad(err, &br) {
				t.Fatalf("err %T is not a *BadRequest", err)
			}
		})
	}
}

func asBad(err error, br **BadRequest) bool {
	b, ok := err.(*BadRequest)
	*br = b
	return ok
}

func TestC4ABodyShape(t *testing.T) {
	for body, want := range map[string]string{
		`{"urls":"https://a.example/"}`:                                         "legacy",
		`{"urls":["https://a.example/"]}`:                                       "legacy",
		`{"urls":["https://a.example/"],"priority":8}`:                          "legacy",
		`{"urls":"x","browser_config":{"viewport":{"width":800,"height":600}}}`: "legacy",
		`{"urls":["x"],"crawler_params":{},"crawler_config":{}}`:                "legacy",
		`{"urls":["x"],"crawler_config":{}}`:                                    "c4a",
		`{"urls":["x"],"browser_config":{"type":"BrowserConfig","params":{}}}`:  "c4a",
		`{"urls":[]}`:                           "c4a",
		`{"urls":["x"],"crawler_configs":[{}]}`: "c4a",
		`not json`:                              "legacy",
	} {
		if got := bodyShape([]byte(body)); got != want {
			t.Errorf("%s: %s, want %s", body, got, want)
		}
	}
}

// TestC4ACompilePublic: without --allow-private-networks, a private URL
// is one failed result among the others (as Crawl4AI answers a URL it
// cannot crawl), and a request with nothing crawlable still compiles.
func TestC4ACompilePublic(t *testing.T) {
	s := &Server{cfg: Config{DataDir: t.TempDir()}}
	s.cfg.defaults()
	cp, err := s.compileC4A([]byte(`{"urls":["http://127.0.0.1/","example.org/a"],"crawler_config":{"stream":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.p.urls) != 1 || cp.p.urls[0].String() != "https://example.org/a" || cp.urlErr[0] == "" || cp.urlErr[1] != "" || !cp.stream {
		t.Fatalf("plan: urls %v, errors %q, stream %v", cp.p.urls, cp.urlErr, cp.stream)
	}
	if _, err := s.compileC4A([]byte(`{"urls":["http://10.0.0.1/"],"crawler_config":{}}`)); err != nil {
		t.Fatalf("all private: %v", err)
	}
}

func TestC4AConfigDump(t *testing.T) {
	out, err := dumpConfig(`CrawlerRunConfig(stream=True, cache_mode=CacheMode.BYPASS, js_code=["a()", 'b'], word_count_threshold=10, extra={"k": None})`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(out)
	want := `{"params":{"cache_mode":{"params":"bypass","type":"CacheMode"},"extra":{"type":"dict","value":{"k":null}},"js_code":["a()","b"],"stream":true,"word_count_threshold":10},"type":"CrawlerRunConfig"}`
	if string(b) != want {
		t.Fatalf("dump:\n%s\nwant\n%s", b, want)
	}
	for _, code := range []string{"invalid_code", "CrawlerRunConfig(BrowserConfig())", "__import__('os')", "CrawlerRunConfig(x=os.system('id'))", "BrowserConfig(a=1) + 1"} {
		if _, err := dumpConfig(code); err == nil {
			t.Errorf("%s: accepted", code)
		}
	}
}

func TestC4ACitationsAndBM25(t *testing.T) {
	cites, refs := citations("See [the docs](https://a.example/d) and [again](https://a.example/d), ![img](https://a.example/i.png), [b](https://b.example/).")
	if cites != "See the docs⟨1⟩ and again⟨1⟩, ![img](https://a.example/i.png), b⟨2⟩." {
		t.Fatalf("citations: %q", cites)
	}
	if refs != "\n\n## References\n\n⟨1⟩ https://a.example/d: the docs\n⟨2⟩ https://b.example/: b\n" {
		t.Fatalf("references: %q", refs)
	}
	md := "# Whales\n\nThe sperm whale dives deep for squid.\n\nBlacksmiths mend harpoons at the forge.\n\nA whale and a whale again, the whale."
	got := bm25Filter(md, "whale", 0.1)
	if !strings.Contains(got, "sperm whale") || !strings.Contains(got, "whale again") || strings.Contains(got, "Blacksmiths") {
		t.Fatalf("bm25: %q", got)
	}
	if bm25Filter(md, "", 0) != "" {
		t.Fatal("an empty query keeps nothing")
	}
}

// deepSite is a small linked site with a robots.txt refusing /private.
func deepSite(t *testing.T) *httptest.Server {
	links := map[string][]string{
		"/":              {"/docs/", "/news", "/private/x", "/style.css", "https://elsewhere.example/"},
		"/docs/":         {"/docs/tutorial", "/"},
		"/docs/tutorial": {"/docs/tutorial/advanced"},
		"/news":          {"/news/old"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			io.WriteString(w, "User-agent: *\nDisallow: /private\n")
			return
		case "/style.css":
			w.Header().Set("Content-Type", "text/css")
			io.WriteString(w, "body{}")
			return
		}
		var b strings.Builder
		fmt.Fprintf(&b, "<!DOCTYPE html><html><head><title>Page %s</title></head><body><main><h1>Page %s</h1><p>Words about %s for the reader.</p><ul>", r.URL.Path, r.URL.Path, r.URL.Path)
		for _, l := range links[r.URL.Path] {
			fmt.Fprintf(&b, `<li><a href="%s">%s</a></li>`, l, l)
		}
		b.WriteString("</ul></main></body></html>")
		io.WriteString(w, b.String())
	}))
	t.Cleanup(srv.Close)
	return srv
}

type c4aAnswerT struct {
	Success bool             `json:"success"`
	Results []map[string]any `json:"results"`
	Detail  string           `json:"detail"`
}

func c4aReq(urls []string, crawler string) map[string]any {
	var cc any
	json.Unmarshal([]byte(crawler), &cc)
	return map[string]any{"urls": urls, "browser_config": map[string]any{"type": "BrowserConfig", "params": map[string]any{"headless": true}},
		"crawler_config": cc}
}

func TestC4ARoutes(t *testing.T) {
	ts := startServer(t, Config{})
	st := startSite(t)
	page := st.URL + "/products.html"

	t.Run("sync crawl with json css and a pruning filter", func(t *testing.T) {
		var a c4aAnswerT
		code := call(t, "POST", ts.URL+"/crawl", "", c4aReq([]string{page, "not a url"}, `{"type":"CrawlerRunConfig","params":{
			"cache_mode":"bypass",
			"markdown_generator":{"type":"DefaultMarkdownGenerator","params":{"content_filter":{"type":"PruningContentFilter","params":{"threshold":0.5}}}},
			"extraction_strategy":{"type":"JsonCssExtractionStrategy","params":{"schema":{"type":"dict","value":
				{"name":"p","baseSelector":"li.product","fields":[{"name":"name","selector":"h2","type":"text"}]}}}}}}`), &a)
		if code != 200 || !a.Success || len(a.Results) != 2 {
			t.Fatalf("status %d, answer %+v", code, a)
		}
		r0, r1 := a.Results[0], a.Results[1]
		md, _ := r0["markdown"].(map[string]any)
		if r0["success"] != true || r0["url"] != page || md == nil || md["raw_markdown"] == "" || md["fit_markdown"] == nil {
			t.Fatalf("first result: %v", r0)
		}
		var items []map[string]any
		if ec, _ := r0["extracted_content"].(string); json.Unmarshal([]byte(ec), &items) != nil || len(items) == 0 || items[0]["name"] == "" {
			t.Fatalf("extracted_content: %v", r0["extracted_content"])
		}
		for _, k := range []string{"html", "cleaned_html", "links", "media", "metadata", "screenshot", "pdf", "status_code", "error_message", "redirected_url", "js_execution_result", "tables"} {
			if _, ok := r0[k]; !ok {
				t.Errorf("result has no %s", k)
			}
		}
		if r1["success"] != false || !strings.Contains(fmt.Sprint(r1["error_message"]), "invalid URL") {
			t.Fatalf("invalid URL result: %v", r1)
		}
	})

	t.Run("js_code values", func(t *testing.T) {
		var a c4aAnswerT
		code := call(t, "POST", ts.URL+"/crawl", "", c4aReq([]string{page}, `{"type":"CrawlerRunConfig","params":{
			"js_code":["document.querySelector('h1').innerText = 'Changed'; return 6 * 7;", "(() => 1)();"]}}`), &a)
		if code != 200 || len(a.Results) != 1 {
			t.Fatalf("status %d, %+v", code, a)
		}
		r := a.Results[0]
		jr, _ := r["js_execution_result"].(map[string]any)
		vals, _ := jr["results"].([]any)
		if len(vals) != 2 || vals[0] != 42.0 || vals[1] != nil || !strings.Contains(r["html"].(string), "Changed") {
			t.Fatalf("js_execution_result %v", r["js_execution_result"])
		}
	})

	t.Run("every URL failing is a 500", func(t *testing.T) {
		var a c4aAnswerT
		if code := call(t, "POST", ts.URL+"/crawl", "", c4aReq([]string{"ftp://x.example/"}, `{"type":"CrawlerRunConfig","params":{}}`), &a); code != 500 || !strings.HasPrefix(a.Detail, "Crawl request failed:") {
			t.Fatalf("status %d, %+v", code, a)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		var e errorBody
		if code := call(t, "POST", ts.URL+"/crawl", "", c4aReq([]string{page}, `{"type":"CrawlerRunConfig","params":{"extraction_strategy":{"type":"PickleStrategy","params":{}}}}`), &e); code != 400 || !strings.Contains(e.Detail, `"PickleStrategy"`) {
			t.Fatalf("unknown type: %d %+v", code, e)
		}
		if code := call(t, "POST", ts.URL+"/crawl", "", map[string]any{"urls": []string{}}, &e); code != 422 {
			t.Fatalf("empty urls: %d %+v", code, e)
		}
		if code := call(t, "POST", ts.URL+"/crawl", "", c4aReq([]string{page}, `{"type":"CrawlerRunConfig","params":{"stream":"yes"}}`), &e); code != 400 || !strings.Contains(e.Detail, "CrawlerRunConfig.stream") {
			t.Fatalf("wrong type: %d %+v", code, e)
		}
		if code := call(t, "POST", ts.URL+"/crawl", "", map[string]any{"urls": []string{page}, "crawler_config": map[string]any{}, "hooks": map[string]any{"code": map[string]string{"before_goto": "import os"}}}, &e); code != 400 || !strings.Contains(e.Detail, "hooks") {
			t.Fatalf("hooks: %d %+v", code, e)
		}
	})

	t.Run("legacy body still queues a task", func(t *testing.T) {
		id := submit(t, ts.URL, "", map[string]any{"urls": []string{page}})
		if a := poll(t, ts.URL, "", id, 100*time.Millisecond, 2*time.Minute); a.Status != StatusCompleted || len(a.Results) != 1 || !a.Results[0].Success {
			t.Fatalf("legacy task: %+v", a)
		}
	})

	t.Run("stream", func(t *testing.T) {
		b, _ := json.Marshal(c4aReq([]string{page, st.URL + "/article.html"}, `{"type":"CrawlerRunConfig","params":{"stream":true}}`))
		resp, err := http.Post(ts.URL+"/crawl", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.Header.Get("Content-Type") != "application/x-ndjson" || resp.Header.Get("X-Stream-Status") != "active" {
			t.Fatalf("headers %v", resp.Header)
		}
		var lines []map[string]any
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 8<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			lines = append(lines, m)
		}
		if len(lines) != 3 || lines[2]["status"] != "completed" || lines[0]["success"] != true || lines[1]["success"] != true {
			t.Fatalf("stream lines: %v", lines)
		}
	})

	t.Run("one-page routes", func(t *testing.T) {
		var md map[string]any
		if code := call(t, "POST", ts.URL+"/md", "", map[string]any{"url": st.URL + "/article.html", "f": "raw"}, &md); code != 200 || md["success"] != true || len(fmt.Sprint(md["markdown"])) < 100 {
			t.Fatalf("/md raw: %d %v", code, md)
		}
		raw := md["markdown"].(string)
		if code := call(t, "POST", ts.URL+"/md", "", map[string]any{"url": st.URL + "/article.html", "f": "bm25", "q": "zzzz-not-there"}, &md); code != 200 || md["markdown"] != "" {
			t.Fatalf("/md bm25 without a match: %d %v", code, md)
		}
		var e errorBody
		if code := call(t, "POST", ts.URL+"/md", "", map[string]any{"url": "invalid-url"}, &e); code != 400 {
			t.Fatalf("/md invalid url: %d", code)
		}
		if code := call(t, "POST", ts.URL+"/md", "", map[string]any{"url": st.URL + "/article.html", "f": "llm"}, &e); code != 400 || !strings.Contains(e.Detail, "no model") {
			t.Fatalf("/md llm without a model: %d %+v", code, e)
		}
		if code := call(t, "GET", ts.URL+"/md/"+st.URL+"/article.html?f=raw", "", nil, &md); code != 200 || md["markdown"] != raw {
			t.Fatalf("GET /md/{url}: %d %v", code, md)
		}
		if code := call(t, "GET", ts.URL+"/md/"+st.URL+"/article.html?f=nope", "", nil, &e); code != 422 {
			t.Fatalf("GET /md/{url} bad f: %d", code)
		}
		var h map[string]any
		if code := call(t, "POST", ts.URL+"/html", "", map[string]any{"url": page}, &h); code != 200 || !strings.Contains(fmt.Sprint(h["html"]), "product") || strings.Contains(fmt.Sprint(h["html"]), "<script") {
			t.Fatalf("/html: %d %v", code, h)
		}
		var shot map[string]any
		if code := call(t, "POST", ts.URL+"/screenshot", "", map[string]any{"url": page, "screenshot_wait_for": 0}, &shot); code != 200 {
			t.Fatalf("/screenshot: %d %v", code, shot)
		}
		png, _ := base64.StdEncoding.DecodeString(fmt.Sprint(shot["screenshot"]))
		if !bytes.HasPrefix(png, []byte("\x89PNG")) {
			t.Fatalf("/screenshot is not a PNG (%d bytes)", len(png))
		}
		if code := call(t, "POST", ts.URL+"/screenshot", "", map[string]any{"url": page, "output_path": "/tmp/x.png"}, &e); code != 400 {
			t.Fatalf("/screenshot output_path: %d", code)
		}
		var js map[string]any
		if code := call(t, "POST", ts.URL+"/execute_js", "", map[string]any{"url": page, "scripts": []string{"document.title", "(() => 6 * 7)()"}}, &js); code != 200 {
			t.Fatalf("/execute_js: %d %v", code, js)
		}
		jr, _ := js["js_execution_result"].(map[string]any)
		vals, _ := jr["results"].([]any)
		if len(vals) != 2 || vals[1] != 42.0 || vals[0] == "" {
			t.Fatalf("/execute_js results: %v", jr)
		}
		for _, route := range []string{"/html", "/screenshot", "/pdf", "/execute_js"} {
			if code := call(t, "POST", ts.URL+route, "", map[string]any{"url": "invalid-url", "scripts": []string{"1"}}, &e); code != 500 {
				t.Fatalf("%s invalid-url: %d", route, code)
			}
		}
		var pdf map[string]any
		if code := call(t, "POST", ts.URL+"/pdf", "", map[string]any{"url": page}, &pdf); code != 200 || pdf["success"] != true {
			t.Fatalf("/pdf: %d %v", code, pdf)
		}
		if b, _ := base64.StdEncoding.DecodeString(fmt.Sprint(pdf["pdf"])); !bytes.HasPrefix(b, []byte("%PDF-")) {
			t.Fatalf("/pdf is not a PDF (%d bytes)", len(b))
		}
		if code := call(t, "GET", ts.URL+"/llm/"+page, "", nil, &e); code != 422 {
			t.Fatalf("/llm without q: %d", code)
		}
		if code := call(t, "GET", ts.URL+"/llm/"+page+"?q=what", "", nil, &e); code != 503 || !strings.Contains(e.Detail, "no model") {
			t.Fatalf("/llm without a model: %d %+v", code, e)
		}
	})

	t.Run("token schema ask config dump", func(t *testing.T) {
		var tok map[string]any
		if code := call(t, "POST", ts.URL+"/token", "", map[string]any{"email": "a@b.example"}, &tok); code != 200 || tok["token_type"] != "bearer" {
			t.Fatalf("/token: %d %v", code, tok)
		}
		var sch map[string]any
		if code := call(t, "GET", ts.URL+"/schema", "", nil, &sch); code != 200 || sch["browser"] == nil || sch["crawler"] == nil {
			t.Fatalf("/schema: %d %v", code, sch)
		}
		var e errorBody
		for q, want := range map[string]int{"context_type=invalid": 422, "score_ratio=2.0": 422, "max_results=0": 422, "context_type=doc": 404} {
			if code := call(t, "GET", ts.URL+"/ask?"+q, "", nil, &e); code != want {
				t.Errorf("/ask?%s: %d, want %d", q, code, want)
			}
		}
		var d map[string]any
		if code := call(t, "POST", ts.URL+"/config/dump", "", map[string]any{"code": "BrowserConfig(headless=True)"}, &d); code != 200 || d["type"] != "BrowserConfig" {
			t.Fatalf("/config/dump: %d %v", code, d)
		}
		if code := call(t, "POST", ts.URL+"/config/dump", "", map[string]any{"code": "CrawlerRunConfig(BrowserConfig())"}, &e); code != 400 {
			t.Fatalf("/config/dump nested: %d", code)
		}
	})

	t.Run("deep crawls", func(t *testing.T) {
		ds := deepSite(t)
		run := func(strategy string, params string) []map[string]any {
			t.Helper()
			var a c4aAnswerT
			code := call(t, "POST", ts.URL+"/crawl", "", c4aReq([]string{ds.URL + "/"}, `{"type":"CrawlerRunConfig","params":{"deep_crawl_strategy":{"type":"`+strategy+`","params":`+params+`}}}`), &a)
			if code != 200 || !a.Success {
				t.Fatalf("%s: %d %+v", strategy, code, a)
			}
			return a.Results
		}
		paths := func(rs []map[string]any) []string {
			var out []string
			for _, r := range rs {
				u, _ := url.Parse(r["url"].(string))
				md := r["metadata"].(map[string]any)
				out = append(out, fmt.Sprintf("%s@%v", u.Path, md["depth"]))
			}
			return out
		}
		filters := `"filter_chain":{"type":"FilterChain","params":{"filters":[{"type":"ContentTypeFilter","params":{"allowed_types":["text/html"]}},{"type":"DomainFilter","params":{"allowed_domains":["127.0.0.1"]}}]}}`
		got := strings.Join(paths(run("BFSDeepCrawlStrategy", `{"max_depth":2,`+filters+`}`)), " ")
		// /private is refused by robots.txt, /style.css by the content
		// type, elsewhere.example by the domain; depth 2 stops before
		// /docs/tutorial/advanced.
		if got != "/@0 /docs/@1 /news@1 /docs/tutorial@2 /news/old@2" {
			t.Fatalf("BFS: %s", got)
		}
		got = strings.Join(paths(run("DFSDeepCrawlStrategy", `{"max_depth":3,"max_pages":4,`+filters+`}`)), " ")
		if got != "/@0 /docs/@1 /docs/tutorial@2 /docs/tutorial/advanced@3" {
			t.Fatalf("DFS: %s", got)
		}
		// Streamed: the same pages, one line each, then the end marker.
		b, _ := json.Marshal(c4aReq([]string{ds.URL + "/"}, `{"type":"CrawlerRunConfig","params":{"stream":true,"deep_crawl_strategy":{"type":"BFSDeepCrawlStrategy","params":{"max_depth":1,`+filters+`}}}}`))
		resp, err := http.Post(ts.URL+"/crawl/stream", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if lines := strings.Split(strings.TrimSpace(string(raw)), "\n"); len(lines) != 4 || !strings.Contains(lines[3], `"completed"`) || !strings.Contains(lines[1], `"depth":1`) {
			t.Fatalf("deep stream: %d lines\n%s", len(lines), raw)
		}
		got = strings.Join(paths(run("BestFirstCrawlingStrategy", `{"max_depth":1,"max_pages":2,`+filters+`,
			"url_scorer":{"type":"KeywordRelevanceScorer","params":{"keywords":["news"]}}}`)), " ")
		if got != "/@0 /news@1" {
			t.Fatalf("best first: %s", got)
		}
	})

	t.Run("job survives a restart", func(t *testing.T) {
		var sub map[string]any
		if code := call(t, "POST", ts.URL+"/crawl/job", "", c4aReq([]string{page}, `{"type":"CrawlerRunConfig","params":{}}`), &sub); code != 202 || sub["task_id"] == "" {
			t.Fatalf("/crawl/job: %d %v", code, sub)
		}
		id := sub["task_id"].(string)
		deadline := time.Now().Add(2 * time.Minute)
		var job map[string]any
		for {
			if code := call(t, "GET", ts.URL+"/crawl/job/"+id, "", nil, &job); code != 200 {
				t.Fatalf("GET /crawl/job: %d", code)
			}
			if job["status"] == StatusCompleted || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		res, _ := job["result"].(map[string]any)
		if rs, _ := res["results"].([]any); len(rs) != 1 || res["success"] != true {
			t.Fatalf("job: %v", job)
		}
		var e errorBody
		if code := call(t, "GET", ts.URL+"/task/"+id, "", nil, nil); code != 200 {
			t.Fatalf("the job is a task too: %d", code)
		}
		if code := call(t, "GET", ts.URL+"/crawl/job/nope", "", nil, &e); code != 404 {
			t.Fatalf("unknown job: %d", code)
		}
		// A job cut off by the shutdown runs again after the restart.
		if code := call(t, "POST", ts.URL+"/crawl/job", "", c4aReq([]string{st.URL + "/slow"}, `{"type":"CrawlerRunConfig","params":{}}`), &sub); code != 202 {
			t.Fatalf("/crawl/job slow: %d %v", code, sub)
		}
		cut := sub["task_id"].(string)
		testwait.Until(t, 30*time.Second, "the slow job runs", func() bool {
			tk, err := ts.tasks.get(cut)
			return err == nil && tk.Status == StatusProcessing
		})
		dir := ts.cfg.DataDir
		ts.stop()
		ts2 := startServer(t, Config{DataDir: dir})
		var again map[string]any
		if code := call(t, "GET", ts2.URL+"/crawl/job/"+id, "", nil, &again); code != 200 || again["status"] != StatusCompleted || again["result"] == nil {
			t.Fatalf("after restart: %d %v", code, again)
		}
		st.release()
		testwait.Until(t, time.Minute, "the cut-off job completes after the restart", func() bool {
			call(t, "GET", ts2.URL+"/crawl/job/"+cut, "", nil, &again)
			return again["status"] == StatusCompleted
		})
		res, _ = again["result"].(map[string]any)
		rs, _ := res["results"].([]any)
		if len(rs) != 1 || !strings.Contains(fmt.Sprint(rs[0].(map[string]any)["markdown"]), "It came at last") {
			t.Fatalf("resumed job: %v", again)
		}
	})
}

func TestNetBytes(t *testing.T) {
	f := t.TempDir() + "/dev"
	os.WriteFile(f, []byte(`Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 8138069060 3174724    0    0    0     0          0         0 8138069060 3174724    0    0    0     0       0          0
  eth0: 2097152     100    0    0    0     0          0         0  1048576      50    0    0    0     0       0          0
  eth1: 1048576     100    0    0    0     0          0         0  1048576      50    0    0    0     0       0          0
`), 0o644)
	rx, tx, err := netBytes(f)
	if err != nil || rx != 3<<20 || tx != 2<<20 {
		t.Fatalf("netBytes: %d %d %v", rx, tx, err)
	}
}

// TestC4AMonitorFields: what Crawl4AI 0.7.7's release demo reads from the
// monitor and the task API lacked.
func TestC4AMonitorFields(t *testing.T) {
	ts := startServer(t, Config{})
	var h map[string]any
	if code := call(t, "GET", ts.URL+"/monitor/health", "", nil, &h); code != 200 {
		t.Fatalf("/monitor/health: %d", code)
	}
	c := h["container"].(map[string]any)
	pool := h["pool"].(map[string]any)
	for _, k := range []string{"network_rx_mb", "network_tx_mb"} {
		if _, ok := c[k].(float64); !ok {
			t.Errorf("container.%s: %v", k, c[k])
		}
	}
	for _, tier := range []string{"permanent", "hot", "cold"} {
		if _, ok := pool[tier].(map[string]any)["total_requests"].(float64); !ok {
			t.Errorf("pool.%s.total_requests missing", tier)
		}
	}
	ts.takeSample()
	var tl map[string]any
	if code := call(t, "GET", ts.URL+"/monitor/timeline?minutes=5", "", nil, &tl); code != 200 {
		t.Fatalf("/monitor/timeline: %d", code)
	}
	mem, _ := tl["memory"].([]any)
	if len(mem) == 0 {
		t.Fatalf("timeline memory: %v", tl)
	}
	last := mem[len(mem)-1].(map[string]any)
	if v, _ := last["value"].(float64); v <= 0 || last["timestamp"] == nil {
		t.Fatalf("timeline memory point: %v", last)
	}
}

// TestC4AToken: with a token set, /token hands it only to a caller who
// already sends it; Crawl4AI's routes need it like every other.
func TestC4AToken(t *testing.T) {
	ts := startServer(t, Config{Token: "s3cret"})
	var e errorBody
	if code := call(t, "POST", ts.URL+"/token", "", map[string]any{"email": "a@b.example"}, &e); code != 401 {
		t.Fatalf("/token without the token: %d", code)
	}
	var tok map[string]any
	if code := call(t, "POST", ts.URL+"/token", "s3cret", map[string]any{"email": "a@b.example"}, &tok); code != 200 || tok["access_token"] != "s3cret" || tok["token_type"] != "bearer" {
		t.Fatalf("/token: %d %v", code, tok)
	}
	if code := call(t, "POST", ts.URL+"/md", "", map[string]any{"url": "http://127.0.0.1/"}, &e); code != 401 {
		t.Fatalf("/md without the token: %d", code)
	}
	if code := call(t, "GET", ts.URL+"/llm/http://127.0.0.1/?q=x", "", nil, &e); code != 401 {
		t.Fatalf("/llm without the token: %d", code)
	}
	var body map[string]any
	if code := call(t, "POST", ts.URL+"/crawl", "s3cret", c4aReq([]string{"http://127.0.0.1:1/"}, `{"type":"CrawlerRunConfig","params":{"page_timeout":-5}}`), &body); code != 400 || !strings.Contains(fmt.Sprint(body["detail"]), "page_timeout") {
		t.Fatalf("bad page_timeout: %d %v", code, body)
	}
}

// TestC4AOperatorModel: /llm/{url}, /md f=llm and LLMExtractionStrategy
// reach the operator's model with the page. The model is the project's
// loopback stand-in (cell/llm/llmtest), the one thing not real here.
func TestC4AOperatorModel(t *testing.T) {
	cs := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) {
		prompt := ""
		for _, m := range r.Body.Messages {
			prompt += m.Content
		}
		switch {
		case strings.Contains(prompt, "Question: what is sold?"):
			llmtest.Completion(w, fmt.Sprintf("seen the page: %v", strings.Contains(prompt, "Ridge Tent")))
		case strings.Contains(prompt, "Instruction: only the prices"):
			llmtest.Completion(w, "# Prices\n\n- rewritten from a page with Ridge Tent: "+fmt.Sprint(strings.Contains(prompt, "Ridge Tent")))
		default:
			llmtest.Completion(w, `{"items":[{"name":"Ridge Tent"}]}`)
		}
	})
	ts := startServer(t, Config{Extract: extract.Config{DefaultProvider: "openai/gpt-test",
		Getenv:   func(k string) string { return map[string]string{"OPENAI_API_KEY": "sk-test"}[k] },
		BaseURLs: map[string]string{"openai": cs.URL + "/v1"}}})
	st := startSite(t)
	page := st.URL + "/products.html"
	var ans map[string]any
	if code := call(t, "GET", ts.URL+"/llm/"+page+"?q=what+is+sold%3F", "", nil, &ans); code != 200 || ans["answer"] != "seen the page: true" {
		t.Fatalf("/llm: %d %v", code, ans)
	}
	var md map[string]any
	if code := call(t, "POST", ts.URL+"/md", "", map[string]any{"url": page, "f": "llm", "q": "only the prices"}, &md); code != 200 || md["markdown"] != "# Prices\n\n- rewritten from a page with Ridge Tent: true" {
		t.Fatalf("/md llm: %d %v", code, md)
	}
	var a c4aAnswerT
	if code := call(t, "POST", ts.URL+"/crawl", "", c4aReq([]string{page}, `{"type":"CrawlerRunConfig","params":{"extraction_strategy":{"type":"LLMExtractionStrategy","params":{
		"instruction":"the products","llm_config":{"type":"LLMConfig","params":{"provider":"openai/gpt-test"}}}}}}`), &a); code != 200 || len(a.Results) != 1 {
		t.Fatalf("LLMExtractionStrategy: %d %+v", code, a)
	}
	if ec := fmt.Sprint(a.Results[0]["extracted_content"]); !strings.Contains(ec, "Ridge Tent") {
		t.Fatalf("extracted_content: %s", ec)
	}
	if cs.Calls() != 3 {
		t.Fatalf("model calls: %d", cs.Calls())
	}
}

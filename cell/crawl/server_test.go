package crawl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/trawlhq/trawl/internal/telemetry"
	"github.com/trawlhq/trawl/internal/testwait"
)

// TestLegacyClientFlow is a Crawl4AI-style client against a server with a
// token: submit, poll every 2 s for up to 300 s, read result.markdown.
func TestLegacyClientFlow(t *testing.T) {
	const token = "s3cret-token"
	st := startSite(t)
	ts := startServer(t, Config{Token: token})

	t.Run("token", func(t *testing.T) {
		var h map[string]any
		if code := call(t, "GET", ts.URL+"/health", "", nil, &h); code != 200 || h["status"] != "ok" {
			t.Fatalf("/health without a token: %d %v", code, h)
		}
		for _, c := range []struct{ method, path, token string }{
			{"POST", "/crawl", ""}, {"POST", "/crawl", "wrong"}, {"GET", "/task/x", ""},
			{"GET", "/monitor/health", ""}, {"POST", "/monitor/actions/cleanup", "wrong"}, {"GET", "/dashboard", ""},
			{"POST", "/crawl/stream", ""},
		} {
			var e errorBody
			code := call(t, c.method, ts.URL+c.path, c.token, `{"urls":"`+st.URL+`/app.html"}`, &e)
			if code != 401 || e.Error != "unauthorized" || e.Detail == "" {
				t.Errorf("%s %s token %q: %d %+v, want 401 unauthorized", c.method, c.path, c.token, code, e)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ws := "ws" + strings.TrimPrefix(ts.URL, "http") + "/monitor/ws"
		if _, resp, err := websocket.Dial(ctx, ws, nil); err == nil || resp == nil || resp.StatusCode != 401 {
			t.Errorf("WebSocket without a token: err %v, resp %v; want 401", err, resp)
		}
		c, _, err := websocket.Dial(ctx, ws+"?token="+token, nil)
		if err != nil {
			t.Fatalf("WebSocket with ?token=: %v", err)
		}
		c.CloseNow()
		hdr := http.Header{"Authorization": {"Bearer " + token}}
		c, _, err = websocket.Dial(ctx, ws, &websocket.DialOptions{HTTPHeader: hdr})
		if err != nil {
			t.Fatalf("WebSocket with the header: %v", err)
		}
		c.CloseNow()
	})

	t.Run("one url", func(t *testing.T) {
		id := submit(t, ts.URL, token, map[string]any{"urls": st.URL + "/app.html", "priority": 8, "screenshot": true,
			"wait_for": "#app[data-ready]"})
		a := poll(t, ts.URL, token, id, 2*time.Second, 300*time.Second)
		if a.Status != StatusCompleted || a.Result == nil || len(a.Results) != 0 {
			t.Fatalf("task: %+v", a)
		}
		r := a.Result
		if !r.Success || r.StatusCode != 200 || r.ErrorMessage != "" {
			t.Fatalf("result: success %v status %d error %q", r.Success, r.StatusCode, r.ErrorMessage)
		}
		for _, want := range []string{"# Harbour tides", "forty minutes after the lighthouse", "06:12 high 4.8 m"} {
			if !strings.Contains(r.Markdown, want) {
				t.Errorf("markdown lacks %q (rendered by the page's script):\n%s", want, r.Markdown)
			}
		}
		if !strings.Contains(r.HTML, `data-ready="1"`) {
			t.Errorf("html is not the rendered DOM")
		}
		if len(r.Links.Internal) == 0 || r.Links.Internal[0].Href != st.URL+"/article.html" {
			t.Errorf("internal links: %+v", r.Links.Internal)
		}
		if len(r.Links.External) != 1 || r.Links.External[0].Href != "https://example.org/charts" {
			t.Errorf("external links: %+v", r.Links.External)
		}
		if len(r.Media.Images) != 1 || r.Media.Images[0].Alt != "Tide curve" {
			t.Errorf("media: %+v", r.Media)
		}
		if r.Metadata["title"] != "Harbour tides" || r.Metadata["description"] != "Tide tables rendered by JavaScript" {
			t.Errorf("metadata: %v", r.Metadata)
		}
		png, err := base64.StdEncoding.DecodeString(string(r.Screenshot))
		if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("screenshot is not a base64 PNG (%d bytes, %v)", len(r.Screenshot), err)
		}
		if r.ExtractedContent != nil {
			t.Errorf("extracted_content without a strategy: %q", *r.ExtractedContent)
		}
	})

	t.Run("several urls", func(t *testing.T) {
		id := submit(t, ts.URL, token, map[string]any{"urls": []string{st.URL + "/article.html", st.URL + "/missing.html", st.URL + "/products.html"}})
		a := poll(t, ts.URL, token, id, 2*time.Second, 300*time.Second)
		if a.Status != StatusCompleted || a.Result != nil || len(a.Results) != 3 {
			t.Fatalf("task: status %s, result %v, %d results", a.Status, a.Result, len(a.Results))
		}
		for i, want := range []string{"/article.html", "/missing.html", "/products.html"} {
			if a.Results[i].URL != st.URL+want {
				t.Errorf("results[%d].url = %s, want %s (the order of urls)", i, a.Results[i].URL, want)
			}
		}
		if a.Results[1].Success || a.Results[1].StatusCode != 404 || !strings.Contains(string(a.Results[1].ErrorMessage), "404") {
			t.Errorf("missing page: %+v", a.Results[1])
		}
		if !a.Results[0].Success || !a.Results[2].Success {
			t.Errorf("good pages failed: %q %q", string(a.Results[0].ErrorMessage), a.Results[2].ErrorMessage)
		}
		var errs []ErrorEntry
		call(t, "GET", ts.URL+"/monitor/logs/errors?limit=10", token, nil, &errs)
		if len(errs) == 0 || errs[0].URL != st.URL+"/missing.html" || errs[0].TaskID != id {
			t.Errorf("error log: %+v", errs)
		}
	})

	t.Run("unknown task", func(t *testing.T) {
		var e errorBody
		if code := call(t, "GET", ts.URL+"/task/nope", token, nil, &e); code != 404 || e.Error != "not_found" {
			t.Errorf("unknown task: %d %+v", code, e)
		}
	})
}

// TestStreamAndOptions covers /crawl/stream and the request's page
// options on an open server (no token).
func TestStreamAndOptions(t *testing.T) {
	st := startSite(t)
	ts := startServer(t, Config{})

	t.Run("stream", func(t *testing.T) {
		body := fmt.Sprintf(`{"urls":["%s/article.html","%s/missing.html","%s/app.html"],"wait_for":"js:() => !document.getElementById('app') || document.getElementById('app').dataset.ready"}`, st.URL, st.URL, st.URL)
		resp, err := http.Post(ts.URL+"/crawl/stream", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/x-ndjson" {
			t.Fatalf("stream: %d %s", resp.StatusCode, ct)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 16<<20)
		var lines []map[string]any
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			lines = append(lines, m)
		}
		if len(lines) != 4 {
			t.Fatalf("%d lines, want 3 results and the final status", len(lines))
		}
		urls := map[string]bool{}
		for _, l := range lines[:3] {
			urls[l["url"].(string)] = l["success"].(bool)
			if _, ok := l["markdown"].(string); !ok {
				t.Errorf("line without markdown: %v", l)
			}
		}
		if !urls[st.URL+"/article.html"] || urls[st.URL+"/missing.html"] || !urls[st.URL+"/app.html"] {
			t.Errorf("results by url: %v", urls)
		}
		if lines[3]["status"] != "completed" || len(lines[3]) != 1 {
			t.Errorf("final line: %v", lines[3])
		}
	})

	run := func(t *testing.T, req map[string]any) *Result {
		t.Helper()
		a := poll(t, ts.URL, "", submit(t, ts.URL, "", req), 50*time.Millisecond, 2*time.Minute)
		if a.Result == nil {
			t.Fatalf("no result: %+v", a)
		}
		return a.Result
	}
	t.Run("css_selector and js_code", func(t *testing.T) {
		r := run(t, map[string]any{"urls": st.URL + "/products.html", "css_selector": "li.product[data-sku=BAG-1]",
			"js_code": []string{"document.querySelector('[data-sku=BAG-1] .name').textContent = 'Renamed Bag'", "return 1"}})
		if !r.Success || !strings.Contains(r.Markdown, "Renamed Bag") || strings.Contains(r.Markdown, "Ridge") {
			t.Errorf("markdown: %q (%s)", r.Markdown, r.ErrorMessage)
		}
		r = run(t, map[string]any{"urls": st.URL + "/products.html", "css_selector": ".no-such-thing"})
		if r.Success || !strings.Contains(string(r.ErrorMessage), "matched no element") {
			t.Errorf("selector matching nothing: %+v", r.ErrorMessage)
		}
	})
	t.Run("overlay, iframes, only_text", func(t *testing.T) {
		r := run(t, map[string]any{"urls": st.URL + "/overlay.html", "crawler_params": map[string]any{"remove_overlay_elements": true},
			"extra": map[string]any{"process_iframes": true, "only_text": true}})
		if !r.Success || strings.Contains(r.Markdown, "privacy") || !strings.Contains(r.Markdown, "bound in green leather") {
			t.Errorf("markdown: %q", r.Markdown)
		}
		if strings.ContainsAny(r.Markdown, "#*[") {
			t.Errorf("only_text left markup: %q", r.Markdown)
		}
		r = run(t, map[string]any{"urls": st.URL + "/overlay.html"})
		if !strings.Contains(r.Markdown, "privacy") || strings.Contains(r.Markdown, "green leather") {
			t.Errorf("without the options: %q", r.Markdown)
		}
	})
	t.Run("user agent, headers, word count, delay", func(t *testing.T) {
		r := run(t, map[string]any{"urls": st.URL + "/ua", "crawler_params": map[string]any{"user_agent": "LegacyBot/1.0",
			"headers": map[string]string{"X-Trawl-Test": "yes"}, "page_timeout": 30000}, "extra": map[string]any{"delay_before_return_html": 0.1}})
		if !strings.Contains(r.HTML, "LegacyBot/1.0") || !strings.Contains(r.HTML, `<p id="h">yes</p>`) {
			t.Errorf("user agent or header not sent: %s", r.HTML)
		}
		r = run(t, map[string]any{"urls": st.URL + "/app.html", "wait_for": "#app[data-ready]", "extra": map[string]any{"word_count_threshold": 10}})
		if !strings.Contains(r.Markdown, "forty minutes") || strings.Contains(r.Markdown, "Read the harbour article") {
			t.Errorf("word_count_threshold 10: %q", r.Markdown)
		}
	})
}

// TestBadInput: every malformed request gets 400 JSON naming the problem,
// and nothing is queued or stored.
func TestBadInput(t *testing.T) {
	ts := startServer(t, Config{})
	big := `{"urls":"http://127.0.0.1/","css_selector":"` + strings.Repeat("a", maxRequestBytes) + `"}`
	for _, c := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"empty", ``, 400, "empty"},
		{"not json", `{"urls":`, 400, "not valid JSON"},
		{"no urls", `{}`, 400, "urls is required"},
		{"urls number", `{"urls":5}`, 400, "string or an array"},
		{"bad url", `{"urls":"ftp://x/"}`, 400, "http://"},
		{"second url bad", `{"urls":["http://127.0.0.1/","nope"]}`, 400, "urls[1]"},
		{"priority high", `{"urls":"http://127.0.0.1/","priority":11}`, 400, "priority must be between 1 and 10"},
		{"priority type", `{"urls":"http://127.0.0.1/","priority":"high"}`, 400, "priority"},
		{"ttl negative", `{"urls":"http://127.0.0.1/","ttl":-5}`, 400, "ttl"},
		{"firefox", `{"urls":"http://127.0.0.1/","crawler_params":{"browser_type":"firefox"}}`, 400, "Chromium only"},
		{"webkit in browser_config", `{"urls":"http://127.0.0.1/","browser_config":{"browser_type":"webkit"}}`, 400, "Chromium only"},
		{"user_data_dir", `{"urls":"http://127.0.0.1/","crawler_params":{"user_data_dir":"/etc"}}`, 400, "user_data_dir"},
		{"viewport", `{"urls":"http://127.0.0.1/","browser_config":{"viewport":{"width":10,"height":600}}}`, 400, "viewport"},
		{"page_timeout", `{"urls":"http://127.0.0.1/","crawler_params":{"page_timeout":-1}}`, 400, "page_timeout"},
		{"semaphore", `{"urls":"http://127.0.0.1/","crawler_params":{"semaphore_count":0}}`, 400, "semaphore_count"},
		{"selector", `{"urls":"http://127.0.0.1/","css_selector":"div[[["}`, 400, "css_selector"},
		{"wait_for selector", `{"urls":"http://127.0.0.1/","wait_for":"##"}`, 400, "wait_for"},
		{"strategy", `{"urls":"http://127.0.0.1/","extraction_config":{"type":"magic"}}`, 400, "extraction_config"},
		{"json_css schema", `{"urls":"http://127.0.0.1/","extraction_config":{"type":"json_css","params":{}}}`, 400, "extraction_config"},
		{"llm key", `{"urls":"http://127.0.0.1/","extraction_config":{"type":"llm","params":{"provider":"openai/gpt-4o-mini","instruction":"x"}}}`, 400, "OPENAI_API_KEY"},
		{"proxy scheme", `{"urls":"http://127.0.0.1/","crawler_params":{"proxy":"ftp://p:1"}}`, 400, "proxy"},
		{"delay", `{"urls":"http://127.0.0.1/","extra":{"delay_before_return_html":1000}}`, 400, "delay_before_return_html"},
		{"too large", big, 413, "over"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var e errorBody
			code := call(t, "POST", ts.URL+"/crawl", "", c.body, &e)
			if code != c.status || e.Error == "" || !strings.Contains(e.Message, c.want) || e.Detail != e.Message {
				t.Errorf("%d %+v; want %d with %q", code, e, c.status, c.want)
			}
		})
	}
	n := 0
	ts.tasks.each(func(*Task) error { n++; return nil })
	if n != 0 {
		t.Errorf("%d tasks stored after bad input", n)
	}
	var e errorBody
	if code := call(t, "GET", ts.URL+"/monitor/timeline?minutes=0", "", nil, &e); code != 400 {
		t.Errorf("minutes=0: %d", code)
	}
	if code := call(t, "GET", ts.URL+"/monitor/logs/janitor?limit=x", "", nil, &e); code != 400 {
		t.Errorf("limit=x: %d", code)
	}
	if code := call(t, "GET", ts.URL+"/crawl", "", nil, &e); code != 405 || e.Error != "method_not_allowed" {
		t.Errorf("GET /crawl: %d %+v", code, e)
	}
	if code := call(t, "POST", ts.URL+"/monitor/actions/kill_browser", "", `{}`, &e); code != 400 {
		t.Errorf("kill without browser_id: %d", code)
	}
	if code := call(t, "POST", ts.URL+"/monitor/actions/kill_browser", "", `{"browser_id":"nope"}`, &e); code != 404 {
		t.Errorf("kill unknown: %d", code)
	}
}

// TestQueueLimitAndPriority: one task runs at a time, the queue holds 3,
// the 4th gets 503 "No available slots", and queued tasks run highest
// priority first.
func TestQueueLimitAndPriority(t *testing.T) {
	// The queue's series on a Prometheus endpoint (docs/operations.md).
	m, err := telemetry.SetupMetrics(context.Background(), "127.0.0.1:0", slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Shutdown(context.Background()) })
	st := startSite(t)
	ts := startServer(t, Config{MaxConcurrentTasks: 1, MaxQueuedTasks: 3})
	blocker := submit(t, ts.URL, "", map[string]any{"urls": st.URL + "/slow"})
	testwait.Until(t, 30*time.Second, "the blocking task runs", func() bool {
		_, running := ts.sched.counts()
		return running == 1
	})

	low := submit(t, ts.URL, "", map[string]any{"urls": st.URL + "/article.html", "priority": 1})
	high := submit(t, ts.URL, "", map[string]any{"urls": st.URL + "/article.html", "priority": 10})
	mid := submit(t, ts.URL, "", map[string]any{"urls": st.URL + "/article.html"})
	var e errorBody
	if code := call(t, "POST", ts.URL+"/crawl", "", map[string]any{"urls": st.URL + "/article.html"}, &e); code != 503 || e.Message != "No available slots" {
		t.Fatalf("over the queue limit: %d %+v", code, e)
	}
	resp, err := http.Post(ts.URL+"/crawl/stream", "application/json", strings.NewReader(`{"urls":"`+st.URL+`/article.html"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Errorf("stream over the queue limit: %d", resp.StatusCode)
	}
	var h healthPayload
	call(t, "GET", ts.URL+"/monitor/health", "", nil, &h)
	if h.Stats.QueuedTasks != 3 || h.Stats.RunningTasks != 1 {
		t.Errorf("health stats: %+v", h.Stats)
	}
	mresp, err := http.Get("http://" + m.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	for _, want := range []string{"trawl_crawl_tasks_queued{", "} 3\n", "trawl_crawl_tasks_running{", "trawl_crawl_tasks_refused_total{"} {
		if !strings.Contains(string(mb), want) {
			t.Errorf("no %q in /metrics:\n%s", want, mb)
		}
	}
	for _, line := range strings.Split(string(mb), "\n") {
		if strings.HasPrefix(line, "trawl_crawl_tasks_queued{") && !strings.HasSuffix(line, " 3") ||
			strings.HasPrefix(line, "trawl_crawl_tasks_running{") && !strings.HasSuffix(line, " 1") ||
			strings.HasPrefix(line, "trawl_crawl_tasks_refused_total{") && !strings.HasSuffix(line, " 2") {
			t.Errorf("metrics line %q: want queued 3, running 1, refused 2", line)
		}
	}
	st.release()
	started := map[string]Number{}
	for _, id := range []string{blocker, low, high, mid} {
		poll(t, ts.URL, "", id, 50*time.Millisecond, 2*time.Minute)
		tk, err := ts.tasks.get(id)
		if err != nil {
			t.Fatal(err)
		}
		started[id] = tk.StartedAt
	}
	if !(started[high] <= started[mid] && started[mid] <= started[low]) {
		t.Errorf("start order: high %v, mid %v, low %v; want high, mid, low", started[high], started[mid], started[low])
	}
}

// TestTasksSurviveRestart: a finished task is still there after a
// restart, a task cut off by the shutdown runs again and completes, and a
// task's ttl (seconds) ends it on the injected clock.
func TestTasksSurviveRestart(t *testing.T) {
	st := startSite(t)
	clock := newFakeClock()
	dir := t.TempDir()
	ts := startServer(t, Config{DataDir: dir, Now: clock.Now})
	done := submit(t, ts.URL, "", map[string]any{"urls": st.URL + "/article.html", "ttl": 60})
	poll(t, ts.URL, "", done, 50*time.Millisecond, time.Minute)
	cut := submit(t, ts.URL, "", map[string]any{"urls": st.URL + "/slow"})
	testwait.Until(t, 30*time.Second, "the slow task runs", func() bool {
		tk, err := ts.tasks.get(cut)
		return err == nil && tk.Status == StatusProcessing
	})

	ts.stop()

	ts2 := startServer(t, Config{DataDir: dir, Now: clock.Now})
	a := poll(t, ts2.URL, "", done, 50*time.Millisecond, time.Minute)
	if a.Status != StatusCompleted || a.Result == nil || !strings.Contains(a.Result.Markdown, "telescope") {
		t.Errorf("finished task after the restart: %+v", a)
	}
	st.release()
	a = poll(t, ts2.URL, "", cut, 50*time.Millisecond, time.Minute)
	if a.Status != StatusCompleted || !a.Result.Success || !strings.Contains(a.Result.Markdown, "It came at last") {
		t.Errorf("resumed task: %+v", a)
	}
	clock.Advance(61 * time.Second)
	var e errorBody
	if code := call(t, "GET", ts2.URL+"/task/"+done, "", nil, &e); code != 404 {
		t.Errorf("task past its ttl: %d", code)
	}
	if code := call(t, "GET", ts2.URL+"/task/"+cut, "", nil, nil); code != 200 {
		t.Errorf("task within the default ttl: %d", code)
	}
	if n, err := ts2.tasks.sweep(clock.Now()); err != nil || n != 1 {
		t.Errorf("sweep: %d, %v", n, err)
	}
}

// TestMonitorWebSocket: messages arrive by themselves every PushEvery with
// the spec's fields.
func TestMonitorWebSocket(t *testing.T) {
	st := startSite(t)
	ts := startServer(t, Config{PushEvery: 300 * time.Millisecond})
	poll(t, ts.URL, "", submit(t, ts.URL, "", map[string]any{"urls": st.URL + "/missing.html"}), 50*time.Millisecond, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http")+"/monitor/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	var stamps []float64
	for range 3 {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"timestamp", "health", "requests", "browsers", "errors"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("message lacks %s: %s", k, b)
			}
		}
		var msg wsMessage
		json.Unmarshal(b, &msg)
		stamps = append(stamps, float64(msg.Timestamp))
		if !msg.Health.Pool.Permanent.Active || msg.Browsers.Summary.TotalCount < 1 || msg.Health.Stats.TotalRequests < 1 {
			t.Errorf("message: %s", b)
		}
		if len(msg.Errors) == 0 || !strings.Contains(msg.Errors[0].Message, "404") {
			t.Errorf("recent errors: %+v", msg.Errors)
		}
	}
	// The first message goes at once and the next two on the ticker's
	// ticks, 0.3 s apart: at least one interval, whatever the first one's
	// delay on a loaded machine (a burst would be far less).
	if gap := stamps[2] - stamps[0]; gap < 0.3 || gap > 5 {
		t.Errorf("3 messages over %.2fs, want every 0.3 s", gap)
	}
	ts.takeSample()
	var tl TimelinePayload
	call(t, "GET", ts.URL+"/monitor/timeline?minutes=5", "", nil, &tl)
	if len(tl.Points) == 0 || tl.Points[len(tl.Points)-1].MemoryMB <= 0 || tl.Points[len(tl.Points)-1].Browsers < 1 {
		t.Errorf("timeline: %+v", tl)
	}
	var h healthPayload
	call(t, "GET", ts.URL+"/monitor/health", "", nil, &h)
	if h.Container.MemoryMB < 50 || h.Container.MemoryPercent <= 0 || h.Container.Processes < 3 || h.Container.UptimeSeconds <= 0 {
		t.Errorf("container: %+v (the process tree with Chromium and its driver)", h.Container)
	}
}

// chatServer is a local server speaking the chat-completions protocol.
func chatServer(t *testing.T, key string, reply func(req map[string]any) string) *httptest.Server {
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, `{"error":{"message":"bad key or path"}}`, 401)
			return
		}
		var req map[string]any
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &req)
		mu.Lock()
		content := reply(req)
		mu.Unlock()
		out, _ := json.Marshal(map[string]any{"id": "c1", "object": "chat.completion", "model": req["model"],
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": content}}}})
		w.Header().Set("Content-Type", "application/json")
		w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestStrategies runs each extraction strategy through a task.
func TestStrategies(t *testing.T) {
	st := startSite(t)
	var sawPage bool
	chat := chatServer(t, "k-123", func(req map[string]any) string {
		b, _ := json.Marshal(req["messages"])
		sawPage = strings.Contains(string(b), "Ridge") && req["model"] == "tiny-model"
		return "```json\n[{\"name\":\"Ridge Tent\",\"price\":199}]\n```"
	})
	env := map[string]string{"OPENAI_API_KEY": "k-123"}
	cfg := Config{}
	cfg.Extract.Getenv = func(k string) string { return env[k] }
	cfg.Extract.BaseURLs = map[string]string{"openai": chat.URL + "/v1"}
	ts := startServer(t, cfg)
	run := func(t *testing.T, url string, ec map[string]any) *Result {
		t.Helper()
		a := poll(t, ts.URL, "", submit(t, ts.URL, "", map[string]any{"urls": url, "extraction_config": ec}), 50*time.Millisecond, 2*time.Minute)
		if a.Result == nil || !a.Result.Success || a.Result.ExtractedContent == nil {
			t.Fatalf("result: %+v", a.Result)
		}
		return a.Result
	}
	decode := func(t *testing.T, r *Result) []map[string]any {
		t.Helper()
		var out []map[string]any
		if err := json.Unmarshal([]byte(*r.ExtractedContent), &out); err != nil {
			t.Fatalf("extracted_content is not a JSON array: %v\n%s", err, *r.ExtractedContent)
		}
		return out
	}
	t.Run("basic", func(t *testing.T) {
		out := decode(t, run(t, st.URL+"/article.html", map[string]any{"type": "basic"}))
		if len(out) == 0 || out[0]["content"] == nil {
			t.Errorf("basic: %v", out)
		}
	})
	t.Run("json_css", func(t *testing.T) {
		out := decode(t, run(t, st.URL+"/products.html", map[string]any{"type": "json_css", "params": map[string]any{"schema": map[string]any{
			"name": "products", "baseSelector": "li.product",
			"fields": []any{
				map[string]any{"name": "sku", "type": "attribute", "attribute": "data-sku"},
				map[string]any{"name": "price", "selector": ".price", "type": "text"},
				map[string]any{"name": "features", "selector": "ul.features li", "type": "list", "fields": []any{map[string]any{"name": "f", "type": "text"}}},
			}}}}))
		if len(out) < 2 || out[0]["sku"] != "TNT-2" || !strings.Contains(fmt.Sprint(out[0]["price"]), "199") {
			t.Errorf("json_css: %v", out)
		}
	})
	t.Run("cosine", func(t *testing.T) {
		out := decode(t, run(t, st.URL+"/article.html", map[string]any{"type": "cosine", "params": map[string]any{"semantic_filter": "planets stars telescope", "top_k": 1}}))
		if len(out) != 1 {
			t.Fatalf("cosine: %v", out)
		}
		t.Logf("cosine kept: %.200s", out[0]["content"])
	})
	t.Run("llm", func(t *testing.T) {
		out := decode(t, run(t, st.URL+"/products.html", map[string]any{"type": "llm", "params": map[string]any{
			"provider": "openai/tiny-model", "instruction": "list the products with their prices",
			"schema": map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}}}))
		if len(out) != 1 || out[0]["name"] != "Ridge Tent" || !sawPage {
			t.Errorf("llm: %v (page sent to the model: %v)", out, sawPage)
		}
	})
}

package crawl

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/testwait"
	"github.com/trawlhq/trawl/internal/webhook"
)

// rawCall sends a request with the given headers and returns the status,
// the answer's headers and its body.
func rawCall(t testing.TB, method, url string, hdr map[string]string, body string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// TestLegacyCalls covers what Crawl4AI v0.4 clients call and read that
// the first version of the server missed (issue 14): /crawl_sync and
// /crawl_direct, result and results for lists, null result fields, a
// lower-case bearer scheme, CORS, the root, float fields that stay
// floats, and /task polls kept out of the monitor's request list.
func TestLegacyCalls(t *testing.T) {
	const token = "legacy-token"
	st := startSite(t)
	ts := startServer(t, Config{Token: token, SyncWait: 8 * time.Second})
	auth := map[string]string{"Authorization": "bearer " + token, "Content-Type": "application/json"}

	t.Run("root and lower-case bearer", func(t *testing.T) {
		code, _, b := rawCall(t, "GET", ts.URL+"/", nil, "")
		var root map[string]string
		if code != 200 || json.Unmarshal(b, &root) != nil || root["message"] != "Crawl4AI API service is running" {
			t.Errorf("GET /: %d %s", code, b)
		}
		if code, _, b := rawCall(t, "GET", ts.URL+"/monitor/health", map[string]string{"Authorization": "bearer " + token}, ""); code != 200 {
			t.Errorf("lower-case bearer: %d %s", code, b)
		}
		if code, _, _ := rawCall(t, "GET", ts.URL+"/monitor/health", map[string]string{"Authorization": "Basic " + token}, ""); code != 401 {
			t.Errorf("Basic scheme: %d, want 401", code)
		}
	})

	t.Run("cors", func(t *testing.T) {
		code, h, _ := rawCall(t, "OPTIONS", ts.URL+"/crawl", map[string]string{"Origin": "http://app.example",
			"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type"}, "")
		if code != 200 || h.Get("Access-Control-Allow-Origin") != "http://app.example" ||
			!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") || h.Get("Access-Control-Allow-Headers") != "authorization,content-type" {
			t.Errorf("preflight: %d %v", code, h)
		}
		code, h, _ = rawCall(t, "GET", ts.URL+"/monitor/health", map[string]string{"Origin": "http://app.example", "Authorization": "Bearer " + token}, "")
		if code != 200 || h.Get("Access-Control-Allow-Origin") != "http://app.example" || h.Get("Access-Control-Allow-Credentials") != "true" {
			t.Errorf("cross-origin GET: %d %v", code, h)
		}
		// The token is still needed on the call itself.
		if code, h, _ = rawCall(t, "GET", ts.URL+"/monitor/health", map[string]string{"Origin": "http://app.example"}, ""); code != 401 {
			t.Errorf("cross-origin GET without the token: %d %v", code, h)
		}
	})

	var directRaw []byte
	t.Run("crawl_direct", func(t *testing.T) {
		code, _, b := rawCall(t, "POST", ts.URL+"/crawl_direct", auth, `{"urls":"`+st.URL+`/article.html","priority":10,"cache_mode":"bypass"}`)
		var a struct {
			Result  *Result   `json:"result"`
			Results []*Result `json:"results"`
		}
		if code != 200 || json.Unmarshal(b, &a) != nil || a.Result == nil || a.Results != nil || !a.Result.Success || a.Result.Markdown == "" {
			t.Fatalf("crawl_direct: %d %.300s", code, b)
		}
		directRaw = b
		code, _, b = rawCall(t, "POST", ts.URL+"/crawl_direct", auth, `{"urls":"`+st.URL+`/x","priority":99}`)
		if code != 400 || !strings.Contains(string(b), "priority") {
			t.Errorf("crawl_direct with a bad priority: %d %s", code, b)
		}
	})

	t.Run("null fields and floats", func(t *testing.T) {
		var a map[string]map[string]json.RawMessage
		if err := json.Unmarshal(directRaw, &a); err != nil {
			t.Fatal(err)
		}
		r := a["result"]
		for _, k := range []string{"error_message", "screenshot", "redirected_url", "session_id", "pdf", "downloaded_files"} {
			if v, ok := r[k]; !ok || string(v) != "null" {
				t.Errorf("result[%q] = %s (present %v), want null", k, v, ok)
			}
		}
		if d := string(r["duration_ms"]); !strings.Contains(d, ".") {
			t.Errorf("duration_ms = %s, want a float", d)
		}
		// Every number of the monitor's payloads that is a float stays
		// one: the fraction is written even when it is zero.
		floatRE := regexp.MustCompile(`"(latency_ms|finished_at|started_at|avg_latency_ms|success_rate_percent|timestamp|memory_mb|cpu_percent|uptime_seconds|idle_seconds|created_at|last_used_at)":(-?[0-9.e+-]+)`)
		for _, path := range []string{"/monitor/requests", "/monitor/health", "/monitor/browsers", "/monitor/endpoints/stats"} {
			_, _, b := rawCall(t, "GET", ts.URL+path, auth, "")
			ms := floatRE.FindAllStringSubmatch(string(b), -1)
			if len(ms) == 0 {
				t.Errorf("%s: no float field in %.200s", path, b)
			}
			for _, m := range ms {
				if !strings.ContainsAny(m[2], ".e") {
					t.Errorf("%s: %s is %s, an integer", path, m[1], m[2])
				}
			}
		}
	})

	t.Run("one-url list answers result and results", func(t *testing.T) {
		id := submit(t, ts.URL, token, map[string]any{"urls": []string{st.URL + "/article.html"}})
		a := poll(t, ts.URL, token, id, 50*time.Millisecond, time.Minute)
		if a.Result == nil || len(a.Results) != 1 || a.Results[0].URL != a.Result.URL {
			t.Fatalf("one-URL list: result %v, %d results", a.Result != nil, len(a.Results))
		}
		id = submit(t, ts.URL, token, map[string]any{"urls": st.URL + "/article.html"})
		if a = poll(t, ts.URL, token, id, 50*time.Millisecond, time.Minute); a.Result == nil || a.Results != nil {
			t.Fatalf("one URL as a string: result %v, results %v", a.Result != nil, a.Results)
		}
	})

	t.Run("task polls stay out of the request list", func(t *testing.T) {
		id := submit(t, ts.URL, token, map[string]any{"urls": st.URL + "/products.html"})
		poll(t, ts.URL, token, id, 10*time.Millisecond, time.Minute)
		for range 120 {
			call(t, "GET", ts.URL+"/task/"+id, token, nil, nil)
		}
		var rq RequestsPayload
		call(t, "GET", ts.URL+"/monitor/requests", token, nil, &rq)
		tasks := 0
		for _, c := range rq.Completed {
			if c.Endpoint == "/task/{task_id}" {
				t.Fatalf("a /task poll is listed: %+v", c)
			}
			if c.Endpoint == "/crawl (task)" {
				tasks++
			}
		}
		if tasks < 3 {
			t.Errorf("%d task runs listed after 120 polls, want the 3 of this test at least", tasks)
		}
		var es map[string]EndpointStats
		call(t, "GET", ts.URL+"/monitor/endpoints/stats", token, nil, &es)
		if es["/task/{task_id}"].Count < 120 {
			t.Errorf("/task polls counted %d times in the endpoint stats, want 120 or more", es["/task/{task_id}"].Count)
		}
	})

	t.Run("crawl_sync", func(t *testing.T) {
		var a struct {
			TaskID string  `json:"task_id"`
			Status string  `json:"status"`
			Result *Result `json:"result"`
		}
		code := call(t, "POST", ts.URL+"/crawl_sync", token, map[string]any{"urls": st.URL + "/article.html", "priority": 10, "session_id": "test"}, &a)
		if code != 200 || a.Status != StatusCompleted || a.Result == nil || !a.Result.Success || a.Result.Markdown == "" {
			t.Fatalf("crawl_sync: %d %+v", code, a)
		}
		// A page slower than the wait: 408, and the task goes on.
		var e map[string]any
		code = call(t, "POST", ts.URL+"/crawl_sync", token, map[string]any{"urls": st.URL + "/slow"}, &e)
		id, _ := e["task_id"].(string)
		if code != 408 || e["detail"] != "Task timed out" || id == "" {
			t.Fatalf("crawl_sync of a slow page: %d %v", code, e)
		}
		st.release()
		if ta := poll(t, ts.URL, token, id, 20*time.Millisecond, time.Minute); ta.Result == nil || !ta.Result.Success {
			t.Errorf("the timed-out task: %+v", ta)
		}
	})
}

// TestQueueLimitIsOneStep has many submitters race for the last places of
// the queue: exactly the limit is accepted, never more.
func TestQueueLimitIsOneStep(t *testing.T) {
	sched := newScheduler(0, 7, func(string) {})
	defer sched.close()
	var ok atomic.Int64
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			if !sched.reserve() {
				return
			}
			if i%5 == 0 { // a submission whose store failed gives its place back
				sched.unreserve()
				return
			}
			if err := sched.pushReserved(&queued{priority: 5, taskID: fmt.Sprint(i)}); err == nil {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if q, _ := sched.counts(); q != 7 || ok.Load() != 7 {
		t.Fatalf("queued %d (accepted %d), want exactly the limit 7", q, ok.Load())
	}
	if sched.reserve() {
		t.Fatal("a full queue gave a place")
	}
}

// TestQueueLimitOverHTTP sends concurrent POST /crawl to a server whose
// queue has 3 places while its one worker is busy: exactly 3 are accepted.
func TestQueueLimitOverHTTP(t *testing.T) {
	st := startSite(t)
	ts := startServer(t, Config{MaxConcurrentTasks: 1, MaxQueuedTasks: 3})
	submit(t, ts.URL, "", map[string]any{"urls": st.URL + "/slow"})
	testwait.Until(t, 30*time.Second, "the worker runs the blocker", func() bool { _, r := ts.sched.counts(); return r == 1 })
	var accepted, refused atomic.Int64
	var wg sync.WaitGroup
	for range 30 {
		wg.Go(func() {
			var out map[string]any
			switch call(t, "POST", ts.URL+"/crawl", "", map[string]any{"urls": st.URL + "/article.html"}, &out) {
			case 200:
				accepted.Add(1)
			case 503:
				if out["message"] == "No available slots" {
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if accepted.Load() != 3 || refused.Load() != 27 {
		t.Fatalf("accepted %d, refused %d; want 3 and 27", accepted.Load(), refused.Load())
	}
	n := 0
	ts.tasks.each(func(*Task) error { n++; return nil })
	if n != 4 {
		t.Errorf("%d tasks stored, want 4 (the blocker and 3)", n)
	}
	st.release()
}

// TestTaskWebhook: a task with webhook_config is announced by a signed
// POST when it finishes, with its results when asked; a receiver that
// fails gets the retry on the ladder's first step (the clock moved); a
// bad webhook is refused at submission and stores nothing.
func TestTaskWebhook(t *testing.T) {
	st := startSite(t)
	clock := newFakeClock()
	var mu sync.Mutex
	var got []struct {
		h    http.Header
		body []byte
	}
	fail := atomic.Bool{}
	fail.Store(true)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, struct {
			h    http.Header
			body []byte
		}{r.Header.Clone(), b})
		mu.Unlock()
		if fail.Load() {
			w.WriteHeader(http.StatusBadGateway)
		}
	}))
	defer recv.Close()
	ts := startServer(t, Config{Now: clock.Now})
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	// A wait that times out says what the sender holds and what the clock
	// reads (a CI flake left no trace of either).
	defer func() {
		if t.Failed() {
			p, err := ts.hooks.Pending()
			t.Logf("%d received; clock %v; pending %+v %v", count(), clock.Now(), p, err)
		}
	}()

	id := submit(t, ts.URL, "", map[string]any{"urls": []string{st.URL + "/article.html"},
		"webhook_config": map[string]any{"webhook_url": recv.URL + "/hook", "webhook_data_in_payload": true,
			"webhook_secret": "hook-secret", "webhook_headers": map[string]string{"X-Their-Token": "t0k"}}})
	poll(t, ts.URL, "", id, 20*time.Millisecond, time.Minute)
	testwait.Until(t, 30*time.Second, "the first delivery", func() bool { return count() == 1 })
	// The failure recorded (its retry set from the clock) before the
	// clock moves: the receiver answers before the sender writes it down.
	testwait.Until(t, 30*time.Second, "the failed attempt recorded", func() bool {
		p, err := ts.hooks.Pending()
		return err == nil && len(p) == 1 && p[0].Attempts == 1
	})

	fail.Store(false)
	clock.Advance(time.Minute)
	// Kicked while waiting, not once: a fake clock moves no timer, and the
	// sender's real timer, its backstop, is longer than the wait (CI saw the
	// retry wait out the 30 s, once; internal/webhook's waitKicking).
	testwait.Until(t, 30*time.Second, "the retry a minute later", func() bool { ts.hooks.Kick(); return count() == 2 })
	mu.Lock()
	last := got[1]
	mu.Unlock()
	ts2 := last.h.Get("x-svc-timestamp")
	if last.h.Get("x-svc-signature") != webhook.Sign("hook-secret", ts2, last.body) || last.h.Get("X-Their-Token") != "t0k" ||
		last.h.Get("x-svc-event") != "crawl.completed" || last.h.Get("x-svc-attempt") != "2" {
		t.Errorf("delivery headers: %v", last.h)
	}
	var p struct {
		TaskID    string   `json:"task_id"`
		TaskType  string   `json:"task_type"`
		Status    string   `json:"status"`
		Timestamp string   `json:"timestamp"`
		URLs      []string `json:"urls"`
		Data      struct {
			Result  *Result   `json:"result"`
			Results []*Result `json:"results"`
		}
	}
	if err := json.Unmarshal(last.body, &p); err != nil {
		t.Fatal(err)
	}
	if p.TaskID != id || p.Status != "completed" || len(p.URLs) != 1 || len(p.Data.Results) != 1 || !p.Data.Results[0].Success ||
		p.Data.Result == nil || p.Timestamp == "" || p.TaskType != "crawl" {
		t.Errorf("payload: %.400s", last.body)
	}
	testwait.Until(t, 10*time.Second, "no delivery pending", func() bool { d, _ := ts.hooks.Pending(); return len(d) == 0 })

	for _, c := range []struct{ name, body, want string }{
		{"no url", `{"urls":"` + st.URL + `/a","webhook_config":{"webhook_data_in_payload":true}}`, "webhook_url is required"},
		{"scheme", `{"urls":"` + st.URL + `/a","webhook_config":{"webhook_url":"ftp://example.org/x"}}`, "webhook_config"},
		{"signature header", `{"urls":"` + st.URL + `/a","webhook_config":{"webhook_url":"https://example.org/x","webhook_headers":{"x-svc-signature":"f"}}}`, "set by the sender"},
		{"type", `{"urls":"` + st.URL + `/a","webhook_config":{"webhook_url":7}}`, "webhook_url"},
	} {
		var e errorBody
		if code := call(t, "POST", ts.URL+"/crawl", "", c.body, &e); code != 400 || !strings.Contains(e.Message, c.want) {
			t.Errorf("%s: %d %q, want 400 naming %q", c.name, code, e.Message, c.want)
		}
	}
	// Without --allow-private-networks a private receiver is refused.
	priv := &Server{cfg: Config{DefaultTTL: time.Hour}}
	req, _ := decodeRequest([]byte(`{"urls":"https://example.org/","webhook_config":{"webhook_url":"http://192.168.1.5/hook"}}`))
	if _, err := priv.compile(req); err == nil || !strings.Contains(err.Error(), "not public") {
		t.Errorf("private webhook without allow-private: %v", err)
	}
}

package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/playwright-community/playwright-go"

	"github.com/trawlhq/trawl/cell/crawl/dashboard"
	"github.com/trawlhq/trawl/internal/browsertest"
)

const testToken = "s3cret token/+" // characters that need escaping in a URL

// wsEvery is how often the fake pushes a message; the real server's 2 s
// would only slow the test down, and the page does not depend on it.
const wsEvery = 100 * time.Millisecond

type obj = map[string]any

// fakeMonitor is the monitor API the page talks to, with state the test
// changes and inspects.
type fakeMonitor struct {
	t    *testing.T
	done chan struct{}

	mu          sync.Mutex
	cpu         float64
	permanent   []obj
	hot         []obj
	cold        []obj
	janitor     []obj
	errorLog    []obj
	wsErrors    []obj
	sent        map[string]bool // timestamps sent on the socket, as the page prints them
	seq         int
	cleanups    int
	resets      int
	kills       []string
	restarts    []string
	badAuth     []string // requests without the right token
	refuseWS    bool
	wsAccepted  int
	kick        chan struct{} // closed to drop open sockets
	timelineGot []string      // minutes parameters asked for
}

func newFakeMonitor(t *testing.T) *fakeMonitor {
	b := func(id, tier string, reqs int, mem float64) obj {
		return obj{"browser_id": id, "tier": tier, "config": "viewport=800x600", "request_count": reqs,
			"memory_mb": mem, "created_at": 1763822000.0, "last_used_at": 1763822390.0, "idle_seconds": 12.0, "pages_in_use": 0}
	}
	return &fakeMonitor{
		t:         t,
		done:      make(chan struct{}),
		cpu:       12.5,
		permanent: []obj{b("perm-1", "permanent", 30, 180.25)},
		hot:       []obj{b("hot-2", "hot", 7, 150.5)},
		cold:      []obj{b("cold-3", "cold", 2, 140.2), b("cold-4", "cold", 1, 130)},
		janitor: []obj{
			{"timestamp": 1763822300.0, "message": "promoted cold-9 to hot after 3 uses", "action": "promote", "browser_id": "cold-9", "tier": "hot"},
			{"timestamp": 1763822200.0, "message": "reuse rate 66.7%", "action": "stats"},
		},
		errorLog: []obj{
			{"timestamp": 1763822100.0, "message": "navigation timeout", "endpoint": "/crawl", "url": "http://127.0.0.1:1/slow", "task_id": "t-1"},
		},
		wsErrors: []obj{
			{"timestamp": 1763822350.0, "message": "<b>net::ERR_CONNECTION_REFUSED</b>", "endpoint": "/crawl", "url": "http://127.0.0.1:2/", "task_id": "t-2"},
		},
		sent: map[string]bool{},
		kick: make(chan struct{}),
	}
}

func (f *fakeMonitor) health() obj {
	return obj{
		"status": "ok",
		"container": obj{"cpu_percent": f.cpu, "memory_percent": 8.1, "memory_mb": 512.3,
			"memory_limit_mb": 24000, "uptime_seconds": 3723.4},
		"pool": obj{"permanent": obj{"active": true, "browser_id": "perm-1"},
			"hot": obj{"count": len(f.hot)}, "cold": obj{"count": len(f.cold)}},
		"stats": obj{"total_requests": 1234, "success_rate_percent": 97.6, "avg_latency_ms": 812.4,
			"active_requests": 1, "queued_tasks": 0},
	}
}

func (f *fakeMonitor) browsers() obj {
	var mem float64
	for _, l := range [][]obj{f.permanent, f.hot, f.cold} {
		for _, b := range l {
			mem += b["memory_mb"].(float64)
		}
	}
	return obj{
		"summary":   obj{"total_count": len(f.permanent) + len(f.hot) + len(f.cold), "total_memory_mb": mem, "reuse_rate_percent": 66.7},
		"permanent": f.permanent, "hot": f.hot, "cold": f.cold,
	}
}

func (f *fakeMonitor) requests() obj {
	return obj{
		"active": []obj{{"id": "r-9", "endpoint": "/crawl", "url": "http://127.0.0.1:8/in-flight", "started_at": 1763822400.1, "elapsed_ms": 120}},
		"completed": []obj{
			{"id": "r-8", "endpoint": "/crawl", "url": "http://127.0.0.1:8/a", "success": true, "status_code": 200, "latency_ms": 812.4, "finished_at": 1763822401.0, "error": ""},
			{"id": "r-7", "endpoint": "/crawl/stream", "url": "http://127.0.0.1:8/b", "success": false, "status_code": 500, "latency_ms": 40, "finished_at": 1763822399.0, "error": "upstream reset"},
		},
	}
}

// message is one socket message; it records the timestamp as the page will
// print it (JavaScript's String(number) and Go's shortest 'f' formatting
// agree for these values).
func (f *fakeMonitor) message() obj {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	ts := 1763822400.123 + float64(f.seq)
	f.sent[strconv.FormatFloat(ts, 'f', -1, 64)] = true
	return obj{"timestamp": ts, "health": f.health(), "requests": f.requests(), "browsers": f.browsers(), "errors": f.wsErrors}
}

func (f *fakeMonitor) writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (f *fakeMonitor) routes(mux *http.ServeMux) {
	h := dashboard.Handler()
	mux.Handle(dashboard.Path, h)
	mux.Handle(dashboard.Path+"/", h)

	api := func(pattern string, fn func(w http.ResponseWriter, r *http.Request)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+testToken {
				f.mu.Lock()
				f.badAuth = append(f.badAuth, r.Method+" "+r.URL.String())
				f.mu.Unlock()
				http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
				return
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			fn(w, r)
		})
	}
	api("GET /monitor/health", func(w http.ResponseWriter, r *http.Request) { f.writeJSON(w, f.health()) })
	api("GET /monitor/requests", func(w http.ResponseWriter, r *http.Request) { f.writeJSON(w, f.requests()) })
	api("GET /monitor/browsers", func(w http.ResponseWriter, r *http.Request) { f.writeJSON(w, f.browsers()) })
	api("GET /monitor/endpoints/stats", func(w http.ResponseWriter, r *http.Request) {
		f.writeJSON(w, obj{
			"/crawl":        obj{"count": 40, "avg_latency_ms": 800.5, "success_rate_percent": 97.5},
			"/crawl/stream": obj{"count": 2, "avg_latency_ms": 1200, "success_rate_percent": 100},
		})
	})
	api("GET /monitor/timeline", func(w http.ResponseWriter, r *http.Request) {
		f.timelineGot = append(f.timelineGot, r.URL.Query().Get("minutes"))
		var pts []obj
		for i := range 60 {
			pts = append(pts, obj{"timestamp": 1763822100.0 + float64(i*5), "cpu_percent": 10 + float64(i%20)*3,
				"memory_percent": 20 + float64(i)/3, "requests": i % 7, "errors": i % 2, "avg_latency_ms": 700.0, "browsers": 2})
		}
		f.writeJSON(w, obj{"minutes": 5, "interval_seconds": 5, "points": pts})
	})
	limited := func(l []obj, r *http.Request) []obj {
		n, err := strconv.Atoi(r.URL.Query().Get("limit"))
		if err != nil || n <= 0 || n > len(l) {
			n = len(l)
		}
		return l[:n]
	}
	api("GET /monitor/logs/janitor", func(w http.ResponseWriter, r *http.Request) { f.writeJSON(w, limited(f.janitor, r)) })
	api("GET /monitor/logs/errors", func(w http.ResponseWriter, r *http.Request) { f.writeJSON(w, limited(f.errorLog, r)) })
	api("POST /monitor/actions/cleanup", func(w http.ResponseWriter, r *http.Request) {
		f.cleanups++
		f.janitor = append([]obj{{"timestamp": 1763822500.0, "message": "manual cleanup removed 2 browsers (280.4 MB freed)", "action": "cleanup"}}, f.janitor...)
		f.writeJSON(w, obj{"cleaned_count": 2, "memory_freed_mb": 280.4})
	})
	api("POST /monitor/stats/reset", func(w http.ResponseWriter, r *http.Request) {
		f.resets++
		f.writeJSON(w, obj{"status": "reset"})
	})
	browserAction := func(record *[]string, remove bool) func(w http.ResponseWriter, r *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				BrowserID string `json:"browser_id"`
			}
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.BrowserID == "" {
				http.Error(w, `{"error":"browser_id required"}`, http.StatusBadRequest)
				return
			}
			*record = append(*record, body.BrowserID)
			if remove {
				f.cold = slices.DeleteFunc(f.cold, func(b obj) bool { return b["browser_id"] == body.BrowserID })
				f.hot = slices.DeleteFunc(f.hot, func(b obj) bool { return b["browser_id"] == body.BrowserID })
			}
			f.writeJSON(w, obj{"success": true})
		}
	}
	api("POST /monitor/actions/kill_browser", browserAction(&f.kills, true))
	api("POST /monitor/actions/restart_browser", browserAction(&f.restarts, false))

	mux.HandleFunc("GET /monitor/ws", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		refuse, kick := f.refuseWS, f.kick
		f.mu.Unlock()
		if r.URL.Query().Get("token") != testToken {
			f.mu.Lock()
			f.badAuth = append(f.badAuth, "WS "+r.URL.String())
			f.mu.Unlock()
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if refuse {
			http.Error(w, "not now", http.StatusServiceUnavailable)
			return
		}
		c, err := websocket.Accept(w, r, nil) // same origin: the default check passes
		if err != nil {
			return
		}
		defer c.CloseNow()
		f.mu.Lock()
		f.wsAccepted++
		f.mu.Unlock()
		ctx := c.CloseRead(r.Context())
		tick := time.NewTicker(wsEvery)
		defer tick.Stop()
		for {
			b, _ := json.Marshal(f.message())
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := c.Write(wctx, websocket.MessageText, b)
			cancel()
			if err != nil {
				return
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			case <-f.done:
				c.Close(websocket.StatusGoingAway, "test over")
				return
			case <-kick:
				c.Close(websocket.StatusGoingAway, "kicked")
				return
			}
		}
	})
}

// start serves the fake on 127.0.0.1.
func (f *fakeMonitor) start() *httptest.Server {
	mux := http.NewServeMux()
	f.routes(mux)
	srv := httptest.NewUnstartedServer(mux)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.t.Fatal(err)
	}
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	f.t.Cleanup(srv.Close)
	f.t.Cleanup(func() { close(f.done) }) // runs first: ends the socket loops
	return srv
}

// consoleLog collects the page's console errors and uncaught exceptions.
type consoleLog struct {
	mu   sync.Mutex
	errs []string
}

func (c *consoleLog) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, s)
}

func (c *consoleLog) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.errs
	c.errs = nil
	return out
}

// waitFor waits until an element matches the selector (or, with detached,
// until none does). The page's Content-Security-Policy forbids eval, which
// Page.WaitForFunction needs, so waits are selector conditions: attributes
// (data-value, data-count, data-state) and Playwright's text pseudo-classes.
func waitFor(t *testing.T, p playwright.Page, what, selector string, detached ...bool) {
	t.Helper()
	state := playwright.WaitForSelectorStateAttached
	if len(detached) > 0 && detached[0] {
		state = playwright.WaitForSelectorStateDetached
	}
	err := p.Locator(selector).First().WaitFor(playwright.LocatorWaitForOptions{State: state, Timeout: playwright.Float(15_000)})
	if err != nil {
		body, _ := p.Locator("body").InnerText()
		t.Fatalf("waiting for %s (%s): %v\npage text:\n%s", what, selector, err, body)
	}
}

func dataValue(t *testing.T, p playwright.Page, sel string) string {
	t.Helper()
	v, err := p.Locator(sel).GetAttribute("data-value")
	if err != nil {
		t.Fatalf("%s data-value: %v", sel, err)
	}
	return v
}

func text(t *testing.T, p playwright.Page, sel string) string {
	t.Helper()
	s, err := p.Locator(sel).TextContent()
	if err != nil {
		t.Fatalf("%s text: %v", sel, err)
	}
	return s
}

func TestDashboardInBrowser(t *testing.T) {
	b := browsertest.Launch(t)
	f := newFakeMonitor(t)
	srv := f.start()

	p := b.NewPage()
	if err := p.SetViewportSize(1280, 1400); err != nil {
		t.Fatal(err)
	}
	console := &consoleLog{}
	p.OnConsole(func(m playwright.ConsoleMessage) {
		if m.Type() == "error" || m.Type() == "warning" {
			console.add(m.Type() + ": " + m.Text())
		}
	})
	p.OnPageError(func(err error) { console.add("uncaught: " + err.Error()) })

	pageURL := srv.URL + "/dashboard?token=" + url.QueryEscape(testToken)
	if _, err := p.Goto(pageURL); err != nil {
		t.Fatal(err)
	}

	// Connected, and the first values rendered.
	waitFor(t, p, "ws connected", `#ws-status:text-is("connected")`)
	waitFor(t, p, "cpu 12.5", `#cpu-percent[data-value="12.5"]`)

	// Later messages re-render.
	f.mu.Lock()
	f.cpu = 33.25
	f.mu.Unlock()
	waitFor(t, p, "cpu 33.25", `#cpu-percent[data-value="33.25"]`)
	if got := text(t, p, "#cpu-percent"); got != "33.3%" && got != "33.2%" {
		t.Errorf("#cpu-percent text = %q", got)
	}

	for sel, want := range map[string]string{
		"#memory-percent": "8.1",
		"#uptime":         "3723.4",
		"#total-requests": "1234",
		"#success-rate":   "97.6",
		"#avg-latency":    "812.4",
		"#pool-permanent": "true",
		"#pool-hot":       "1",
		"#pool-cold":      "2",
		"#memory-mb":      "512.3",
	} {
		if got := dataValue(t, p, sel); got != want {
			t.Errorf("%s data-value = %q, want %q", sel, got, want)
		}
	}
	if got := text(t, p, "#uptime"); got != "1h 2m 3s" {
		t.Errorf("#uptime text = %q", got)
	}
	last := dataValue(t, p, "#last-update")
	f.mu.Lock()
	sentOK := f.sent[last]
	f.mu.Unlock()
	if !sentOK {
		t.Errorf("#last-update data-value %q is not a timestamp the server sent", last)
	}

	// Tables: browsers per tier, requests, endpoint stats.
	waitFor(t, p, "4 browser rows", `#browsers[data-count="4"]`)
	for id, tier := range map[string]string{"perm-1": "permanent", "hot-2": "hot", "cold-3": "cold", "cold-4": "cold"} {
		n, err := p.Locator(fmt.Sprintf(`#browsers-%s tr[data-key=%q]`, tier, id)).Count()
		if err != nil || n != 1 {
			t.Errorf("browser %s in tier %s: %d rows, %v", id, tier, n, err)
		}
	}
	if got, _ := p.Locator(`#browsers-cold tr[data-key="cold-3"] td[data-field="memory_mb"]`).GetAttribute("data-value"); got != "140.2" {
		t.Errorf("cold-3 memory_mb = %q", got)
	}
	if n, _ := p.Locator("#active-requests tr[data-key]").Count(); n != 1 {
		t.Errorf("active requests rows = %d, want 1", n)
	}
	if n, _ := p.Locator("#completed-requests tr[data-key]").Count(); n != 2 {
		t.Errorf("completed requests rows = %d, want 2", n)
	}
	waitFor(t, p, "endpoint stats", `#endpoint-stats[data-count="2"]`)

	// Logs: janitor from its endpoint; errors merged from the socket and
	// the error log, written as text (the <b> in a message stays literal).
	waitFor(t, p, "2 janitor lines", `#janitor-log[data-count="2"]`)
	waitFor(t, p, "2 error lines", `#error-log[data-count="2"]`)
	if n, _ := p.Locator("#error-log b").Count(); n != 0 {
		t.Error("an error message was rendered as HTML")
	}
	if s := text(t, p, "#error-log"); !strings.Contains(s, "<b>net::ERR_CONNECTION_REFUSED</b>") || !strings.Contains(s, "navigation timeout") {
		t.Errorf("#error-log = %q", s)
	}

	// Timeline chart drawn from /monitor/timeline?minutes=5.
	waitFor(t, p, "timeline points", `#timeline-chart[data-points="60"]`)

	// Cleanup shows its result and the janitor line it caused.
	if err := p.Locator("#btn-cleanup").Click(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, "cleanup result", `#cleanup-result[data-cleaned-count="2"]`)
	if got, _ := p.Locator("#cleanup-result").GetAttribute("data-memory-freed-mb"); got != "280.4" {
		t.Errorf("cleanup memory freed = %q", got)
	}
	if s := text(t, p, "#cleanup-result"); !strings.Contains(s, "2 browsers") || !strings.Contains(s, "280.4 MB") {
		t.Errorf("#cleanup-result = %q", s)
	}
	waitFor(t, p, "janitor line from cleanup",
		`#janitor-log[data-count="3"] > li:first-child:has-text("manual cleanup removed 2 browsers")`)

	// Kill removes a browser; Restart posts its id; Reset posts.
	if err := p.Locator(`[data-testid="kill-cold-3"]`).Click(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, "cold count 1", `#pool-cold[data-value="1"]`)
	waitFor(t, p, "cold-3 row gone", `#browsers tr[data-key="cold-3"]`, true)
	if err := p.Locator(`[data-testid="restart-hot-2"]`).Click(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, "restart result", `#action-result:text-is("Restarted hot-2")`)
	if err := p.Locator("#btn-reset").Click(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, "reset result", `#action-result:text-is("Statistics reset")`)

	f.mu.Lock()
	if f.cleanups != 1 || f.resets != 1 || !slices.Equal(f.kills, []string{"cold-3"}) || !slices.Equal(f.restarts, []string{"hot-2"}) {
		t.Errorf("actions seen by the server: cleanups %d resets %d kills %v restarts %v", f.cleanups, f.resets, f.kills, f.restarts)
	}
	if len(f.badAuth) != 0 {
		t.Errorf("requests without the token: %v", f.badAuth)
	}
	if len(f.timelineGot) == 0 || f.timelineGot[0] != "5" {
		t.Errorf("timeline asked for minutes %v", f.timelineGot)
	}
	f.mu.Unlock()

	shotDir := os.Getenv("DASHBOARD_SCREENSHOT_DIR")
	if shotDir == "" {
		shotDir = t.TempDir()
	}
	shot := filepath.Join(shotDir, "dashboard.png")
	if _, err := p.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(shot), FullPage: playwright.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", shot)

	if errs := console.take(); len(errs) != 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}

	// The socket drops and the server refuses for a while: the page says it
	// is reconnecting, then reconnects by itself.
	f.mu.Lock()
	f.refuseWS = true
	close(f.kick)
	f.kick = make(chan struct{})
	f.mu.Unlock()
	waitFor(t, p, "reconnecting", `#ws-status:text-is("reconnecting")`)
	f.mu.Lock()
	f.refuseWS = false
	f.mu.Unlock()
	waitFor(t, p, "reconnected", `#ws-status:text-is("connected")`)
	before := dataValue(t, p, "#last-update")
	waitFor(t, p, "messages after reconnecting", fmt.Sprintf(`#last-update:not([data-value=%q])`, before))
	// Refused handshakes are logged by the browser itself; nothing else may be.
	for _, e := range console.take() {
		if !strings.Contains(e, "WebSocket connection to") {
			t.Errorf("console error while reconnecting: %s", e)
		}
	}
}

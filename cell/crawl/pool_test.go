package crawl

import (
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/testwait"
)

// browsers reads GET /monitor/browsers.
func browsers(t *testing.T, ts *testServer) BrowsersPayload {
	t.Helper()
	var b BrowsersPayload
	if code := call(t, "GET", ts.URL+"/monitor/browsers", "", nil, &b); code != 200 {
		t.Fatalf("/monitor/browsers: %d", code)
	}
	return b
}

func janitorLog(t *testing.T, ts *testServer) []JanitorEntry {
	t.Helper()
	var j []JanitorEntry
	call(t, "GET", ts.URL+"/monitor/logs/janitor?limit=100", "", nil, &j)
	return j
}

func hasJanitor(log []JanitorEntry, action, id string) bool {
	for _, e := range log {
		if e.Action == action && (id == "" || e.BrowserID == id) {
			return true
		}
	}
	return false
}

// TestPoolTiers: the permanent browser serves the default configuration;
// a viewport of its own gets a cold browser, hot after 3 uses; the
// janitor removes idle browsers on the injected clock; kill, restart,
// cleanup and stats reset act on the pool; a request after a kill still
// succeeds.
func TestPoolTiers(t *testing.T) {
	st := startSite(t)
	clock := newFakeClock()
	ts := startServer(t, Config{Now: clock.Now, JanitorEvery: 50 * time.Millisecond})
	crawlWith := func(t *testing.T, viewport map[string]int) *Result {
		t.Helper()
		// wait_for sends the default configuration to the permanent
		// browser (without a browser option the engine ladder would
		// serve the page over plain HTTP).
		req := map[string]any{"urls": st.URL + "/article.html", "wait_for": "main"}
		if viewport != nil {
			req["browser_config"] = map[string]any{"viewport": viewport}
		}
		a := poll(t, ts.URL, "", submit(t, ts.URL, "", req), 50*time.Millisecond, 2*time.Minute)
		if a.Result == nil || !a.Result.Success {
			t.Fatalf("crawl: %+v", a)
		}
		return a.Result
	}
	small := map[string]int{"width": 800, "height": 600}
	tall := map[string]int{"width": 600, "height": 1200}

	r := crawlWith(t, nil)
	if r.BrowserID != "permanent" {
		t.Errorf("default configuration served by %s", r.BrowserID)
	}
	if r := crawlWith(t, map[string]int{"width": DefaultViewport.Width, "height": DefaultViewport.Height}); r.BrowserID != "permanent" {
		t.Errorf("the default viewport spelt out is served by %s", r.BrowserID)
	}
	var coldID string
	for use := 1; use <= 3; use++ {
		r := crawlWith(t, small)
		b := browsers(t, ts)
		if use == 1 {
			coldID = r.BrowserID
			if !strings.HasPrefix(coldID, "browser-") {
				t.Fatalf("first use served by %s", coldID)
			}
		} else if r.BrowserID != coldID {
			t.Errorf("use %d served by %s, want %s again", use, r.BrowserID, coldID)
		}
		want := TierCold
		if use == 3 {
			want = TierHot
		}
		list := b.Cold
		if want == TierHot {
			list = b.Hot
		}
		if len(list) != 1 || list[0].BrowserID != coldID || list[0].Config != "viewport=800x600" {
			t.Errorf("after %d uses: hot %+v cold %+v; want it %s", use, b.Hot, b.Cold, want)
		}
	}
	if !hasJanitor(janitorLog(t, ts), "promote", coldID) {
		t.Errorf("no promotion in the janitor log: %+v", janitorLog(t, ts))
	}
	b := browsers(t, ts)
	if b.Summary.TotalCount != 2 || b.Summary.TotalMemoryMB <= 0 || b.Summary.ReuseRatePercent <= 0 {
		t.Errorf("summary: %+v", b.Summary)
	}
	var h healthPayload
	call(t, "GET", ts.URL+"/monitor/health", "", nil, &h)
	if !h.Pool.Permanent.Active || h.Pool.Hot.Count != 1 || h.Pool.Cold.Count != 0 {
		t.Errorf("health pool: %+v", h.Pool)
	}

	t.Run("janitor", func(t *testing.T) {
		tallR := crawlWith(t, tall)
		clock.Advance(301 * time.Second) // past the cold threshold, not the hot one
		testwait.Until(t, 30*time.Second, "the janitor removes the idle cold browser", func() bool {
			b := browsers(t, ts)
			return len(b.Cold) == 0 && len(b.Hot) == 1
		})

		if !hasJanitor(janitorLog(t, ts), "remove_idle", tallR.BrowserID) {
			t.Errorf("no removal of %s in the janitor log", tallR.BrowserID)
		}
		clock.Advance(1500 * time.Second) // the hot one has now been idle 1801 s
		testwait.Until(t, 30*time.Second, "the janitor removes the idle hot browser", func() bool {
			return len(browsers(t, ts).Hot) == 0
		})

		if !hasJanitor(janitorLog(t, ts), "remove_idle", coldID) || !hasJanitor(janitorLog(t, ts), "reuse_rate", "") {
			t.Errorf("janitor log: %+v", janitorLog(t, ts))
		}
		if b := browsers(t, ts); len(b.Permanent) != 1 {
			t.Errorf("the permanent browser went too: %+v", b)
		}
	})

	t.Run("kill and restart", func(t *testing.T) {
		r := crawlWith(t, small)
		if code := call(t, "POST", ts.URL+"/monitor/actions/kill_browser", "", map[string]string{"browser_id": r.BrowserID}, nil); code != 200 {
			t.Fatalf("kill: %d", code)
		}
		if b := browsers(t, ts); len(b.Cold)+len(b.Hot) != 0 {
			t.Errorf("after the kill: %+v", b)
		}
		if r2 := crawlWith(t, small); r2.BrowserID == r.BrowserID {
			t.Errorf("served by the killed browser %s", r.BrowserID)
		}
		if code := call(t, "POST", ts.URL+"/monitor/actions/kill_browser", "", map[string]string{"browser_id": "permanent"}, nil); code != 200 {
			t.Fatalf("kill permanent: %d", code)
		}
		if r := crawlWith(t, nil); r.BrowserID != "permanent" {
			t.Errorf("after killing the permanent browser: served by %s", r.BrowserID)
		}
		before := browsers(t, ts).Permanent[0].CreatedAt
		if code := call(t, "POST", ts.URL+"/monitor/actions/restart_browser", "", map[string]string{"browser_id": "permanent"}, nil); code != 200 {
			t.Fatalf("restart: %d", code)
		}
		if after := browsers(t, ts).Permanent[0]; after.CreatedAt < before || after.RequestCount != 0 {
			t.Errorf("restart kept the old browser: %+v", after)
		}
		crawlWith(t, nil)
		if !hasJanitor(janitorLog(t, ts), "kill", "") || !hasJanitor(janitorLog(t, ts), "restart", "permanent") {
			t.Errorf("janitor log: %+v", janitorLog(t, ts))
		}
	})

	t.Run("cleanup and reset", func(t *testing.T) {
		crawlWith(t, tall)
		var c struct {
			CleanedCount  int     `json:"cleaned_count"`
			MemoryFreedMB float64 `json:"memory_freed_mb"`
		}
		if code := call(t, "POST", ts.URL+"/monitor/actions/cleanup", "", nil, &c); code != 200 || c.CleanedCount < 1 || c.MemoryFreedMB <= 0 {
			t.Errorf("cleanup: %d %+v", code, c)
		}
		if b := browsers(t, ts); len(b.Cold)+len(b.Hot) != 0 || len(b.Permanent) != 1 {
			t.Errorf("after cleanup: %+v", b)
		}
		if code := call(t, "POST", ts.URL+"/monitor/stats/reset", "", nil, nil); code != 200 {
			t.Fatalf("reset: %d", code)
		}
		var h healthPayload
		call(t, "GET", ts.URL+"/monitor/health", "", nil, &h)
		stats := map[string]EndpointStats{}
		call(t, "GET", ts.URL+"/monitor/endpoints/stats", "", nil, &stats)
		if h.Stats.TotalRequests != 0 || len(stats) != 0 {
			t.Errorf("after reset: %+v, %v", h.Stats, stats)
		}
		if len(janitorLog(t, ts)) == 0 {
			t.Errorf("reset cleared the janitor log")
		}
	})
}

// TestMemoryPressure: above 95% memory no browser is started; the
// permanent one serves the configuration (with its viewport) instead.
func TestMemoryPressure(t *testing.T) {
	st := startSite(t)
	ts := startServer(t, Config{Pressure: func() float64 { return 0.97 }})
	a := poll(t, ts.URL, "", submit(t, ts.URL, "", map[string]any{"urls": st.URL + "/article.html",
		"browser_config": map[string]any{"viewport": map[string]int{"width": 640, "height": 480}},
		"js_code":        []string{"document.body.dataset.w = String(window.innerWidth)"}}), 50*time.Millisecond, time.Minute)
	if a.Result == nil || !a.Result.Success || a.Result.BrowserID != "permanent" || !strings.Contains(a.Result.HTML, `data-w="640"`) {
		t.Fatalf("result: %+v", a.Result)
	}
	if b := browsers(t, ts); len(b.Cold)+len(b.Hot) != 0 {
		t.Errorf("a browser was started at 97%% memory: %+v", b)
	}
	if !hasJanitor(janitorLog(t, ts), "refuse_create", "") {
		t.Errorf("janitor log: %+v", janitorLog(t, ts))
	}
}

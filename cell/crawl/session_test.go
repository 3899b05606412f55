package crawl

import (
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/testwait"
)

// TestSessions: requests with the same session_id share a browser context
// (a cookie and localStorage set by the first request's js_code are seen
// by the next), another session or none sees nothing; past MaxSessions the
// least recently used session is closed; the janitor closes sessions idle
// past SessionIdle on the injected clock; killing a session's browser
// closes it.
func TestSessions(t *testing.T) {
	st := startSite(t)
	clock := newFakeClock()
	ts := startServer(t, Config{Now: clock.Now, JanitorEvery: 50 * time.Millisecond, MaxSessions: 2, SessionIdle: 10 * time.Minute})
	const set = `document.cookie = "who=alice; path=/"; localStorage.setItem("who", "alice")`
	const show = `document.body.dataset.seen = document.cookie + "|" + localStorage.getItem("who")`
	const kept, empty = `data-seen="who=alice|alice"`, `data-seen="|null"`
	step := time.Second // the clock moves before each request: it orders the sessions' last uses
	crawl := func(t *testing.T, session, js string, viewport map[string]int) *Result {
		t.Helper()
		clock.Advance(step)
		req := map[string]any{"urls": st.URL + "/article.html", "js_code": []string{js}}
		if session != "" {
			req["session_id"] = session
		}
		if viewport != nil {
			req["browser_config"] = map[string]any{"viewport": viewport}
		}
		a := poll(t, ts.URL, "", submit(t, ts.URL, "", req), 50*time.Millisecond, 2*time.Minute)
		if a.Result == nil || !a.Result.Success {
			t.Fatalf("crawl: %+v", a)
		}
		if string(a.Result.SessionID) != session {
			t.Errorf("result session_id %q, want %q", a.Result.SessionID, session)
		}
		return a.Result
	}
	sees := func(t *testing.T, session string, viewport map[string]int, want string) {
		t.Helper()
		if r := crawl(t, session, show, viewport); !strings.Contains(r.HTML, want) {
			i := strings.Index(r.HTML, "data-seen")
			t.Errorf("session %q sees %.60s; want %s", session, r.HTML[max(i, 0):], want)
		}
	}
	sessionsOn := func(id string) int {
		b := browsers(t, ts)
		for _, l := range [][]BrowserInfo{b.Permanent, b.Hot, b.Cold} {
			for _, x := range l {
				if x.BrowserID == id {
					return x.Sessions
				}
			}
		}
		return -1
	}

	crawl(t, "alice", set, nil)
	sees(t, "alice", nil, kept)
	sees(t, "bob", nil, empty)
	sees(t, "", nil, empty)
	if n := sessionsOn("permanent"); n != 2 {
		t.Errorf("the permanent browser keeps %d sessions, want 2", n)
	}

	t.Run("least recently used closed past MaxSessions", func(t *testing.T) {
		sees(t, "carol", nil, empty) // alice is the least recently used
		if !hasJanitor(janitorLog(t, ts), "evict_session", "permanent") {
			t.Errorf("no evict_session in the janitor log: %+v", janitorLog(t, ts))
		}
		sees(t, "alice", nil, empty) // started afresh
		if n := sessionsOn("permanent"); n != 2 {
			t.Errorf("%d sessions kept, want at most 2", n)
		}
	})

	t.Run("expired by the janitor", func(t *testing.T) {
		crawl(t, "dave", set, nil) // closes carol, the least recently used
		// alice was last used a second (of the injected clock) before dave:
		// she is now idle past SessionIdle, dave not.
		clock.Advance(10*time.Minute - 500*time.Millisecond)
		testwait.Until(t, 30*time.Second, "the janitor closes the idle sessions", func() bool { return sessionsOn("permanent") == 1 })
		if !hasJanitor(janitorLog(t, ts), "expire_session", "permanent") {
			t.Errorf("no expire_session in the janitor log: %+v", janitorLog(t, ts))
		}
		step = 0 // another second and dave would expire too
		sees(t, "dave", nil, kept)
		step = time.Second
	})

	t.Run("closed with its browser", func(t *testing.T) {
		small := map[string]int{"width": 800, "height": 600}
		r := crawl(t, "erin", set, small)
		if !strings.HasPrefix(r.BrowserID, "browser-") || sessionsOn(r.BrowserID) != 1 {
			t.Fatalf("a session of a viewport of its own: served by %s", r.BrowserID)
		}
		sees(t, "erin", small, kept)
		if code := call(t, "POST", ts.URL+"/monitor/actions/kill_browser", "", map[string]string{"browser_id": r.BrowserID}, nil); code != 200 {
			t.Fatalf("kill: %d", code)
		}
		sees(t, "erin", small, empty)
	})
}

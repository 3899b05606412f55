package browser

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/internal/testwait"
)

// TestSessionKeepsItsContext: a session's second request sees the cookie
// and the localStorage its first request's script left; another session
// and a request without one see neither; a page deadline in a session
// keeps the context; a killed browser takes the session's context with it
// (the next request starts empty, on the replacement); Close closes it.
func TestSessionKeepsItsContext(t *testing.T) {
	pool := newTestPool(t, Config{})
	eng := NewEngine(pool, EngineConfig{})
	srv := smallSite(t)
	const set = `document.cookie = "who=alice; path=/"; localStorage.setItem("who", "alice")`
	const show = `document.getElementById("n").textContent = "cookie[" + document.cookie + "] storage[" + localStorage.getItem("who") + "]"`
	fetchIn := func(t *testing.T, s *Session, js string) string {
		t.Helper()
		req := &fetch.Request{URL: srv.URL + "/page", Browser: &fetch.BrowserOptions{JS: js}}
		var resp *fetch.Response
		var err error
		if s == nil {
			resp, err = eng.Fetch(t.Context(), req)
		} else {
			resp, err = s.Fetch(t.Context(), req)
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(resp.Body)
	}
	a, b := eng.NewSession(), eng.NewSession()
	defer a.Close()
	defer b.Close()
	fetchIn(t, a, set)
	const seen = "cookie[who=alice] storage[alice]"
	if got := fetchIn(t, a, show); !strings.Contains(got, seen) {
		t.Errorf("the same session's second request: %s", got)
	}
	for name, s := range map[string]*Session{"another session": b, "no session": nil} {
		if got := fetchIn(t, s, show); !strings.Contains(got, "cookie[] storage[null]") {
			t.Errorf("%s sees the first session's state: %s", name, got)
		}
	}
	if n := pool.openContexts(); n != 2 {
		t.Errorf("%d contexts open between requests; want the 2 sessions'", n)
	}

	// A page that overruns its deadline closes the page, not the session.
	_, err := a.Fetch(t.Context(), &fetch.Request{URL: srv.URL + "/hang", Browser: &fetch.BrowserOptions{
		JS: "new Promise(() => {})", Timeout: 2 * time.Second}})
	if !errors.Is(err, ErrScript) {
		t.Errorf("hung script in a session: %v", err)
	}
	if got := fetchIn(t, a, show); !strings.Contains(got, seen) {
		t.Errorf("after a page deadline: %s", got)
	}

	// The browser dies: the session starts afresh on its replacement.
	old := pool.currentPIDs()
	pool.kill(pool.instances()[0], "test")
	testwait.Until(t, 30*time.Second, "a replacement browser", func() bool {
		pids := pool.currentPIDs()
		return len(pids) == 1 && pids[0] != old[0]
	})

	if got := fetchIn(t, a, show); !strings.Contains(got, "cookie[] storage[null]") {
		t.Errorf("after its browser died the session kept: %s", got)
	}

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Fetch(t.Context(), &fetch.Request{URL: srv.URL}); !errors.Is(err, ErrSessionClosed) {
		t.Errorf("fetch in a closed session: %v", err)
	}
	b.Close()
	testwait.Until(t, 10*time.Second, "no context left open", func() bool { return pool.openContexts() == 0 })
}

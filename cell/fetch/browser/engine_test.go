package browser

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"image/png"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/nettest"
	"github.com/trawlhq/trawl/internal/testwait"

	"github.com/trawlhq/trawl/cell/fetch"
)

// latePage adds its content 300 ms after load, as a JavaScript app does.
const latePage = `<!doctype html><html><head><title>late</title></head><body>
<div id="app"></div>
<script>
window.addEventListener("load", () => setTimeout(() => {
  const p = document.createElement("p");
  p.id = "late";
  p.textContent = "rendered by script";
  document.getElementById("app").appendChild(p);
}, 300));
</script></body></html>`

func TestFetchRendersContentAddedAfterLoad(t *testing.T) {
	pool := newTestPool(t, Config{})
	eng := NewEngine(pool, EngineConfig{})
	srv := nettest.NewServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/app", http.StatusFound)
			return
		}
		w.Header().Set("X-Site", "yes")
		html(latePage)(w, r)
	}))
	for _, tt := range []struct{ name, waitFor string }{
		{"css", "#app > p#late"},
		{"js expression", `js: document.getElementById("late") !== null`},
		{"js function", `js: () => document.querySelectorAll("#app p").length === 1`},
		{"js body", `js: const p = document.getElementById("late"); return p && p.textContent.includes("script");`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			resp, err := eng.Fetch(t.Context(), &fetch.Request{
				URL:     srv.URL + "/old",
				Browser: &fetch.BrowserOptions{WaitFor: tt.waitFor},
			})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(resp.Body, []byte("rendered by script")) {
				t.Errorf("body lacks the late content:\n%s", resp.Body)
			}
			if resp.Engine != "browser" || resp.Status != 200 || resp.ContentType != "text/html" || resp.Charset != "utf-8" {
				t.Errorf("engine %q status %d type %q charset %q", resp.Engine, resp.Status, resp.ContentType, resp.Charset)
			}
			if resp.URL != srv.URL+"/app" || resp.Redirects != 1 {
				t.Errorf("URL %q after %d redirects; want %s/app after 1", resp.URL, resp.Redirects, srv.URL)
			}
			if resp.Header.Get("X-Site") != "yes" {
				t.Errorf("main document headers: %v", resp.Header)
			}
			t.Logf("rendered in %s", time.Since(start).Round(time.Millisecond))
		})
	}

	// Without a wait the capture comes before the content.
	resp, err := eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL + "/app"})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(resp.Body, []byte("rendered by script")) {
		t.Log("content was there without waiting (slow machine)")
	}
}

func TestWaitForFailures(t *testing.T) {
	pool := newTestPool(t, Config{})
	eng := NewEngine(pool, EngineConfig{})
	srv := nettest.NewServer(t, html(latePage))
	if _, err := eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL}); err != nil {
		t.Fatal(err) // warm up: the first page of a browser is the slowest
	}

	const deadline = 3 * time.Second
	start := time.Now()
	_, err := eng.Fetch(t.Context(), &fetch.Request{
		URL:     srv.URL,
		Browser: &fetch.BrowserOptions{WaitFor: "#never", Timeout: deadline},
	})
	if !errors.Is(err, ErrWaitFor) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("never-matching selector: %v; want ErrWaitFor and DeadlineExceeded", err)
	}
	if d := time.Since(start); d < deadline {
		t.Errorf("gave up after %s, before its %s deadline", d, deadline)
	}

	// A malformed selector fails as such, not by running out the page's
	// deadline (no wall-clock bound here: the machines are shared and a
	// loaded one is slow; the cause in the error is what tells).
	_, err = eng.Fetch(t.Context(), &fetch.Request{
		URL:     srv.URL,
		Browser: &fetch.BrowserOptions{WaitFor: "p[[[", Timeout: 20 * time.Second},
	})
	if !errors.Is(err, ErrWaitFor) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("malformed selector: %v; want ErrWaitFor, not a deadline", err)
	}
}

// TestHungEvaluateEndsAtItsDeadline runs scripts that never finish: a
// promise that never settles and a busy loop. Each fails by the page
// deadline and its context is closed, and the browser goes on serving.
func TestHungEvaluateEndsAtItsDeadline(t *testing.T) {
	pool := newTestPool(t, Config{})
	eng := NewEngine(pool, EngineConfig{})
	srv := nettest.NewServer(t, html(`<!doctype html><p id="x">page</p>`))
	if _, err := eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL}); err != nil {
		t.Fatal(err) // warm up: the first page of a browser is the slowest
	}
	for _, js := range []string{
		`new Promise(() => {})`,
		`while (true) {}`,
	} {
		t.Run(js, func(t *testing.T) {
			// Long enough for the navigation on a loaded machine: the deadline must
			// fall in the script.
			const deadline = 8 * time.Second
			start := time.Now()
			_, err := eng.Fetch(t.Context(), &fetch.Request{
				URL:     srv.URL,
				Browser: &fetch.BrowserOptions{JS: js, Timeout: deadline},
			})
			took := time.Since(start)
			if !errors.Is(err, ErrScript) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v; want ErrScript and DeadlineExceeded", err)
			}
			if took < deadline || took > deadline+DefaultCloseGrace {
				t.Errorf("failed after %s; want just after %s", took, deadline)
			}
			testwait.Until(t, 10*time.Second, "context closed", func() bool { return pool.openContexts() == 0 })
			if s := pool.Stats(); s.PagesInUse != 0 || s.Crashes != 0 {
				t.Errorf("stats after the hung page: %+v", s)
			}
			// The browser still serves.
			resp, err := eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL})
			if err != nil || !bytes.Contains(resp.Body, []byte("page")) {
				t.Fatalf("next fetch: %v", err)
			}
			t.Logf("%s failed after %s", js, took.Round(time.Millisecond))
		})
	}
}

func TestScriptOption(t *testing.T) {
	pool := newTestPool(t, Config{})
	eng := NewEngine(pool, EngineConfig{})
	srv := nettest.NewServer(t, html(`<!doctype html><ul id="list"><li>one</li></ul>
<button id="more" onclick="const li = document.createElement('li'); li.textContent = 'two'; document.getElementById('list').appendChild(li)">more</button>`))
	for _, tt := range []struct{ name, js string }{
		{"statements", `document.getElementById("more").click(); document.title = "clicked";`},
		{"function", `() => { document.getElementById("more").click(); document.title = "clicked" }`},
		{"body with await", `await new Promise(r => setTimeout(r, 50)); document.getElementById("more").click(); document.title = "clicked"; return 1;`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := eng.Fetch(t.Context(), &fetch.Request{
				URL:     srv.URL,
				Browser: &fetch.BrowserOptions{JS: tt.js, WaitFor: "#list li:nth-child(2)"},
			})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(resp.Body, []byte("<li>two</li>")) || !bytes.Contains(resp.Body, []byte("<title>clicked</title>")) {
				t.Errorf("script did not run:\n%s", resp.Body)
			}
		})
	}
	_, err := eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL, Browser: &fetch.BrowserOptions{JS: `throw new Error("boom")`}})
	if !errors.Is(err, ErrScript) || !strings.Contains(err.Error(), "boom") {
		t.Errorf("throwing script: %v", err)
	}
}

func TestScreenshotViewportAndDelay(t *testing.T) {
	pool := newTestPool(t, Config{})
	eng := NewEngine(pool, EngineConfig{})
	srv := nettest.NewServer(t, html(`<!doctype html><body style="margin:0"><div style="height:3000px;background:#c00">tall</div>
<p id="w"></p><script>document.getElementById("w").textContent = "width=" + window.innerWidth + " height=" + window.innerHeight;</script></body>`))
	resp, err := eng.Fetch(t.Context(), &fetch.Request{
		URL: srv.URL,
		Browser: &fetch.BrowserOptions{
			Screenshot: true,
			Viewport:   fetch.Viewport{Width: 800, Height: 600},
			Delay:      100 * time.Millisecond,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(resp.Body, []byte("width=800 height=600")) {
		t.Errorf("viewport not honoured: %s", resp.Body)
	}
	img, err := png.Decode(bytes.NewReader(resp.Screenshot))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 800 || b.Dy() < 3000 {
		t.Errorf("screenshot is %dx%d; want a full page 800 wide and at least 3000 tall", b.Dx(), b.Dy())
	}
	// No screenshot unless asked.
	resp, err = eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL})
	if err != nil || resp.Screenshot != nil {
		t.Errorf("unasked screenshot: %d bytes, %v", len(resp.Screenshot), err)
	}
	if !bytes.Contains(resp.Body, []byte("width=1280 height=720")) {
		t.Errorf("default viewport: %s", resp.Body)
	}
	// Bad viewports are refused before a page is used.
	_, err = eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL, Browser: &fetch.BrowserOptions{Viewport: fetch.Viewport{Width: 100000, Height: 10}}})
	if !errors.Is(err, ErrOptions) {
		t.Errorf("huge viewport: %v", err)
	}
}

func TestUserAgentHeadersAndCookies(t *testing.T) {
	pool := newTestPool(t, Config{})
	eng := NewEngine(pool, EngineConfig{})
	type seen struct {
		ua, extra, cookie string
	}
	var mu sync.Mutex
	var got []seen
	srv := nettest.NewServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			mu.Lock()
			got = append(got, seen{r.UserAgent(), r.Header.Get("X-Extra"), r.Header.Get("Cookie")})
			mu.Unlock()
			// The site sets a cookie of its own for the session too.
			if _, err := r.Cookie("session"); err == nil {
				http.SetCookie(w, &http.Cookie{Name: "site", Value: "from-site", Path: "/"})
			}
		}
		html(`<!doctype html><p id="c"></p><script>document.getElementById("c").textContent = "js-cookie=" + document.cookie</script>`)(w, r)
	}))

	resp, err := eng.Fetch(t.Context(), &fetch.Request{
		URL:    srv.URL,
		Header: http.Header{"X-Extra": {"hello"}, "User-Agent": {"from-header/1.0"}},
		Browser: &fetch.BrowserOptions{
			UserAgent: "trawl-test/1.0",
			Cookies:   []fetch.Cookie{{Name: "session", Value: "s3cret"}, {Name: "pref", Value: "dark", Domain: "127.0.0.1", Path: "/"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(resp.Body, []byte("session=s3cret")) {
		t.Errorf("page's document.cookie lacks the session: %s", resp.Body)
	}
	// The next request, from someone else, has none of it.
	resp, err = eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL, Header: http.Header{"User-Agent": {"from-header/1.0"}}})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(resp.Body, []byte("s3cret")) || bytes.Contains(resp.Body, []byte("from-site")) {
		t.Errorf("cookies leaked into the next context: %s", resp.Body)
	}
	_, err = eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("server saw %d page requests: %+v", len(got), got)
	}
	first, second, third := got[0], got[1], got[2]
	if first.ua != "trawl-test/1.0" || first.extra != "hello" {
		t.Errorf("first request: user agent %q, X-Extra %q", first.ua, first.extra)
	}
	if !strings.Contains(first.cookie, "session=s3cret") || !strings.Contains(first.cookie, "pref=dark") {
		t.Errorf("first request's cookies: %q", first.cookie)
	}
	if second.cookie != "" || second.extra != "" {
		t.Errorf("second request carried cookie %q, X-Extra %q", second.cookie, second.extra)
	}
	if second.ua != "from-header/1.0" {
		t.Errorf("second request's user agent %q; want the header's", second.ua)
	}
	if strings.Contains(third.ua, "Headless") || !strings.Contains(third.ua, "Chrome/") {
		t.Errorf("default user agent %q", third.ua)
	}
	// Secrets stay out of what the options print.
	o := fetch.BrowserOptions{Cookies: []fetch.Cookie{{Name: "session", Value: "s3cret"}}, Proxy: "http://user:pw@proxy.example:8080"}
	for _, s := range []string{o.String(), fmt.Sprint(o), fmt.Sprintf("%+v", o.Cookies)} {
		if strings.Contains(s, "s3cret") || strings.Contains(s, "pw@") {
			t.Errorf("secret printed: %s", s)
		}
	}
}

func TestWaitForWorksUnderStrictCSP(t *testing.T) {
	pool := newTestPool(t, Config{})
	eng := NewEngine(pool, EngineConfig{})
	srv := nettest.NewServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// No 'unsafe-eval': the page's own inline script may run, eval may not.
		w.Header().Set("Content-Security-Policy", "script-src 'self' 'sha256-"+latePageHash()+"'")
		html(latePage)(w, r)
	}))
	resp, err := eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL, Browser: &fetch.BrowserOptions{WaitFor: "#late"}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(resp.Body, []byte("rendered by script")) {
		t.Errorf("body: %s", resp.Body)
	}
}

// latePageHash is the CSP hash of latePage's inline script.
func latePageHash() string {
	_, rest, _ := strings.Cut(latePage, "<script>")
	script, _, _ := strings.Cut(rest, "</script>")
	sum := sha256.Sum256([]byte(script))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// challengePage answers 503 until the client runs its script, which sets
// a cookie and reloads, as a bot challenge does.
const challengePage = `<!doctype html><title>Just a moment...</title><p>Checking your browser.</p>
<script>document.cookie = "passed=1; path=/"; setTimeout(() => location.reload(), 100);</script>`

// TestStatusOfTheFinalDocument: when the page's script reloads or
// navigates, the status and headers reported are those of the document
// captured, not of the first navigation.
func TestStatusOfTheFinalDocument(t *testing.T) {
	pool := newTestPool(t, Config{})
	eng := NewEngine(pool, EngineConfig{})
	srv := nettest.NewServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/leave":
			w.Header().Set("X-Doc", "leaving")
			html(`<!doctype html><p>leaving</p><script>setTimeout(() => location.href = "/moved", 100)</script>`)(w, r)
			return
		case "/moved":
			http.Redirect(w, r, "/final", http.StatusFound)
			return
		case "/final":
			w.Header().Set("X-Doc", "final")
			html(`<!doctype html><p id="content">arrived</p>`)(w, r)
			return
		}
		if c, err := r.Cookie("passed"); err != nil || c.Value != "1" {
			w.Header().Set("X-Doc", "challenge")
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, challengePage)
			return
		}
		w.Header().Set("X-Doc", "content")
		html(`<!doctype html><title>Tea</title><p id="content">welcome</p>`)(w, r)
	}))
	for _, tt := range []struct {
		name, path, wantDoc, wantText, wantPath string
		wantRedirects                           int
	}{
		{"challenge then reload", "/tea", "content", "welcome", "/tea", 0},
		{"script navigates through a redirect", "/leave", "final", "arrived", "/final", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := eng.Fetch(t.Context(), &fetch.Request{
				URL:     srv.URL + tt.path,
				Browser: &fetch.BrowserOptions{WaitFor: "#content"},
			})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(resp.Body, []byte(tt.wantText)) {
				t.Fatalf("body lacks %q:\n%s", tt.wantText, resp.Body)
			}
			if resp.Status != 200 || resp.Header.Get("X-Doc") != tt.wantDoc {
				t.Errorf("status %d, X-Doc %q; want 200 and %q (the final document's)", resp.Status, resp.Header.Get("X-Doc"), tt.wantDoc)
			}
			if resp.URL != srv.URL+tt.wantPath || resp.Redirects != tt.wantRedirects {
				t.Errorf("URL %s after %d redirects; want %s after %d", resp.URL, resp.Redirects, srv.URL+tt.wantPath, tt.wantRedirects)
			}
		})
	}
	// A page that stays on its challenge reports it.
	resp, err := eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL + "/tea"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusServiceUnavailable || resp.Header.Get("X-Doc") != "challenge" {
		t.Logf("without a wait: status %d, X-Doc %q (the reload came first on a slow machine?)", resp.Status, resp.Header.Get("X-Doc"))
	}
}

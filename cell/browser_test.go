package cell

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/fetch/browser"
	"github.com/trawlhq/trawl/internal/proxytest"
)

// requireBrowser skips t when Chromium or the Playwright driver is missing,
// unless TRAWL_REQUIRE_BROWSER is set (make test sets it), like
// internal/browsertest.
func requireBrowser(t *testing.T) {
	t.Helper()
	if err := browser.CheckInstall(browser.Config{}); err != nil {
		if v := os.Getenv("TRAWL_REQUIRE_BROWSER"); v != "" && v != "0" {
			t.Fatalf("browser required (TRAWL_REQUIRE_BROWSER is set): %v", err)
		}
		t.Skipf("browser not available: %v", err)
	}
}

const articleText = `Warm the pot first. Then add one spoon of leaves per cup and one for the pot, and pour water that has just boiled. Wait four minutes for black tea, three for oolong and two for green tea, then pour through a strainer into warm cups and drink it while it is hot.`

// Real pages for the real browser: each site is its own host, so the
// ladder's memory of one does not steer another.
const (
	// Content arrives 100 ms after the load event.
	jsPageHTML = `<!doctype html><html><head><title>Tea app</title></head><body>
<noscript>You need to enable JavaScript to run this app.</noscript><div id="root"></div>
<script>
addEventListener("load", () => setTimeout(() => {
  document.getElementById("root").innerHTML = "<main><h1>Rendered tea</h1><p>` + articleText + `</p></main>";
}, 100));
</script></body></html>`
	// A challenge that sets a cookie from JavaScript and reloads; only a
	// client that runs scripts and keeps cookies gets through.
	cookieChallengeHTML = `<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>
<p>Checking your browser.</p><noscript>Enable JavaScript and cookies to continue</noscript>
<script>window._cf_chl_opt={cType:'managed'};
document.cookie = "trawl_js=ok; path=/";
setTimeout(() => location.reload(), 150);</script></body></html>`
	// What Cloudflare shows a client it takes for a robot.
	attentionHTML = `<!DOCTYPE html><html><head><title>Attention Required! | Cloudflare</title></head><body><div id="cf-error-details"><h1>Sorry, you have been blocked</h1><h2>Why have I been blocked?</h2><p>This website is using a security service to protect itself from online attacks.</p></div></body></html>`
	pageHTML      = `<!DOCTYPE html><html><head><title>Tea</title></head><body><main><h1>Brewing tea</h1><p>` + articleText + `</p></main></body></html>`
)

// hitLog is a site's request log: "path engine", told apart by
// Sec-Fetch-Mode (Chromium sends it, the HTTP engine does not), plus
// "cookie" when the request carried the challenge's cookie.
type hitLog struct {
	mu  sync.Mutex
	log []string
}

func (h *hitLog) add(r *http.Request) {
	who := "http"
	if r.Header.Get("Sec-Fetch-Mode") != "" {
		who = "browser"
	}
	if c, err := r.Cookie("trawl_js"); err == nil && c.Value == "ok" {
		who += " cookie"
	}
	h.mu.Lock()
	h.log = append(h.log, r.URL.Path+" "+who)
	h.mu.Unlock()
}

// take returns the log without favicon requests, and clears it.
func (h *hitLog) take() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, l := range h.log {
		if !strings.HasPrefix(l, "/favicon.ico") {
			out = append(out, l)
		}
	}
	h.log = nil
	return strings.Join(out, ", ")
}

func newHTMLSite(t *testing.T, log *hitLog, page func(w http.ResponseWriter, r *http.Request)) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.add(r)
		if r.URL.Path == "/favicon.ico" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		page(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

type browserScrape struct {
	scrapeResp
	Screenshot []byte `json:"screenshot"`
}

// TestLadderWithRealBrowser drives the engine ladder with Debian's
// Chromium: pages that need JavaScript, that wall clients without a
// browser's headers, that need a cookie set by script, a site that walls
// everyone, and the browser through a real proxy. Each step shows in the
// usage (engine, level) and in the site's own log.
func TestLadderWithRealBrowser(t *testing.T) {
	requireBrowser(t)
	px := proxytest.Start(t, proxytest.Options{Auth: true})
	spec, err := fetch.ParseProxySpec("isp:us=" + px.URL())
	if err != nil {
		t.Fatal(err)
	}
	tc := newTestCell(t, func(c *Config) {
		c.Browsers = 1
		c.BrowserPages = 2
		c.Proxies = []fetch.ProxySpec{spec}
	})
	scrape := func(t *testing.T, body string) (*http.Response, *browserScrape, *usage) {
		t.Helper()
		resp, b := tc.post(t, "/scrape", body)
		var r browserScrape
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return resp, &r, usageOf(t, resp)
	}
	wantEngine := func(t *testing.T, resp *http.Response, r *browserScrape, u *usage, engine, level string) {
		t.Helper()
		if resp.StatusCode != 200 || u == nil || u.Engine != engine || u.Level != level {
			t.Fatalf("status %d usage %q (want %s/%s): %s %s", resp.StatusCode, resp.Header.Get(UsageHeader), engine, level, r.Error, r.Message)
		}
	}

	t.Run("content added after load", func(t *testing.T) {
		var log hitLog
		site := newHTMLSite(t, &log, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/plain" {
				io.WriteString(w, pageHTML)
				return
			}
			io.WriteString(w, jsPageHTML)
		})
		resp, r, u := scrape(t, fmt.Sprintf(`{"url":%q,"format":"md"}`, site.URL+"/app"))
		wantEngine(t, resp, r, u, "browser", "browser")
		if !strings.Contains(*r.Markdown, "Rendered tea") || !strings.Contains(*r.Markdown, "four minutes for black tea") {
			t.Errorf("markdown lacks the rendered content:\n%s", *r.Markdown)
		}
		if got := log.take(); got != "/app http, /app browser" {
			t.Errorf("site saw %s", got)
		}
		// The site is remembered: its next page goes straight to the browser.
		resp, r, u = scrape(t, fmt.Sprintf(`{"url":%q}`, site.URL+"/plain"))
		wantEngine(t, resp, r, u, "browser", "browser")
		if got := log.take(); got != "/plain browser" {
			t.Errorf("second page: site saw %s", got)
		}
	})

	t.Run("cookie challenge", func(t *testing.T) {
		var log hitLog
		site := newHTMLSite(t, &log, func(w http.ResponseWriter, r *http.Request) {
			if c, err := r.Cookie("trawl_js"); err != nil || c.Value != "ok" {
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, cookieChallengeHTML)
				return
			}
			io.WriteString(w, pageHTML)
		})
		resp, r, u := scrape(t, fmt.Sprintf(`{"url":%q}`, site.URL+"/a"))
		wantEngine(t, resp, r, u, "browser", "browser")
		// The status is the document's shown, after the reload: not the
		// challenge's 503.
		if !strings.Contains(*r.Markdown, "four minutes for black tea") || r.Status != 200 {
			t.Errorf("status %d, markdown:\n%s", r.Status, *r.Markdown)
		}
		if got := log.take(); got != "/a http, /a browser, /a browser cookie" {
			t.Errorf("site saw %s", got)
		}
		// Straight to the browser, in a fresh context: the cookie of the
		// last request is gone, so the challenge runs again.
		resp, r, u = scrape(t, fmt.Sprintf(`{"url":%q}`, site.URL+"/b"))
		wantEngine(t, resp, r, u, "browser", "browser")
		if got := log.take(); got != "/b browser, /b browser cookie" {
			t.Errorf("second page: site saw %s", got)
		}
	})

	t.Run("wall for non-browsers", func(t *testing.T) {
		var log hitLog
		site := newHTMLSite(t, &log, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Sec-Fetch-Mode") == "" {
				w.WriteHeader(http.StatusForbidden)
				io.WriteString(w, attentionHTML)
				return
			}
			io.WriteString(w, pageHTML)
		})
		resp, r, u := scrape(t, fmt.Sprintf(`{"url":%q}`, site.URL+"/"))
		wantEngine(t, resp, r, u, "browser", "browser")
		if got := log.take(); got != "/ http, / browser" {
			t.Errorf("site saw %s", got)
		}
	})

	t.Run("walled everywhere", func(t *testing.T) {
		var log hitLog
		site := newHTMLSite(t, &log, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, attentionHTML)
		})
		resp, r, u := scrape(t, fmt.Sprintf(`{"url":%q}`, site.URL+"/"))
		if resp.StatusCode != 403 || r.Error != "blocked" || u != nil {
			t.Fatalf("%d %q %s %s", resp.StatusCode, resp.Header.Get(UsageHeader), r.Error, r.Message)
		}
		if got := log.take(); got != "/ http, / browser" {
			t.Errorf("site saw %s", got)
		}
	})

	t.Run("through a proxy", func(t *testing.T) {
		var log hitLog
		site := newHTMLSite(t, &log, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, jsPageHTML) })
		resp, r, u := scrape(t, fmt.Sprintf(`{"url":%q,"proxy":"isp","country":"us"}`, site.URL+"/p"))
		wantEngine(t, resp, r, u, "browser", "browser_proxy")
		if u.Proxy != "isp" || !strings.Contains(*r.Markdown, "Rendered tea") {
			t.Errorf("proxy %q, markdown:\n%s", u.Proxy, *r.Markdown)
		}
		// Both engines asked the proxy for the page.
		deadline := time.Now().Add(5 * time.Second)
		for countLines(px.Requests(), "GET "+site.URL+"/p ") < 2 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := countLines(px.Requests(), "GET "+site.URL+"/p "); n != 2 {
			t.Errorf("the proxy logged %d requests for the page, want 2: %q", n, px.Requests())
		}
		if got := log.take(); got != "/p http, /p browser" {
			t.Errorf("site saw %s", got)
		}
	})

	t.Run("screenshot", func(t *testing.T) {
		var log hitLog
		site := newHTMLSite(t, &log, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, pageHTML) })
		resp, r, u := scrape(t, fmt.Sprintf(`{"url":%q,"screenshot":true,"viewport":{"width":640,"height":480},"wait_for":"h1"}`, site.URL+"/s"))
		wantEngine(t, resp, r, u, "browser", "browser")
		if !bytes.HasPrefix(r.Screenshot, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("screenshot is not a PNG (%d bytes)", len(r.Screenshot))
		}
		if got := log.take(); got != "/s browser" {
			t.Errorf("site saw %s", got)
		}
	})
}

func countLines(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// TestBrowserProxyFailover: the browser through a pool of two proxies, the
// first dead: the page comes through the second. Through a pool of dead
// proxies only: 502, free, and the message names no proxy.
func TestBrowserProxyFailover(t *testing.T) {
	requireBrowser(t)
	px := proxytest.Start(t, proxytest.Options{Auth: true})
	dead := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	dead1, dead2, dead3 := dead(), dead(), dead()
	var specs []fetch.ProxySpec
	for _, s := range []string{
		"isp=http://pool:s3cret@" + dead1, "isp=" + px.URL(),
		"residential=http://pool:s3cret@" + dead2, "residential=socks5://pool:s3cret@" + dead3,
	} {
		spec, err := fetch.ParseProxySpec(s)
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, spec)
	}
	tc := newTestCell(t, func(c *Config) {
		c.Browsers = 1
		c.BrowserPages = 2
		c.Proxies = specs
	})
	var log hitLog
	site := newHTMLSite(t, &log, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, jsPageHTML) })

	// wait_for asks for the browser: plain HTTP is not tried.
	resp, b := tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q,"proxy":"isp","wait_for":"main h1"}`, site.URL+"/p"))
	u := usageOf(t, resp)
	if resp.StatusCode != 200 || u == nil || u.Engine != "browser" || u.Level != "browser_proxy" {
		t.Fatalf("through the pool with a dead proxy first: %d %q %s", resp.StatusCode, resp.Header.Get(UsageHeader), b)
	}
	if r := decode[browserScrape](t, b); !strings.Contains(*r.Markdown, "Rendered tea") {
		t.Errorf("markdown:\n%s", *r.Markdown)
	}
	if n := countLines(px.Requests(), "GET "+site.URL+"/p "); n != 1 {
		t.Errorf("the live proxy logged %d requests for the page, want 1: %q", n, px.Requests())
	}

	resp, b = tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q,"proxy":"residential","wait_for":"main h1"}`, site.URL+"/q"))
	r := decode[browserScrape](t, b)
	if resp.StatusCode != 502 || r.Error != "fetch_failed" || resp.Header.Get(UsageHeader) != "" {
		t.Fatalf("through dead proxies only: %d %q %s", resp.StatusCode, resp.Header.Get(UsageHeader), b)
	}
	for _, secret := range []string{dead1, dead2, dead3, "s3cret", px.Addr, px.Password} {
		if strings.Contains(string(b), secret) {
			t.Errorf("the answer shows %q: %s", secret, b)
		}
	}
	if got := log.take(); got != "/p browser" {
		t.Errorf("site saw %s", got)
	}

	// The pool's health, in the cell's.
	resp, b = tc.get(t, "/health")
	h := decode[struct {
		Status  string
		Browser struct {
			Browsers       int  `json:"browsers"`
			LaunchFailures int  `json:"launch_failures"`
			DriverRestarts int  `json:"driver_restarts"`
			Healthy        bool `json:"healthy"`
		}
	}](t, b)
	if resp.StatusCode != 200 || h.Status != "ok" || !h.Browser.Healthy || h.Browser.Browsers != 1 || h.Browser.DriverRestarts != 0 {
		t.Errorf("health: %d %s", resp.StatusCode, b)
	}
}

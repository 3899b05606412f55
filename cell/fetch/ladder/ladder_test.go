package ladder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/fetch/detect"
	"github.com/trawlhq/trawl/internal/proxytest"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

const article = `<!DOCTYPE html><html><head><title>Tea</title></head><body><main><h1>Brewing tea</h1>
<p>Warm the pot first. Then add one spoon of leaves per cup and one for the pot, and pour water that has just boiled. Wait four minutes for black tea, three for oolong and two for green tea.</p></main></body></html>`

const shell = `<!doctype html><html><head><title>Tea app</title><script src="/app.js"></script></head><body><noscript>You need to enable JavaScript to run this app.</noscript><div id="root"></div></body></html>`

const challenge = `<!DOCTYPE html><html><head><title>Just a moment...</title></head><body><noscript>Enable JavaScript and cookies to continue</noscript><script>window._cf_chl_opt={cType:'managed'};</script><script src="/cdn-cgi/challenge-platform/h/b/orchestrate/chl_page/v1"></script></body></html>`

// site is a local origin whose pages behave like the ones the ladder meets:
//
//	/plain       content for everyone
//	/app         a JavaScript shell; the fake browser's "rendering" (header
//	             X-Rendered) gets the content the script would build
//	/wall        a challenge page (503) to clients without Sec-Fetch-Mode,
//	             which browsers send and our HTTP engine does not
//	/strict      the challenge to anyone not coming through a proxy (Via)
//	/fortress    the challenge to everyone
//	/toggle      a shell while shellMode is set, else content
//
// It logs every request as "path engine[+proxy]".
type site struct {
	*httptest.Server
	mu        sync.Mutex
	log       []string
	shellMode atomic.Bool
}

func newSite(t *testing.T) *site {
	s := &site{}
	s.shellMode.Store(true)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who := "http"
		if r.Header.Get("Sec-Fetch-Mode") != "" {
			who = "browser"
		}
		proxied := r.Header.Get("Via") != ""
		if proxied {
			who += "+proxy"
		}
		s.mu.Lock()
		s.log = append(s.log, r.URL.Path+" "+who)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		rendered := r.Header.Get("X-Rendered") != ""
		switch r.URL.Path {
		case "/plain":
			io.WriteString(w, article)
		case "/app":
			if rendered {
				io.WriteString(w, article)
			} else {
				io.WriteString(w, shell)
			}
		case "/toggle":
			if s.shellMode.Load() && !rendered {
				io.WriteString(w, shell)
			} else {
				io.WriteString(w, article)
			}
		case "/wall":
			if r.Header.Get("Sec-Fetch-Mode") == "" {
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, challenge)
				return
			}
			io.WriteString(w, article)
		case "/strict":
			if !proxied {
				w.WriteHeader(http.StatusForbidden)
				io.WriteString(w, challenge)
				return
			}
			io.WriteString(w, article)
		case "/fortress":
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, challenge)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// hits returns the log and clears it.
func (s *site) hits() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.log
	s.log = nil
	return h
}

// fakeBrowser stands in for the browser engine in these unit tests (the
// real one is tested with the cell): it fetches with the headers a browser
// sends, through BrowserOptions.Proxy when set, and "runs scripts" by
// asking the site for the rendered page.
type fakeBrowser struct {
	calls atomic.Int64
	busy  atomic.Bool
	mu    sync.Mutex
	opts  []fetch.BrowserOptions
	hdrs  []http.Header
}

func (b *fakeBrowser) Fetch(ctx context.Context, req *fetch.Request) (*fetch.Response, error) {
	b.calls.Add(1)
	if b.busy.Load() {
		return nil, fmt.Errorf("fetch %s: %w", req.URL, fetch.ErrFleetBusy)
	}
	var opts fetch.BrowserOptions
	if req.Browser != nil {
		opts = *req.Browser
	}
	b.mu.Lock()
	b.opts = append(b.opts, opts)
	b.hdrs = append(b.hdrs, req.Header)
	b.mu.Unlock()
	tr := &http.Transport{}
	if opts.Proxy != "" {
		pu, err := url.Parse(opts.Proxy)
		if err != nil {
			return nil, err
		}
		tr.Proxy = http.ProxyURL(pu)
	}
	defer tr.CloseIdleConnections()
	hreq, _ := http.NewRequestWithContext(ctx, http.MethodGet, req.URL, nil)
	hreq.Header.Set("User-Agent", "Mozilla/5.0 HeadlessChrome/142.0.0.0")
	hreq.Header.Set("Sec-Fetch-Mode", "navigate")
	hreq.Header.Set("X-Rendered", "1")
	resp, err := (&http.Client{Transport: tr}).Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w: %v", req.URL, fetch.ErrUnreachable, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return &fetch.Response{URL: req.URL, Status: resp.StatusCode, Header: resp.Header, Body: body, ContentType: "text/html", Charset: "utf-8", Engine: "browser"}, nil
}

func (b *fakeBrowser) lastOptions() fetch.BrowserOptions {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.opts[len(b.opts)-1]
}

type env struct {
	ladder  *Ladder
	browser *fakeBrowser
	site    *site
	now     atomic.Int64
}

func (e *env) advance(d time.Duration) { e.now.Add(int64(d)) }

// newEnv builds a ladder over the real HTTP engine, the fake browser (nil
// when noBrowser) and a store in memory.
func newEnv(t *testing.T, mod func(*Config)) *env {
	t.Helper()
	e := &env{browser: &fakeBrowser{}, site: newSite(t)}
	e.now.Store(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).UnixNano())
	st, err := store.Open("ladder", &store.Options{FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := fetch.NewHTTP(fetch.HTTPConfig{AllowPrivateNetworks: true, Timeout: 5 * time.Second})
	t.Cleanup(h.Close)
	cfg := Config{
		HTTP:    h,
		Browser: e.browser,
		Now:     func() time.Time { return time.Unix(0, e.now.Load()) },
		Logger:  slog.New(slog.DiscardHandler),
	}
	if mod != nil {
		mod(&cfg)
	}
	if e.ladder, err = New(st, cfg); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) req(t *testing.T, path string) *Request {
	t.Helper()
	u, err := urlpolicy.Validate(e.site.URL+path, true)
	if err != nil {
		t.Fatal(err)
	}
	return &Request{URL: u}
}

func (e *env) fetch(t *testing.T, req *Request) *Result {
	t.Helper()
	res, err := e.ladder.Fetch(t.Context(), req)
	if err != nil {
		t.Fatalf("Fetch %s: %v", req.URL, err)
	}
	return res
}

func steps(r *Result) string {
	s := make([]string, len(r.Steps))
	for i, st := range r.Steps {
		s[i] = st.Rung + ":" + st.Verdict.Verdict.String()
	}
	return strings.Join(s, " ")
}

func eq(a []string, b ...string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

// The caller's headers go with every step; in the browser its Cookie
// becomes cookies of the page's host (a header would go to every host the
// page loads from); the ladder learns nothing from such a page.
func TestCallersHeaders(t *testing.T) {
	e := newEnv(t, nil)
	req := e.req(t, "/app")
	req.Header = http.Header{"X-Trace": {"t1"}, "Cookie": {"sid=s3cret; theme=dark"}}
	r := e.fetch(t, req)
	if r.Engine != EngineBrowser || steps(r) != "http:shell browser:content" {
		t.Fatalf("engine %s, steps %s", r.Engine, steps(r))
	}
	e.browser.mu.Lock()
	hdr, opts := e.browser.hdrs[0], e.browser.opts[0]
	e.browser.mu.Unlock()
	if hdr.Get("X-Trace") != "t1" || hdr.Get("Cookie") != "" || req.Header.Get("Cookie") == "" {
		t.Errorf("the browser got headers %v (the caller's %v)", hdr, req.Header)
	}
	host := req.URL.Hostname()
	if len(opts.Cookies) != 2 || opts.Cookies[0] != (fetch.Cookie{Name: "sid", Value: "s3cret", Domain: host, Path: "/"}) {
		t.Errorf("the browser's cookies %v", opts.Cookies)
	}
	if got := e.ladder.Remembered(req.URL.Host, fetch.ProxyNone); got != "http" {
		t.Errorf("the ladder learnt %q from a page fetched with a caller's headers", got)
	}
}

func TestPlainSiteStaysOnHTTP(t *testing.T) {
	e := newEnv(t, nil)
	for range 2 {
		r := e.fetch(t, e.req(t, "/plain"))
		if r.Engine != EngineHTTP || r.Level != LevelLight || steps(r) != "http:content" {
			t.Fatalf("engine %s level %s steps %s", r.Engine, r.Level, steps(r))
		}
	}
	if got := e.site.hits(); !eq(got, "/plain http", "/plain http") || e.browser.calls.Load() != 0 {
		t.Errorf("site saw %v, browser %d calls", got, e.browser.calls.Load())
	}
	if got := e.ladder.Remembered(e.req(t, "/").URL.Host, fetch.ProxyNone); got != "http" {
		t.Errorf("remembered %q", got)
	}
}

func TestShellClimbsToBrowserAndRemembers(t *testing.T) {
	e := newEnv(t, nil)
	r := e.fetch(t, e.req(t, "/app"))
	if r.Engine != EngineBrowser || r.Level != LevelBrowser || steps(r) != "http:shell browser:content" {
		t.Fatalf("first: engine %s level %s steps %s", r.Engine, r.Level, steps(r))
	}
	if !strings.Contains(string(r.Body), "Brewing tea") {
		t.Errorf("body %q", r.Body)
	}
	if got := e.site.hits(); !eq(got, "/app http", "/app browser") {
		t.Errorf("first: site saw %v", got)
	}
	if got := e.ladder.Remembered(e.req(t, "/").URL.Host, fetch.ProxyNone); got != "browser" {
		t.Errorf("remembered %q", got)
	}

	// The second page of the site goes straight to the browser.
	r = e.fetch(t, e.req(t, "/plain"))
	if r.Engine != EngineBrowser || steps(r) != "browser:content" {
		t.Fatalf("second: engine %s steps %s", r.Engine, steps(r))
	}
	if got := e.site.hits(); !eq(got, "/plain browser") {
		t.Errorf("second: site saw %v", got)
	}
}

func TestBlockClimbsToBrowser(t *testing.T) {
	e := newEnv(t, nil)
	r := e.fetch(t, e.req(t, "/wall"))
	if r.Engine != EngineBrowser || steps(r) != "http:blocked browser:content" {
		t.Fatalf("engine %s steps %s", r.Engine, steps(r))
	}
	if r.Steps[0].Verdict.Reason != "cloudflare challenge" {
		t.Errorf("reason %q", r.Steps[0].Verdict.Reason)
	}
	if got := e.site.hits(); !eq(got, "/wall http", "/wall browser") {
		t.Errorf("site saw %v", got)
	}
}

func TestStepDownAfterADay(t *testing.T) {
	e := newEnv(t, nil)
	host := e.req(t, "/").URL.Host
	e.fetch(t, e.req(t, "/toggle")) // http shell, browser content
	e.site.hits()

	// Within the day: straight to the browser.
	e.advance(23 * time.Hour)
	if r := e.fetch(t, e.req(t, "/toggle")); steps(r) != "browser:content" {
		t.Fatalf("within a day: %s", steps(r))
	}
	// After a day, one request tries HTTP again; the site is still a shell,
	// so it climbs and the memory is renewed for another day.
	e.advance(2 * time.Hour)
	if r := e.fetch(t, e.req(t, "/toggle")); steps(r) != "http:shell browser:content" {
		t.Fatalf("probe: %s", steps(r))
	}
	e.advance(23 * time.Hour)
	if r := e.fetch(t, e.req(t, "/toggle")); steps(r) != "browser:content" {
		t.Fatalf("renewed: %s", steps(r))
	}
	// The site now renders on the server: the next probe steps down for good.
	e.site.shellMode.Store(false)
	e.advance(2 * time.Hour)
	if r := e.fetch(t, e.req(t, "/toggle")); steps(r) != "http:content" || r.Engine != EngineHTTP {
		t.Fatalf("step down: %s", steps(r))
	}
	if got := e.ladder.Remembered(host, fetch.ProxyNone); got != "http" {
		t.Errorf("remembered %q after stepping down", got)
	}
	if r := e.fetch(t, e.req(t, "/toggle")); steps(r) != "http:content" {
		t.Fatalf("after step down: %s", steps(r))
	}
}

func TestForgetAfterThirtyDays(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.StepDown = -1 })
	host := e.req(t, "/").URL.Host
	e.fetch(t, e.req(t, "/app"))
	e.advance(29 * 24 * time.Hour)
	if got := e.ladder.Remembered(host, fetch.ProxyNone); got != "browser" {
		t.Fatalf("remembered %q", got)
	}
	e.advance(2 * 24 * time.Hour)
	if n, err := e.ladder.Sweep(); err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	if got := e.ladder.Remembered(host, fetch.ProxyNone); got != "http" {
		t.Errorf("remembered %q after 31 days", got)
	}
}

func TestEveryStepBlocked(t *testing.T) {
	e := newEnv(t, nil)
	_, err := e.ladder.Fetch(t.Context(), e.req(t, "/fortress"))
	var be *BlockedError
	if !errors.Is(err, ErrBlocked) || !errors.As(err, &be) || len(be.Steps) != 2 {
		t.Fatalf("err %v", err)
	}
	if !strings.Contains(err.Error(), "http: blocked (cloudflare challenge); browser: blocked (cloudflare challenge)") {
		t.Errorf("message %q", err)
	}
	if got := e.site.hits(); !eq(got, "/fortress http", "/fortress browser") {
		t.Errorf("site saw %v", got)
	}
	// Nothing learned from a wall.
	if got := e.ladder.Remembered(e.req(t, "/").URL.Host, fetch.ProxyNone); got != "http" {
		t.Errorf("remembered %q", got)
	}
}

func TestNoBrowser(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Browser = nil })
	// A shell is the best plain HTTP can do: it is the result.
	r := e.fetch(t, e.req(t, "/app"))
	if r.Engine != EngineHTTP || r.Verdict.Verdict != detect.Shell || steps(r) != "http:shell" {
		t.Fatalf("engine %s verdict %v steps %s", r.Engine, r.Verdict.Verdict, steps(r))
	}
	if _, err := e.ladder.Fetch(t.Context(), e.req(t, "/wall")); !errors.Is(err, ErrBlocked) {
		t.Fatalf("wall: %v", err)
	}
	req := e.req(t, "/plain")
	req.Browser = &fetch.BrowserOptions{Screenshot: true}
	if _, err := e.ladder.Fetch(t.Context(), req); !errors.Is(err, ErrNeedsBrowser) {
		t.Fatalf("browser options: %v", err)
	}
}

func TestEngineErrorsStopTheClimb(t *testing.T) {
	e := newEnv(t, nil)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + l.Addr().String() + "/"
	l.Close()
	u, _ := urlpolicy.Validate(dead, true)
	if _, err := e.ladder.Fetch(t.Context(), &Request{URL: u}); !errors.Is(err, fetch.ErrUnreachable) {
		t.Fatalf("dead site: %v", err)
	}
	if n := e.browser.calls.Load(); n != 0 {
		t.Errorf("the browser was tried %d times for a site that does not answer", n)
	}

	e.browser.busy.Store(true)
	if _, err := e.ladder.Fetch(t.Context(), e.req(t, "/app")); !errors.Is(err, fetch.ErrFleetBusy) {
		t.Fatalf("busy fleet: %v", err)
	}
}

func TestBrowserOptionsSkipHTTP(t *testing.T) {
	e := newEnv(t, nil)
	req := e.req(t, "/plain")
	req.Browser = &fetch.BrowserOptions{WaitFor: "h1", Screenshot: true, Viewport: fetch.Viewport{Width: 800, Height: 600}}
	r := e.fetch(t, req)
	if r.Engine != EngineBrowser || steps(r) != "browser:content" {
		t.Fatalf("engine %s steps %s", r.Engine, steps(r))
	}
	if o := e.browser.lastOptions(); o.WaitFor != "h1" || !o.Screenshot || o.Viewport.Width != 800 || o.Proxy != "" {
		t.Errorf("options %v", o)
	}
	// A caller's options say nothing about what the site needs.
	if got := e.ladder.Remembered(req.URL.Host, fetch.ProxyNone); got != "http" {
		t.Errorf("remembered %q", got)
	}
}

func pools(t *testing.T, specs ...string) *fetch.ProxyPools {
	t.Helper()
	var ss []fetch.ProxySpec
	for _, s := range specs {
		spec, err := fetch.ParseProxySpec(s)
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, spec)
	}
	pp, err := fetch.NewProxyPools(ss)
	if err != nil {
		t.Fatal(err)
	}
	return pp
}

// TestEscalationThroughProxy: with a default escalation pool, a site that
// walls the browser too is fetched by the browser through a real proxy
// (tinyproxy), and remembered at that step.
func TestEscalationThroughProxy(t *testing.T) {
	px := proxytest.Start(t, proxytest.Options{Auth: true})
	e := newEnv(t, func(c *Config) {
		c.Proxies = pools(t, "residential:us="+px.URL())
		c.EscalateProxy = fetch.ProxyResidential
	})
	r := e.fetch(t, e.req(t, "/strict"))
	if r.Engine != EngineBrowser || r.Level != LevelBrowserProxy || r.Proxy != fetch.ProxyResidential || steps(r) != "http:blocked browser:blocked browser_proxy:content" {
		t.Fatalf("engine %s level %s proxy %s steps %s", r.Engine, r.Level, r.Proxy, steps(r))
	}
	if got := e.site.hits(); !eq(got, "/strict http", "/strict browser", "/strict browser+proxy") {
		t.Errorf("site saw %v", got)
	}
	if !px.WaitSaw("GET "+e.site.URL+"/strict", 5*time.Second) {
		t.Errorf("not in the proxy's log: %q", px.Requests())
	}
	if o := e.browser.lastOptions(); o.Proxy != px.URL() || o.WaitFor != Settle {
		t.Errorf("browser proxy %q", o.Proxy)
	}
	// Remembered: the next page goes straight through the proxy.
	r = e.fetch(t, e.req(t, "/plain"))
	if steps(r) != "browser_proxy:content" || r.Level != LevelBrowserProxy {
		t.Fatalf("second: %s", steps(r))
	}
	// A country the escalation pool lacks still escalates, through any exit.
	req := e.req(t, "/strict")
	req.Country = "de"
	if r := e.fetch(t, req); r.Level != LevelBrowserProxy {
		t.Fatalf("country de: %s", steps(r))
	}
}

// TestRequestedProxy: a request naming a proxy kind sends every step
// through it, and the site's memory for such requests is kept apart.
func TestRequestedProxy(t *testing.T) {
	px := proxytest.Start(t, proxytest.Options{Auth: true})
	e := newEnv(t, func(c *Config) { c.Proxies = pools(t, "isp:us="+px.URL()) })
	host := e.req(t, "/").URL.Host

	req := e.req(t, "/plain")
	req.Proxy, req.Country = fetch.ProxyISP, "us"
	r := e.fetch(t, req)
	if r.Engine != EngineHTTP || r.Level != LevelLight || r.Proxy != fetch.ProxyISP {
		t.Fatalf("plain: engine %s level %s proxy %s", r.Engine, r.Level, r.Proxy)
	}
	if got := e.site.hits(); !eq(got, "/plain http+proxy") {
		t.Errorf("plain: site saw %v", got)
	}
	if !px.WaitSaw("GET "+e.site.URL+"/plain", 5*time.Second) {
		t.Errorf("not in the proxy's log: %q", px.Requests())
	}

	req = e.req(t, "/app")
	req.Proxy, req.Country = fetch.ProxyISP, "us"
	r = e.fetch(t, req)
	if r.Engine != EngineBrowser || r.Level != LevelBrowserProxy || steps(r) != "http:shell browser:content" {
		t.Fatalf("app: engine %s level %s steps %s", r.Engine, r.Level, steps(r))
	}
	if got := e.site.hits(); !eq(got, "/app http+proxy", "/app browser+proxy") {
		t.Errorf("app: site saw %v", got)
	}
	if got := e.ladder.Remembered(host, fetch.ProxyISP); got != "browser" {
		t.Errorf("isp memory %q", got)
	}
	if got := e.ladder.Remembered(host, fetch.ProxyNone); got != "http" {
		t.Errorf("direct memory %q", got)
	}

	// A pool that does not exist is refused before any fetch.
	req = e.req(t, "/plain")
	req.Proxy, req.Country = fetch.ProxyISP, "de"
	_, err := e.ladder.Fetch(t.Context(), req)
	var npe *fetch.NoProxyError
	if !errors.As(err, &npe) || err.Error() != "no isp proxy is configured for country de on this cell; configured: isp us (1)" {
		t.Fatalf("isp de: %v", err)
	}
	req.Proxy, req.Country = fetch.ProxyResidential, ""
	if err := e.ladder.Check(req); err == nil || !strings.Contains(err.Error(), "no residential proxy is configured on this cell") {
		t.Fatalf("residential: %v", err)
	}
	if got := e.site.hits(); len(got) != 0 {
		t.Errorf("refused requests reached the site: %v", got)
	}
}

// TestProxyFailover: a dead proxy in a pool of two is replaced by the
// other for the same request.
func TestProxyFailover(t *testing.T) {
	px := proxytest.Start(t, proxytest.Options{})
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + l.Addr().String()
	l.Close()
	e := newEnv(t, func(c *Config) { c.Proxies = pools(t, "isp="+dead, "isp="+px.URL()) })
	for range 2 { // whichever the round-robin picks first
		req := e.req(t, "/plain")
		req.Proxy = fetch.ProxyISP
		if r := e.fetch(t, req); r.Proxy != fetch.ProxyISP {
			t.Fatalf("proxy %q", r.Proxy)
		}
	}
	if got := e.site.hits(); !eq(got, "/plain http+proxy", "/plain http+proxy") {
		t.Errorf("site saw %v", got)
	}
	// With only the dead one, the proxy's failure is the answer.
	e2 := newEnv(t, func(c *Config) { c.Proxies = pools(t, "isp="+dead) })
	req := e2.req(t, "/plain")
	req.Proxy = fetch.ProxyISP
	if _, err := e2.ladder.Fetch(t.Context(), req); !errors.Is(err, fetch.ErrProxy) {
		t.Fatalf("dead proxy: %v", err)
	}
}

func TestNewRefusesBadEscalation(t *testing.T) {
	st, err := store.Open("x", &store.Options{FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h := fetch.NewHTTP(fetch.HTTPConfig{})
	defer h.Close()
	if _, err := New(st, Config{HTTP: h, EscalateProxy: "isp"}); err == nil || !strings.Contains(err.Error(), "none is configured") {
		t.Errorf("isp without pools: %v", err)
	}
	if _, err := New(st, Config{HTTP: h, EscalateProxy: "datacenter"}); err == nil {
		t.Error("unknown kind accepted")
	}
	if _, err := New(st, Config{HTTP: h, EscalateProxy: "none"}); err != nil {
		t.Errorf("none: %v", err)
	}
}

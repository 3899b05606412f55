package cell

import (
	"bytes"
	"context"
	"encoding/json"
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

	"github.com/trawlhq/trawl/internal/syncbuf"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/internal/proxytest"
)

// Pages the engine ladder meets, served by wallSite.
const (
	jsShellHTML   = `<!doctype html><html><head><title>Tea app</title><script src="/app.js"></script></head><body><noscript>You need to enable JavaScript to run this app.</noscript><div id="root"></div></body></html>`
	challengeHTML = `<!DOCTYPE html><html><head><title>Just a moment...</title></head><body><noscript>Enable JavaScript and cookies to continue</noscript><script>window._cf_chl_opt={cType:'managed'};</script><script src="/cdn-cgi/challenge-platform/h/b/orchestrate/chl_page/v1"></script></body></html>`
)

// wallSite serves /plain (content), /app (a JavaScript shell; the
// rendered page for the fake browser, which asks with X-Rendered) and
// /fortress (a challenge to everyone), and logs "path engine[+proxy]",
// telling the engines apart by Sec-Fetch-Mode, which browsers send and the
// HTTP engine does not.
type wallSite struct {
	*httptest.Server
	mu  sync.Mutex
	log []string
}

func newWallSite(t *testing.T) *wallSite {
	s := &wallSite{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who := "http"
		if r.Header.Get("Sec-Fetch-Mode") != "" {
			who = "browser"
		}
		if r.Header.Get("Via") != "" {
			who += "+proxy"
		}
		s.mu.Lock()
		s.log = append(s.log, r.URL.Path+" "+who)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		switch r.URL.Path {
		case "/plain":
			io.WriteString(w, articleHTML)
		case "/app":
			if r.Header.Get("X-Rendered") != "" {
				io.WriteString(w, articleHTML)
			} else {
				io.WriteString(w, jsShellHTML)
			}
		case "/fortress":
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, challengeHTML)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *wallSite) hits() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.log
	s.log = nil
	return h
}

// fakeBrowser stands in for the browser engine where the API, not the
// rendering, is under test (the real one: browser_test.go).
type fakeBrowser struct {
	busy    atomic.Bool
	busyFor atomic.Int64 // how many more calls to refuse as fleet-busy
	calls   atomic.Int64
}

func (b *fakeBrowser) Fetch(ctx context.Context, req *fetch.Request) (*fetch.Response, error) {
	b.calls.Add(1)
	if b.busy.Load() || b.busyFor.Add(-1) >= 0 {
		return nil, fmt.Errorf("fetch %s: %w", req.URL, fetch.ErrFleetBusy)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	if req.Browser != nil && req.Browser.Proxy != "" {
		pu, _ := url.Parse(req.Browser.Proxy)
		tr.Proxy = http.ProxyURL(pu)
	}
	hreq, _ := http.NewRequestWithContext(ctx, http.MethodGet, req.URL, nil)
	hreq.Header.Set("Sec-Fetch-Mode", "navigate")
	hreq.Header.Set("X-Rendered", "1")
	resp, err := (&http.Client{Transport: tr}).Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", fetch.ErrUnreachable, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var shot []byte
	if req.Browser != nil && req.Browser.Screenshot {
		shot = []byte("\x89PNG fake")
	}
	return &fetch.Response{URL: req.URL, Status: resp.StatusCode, Header: resp.Header, Body: body,
		ContentType: "text/html", Charset: "utf-8", Engine: "browser", Screenshot: shot}, nil
}

type usage struct {
	Engine, Level, Proxy, Cache string
	Units                       int
}

func usageOf(t *testing.T, resp *http.Response) *usage {
	t.Helper()
	raw := resp.Header.Get(UsageHeader)
	if raw == "" {
		return nil
	}
	var u usage
	if err := json.Unmarshal([]byte(raw), &u); err != nil {
		t.Fatalf("usage %q: %v", raw, err)
	}
	return &u
}

func TestScrapeUsageNamesEngineAndLevel(t *testing.T) {
	site := newWallSite(t)
	fb := &fakeBrowser{}
	tc := newTestCell(t, func(c *Config) { c.BrowserEngine = fb })

	resp, b := tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q}`, site.URL+"/plain"))
	if resp.StatusCode != 200 || resp.Header.Get(UsageHeader) != `{"engine":"http","level":"light","cache":"miss","units":1}` {
		t.Fatalf("plain: %d %q %s", resp.StatusCode, resp.Header.Get(UsageHeader), b)
	}
	resp, _ = tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q}`, site.URL+"/plain"))
	if got := resp.Header.Get(UsageHeader); got != `{"engine":"cache","cache":"hit","units":0}` {
		t.Fatalf("hit: %q", got)
	}

	// A JavaScript shell: the browser, remembered for the site.
	resp, b = tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q}`, site.URL+"/app"))
	if u := usageOf(t, resp); resp.StatusCode != 200 || u == nil || u.Engine != "browser" || u.Level != "browser" || u.Units != 1 {
		t.Fatalf("app: %d %q %s", resp.StatusCode, resp.Header.Get(UsageHeader), b)
	}
	if r := decode[scrapeResp](t, b); !strings.Contains(*r.Markdown, "Brewing tea") {
		t.Errorf("app markdown %q", *r.Markdown)
	}
	site.hits()
	resp, _ = tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q,"format":"md"}`, site.URL+"/plain"))
	if u := usageOf(t, resp); u == nil || u.Engine != "browser" {
		t.Fatalf("second page of the site: %q", resp.Header.Get(UsageHeader))
	}
	if got := site.hits(); strings.Join(got, ",") != "/plain browser" {
		t.Errorf("second page: site saw %v", got)
	}
}

func TestScrapeBlockedAndBusyAreFree(t *testing.T) {
	site := newWallSite(t)
	fb := &fakeBrowser{}
	tc := newTestCell(t, func(c *Config) { c.BrowserEngine = fb })

	resp, b := tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q}`, site.URL+"/fortress"))
	r := decode[scrapeResp](t, b)
	if resp.StatusCode != 403 || r.Error != "blocked" || resp.Header.Get(UsageHeader) != "" {
		t.Fatalf("fortress: %d %q %s", resp.StatusCode, resp.Header.Get(UsageHeader), b)
	}
	if !strings.Contains(r.Message, "http: blocked (cloudflare challenge); browser: blocked (cloudflare challenge)") {
		t.Errorf("message %q", r.Message)
	}
	if got := site.hits(); strings.Join(got, ",") != "/fortress http,/fortress browser" {
		t.Errorf("site saw %v", got)
	}
	// Not cached: the next try climbs again.
	tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q}`, site.URL+"/fortress"))
	if got := site.hits(); len(got) != 2 {
		t.Errorf("second try: site saw %v", got)
	}

	fb.busy.Store(true)
	resp, b = tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q}`, site.URL+"/app"))
	r = decode[scrapeResp](t, b)
	if resp.StatusCode != 503 || r.Error != "fleet-busy" || resp.Header.Get("Retry-After") == "" || resp.Header.Get(UsageHeader) != "" {
		t.Fatalf("busy: %d %q %s", resp.StatusCode, resp.Header.Get(UsageHeader), b)
	}

	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := l.Addr().String()
	l.Close()
	resp, b = tc.post(t, "/scrape", fmt.Sprintf(`{"url":"http://%s/"}`, dead))
	if resp.StatusCode != 502 || resp.Header.Get(UsageHeader) != "" {
		t.Fatalf("dead site: %d %q %s", resp.StatusCode, resp.Header.Get(UsageHeader), b)
	}
}

func TestScrapeBrowserFields(t *testing.T) {
	site := newWallSite(t)
	fb := &fakeBrowser{}
	tc := newTestCell(t, func(c *Config) { c.BrowserEngine = fb })
	resp, b := tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q,"screenshot":true,"wait_for":"h1","viewport":{"width":800,"height":600}}`, site.URL+"/plain"))
	if u := usageOf(t, resp); resp.StatusCode != 200 || u == nil || u.Engine != "browser" || u.Level != "browser" {
		t.Fatalf("%d %q %s", resp.StatusCode, resp.Header.Get(UsageHeader), b)
	}
	var r struct{ Screenshot []byte }
	if err := json.Unmarshal(b, &r); err != nil || !bytes.HasPrefix(r.Screenshot, []byte("\x89PNG")) {
		t.Fatalf("screenshot %q: %v", r.Screenshot, err)
	}
	if got := site.hits(); strings.Join(got, ",") != "/plain browser" {
		t.Errorf("site saw %v (browser fields skip plain HTTP)", got)
	}

	plain := newTestCell(t, nil) // no browser
	for _, body := range []string{
		fmt.Sprintf(`{"url":%q,"screenshot":true}`, site.URL+"/plain"),
		fmt.Sprintf(`{"urls":[%q],"wait_for":"h1"}`, site.URL+"/plain"),
	} {
		path := "/scrape"
		if strings.Contains(body, "urls") {
			path = "/scrape/batch"
		}
		resp, b := plain.post(t, path, body)
		if r := decode[scrapeResp](t, b); resp.StatusCode != 400 || r.Error != "bad_input" || !strings.Contains(r.Message, "need the browser engine") {
			t.Errorf("%s without a browser: %d %s", path, resp.StatusCode, b)
		}
	}
	resp, b = tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q,"viewport":{"width":800,"height":600,"depth":3}}`, site.URL+"/plain"))
	if resp.StatusCode != 400 || !strings.Contains(string(b), "depth") {
		t.Errorf("unknown viewport field: %d %s", resp.StatusCode, b)
	}
}

// TestScrapeThroughProxy routes requests through a real tinyproxy that
// demands credentials, and checks its log; the credentials appear in no
// answer and no log line of the cell.
func TestScrapeThroughProxy(t *testing.T) {
	site := newWallSite(t)
	px := proxytest.Start(t, proxytest.Options{Auth: true})
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	deadProxy := "http://trawl:" + px.Password + "@" + l.Addr().String()
	l.Close()
	var logs syncbuf.Buffer
	specs := func(raw ...string) []fetch.ProxySpec {
		var out []fetch.ProxySpec
		for _, r := range raw {
			s, err := fetch.ParseProxySpec(r)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return out
	}
	fb := &fakeBrowser{}
	tc := newTestCell(t, func(c *Config) {
		c.BrowserEngine = fb
		c.Proxies = specs("isp:us="+px.URL(), "residential:de="+deadProxy)
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})

	resp, b := tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q,"proxy":"isp","country":"us"}`, site.URL+"/plain"))
	if resp.StatusCode != 200 || resp.Header.Get(UsageHeader) != `{"engine":"http","level":"light","proxy":"isp","cache":"miss","units":1}` {
		t.Fatalf("isp us: %d %q %s", resp.StatusCode, resp.Header.Get(UsageHeader), b)
	}
	if !px.WaitSaw("GET "+site.URL+"/plain", 5*time.Second) {
		t.Errorf("not in the proxy's log: %q", px.Requests())
	}
	resp, b = tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q,"proxy":"isp","country":"us"}`, site.URL+"/app"))
	if u := usageOf(t, resp); resp.StatusCode != 200 || u == nil || u.Engine != "browser" || u.Level != "browser_proxy" || u.Proxy != "isp" {
		t.Fatalf("isp us, app: %d %q %s", resp.StatusCode, resp.Header.Get(UsageHeader), b)
	}
	if got := site.hits(); strings.Join(got, ",") != "/plain http+proxy,/app http+proxy,/app browser+proxy" {
		t.Errorf("site saw %v", got)
	}

	// Refusals name what is missing and what there is, and cost nothing.
	want := "no isp proxy is configured for country de on this cell; configured: isp us (1), residential de (1)"
	for _, c := range []struct{ path, body string }{
		{"/scrape", fmt.Sprintf(`{"url":%q,"proxy":"isp","country":"de"}`, site.URL+"/plain")},
		{"/scrape/batch", fmt.Sprintf(`{"urls":[%q],"proxy":"isp","country":"de"}`, site.URL+"/plain")},
		{"/scrape/jobs", fmt.Sprintf(`{"urls":[%q],"proxy":"isp","country":"de"}`, site.URL+"/plain")},
	} {
		resp, b := tc.post(t, c.path, c.body)
		r := decode[scrapeResp](t, b)
		if resp.StatusCode != 400 || r.Error != "bad_input" || r.Message != want || resp.Header.Get(UsageHeader) != "" {
			t.Errorf("%s isp de: %d %q %s", c.path, resp.StatusCode, resp.Header.Get(UsageHeader), b)
		}
	}

	// A proxy that does not answer: 502, free, its address not shown.
	resp, b = tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q,"proxy":"residential","country":"de"}`, site.URL+"/plain"))
	r := decode[scrapeResp](t, b)
	if resp.StatusCode != 502 || r.Error != "fetch_failed" || resp.Header.Get(UsageHeader) != "" || strings.Contains(r.Message, l.Addr().String()) {
		t.Fatalf("dead proxy: %d %q %s", resp.StatusCode, resp.Header.Get(UsageHeader), b)
	}
	if got := site.hits(); len(got) != 0 {
		t.Errorf("site saw %v", got)
	}
	if strings.Contains(logs.String(), px.Password) {
		t.Errorf("the cell logged a proxy password:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "proxy pools") {
		t.Errorf("no log of the pools:\n%s", logs.String())
	}
}

// TestEscalateProxy: with --escalate-proxy, a request that asked for no
// proxy reaches the browser through one only when the browser alone is
// walled, and says so in its usage.
func TestEscalateProxy(t *testing.T) {
	px := proxytest.Start(t, proxytest.Options{Auth: true})
	// Walled unless through the proxy.
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if r.Header.Get("Via") == "" {
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, challengeHTML)
			return
		}
		io.WriteString(w, articleHTML)
	}))
	t.Cleanup(site.Close)
	spec, err := fetch.ParseProxySpec("residential=" + px.URL())
	if err != nil {
		t.Fatal(err)
	}
	tc := newTestCell(t, func(c *Config) {
		c.BrowserEngine = &fakeBrowser{}
		c.Proxies = []fetch.ProxySpec{spec}
		c.EscalateProxy = fetch.ProxyResidential
	})
	resp, b := tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q}`, site.URL+"/x"))
	if u := usageOf(t, resp); resp.StatusCode != 200 || u == nil || u.Engine != "browser" || u.Level != "browser_proxy" || u.Proxy != "residential" {
		t.Fatalf("%d %q %s", resp.StatusCode, resp.Header.Get(UsageHeader), b)
	}
	if !px.WaitSaw("GET "+site.URL+"/x", 5*time.Second) {
		t.Errorf("not in the proxy's log: %q", px.Requests())
	}
}

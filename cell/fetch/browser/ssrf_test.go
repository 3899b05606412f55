package browser

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/nettest"

	"github.com/trawlhq/trawl/cell/fetch"
)

var (
	loopback  = netip.MustParseAddr("127.0.0.1")
	loopback2 = netip.MustParseAddr("127.0.0.2")
)

// probePage tries every way a page can reach another address: fetch,
// XHR, a frame, an image, a script, a WebSocket, a TLS frame (a CONNECT
// tunnel), and other spellings of loopback. It writes what each got into
// #out and sets data-done on <body> when all have settled.
func probePage(secretPort string) string {
	base := "127.0.0.2:" + secretPort
	return fmt.Sprintf(`<!doctype html><title>probe</title><body><pre id="out"></pre>
<script>
const results = {};
const note = (k, v) => { results[k] = v; document.getElementById("out").textContent = JSON.stringify(results); };
const probes = [];
const get = (k, url) => probes.push(fetch(url).then(r => r.text()).then(t => note(k, "got " + t), e => note(k, "error")));
get("fetch", "http://%[1]s/fetch");
get("localhost", "http://localhost:%[2]s/localhost");
get("ipv6", "http://[::1]:%[2]s/ipv6");
get("mapped", "http://[::ffff:127.0.0.2]:%[2]s/mapped");
get("decimal", "http://2130706434:%[2]s/decimal");
probes.push(new Promise(done => {
  const x = new XMLHttpRequest();
  x.open("GET", "http://%[1]s/xhr");
  x.onload = () => { note("xhr", "got " + x.responseText); done(); };
  x.onerror = () => { note("xhr", "error"); done(); };
  x.send();
}));
const load = (k, tag, url) => probes.push(new Promise(done => {
  const el = document.createElement(tag);
  el.onload = () => { note(k, "loaded"); done(); };
  el.onerror = () => { note(k, "error"); done(); };
  el.src = url;
  document.body.appendChild(el);
}));
load("iframe", "iframe", "http://%[1]s/iframe");
load("tls-iframe", "iframe", "https://%[1]s/tls");
load("img", "img", "http://%[1]s/img.png");
load("script", "script", "http://%[1]s/script.js");
probes.push(new Promise(done => {
  const ws = new WebSocket("ws://%[1]s/ws");
  ws.onopen = () => { note("ws", "open"); done(); };
  ws.onerror = () => { note("ws", "error"); done(); };
}));
Promise.all(probes).then(() => { document.body.dataset.done = "1"; });
</script></body>`, base, secretPort)
}

// secretSite is a server on 127.0.0.2 that no guarded page may reach.
func secretSite(t *testing.T) *nettest.Server {
	return nettest.NewServerOn(t, "127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "secret-content")
	}))
}

// TestPageCannotReachPrivateAddresses serves a page on 127.0.0.1, treated
// as public, that probes a server on 127.0.0.2 in every way a page can:
// with the guard on, nothing reaches it; with private networks allowed,
// the same probes do, so they are real.
func TestPageCannotReachPrivateAddresses(t *testing.T) {
	secret := secretSite(t)
	page := nettest.NewServerOn(t, "127.0.0.1:0", html(probePage(secret.Port())))
	opts := &fetch.BrowserOptions{WaitFor: `js: document.body.dataset.done === "1"`}

	guarded := NewEngine(guardedPool(t, Config{}, loopback), EngineConfig{})
	resp, err := guarded.Fetch(t.Context(), &fetch.Request{URL: page.URL, Browser: opts})
	if err != nil {
		t.Fatal(err)
	}
	out := probeResults(resp.Body)
	t.Logf("guarded: %s", out)
	if strings.Contains(out, "secret-content") || strings.Contains(out, "open") {
		t.Errorf("a probe got through: %s", out)
	}
	if n := secret.Conns.Load(); n != 0 {
		t.Errorf("the private server saw %d connections", n)
	}

	open := NewEngine(newTestPool(t, Config{}), EngineConfig{})
	resp, err = open.Fetch(t.Context(), &fetch.Request{URL: page.URL, Browser: opts})
	if err != nil {
		t.Fatal(err)
	}
	out = probeResults(resp.Body)
	t.Logf("private networks allowed: %s", out)
	if !strings.Contains(out, `"fetch":"got secret-content"`) || secret.Conns.Load() == 0 {
		t.Errorf("the probes do not work when allowed: %s", out)
	}
}

func probeResults(body []byte) string {
	_, rest, _ := bytes.Cut(body, []byte(`<pre id="out">`))
	out, _, _ := bytes.Cut(rest, []byte("</pre>"))
	return strings.ReplaceAll(string(out), "&quot;", `"`)
}

// TestMainDocumentRefused checks the page itself: a private URL, a
// redirect to one (plain and TLS), and a name that resolves to one.
func TestMainDocumentRefused(t *testing.T) {
	secret := secretSite(t)
	sp := secret.Port()
	var pagePort string
	resolver := nettest.StaticDNS(t, map[string][]netip.Addr{
		"rebind.test": {loopback2},
		"public.test": {loopback},
	})
	pageSite := nettest.NewServerOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-private":
			http.Redirect(w, r, "http://127.0.0.2:"+sp+"/", http.StatusFound)
		case "/to-private-tls":
			http.Redirect(w, r, "https://127.0.0.2:"+sp+"/", http.StatusFound)
		case "/to-rebind":
			http.Redirect(w, r, "http://rebind.test:"+sp+"/", http.StatusFound)
		default:
			html(`<!doctype html><p>public page</p>`)(w, r)
		}
	}))
	pagePort = pageSite.Port()
	eng := NewEngine(guardedPool(t, Config{Resolver: resolver}, loopback), EngineConfig{})

	for _, raw := range []string{
		"http://127.0.0.2:" + sp + "/",
		"http://localhost:" + sp + "/",
		"http://[::1]:" + sp + "/",
		"http://0x7f000002:" + sp + "/",
		"http://127.0.0.1:" + pagePort + "/to-private",
		"http://127.0.0.1:" + pagePort + "/to-private-tls",
		"http://127.0.0.1:" + pagePort + "/to-rebind",
		"http://rebind.test:" + sp + "/",
	} {
		resp, err := eng.Fetch(t.Context(), &fetch.Request{URL: raw})
		if !errors.Is(err, fetch.ErrNotPublic) {
			status := 0
			if resp != nil {
				status = resp.Status
			}
			t.Errorf("Fetch(%s) = status %d, %v; want ErrNotPublic", raw, status, err)
		}
	}
	if n := secret.Conns.Load(); n != 0 {
		t.Errorf("the private server saw %d connections", n)
	}
	// A name the proxy resolves to an allowed address works: the browser
	// itself resolves nothing.
	resp, err := eng.Fetch(t.Context(), &fetch.Request{URL: "http://public.test:" + pagePort + "/"})
	if err != nil || !bytes.Contains(resp.Body, []byte("public page")) {
		t.Errorf("public.test: %v", err)
	}
}

// TestUpstreamProxyPerRequest sends one page through an upstream proxy
// (with credentials) and the next without: each context's traffic goes
// where its request said, and the guard still applies before the upstream.
func TestUpstreamProxyPerRequest(t *testing.T) {
	secret := secretSite(t)
	page := nettest.NewServerOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		html(fmt.Sprintf(`<!doctype html><p id="out"></p><script>
fetch("http://127.0.0.2:%s/").then(r => r.text()).then(t => "got " + t, e => "error").then(v => {
  document.getElementById("out").textContent = v; document.body.dataset.done = "1"; });
</script>`, secret.Port()))(w, r)
	}))
	up := nettest.NewUpstreamProxy(t, "pool-user", "s3cret")
	upURL := strings.Replace(up.URL, "http://", "http://pool-user:s3cret@", 1)
	eng := NewEngine(guardedPool(t, Config{}, loopback), EngineConfig{})
	opts := fetch.BrowserOptions{WaitFor: `js: document.body.dataset.done === "1"`}

	via := opts
	via.Proxy = upURL
	resp, err := eng.Fetch(t.Context(), &fetch.Request{URL: page.URL + "/via", Browser: &via})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(resp.Body, []byte(">error<")) || secret.Conns.Load() != 0 {
		t.Errorf("the page reached the private server through the upstream: %s", resp.Body)
	}
	if _, err := eng.Fetch(t.Context(), &fetch.Request{URL: page.URL + "/direct", Browser: &opts}); err != nil {
		t.Fatal(err)
	}
	seen := strings.Join(up.Seen(), "\n")
	if !strings.Contains(seen, "GET "+page.URL+"/via") {
		t.Errorf("the upstream did not carry the page:\n%s", seen)
	}
	if strings.Contains(seen, "/direct") || strings.Contains(seen, "127.0.0.2") {
		t.Errorf("the upstream saw what it should not:\n%s", seen)
	}

	// Failures say whose they are: the upstream's, or the site's.
	for _, tt := range []struct {
		name, url, proxy string
		want             error
	}{
		{"upstream down", page.URL + "/", "http://u:p@" + nettest.ClosedAddr(t), fetch.ErrProxy},
		{"upstream refuses the credentials", page.URL + "/", strings.Replace(up.URL, "http://", "http://pool-user:wrong@", 1), fetch.ErrProxy},
		{"site down", "http://" + nettest.ClosedAddr(t) + "/", "", fetch.ErrUnreachable},
		{"site down, via the upstream", "http://" + nettest.ClosedAddr(t) + "/", upURL, fetch.ErrUnreachable},
	} {
		resp, err := eng.Fetch(t.Context(), &fetch.Request{URL: tt.url, Browser: &fetch.BrowserOptions{Proxy: tt.proxy, Timeout: 20 * time.Second}})
		if !errors.Is(err, tt.want) || errors.Is(err, context.DeadlineExceeded) {
			status := 0
			if resp != nil {
				status = resp.Status
			}
			t.Errorf("%s: status %d, %v; want %v", tt.name, status, err, tt.want)
		}
	}
}

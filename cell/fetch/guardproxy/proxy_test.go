package guardproxy

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/nettest"
	"github.com/trawlhq/trawl/internal/urlpolicy"

	"github.com/trawlhq/trawl/cell/fetch"
)

// These tests drive the proxy with Go's own client, so they run without a
// browser (cell/fetch/browser tests it under Chromium).

// loopback is the address the tests treat as public.
var loopback = netip.MustParseAddr("127.0.0.1")

// html answers with a page.
func html(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, body)
	}
}

// secretSite is a server on 127.0.0.2 that nothing guarded may reach.
func secretSite(t *testing.T) *nettest.Server {
	return nettest.NewServerOn(t, "127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "secret-content")
	}))
}

func testProxy(t *testing.T, allowPrivate bool, public ...netip.Addr) *Proxy {
	t.Helper()
	g := &Guard{AllowPrivate: allowPrivate, Public: func(a netip.Addr) bool {
		for _, p := range public {
			if a.Unmap().WithZone("") == p {
				return true
			}
		}
		return urlpolicy.IsPublic(a)
	}}
	fp := New(g, slog.New(slog.DiscardHandler))
	t.Cleanup(fp.Close)
	return fp
}

func openRoute(t *testing.T, fp *Proxy, upstream string) *Route {
	t.Helper()
	rt, err := fp.Open(upstream, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	return rt
}

// client sends everything through the route, trusting any certificate.
func client(rt *Route) *http.Client {
	u, _ := url.Parse(rt.URL())
	return &http.Client{Transport: &http.Transport{
		Proxy:           http.ProxyURL(u),
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
}

func get(t *testing.T, c *http.Client, raw string) (int, string) {
	t.Helper()
	resp, err := c.Get(raw)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestGuardCheckURL(t *testing.T) {
	g := &Guard{Public: func(a netip.Addr) bool { return a == loopback || urlpolicy.IsPublic(a) }}
	for _, tt := range []struct {
		raw  string
		want error
	}{
		{"http://127.0.0.1:8080/", nil},
		{"http://example.com/", nil},
		{"http://127.0.0.2/", fetch.ErrNotPublic},
		{"http://0x7f000002/", fetch.ErrNotPublic},
		{"http://2130706434/", fetch.ErrNotPublic},
		{"http://[::1]/", fetch.ErrNotPublic},
		{"http://[::ffff:10.0.0.1]/", fetch.ErrNotPublic},
		{"http://169.254.169.254/latest/", fetch.ErrNotPublic},
		{"http://localhost/", fetch.ErrNotPublic},
		{"http://db.internal/", fetch.ErrNotPublic},
		{"http://intranet/", fetch.ErrNotPublic},
		{"http://example.com:25/", fetch.ErrInvalidURL},
		{"ftp://example.com/", fetch.ErrScheme},
	} {
		_, err := g.CheckURL(tt.raw)
		if (tt.want == nil) != (err == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
			t.Errorf("checkURL(%q) = %v; want %v", tt.raw, err, tt.want)
		}
	}
}

func TestProxyForwardsAndRefuses(t *testing.T) {
	site := nettest.NewServerOn(t, "127.0.0.1:0", html("<p>public</p>"))
	tlsSite := httptest.NewUnstartedServer(html("<p>tls</p>"))
	tlsSite.Listener, _ = net.Listen("tcp", "127.0.0.1:0")
	tlsSite.StartTLS()
	t.Cleanup(tlsSite.Close)
	secret := secretSite(t)

	fp := testProxy(t, false, loopback)
	rt := openRoute(t, fp, "")
	c := client(rt)

	if code, body := get(t, c, site.URL+"/"); code != 200 || !strings.Contains(body, "public") {
		t.Errorf("plain GET: %d %q", code, body)
	}
	if code, body := get(t, c, tlsSite.URL+"/"); code != 200 || !strings.Contains(body, "tls") {
		t.Errorf("GET through a CONNECT tunnel: %d %q", code, body)
	}
	if code, body := get(t, c, secret.URL+"/"); code != 0 || strings.Contains(body, "secret") {
		t.Errorf("plain GET of a private address: %d %q; want no answer", code, body)
	}
	if code, _ := get(t, c, "https://"+secret.Listener.Addr().String()+"/"); code != 0 {
		t.Errorf("CONNECT to a private address answered %d", code)
	}
	if n := secret.Conns.Load(); n != 0 {
		t.Errorf("the private server saw %d connections", n)
	}
	for _, raw := range []string{secret.URL + "/", "https://" + secret.Listener.Addr().String() + "/"} {
		if err := rt.Failure(raw); !errors.Is(err, fetch.ErrNotPublic) {
			t.Errorf("failure(%s) = %v; want ErrNotPublic", raw, err)
		}
	}
	if err := rt.Failure(site.URL + "/"); err != nil {
		t.Errorf("failure(%s) = %v", site.URL, err)
	}
	// A site that does not answer is a network error too, told apart.
	closed := nettest.ClosedAddr(t)
	if code, _ := get(t, c, "http://"+closed+"/"); code != 0 {
		t.Errorf("GET of a closed port answered %d", code)
	}
	if err := rt.Failure("http://" + closed + "/"); !errors.Is(err, fetch.ErrUnreachable) {
		t.Errorf("failure of a closed port: %v", err)
	}

	// A request that is not a proxy request is refused.
	resp, err := http.Get(rt.URL() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("origin-form request: %d", resp.StatusCode)
	}
}

func TestProxyChainsToUpstream(t *testing.T) {
	site := nettest.NewServer(t, html("<p>via upstream</p>"))
	tlsSite := httptest.NewTLSServer(html("<p>tls via upstream</p>"))
	t.Cleanup(tlsSite.Close)
	up := nettest.NewUpstreamProxy(t, "user", "pa:ss")
	upURL := strings.Replace(up.URL, "http://", "http://user:pa%3Ass@", 1)

	fp := testProxy(t, true)
	rt := openRoute(t, fp, upURL)
	c := client(rt)
	if code, body := get(t, c, site.URL+"/x"); code != 200 || !strings.Contains(body, "via upstream") {
		t.Errorf("plain GET via upstream: %d %q", code, body)
	}
	if code, body := get(t, c, tlsSite.URL+"/y"); code != 200 || !strings.Contains(body, "tls via upstream") {
		t.Errorf("CONNECT via upstream: %d %q", code, body)
	}
	seen := up.Seen()
	want := []string{"GET " + site.URL + "/x", "CONNECT " + strings.TrimPrefix(tlsSite.URL, "https://")}
	if len(seen) != 2 || seen[0] != want[0] || seen[1] != want[1] {
		t.Errorf("upstream saw %q; want %q", seen, want)
	}

	// Another route, without upstream, does not use it.
	direct := client(openRoute(t, fp, ""))
	if code, _ := get(t, direct, site.URL+"/z"); code != 200 {
		t.Errorf("direct route: %d", code)
	}
	if n := len(up.Seen()); n != 2 {
		t.Errorf("the upstream saw a request of another route")
	}

	// Wrong credentials: the upstream refuses, and so does the tunnel,
	// at once.
	badRt := openRoute(t, fp, strings.Replace(up.URL, "http://", "http://user:wrong@", 1))
	bad := client(badRt)
	if code, _ := get(t, bad, site.URL+"/w"); code != 0 {
		t.Errorf("plain GET with bad upstream credentials answered %d", code)
	}
	start := time.Now()
	if code, _ := get(t, bad, tlsSite.URL+"/w"); code != 0 {
		t.Errorf("CONNECT with bad upstream credentials answered %d", code)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refused CONNECT took %s", d)
	}
	for _, raw := range []string{site.URL + "/w", tlsSite.URL + "/w"} {
		if err := badRt.Failure(raw); !errors.Is(err, fetch.ErrProxy) {
			t.Errorf("failure(%s) with bad credentials = %v; want ErrProxy", raw, err)
		}
	}
	// An upstream that is down.
	downRt := openRoute(t, fp, "http://u:p@"+nettest.ClosedAddr(t))
	down := client(downRt)
	get(t, down, site.URL+"/d")
	get(t, down, tlsSite.URL+"/d")
	for _, raw := range []string{site.URL + "/d", tlsSite.URL + "/d"} {
		if err := downRt.Failure(raw); !errors.Is(err, fetch.ErrProxy) {
			t.Errorf("failure(%s) with the upstream down = %v; want ErrProxy", raw, err)
		}
	}
}

// TestProxyTunnelPassesBufferedBytes sends the first bytes of the tunnel
// in the same packet as the CONNECT request.
func TestProxyTunnelPassesBufferedBytes(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	fp := testProxy(t, true)
	rt := openRoute(t, fp, "")
	conn, err := net.Dial("tcp", strings.TrimPrefix(rt.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	addr := echo.Addr().String()
	io.WriteString(conn, "CONNECT "+addr+" HTTP/1.1\r\nHost: "+addr+"\r\n\r\nhello")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("echo: %q %v", buf, err)
	}
	// Closing the route ends its tunnels.
	rt.Close()
	if _, err := io.ReadAll(br); err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Errorf("read after route close: %v", err)
	}
}

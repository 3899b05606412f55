package browser

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/nettest"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/internal/proxytest"
)

// badGatewayProxy answers every CONNECT, and every forwarded request,
// with 502, as a proxy whose own exit failed does.
func badGatewayProxy(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusBadGateway)
	})}}
	srv.Start()
	t.Cleanup(srv.Close)
	return l.Addr().String()
}

// TestUpstreamProxyFailuresAreTheProxys: when the upstream proxy itself
// fails (nothing listens, it refuses the credentials, it answers CONNECT
// with 502) the page fails with fetch.ErrProxy, for the ladder to try the
// next proxy of its pool, and the error names neither the proxy's address
// nor its credentials.
func TestUpstreamProxyFailuresAreTheProxys(t *testing.T) {
	px := proxytest.Start(t, proxytest.Options{Auth: true})
	site := nettest.NewServer(t, html(`<!doctype html><p id="ok">through the proxy</p>`))
	tlsSite := httptest.NewUnstartedServer(html(`<p>tls</p>`))
	tlsSite.Listener, _ = net.Listen("tcp", "127.0.0.1:0")
	tlsSite.StartTLS()
	t.Cleanup(tlsSite.Close)
	dead := nettest.ClosedAddr(t)
	bad := badGatewayProxy(t)
	wrong := strings.Replace(px.URL(), px.Password, "wrong-password", 1)
	eng := NewEngine(newTestPool(t, Config{}), EngineConfig{})

	// The live proxy works, for plain and TLS sites alike (the TLS site's
	// certificate is not trusted, so that page fails, but not for the
	// proxy's sake).
	resp, err := eng.Fetch(t.Context(), &fetch.Request{URL: site.URL + "/", Browser: &fetch.BrowserOptions{Proxy: px.URL()}})
	if err != nil || !strings.Contains(string(resp.Body), "through the proxy") {
		t.Fatalf("through the live proxy: %v", err)
	}

	for _, tt := range []struct{ name, proxy, url, addr string }{
		{"nothing listens", "http://user:s3cret@" + dead, site.URL + "/", dead},
		{"nothing listens, tls", "http://user:s3cret@" + dead, tlsSite.URL + "/", dead},
		{"no credentials (407)", "http://" + px.Addr, site.URL + "/", px.Addr},
		{"no credentials (407), tls", "http://" + px.Addr, tlsSite.URL + "/", px.Addr},
		{"wrong credentials, tls", wrong, tlsSite.URL + "/", px.Addr},
		{"502 on CONNECT", "http://user:s3cret@" + bad, tlsSite.URL + "/", bad},
		{"socks5, nothing listens", "socks5://user:s3cret@" + dead, site.URL + "/", dead},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, err := eng.Fetch(t.Context(), &fetch.Request{URL: tt.url, Browser: &fetch.BrowserOptions{Proxy: tt.proxy, Timeout: 20 * time.Second}})
			if !errors.Is(err, fetch.ErrProxy) || errors.Is(err, fetch.ErrUnreachable) {
				t.Fatalf("err = %v; want fetch.ErrProxy alone", err)
			}
			msg := err.Error()
			_, port, _ := net.SplitHostPort(tt.addr)
			for _, secret := range []string{tt.addr, ":" + port, "s3cret", "wrong-password", px.Password} {
				if strings.Contains(msg, secret) {
					t.Errorf("the error shows %q: %s", secret, msg)
				}
			}
			t.Logf("%s after %s", msg, time.Since(start).Round(time.Millisecond))
		})
	}
}

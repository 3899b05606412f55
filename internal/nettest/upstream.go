package nettest

import (
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// UpstreamProxy is a minimal forward proxy on loopback (absolute-form
// requests and CONNECT) that requires basic credentials and logs what it
// forwards: an upstream for the tests of a proxy chain.
type UpstreamProxy struct {
	*httptest.Server
	mu  sync.Mutex
	log []string
}

// NewUpstreamProxy starts an UpstreamProxy that demands user and pass,
// closed at cleanup.
func NewUpstreamProxy(t testing.TB, user, pass string) *UpstreamProxy {
	up := &UpstreamProxy{}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	up.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != want {
			w.Header().Set("Proxy-Authenticate", `Basic realm="up"`)
			w.WriteHeader(http.StatusProxyAuthRequired)
			return
		}
		up.mu.Lock()
		up.log = append(up.log, r.Method+" "+r.RequestURI)
		up.mu.Unlock()
		if r.Method == http.MethodConnect {
			site, err := net.Dial("tcp", r.Host)
			if err != nil {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			w.WriteHeader(http.StatusOK)
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				site.Close()
				return
			}
			brw.Flush()
			go func() { io.Copy(site, brw); site.Close() }()
			io.Copy(conn, site)
			conn.Close()
			return
		}
		r.RequestURI = ""
		r.Header.Del("Proxy-Authorization")
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.Header().Set("Via", "upstream-test")
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(up.Close)
	return up
}

// Seen lists the requests the proxy forwarded, as "METHOD request-uri".
func (u *UpstreamProxy) Seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.log...)
}

// ClosedAddr is a loopback address where nothing listens.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

package fetch

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/nettest"

	"github.com/trawlhq/trawl/internal/proxytest"
)

func TestParseProxySpec(t *testing.T) {
	for _, tc := range []struct {
		in, label, redacted, host string
		err                       string
	}{
		{in: "isp:us=http://user:secret@proxy.example:8080", label: "isp:us", redacted: "isp:us=http://redacted@proxy.example:8080", host: "proxy.example:8080"},
		{in: " Residential:DE = http://10.0.0.5:3128 ", label: "residential:de", redacted: "residential:de=http://10.0.0.5:3128", host: "10.0.0.5:3128"},
		{in: "isp=socks5://u:p@127.0.0.1", label: "isp", redacted: "isp=socks5://redacted@127.0.0.1", host: "127.0.0.1:1080"},
		{in: "isp=https://proxy.example/", label: "isp", redacted: "isp=https://proxy.example", host: "proxy.example:443"},
		{in: "isp:us", err: "want KIND[:COUNTRY]=URL"},
		{in: "datacenter:us=http://h:1", err: "kind must be isp or residential"},
		{in: "isp:usa=http://h:1", err: "two-letter"},
		{in: "isp:u1=http://h:1", err: "two-letter"},
		{in: "isp=ftp://h:1", err: "scheme"},
		{in: "isp=http://user:secret@h:99999", err: "port"},
		{in: "isp=http://user:secret@h:1/path", err: "host[:port] only"},
		{in: "isp=http://", err: "ASCII host"},
		{in: "isp=http://user:secret@%zz", err: "does not parse"},
	} {
		s, err := ParseProxySpec(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want %q", tc.in, err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("%q: the error shows the password: %v", tc.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if s.Label() != tc.label || s.String() != tc.redacted || newProxy(s).Host() != tc.host {
			t.Errorf("%q: label %q, string %q, host %q", tc.in, s.Label(), s, newProxy(s).Host())
		}
		if p := newProxy(s); strings.Contains(p.String(), "secret") || strings.Contains(fmt.Sprint(p.LogValue()), "secret") {
			t.Errorf("%q: %v shows the password", tc.in, p)
		}
	}
}

func TestProxyPoolsPick(t *testing.T) {
	var specs []ProxySpec
	for _, s := range []string{
		"isp:us=http://a:1@us1.example:1", "isp:us=http://a:1@us2.example:1",
		"isp:de=http://a:1@de1.example:1",
		"residential=http://a:1@any1.example:1",
		"residential:sg=http://a:1@sg1.example:1",
	} {
		spec, err := ParseProxySpec(s)
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, spec)
	}
	pp, err := NewProxyPools(specs)
	if err != nil {
		t.Fatal(err)
	}
	host := func(kind, country string) string {
		p, err := pp.Pick(kind, country)
		if err != nil {
			return err.Error()
		}
		return strings.TrimSuffix(p.Host(), ".example:1")
	}
	// Round-robin inside a pool.
	if got := []string{host("isp", "us"), host("isp", "us"), host("isp", "us")}; strings.Join(got, ",") != "us1,us2,us1" {
		t.Errorf("isp us: %v", got)
	}
	// No country: the kind's pool without a country, else all of the kind.
	if got := host("residential", ""); got != "any1" {
		t.Errorf("residential, no country: %v", got)
	}
	seen := map[string]bool{}
	for range 3 {
		seen[host("isp", "")] = true
	}
	if len(seen) != 3 {
		t.Errorf("isp, no country: %v", seen)
	}
	want := "no isp proxy is configured for country sg on this cell; configured: isp de (1), isp us (2), residential (any country) (1), residential sg (1)"
	if got := host("isp", "sg"); got != want {
		t.Errorf("isp sg:\n got %s\nwant %s", got, want)
	}
	if _, err := pp.Pick("isp", "sg"); !errors.As(err, new(*NoProxyError)) {
		t.Errorf("not a NoProxyError: %v", err)
	}
	if !pp.Has("residential", "sg") || pp.Has("residential", "fr") || pp.Len() != 5 {
		t.Error("Has or Len wrong")
	}
	var none *ProxyPools
	if _, err := none.Pick("isp", ""); err == nil || err.Error() != "no isp proxy is configured on this cell; configured: none" {
		t.Errorf("nil pools: %v", err)
	}
	if _, err := NewProxyPools([]ProxySpec{specs[0], specs[0]}); err == nil || strings.Contains(err.Error(), "a:1@") {
		t.Errorf("duplicate: %v", err)
	}
}

// pickOne returns the one proxy of a pool built from raw.
func pickOne(t *testing.T, raw string) *Proxy {
	t.Helper()
	spec, err := ParseProxySpec("isp=" + raw)
	if err != nil {
		t.Fatal(err)
	}
	pp, err := NewProxyPools([]ProxySpec{spec})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pp.Pick("isp", "")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFetchViaProxy sends plain http (absolute-form) and https (CONNECT)
// through a real tinyproxy that demands credentials, and reads its log.
func TestFetchViaProxy(t *testing.T) {
	px := proxytest.Start(t, proxytest.Options{Auth: true})
	site := nettest.NewServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "path=%s via=%s", r.URL.Path, r.Header.Get("Via"))
	}))
	tlsSite := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "secure path=%s", r.URL.Path)
	}))
	t.Cleanup(tlsSite.Close)
	pool := x509.NewCertPool()
	pool.AddCert(tlsSite.Certificate())
	h := newEngine(t, HTTPConfig{TLSClientConfig: &tls.Config{RootCAs: pool}})
	p := pickOne(t, px.URL())

	resp, err := h.FetchVia(t.Context(), &Request{URL: site.URL + "/plain"}, p)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.Body); !strings.HasPrefix(got, "path=/plain via=") || !strings.Contains(got, "tinyproxy") {
		t.Errorf("plain http through the proxy: %q", got)
	}
	if !px.WaitSaw("GET "+site.URL+"/plain", 5*time.Second) {
		t.Errorf("the proxy did not log the request: %q", px.Requests())
	}

	resp, err = h.FetchVia(t.Context(), &Request{URL: tlsSite.URL + "/tls"}, p)
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Body) != "secure path=/tls" {
		t.Errorf("https through the proxy: %q", resp.Body)
	}
	if !px.WaitSaw("CONNECT "+strings.TrimPrefix(tlsSite.URL, "https://"), 5*time.Second) {
		t.Errorf("the proxy did not log the CONNECT: %q", px.Requests())
	}

	// Without a proxy the same engine goes direct: the proxy sees nothing new.
	before := len(px.Requests())
	resp, err = h.Fetch(t.Context(), &Request{URL: site.URL + "/direct"})
	if err != nil || string(resp.Body) != "path=/direct via=" {
		t.Fatalf("direct: %v %q", err, resp.Body)
	}
	if n := len(px.Requests()); n != before {
		t.Errorf("a direct fetch went through the proxy (%d requests, was %d)", n, before)
	}
}

func TestFetchViaProxyFailures(t *testing.T) {
	px := proxytest.Start(t, proxytest.Options{Auth: true})
	site := nettest.NewServer(t, serveBytes(200, []byte("hello")))
	tlsSite := httptest.NewTLSServer(serveBytes(200, []byte("hello")))
	t.Cleanup(tlsSite.Close)
	h := newEngine(t, HTTPConfig{Timeout: 10 * time.Second, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}})

	// A port nothing listens on.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := l.Addr().String()
	l.Close()

	// A proxy whose own exit fails: 502 to every CONNECT.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusBadGateway)
	}))
	t.Cleanup(bad.Close)
	badAddr := bad.Listener.Addr().String()

	wrong := strings.Replace(px.URL(), px.Password, "wrong-password", 1)
	for _, tc := range []struct {
		name, proxy, url string
		err              error
	}{
		{"proxy down", "http://u:secret@" + closed, site.URL + "/", ErrProxy},
		{"proxy down, https", "http://u:secret@" + closed, tlsSite.URL + "/", ErrProxy},
		{"no credentials", "http://" + px.Addr, site.URL + "/", ErrProxy}, // 407
		{"no credentials, https", "http://" + px.Addr, tlsSite.URL + "/", ErrProxy},
		// (Wrong credentials on plain http: tinyproxy answers 401, which a
		// site may send too, so that one comes back as a response.)
		{"wrong credentials, https", wrong, tlsSite.URL + "/", ErrProxy},
		{"site down, https", px.URL(), "https://" + closed + "/", ErrUnreachable},
		{"502 on CONNECT", "http://u:secret@" + badAddr, tlsSite.URL + "/", ErrProxy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.FetchVia(t.Context(), &Request{URL: tc.url}, pickOne(t, tc.proxy))
			if !isOnly(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			for _, secret := range []string{"secret", "wrong-password", px.Password} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the error shows a password: %v", err)
				}
			}
			if tc.err == ErrProxy {
				for _, addr := range []string{closed, px.Addr, badAddr} {
					if strings.Contains(err.Error(), addr) {
						t.Errorf("the error shows the proxy's address %s: %v", addr, err)
					}
				}
			}
		})
	}
}

// TestProxyKeepsTheGuard runs the guarded engine (only 127.0.0.2 counts as
// public) with a proxy on 127.0.0.1, which is not public: the engine
// reaches the proxy, because the operator configured it, but still only
// lets through sites that are public, by URL and by what their names
// resolve to, on every redirect hop; and a direct fetch cannot reach the
// proxy's address.
func TestProxyKeepsTheGuard(t *testing.T) {
	px := proxytest.Start(t, proxytest.Options{})
	private := nettest.NewServer(t, serveBytes(200, []byte("secret")))
	public := nettest.NewServerOn(t, "127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "public")
	}))
	resolver := nettest.StaticDNS(t, map[string][]netip.Addr{
		"rebind.test": {loopback},
		"proxy.test":  {loopback},
	})
	h := guardedEngine(t, HTTPConfig{Resolver: resolver}, loopback2)
	p := pickOne(t, px.URL())

	resp, err := h.FetchVia(t.Context(), &Request{URL: public.URL + "/page"}, p)
	if err != nil || string(resp.Body) != "public" {
		t.Fatalf("public site through the proxy: %v", err)
	}
	if !px.WaitSaw("GET "+public.URL+"/page", 5*time.Second) {
		t.Errorf("not through the proxy: %q", px.Requests())
	}

	for _, raw := range []string{
		private.URL + "/", // by URL
		"http://rebind.test:" + private.Port() + "/",                           // by name
		public.URL + "/redirect?to=" + private.URL + "/",                       // a hop by URL
		public.URL + "/redirect?to=http://rebind.test:" + private.Port() + "/", // a hop by name
	} {
		_, err := h.FetchVia(t.Context(), &Request{URL: raw}, p)
		if !isOnly(err, ErrNotPublic) {
			t.Errorf("%s: %v, want ErrNotPublic", raw, err)
		}
	}
	for _, r := range px.Requests() {
		if f := strings.Fields(r); len(f) > 1 && strings.Contains(strings.SplitN(f[1], "/redirect", 2)[0], ":"+private.Port()) {
			t.Errorf("the proxy was asked for the private site: %s", r)
		}
	}
	if n := private.Requests.Load(); n != 0 {
		t.Errorf("the private site saw %d requests", n)
	}

	// Direct, a name that resolves to the proxy's address is refused at
	// dial time, like any loopback address.
	_, port, _ := net.SplitHostPort(px.Addr)
	before := len(px.Requests())
	_, err = h.Fetch(t.Context(), &Request{URL: "http://proxy.test:" + port + "/"})
	if !isOnly(err, ErrNotPublic) {
		t.Errorf("direct to the proxy's address: %v", err)
	}
	if len(px.Requests()) != before {
		t.Error("the proxy was reached directly")
	}
}

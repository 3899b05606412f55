package fetch

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// server is an httptest server on a loopback address that counts the
// connections and requests it sees, so tests can prove the guard refused
// before connecting.
type server struct {
	*httptest.Server
	conns    atomic.Int64
	requests atomic.Int64
}

// newServer starts h on 127.0.0.1.
func newServer(t testing.TB, h http.Handler) *server {
	return newServerOn(t, "127.0.0.1:0", h)
}

// newServerOn starts h on addr, which must be a loopback address.
func newServerOn(t testing.TB, addr string, h http.Handler) *server {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	s := &server{}
	s.Server = &httptest.Server{
		Listener: l,
		Config: &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				s.requests.Add(1)
				h.ServeHTTP(w, r)
			}),
			ConnState: func(_ net.Conn, st http.ConnState) {
				if st == http.StateNew {
					s.conns.Add(1)
				}
			},
		},
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// port is the server's port, for building URLs with other host spellings.
func (s *server) port() string {
	_, p, _ := net.SplitHostPort(s.Listener.Addr().String())
	return p
}

// newEngine returns an engine that may reach loopback, closed at cleanup.
func newEngine(t testing.TB, cfg HTTPConfig) *HTTP {
	t.Helper()
	cfg.AllowPrivateNetworks = true
	h := NewHTTP(cfg)
	t.Cleanup(h.Close)
	return h
}

// guardedEngine returns an engine with the guard on, whose notion of a
// public address is widened to the loopback addresses in public, so a test
// can serve a "public" site on 127.0.0.2 and check that everything else on
// loopback is still refused.
func guardedEngine(t testing.TB, cfg HTTPConfig, public ...netip.Addr) *HTTP {
	t.Helper()
	cfg.AllowPrivateNetworks = false
	h := newHTTP(cfg, func(a netip.Addr) bool {
		for _, p := range public {
			if a.Unmap().WithZone("") == p {
				return true
			}
		}
		return isPublic(a)
	})
	t.Cleanup(h.Close)
	return h
}

// fakeDNS answers A and AAAA queries from lookup over UDP on 127.0.0.1, so
// tests can map made-up public names to loopback listeners through the
// engine's real resolver path (HTTPConfig.Resolver). lookup gets the name
// in lower case without the final dot and whether the query is for AAAA;
// a nil answer is NXDOMAIN.
func fakeDNS(t testing.TB, lookup func(name string, v6 bool) []netip.Addr) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fake dns: %v", err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { pc.Close(); wg.Wait() })
	wg.Go(func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp, ok := dnsAnswer(buf[:n], lookup); ok {
				pc.WriteTo(resp, from)
			}
		}
	})
	addr := pc.LocalAddr().String()
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", addr)
		},
	}
}

func dnsAnswer(query []byte, lookup func(string, bool) []netip.Addr) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	name := strings.TrimSuffix(strings.ToLower(q.Name.String()), ".")
	v6 := q.Type == dnsmessage.TypeAAAA
	addrs := lookup(name, v6)
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
	if addrs == nil {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil, false
	}
	rr := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}
	for _, a := range addrs {
		switch {
		case q.Type == dnsmessage.TypeA && a.Is4():
			err = b.AResource(rr, dnsmessage.AResource{A: a.As4()})
		case q.Type == dnsmessage.TypeAAAA && a.Is6():
			err = b.AAAAResource(rr, dnsmessage.AAAAResource{AAAA: a.As16()})
		}
		if err != nil {
			return nil, false
		}
	}
	resp, err := b.Finish()
	return resp, err == nil
}

// staticDNS maps names to fixed addresses.
func staticDNS(t testing.TB, records map[string][]netip.Addr) *net.Resolver {
	return fakeDNS(t, func(name string, _ bool) []netip.Addr { return records[name] })
}

// isOnly reports whether err is sentinel and none of the other fetch
// sentinels, so a test can tell a guard refusal from a failed connection.
func isOnly(err, sentinel error) bool {
	if !errors.Is(err, sentinel) {
		return false
	}
	for _, other := range []error{ErrInvalidURL, ErrScheme, ErrNotPublic, ErrUnreachable, ErrTooLarge, ErrTooManyRedirects, ErrDecode} {
		if other != sentinel && errors.Is(err, other) {
			return false
		}
	}
	return true
}

var (
	loopback2 = netip.MustParseAddr("127.0.0.2")
	loopback  = netip.MustParseAddr("127.0.0.1")
	ipv6Loop  = netip.MustParseAddr("::1")
)

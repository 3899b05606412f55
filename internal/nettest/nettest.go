// Package nettest holds the loopback network fixtures that the fetch
// engines' tests share: an HTTP server that counts the connections and
// requests it sees (so a test can prove a guard refused before
// connecting), a DNS server on loopback for a net.Resolver, and an
// upstream forward proxy that demands credentials.
package nettest

import (
	"context"
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

// Server is an httptest server on a loopback address that counts the
// connections and requests it sees.
type Server struct {
	*httptest.Server
	Conns    atomic.Int64
	Requests atomic.Int64
}

// NewServer starts h on 127.0.0.1, closed at cleanup.
func NewServer(t testing.TB, h http.Handler) *Server {
	return NewServerOn(t, "127.0.0.1:0", h)
}

// NewServerOn starts h on addr, which must be a loopback address.
func NewServerOn(t testing.TB, addr string, h http.Handler) *Server {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	s := &Server{}
	s.Server = &httptest.Server{
		Listener: l,
		Config: &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				s.Requests.Add(1)
				h.ServeHTTP(w, r)
			}),
			ConnState: func(_ net.Conn, st http.ConnState) {
				if st == http.StateNew {
					s.Conns.Add(1)
				}
			},
		},
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// Port is the server's port, for building URLs with other host spellings.
func (s *Server) Port() string {
	_, p, _ := net.SplitHostPort(s.Listener.Addr().String())
	return p
}

// FakeDNS answers A and AAAA queries over UDP on loopback and returns a
// resolver that asks only it. lookup gets the name in lower case without
// the final dot and whether the query is for AAAA; a nil answer is
// NXDOMAIN.
func FakeDNS(t testing.TB, lookup func(name string, v6 bool) []netip.Addr) *net.Resolver {
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
			if resp, ok := answer(buf[:n], lookup); ok {
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

// StaticDNS maps names to fixed addresses; other names are NXDOMAIN.
func StaticDNS(t testing.TB, records map[string][]netip.Addr) *net.Resolver {
	return FakeDNS(t, func(name string, _ bool) []netip.Addr { return records[name] })
}

func answer(query []byte, lookup func(string, bool) []netip.Addr) ([]byte, bool) {
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
	addrs := lookup(name, q.Type == dnsmessage.TypeAAAA)
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

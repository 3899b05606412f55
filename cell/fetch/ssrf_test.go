package fetch

import (
	"errors"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/trawlhq/trawl/internal/nettest"
)

// TestFetchRefusesHostileURLs points every spelling of loopback at a live
// server and checks the guarded engine refuses each one before connecting.
func TestFetchRefusesHostileURLs(t *testing.T) {
	srv := nettest.NewServer(t, serveBytes(200, []byte("secret")))
	p := srv.Port()
	h := NewHTTP(HTTPConfig{})
	t.Cleanup(h.Close)
	for _, raw := range []string{
		"http://127.0.0.1:" + p + "/",
		"http://2130706433:" + p + "/",
		"http://0x7f000001:" + p + "/",
		"http://0177.0.0.1:" + p + "/",
		"http://127.1:" + p + "/",
		"http://0:" + p + "/",
		"http://[::ffff:127.0.0.1]:" + p + "/",
		"http://[::1]:" + p + "/",
		"http://localhost:" + p + "/",
		"http://api.localhost:" + p + "/",
		"http://１２７．０．０．１:" + p + "/",
	} {
		resp, err := h.Fetch(t.Context(), &Request{URL: raw})
		if !isOnly(err, ErrNotPublic) {
			t.Errorf("Fetch(%q) = %v, %v; want ErrNotPublic", raw, resp, err)
		}
	}
	if n := srv.Conns.Load(); n != 0 {
		t.Errorf("the server saw %d connections", n)
	}
}

// TestDNSRebindingRefusedAtDial resolves a public-looking name to loopback
// through the engine's resolver: validation cannot know, so the refusal
// must come from the dial-time check, before connecting.
func TestDNSRebindingRefusedAtDial(t *testing.T) {
	srv := nettest.NewServer(t, serveBytes(200, []byte("secret")))
	tests := []struct {
		name  string
		addrs []netip.Addr
	}{
		{"A 127.0.0.1", []netip.Addr{loopback}},
		{"A and AAAA loopback", []netip.Addr{loopback, ipv6Loop}},
		{"AAAA mapped loopback", []netip.Addr{netip.MustParseAddr("::ffff:127.0.0.1")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resolver := nettest.StaticDNS(t, map[string][]netip.Addr{"public.test": tt.addrs})
			url := "http://public.test:" + srv.Port() + "/"

			// The name really leads to the server...
			open := NewHTTP(HTTPConfig{Resolver: resolver, AllowPrivateNetworks: true})
			defer open.Close()
			if resp, err := open.Fetch(t.Context(), &Request{URL: url}); err != nil || string(resp.Body) != "secret" {
				t.Fatalf("with private networks allowed: %v", err)
			}
			before := srv.Conns.Load()

			// ...and the guard refuses it.
			h := NewHTTP(HTTPConfig{Resolver: resolver})
			defer h.Close()
			_, err := h.Fetch(t.Context(), &Request{URL: url})
			if !isOnly(err, ErrNotPublic) {
				t.Fatalf("Fetch = %v; want ErrNotPublic", err)
			}
			if _, ok := errors.AsType[*dialRefusedError](err); !ok {
				t.Errorf("refusal did not come from the dial-time check: %v", err)
			}
			if n := srv.Conns.Load() - before; n != 0 {
				t.Errorf("the server saw %d connections from the guarded engine", n)
			}
		})
	}
}

// TestDNSRebindingBetweenFetches answers a public address first and
// loopback after: the second connection is refused even though the name
// was fine a moment ago.
func TestDNSRebindingBetweenFetches(t *testing.T) {
	public := nettest.NewServerOn(t, "127.0.0.2:0", serveBytes(200, []byte("public")))
	private := nettest.NewServerOn(t, "127.0.0.1:"+public.Port(), serveBytes(200, []byte("secret")))
	var lookups atomic.Int64
	resolver := nettest.FakeDNS(t, func(name string, v6 bool) []netip.Addr {
		if name != "rebind.test" {
			return nil
		}
		if v6 {
			return []netip.Addr{}
		}
		if lookups.Add(1) == 1 {
			return []netip.Addr{loopback2}
		}
		return []netip.Addr{loopback}
	})
	h := guardedEngine(t, HTTPConfig{Resolver: resolver}, loopback2)
	url := "http://rebind.test:" + public.Port() + "/"

	resp, err := h.Fetch(t.Context(), &Request{URL: url})
	if err != nil || string(resp.Body) != "public" {
		t.Fatalf("first fetch: %v", err)
	}
	h.Close() // no idle connection to reuse: the next fetch resolves again
	_, err = h.Fetch(t.Context(), &Request{URL: url})
	if !isOnly(err, ErrNotPublic) {
		t.Fatalf("second fetch = %v; want ErrNotPublic", err)
	}
	if n := private.Conns.Load(); n != 0 {
		t.Errorf("the private server saw %d connections", n)
	}
}

// TestRedirectToPrivateRefused serves an allowed site on 127.0.0.2 (public
// for this test) that redirects to a private one on 127.0.0.1; every hop
// to it is refused, by validation or at dial time, and the private server
// never sees a connection.
func TestRedirectToPrivateRefused(t *testing.T) {
	private := nettest.NewServer(t, serveBytes(200, []byte("secret")))
	pp := private.Port()
	elsewhere := nettest.NewServerOn(t, "127.0.0.2:0", serveBytes(200, []byte("fine")))
	resolver := nettest.StaticDNS(t, map[string][]netip.Addr{
		"internal.test": {loopback},
		"mapped.test":   {netip.MustParseAddr("::ffff:127.0.0.1")},
		"fine.test":     {loopback2},
	})

	tests := []struct {
		location string
		err      error
		dial     bool // refused at dial time rather than by validation
	}{
		{location: "http://127.0.0.1:" + pp + "/", err: ErrNotPublic},
		{location: "http://2130706433:" + pp + "/", err: ErrNotPublic},
		{location: "http://0x7f.1:" + pp + "/", err: ErrNotPublic},
		{location: "http://[::ffff:127.0.0.1]:" + pp + "/", err: ErrNotPublic},
		{location: "http://localhost:" + pp + "/", err: ErrNotPublic},
		{location: "http://internal.test:" + pp + "/", err: ErrNotPublic, dial: true},
		{location: "http://mapped.test:" + pp + "/", err: ErrNotPublic, dial: true},
		{location: "http://169.254.169.254/latest/meta-data/", err: ErrNotPublic},
		{location: "file:///etc/passwd", err: ErrScheme},
		{location: "gopher://127.0.0.1:" + pp + "/", err: ErrScheme},
		{location: "http://fine.test:" + elsewhere.Port() + "/"},
		{location: "http://127.0.0.2:" + elsewhere.Port() + "/"},
	}
	for _, tt := range tests {
		t.Run(tt.location, func(t *testing.T) {
			origin := nettest.NewServerOn(t, "127.0.0.2:0", http.RedirectHandler(tt.location, http.StatusFound))
			h := guardedEngine(t, HTTPConfig{Resolver: resolver}, loopback2)
			resp, err := h.Fetch(t.Context(), &Request{URL: origin.URL + "/start"})
			if tt.err == nil {
				if err != nil || string(resp.Body) != "fine" || resp.Redirects != 1 {
					t.Fatalf("Fetch = %v, %v; want the allowed redirect followed", resp, err)
				}
				return
			}
			if !isOnly(err, tt.err) {
				t.Fatalf("Fetch = %v; want %v", err, tt.err)
			}
			if _, ok := errors.AsType[*dialRefusedError](err); ok != tt.dial {
				t.Errorf("refused at dial time: %v; want %v (%v)", ok, tt.dial, err)
			}
			if origin.Requests.Load() != 1 {
				t.Errorf("origin saw %d requests; want 1", origin.Requests.Load())
			}
		})
	}
	if n, r := private.Conns.Load(), private.Requests.Load(); n != 0 || r != 0 {
		t.Errorf("the private server saw %d connections, %d requests", n, r)
	}
}

// TestGuardedEngineReachesPublic checks the guard does not refuse what it
// should allow: a name resolving to an address the policy deems public.
func TestGuardedEngineReachesPublic(t *testing.T) {
	srv := nettest.NewServerOn(t, "127.0.0.2:0", serveBytes(200, []byte("hello")))
	resolver := nettest.StaticDNS(t, map[string][]netip.Addr{"www.public.test": {loopback2}})
	h := guardedEngine(t, HTTPConfig{Resolver: resolver}, loopback2)
	resp, err := h.Fetch(t.Context(), &Request{URL: "http://WWW.Public.Test:" + srv.Port()})
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Body) != "hello" || resp.URL != "http://www.public.test:"+srv.Port()+"/" {
		t.Errorf("got %q from %s", resp.Body, resp.URL)
	}
}

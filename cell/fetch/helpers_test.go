package fetch

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/trawlhq/trawl/internal/urlpolicy"
)

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
		return urlpolicy.IsPublic(a)
	})
	t.Cleanup(h.Close)
	return h
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

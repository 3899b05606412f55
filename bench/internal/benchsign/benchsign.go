// Package benchsign signs the bench's requests to a trawl cell as the
// region's gate would (internal/regionauth): a cell answers only requests
// signed with its region's keys (TRAWL_REGION_KEYS), so a bench client
// that talks to a cell directly must sign, as the gate does in production.
// Every bench request is signed for one account, acct_bench, with the
// private-networks policy on (the bench's cells fetch the loopback file
// server, so they run with --allow-private-networks and refuse requests
// whose gate does not allow it too).
package benchsign

import (
	"net/http"
	"os"
	"time"

	"github.com/trawlhq/trawl/internal/regionauth"
)

// Claims are what every bench request is signed with.
var Claims = regionauth.Claims{Account: "acct_bench", Private: true}

// KeysFromEnv is the keyring in TRAWL_REGION_KEYS, or nil when it is unset.
func KeysFromEnv() (*regionauth.Keys, error) {
	v := os.Getenv(regionauth.EnvKeys)
	if v == "" {
		return nil, nil
	}
	return regionauth.ParseKeys(v)
}

// Handler signs each request with keys before next serves it: what the
// gate does before a request reaches a cell, in the cell's own process
// (no proxy hop), so the cell does the same work as behind a gate.
func Handler(keys *regionauth.Keys, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys.Sign(r, Claims, time.Now())
		next.ServeHTTP(w, r)
	})
}

// Transport signs each request it sends with keys; with nil keys it is
// base unchanged.
func Transport(keys *regionauth.Keys, base http.RoundTripper) http.RoundTripper {
	if keys == nil {
		return base
	}
	return &transport{keys: keys, base: base}
}

type transport struct {
	keys *regionauth.Keys
	base http.RoundTripper
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context()) // a RoundTripper must not modify the request
	t.keys.Sign(r, Claims, time.Now())
	return t.base.RoundTrip(r)
}

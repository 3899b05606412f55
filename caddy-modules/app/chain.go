package app

import (
	"reflect"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

// Chain is the gate's handler chain, in the order its directives must run:
// each needs what the ones before it did (auth the trace's span, the rate
// limit and the meter the identity auth found, the meter a body held to its
// route's limit, route the meter's check).
var Chain = []string{"trawl_trace", "trawl_auth", "trawl_ratelimit", "trawl_body", "trawl_meter", "trawl_api", "trawl_route"}

// needsAuth are the directives that must have trawl_auth before them in
// their block: without an identity the meter bills nothing and the gate's
// own routes see no account.
var needsAuth = []string{"trawl_meter", "trawl_api"}

const chainKey = "trawl.chain"

// InChain is called by each chain directive as the Caddyfile is adapted.
// Caddy runs the directives of a route { } block in the order written, and
// those at a site's top level in its registered directive order, which for
// plugins is the order their packages happen to initialize in — not the
// gate's (trawl_api would run before trawl_auth, trawl_trace last). So it
// refuses, at adapt time: in a block, a directive written after one that
// must follow it, the same directive twice, and trawl_meter or trawl_api
// without trawl_auth before it; at a site's top level, trawl_trace,
// trawl_body, trawl_meter and trawl_api, which are right only inside a
// route block.
// trawl_auth, trawl_ratelimit and trawl_route may stand at the top level:
// Caddy's order keeps them in the gate's order (auth, ratelimit, route,
// then reverse_proxy).
func InChain(h httpcaddyfile.Helper, dir string) error {
	// At a site's top level the helper's block state is the adapter's
	// state itself; a route block gets a copy of its own.
	if h.State != nil && reflect.ValueOf(h.State).UnsafePointer() == reflect.ValueOf(h.BlockState).UnsafePointer() {
		if slices.Contains(topLevelRefused, dir) {
			return h.Errf("%s must be inside a route { } block, in the order %s: at a site's top level Caddy's directive order would run it out of the gate's (docs/gate.md)",
				dir, strings.Join(Chain, ", "))
		}
		return nil
	}
	stage := slices.Index(Chain, dir)
	prev, _ := h.BlockState[chainKey].([]string)
	for _, p := range prev {
		switch ps := slices.Index(Chain, p); {
		case ps == stage:
			return h.Errf("%s is given twice in one block", dir)
		case ps > stage:
			return h.Errf("%s must come before %s: the gate's handlers run in the order %s (docs/gate.md)", dir, p, strings.Join(Chain, ", "))
		}
	}
	if slices.Contains(needsAuth, dir) && !slices.Contains(prev, "trawl_auth") {
		return h.Errf("%s needs trawl_auth before it in the same route { } block (docs/gate.md)", dir)
	}
	if h.BlockState != nil {
		h.BlockState[chainKey] = append(slices.Clip(prev), dir)
	}
	return nil
}

// topLevelRefused are the chain directives Caddy's directive order would
// misplace at a site's top level.
var topLevelRefused = []string{"trawl_trace", "trawl_body", "trawl_meter", "trawl_api"}

// Package gate assembles a region's gate: the runtime its Caddy modules
// share (the ledger voter and replica, the regional holds client, the
// region's cell membership), the gate's own routes (billing, keys, sign-up,
// estimate, usage history) and the Caddy configuration of a region and of
// the dev topology.
package gate

import (
	"context"

	"github.com/trawlhq/trawl/ledger"
)

// Identity is who a request is from: set by the auth module, read by the
// rate limiter, the meter and the gate's own routes.
type Identity struct {
	Key     *ledger.Key // nil for a forwarded request
	Account *ledger.Account
	// Forwarded is the region whose gate authenticated the caller and sent
	// the request here (an object this region owns); "" for a caller of
	// this gate. That gate counted it against the rate limits.
	Forwarded string
}

type identityKey struct{}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity the auth module set, or nil for a
// request that needed no key.
func IdentityFrom(ctx context.Context) *Identity {
	id, _ := ctx.Value(identityKey{}).(*Identity)
	return id
}

// IdentityVar is the Caddy request variable the auth module also stores the
// identity in: error routes see the request as it entered the server, so
// they find it there rather than in the context.
const IdentityVar = "trawl.identity"

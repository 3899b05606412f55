package ratelimit

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/trawlhq/trawl/caddy-modules/app"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("trawl_ratelimit", parseCaddyfile)
	// Like trawl_auth: a plugin may be ordered only against a standard
	// directive, so both sit just before reverse_proxy, in the order their
	// packages initialize (by import path: auth before ratelimit). Placing
	// this one with the standard authentication handlers instead (after
	// forward_auth) would put it ahead of trawl_auth, where it would see
	// no identity and let everything through. Inside a route block the
	// order is as written, which is how the gate's Caddyfile uses them.
	httpcaddyfile.RegisterDirectiveOrder("trawl_ratelimit", httpcaddyfile.Before, "reverse_proxy")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	if err := app.InChain(h, "trawl_ratelimit"); err != nil {
		return nil, err
	}
	m := new(Handler)
	if err := m.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return m, nil
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler:
//
//	trawl_ratelimit [<matcher>] {
//		zone <name>
//		plan <name> <rate_per_minute> <concurrency>
//	}
//
// The block is optional. A plan line gives both of a plan's limits (0: no
// limit); plans without one take the price table's limits.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "zone":
			if !d.AllArgs(&h.Zone) {
				return d.ArgErr()
			}
		case "plan":
			var name, rate, conc string
			if !d.AllArgs(&name, &rate, &conc) {
				return d.Errf("plan wants: <name> <rate_per_minute> <concurrency>")
			}
			r, err := strconv.Atoi(rate)
			if err != nil || r < 0 {
				return d.Errf("plan %s: rate_per_minute %q is not a whole number of at least 0", name, rate)
			}
			c, err := strconv.Atoi(conc)
			if err != nil || c < 0 {
				return d.Errf("plan %s: concurrency %q is not a whole number of at least 0", name, conc)
			}
			if _, dup := h.Plans[name]; dup {
				return d.Errf("plan %s is given twice", name)
			}
			if h.Plans == nil {
				h.Plans = make(map[string]Limits)
			}
			h.Plans[name] = Limits{RatePerMinute: r, Concurrency: c}
		default:
			return d.Errf("unknown trawl_ratelimit option %q", d.Val())
		}
	}
	return nil
}

var _ caddyfile.Unmarshaler = (*Handler)(nil)

package auth

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/trawlhq/trawl/caddy-modules/app"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("trawl_auth", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("trawl_auth", httpcaddyfile.Before, "reverse_proxy")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	if err := app.InChain(h, "trawl_auth"); err != nil {
		return nil, err
	}
	a := new(Auth)
	if err := a.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	// Refused here rather than in Validate: Caddy may open the trawl app
	// (the ledger voter, the stores) before it provisions this handler.
	if err := a.Validate(); err != nil {
		return nil, h.Err(err.Error())
	}
	return a, nil
}

// UnmarshalCaddyfile reads
//
//	trawl_auth [{
//		public /path /prefix/* ...
//	}]
func (a *Auth) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "public":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			a.Public = append(a.Public, args...)
		default:
			return d.Errf("unknown trawl_auth option %q", d.Val())
		}
	}
	return nil
}

var _ caddyfile.Unmarshaler = (*Auth)(nil)

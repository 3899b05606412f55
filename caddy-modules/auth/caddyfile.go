package auth

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("trawl_auth", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("trawl_auth", httpcaddyfile.Before, "reverse_proxy")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	a := new(Auth)
	err := a.UnmarshalCaddyfile(h.Dispenser)
	return a, err
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

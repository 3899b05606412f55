package refusal

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("trawl_errors", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("trawl_errors", httpcaddyfile.Before, "respond")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	e := new(Errors)
	return e, e.UnmarshalCaddyfile(h.Dispenser)
}

// UnmarshalCaddyfile reads "trawl_errors" (no options).
func (e *Errors) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() || d.NextBlock(0) {
		return d.ArgErr()
	}
	return nil
}

var _ caddyfile.Unmarshaler = (*Errors)(nil)

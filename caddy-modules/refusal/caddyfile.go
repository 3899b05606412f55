package refusal

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/trawlhq/trawl/caddy-modules/app"
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
	return app.NoOptions(d)
}

var _ caddyfile.Unmarshaler = (*Errors)(nil)

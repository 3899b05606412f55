package body

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/trawlhq/trawl/caddy-modules/app"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("trawl_body", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("trawl_body", httpcaddyfile.Before, "reverse_proxy")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	if err := app.InChain(h, "trawl_body"); err != nil {
		return nil, err
	}
	b := new(Body)
	return b, b.UnmarshalCaddyfile(h.Dispenser)
}

// UnmarshalCaddyfile reads "trawl_body" (no options: the limits are the
// route table's).
func (b *Body) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return app.NoOptions(d)
}

var _ caddyfile.Unmarshaler = (*Body)(nil)

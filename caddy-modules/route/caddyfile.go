package route

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/trawlhq/trawl/caddy-modules/app"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("trawl_route", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("trawl_route", httpcaddyfile.Before, "reverse_proxy")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	if err := app.InChain(h, "trawl_route"); err != nil {
		return nil, err
	}
	r := new(Route)
	return r, r.UnmarshalCaddyfile(h.Dispenser)
}

// UnmarshalCaddyfile reads "trawl_route" (no options).
func (rt *Route) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return app.NoOptions(d)
}

// UnmarshalCaddyfile reads "dynamic trawl_cells" inside reverse_proxy.
func (c *Cells) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return app.NoOptions(d)
}

var (
	_ caddyfile.Unmarshaler = (*Route)(nil)
	_ caddyfile.Unmarshaler = (*Cells)(nil)
)

package meter

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/trawlhq/trawl/caddy-modules/app"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("trawl_meter", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("trawl_meter", httpcaddyfile.Before, "reverse_proxy")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	if err := app.InChain(h, "trawl_meter"); err != nil {
		return nil, err
	}
	m := new(Meter)
	return m, m.UnmarshalCaddyfile(h.Dispenser)
}

// UnmarshalCaddyfile reads "trawl_meter" (no options: prices come from the
// trawl app's price table).
func (m *Meter) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return app.NoOptions(d)
}

var _ caddyfile.Unmarshaler = (*Meter)(nil)

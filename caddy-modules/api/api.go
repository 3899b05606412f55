// Package api is the gate's Caddy module trawl_api: it answers the routes
// the route table (internal/routes) gives the gate itself (its Gate rows,
// each with the handler of the service the row names: gate.Runtime's
// Handler), and passes every other request, and one whose ?region= names
// another region, on to trawl_route.
package api

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/trawlhq/trawl/caddy-modules/app"
	"github.com/trawlhq/trawl/gate"
	"github.com/trawlhq/trawl/internal/clientip"
	"github.com/trawlhq/trawl/internal/routes"
)

func init() {
	caddy.RegisterModule(API{})
	httpcaddyfile.RegisterHandlerDirective("trawl_api", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		if err := app.InChain(h, "trawl_api"); err != nil {
			return nil, err
		}
		a := new(API)
		return a, a.UnmarshalCaddyfile(h.Dispenser)
	})
	httpcaddyfile.RegisterDirectiveOrder("trawl_api", httpcaddyfile.Before, "reverse_proxy")
}

// API serves the gate's own routes.
type API struct {
	rt     *gate.Runtime
	routes *routes.Table
	h      http.Handler
}

// CaddyModule returns the Caddy module information.
func (API) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.trawl_api", New: func() caddy.Module { return new(API) }}
}

// Provision finds the runtime, reads the route table and builds the
// handlers of the gate's rows; a row without a handler, or a handler
// without a row, fails it.
func (a *API) Provision(ctx caddy.Context) error {
	rt, err := app.Runtime(ctx)
	if err != nil {
		return err
	}
	h, err := rt.Handler()
	if err != nil {
		return err
	}
	a.rt, a.routes, a.h = rt, rt.Routes(), h
	return nil
}

// ServeHTTP answers the gate's routes and passes the rest on.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	m := a.routes.Match(r)
	if !m.Place(r, a.rt.Region()).Local {
		return next.ServeHTTP(w, r)
	}
	// The gate's own services may call the gate again from the top of
	// the chain (as Caddy's invoke handler finds it): the tool server
	// (Relay rows) and a search that scrapes its results.
	if srv, ok := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok && srv != nil {
		r = r.WithContext(gate.WithPipeline(r.Context(), srv))
	}
	w.Header().Set("X-Svc-Region", a.rt.Region())
	// The client's address as Caddy found it (behind trusted_proxies, the
	// forwarded one), for the limits per address (sign-up).
	if ip, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok && ip != "" {
		r = r.WithContext(clientip.With(r.Context(), ip))
	}
	a.h.ServeHTTP(w, r)
	return nil
}

// UnmarshalCaddyfile reads "trawl_api" (no options).
func (a *API) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return app.NoOptions(d)
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*API)(nil)
	_ caddyhttp.MiddlewareHandler = (*API)(nil)
	_ caddyfile.Unmarshaler       = (*API)(nil)
)

// Package route is the gate's routing: the handler trawl_route decides
// where a request goes and the upstream source trawl_cells hands that to
// reverse_proxy.
//
// Where a request goes is the route table's rule (gate/routes, Match.Place):
// a request for an object (a job; monitors later) goes where the object
// lives — its id names its region and cell (j_<region>.<cell>.<hex>), so
// any gate can route it to the owning cell in this region or to the owning
// region's gate; the usage history of another region
// (/v1/billing/usage?region=sin) goes to that region's gate; everything
// else goes to a live cell of this region, as the region's memberlist
// cluster sees it. This module turns the place into an address, or a
// refusal. Responses carry x-svc-region: the region that answered.
package route

import (
	"context"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/trawlhq/trawl/caddy-modules/app"
	"github.com/trawlhq/trawl/gate"
	"github.com/trawlhq/trawl/gate/routes"
)

func init() {
	caddy.RegisterModule(Route{})
	caddy.RegisterModule(Cells{})
}

var tracer = otel.Tracer("github.com/trawlhq/trawl/caddy-modules/route")

// HeaderRegion names the region that answered.
const HeaderRegion = "X-Svc-Region"

type targetKey struct{}

// target is where trawl_route sent a request.
type target struct {
	dial   string // host:port; "" for any live cell of the region
	region string
}

// Route picks the destination of each request.
type Route struct {
	rt     *gate.Runtime
	routes *routes.Table
}

// CaddyModule returns the Caddy module information.
func (Route) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.trawl_route", New: func() caddy.Module { return new(Route) }}
}

// Provision finds the runtime and reads the route table.
func (rt *Route) Provision(ctx caddy.Context) error {
	r, err := app.Runtime(ctx)
	if err != nil {
		return err
	}
	rt.rt, rt.routes = r, r.Routes()
	return nil
}

// ServeHTTP routes r and passes it on to reverse_proxy.
func (rt *Route) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	ctx, span := tracer.Start(r.Context(), "trawl.route")
	defer span.End()
	t, ref := rt.decide(r)
	if ref != nil {
		return caddyhttp.Error(ref.Status, ref)
	}
	span.SetAttributes(attribute.String("trawl.region", t.region), attribute.String("trawl.upstream", t.dial))
	// W3C trace context for the next hop, a child of this span.
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(r.Header))
	r = r.WithContext(context.WithValue(ctx, targetKey{}, t))
	return next.ServeHTTP(&regionWriter{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, region: t.region}, r)
}

// decide returns the target of r, or a refusal.
func (rt *Route) decide(r *http.Request) (target, *gate.Refusal) {
	own := rt.rt.Region()
	m := rt.routes.Match(r)
	p := m.Place(r, own)
	switch {
	case p.NoOwner:
		return target{region: own}, nil // the cell answers 404
	case p.Region != own:
		g, ok := rt.rt.Gate(p.Region)
		if ok {
			return target{dial: g, region: p.Region}, nil
		}
		if m.Owner != nil {
			return target{}, gate.Refuse(http.StatusNotFound, "not_found", "no such "+m.Owner.Name)
		}
		return target{}, gate.Refuse(http.StatusBadRequest, "bad_input", "no such region: "+p.Region)
	case p.Cell != "":
		for _, c := range rt.rt.Cells() {
			if c.Name == p.Cell {
				return target{dial: c.API, region: own}, nil
			}
		}
		return target{}, gate.Refuse(http.StatusServiceUnavailable, "cell_unavailable",
			"the cell holding this "+m.Owner.Name+" is not reachable right now; the "+m.Owner.Name+" is kept, repeat the request in a few seconds")
	}
	return target{region: own}, nil
}

// regionWriter names the answering region on the response.
type regionWriter struct {
	*caddyhttp.ResponseWriterWrapper
	region string
}

func (w *regionWriter) WriteHeader(status int) {
	if status >= 200 {
		w.Header().Set(HeaderRegion, w.region)
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *regionWriter) Write(p []byte) (int, error) {
	if w.Header().Get(HeaderRegion) == "" {
		w.Header().Set(HeaderRegion, w.region)
	}
	return w.ResponseWriter.Write(p)
}

// Cells is the dynamic upstream source of reverse_proxy: the target
// trawl_route chose, or every live cell of the region.
type Cells struct {
	rt *gate.Runtime
}

// CaddyModule returns the Caddy module information.
func (Cells) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.reverse_proxy.upstreams.trawl_cells", New: func() caddy.Module { return new(Cells) }}
}

// Provision finds the runtime.
func (c *Cells) Provision(ctx caddy.Context) error {
	r, err := app.Runtime(ctx)
	c.rt = r
	return err
}

// GetUpstreams returns the upstreams of r. An empty list makes
// reverse_proxy answer 503, which the error renderer explains.
func (c *Cells) GetUpstreams(r *http.Request) ([]*reverseproxy.Upstream, error) {
	if t, ok := r.Context().Value(targetKey{}).(target); ok && t.dial != "" {
		return []*reverseproxy.Upstream{{Dial: t.dial}}, nil
	}
	cells := c.rt.Cells()
	ups := make([]*reverseproxy.Upstream, len(cells))
	for i, m := range cells {
		ups[i] = &reverseproxy.Upstream{Dial: m.API}
	}
	if len(ups) == 0 {
		trace.SpanFromContext(r.Context()).AddEvent("no live cell")
	}
	return ups, nil
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Route)(nil)
	_ caddyhttp.MiddlewareHandler = (*Route)(nil)
	_ caddy.Provisioner           = (*Cells)(nil)
	_ reverseproxy.UpstreamSource = (*Cells)(nil)
)

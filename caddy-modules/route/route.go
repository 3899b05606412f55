// Package route is the gate's routing: the handler trawl_route decides
// where a request goes and the upstream source trawl_cells hands that to
// reverse_proxy.
//
// Where a request goes is the route table's rule (internal/routes, Match.Place):
// a request for an object (a job; monitors later) goes where the object
// lives — its id names its region and cell (j_<region>.<cell>.<hex>), so
// any gate can route it to the owning cell in this region or to the owning
// region's gate; the usage history of another region
// (/v1/billing/usage?region=sin) goes to that region's gate; everything
// else goes to a live cell of this region, as the region's memberlist
// cluster sees it. This module turns the place into an address, or a
// refusal. Responses carry x-svc-region: the region that answered.
//
// A request for a cell of this region leaves without the customer's key
// (Authorization, x-api-key): it carries the account id and the region's
// policy, signed with the region's key (internal/regionauth). The cell's
// answer must be signed over that request's nonce; one that is not (a
// process at a cell's address without the region's key) is replaced by a
// 502 and billed nothing.
package route

import (
	"context"
	"log/slog"
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
	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/members"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/routes"
)

func init() {
	caddy.RegisterModule(Route{})
	caddy.RegisterModule(Cells{})
}

var tracer = otel.Tracer("github.com/trawlhq/trawl/caddy-modules/route")

// HeaderRegion names the region that answered.
const HeaderRegion = "X-Svc-Region"

type targetKey struct{}

type answerKey struct{}

// Answer is how the answer to a request sent to a cell of this region is
// signed: the region's keys and the request's nonce. The meter checks with
// it the usage a cell reports inside the body (metering.Usage.PerLine:
// each NDJSON line signed over metering.LineNonce(Nonce, i)).
type Answer struct {
	Keys  *regionauth.Keys
	Nonce string
}

// WithAnswer returns r with a place trawl_route fills when it signs r for
// a cell of its region; it stays empty for a request answered elsewhere.
func WithAnswer(r *http.Request) (*http.Request, *Answer) {
	a := new(Answer)
	return r.WithContext(context.WithValue(r.Context(), answerKey{}, a)), a
}

// target is where trawl_route sent a request.
type target struct {
	dial   string // host:port; "" for any live cell of the region
	region string
	// standIn: an AnyCell row's owner cell and object id, when dial is
	// the owner's: reverse_proxy's tries after a failed dial go to its
	// stand-in once membership no longer lists the owner (a cell that
	// just died), rather than to the dead address until lb_try_duration
	// ends in a 502.
	owner, id string
	// placed: id names no cell; each try goes to the cell the region's
	// ready cells place it on then (jobid, members.Rendezvous).
	placed bool
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
	rw := &regionWriter{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, region: t.region}
	if k := billing.WebSocketKey(r); k != "" {
		// The key a WebSocket sent as its subprotocol stays here too; the
		// client gets it back on the upgrade, as the protocol requires.
		r.Header.Del("Sec-WebSocket-Protocol")
		rw.protocol = k
	}
	if t.region != rt.rt.Region() {
		// To the owning region's gate: signed as this gate, without the key.
		if id := gate.IdentityFrom(r.Context()); id != nil {
			rt.rt.SignForward(r, id.Account.ID)
		}
	} else {
		// To a cell: the key stays here; the cell learns the account, signed.
		r.Header.Del("Authorization")
		r.Header.Del("X-Api-Key")
		var account string
		if id := gate.IdentityFrom(r.Context()); id != nil {
			account = id.Account.ID
		}
		rw.keys, rw.log = rt.rt.RegionKeys(), rt.rt.Logger()
		rw.nonce = rw.keys.Sign(r, regionauth.Claims{Account: account, Private: rt.rt.AllowPrivateNetworks()}, rt.rt.Now())
		if a, ok := r.Context().Value(answerKey{}).(*Answer); ok {
			a.Keys, a.Nonce = rw.keys, rw.nonce
		}
	}
	r = r.WithContext(context.WithValue(ctx, targetKey{}, t))
	return next.ServeHTTP(rw, r)
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
	case p.Placed && clustered(rt.rt.Cells()):
		if c, ok := rt.rt.StandIn("", p.Owner); ok {
			return target{dial: c.API, region: own, id: p.Owner, placed: true}, nil
		}
		return target{}, gate.Refuse(http.StatusServiceUnavailable, "cell_unavailable",
			"no cell of the region can answer for this "+m.Owner.Name+" right now; the "+m.Owner.Name+" is kept, repeat the request in a few seconds")
	case p.Cell != "":
		for _, c := range rt.rt.Cells() {
			if c.Name == p.Cell {
				t := target{dial: c.API, region: own}
				if m.AnyCell {
					t.owner, t.id = p.Cell, p.Owner
				}
				return t, nil
			}
		}
		if !rt.rt.KnewCell(p.Cell) {
			// No such cell ever served this region: no such object.
			return target{}, gate.Refuse(http.StatusNotFound, "not_found", "no such "+m.Owner.Name)
		}
		if m.AnyCell {
			// A clustered region keeps its jobs in its job log: another
			// cell whose JetStream node is ready reads it there.
			if c, ok := rt.rt.StandIn(p.Cell, p.Owner); ok {
				return target{dial: c.API, region: own}, nil
			}
		}
		return target{}, gate.Refuse(http.StatusServiceUnavailable, "cell_unavailable",
			"the cell holding this "+m.Owner.Name+" is not reachable right now; the "+m.Owner.Name+" is kept, repeat the request in a few seconds")
	}
	if k := r.Header.Get("Idempotency-Key"); k != "" && m.Server == routes.Cell && r.Method == http.MethodPost {
		// A keyed submission (a job) goes to the cell the account and key
		// hash to, so a repeat reaches the cell that has the first. Only
		// cells taking new work are candidates (an operator's drain moves
		// later repeats of a key to another cell: docs/api.md).
		if id := gate.IdentityFrom(r.Context()); id != nil {
			if c, ok := members.Rendezvous(rt.rt.WorkCells(), id.Account.ID+"\x00"+k); ok {
				return target{dial: c.API, region: own}, nil
			}
		}
	}
	return target{region: own}, nil
}

// regionWriter names the answering region on the response and, for a
// request sent to a cell, checks the cell's signature.
type regionWriter struct {
	*caddyhttp.ResponseWriterWrapper
	region string
	// For a request to a cell of this region: the keys and the nonce the
	// answer must be signed with.
	keys    *regionauth.Keys
	nonce   string
	log     *slog.Logger
	wrote   bool
	discard bool // the answer was not the cell's: replaced
	// protocol is the WebSocket subprotocol (the key) the client offered,
	// answered back on the upgrade.
	protocol string
}

func (w *regionWriter) WriteHeader(status int) {
	if status < 200 {
		if status == http.StatusSwitchingProtocols && w.protocol != "" {
			w.Header().Set("Sec-WebSocket-Protocol", w.protocol)
		}
		w.ResponseWriter.WriteHeader(status)
		return
	}
	if w.wrote {
		return
	}
	w.wrote = true
	h := w.Header()
	h.Set(HeaderRegion, w.region)
	if w.keys != nil && !w.signed(status) {
		// Not from a cell of this region: nothing of it reaches the meter
		// or the client.
		w.discard = true
		for k := range h {
			delete(h, k)
		}
		h.Set(HeaderRegion, w.region)
		gate.Refuse(http.StatusBadGateway, "cell_unavailable",
			"a cell's answer could not be verified, so it was not used and nothing was charged; repeat the request").Write(w.ResponseWriter)
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

// signed reports whether the answer carries the cell's signature over the
// request's nonce, its status and its usage, and removes the signature.
// reverse_proxy's own error answers (no cell reached) never get here: they
// are handler errors rendered by the error route.
func (w *regionWriter) signed(status int) bool {
	h := w.Header()
	sig := h.Get(regionauth.HeaderUsageSig)
	h.Del(regionauth.HeaderUsageSig)
	if w.keys.VerifyAnswer(w.nonce, status, h.Get(metering.Header), sig) {
		return true
	}
	w.log.Error("route: a cell's answer is not signed with the region's key; replaced by a 502",
		"status", status, "signed", sig != "")
	return false
}

func (w *regionWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.discard {
		return len(p), nil
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

// clustered reports whether a region's cells share a JetStream cluster
// (one of them says how far it is in it): only such a region makes ids
// that name no cell, and any cell of another answers 404 for one.
func clustered(cells []members.Meta) bool {
	for _, c := range cells {
		if c.JS != "" {
			return true
		}
	}
	return false
}

// Provision finds the runtime.
func (c *Cells) Provision(ctx caddy.Context) error {
	r, err := app.Runtime(ctx)
	c.rt = r
	return err
}

// GetUpstreams returns the upstreams of r. An empty list makes
// reverse_proxy answer 503, which the error renderer explains.
//
// reverse_proxy asks again before each try, so a request to an AnyCell
// row's owner that failed to dial (the owner just died) goes to the
// owner's stand-in as soon as membership drops the owner.
func (c *Cells) GetUpstreams(r *http.Request) ([]*reverseproxy.Upstream, error) {
	if t, ok := r.Context().Value(targetKey{}).(target); ok && t.dial != "" {
		if t.owner != "" || t.placed {
			if s, ok := c.rt.StandIn(t.owner, t.id); ok {
				trace.SpanFromContext(r.Context()).AddEvent("owner gone: its stand-in " + s.Name)
				return []*reverseproxy.Upstream{{Dial: s.API}}, nil
			}
		}
		return []*reverseproxy.Upstream{{Dial: t.dial}}, nil
	}
	cells := c.rt.WorkCells() // not the cells an operator drained
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

// Package trace is the gate's Caddy module trawl_trace: the first handler
// of a request. It continues the caller's W3C trace context (traceparent,
// tracestate) and starts the gate's server span; the modules after it add
// child spans (auth, rate limit, meter, route) and trawl_route passes the
// context on to the cell. With no tracer provider configured (the default,
// see internal/telemetry) the spans cost next to nothing.
package trace

import (
	"net/http"
	"time"

	"github.com/trawlhq/trawl/gate"
	"github.com/trawlhq/trawl/internal/routes"

	"github.com/trawlhq/trawl/caddy-modules/app"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	oteltrace "go.opentelemetry.io/otel/trace"
)

func init() {
	caddy.RegisterModule(Trace{})
	httpcaddyfile.RegisterHandlerDirective("trawl_trace", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		if err := app.InChain(h, "trawl_trace"); err != nil {
			return nil, err
		}
		t := new(Trace)
		return t, t.UnmarshalCaddyfile(h.Dispenser)
	})
	httpcaddyfile.RegisterDirectiveOrder("trawl_trace", httpcaddyfile.Before, "reverse_proxy")
}

var tracer = otel.Tracer("github.com/trawlhq/trawl/caddy-modules/trace")

// Trace starts the gate's span of each request.
type Trace struct {
	routes *routes.Table
}

// CaddyModule returns the Caddy module information.
func (Trace) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.trawl_trace", New: func() caddy.Module { return new(Trace) }}
}

// Provision takes the route table, which names each request's route in
// the request metrics.
func (t *Trace) Provision(ctx caddy.Context) error {
	rt, err := app.Runtime(ctx)
	if err != nil {
		return err
	}
	t.routes = rt.Routes()
	return nil
}

// ServeHTTP wraps the rest of the chain in the gate's span and counts the
// request by route and status (gate.Metrics).
func (t *Trace) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	start := time.Now()
	ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := tracer.Start(ctx, "trawl.gate "+r.Method, oteltrace.WithSpanKind(oteltrace.SpanKindServer),
		oteltrace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
	defer span.End()
	rec := &statusWriter{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w}}
	err := next.ServeHTTP(rec, r.WithContext(ctx))
	status := rec.status
	if he, ok := err.(caddyhttp.HandlerError); ok {
		status = he.StatusCode
	}
	if status == 0 && err == nil {
		status = http.StatusOK
	}
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	route := "unmatched"
	if t.routes != nil {
		route = t.routes.Match(r).Pattern
	}
	gate.Metrics().Request(ctx, r.Method, route, status, time.Since(start))
	if status >= 500 || (err != nil && status == 0) {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	return err
}

type statusWriter struct {
	*caddyhttp.ResponseWriterWrapper
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

// UnmarshalCaddyfile reads "trawl_trace" (no options).
func (t *Trace) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return app.NoOptions(d)
}

// Interface guards.
var (
	_ caddyhttp.MiddlewareHandler = (*Trace)(nil)
	_ caddyfile.Unmarshaler       = (*Trace)(nil)
)

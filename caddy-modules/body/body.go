// Package body is the gate's Caddy module trawl_body: every request's body
// is held to its route's limit (routes.Route.BodyLimit), from the route
// table, before a byte of it is read. A body whose declared length is over
// the limit is refused at once (413 too_large). A declared length within it
// is bounded by net/http itself. A body of unknown length (chunked) is read
// within the limit into a Spool before the request goes on (memory up to
// 256 KiB, the rest in an unlinked temporary file): the handler, or the
// proxy to a cell, then has a body of known length, and an oversized one
// is a 413 rather than a half-read body (a handler's syntax error) or a
// broken upload to the cell. It is the model of Caddy's request_body, with
// the limit per route instead of per site.
package body

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/trawlhq/trawl/caddy-modules/app"
	"github.com/trawlhq/trawl/gate"
	"github.com/trawlhq/trawl/internal/routes"
)

func init() {
	caddy.RegisterModule(Body{})
}

// Body holds request bodies to their routes' limits.
type Body struct {
	routes *routes.Table
}

// CaddyModule returns the Caddy module information.
func (Body) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.trawl_body", New: func() caddy.Module { return new(Body) }}
}

// Provision reads the route table.
func (b *Body) Provision(ctx caddy.Context) error {
	rt, err := app.Runtime(ctx)
	if err != nil {
		return err
	}
	b.routes = rt.Routes()
	return nil
}

// ServeHTTP bounds r's body and passes r on.
func (b *Body) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if r.Body == nil || r.Body == http.NoBody {
		return next.ServeHTTP(w, r)
	}
	m := b.routes.Match(r)
	if !m.Allowed || m.Pattern == "/" {
		// No row takes this request (a method its path does not take,
		// or a path no row has): it is answered 405 or 404 further on,
		// which a body must not turn into a 413. Its body is not read.
		r.Body.Close()
		r.Body, r.ContentLength = http.NoBody, 0
		return next.ServeHTTP(w, r)
	}
	limit := m.BodyLimit
	switch {
	case r.ContentLength > limit:
		return refuse(TooLarge{limit})
	case r.ContentLength >= 0:
		// net/http reads no more than the declared length.
		return next.ServeHTTP(w, r)
	}
	s, err := Read(r, limit)
	r.Body.Close()
	if err != nil {
		if tl, ok := errors.AsType[TooLarge](err); ok {
			return refuse(tl)
		}
		return caddyhttp.Error(http.StatusBadRequest, gate.Refuse(http.StatusBadRequest, "bad_input", "could not read the request body"))
	}
	defer s.Close()
	r.Body, r.ContentLength = s, s.Size()
	if r.ContentLength == 0 {
		r.Body = http.NoBody
	}
	return next.ServeHTTP(w, r)
}

func refuse(tl TooLarge) error {
	return caddyhttp.Error(http.StatusRequestEntityTooLarge, gate.Refuse(http.StatusRequestEntityTooLarge, "too_large", tl.Error()))
}

var (
	_ caddy.Provisioner           = (*Body)(nil)
	_ caddyhttp.MiddlewareHandler = (*Body)(nil)
)

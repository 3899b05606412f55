// Package refusal is the gate's Caddy module trawl_errors, the one error
// renderer: used in handle_errors, it writes every error a handler
// returned as the JSON body of docs/spec/hosted-api.md §7 (Firecrawl's
// envelope on a route whose row asks for it, docs/firecrawl.md). A gate.Refusal is written
// as it is (body and headers); other errors (a cell that stopped answering,
// no live cell) get a body of their own. Every refusal is free, and
// carries x-svc-cost: 0.000 and, when the caller is known, x-svc-balance.
package refusal

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/trawlhq/trawl/caddy-modules/app"
	"github.com/trawlhq/trawl/gate"
	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/fcapi"
	"github.com/trawlhq/trawl/internal/routes"
)

func init() {
	caddy.RegisterModule(Errors{})
}

// Errors renders handler errors as JSON.
type Errors struct {
	rt *gate.Runtime
}

// CaddyModule returns the Caddy module information.
func (Errors) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.trawl_errors", New: func() caddy.Module { return new(Errors) }}
}

// Provision finds the runtime.
func (e *Errors) Provision(ctx caddy.Context) error {
	rt, err := app.Runtime(ctx)
	e.rt = rt
	return err
}

// ServeHTTP writes the request's error.
func (e *Errors) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	err, _ := r.Context().Value(caddyhttp.ErrorCtxKey).(error)
	ref := Of(err)
	h := w.Header()
	h.Set("X-Svc-Cost", "0.000")
	h.Set("X-Svc-Region", e.rt.Region())
	id := gate.IdentityFrom(r.Context())
	if id == nil {
		id, _ = caddyhttp.GetVar(r.Context(), gate.IdentityVar).(*gate.Identity)
	}
	if id != nil {
		if bal, err := e.rt.Balance(id.Account); err == nil {
			h.Set("X-Svc-Balance", bal.String())
		}
	}
	if ref.Status >= 500 {
		e.rt.Logger().Warn("gate error", "method", r.Method, "path", r.URL.Path, "status", ref.Status, "err", err)
	}
	if e.rt.Routes().Match(r).Envelope == routes.EnvelopeFirecrawl {
		ref = firecrawl(ref)
	}
	ref.Write(w)
	return nil
}

// firecrawl is ref in Firecrawl's envelope (a route whose row says so):
// the message as error, trawl's code as code, the body's other fields
// (a 402's balance and price) as details. Status and headers stay.
func firecrawl(ref *gate.Refusal) *gate.Refusal {
	raw, err := json.Marshal(ref.Body)
	var fields map[string]any
	if err != nil || json.Unmarshal(raw, &fields) != nil {
		return ref
	}
	env := fcapi.Envelope{}
	env.Code, _ = fields["error"].(string)
	env.Error, _ = fields["message"].(string)
	if env.Error == "" {
		env.Error = http.StatusText(ref.Status)
	}
	delete(fields, "error")
	delete(fields, "message")
	if len(fields) > 0 {
		env.Details = fields
	}
	return &gate.Refusal{Status: ref.Status, Body: env, Header: ref.Header}
}

// Of turns a handler error into the refusal to answer with.
func Of(err error) *gate.Refusal {
	var ref *gate.Refusal
	if errors.As(err, &ref) {
		return ref
	}
	status := http.StatusInternalServerError
	var he caddyhttp.HandlerError
	if errors.As(err, &he) && he.StatusCode != 0 {
		status = he.StatusCode
	}
	switch status {
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		return gate.Refuse(status, "cell_unavailable",
			"the cell working on this request stopped answering; nothing was charged, repeat the request")
	case http.StatusServiceUnavailable:
		return gate.Refuse(status, "no_cell",
			"no cell of this region is available right now; nothing was charged, repeat the request in a few seconds")
	case http.StatusNotFound:
		return gate.Refuse(status, billing.CodeNotFound, "no such route")
	case http.StatusRequestEntityTooLarge:
		return gate.Refuse(status, billing.CodeTooLarge, "the request body is too large")
	}
	if status < 500 {
		return gate.Refuse(status, "bad_request", http.StatusText(status))
	}
	return gate.Refuse(status, billing.CodeInternal, "something went wrong on our side; nothing was charged, try again")
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Errors)(nil)
	_ caddyhttp.MiddlewareHandler = (*Errors)(nil)
)

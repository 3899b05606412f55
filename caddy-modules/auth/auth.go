// Package auth is the gate's Caddy module trawl_auth: it finds the API key
// of a request (Authorization: Bearer, or x-api-key) in the local ledger
// replica and puts the key and its account in the request context. Public
// routes (the route table's, internal/routes, and the extra paths of the
// Caddyfile) pass without a key; any other request without a valid key is
// refused with 401.
package auth

import (
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/trawlhq/trawl/caddy-modules/app"
	"github.com/trawlhq/trawl/gate"
	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/routes"
)

func init() {
	caddy.RegisterModule(Auth{})
}

var tracer = otel.Tracer("github.com/trawlhq/trawl/caddy-modules/auth")

// Auth authenticates requests against the ledger replica.
type Auth struct {
	// Public are paths that need no key besides the route table's public
	// routes: exact paths, or prefixes written with a trailing "/*" (trawl
	// dev's /demo/*).
	Public []string `json:"public,omitempty"`

	rt       *gate.Runtime
	routes   *routes.Table
	exact    map[string]bool
	prefixes []string
}

// CaddyModule returns the Caddy module information.
func (Auth) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.trawl_auth", New: func() caddy.Module { return new(Auth) }}
}

// Provision checks the public paths, finds the runtime, reads the route
// table and indexes the public paths.
func (a *Auth) Provision(ctx caddy.Context) error {
	if err := a.Validate(); err != nil {
		return err
	}
	rt, err := app.Runtime(ctx)
	if err != nil {
		return err
	}
	a.rt, a.routes = rt, rt.Routes()
	a.exact = map[string]bool{}
	for _, p := range a.Public {
		if pre, ok := strings.CutSuffix(p, "*"); ok {
			a.prefixes = append(a.prefixes, pre)
		} else {
			a.exact[p] = true
		}
	}
	return nil
}

// Validate checks the public paths.
func (a *Auth) Validate() error {
	for _, p := range a.Public {
		if !strings.HasPrefix(p, "/") || strings.Contains(strings.TrimSuffix(p, "*"), "*") {
			return fmt.Errorf("trawl_auth: public path %q: want /exact or /prefix/*", p)
		}
	}
	return nil
}

func (a *Auth) public(r *http.Request) bool {
	if a.routes.Match(r).Public {
		return true
	}
	path := r.URL.Path
	if a.exact[path] {
		return true
	}
	for _, p := range a.prefixes {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// ServeHTTP authenticates r and passes it on with its identity.
func (a *Auth) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if p := r.URL.Path; p != "/" {
		// One name per route: a path with //, . or .. segments would be
		// matched as the path it cleans to by some handlers and not by
		// others, so none is served.
		if c := path.Clean(p); c != p && c+"/" != p {
			return caddyhttp.Error(http.StatusBadRequest, gate.Refuse(http.StatusBadRequest, billing.CodeBadInput,
				"the path must be in canonical form: no empty, . or .. segments"))
		}
	}
	if a.public(r) {
		return next.ServeHTTP(w, r)
	}
	_, span := tracer.Start(r.Context(), "trawl.auth")
	if acct, from, ok, err := a.rt.Forwarded(r); ok {
		// Another region's gate authenticated the caller and sends an
		// object of this region: its signature stands for the key.
		span.End()
		if err != nil {
			a.rt.Logger().Warn("auth: refused a forwarded request", "err", err)
			return caddyhttp.Error(http.StatusUnauthorized, gate.Refuse(http.StatusUnauthorized, billing.CodeUnauthorized,
				"this request claims to come from another region's gate and does not verify"))
		}
		if role := a.routes.Match(r).Role; role != "" {
			// A role is a key's; a forwarded call carries an account.
			return forbidden(role)
		}
		id := &gate.Identity{Account: acct, Forwarded: from}
		caddyhttp.SetVar(r.Context(), gate.IdentityVar, id)
		return next.ServeHTTP(w, r.WithContext(gate.WithIdentity(r.Context(), id)))
	}
	k, acct, err := a.rt.Authenticate(r)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		span.End()
		if errors.Is(err, billing.ErrInvalidKey) && !a.rt.Ready() {
			// The key may not have reached this replica yet. A key it has
			// (revoked, expired) is answered as it stands: a revocation
			// is never undone.
			ref := gate.Refuse(http.StatusServiceUnavailable, "starting",
				"this gate is starting and has not read every account yet; repeat the request in a few seconds")
			ref.Header = http.Header{"Retry-After": {"2"}}
			return caddyhttp.Error(http.StatusServiceUnavailable, ref)
		}
		if billing.IsAuthError(err) {
			ref := gate.Refuse(http.StatusUnauthorized, billing.CodeUnauthorized, billing.AuthMessage(err))
			ref.Header = http.Header{"Www-Authenticate": {`Bearer realm="trawl"`}}
			return caddyhttp.Error(http.StatusUnauthorized, ref)
		}
		a.rt.Logger().Error("auth: replica read failed", "err", err)
		return caddyhttp.Error(http.StatusInternalServerError,
			gate.Refuse(http.StatusInternalServerError, billing.CodeInternal, "something went wrong on our side; try again"))
	}
	span.SetAttributes(attribute.String("trawl.account", acct.ID), attribute.String("trawl.plan", acct.Plan))
	span.End()
	if role := a.routes.Match(r).Role; role != "" && k.Role != role {
		return forbidden(role)
	}
	id := &gate.Identity{Key: k, Account: acct}
	caddyhttp.SetVar(r.Context(), gate.IdentityVar, id)
	r = r.WithContext(gate.WithIdentity(r.Context(), id))
	return next.ServeHTTP(w, r)
}

// forbidden refuses a key without the role its route needs (the route
// table's Role), before the body is read.
func forbidden(role string) error {
	return caddyhttp.Error(http.StatusForbidden, gate.Refuse(http.StatusForbidden, billing.CodeForbidden,
		"this route needs a key with the "+role+" role; this key is not one"))
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Auth)(nil)
	_ caddy.Validator             = (*Auth)(nil)
	_ caddyhttp.MiddlewareHandler = (*Auth)(nil)
)

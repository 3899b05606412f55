package gate

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/ledger"
)

// named answers its name, the row it was routed by and that row's limit.
func named(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s %d", name, routes.From(r.Context()).Pattern, routes.Limit(r))
	})
}

// The gate's mux is the table's Gate rows, each with its service's handler
// for the row's pattern: a row without a handler, a handler without a row,
// and a handler of one service on another's row are refused.
func TestGateMux(t *testing.T) {
	rows := []routes.Route{
		{Pattern: "GET /health", Server: routes.Gate, Service: "health"},
		{Pattern: "GET /v1/x", Server: routes.Gate, Service: "billing"},
		{Pattern: "POST /v1/x", Server: routes.Gate, Service: "billing", BodyLimit: 16},
		{Pattern: "/v1/", Server: routes.Gate, Service: "billing"},
		{Pattern: "GET /operator/v1/y", Server: routes.Gate, Service: "operator", Role: routes.RoleOperator},
		{Pattern: "POST /scrape", Server: routes.Cell},
	}
	services := func() map[string]routes.Handlers {
		return map[string]routes.Handlers{
			"health":   {"GET /health": named("health")},
			"billing":  {"GET /v1/x": named("billing"), "POST /v1/x": named("billing"), "/v1/": named("billing")},
			"operator": {"GET /operator/v1/y": named("operator")},
		}
	}
	mux, err := gateMux(rows, services())
	if err != nil {
		t.Fatal(err)
	}
	operator := &Identity{Key: &ledger.Key{Role: ledger.RoleOperator}, Account: &ledger.Account{ID: "op"}}
	customer := &Identity{Key: &ledger.Key{Role: ledger.RoleUser}, Account: &ledger.Account{ID: "acct1"}}
	for _, tt := range []struct {
		method, path string
		id           *Identity
		status       int
		want         string // the body's start
	}{
		{"GET", "/health", nil, 200, "health GET /health 0"},
		{"HEAD", "/health", nil, 200, "health GET /health 0"},
		{"POST", "/health", nil, 405, `{"error":"method_not_allowed"`},
		{"POST", "/v1/x", nil, 200, "billing POST /v1/x 16"},
		{"DELETE", "/v1/x", nil, 405, `{"error":"method_not_allowed"`},
		{"GET", "/v1/nope", nil, 200, "billing /v1/ 0"},
		{"POST", "/scrape", nil, 404, `{"error":"not_found","message":"no such route"}`}, // a cell's route never reaches the gate's handlers
		{"GET", "/operator/v1/y", operator, 200, "operator GET /operator/v1/y 0"},
		{"GET", "/operator/v1/y", customer, 403, `{"error":"forbidden"`},
		{"GET", "/operator/v1/y", nil, 401, `{"error":"unauthorized"`},
		{"GET", "/operator/v1/y", &Identity{Account: &ledger.Account{ID: "acct1"}, Forwarded: "sin"}, 403, `{"error":"forbidden"`},
	} {
		r := httptest.NewRequest(tt.method, tt.path, nil)
		if tt.id != nil {
			r = r.WithContext(WithIdentity(r.Context(), tt.id))
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		if w.Code != tt.status || !strings.HasPrefix(w.Body.String(), tt.want) {
			t.Errorf("%s %s: %d %q, want %d %q", tt.method, tt.path, w.Code, w.Body, tt.status, tt.want)
		}
		if w.Code == 405 && w.Header().Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", tt.method, tt.path)
		}
	}

	for _, tt := range []struct {
		name   string
		change func(map[string]routes.Handlers)
		err    string
	}{
		{"a row without a handler", func(s map[string]routes.Handlers) { delete(s["billing"], "POST /v1/x") }, `"POST /v1/x" has no handler`},
		{"a service without its handlers", func(s map[string]routes.Handlers) { delete(s, "health") }, `"GET /health" has no handler`},
		{"a handler without a row", func(s map[string]routes.Handlers) { s["mcp"] = routes.Handlers{"POST /mcp": named("mcp")} }, `handler "POST /mcp" serves no row`},
		{"a pattern not as the table writes it", func(s map[string]routes.Handlers) {
			s["billing"]["/v1/x"] = s["billing"]["GET /v1/x"]
			delete(s["billing"], "GET /v1/x")
		}, `"GET /v1/x" has no handler`},
		{"another service's row", func(s map[string]routes.Handlers) { s["health"]["GET /v1/x"] = named("health") }, `service "health" has a handler for "GET /v1/x", a row of service "billing"`},
	} {
		s := services()
		tt.change(s)
		if _, err := gateMux(rows, s); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.err)
		}
	}
}

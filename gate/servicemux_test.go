package gate

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/internal/routes"
)

func named(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(name)) })
}

// The gate's mux is the table's Gate rows: a row without a handler, or a
// handler without a row, is refused.
func TestServiceMux(t *testing.T) {
	tab, err := routes.New([]routes.Route{
		{Pattern: "GET /health", Server: routes.Gate, Service: "health"},
		{Pattern: "GET /v1/x", Server: routes.Gate, Service: "billing"},
		{Pattern: "POST /v1/x", Server: routes.Gate, Service: "billing"},
		{Pattern: "POST /scrape", Server: routes.Cell},
	})
	if err != nil {
		t.Fatal(err)
	}
	mux, err := serviceMux(tab, map[string]http.Handler{"health": named("health"), "billing": named("billing")})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ method, path, want string }{
		{"GET", "/health", "health"},
		{"POST", "/health", "health"},  // health answers its own 405
		{"DELETE", "/v1/x", "billing"}, // billing answers its own 405
		{"POST", "/scrape", "billing"}, // a cell's route never reaches the gate's handler
	} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(tt.method, tt.path, nil))
		if w.Body.String() != tt.want {
			t.Errorf("%s %s: %q, want %q", tt.method, tt.path, w.Body.String(), tt.want)
		}
	}
	if _, err := serviceMux(tab, map[string]http.Handler{"health": named("health")}); err == nil || !strings.Contains(err.Error(), `no handler for service "billing"`) {
		t.Errorf("a row without a handler: %v", err)
	}
	if _, err := serviceMux(tab, map[string]http.Handler{"health": named("health"), "billing": named("billing"), "mcp": named("mcp")}); err == nil || !strings.Contains(err.Error(), `"mcp" serves no route`) {
		t.Errorf("a handler without a row: %v", err)
	}
}

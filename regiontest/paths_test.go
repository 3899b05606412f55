package regiontest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/ledger"
)

// Every answer of the gate is JSON a caller can act on, for paths and
// methods it does not serve too.
func TestOddPathsAndMethodsAnswerJSON(t *testing.T) {
	g := Start(t, Options{Cells: 1})
	key := g.Account(t, ledger.PlanFree, 100)
	for _, c := range []struct {
		method, path, key string
		status            int
		code              string
	}{
		{"GET", "/v1/../health", "", 400, "bad_input"},
		{"POST", "/scrape/../v1/keys", key, 400, "bad_input"},
		{"GET", "//health", "", 400, "bad_input"},
		{"POST", "/health", "", 405, "method_not_allowed"},
		{"GET", "/internal/ledger/status", "", 401, "unauthorized"},
	} {
		r := call(t, c.method, g.URL+c.path, c.key, "")
		var body struct{ Error, Message string }
		if err := json.Unmarshal([]byte(r.body), &body); err != nil || r.status != c.status || body.Error != c.code ||
			!strings.HasPrefix(r.header.Get("Content-Type"), "application/json") || body.Message == "" {
			t.Errorf("%s %s: %d %q %s, want %d %s as JSON", c.method, c.path, r.status, r.header.Get("Content-Type"), r.body, c.status, c.code)
		}
		if r.status == http.StatusMethodNotAllowed && r.header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", c.method, c.path)
		}
	}
}

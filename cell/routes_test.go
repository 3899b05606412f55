package cell

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/internal/jobid"
	"github.com/trawlhq/trawl/internal/routes"
)

// Every route the cell serves is in the route table, and every route the
// table gives a cell has a handler that answers it (not the cell's 404).
func TestRouteTable(t *testing.T) {
	tc := newTestCell(t, nil)
	hs := tc.handlers()
	rows := Rows()
	want := map[string]bool{}
	for _, r := range rows {
		want[r.Pattern] = true
		if _, ok := hs[r.Pattern]; !ok {
			t.Errorf("route %q has no cell handler", r.Pattern)
		}
	}
	for pattern := range hs {
		if !want[pattern] {
			t.Errorf("handler %q is not in the route table", pattern)
		}
	}
	if len(rows) == 0 {
		t.Fatal("the table gives the cell no route")
	}
	id := jobid.New("eu", "c1")
	for _, r := range rows {
		method := r.Method()
		path := strings.ReplaceAll(r.Path(), "{id}", id)
		req, err := http.NewRequest(method, tc.srv.URL+path, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Error, Message string }
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound && strings.HasPrefix(body.Message, "no such route") ||
			resp.StatusCode == http.StatusMethodNotAllowed {
			t.Errorf("%s: %d %s %s: the cell has no handler for it", r.Pattern, resp.StatusCode, body.Error, body.Message)
		}
	}
	// And a path outside the table is the cell's 404.
	resp, b := tc.get(t, "/no/such/route")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), "no such route") {
		t.Errorf("/no/such/route: %d %s", resp.StatusCode, b)
	}
}

// The cell's body limits are the table's.
func TestBodyLimitsAreTheTables(t *testing.T) {
	limits := map[string]int64{"POST /scrape": maxScrapeBody, "POST /scrape/batch": maxScrapeBody, "POST /scrape/jobs": maxJobBody}
	for _, r := range routes.Default().Rows() {
		if want, ok := limits[r.Pattern]; ok && r.BodyLimit != want {
			t.Errorf("%s: table %d, cell %d", r.Pattern, r.BodyLimit, want)
		}
	}
	tc := newTestCell(t, nil)
	resp, b := tc.post(t, "/scrape", `{"url":"`+strings.Repeat("a", int(maxScrapeBody))+`"}`)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "too_large") {
		t.Errorf("a body over the limit: %d %s", resp.StatusCode, b)
	}
}

package regiontest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/trawlhq/trawl/cell"
	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/gate"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/ledger"
)

// stdNotFound is what a ServeMux answers for a path it has no pattern for.
const stdNotFound = "404 page not found\n"

// Every Gate row of the route table is answered by the gate's handler: not
// by a mux's 404, and not by the catch-all "no such route" (except the
// prefixes, whose answer is that 404 from their own service). The cell's
// side is cell.TestRouteTable.
func TestGateRoutesHaveHandlers(t *testing.T) {
	g := Start(t, Options{})
	h, err := g.Runtime.Handler()
	if err != nil {
		t.Fatal(err)
	}
	// A path below each prefix row that no other row names, and whether
	// its service answers it with its 404.
	type sample struct {
		path     string
		notFound bool
	}
	below := map[string]sample{"/internal/": {ledger.StatusPath, false}, "/signup/": {"/signup/nope", true},
		"/v1/billing/checkout/": {"/v1/billing/checkout/cs_nope", true}, "/v1/": {"/v1/nope", true},
		"/monitor-store/": {"/monitor-store/claim", false}, "/recipe-store/": {"/recipe-store/list", false},
		"/operator/": {"/operator/v1/nope", false}} // the operator API answers 401 before its 404 without an operator key
	n := 0
	for _, row := range g.Runtime.Routes().Rows() {
		if row.Server != routes.Gate {
			continue
		}
		n++
		method := row.Method()
		if method == "" {
			method = http.MethodGet
		}
		path, notFound := row.Path(), false
		if row.Prefix() {
			s, ok := below[path]
			if !ok {
				t.Errorf("%s: add a path below this prefix to the test", row.Pattern)
				continue
			}
			path, notFound = s.path, s.notFound
		}
		path = strings.NewReplacer("{id}", "key_nope", "{session}", "cs_nope").Replace(path)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader("{}")))
		body := w.Body.String()
		if w.Code == http.StatusNotFound && body == stdNotFound {
			t.Errorf("%s: the mux's own 404", row.Pattern)
		}
		if w.Code == http.StatusMethodNotAllowed {
			t.Errorf("%s: %d %s", row.Pattern, w.Code, body)
		}
		catchAll := strings.Contains(body, `"message":"no such route"`) || strings.Contains(body, "There is no page here.")
		if catchAll != notFound {
			t.Errorf("%s (%s %s): %d %s", row.Pattern, method, path, w.Code, body)
		}
	}
	if n == 0 {
		t.Fatal("no gate rows")
	}
}

// The gate's handlers, served as trawl_api serves them (without the
// modules before it): one 405 with Allow for a method a row's path does not
// take, the 404 of the service whose prefix holds a path, every body read
// within its row's limit (trawl_body is not in front here), and a row's
// role kept.
func TestGateHandlersAnswerFromTheirRows(t *testing.T) {
	g := Start(t, Options{})
	h, err := g.Runtime.Handler()
	if err != nil {
		t.Fatal(err)
	}
	customer := &gate.Identity{Key: &ledger.Key{ID: "key_c", Account: "acct1", Role: ledger.RoleUser}, Account: &ledger.Account{ID: "acct1", Plan: ledger.PlanFree}}
	operator := &gate.Identity{Key: &ledger.Key{ID: "key_o", Account: gate.OperatorAccount, Role: ledger.RoleOperator}, Account: &ledger.Account{ID: gate.OperatorAccount}}
	over := func(pattern string) string {
		return `{"title":"` + strings.Repeat("x", int(routes.Default().Row(pattern).BodyLimit)) + `"}`
	}
	for _, c := range []struct {
		method, path string
		id           *gate.Identity
		body         string
		status       int
		allow        string
		want         string
	}{
		{"POST", "/health", nil, "", 405, "GET", `"error":"method_not_allowed"`},
		{"POST", "/v1/billing/usage", customer, "", 405, "GET", `"error":"method_not_allowed"`},
		{"GET", "/v1/issues", customer, "", 405, "POST", `"error":"method_not_allowed"`},
		{"DELETE", "/signup", nil, "", 405, "GET, POST", `"error":"method_not_allowed"`},
		{"DELETE", "/v1/billing/checkout/cs_x/complete", nil, "", 405, "GET, POST", `"error":"method_not_allowed"`},
		{"GET", "/v1/billing/usage/x", customer, "", 404, "", `{"error":"not_found","message":"no such route"}`},
		{"GET", "/signup/nope", nil, "", 404, "", "There is no page here."},
		{"GET", "/operator/v1/nope", operator, "", 404, "", `"message":"no such operator route: GET /operator/v1/nope"`},
		{"GET", "/operator/v1/cells", customer, "", 403, "", `"error":"forbidden"`},
		{"GET", "/operator/v1/issues", customer, "", 403, "", `"error":"forbidden"`},
		{"GET", "/v1/billing/balance", nil, "", 401, "", `"error":"unauthorized"`},
		{"POST", "/v1/issues", customer, over("POST /v1/issues"), 413, "", `"error":"too_large"`},
		{"POST", "/v1/keys", customer, over("POST /v1/keys"), 413, "", `"error":"too_large"`},
		{"POST", "/v1/billing/settings", customer, over("POST /v1/billing/settings"), 413, "", `"error":"too_large"`},
		{"POST", "/operator/v1/accounts", operator, over("POST /operator/v1/accounts"), 413, "", `"error":"too_large"`},
		{"PUT", "/operator/v1/prices", operator, over("PUT /operator/v1/prices"), 413, "", `"error":"too_large"`},
	} {
		r := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		r.Header.Set("Content-Type", "application/json")
		if c.id != nil {
			r = r.WithContext(gate.WithIdentity(r.Context(), c.id))
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.status || w.Header().Get("Allow") != c.allow || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("%s %s: %d Allow %q %.300s, want %d Allow %q %s", c.method, c.path, w.Code, w.Header().Get("Allow"), w.Body, c.status, c.allow, c.want)
		}
	}
}

// browserPage stands in for the browser engine: a page that needed the
// browser, so it is priced at the browser level.
type browserPage struct{ calls atomic.Int64 }

func (b *browserPage) Fetch(ctx context.Context, req *fetch.Request) (*fetch.Response, error) {
	b.calls.Add(1)
	body := fmt.Sprintf(`<!doctype html><html><head><title>Rendered</title></head><body><main><h1>Rendered %s</h1>
<p>A page only a browser could show, with a paragraph long enough to be its main content for the extractor.</p></main></body></html>`, req.URL)
	return &fetch.Response{URL: req.URL, Status: 200, Header: http.Header{}, Body: []byte(body),
		ContentType: "text/html", Charset: "utf-8", Engine: "browser"}, nil
}

// A call whose minimum price the hold covers but whose answer costs more
// than the balance: the charge is refused as the cell's answer starts, and
// the client gets the documented 402 no_credit instead of the 200, charged
// nothing (docs/gate.md, the meter).
func TestChargeRefusedAsTheAnswerStarts(t *testing.T) {
	fb := &browserPage{}
	g := Start(t, Options{Cell: func(c *cell.Config) { c.BrowserEngine = fb }})
	key := g.Account(t, ledger.PlanFree, 2) // a light scrape costs 1, a browser page 5

	pages := site(t)
	r := call(t, "POST", g.URL+"/scrape", key, `{"url":"`+pages.URL+`/app","wait_for":"main"}`)
	want := `{"error":"no_credit","balance":"2.000","message":"Your balance (2.000) does not cover this call. Top up to continue: POST /v1/billing/topup?amount=5 charges your saved card, or add checkout=1 to pay on a checkout page.","actions":{"topup":"POST /v1/billing/topup?amount=5","checkout":"POST /v1/billing/topup?amount=5&checkout=1","prices":"GET /v1/prices","mcp":"topup tool"}}` + "\n"
	if r.status != http.StatusPaymentRequired || r.body != want {
		t.Fatalf("got %d\n%s\nwant\n%s", r.status, r.body, want)
	}
	if fb.calls.Load() != 1 {
		t.Fatalf("the browser rendered %d pages, want 1: the refusal must come from the answer, not the hold check", fb.calls.Load())
	}
	for h, want := range map[string]string{"X-Svc-Cost": "0.000", "X-Svc-Balance": "2.000", "X-Svc-Receipt": "", "Trawl-Usage": "", "Content-Type": "application/json"} {
		if got := r.header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	if b := call(t, "GET", g.URL+"/v1/billing/balance", key, ""); b.status != 200 || !strings.Contains(b.body, `"2.000"`) {
		t.Errorf("balance after the refusal: %d %s", b.status, b.body)
	}
	if u := call(t, "GET", g.URL+"/v1/billing/usage", key, ""); u.status != 200 || strings.Contains(u.body, `"receipt"`) {
		t.Errorf("usage after the refusal: %d %s", u.status, u.body)
	}
	// A light page it can pay for goes through.
	if r := call(t, "POST", g.URL+"/scrape", key, `{"url":"`+pages.URL+`/light"}`); r.status != 200 || r.header.Get("X-Svc-Cost") != "1.000" {
		t.Fatalf("light page: %d %q %s", r.status, r.header.Get("X-Svc-Cost"), r.body)
	}
}

package regiontest

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/ledger"
)

// Every row's body limit is the gate's (trawl_body), for every route that
// takes a body, the gate's own, the cells' and the owners': a body one
// byte over it is refused with 413 too_large before it is read, whether
// its length is declared or it comes chunked, and nothing behind the gate
// sees it (a refused monitor is not created).
func TestEveryRouteBodyLimitAtTheGate(t *testing.T) {
	g := operatorGate(t, 1)
	key := g.Account(t, ledger.PlanSupporter, 100)
	fill := strings.NewReplacer("{id}", "j_nope", "{name}", "nope", "{account}", "acct1", "{plan}", "free",
		"{session}", "cs_nope", "{version}", "1")
	n := 0
	for _, row := range routes.Default().Rows() {
		method := row.Method()
		if method != http.MethodPost && method != http.MethodPut && method != http.MethodPatch {
			continue
		}
		if row.BodyLimit > 8<<20 {
			continue // the large ones are the same code; 24-64 MiB bodies only slow the test
		}
		k := key
		switch {
		case row.Public:
			k = ""
		case strings.HasPrefix(row.Path(), "/operator/"):
			k = testOperatorKey
		}
		url := g.URL + fill.Replace(row.Path())
		for _, chunked := range []bool{false, true} {
			body := bytes.Repeat([]byte("x"), int(row.BodyLimit)+1)
			req, _ := http.NewRequest(method, url, bytes.NewReader(body))
			if chunked {
				req.ContentLength = -1
			}
			if k != "" {
				req.Header.Set("Authorization", "Bearer "+k)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s (chunked %v): %v", row.Pattern, chunked, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := `"error":"too_large"`
			if row.Envelope == routes.EnvelopeFirecrawl {
				want = `"success":false,"error":"request body is larger than `
			}
			if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), want) ||
				row.Envelope == routes.EnvelopeFirecrawl && !strings.Contains(string(b), `"code":"too_large"`) {
				t.Errorf("%s (chunked %v), %d bytes over a limit of %d: %d %s", row.Pattern, chunked, len(body), row.BodyLimit, resp.StatusCode, b)
			}
			n++
		}
	}
	if n < 20 {
		t.Fatalf("only %d requests tried", n)
	}
	if r := call(t, "GET", g.URL+"/monitors", key, ""); r.status != 200 || strings.Contains(r.body, `"id"`) {
		t.Fatalf("monitors after refused bodies: %d %s", r.status, r.body)
	}
}

// A body sent where no row takes it (a method its path does not take, a
// path no row has) is not read: the request is answered 405 or 404, not
// 413.
func TestBodyWhereNoRowTakesIt(t *testing.T) {
	g := operatorGate(t, 1)
	key := g.Account(t, ledger.PlanSupporter, 100)
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"POST", "/v2/crawl/params-preview", http.StatusMethodNotAllowed},
		{"PUT", "/v2/crawl/j_nope", http.StatusMethodNotAllowed},
		{"POST", "/v2/parse", http.StatusNotFound},
	} {
		r := call(t, c.method, g.URL+c.path, key, `{"url": "https://example.com/", "prompt": "`+strings.Repeat("x", 70000)+`"}`)
		if r.status != c.status {
			t.Errorf("%s %s with a body: %d %s, want %d", c.method, c.path, r.status, r.body, c.status)
		}
		if c.status == http.StatusNotFound && !strings.Contains(r.body, `"success":false`) {
			t.Errorf("%s %s: %s, not in Firecrawl's envelope", c.method, c.path, r.body)
		}
	}
}

package issues

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/internal/store"
)

func handler(t *testing.T) (http.Handler, *store.Store) {
	t.Helper()
	st, err := store.Open("db", &store.Options{FS: vfs.NewMem(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	h, err := routes.Mux(routes.Default().Service("issues"), Handlers(Config{Store: st, Region: "eu",
		Now:     func() time.Time { now = now.Add(time.Second); return now },
		Account: func(r *http.Request) string { return r.Header.Get("Test-Account") }}), routes.MuxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return h, st
}

func do(h http.Handler, method, path, account, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if account != "" {
		r.Header.Set("Test-Account", account)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// Bad reports are refused with a JSON error and store nothing.
func TestBadReports(t *testing.T) {
	h, st := handler(t)
	for _, tt := range []struct {
		name, account, body string
		status              int
		code                string
	}{
		{"no account", "", `{"title":"a","what_happened":"b"}`, 401, "unauthorized"},
		{"not JSON", "acct", `{"title":`, 400, "bad_input"},
		{"wrong type", "acct", `{"title":1,"what_happened":"b"}`, 400, "bad_input"},
		{"unknown field", "acct", `{"title":"a","what_happened":"b","x":1}`, 400, "bad_input"},
		{"no title", "acct", `{"what_happened":"b"}`, 400, "bad_input"},
		{"blank text", "acct", `{"title":"a","what_happened":"   "}`, 400, "bad_input"},
		{"long title", "acct", `{"title":"` + strings.Repeat("x", MaxTitle+1) + `","what_happened":"b"}`, 400, "bad_input"},
		{"long text", "acct", `{"title":"a","what_happened":"` + strings.Repeat("x", MaxText+1) + `"}`, 400, "bad_input"},
		{"oversized", "acct", `{"title":"a","what_happened":"` + strings.Repeat("x", 20<<10) + `"}`, 413, "too_large"},
		{"two objects", "acct", `{"title":"a","what_happened":"b"}{}`, 400, "bad_input"},
	} {
		w := do(h, "POST", "/v1/issues", tt.account, tt.body)
		var e struct{ Error string }
		json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != tt.status || e.Error != tt.code {
			t.Errorf("%s: %d %s, want %d %s", tt.name, w.Code, w.Body, tt.status, tt.code)
		}
	}
	if w := do(h, "GET", "/v1/issues", "acct", ""); w.Code != 405 {
		t.Errorf("GET /v1/issues: %d", w.Code)
	}
	n := 0
	st.Scan([]byte(store.PrefixIssues), nil, func(_, _ []byte) (bool, error) { n++; return true, nil })
	if n != 0 {
		t.Errorf("%d reports stored", n)
	}
}

// Reports are listed newest first. The listing's row needs an operator key:
// trawl_auth and the gate check it from the row (regiontest TestMCPTools).
func TestListing(t *testing.T) {
	h, _ := handler(t)
	var refs []string
	for _, title := range []string{"first", "second", "third"} {
		w := do(h, "POST", "/v1/issues", "acct_"+title, `{"title":"`+title+`","what_happened":"it broke"}`)
		var r struct{ Reference string }
		if json.Unmarshal(w.Body.Bytes(), &r); w.Code != 201 || !strings.HasPrefix(r.Reference, "iss_eu_") {
			t.Fatalf("report: %d %s", w.Code, w.Body)
		}
		refs = append(refs, r.Reference)
	}
	w := do(h, "GET", "/operator/v1/issues?limit=2", "", "")
	var list struct{ Issues []Report }
	if json.Unmarshal(w.Body.Bytes(), &list); w.Code != 200 || len(list.Issues) != 2 || list.Issues[0].Reference != refs[2] || list.Issues[1].Reference != refs[1] || list.Issues[0].Account != "acct_third" {
		t.Fatalf("listing: %d %s", w.Code, w.Body)
	}
	for _, q := range []string{"limit=0", "limit=501", "limit=x"} {
		if w := do(h, "GET", "/operator/v1/issues?"+q, "", ""); w.Code != 400 {
			t.Errorf("%s: %d", q, w.Code)
		}
	}
}

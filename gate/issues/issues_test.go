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
	// The gate's operator-key check stands in as a fixed key here; the
	// real one is tested through a gate (regiontest TestMCPTools).
	opOnly := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer op-key" {
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	h := Handler(Config{Store: st, Region: "eu", OperatorOnly: opOnly,
		Now:     func() time.Time { now = now.Add(time.Second); return now },
		Account: func(r *http.Request) string { return r.Header.Get("Test-Account") }})
	return h, st
}

func do(h http.Handler, method, path, account, auth, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if account != "" {
		r.Header.Set("Test-Account", account)
	}
	if auth != "" {
		r.Header.Set("Authorization", "Bearer "+auth)
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
		w := do(h, "POST", "/v1/issues", tt.account, "", tt.body)
		var e struct{ Error string }
		json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != tt.status || e.Error != tt.code {
			t.Errorf("%s: %d %s, want %d %s", tt.name, w.Code, w.Body, tt.status, tt.code)
		}
	}
	if w := do(h, "GET", "/v1/issues", "acct", "", ""); w.Code != 405 {
		t.Errorf("GET /v1/issues: %d", w.Code)
	}
	n := 0
	st.Scan([]byte(store.PrefixIssues), nil, func(_, _ []byte) (bool, error) { n++; return true, nil })
	if n != 0 {
		t.Errorf("%d reports stored", n)
	}
}

// Reports are listed newest first, only through the operator check.
func TestListing(t *testing.T) {
	h, _ := handler(t)
	var refs []string
	for _, title := range []string{"first", "second", "third"} {
		w := do(h, "POST", "/v1/issues", "acct_"+title, "", `{"title":"`+title+`","what_happened":"it broke"}`)
		var r struct{ Reference string }
		if json.Unmarshal(w.Body.Bytes(), &r); w.Code != 201 || !strings.HasPrefix(r.Reference, "iss_eu_") {
			t.Fatalf("report: %d %s", w.Code, w.Body)
		}
		refs = append(refs, r.Reference)
	}
	for _, auth := range []string{"", "trawl_customer_key", "wrong-key"} {
		if w := do(h, "GET", "/operator/v1/issues", "acct_first", auth, ""); w.Code != 401 {
			t.Errorf("listing with %q: %d", auth, w.Code)
		}
	}
	w := do(h, "GET", "/operator/v1/issues?limit=2", "", "op-key", "")
	var list struct{ Issues []Report }
	if json.Unmarshal(w.Body.Bytes(), &list); w.Code != 200 || len(list.Issues) != 2 || list.Issues[0].Reference != refs[2] || list.Issues[1].Reference != refs[1] || list.Issues[0].Account != "acct_third" {
		t.Fatalf("listing: %d %s", w.Code, w.Body)
	}
	for _, q := range []string{"limit=0", "limit=501", "limit=x"} {
		if w := do(h, "GET", "/operator/v1/issues?"+q, "", "op-key", ""); w.Code != 400 {
			t.Errorf("%s: %d", q, w.Code)
		}
	}
}

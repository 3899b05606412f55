package cell

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/regionauth"
)

// testKeys are the region keys of the tests' cells.
var testKeys, _ = regionauth.ParseKeys("746573742072656769f06e206b6579732c20333220627974657320616c6c2121")

// testAccount is the account the tests' gate signs requests for; a
// request may name another in testAccountHeader.
const (
	testAccount       = "acct_test"
	testAccountHeader = "X-Test-Account"
)

// asGate is what the region's gate does before a request reaches a cell:
// it signs it for an account (testAccount, or the one a test names) with
// private networks allowed, and checks the cell's signature on the answer.
// testNonceHeader hands a test the nonce its request was signed with.
const testNonceHeader = "X-Test-Nonce"

func asGate(t testing.TB, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		acct := testAccount
		if a, ok := r.Header[testAccountHeader]; ok {
			acct = a[0]
			r.Header.Del(testAccountHeader)
		}
		nonce := testKeys.Sign(r, regionauth.Claims{Account: acct, Private: true}, time.Now())
		h.ServeHTTP(&answerCheck{ResponseWriter: w, t: t, nonce: nonce}, r)
	})
}

type answerCheck struct {
	http.ResponseWriter
	t     testing.TB
	nonce string
	wrote bool
}

func (w *answerCheck) WriteHeader(status int) {
	if status >= 200 && !w.wrote {
		w.wrote = true
		h := w.Header()
		if !testKeys.VerifyAnswer(w.nonce, status, h.Get(metering.Header), h.Get(regionauth.HeaderUsageSig)) {
			w.t.Errorf("the cell's %d answer is not signed over its request", status)
		}
		h.Set(testNonceHeader, w.nonce) // for tests that check per-line signatures
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *answerCheck) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *answerCheck) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// A cell answers only its region's gate: unsigned, forged, replayed or
// otherwise-keyed requests are refused before any work; its own health
// stays open.
func TestCellAnswersOnlyItsGate(t *testing.T) {
	tc := newTestCell(t, nil)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the cell fetched %s for an unsigned request", r.URL)
	}))
	defer site.Close()
	h := tc.Cell.Handler()
	body := `{"url":"` + site.URL + `/"}`
	send := func(sign func(r *http.Request)) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/scrape", strings.NewReader(body))
		if sign != nil {
			sign(r)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	other, _ := regionauth.ParseKeys(regionauth.NewKey())
	var captured http.Header
	for name, sign := range map[string]func(*http.Request){
		"unsigned":       nil,
		"another region": func(r *http.Request) { other.Sign(r, regionauth.Claims{Account: "a", Private: true}, time.Now()) },
		"stale": func(r *http.Request) {
			testKeys.Sign(r, regionauth.Claims{Account: "a", Private: true}, time.Now().Add(-time.Minute))
		},
		"forged account": func(r *http.Request) {
			testKeys.Sign(r, regionauth.Claims{Account: "a", Private: true}, time.Now())
			r.Header.Set(regionauth.HeaderAccount, "b")
		},
		"key in the header only": func(r *http.Request) { r.Header.Set("Authorization", "Bearer trawl_x") },
	} {
		if w := send(sign); w.Code != http.StatusUnauthorized {
			t.Errorf("%s: %d %s, want 401", name, w.Code, w.Body)
		}
	}
	// A captured request sent again is a replay.
	r := httptest.NewRequest("GET", "/scrape/jobs/j_eu.c1.0000000000000000000a", nil)
	testKeys.Sign(r, regionauth.Claims{Account: "a", Private: true}, time.Now())
	captured = r.Header.Clone()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusNotFound {
		t.Fatalf("signed status of an unknown job: %d %s", w.Code, w.Body)
	}
	r = httptest.NewRequest("GET", "/scrape/jobs/j_eu.c1.0000000000000000000a", nil)
	r.Header = captured
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized {
		t.Fatalf("replayed request: %d, want 401", w.Code)
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/health", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("health: %d", w.Code)
	}
}

// A cell that allows private networks serves no request of a gate that
// does not: it cannot turn off its region's SSRF guard.
func TestPrivateNetworksNeedTheGate(t *testing.T) {
	tc := newTestCell(t, nil) // AllowPrivateNetworks: true
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the cell fetched %s though its gate keeps the SSRF guard", r.URL)
	}))
	defer site.Close()
	r := httptest.NewRequest("POST", "/scrape", strings.NewReader(`{"url":"`+site.URL+`/"}`))
	testKeys.Sign(r, regionauth.Claims{Account: "a", Private: false}, time.Now())
	w := httptest.NewRecorder()
	tc.Cell.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "cell_misconfigured") {
		t.Fatalf("private-network cell under a guarded gate: %d %s", w.Code, w.Body)
	}
}

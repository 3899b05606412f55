package payments

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/routes"
)

func TestLocalChargeSaved(t *testing.T) {
	other := testCharge()
	other.IdempotencyKey = "topup-2"
	otherAccount := testCharge()
	otherAccount.AccountID, otherAccount.Customer.AccountID = "acct_2", "acct_2"
	bad := func(f func(*Charge)) Charge { c := testCharge(); f(&c); return c }
	tests := []struct {
		name    string
		cfg     LocalConfig
		charge  Charge
		wantID  string
		wantErr error
	}{
		{name: "instant", cfg: LocalConfig{Instant: true}, charge: testCharge(), wantID: "local_ch_ce8e662bb3df6a9ecabde0467563ab72"},
		{name: "instant, other key", cfg: LocalConfig{Instant: true}, charge: other},
		{name: "instant, other account", cfg: LocalConfig{Instant: true}, charge: otherAccount},
		{name: "decline", cfg: LocalConfig{Instant: true, DeclineSaved: true}, charge: testCharge(), wantErr: ErrCardDeclined},
		{name: "self-hosted keeps no cards", charge: testCharge(), wantErr: ErrNoSavedCard},
		{name: "no usd", cfg: LocalConfig{Instant: true}, charge: bad(func(c *Charge) { c.USD = 0 }), wantErr: ErrInvalidCharge},
		{name: "no credits", cfg: LocalConfig{Instant: true}, charge: bad(func(c *Charge) { c.Credits = -1 }), wantErr: ErrInvalidCharge},
		{name: "no account", cfg: LocalConfig{Instant: true}, charge: bad(func(c *Charge) { c.AccountID = "" }), wantErr: ErrInvalidCharge},
		{name: "long key", cfg: LocalConfig{Instant: true}, charge: bad(func(c *Charge) { c.IdempotencyKey = strings.Repeat("k", MaxKeyLen+1) }), wantErr: ErrInvalidCharge},
		{name: "customer of another account", cfg: LocalConfig{Instant: true}, charge: bad(func(c *Charge) { c.Customer.AccountID = "acct_2" }), wantErr: ErrInvalidCharge},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewLocal(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := l.ChargeSaved(context.Background(), tt.charge)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil {
				if got != nil {
					t.Errorf("paid %+v", got)
				}
				return
			}
			want := Paid{PaymentID: got.PaymentID, USD: tt.charge.USD, AccountID: tt.charge.AccountID, Credits: tt.charge.Credits}
			if *got != want {
				t.Errorf("paid %+v, want %+v", got, want)
			}
			if tt.wantID != "" && got.PaymentID != tt.wantID {
				t.Errorf("payment id %q, want %q (derived from account and key, stable across releases)", got.PaymentID, tt.wantID)
			}
			// A retry, even on another Local (a restart), is the same payment.
			l2, _ := NewLocal(tt.cfg)
			again, err := l2.ChargeSaved(context.Background(), tt.charge)
			if err != nil || *again != *got {
				t.Errorf("retry %+v %v, first %+v", again, err, got)
			}
			if prev, ok := seen[got.PaymentID]; ok {
				t.Errorf("payment id %s also given to %q", got.PaymentID, prev)
			}
			seen[got.PaymentID] = tt.name
		})
	}
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// localServer serves l.Handler on a loopback port, with BaseURL that
// server's URL.
func localServer(t *testing.T, cfg LocalConfig) (*Local, *httptest.Server) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	cfg.BaseURL = "http://" + srv.Listener.Addr().String()
	l, err := NewLocal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux, err := routes.Mux([]routes.Route{*routes.Default().Row(CheckoutPath)}, routes.Handlers{CheckoutPath: l.Handler()}, routes.MuxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(srv.Close)
	return l, srv
}

// noRedirect is a client that reports redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func postForm(t *testing.T, u string, form url.Values, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("POST", u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header[k] = v
	}
	return do(t, req)
}

func get(t *testing.T, u string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// TestLocalCheckout walks a checkout the way the API and an operator use
// it: start, retry, look at the page, confirm with the token, complete.
func TestLocalCheckout(t *testing.T) {
	ctx := context.Background()
	l, srv := localServer(t, LocalConfig{ConfirmToken: "op-secret"})
	success := srv.URL + "/billing/done?session={CHECKOUT_SESSION_ID}"
	cancel := srv.URL + "/billing"

	co, err := l.StartCheckout(ctx, testCharge(), success, cancel)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(co.SessionID, "cs_local_") || co.URL != srv.URL+CheckoutPath+co.SessionID {
		t.Fatalf("checkout %+v", co)
	}
	again, err := l.StartCheckout(ctx, testCharge(), success, cancel)
	if err != nil || *again != *co {
		t.Fatalf("retry %+v %v, first %+v", again, err, co)
	}
	dearer := testCharge()
	dearer.USD = 20
	if _, err := l.StartCheckout(ctx, dearer, success, cancel); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("same key, other amount: %v", err)
	}
	if p, ok, err := l.CompleteCheckout(ctx, co.SessionID); p != nil || ok || err != nil {
		t.Fatalf("open session completes %+v %v %v", p, ok, err)
	}

	resp, body := get(t, co.URL)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("page %s %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{"$10 for 10000.000 credits", "Waiting for the operator", `<form method="post">`, `name="token"`, "Confirm payment", `href="` + cancel + `"`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
	if got := resp.Header.Get("Content-Security-Policy"); !strings.Contains(got, "frame-ancestors 'none'") {
		t.Errorf("CSP %q lets the Confirm button be framed", got)
	}

	refused := []struct {
		name   string
		form   url.Values
		header http.Header
	}{
		{"no token", url.Values{"confirm": {"1"}}, nil},
		{"wrong token", url.Values{"confirm": {"1"}, "token": {"op-secreT"}}, nil},
		{"cross-site form", url.Values{"confirm": {"1"}, "token": {"op-secret"}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}},
	}
	for _, r := range refused {
		resp, _ := postForm(t, co.URL, r.form, r.header)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %s, want 403", r.name, resp.Status)
		}
		if _, ok, _ := l.CompleteCheckout(ctx, co.SessionID); ok {
			t.Fatalf("%s: paid", r.name)
		}
	}

	wantPaid := Paid{PaymentID: "local_" + co.SessionID, InvoiceURL: co.URL, USD: 10, AccountID: "acct_1", Credits: 10_000_000}
	for i := range 2 { // a double click pays once
		resp, _ = postForm(t, co.URL, url.Values{"confirm": {"1"}, "token": {"op-secret"}}, nil)
		if want := srv.URL + "/billing/done?session=" + co.SessionID; resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want {
			t.Fatalf("confirm %d: %s to %q, want 303 to %q", i, resp.Status, resp.Header.Get("Location"), want)
		}
		p, ok, err := l.CompleteCheckout(ctx, co.SessionID)
		if err != nil || !ok || *p != wantPaid {
			t.Fatalf("confirm %d: complete %+v %v %v, want %+v", i, p, ok, err, wantPaid)
		}
	}
	_, body = get(t, co.URL)
	if !strings.Contains(body, "Paid on") || strings.Contains(body, "<form") {
		t.Errorf("paid page:\n%s", body)
	}
}

func TestLocalCheckoutPage(t *testing.T) {
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	l, srv := localServer(t, LocalConfig{Now: clk.Now, SessionTTL: time.Hour})
	ctx := context.Background()
	start := func(key string) *Checkout {
		c := testCharge()
		c.IdempotencyKey = key
		co, err := l.StartCheckout(ctx, c, "", "")
		if err != nil {
			t.Fatal(err)
		}
		return co
	}
	open := start("open")
	old := start("old")
	clk.Add(time.Hour)
	fresh := start("fresh")
	confirm := url.Values{"confirm": {"1"}}

	tests := []struct {
		name       string
		method     string
		url        string
		body       string
		wantStatus int
		wantIn     string
		wantNotIn  string
		wantPaid   *Checkout
	}{
		{name: "unknown session", method: "GET", url: srv.URL + CheckoutPath + "cs_local_nope", wantStatus: 404},
		{name: "confirm unknown session", method: "POST", url: srv.URL + CheckoutPath + "cs_local_nope", body: confirm.Encode(), wantStatus: 404},
		{name: "expired", method: "GET", url: old.URL, wantStatus: 410, wantIn: "expired"},
		{name: "confirm expired", method: "POST", url: open.URL, body: confirm.Encode(), wantStatus: 410, wantIn: "expired"},
		{name: "no path session", method: "GET", url: srv.URL + CheckoutPath, wantStatus: 404},
		{name: "other method", method: "PUT", url: fresh.URL, wantStatus: 405},
		{name: "oversized form", method: "POST", url: fresh.URL, body: "confirm=1&x=" + strings.Repeat("a", 8<<10), wantStatus: 400},
		{name: "page without token field", method: "GET", url: fresh.URL, wantStatus: 200, wantIn: `<button type="submit" name="confirm" value="1">`, wantNotIn: `name="token"`},
		{name: "confirm without token configured", method: "POST", url: fresh.URL, body: confirm.Encode(), wantStatus: 303, wantPaid: fresh},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, tt.url, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.body != "" {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			resp, body := do(t, req)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("%s, want %d", resp.Status, tt.wantStatus)
			}
			if !strings.Contains(body, tt.wantIn) {
				t.Errorf("body lacks %q:\n%s", tt.wantIn, body)
			}
			if tt.wantNotIn != "" && strings.Contains(body, tt.wantNotIn) {
				t.Errorf("body has %q:\n%s", tt.wantNotIn, body)
			}
			if tt.wantPaid != nil {
				// No success URL: back to the page, which shows the payment.
				if loc := resp.Header.Get("Location"); loc != CheckoutPath+tt.wantPaid.SessionID {
					t.Errorf("redirect to %q", loc)
				}
				if _, ok, err := l.CompleteCheckout(ctx, tt.wantPaid.SessionID); !ok || err != nil {
					t.Errorf("not paid: %v", err)
				}
			}
		})
	}
	for _, co := range []*Checkout{open, old} {
		if _, ok, err := l.CompleteCheckout(ctx, co.SessionID); ok || err != nil {
			t.Errorf("expired session %s: paid %v, err %v", co.SessionID, ok, err)
		}
	}
	if _, _, err := l.CompleteCheckout(ctx, "cs_local_nope"); !errors.Is(err, ErrNoSession) {
		t.Errorf("unknown session: %v", err)
	}
}

// Many retries of one top-up at once make one session, and many confirms
// one payment.
func TestLocalConcurrentRetries(t *testing.T) {
	l, srv := localServer(t, LocalConfig{})
	ctx := context.Background()
	const n = 16
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			co, err := l.StartCheckout(ctx, testCharge(), "", "")
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = co.SessionID
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("sessions %q", ids)
		}
	}
	u := srv.URL + CheckoutPath + ids[0]
	payments := make([]string, n)
	for i := range n {
		wg.Go(func() {
			resp, err := http.PostForm(u, url.Values{"confirm": {"1"}})
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			p, ok, err := l.CompleteCheckout(ctx, ids[0])
			if !ok || err != nil {
				t.Errorf("not paid after confirm: %v", err)
				return
			}
			payments[i] = p.PaymentID
		})
	}
	wg.Wait()
	for _, p := range payments {
		if p != "local_"+ids[0] {
			t.Fatalf("payments %q", payments)
		}
	}
}

func TestNewLocalBaseURL(t *testing.T) {
	for _, tt := range []struct {
		base, want string
		ok         bool
	}{
		{"", CheckoutPath, true},
		{"https://trawl.example.com", "https://trawl.example.com" + CheckoutPath, true},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080" + CheckoutPath, true},
		{"trawl.example.com", "", false},
		{"https://trawl.example.com/api", "", false},
		{"javascript:alert(1)", "", false},
	} {
		l, err := NewLocal(LocalConfig{BaseURL: tt.base})
		if (err == nil) != tt.ok {
			t.Errorf("%q: err %v", tt.base, err)
			continue
		}
		if err != nil {
			continue
		}
		co, err := l.StartCheckout(context.Background(), testCharge(), "", "")
		if err != nil {
			t.Fatal(err)
		}
		if co.URL != tt.want+co.SessionID {
			t.Errorf("%q: url %q", tt.base, co.URL)
		}
	}
}

func TestFormatCredits(t *testing.T) {
	for mc, want := range map[int64]string{0: "0.000", 5: "0.005", 1500: "1.500", 10_000_000: "10000.000", -2500: "-2.500"} {
		if got := formatCredits(mc); got != want {
			t.Errorf("formatCredits(%d) = %q, want %q", mc, got, want)
		}
	}
}

package billing

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/gate/payments"
	"github.com/trawlhq/trawl/ledger"
)

func TestPricesRoute(t *testing.T) {
	e := newEnv(t, payments.LocalConfig{})
	r := e.do("GET", "/v1/prices", "", "")
	if r.status != 200 || !strings.Contains(r.header.Get("Cache-Control"), "public") {
		t.Fatalf("GET /v1/prices: %d %v", r.status, r.header)
	}
	var got, want any
	r.json(t, &got)
	golden, err := os.ReadFile(filepath.Join("testdata", "prices.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(golden, &want); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if !bytes.Equal(gb, wb) {
		t.Errorf("body is not the table:\n%s", r.body)
	}
	if r := e.do("POST", "/v1/prices", "", ""); r.status != 405 || r.header.Get("Allow") != "GET" || r.errCode(t) != CodeMethodNotAllowed {
		t.Errorf("POST /v1/prices: %d %s", r.status, r.body)
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t, payments.LocalConfig{})
	tests := []struct {
		name   string
		hdr    []string
		status int
		msg    string // part of the 401 message
	}{
		{"no key", nil, 401, "Authorization: Bearer"},
		{"wrong key", []string{"Authorization", "Bearer tk_nope"}, 401, "not valid"},
		{"empty bearer", []string{"Authorization", "Bearer "}, 401, "Authorization: Bearer"},
		{"basic scheme", []string{"Authorization", "Basic " + keyUser}, 401, "Authorization: Bearer"},
		{"revoked", []string{"Authorization", "Bearer " + keyRevoked}, 401, "revoked"},
		{"expired pass", []string{"Authorization", "Bearer " + keyPassOld}, 401, "expired"},
		{"pass older than 24 h without expiry", []string{"Authorization", "Bearer " + keyPassBare}, 401, "expired"},
		{"oversized key", []string{"Authorization", "Bearer " + strings.Repeat("k", 300)}, 401, "not valid"},
		{"bearer", []string{"Authorization", "Bearer " + keyUser}, 200, ""},
		{"scheme in lower case", []string{"Authorization", "bearer " + keyUser}, 200, ""},
		{"x-api-key", []string{"x-api-key", keyUser}, 200, ""},
		{"live pass", []string{"x-api-key", keyPassNew}, 200, ""},
		{"bearer wins over x-api-key", []string{"Authorization", "Bearer " + keyUser, "x-api-key", "tk_nope"}, 200, ""},
		{"auditor", []string{"Authorization", "Bearer " + keyAuditor}, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("GET", "/v1/billing/balance", "", "", tt.hdr...)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			if tt.status == 401 {
				var b ErrorBody
				r.json(t, &b)
				if b.Error != CodeUnauthorized || !strings.Contains(b.Message, tt.msg) {
					t.Errorf("body %s", r.body)
				}
				if r.header.Get("WWW-Authenticate") == "" {
					t.Error("no WWW-Authenticate")
				}
			}
		})
	}
	// Every route but the price table and the checkout return page wants a key.
	for _, rt := range []struct{ method, path string }{
		{"GET", "/v1/billing/balance"},
		{"POST", "/v1/billing/settings"},
		{"POST", "/v1/billing/topup?amount=5"},
		{"POST", "/v1/billing/checkout/cs_local_x/complete"},
		{"GET", "/v1/ledger/journal"},
	} {
		if r := e.do(rt.method, rt.path, "", `{}`); r.status != 401 || r.errCode(t) != CodeUnauthorized {
			t.Errorf("%s %s without a key: %d %s", rt.method, rt.path, r.status, r.body)
		}
	}
}

type testIdentity struct{}

// With Config.Identity (the gate's trawl_auth), the keyed routes take the
// caller from it and never read the request's key; the public checkout
// completion, which no module authenticates, still checks the key itself.
func TestIdentityFromTheGate(t *testing.T) {
	e := newEnv(t, payments.LocalConfig{})
	cfg := e.cfg
	cfg.Identity = func(ctx context.Context) (*ledger.Key, *ledger.Account) {
		id, _ := ctx.Value(testIdentity{}).(string)
		if id == "" {
			return nil, nil
		}
		k, err := e.state.KeyByID(id)
		if err != nil {
			t.Fatal(err)
		}
		a, err := e.state.Account(k.Account)
		if err != nil {
			t.Fatal(err)
		}
		return k, a
	}
	h := NewHandler(cfg)
	serve := func(method, path, keyID, bearer string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		if keyID != "" {
			r = r.WithContext(context.WithValue(r.Context(), testIdentity{}, keyID))
		}
		if bearer != "" {
			r.Header.Set("Authorization", "Bearer "+bearer)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	var b Balance
	if w := serve("GET", "/v1/billing/balance", "k2", keyUser); w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &b) != nil || b.Account != "acct2" {
		t.Errorf("balance as k2 with k1's key in the header: %d %s", w.Code, w.Body)
	}
	if w := serve("GET", "/v1/billing/balance", "", keyUser); w.Code != 401 || w.Header().Get("WWW-Authenticate") == "" {
		t.Errorf("balance without an identity, with a key in the header: %d %s", w.Code, w.Body)
	}
	if w := serve("GET", "/v1/ledger/journal", "ka", ""); w.Code != 200 {
		t.Errorf("journal as the auditor: %d %s", w.Code, w.Body)
	}
	if w := serve("GET", "/v1/ledger/journal", "k1", keyAuditor); w.Code != 403 {
		t.Errorf("journal as a user with the auditor's key in the header: %d %s", w.Code, w.Body)
	}
	complete := "/v1/billing/checkout/cs_local_x/complete"
	if w := serve("POST", complete, "k1", ""); w.Code != 401 {
		t.Errorf("completion with an identity and no key: %d %s", w.Code, w.Body)
	}
	if w := serve("POST", complete, "", keyUser); w.Code != 404 {
		t.Errorf("completion of no session with a key: %d %s", w.Code, w.Body)
	}
}

func TestAuthenticateFunc(t *testing.T) {
	e := newEnv(t, payments.LocalConfig{})
	r, _ := http.NewRequest("GET", "/", nil)
	r.Header.Set("x-api-key", keyPassNew)
	k, a, err := Authenticate(e.state, r, t0)
	if err != nil || k.ID != "kpn" || a.ID != "acct1" {
		t.Fatalf("%v %+v %+v", err, k, a)
	}
	// The same pass key an hour later is expired.
	if _, _, err := Authenticate(e.state, r, t0.Add(time.Hour)); err != ErrExpiredKey {
		t.Fatalf("an hour later: %v", err)
	}
}

func TestBalance(t *testing.T) {
	e := newEnv(t, payments.LocalConfig{})
	e.ok(ledger.Command{Type: ledger.CmdGrant, Grant: &ledger.Grant{Account: "acct1", Bucket: ledger.BucketMonthly, Amount: ledger.Credits(5)}})
	e.ok(ledger.Command{Type: ledger.CmdGrant, Grant: &ledger.Grant{Account: "acct1", Bucket: ledger.BucketPass, Amount: ledger.Credits(7), PassExpires: t0.Add(48 * time.Hour)}})
	cap := ledger.Credits(30)
	e.ok(ledger.Command{Type: ledger.CmdSettings, Settings: &ledger.Settings{Account: "acct1", SpendCapMC: &cap}})
	// Spend 1.5 credits in eu: the holds client takes a 10-credit hold and
	// keeps the charge unsettled.
	if err := e.holds.Charge(context.Background(), "acct1", "rcpt-1", 1500); err != nil {
		t.Fatal(err)
	}
	r := e.do("GET", "/v1/billing/balance", keyUser, "")
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var b Balance
	r.json(t, &b)
	s := func(v string) *string { return &v }
	pass := t0.Add(48 * time.Hour)
	want := Balance{
		Account: "acct1", Plan: "free", Region: "eu",
		Balance: "110.500", Total: "112.000",
		Buckets:     map[string]string{"monthly": "0.000", "pass": "2.000", "signup": "100.000", "pack": "0.000"},
		Holds:       map[string]string{"eu": "10.000"},
		Unsettled:   "1.500",
		PassExpires: &pass,
		SpendCapMC:  30000, SpendCap: s("30.000"), CapLeft: s("28.500"),
		Month: "2026-11", MonthSpent: "1.500",
		LedgerIndex: e.led.Index(),
	}
	gb, _ := json.Marshal(b)
	wb, _ := json.Marshal(want)
	if !bytes.Equal(gb, wb) {
		t.Errorf("balance\n got %s\nwant %s", gb, wb)
	}
	// Without a cap, spend_cap and cap_left are null.
	r = e.do("GET", "/v1/billing/balance", keyUser2, "")
	var raw map[string]any
	r.json(t, &raw)
	if raw["spend_cap"] != nil || raw["cap_left"] != nil || raw["spend_cap_mc"] != 0.0 || raw["balance"] != "50.000" {
		t.Errorf("acct2: %s", r.body)
	}
	if _, ok := raw["pass_expires"]; ok {
		t.Errorf("pass_expires without a pass: %s", r.body)
	}
}

func TestSettings(t *testing.T) {
	e := newEnv(t, payments.LocalConfig{})
	r := e.do("POST", "/v1/billing/settings", keyUser, `{"spend_cap_mc": 250000, "recharge": {"on": true, "under_credits": 20, "pack_usd": 10, "max_per_month": 3}}`)
	want := `{"spend_cap_mc":250000,"recharge":{"on":true,"under_credits":20,"pack_usd":10,"max_per_month":3}}`
	if r.status != 200 || strings.TrimSpace(string(r.body)) != want {
		t.Fatalf("%d %s", r.status, r.body)
	}
	a := e.acct("acct1")
	if a.SpendCapMC != 250000 || a.Recharge != (ledger.Recharge{On: true, UnderCredits: ledger.Credits(20), PackUSD: 10, MaxPerMonth: 3}) {
		t.Fatalf("ledger has %+v", a)
	}
	// A field left out keeps its value; the answer round-trips as a request.
	r = e.do("POST", "/v1/billing/settings", keyUser, `{"recharge": {"on": false}}`)
	want = `{"spend_cap_mc":250000,"recharge":{"on":false,"under_credits":20,"pack_usd":10,"max_per_month":3}}`
	if r.status != 200 || strings.TrimSpace(string(r.body)) != want {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if r = e.do("POST", "/v1/billing/settings", keyUser, string(r.body)); r.status != 200 {
		t.Fatalf("the answer sent back: %d %s", r.status, r.body)
	}
	r = e.do("POST", "/v1/billing/settings", keyUser, `{"spend_cap_mc": 0}`)
	if r.status != 200 || e.acct("acct1").SpendCapMC != 0 {
		t.Fatalf("no cap: %d %s", r.status, r.body)
	}
	// A pack dropped from the table: recharge can still be switched off
	// and stay off, not back on.
	cfg := e.cfg
	cfg.Prices = DefaultPrices()
	cfg.Prices.Packs = cfg.Prices.Packs[:1]
	smaller := NewHandler(cfg)
	for body, want := range map[string]int{
		`{"recharge": {"on": false, "max_per_month": 2}}`: 200,
		`{"recharge": {"on": true}}`:                      400,
	} {
		req := httptest.NewRequest("POST", "/v1/billing/settings", strings.NewReader(body))
		req.Header.Set("x-api-key", keyUser)
		rec := httptest.NewRecorder()
		smaller.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("%s with the $10 pack gone: %d %s", body, rec.Code, rec.Body)
		}
	}
	var bal Balance
	e.do("GET", "/v1/billing/balance", keyUser, "").json(t, &bal)
	if bal.Recharge.UnderCredits != 20 || bal.Recharge.On || bal.Recharge.MaxPerMonth != 2 || bal.SpendCap != nil {
		t.Errorf("balance after settings: %+v", bal)
	}
	// Another account is untouched.
	if a2 := e.acct("acct2"); a2.SpendCapMC != 0 || a2.Recharge.On {
		t.Errorf("acct2 changed: %+v", a2)
	}
}

func TestSettingsBadInput(t *testing.T) {
	e := newEnv(t, payments.LocalConfig{})
	e.do("POST", "/v1/billing/settings", keyUser, `{"spend_cap_mc": 5000, "recharge": {"on": true, "under_credits": 10, "pack_usd": 5, "max_per_month": 1}}`)
	before := *e.acct("acct1")
	submits := e.led.Submits()
	tests := []struct {
		name, body string
		hdr        []string
		status     int
		code       string
	}{
		{"malformed", `{"spend_cap_mc": `, nil, 400, CodeBadInput},
		{"not an object", `[1,2]`, nil, 400, CodeBadInput},
		{"empty body", ``, nil, 400, CodeBadInput},
		{"empty object", `{}`, nil, 400, CodeBadInput},
		{"two objects", `{"spend_cap_mc": 1} {"spend_cap_mc": 2}`, nil, 400, CodeBadInput},
		{"cap as a string", `{"spend_cap_mc": "1000"}`, nil, 400, CodeBadInput},
		{"cap with decimals", `{"spend_cap_mc": 1.5}`, nil, 400, CodeBadInput},
		{"negative cap", `{"spend_cap_mc": -1}`, nil, 400, CodeBadInput},
		{"huge cap", `{"spend_cap_mc": 99999999999999999999}`, nil, 400, CodeBadInput},
		{"unknown field", `{"spend_cap": 10}`, nil, 400, CodeBadInput},
		{"unknown recharge field", `{"recharge": {"on": true, "threshold": 5}}`, nil, 400, CodeBadInput},
		{"on as a string", `{"recharge": {"on": "yes"}}`, nil, 400, CodeBadInput},
		{"recharge not an object", `{"recharge": true}`, nil, 400, CodeBadInput},
		{"pack not a pack", `{"recharge": {"pack_usd": 7}}`, nil, 400, CodeBadInput},
		{"pack as a string", `{"recharge": {"pack_usd": "10"}}`, nil, 400, CodeBadInput},
		{"under_credits with decimals", `{"recharge": {"under_credits": 2.5}}`, nil, 400, CodeBadInput},
		{"negative under_credits", `{"recharge": {"under_credits": -2}}`, nil, 400, CodeBadInput},
		{"max_per_month too high", `{"recharge": {"max_per_month": 101}}`, nil, 400, CodeBadInput},
		{"on without a threshold", `{"recharge": {"under_credits": 0}}`, nil, 400, CodeBadInput},
		{"on without a monthly limit", `{"recharge": {"max_per_month": 0}}`, nil, 400, CodeBadInput},
		{"a bad field next to a good one", `{"spend_cap_mc": 9000, "recharge": {"pack_usd": 3}}`, nil, 400, CodeBadInput},
		{"form body", `spend_cap_mc=5`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 400, CodeBadInput},
		{"over 16 KiB", `{"spend_cap_mc": 1` + strings.Repeat(" ", 17<<10) + `}`, nil, 413, CodeTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("POST", "/v1/billing/settings", keyUser, tt.body, tt.hdr...)
			if r.status != tt.status || r.errCode(t) != tt.code {
				t.Fatalf("%d %s", r.status, r.body)
			}
		})
	}
	if after := *e.acct("acct1"); after != before {
		t.Errorf("bad input changed the account:\n%+v\n%+v", before, after)
	}
	if n := e.led.Submits(); n != submits {
		t.Errorf("bad input reached the ledger (%d commands)", n-submits)
	}
	if r := e.do("GET", "/v1/billing/settings", keyUser, ""); r.status != 405 || r.header.Get("Allow") != "POST" {
		t.Errorf("GET settings: %d %v", r.status, r.header)
	}
	// The ledger down: 503, nothing changed.
	e.led.FailNext(1)
	if r := e.do("POST", "/v1/billing/settings", keyUser, `{"spend_cap_mc": 1}`); r.status != 503 || r.errCode(t) != CodeLedger {
		t.Errorf("ledger down: %d %s", r.status, r.body)
	}
	if e.acct("acct1").SpendCapMC != 5000 {
		t.Error("cap changed while the ledger was down")
	}
}

func TestTopupSavedCard(t *testing.T) {
	e := newEnv(t, payments.LocalConfig{Instant: true})
	r := e.do("POST", "/v1/billing/topup?amount=10", keyUser, "")
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var got Topup
	r.json(t, &got)
	if !got.Paid || got.USD != 10 || got.Credits != "2200.000" || !strings.HasPrefix(got.PaymentID, "local_ch_") || got.Balance == nil {
		t.Fatalf("%s", r.body)
	}
	if got.Balance.Buckets["pack"] != "2200.000" || got.Balance.Balance != "2300.000" || got.Balance.Plan != ledger.PlanSupporter {
		t.Errorf("balance in the answer: %+v", got.Balance)
	}
	if r.header.Get("Idempotency-Key") == "" {
		t.Error("the generated Idempotency-Key is not echoed")
	}
	if e.bucket("acct1", ledger.BucketPack) != ledger.Credits(2200) || e.acct("acct1").Plan != ledger.PlanSupporter {
		t.Error("ledger not credited")
	}
	// "10.00" is the same pack; a request without a key is a new purchase.
	if r := e.do("POST", "/v1/billing/topup?amount=5.00", keyUser, ""); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if v := e.bucket("acct1", ledger.BucketPack); v != ledger.Credits(3200) {
		t.Errorf("pack %s after two top-ups", v)
	}
	e.audit()
}

func TestTopupIdempotencyKey(t *testing.T) {
	e := newEnv(t, payments.LocalConfig{Instant: true})
	first := e.do("POST", "/v1/billing/topup?amount=25", keyUser, "", "Idempotency-Key", "order-1")
	again := e.do("POST", "/v1/billing/topup?amount=25", keyUser, "", "Idempotency-Key", "order-1")
	var a, b Topup
	first.json(t, &a)
	again.json(t, &b)
	if first.status != 200 || again.status != 200 || a.PaymentID != b.PaymentID {
		t.Fatalf("%d %s / %d %s", first.status, first.body, again.status, again.body)
	}
	if v := e.bucket("acct1", ledger.BucketPack); v != ledger.Credits(6000) {
		t.Fatalf("pack %s after a retried top-up, want 6000 once", v)
	}
	// The same key on another account or for another pack is another purchase.
	if r := e.do("POST", "/v1/billing/topup?amount=25", keyUser2, "", "Idempotency-Key", "order-1"); r.status != 200 {
		t.Fatal(r.status)
	}
	if v := e.bucket("acct2", ledger.BucketPack); v != ledger.Credits(6000) {
		t.Errorf("acct2 pack %s", v)
	}
	if r := e.do("POST", "/v1/billing/topup?amount=5", keyUser, "", "Idempotency-Key", "order-1"); r.status != 200 {
		t.Fatal(r.status)
	}
	if v := e.bucket("acct1", ledger.BucketPack); v != ledger.Credits(7000) {
		t.Errorf("acct1 pack %s after a $5 with the same key", v)
	}

	// The ledger's answer is lost once: retried inside the request, one credit.
	e.led.LoseReplies(1)
	if r := e.do("POST", "/v1/billing/topup?amount=10", keyUser, "", "Idempotency-Key", "order-2"); r.status != 200 {
		t.Fatalf("lost reply: %d %s", r.status, r.body)
	}
	if v := e.bucket("acct1", ledger.BucketPack); v != ledger.Credits(9200) {
		t.Errorf("pack %s after a lost reply", v)
	}
	// The ledger unreachable for the whole request: 503, paid not credited;
	// the client repeats with the same key and is credited once.
	e.led.FailNext(3)
	r := e.do("POST", "/v1/billing/topup?amount=10", keyUser, "", "Idempotency-Key", "order-3")
	if r.status != 503 || r.errCode(t) != CodeLedger || !strings.Contains(string(r.body), "same Idempotency-Key") {
		t.Fatalf("ledger down: %d %s", r.status, r.body)
	}
	if v := e.bucket("acct1", ledger.BucketPack); v != ledger.Credits(9200) {
		t.Fatalf("pack %s while the ledger was down", v)
	}
	for range 2 {
		if r := e.do("POST", "/v1/billing/topup?amount=10", keyUser, "", "Idempotency-Key", "order-3"); r.status != 200 {
			t.Fatalf("retry: %d %s", r.status, r.body)
		}
	}
	if v := e.bucket("acct1", ledger.BucketPack); v != ledger.Credits(11400) {
		t.Errorf("pack %s after the retries, want one more 2200", v)
	}
	e.audit()
}

func TestTopupRefused(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  payments.LocalConfig
		code string
	}{
		{"declined", payments.LocalConfig{Instant: true, DeclineSaved: true}, CodeCardDeclined},
		{"no saved card", payments.LocalConfig{}, CodeNoSavedCard},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.cfg)
			r := e.do("POST", "/v1/billing/topup?amount=10", keyUser, "")
			if r.status != 402 {
				t.Fatalf("%d %s", r.status, r.body)
			}
			var b TopupRefused
			r.json(t, &b)
			if b.Error != tt.code || b.Actions.Checkout != "POST /v1/billing/topup?amount=10&checkout=1" || b.Actions.UpdateCard == "" ||
				!strings.Contains(b.Message, "checkout=1") || !strings.Contains(b.Message, "update your card") {
				t.Errorf("%s", r.body)
			}
			if e.bucket("acct1", ledger.BucketPack) != 0 || e.acct("acct1").Plan != ledger.PlanFree {
				t.Error("a refused card credited")
			}
		})
	}
}

func TestTopupBadInput(t *testing.T) {
	e := newEnv(t, payments.LocalConfig{Instant: true})
	tests := []struct {
		name, query string
		hdr         []string
	}{
		{"no amount", "", nil},
		{"not a pack", "amount=7", nil},
		{"not a number", "amount=ten", nil},
		{"cents", "amount=10.50", nil},
		{"negative", "amount=-5", nil},
		{"exponent", "amount=1e1", nil},
		{"empty amount", "amount=", nil},
		{"amount twice", "amount=5&amount=10", nil},
		{"unknown parameter", "amount=5&currency=eur", nil},
		{"checkout=2", "amount=5&checkout=2", nil},
		{"key with a space", "amount=5", []string{"Idempotency-Key", "a b"}},
		{"key too long", "amount=5", []string{"Idempotency-Key", strings.Repeat("k", 101)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("POST", "/v1/billing/topup?"+tt.query, keyUser, "", tt.hdr...)
			if r.status != 400 || r.errCode(t) != CodeBadInput {
				t.Fatalf("%d %s", r.status, r.body)
			}
		})
	}
	var b ErrorBody
	e.do("POST", "/v1/billing/topup?amount=7", keyUser, "").json(t, &b)
	if !strings.Contains(b.Message, "5, 10, 25, 50") {
		t.Errorf("message does not list the packs: %q", b.Message)
	}
	if v := e.bucket("acct1", ledger.BucketPack); v != 0 {
		t.Errorf("bad input credited %s", v)
	}
	if r := e.do("GET", "/v1/billing/topup?amount=5", keyUser, ""); r.status != 405 || r.header.Get("Allow") != "POST" {
		t.Errorf("GET topup: %d", r.status)
	}
}

func TestCheckoutFlow(t *testing.T) {
	e := newEnv(t, payments.LocalConfig{ConfirmToken: "op-secret"})
	r := e.do("POST", "/v1/billing/topup?amount=25&checkout=1", keyUser, "", "Idempotency-Key", "co-1")
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var co CheckoutStarted
	r.json(t, &co)
	if co.USD != 25 || co.Credits != "6000.000" || co.CheckoutURL != e.srv.URL+payments.CheckoutPath+co.SessionID ||
		co.Complete != "POST /v1/billing/checkout/"+co.SessionID+"/complete" {
		t.Fatalf("%s", r.body)
	}
	// The same key gives the same session.
	var co2 CheckoutStarted
	e.do("POST", "/v1/billing/topup?amount=25&checkout=1", keyUser, "", "Idempotency-Key", "co-1").json(t, &co2)
	if co2.SessionID != co.SessionID {
		t.Errorf("a retried checkout opened session %s, first %s", co2.SessionID, co.SessionID)
	}
	complete := "/v1/billing/checkout/" + co.SessionID + "/complete"

	// Not paid yet.
	r = e.do("POST", complete, keyUser, "")
	var pending CheckoutPending
	r.json(t, &pending)
	if r.status != 200 || pending.Paid || pending.SessionID != co.SessionID {
		t.Fatalf("before paying: %d %s", r.status, r.body)
	}
	// The operator page is served.
	if r := e.do("GET", co.CheckoutURL, "", ""); r.status != 200 || !strings.Contains(string(r.body), "$25 for 6000.000 credits") {
		t.Fatalf("checkout page: %d %s", r.status, r.body)
	}
	// A wrong token confirms nothing.
	post := func(tok string) reply {
		t.Helper()
		req, _ := http.NewRequest("POST", co.CheckoutURL, strings.NewReader(url.Values{"token": {tok}, "confirm": {"1"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return reply{status: resp.StatusCode, header: resp.Header}
	}
	if r := post("guess"); r.status != 403 {
		t.Fatalf("wrong token: %d", r.status)
	}
	if v := e.bucket("acct1", ledger.BucketPack); v != 0 {
		t.Fatalf("credited %s on a wrong token", v)
	}
	// The operator confirms: credited at once, before the browser returns.
	r = post("op-secret")
	if r.status != 303 || r.header.Get("Location") != e.srv.URL+complete {
		t.Fatalf("confirm: %d %v", r.status, r.header)
	}
	if v := e.bucket("acct1", ledger.BucketPack); v != ledger.Credits(6000) {
		t.Fatalf("pack %s after confirm", v)
	}
	// The browser's return page, a second confirm, the client's completion
	// call (twice) and the gate's webhook function: still credited once.
	r = e.do("GET", r.header.Get("Location"), "", "")
	var ret Topup
	r.json(t, &ret)
	if r.status != 200 || !ret.Paid || ret.Balance != nil || ret.Credits != "6000.000" {
		t.Fatalf("return page: %d %s", r.status, r.body)
	}
	post("op-secret")
	for range 2 {
		r = e.do("POST", complete, keyUser, "")
		var got Topup
		r.json(t, &got)
		if r.status != 200 || !got.Paid || got.USD != 25 || got.PaymentID != "local_"+co.SessionID || got.Balance.Buckets["pack"] != "6000.000" {
			t.Fatalf("complete: %d %s", r.status, r.body)
		}
	}
	paid, ok, err := CompleteCheckout(context.Background(), e.cfg, co.SessionID)
	if err != nil || !ok || paid.PaymentID != "local_"+co.SessionID {
		t.Fatalf("CompleteCheckout: %v %v %+v", err, ok, paid)
	}
	if v := e.bucket("acct1", ledger.BucketPack); v != ledger.Credits(6000) {
		t.Fatalf("pack %s, want 6000 once", v)
	}
	if e.acct("acct1").Plan != ledger.PlanSupporter {
		t.Error("a paid checkout does not make a supporter")
	}
	// Another account cannot complete (or see) this session; unknown ids are 404.
	if r := e.do("POST", complete, keyUser2, ""); r.status != 404 || r.errCode(t) != CodeNotFound {
		t.Errorf("other account: %d %s", r.status, r.body)
	}
	for _, p := range []string{"/v1/billing/checkout/cs_local_nope/complete", "/v1/billing/checkout/bad%20id/complete"} {
		if r := e.do("POST", p, keyUser, ""); r.status != 404 || r.errCode(t) != CodeNotFound {
			t.Errorf("%s: %d %s", p, r.status, r.body)
		}
		if r := e.do("GET", p, "", ""); r.status != 404 {
			t.Errorf("GET %s: %d %s", p, r.status, r.body)
		}
	}
	if r := e.do("DELETE", complete, keyUser, ""); r.status != 405 || r.header.Get("Allow") != "GET, POST" {
		t.Errorf("DELETE complete: %d %v", r.status, r.header.Get("Allow"))
	}
	e.audit()
}

// The Stripe flow has no operator page: the session is paid elsewhere and
// the completion call (or the gate's webhook) credits it. Simulated here
// with Local's page standing in for Stripe.
func TestCheckoutCreditsWhenTheLedgerComesBack(t *testing.T) {
	e := newEnv(t, payments.LocalConfig{})
	var co CheckoutStarted
	e.do("POST", "/v1/billing/topup?amount=5&checkout=1", keyUser, "").json(t, &co)
	e.led.FailNext(3) // the ledger is down while the operator confirms
	req, _ := http.NewRequest("POST", co.CheckoutURL, strings.NewReader("confirm=1"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 303 || e.bucket("acct1", ledger.BucketPack) != 0 {
		t.Fatalf("confirm with the ledger down: %d", resp.StatusCode)
	}
	e.led.FailNext(3)
	r := e.do("POST", "/v1/billing/checkout/"+co.SessionID+"/complete", keyUser, "")
	if r.status != 503 || r.errCode(t) != CodeLedger {
		t.Fatalf("complete with the ledger down: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/v1/billing/checkout/"+co.SessionID+"/complete", keyUser, ""); r.status != 200 {
		t.Fatalf("complete: %d %s", r.status, r.body)
	}
	if v := e.bucket("acct1", ledger.BucketPack); v != ledger.Credits(1000) {
		t.Errorf("pack %s", v)
	}
}

func TestJournal(t *testing.T) {
	e := newEnv(t, payments.LocalConfig{Instant: true})
	// Enough entries for several pages of the stream.
	for i := range 2100 {
		e.ok(ledger.Command{Type: ledger.CmdGrant, Grant: &ledger.Grant{Account: "acct2", Bucket: ledger.BucketSignup, Amount: ledger.MC(i + 1)}})
	}
	total := e.state.Meta().Entries
	read := func(after string) []ledger.Entry {
		t.Helper()
		r := e.do("GET", "/v1/ledger/journal?after="+after, keyAuditor, "")
		if r.status != 200 || r.header.Get("Content-Type") != "application/x-ndjson" {
			t.Fatalf("%d %v %s", r.status, r.header, r.body)
		}
		var out []ledger.Entry
		sc := bufio.NewScanner(bytes.NewReader(r.body))
		for sc.Scan() {
			var en ledger.Entry
			if err := json.Unmarshal(sc.Bytes(), &en); err != nil {
				t.Fatalf("line %q: %v", sc.Bytes(), err)
			}
			out = append(out, en)
		}
		return out
	}
	all := read("0")
	if uint64(len(all)) != total {
		t.Fatalf("%d lines, journal has %d", len(all), total)
	}
	prev := ledger.GenesisHash
	for i, en := range all {
		if en.Index != uint64(i+1) || en.PrevHash != prev || en.ComputeHash() != en.Hash {
			t.Fatalf("entry %d does not verify: %+v", i+1, en)
		}
		prev = en.Hash
	}
	if tail := read("2000"); uint64(len(tail)) != total-2000 || tail[0].Index != 2001 {
		t.Errorf("after=2000: %d lines from %d", len(tail), tail[0].Index)
	}
	if none := read("999999"); len(none) != 0 {
		t.Errorf("past the end: %d lines", len(none))
	}
	if r := e.do("GET", "/v1/ledger/journal", keyUser, ""); r.status != 403 || r.errCode(t) != CodeForbidden {
		t.Errorf("user key: %d %s", r.status, r.body)
	}
	for _, q := range []string{"after=-1", "after=x", "after=1&after=2", "since=3"} {
		if r := e.do("GET", "/v1/ledger/journal?"+q, keyAuditor, ""); r.status != 400 || r.errCode(t) != CodeBadInput {
			t.Errorf("%s: %d %s", q, r.status, r.body)
		}
	}
}

func TestRouting(t *testing.T) {
	e := newEnv(t, payments.LocalConfig{})
	for _, p := range []string{"/", "/v1/billing", "/v1/billing/balance/x", "/v1/ledger", "/v1/billing/checkout/x/y/complete"} {
		if r := e.do("GET", p, keyUser, ""); r.status != 404 || r.errCode(t) != CodeNotFound {
			t.Errorf("GET %s: %d %s", p, r.status, r.body)
		}
	}
	if r := e.do("DELETE", "/v1/billing/balance", keyUser, ""); r.status != 405 || r.header.Get("Allow") != "GET" || r.errCode(t) != CodeMethodNotAllowed {
		t.Errorf("DELETE balance: %d %s", r.status, r.body)
	}
}

func TestNoProvider(t *testing.T) {
	e := newEnv(t, payments.LocalConfig{})
	cfg := e.cfg
	cfg.Provider = nil
	srv := NewHandler(cfg)
	for _, p := range []string{"/v1/billing/topup?amount=5", "/v1/billing/checkout/cs_x/complete"} {
		req, _ := http.NewRequest("POST", p, nil)
		req.Header.Set("x-api-key", keyUser)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != 503 {
			t.Errorf("%s: %d %s", p, rec.Code, rec.Body)
		}
	}
}

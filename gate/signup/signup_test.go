package signup_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/gate/signup"
	"github.com/trawlhq/trawl/ledger"
)

func TestSignupFormPage(t *testing.T) {
	e := newEnv(t)
	r := e.do(http.MethodGet, "/signup", "", "")
	if r.status != http.StatusOK || !strings.Contains(r.body, `name="email"`) || !strings.Contains(r.body, `<form method="post" action="/signup">`) {
		t.Fatalf("GET /signup: %d %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if r.header.Get("Cache-Control") != "no-store" || r.header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("headers %v", r.header)
	}
	if r := e.do(http.MethodDelete, "/signup", "", ""); r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "GET, POST" {
		t.Errorf("DELETE /signup: %d Allow %q", r.status, r.header.Get("Allow"))
	}
}

func TestSignupRefusesBadAddresses(t *testing.T) {
	e := newEnv(t)
	for _, addr := range []string{
		"", "   ", "ann", "ann@", "@example.com", "ann@example", "ann@@example.com",
		"Ann <ann@example.com>", "ann@example.com, bob@example.com", "ann@.example.com", "ann@example..com",
		"ann@[127.0.0.1]", "ann example@example.com", "ann@exa mple.com", "ann@example.com\r\nBcc: x@example.com",
		strings.Repeat("a", 250) + "@example.com",
	} {
		r := e.form("/signup", url.Values{"email": {addr}})
		if r.status != http.StatusBadRequest || !strings.Contains(r.body, `id="error"`) || pageKey(r.body) != "" {
			t.Errorf("sign-up with %q: %d, want 400 with an error and no key: %s", addr, r.status, r.body)
		}
	}
	n := 0
	e.state.Accounts(func(*ledger.Account) (bool, error) { n++; return true, nil })
	if n != 0 || len(e.mailer.sent) != 0 {
		t.Fatalf("bad addresses made %d accounts and %d mails", n, len(e.mailer.sent))
	}
}

func TestSignupGivesPassKeyAndMail(t *testing.T) {
	e := newEnv(t)
	pass, link := e.signup("Ann.Lee@Example.COM")
	if !strings.HasPrefix(pass, "trawl_") || len(pass) != len("trawl_")+64 {
		t.Fatalf("pass key %q: want trawl_ and 64 hex digits", pass)
	}
	k, a, err := e.authed(pass)
	if err != nil {
		t.Fatalf("pass key does not authenticate: %v", err)
	}
	if k.Kind != signup.KindPass || !k.ExpiresAt.Equal(t0.Add(billing.PassTTL)) || k.Hash != billing.HashKey(pass) || !strings.HasPrefix(pass, k.Prefix) {
		t.Fatalf("pass key record %+v", k)
	}
	if a.Email != "Ann.Lee@example.com" || a.Plan != ledger.PlanFree {
		t.Fatalf("account %+v: want the address with its domain lower-cased, plan free", a)
	}
	g := e.prices.Grants.Pass
	if got := e.bucket(a.ID, ledger.BucketPass); got != g.Credits.MC() {
		t.Fatalf("pass bucket %s, want %s", got, g.Credits)
	}
	if !a.PassExpires.Equal(t0.Add(time.Duration(g.Days) * 24 * time.Hour)) {
		t.Fatalf("pass expires %s", a.PassExpires)
	}
	if e.bucket(a.ID, ledger.BucketSignup) != 0 {
		t.Fatal("sign-up credit before verification")
	}
	if a.SpendCapMC != e.prices.Plans[ledger.PlanFree].MonthlyCap.MC() {
		t.Fatalf("spend cap %s, want the free plan's", a.SpendCapMC)
	}
	m := e.mailer.last(t)
	if m.subject == "" || !strings.HasPrefix(link, e.srv.URL+"/signup/verify?token=") {
		t.Fatalf("mail %+v, link %q", m, link)
	}
	tok, err := signup.ParseToken(secret, strings.TrimPrefix(link, e.srv.URL+"/signup/verify?token="), e.clock())
	if err != nil || tok.Account != a.ID || tok.Email != a.Email || !tok.Expires.Equal(t0.Add(signup.DefaultTokenTTL)) {
		t.Fatalf("link token %+v, %v", tok, err)
	}
	// The pass key lapses after 24 hours.
	e.advance(billing.PassTTL)
	if _, _, err := e.authed(pass); !errors.Is(err, billing.ErrExpiredKey) {
		t.Fatalf("pass key after 24 h: %v, want expired", err)
	}
	e.audit()
}

func TestVerifyGivesPermanentKeyOnce(t *testing.T) {
	e := newEnv(t)
	pass, link := e.signup("ann@example.com")
	acct := e.accountOf(pass).ID

	// Opening the link shows a button; it changes nothing yet.
	u, _ := url.Parse(link)
	g := e.do(http.MethodGet, u.RequestURI(), "", "")
	if g.status != http.StatusOK || !strings.Contains(g.body, `id="verify"`) || pageKey(g.body) != "" {
		t.Fatalf("GET link: %d %s", g.status, g.body)
	}
	if _, _, err := e.authed(pass); err != nil {
		t.Fatalf("pass key after only opening the link: %v", err)
	}

	r := e.verify(link)
	perm := pageKey(r.body)
	if r.status != http.StatusOK || perm == "" || perm == pass {
		t.Fatalf("verify: %d key %q: %s", r.status, perm, r.body)
	}
	k, a, err := e.authed(perm)
	if err != nil || k.Kind != signup.KindPermanent || !k.ExpiresAt.IsZero() || a.ID != acct {
		t.Fatalf("permanent key: %+v %v", k, err)
	}
	if _, _, err := e.authed(pass); !errors.Is(err, billing.ErrRevokedKey) {
		t.Fatalf("pass key after verification: %v, want revoked", err)
	}
	signupMC := e.prices.Grants.Signup.MC()
	if got := e.bucket(acct, ledger.BucketSignup); got != signupMC {
		t.Fatalf("sign-up bucket %s, want %s", got, e.prices.Grants.Signup)
	}

	// Again, through the button and through a second GET: no key, no
	// second grant.
	for range 2 {
		r := e.verify(link)
		if r.status != http.StatusOK || pageKey(r.body) != "" || !strings.Contains(r.body, `id="already-verified"`) {
			t.Fatalf("second verify: %d %s", r.status, r.body)
		}
	}
	r = e.form("/signup/verify", url.Values{"token": {u.Query().Get("token")}})
	if r.status != http.StatusOK || pageKey(r.body) != "" {
		t.Fatalf("second POST: %d %s", r.status, r.body)
	}
	if got := e.bucket(acct, ledger.BucketSignup); got != signupMC {
		t.Fatalf("sign-up bucket after repeats %s, want %s", got, e.prices.Grants.Signup)
	}
	keys, _ := e.state.AccountKeys(acct)
	if len(keys) != 2 {
		t.Fatalf("%d keys after repeated verification, want pass + permanent", len(keys))
	}
	e.audit()
}

func TestVerifyRefusesBadLinks(t *testing.T) {
	e := newEnv(t)
	pass, link := e.signup("ann@example.com")
	a := e.accountOf(pass)
	tokenOf := func(link string) string { u, _ := url.Parse(link); return u.Query().Get("token") }
	good := tokenOf(link)
	for _, tc := range []struct {
		name, token, want string
	}{
		{"no token", "", "not valid"},
		{"tampered", good[:len(good)-2] + "AA", "not valid"},
		{"other secret", signup.SignToken([]byte("a different secret, thirty-two bytes"), signup.Token{Account: a.ID, Email: a.Email, Expires: t0.Add(time.Hour)}), "not valid"},
		{"no such account", signup.SignToken(secret, signup.Token{Account: "acct_gone", Email: a.Email, Expires: t0.Add(time.Hour)}), "not valid"},
		{"other address", signup.SignToken(secret, signup.Token{Account: a.ID, Email: "eve@example.com", Expires: t0.Add(time.Hour)}), "not valid"},
		{"expired", signup.SignToken(secret, signup.Token{Account: a.ID, Email: a.Email, Expires: t0}), "expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []reply{
				e.do(http.MethodGet, "/signup/verify?token="+url.QueryEscape(tc.token), "", ""),
				e.form("/signup/verify", url.Values{"token": {tc.token}}),
			} {
				if r.status != http.StatusBadRequest || !strings.Contains(r.body, tc.want) || pageKey(r.body) != "" {
					t.Fatalf("%d, want 400 saying %q: %s", r.status, tc.want, r.body)
				}
			}
		})
	}
	// The real link, two days and a second later.
	e.advance(signup.DefaultTokenTTL + time.Second)
	if r := e.form("/signup/verify", url.Values{"token": {good}}); r.status != http.StatusBadRequest || !strings.Contains(r.body, "expired") {
		t.Fatalf("expired link: %d %s", r.status, r.body)
	}
	if e.bucket(a.ID, ledger.BucketSignup) != 0 {
		t.Fatal("a bad link granted credit")
	}
}

func TestSignupRefusesVerifiedAddress(t *testing.T) {
	e := newEnv(t)
	_, link := e.signup("ann@example.com")
	e.verify(link)
	mails := len(e.mailer.sent)
	r := e.form("/signup", url.Values{"email": {"ANN@example.com"}})
	if r.status != http.StatusConflict || pageKey(r.body) != "" || !strings.Contains(r.body, "already verified") || !strings.Contains(r.body, "POST /v1/keys") {
		t.Fatalf("second sign-up of a verified address: %d %s", r.status, r.body)
	}
	if len(e.mailer.sent) != mails {
		t.Fatal("a refused sign-up sent mail")
	}
}

func TestSignupBoundsUnverifiedRepeats(t *testing.T) {
	e := newEnv(t)
	for range 3 {
		e.signup("ann@example.com")
	}
	r := e.form("/signup", url.Values{"email": {"ann@example.com"}})
	if r.status != http.StatusTooManyRequests || pageKey(r.body) != "" {
		t.Fatalf("fourth sign-up in a day: %d %s", r.status, r.body)
	}
	e.signup("bob@example.com") // another address is not affected
	e.advance(25 * time.Hour)
	e.signup("ann@example.com") // a day later it works again
}

func TestSignupWhenMailFails(t *testing.T) {
	e := newEnv(t)
	e.mailer.fail.Store(true)
	r := e.form("/signup", url.Values{"email": {"ann@example.com"}})
	pass := pageKey(r.body)
	if r.status != http.StatusOK || pass == "" || !strings.Contains(r.body, `id="mail-failed"`) {
		t.Fatalf("sign-up with the mail down: %d %s", r.status, r.body)
	}
	if _, _, err := e.authed(pass); err != nil {
		t.Fatalf("pass key: %v", err)
	}
}

func TestSignupWhenLedgerDown(t *testing.T) {
	e := newEnv(t)
	e.led.SetDown(true)
	r := e.form("/signup", url.Values{"email": {"ann@example.com"}})
	if r.status != http.StatusServiceUnavailable || pageKey(r.body) != "" || len(e.mailer.sent) != 0 {
		t.Fatalf("sign-up with the ledger down: %d %s", r.status, r.body)
	}
}

// decode reads a JSON answer into a T.
func decode[T any](t *testing.T, r reply) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.body), &v); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return v
}

func errCode(t *testing.T, r reply) string {
	t.Helper()
	b := decode[billing.ErrorBody](t, r)
	if b.Message == "" {
		t.Errorf("error %q without a message", b.Error)
	}
	return b.Error
}

// verifiedAccount signs up and verifies, returning the permanent key.
func (e *env) verifiedAccount(email string) (pass, perm string) {
	e.t.Helper()
	pass, link := e.signup(email)
	perm = pageKey(e.verify(link).body)
	if perm == "" {
		e.t.Fatal("no permanent key")
	}
	return pass, perm
}

func TestKeysListCreateAndLimit(t *testing.T) {
	e := newEnv(t)
	pass, perm := e.verifiedAccount("ann@example.com")

	r := e.do(http.MethodGet, "/v1/keys", perm, "")
	list := decode[signup.KeyList](t, r)
	if r.status != http.StatusOK || len(list.Keys) != 2 || list.ActiveKeys != 1 || list.Limit != 2 {
		t.Fatalf("GET /v1/keys: %d %+v", r.status, list)
	}
	if strings.Contains(r.body, "hash") || strings.Contains(r.body, billing.HashKey(perm)) || strings.Contains(r.body, perm) {
		t.Fatalf("the list shows a hash or a secret: %s", r.body)
	}
	p, k := list.Keys[0], list.Keys[1] // same time: the order is by id
	if p.Kind != signup.KindPass {
		p, k = k, p
	}
	if p.Kind != signup.KindPass || !p.Revoked || p.Active || p.ExpiresAt == nil || !strings.HasPrefix(pass, p.Prefix) {
		t.Fatalf("pass key in the list: %+v", p)
	}
	if k.Kind != signup.KindPermanent || k.Revoked || !k.Active || k.ExpiresAt != nil || !k.Current || !strings.HasPrefix(perm, k.Prefix) {
		t.Fatalf("permanent key in the list: %+v", k)
	}

	// Free plan: two active keys.
	r = e.do(http.MethodPost, "/v1/keys", perm, `{"name": "ci"}`)
	nk := decode[signup.NewKey](t, r)
	if r.status != http.StatusCreated || !strings.HasPrefix(nk.Key, "trawl_") || nk.Kind != signup.KindPermanent || !nk.Active || nk.ID == "" {
		t.Fatalf("POST /v1/keys: %d %s", r.status, r.body)
	}
	if _, a, err := e.authed(nk.Key); err != nil || a.ID != e.accountOf(perm).ID {
		t.Fatalf("new key: %v", err)
	}
	if nk.Name != "ci" {
		t.Fatalf("the new key's name: %q", nk.Name)
	}
	named := false
	for _, k := range decode[signup.KeyList](t, e.do(http.MethodGet, "/v1/keys", perm, "")).Keys {
		named = named || (k.ID == nk.ID && k.Name == "ci")
	}
	if !named {
		t.Fatal("the key's name is not in the list")
	}
	r = e.do(http.MethodPost, "/v1/keys", nk.Key, "")
	if r.status != http.StatusConflict || errCode(t, r) != signup.CodeKeyLimit {
		t.Fatalf("third key on free: %d %s", r.status, r.body)
	}

	// Supporter (after a paid top-up): ten.
	acct := e.accountOf(perm).ID
	e.ok(ledger.Command{Type: ledger.CmdTopup, Topup: &ledger.Topup{Account: acct, PaymentID: "pay_1", USD: 5, Credits: ledger.Credits(1000)}})
	for i := 3; i <= 10; i++ {
		if r := e.do(http.MethodPost, "/v1/keys", perm, ""); r.status != http.StatusCreated {
			t.Fatalf("key %d on supporter: %d %s", i, r.status, r.body)
		}
	}
	r = e.do(http.MethodPost, "/v1/keys", perm, "")
	if r.status != http.StatusConflict || errCode(t, r) != signup.CodeKeyLimit || !strings.Contains(r.body, "10") {
		t.Fatalf("eleventh key on supporter: %d %s", r.status, r.body)
	}
	if l := decode[signup.KeyList](t, e.do(http.MethodGet, "/v1/keys", perm, "")); l.ActiveKeys != 10 || l.Limit != 10 {
		t.Fatalf("supporter list: %d active, limit %d", l.ActiveKeys, l.Limit)
	}
	e.audit()
}

func TestKeysRevoke(t *testing.T) {
	e := newEnv(t)
	_, perm := e.verifiedAccount("ann@example.com")
	_, other := e.verifiedAccount("bob@example.com")
	permID := func(key string) string { k, _, _ := e.authed(key); return k.ID }

	// The last active key stays.
	r := e.do(http.MethodDelete, "/v1/keys/"+permID(perm), perm, "")
	if r.status != http.StatusConflict || errCode(t, r) != signup.CodeLastKey {
		t.Fatalf("revoke the last key: %d %s", r.status, r.body)
	}
	second := decode[signup.NewKey](t, e.do(http.MethodPost, "/v1/keys", perm, ""))

	// Another account's key, or none: 404.
	for _, id := range []string{permID(other), "key_nope"} {
		if r := e.do(http.MethodDelete, "/v1/keys/"+id, perm, ""); r.status != http.StatusNotFound || errCode(t, r) != billing.CodeNotFound {
			t.Fatalf("revoke %s: %d %s", id, r.status, r.body)
		}
	}
	if _, _, err := e.authed(other); err != nil {
		t.Fatalf("the other account's key: %v", err)
	}

	// A key may revoke itself while another remains; then it is refused.
	r = e.do(http.MethodDelete, "/v1/keys/"+permID(perm), perm, "")
	got := decode[signup.KeyInfo](t, r)
	if r.status != http.StatusOK || !got.Revoked || got.Active {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	if _, _, err := e.authed(perm); !errors.Is(err, billing.ErrRevokedKey) {
		t.Fatalf("revoked key: %v", err)
	}
	if r := e.do(http.MethodGet, "/v1/keys", perm, ""); r.status != http.StatusUnauthorized || errCode(t, r) != billing.CodeUnauthorized {
		t.Fatalf("revoked key on /v1/keys: %d %s", r.status, r.body)
	}
	// Revoking again is a no-op (200); the remaining key is the last.
	if r := e.do(http.MethodDelete, "/v1/keys/"+got.ID, second.Key, ""); r.status != http.StatusOK {
		t.Fatalf("revoke again: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodDelete, "/v1/keys/"+second.ID, second.Key, ""); r.status != http.StatusConflict {
		t.Fatalf("revoke the new last key: %d %s", r.status, r.body)
	}
}

func TestKeysNeedVerification(t *testing.T) {
	e := newEnv(t)
	pass, _ := e.signup("ann@example.com")
	r := e.do(http.MethodPost, "/v1/keys", pass, "")
	if r.status != http.StatusForbidden || errCode(t, r) != signup.CodeNotVerified {
		t.Fatalf("a pass key makes a key: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodGet, "/v1/keys", pass, ""); r.status != http.StatusOK {
		t.Fatalf("a pass key lists keys: %d %s", r.status, r.body)
	}
}

func TestKeysAPIErrors(t *testing.T) {
	e := newEnv(t)
	_, perm := e.verifiedAccount("ann@example.com")
	for _, tc := range []struct {
		method, path, key, body string
		status                  int
		code                    string
	}{
		{"GET", "/v1/keys", "", "", 401, billing.CodeUnauthorized},
		{"GET", "/v1/keys", "trawl_0000", "", 401, billing.CodeUnauthorized},
		{"POST", "/v1/keys", perm, `{"nme": "x"}`, 400, billing.CodeBadInput},
		{"POST", "/v1/keys", perm, `{"name": 3}`, 400, billing.CodeBadInput},
		{"POST", "/v1/keys", perm, `{"name": "x"} {}`, 400, billing.CodeBadInput},
		{"POST", "/v1/keys", perm, `{"name": "` + strings.Repeat("x", 65) + `"}`, 400, billing.CodeBadInput},
		{"POST", "/v1/keys", perm, `{` + strings.Repeat(" ", 17<<10) + `}`, 413, billing.CodeTooLarge},
		{"PUT", "/v1/keys", perm, "", 405, billing.CodeMethodNotAllowed},
		{"GET", "/v1/keys/key_x", perm, "", 405, billing.CodeMethodNotAllowed},
		// Other /v1/ paths are billing's row (its 404), not this package's.
	} {
		r := e.do(tc.method, tc.path, tc.key, tc.body)
		if r.status != tc.status || errCode(t, r) != tc.code {
			t.Errorf("%s %s %.30s: %d %s, want %d %s", tc.method, tc.path, tc.body, r.status, r.body, tc.status, tc.code)
		}
	}
	if r := e.do("GET", "/v1/keys", "", ""); r.header.Get("WWW-Authenticate") == "" {
		t.Error("401 without WWW-Authenticate")
	}
	e.led.SetDown(true)
	if r := e.do("POST", "/v1/keys", perm, ""); r.status != http.StatusServiceUnavailable || errCode(t, r) != billing.CodeLedger {
		t.Fatalf("ledger down: %d %s", r.status, r.body)
	}
}

type testIdentity struct{}

// With the gate's identity (Config.Billing.Identity: trawl_auth's), the keys
// API takes the caller from it and never reads the request's key.
func TestKeysTakeTheGatesIdentity(t *testing.T) {
	e := newEnv(t)
	_, ann := e.verifiedAccount("ann@example.com")
	_, bob := e.verifiedAccount("bob@example.com")
	k, a, err := e.authed(ann)
	if err != nil {
		t.Fatal(err)
	}
	h := serve(t, signup.Config{
		Billing: billing.Config{State: e.state, Ledger: e.led, Prices: e.prices, Now: e.clock, Logger: quiet(),
			Identity: func(ctx context.Context) (*ledger.Key, *ledger.Account) {
				if ctx.Value(testIdentity{}) == nil {
					return nil, nil
				}
				return k, a
			}},
		Mailer: e.mailer, BaseURL: "https://gate.example", TokenSecret: secret,
	})
	list := func(identity bool, bearer string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/v1/keys", nil)
		if identity {
			r = r.WithContext(context.WithValue(r.Context(), testIdentity{}, true))
		}
		r.Header.Set("Authorization", "Bearer "+bearer)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := list(true, bob)
	var got signup.KeyList
	if json.Unmarshal(w.Body.Bytes(), &got); w.Code != http.StatusOK || len(got.Keys) != 2 || !slices.ContainsFunc(got.Keys, func(ki signup.KeyInfo) bool { return ki.ID == k.ID && ki.Current }) {
		t.Errorf("ann's identity with bob's key in the header: %d %s", w.Code, w.Body)
	}
	if w := list(false, bob); w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") == "" {
		t.Errorf("no identity, bob's key in the header: %d %s", w.Code, w.Body)
	}
}

// A form posted from another site is refused; the sign-up page's own posts
// (same origin) are not.
func TestSignupRefusesCrossSitePosts(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		site string
		want int
	}{{"cross-site", http.StatusForbidden}, {"same-origin", http.StatusOK}} {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/signup", strings.NewReader("email=ann%40example.com"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", tc.site)
		if r := e.send(req); r.status != tc.want {
			t.Errorf("%s post: %d, want %d", tc.site, r.status, tc.want)
		}
	}
}

// One network address gets a few sign-ups an hour, whatever the e-mail
// addresses: pass keys carry credit before any verification.
func TestSignupBoundsSignupsPerNetworkAddress(t *testing.T) {
	perAddress = 2
	e := newEnv(t)
	perAddress = -1
	e.signup("a1@example.com")
	e.signup("a2@example.com")
	r := e.form("/signup", url.Values{"email": {"a3@example.com"}})
	if r.status != http.StatusTooManyRequests || pageKey(r.body) != "" || r.header.Get("Retry-After") == "" {
		t.Fatalf("third sign-up from one address in an hour: %d %v", r.status, r.header)
	}
	e.mailer.mu.Lock()
	n := len(e.mailer.sent)
	e.mailer.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d mails sent, want 2", n)
	}
}

// The bound counts the client address the gate's front found (behind a
// trusted proxy, the forwarded one), and a whole IPv6 /64 as one address.
func TestSignupBoundsByClientAddressAndIPv6Prefix(t *testing.T) {
	perAddress = 1
	e := newEnv(t)
	perAddress = -1
	from := func(ip, email string) int {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/signup", strings.NewReader(url.Values{"email": {email}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set(testClientHeader, ip)
		return e.send(req).status
	}
	// Two clients behind one proxy: one bucket each.
	if s := from("198.51.100.1", "b1@example.com"); s != http.StatusOK {
		t.Fatalf("first client: %d", s)
	}
	if s := from("198.51.100.2", "b2@example.com"); s != http.StatusOK {
		t.Fatalf("second client behind the same proxy: %d, want its own bucket", s)
	}
	// Two addresses of one /64: one bucket.
	if s := from("2001:db8:7:7::1", "b3@example.com"); s != http.StatusOK {
		t.Fatalf("first IPv6 address: %d", s)
	}
	if s := from("2001:db8:7:7:dead:beef::2", "b4@example.com"); s != http.StatusTooManyRequests {
		t.Fatalf("another address in the same /64: %d, want 429", s)
	}
	if s := from("2001:db8:7:8::1", "b5@example.com"); s != http.StatusOK {
		t.Fatalf("the next /64: %d", s)
	}
}

// A gate with no SMTP server logs the mail; its page must not claim the
// mail was sent.
func TestSignupWithoutSMTPSaysTheLinkIsInTheLog(t *testing.T) {
	e := newEnvWithMailer(t, signup.LogMailer{Logger: quiet()})
	r := e.form("/signup", url.Values{"email": {"nomail@example.com"}})
	if r.status != http.StatusOK || pageKey(r.body) == "" {
		t.Fatalf("sign-up: %d", r.status)
	}
	if strings.Contains(r.body, `id="mail-sent"`) || !strings.Contains(r.body, `id="mail-logged"`) {
		t.Fatalf("page without SMTP claims a sent mail or does not say where the link is:\n%s", r.body)
	}
}

package billing

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trawlhq/trawl/gate/payments"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/ledger"
	"github.com/trawlhq/trawl/ledger/ledgertest"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func memStore(t testing.TB, name string) *store.Store {
	t.Helper()
	st, err := store.Open(name, &store.Options{FS: vfs.NewMem(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Keys of the test world (the secrets; the ledger stores their hashes).
const (
	keyUser     = "tk_user_0123456789"
	keyUser2    = "tk_user2_0123456789"
	keyAuditor  = "tk_audit_0123456789"
	keyRevoked  = "tk_revoked_0123456789"
	keyPassOld  = "tk_pass_old_0123456789"
	keyPassNew  = "tk_pass_new_0123456789"
	keyPassBare = "tk_pass_bare_0123456789" // a pass with no expires_at
)

type env struct {
	t     *testing.T
	state *ledger.State
	led   *ledgertest.Direct
	holds *ledger.HoldsClient
	srv   *httptest.Server
	cfg   Config
	n     int
}

// newEnv builds a State with two customers (acct1: 100 signup credits,
// acct2: 50) and an auditor, serves the billing API over real HTTP with
// the Local provider configured by lc, and a holds client for region eu.
func newEnv(t *testing.T, lc payments.LocalConfig) *env {
	t.Helper()
	return newEnvWith(t, func(base string) (payments.Provider, error) {
		lc.BaseURL = base
		return payments.NewLocal(lc)
	})
}

// newEnvWith is newEnv with the provider made by mk (given the server's
// base URL).
func newEnvWith(t *testing.T, mk func(base string) (payments.Provider, error)) *env {
	t.Helper()
	st, err := ledger.OpenState(memStore(t, "state"))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, state: st, led: ledgertest.NewDirect(st)}
	var h http.Handler
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(e.srv.Close)
	provider, err := mk(e.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	e.holds, err = ledger.NewHoldsClient(ledger.HoldsConfig{Region: "eu", Store: memStore(t, "holds"), Ledger: e.led, Now: func() time.Time { return t0 }, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	e.cfg = Config{
		State: st, Ledger: e.led, Holds: e.holds, Prices: DefaultPrices(), Provider: provider,
		Region: "eu", PublicURL: e.srv.URL, Now: func() time.Time { return t0 }, Logger: quiet(),
	}
	h = NewHandler(e.cfg)

	e.account("acct1", ledger.Credits(100))
	e.account("acct2", ledger.Credits(50))
	e.account("audit", 0)
	e.key("k1", "acct1", keyUser, ledger.RoleUser, "permanent", time.Time{})
	e.key("k2", "acct2", keyUser2, ledger.RoleUser, "permanent", time.Time{})
	e.key("ka", "audit", keyAuditor, ledger.RoleAuditor, "permanent", time.Time{})
	e.key("kr", "acct1", keyRevoked, ledger.RoleUser, "permanent", time.Time{})
	e.ok(ledger.Command{Type: ledger.CmdRevokeKey, RevokeKey: &ledger.RevokeKey{KeyID: "kr"}})
	e.key("kpo", "acct1", keyPassOld, ledger.RoleUser, "pass", t0.Add(-time.Second))
	e.key("kpn", "acct1", keyPassNew, ledger.RoleUser, "pass", t0.Add(time.Hour))
	e.key("kpb", "acct1", keyPassBare, ledger.RoleUser, "pass", time.Time{}) // created at t0-25h below
	return e
}

// ok submits a setup command and fails the test on a refusal.
func (e *env) ok(c ledger.Command) *ledger.Result {
	e.t.Helper()
	e.n++
	if c.ID == "" {
		c.ID = fmt.Sprintf("setup-%d", e.n)
	}
	if c.Time.IsZero() {
		c.Time = t0
	}
	res, err := e.led.Submit(context.Background(), &c)
	if err != nil || res.Error != "" {
		e.t.Fatalf("%s: %v %+v", c.Type, err, res)
	}
	return res
}

func (e *env) account(id string, signup ledger.MC) {
	e.ok(ledger.Command{Type: ledger.CmdCreateAccount, CreateAccount: &ledger.CreateAccount{Account: id, Email: id + "@example.com", Plan: ledger.PlanFree}})
	if signup > 0 {
		e.ok(ledger.Command{Type: ledger.CmdGrant, Grant: &ledger.Grant{Account: id, Bucket: ledger.BucketSignup, Amount: signup}})
	}
}

func (e *env) key(id, acct, secret, role, kind string, expires time.Time) {
	at := t0
	if id == "kpb" {
		at = t0.Add(-25 * time.Hour)
	}
	e.ok(ledger.Command{Type: ledger.CmdAddKey, Time: at, AddKey: &ledger.Key{
		ID: id, Account: acct, Hash: HashKey(secret), Prefix: secret[:6], Role: role, Kind: kind, ExpiresAt: expires,
	}})
}

func (e *env) acct(id string) *ledger.Account {
	e.t.Helper()
	a, err := e.state.Account(id)
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

func (e *env) bucket(acct, bucket string) ledger.MC {
	e.t.Helper()
	v, err := e.state.Balance(ledger.BucketAccount(acct, bucket))
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

func (e *env) audit() {
	e.t.Helper()
	rep, err := e.state.Audit()
	if err != nil {
		e.t.Fatal(err)
	}
	if !rep.OK() {
		e.t.Fatalf("audit: %v", rep.Violations)
	}
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
}

// errCode is the error code of a JSON error body, checking it has a message.
func (r reply) errCode(t *testing.T) string {
	t.Helper()
	var b ErrorBody
	r.json(t, &b)
	if b.Message == "" {
		t.Errorf("error %q without a message: %s", b.Error, r.body)
	}
	return b.Error
}

// do sends a request; hdr are header name/value pairs. "key" is sent as a
// bearer token unless empty.
func (e *env) do(method, path, key, body string, hdr ...string) reply {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	u := path
	if strings.HasPrefix(path, "/") {
		u = e.srv.URL + path
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

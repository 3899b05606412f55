package billing

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/gate/payments"
	"github.com/trawlhq/trawl/ledger"
)

// An account reads and rotates its webhook secret with its own keys: the
// balance shows it once it has one, the settings route makes a new one on
// "rotate" and takes the secret back unchanged; an auditor's key neither
// sees nor changes one.
func TestWebhookSecretSettings(t *testing.T) {
	e := newEnv(t, payments.LocalConfig{})
	type balance struct {
		WebhookSecret *string `json:"webhook_secret"`
	}
	read := func(key string) *string {
		t.Helper()
		r := e.do("GET", "/v1/billing/balance", key, "")
		if r.status != 200 {
			t.Fatalf("balance: %d %s", r.status, r.body)
		}
		var b balance
		r.json(t, &b)
		return b.WebhookSecret
	}
	if s := read(keyUser); s != nil {
		t.Fatalf("a secret %q before any", *s)
	}
	r := e.do("POST", "/v1/billing/settings", keyUser, `{"webhook_secret":"rotate"}`)
	var got Settings
	r.json(t, &got)
	if r.status != 200 || !strings.HasPrefix(got.WebhookSecret, "whsec_") || len(got.WebhookSecret) != len("whsec_")+64 {
		t.Fatalf("rotate: %d %s", r.status, r.body)
	}
	first := got.WebhookSecret
	if s := read(keyUser); s == nil || *s != first || e.acct("acct1").WebhookSecret != first {
		t.Fatalf("balance after rotate: %v", s)
	}
	// Another account's key sees its own (none), never this one.
	if s := read(keyUser2); s != nil {
		t.Fatalf("acct2 sees %q", *s)
	}
	// The secret sent back changes nothing.
	r = e.do("POST", "/v1/billing/settings", keyUser, `{"webhook_secret":"`+first+`"}`)
	r.json(t, &got)
	if r.status != 200 || got.WebhookSecret != first {
		t.Fatalf("sent back: %d %s", r.status, r.body)
	}
	r = e.do("POST", "/v1/billing/settings", keyUser, `{"webhook_secret":"rotate"}`)
	r.json(t, &got)
	if r.status != 200 || got.WebhookSecret == first || e.acct("acct1").WebhookSecret != got.WebhookSecret {
		t.Fatalf("second rotate: %d %s", r.status, r.body)
	}
	for _, body := range []string{`{"webhook_secret":"my-own-secret-value"}`, `{"webhook_secret":""}`, `{"webhook_secret":1}`} {
		if r := e.do("POST", "/v1/billing/settings", keyUser, body); r.status != 400 || r.errCode(t) != CodeBadInput {
			t.Errorf("%s: %d %s", body, r.status, r.body)
		}
	}
	// An auditor's key: the account's secret exists, and is not shown.
	s := "whsec_" + strings.Repeat("d", 64)
	e.ok(ledger.Command{Type: ledger.CmdSettings, Settings: &ledger.Settings{Account: "audit", WebhookSecret: &s}})
	if got := read(keyAuditor); got != nil {
		t.Errorf("an auditor's key sees the secret %q", *got)
	}
	if r := e.do("POST", "/v1/billing/settings", keyAuditor, `{"webhook_secret":"rotate"}`); r.status != 403 || r.errCode(t) != CodeForbidden {
		t.Errorf("an auditor rotates: %d %s", r.status, r.body)
	}
	if e.acct("audit").WebhookSecret != s {
		t.Error("the auditor's rotation changed the secret")
	}
}

// WebhookSecret (a cell asking through its gate) makes an account's first
// secret once and gives the same after; the account then reads it.
func TestWebhookSecretOnFirstUse(t *testing.T) {
	e := newEnv(t, payments.LocalConfig{})
	ctx := context.Background()
	s1, err := WebhookSecret(ctx, e.cfg, "acct2")
	if err != nil || !strings.HasPrefix(s1, "whsec_") {
		t.Fatalf("first use: %q %v", s1, err)
	}
	s2, err := WebhookSecret(ctx, e.cfg, "acct2")
	if err != nil || s2 != s1 {
		t.Fatalf("second use: %q %v, want %q", s2, err, s1)
	}
	r := e.do("GET", "/v1/billing/balance", keyUser2, "")
	var b Balance
	r.json(t, &b)
	if b.WebhookSecret != s1 {
		t.Errorf("the account reads %q, its deliveries are signed with %q", b.WebhookSecret, s1)
	}
	if _, err := WebhookSecret(ctx, e.cfg, "nobody"); !errors.Is(err, ErrNoAccount) {
		t.Errorf("unknown account: %v", err)
	}
}

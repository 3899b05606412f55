package ledger

import (
	"strings"
	"testing"
)

// An account's webhook secret: set by a settings command, replaced by a
// rotation, kept by a first-use command that finds one already (two
// regions racing to make it end with one), refused when not a secret; it
// is in no journal entry.
func TestWebhookSecret(t *testing.T) {
	a := &applier{t: t, s: newState(t)}
	newAccount(a, "acct1", Credits(5))
	secret := func() string {
		t.Helper()
		acct, err := a.s.Account("acct1")
		if err != nil {
			t.Fatal(err)
		}
		return acct.WebhookSecret
	}
	str := func(s string) *string { return &s }
	if s := secret(); s != "" {
		t.Fatalf("a new account has a secret %q", s)
	}
	first := "whsec_" + strings.Repeat("a", 64)
	a.ok(Command{Type: CmdSettings, Settings: &Settings{Account: "acct1", WebhookSecret: str(first), WebhookSecretIfUnset: true}})
	if s := secret(); s != first {
		t.Fatalf("first use: %q", s)
	}
	// The other region's first use, later: the first secret stays.
	a.ok(Command{Type: CmdSettings, Settings: &Settings{Account: "acct1", WebhookSecret: str("whsec_" + strings.Repeat("b", 64)), WebhookSecretIfUnset: true}})
	if s := secret(); s != first {
		t.Fatalf("a second first use replaced the secret: %q", s)
	}
	// A rotation replaces it; the spend cap is untouched.
	rotated := "whsec_" + strings.Repeat("c", 64)
	a.ok(Command{Type: CmdSettings, Settings: &Settings{Account: "acct1", WebhookSecret: str(rotated)}})
	if s := secret(); s != rotated {
		t.Fatalf("rotation: %q", s)
	}
	for _, bad := range []string{"", "short", strings.Repeat("x", MaxWebhookSecret+1), "whsec_with a space in it", "whsec_\nnewline_inside_it"} {
		capMC := Credits(1)
		r := a.do(Command{Type: CmdSettings, Settings: &Settings{Account: "acct1", SpendCapMC: &capMC, WebhookSecret: str(bad)}})
		if r.Error != ErrCodeInvalid {
			t.Errorf("secret %q: %+v", bad, r)
		}
	}
	acct, _ := a.s.Account("acct1")
	if acct.WebhookSecret != rotated || acct.SpendCapMC != 0 {
		t.Errorf("a refused settings command changed the account: %+v", acct)
	}
	// Nowhere in the journal.
	n := 0
	if err := a.s.Journal(0, func(e *Entry) (bool, error) {
		n++
		for _, f := range []string{e.ID, e.Debit, e.Credit, e.Kind, e.Receipt} {
			if strings.Contains(f, "whsec_") {
				t.Errorf("journal entry %+v holds the secret", e)
			}
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no journal entries read")
	}
}

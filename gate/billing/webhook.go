package billing

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/trawlhq/trawl/ledger"
)

// An account's webhook secret signs its Firecrawl webhooks
// (docs/firecrawl.md, "Webhooks"): X-Firecrawl-Signature over the body,
// and trawl's own timestamped x-svc-signature. It is kept in the ledger's
// account (ledger.Account.WebhookSecret), replicated to every region, so
// every cell of every region signs an account's deliveries alike. A gate
// makes it on the account's first webhook (WebhookSecret, asked by the
// cell that takes the job) or when the account rotates it
// (POST /v1/billing/settings {"webhook_secret": "rotate"}); the account's
// own keys read it on GET /v1/billing/balance and in the settings answer.

// WebhookSecretRotate is the settings value that makes a new secret.
const WebhookSecretRotate = "rotate"

// newWebhookSecret is a new secret: "whsec_" and 32 random bytes in hex.
func newWebhookSecret() string {
	var b [32]byte
	rand.Read(b[:])
	return "whsec_" + hex.EncodeToString(b[:])
}

// seesWebhookSecret reports whether key k may read and rotate its
// account's webhook secret: the account's own keys, not an auditor's.
func seesWebhookSecret(k *ledger.Key) bool { return k != nil && k.Role != ledger.RoleAuditor }

// ErrNoAccount is WebhookSecret for an account the ledger does not know.
var ErrNoAccount = errors.New("billing: no such account")

// WebhookSecret returns account's webhook secret, making it first when
// the account has none (a settings command that keeps a secret made
// meanwhile, by another region: both then read the same). cfg needs State
// and Ledger.
func WebhookSecret(ctx context.Context, cfg Config, account string) (string, error) {
	cfg = cfg.withDefaults()
	a, err := cfg.State.Account(account)
	if errors.Is(err, ledger.ErrNotFound) {
		return "", ErrNoAccount
	} else if err != nil {
		return "", err
	}
	if a.WebhookSecret != "" {
		return a.WebhookSecret, nil
	}
	s := newWebhookSecret()
	res, err := submit(ctx, cfg, &ledger.Command{
		ID: "webhook-secret/" + account + "/" + rand.Text(), Type: ledger.CmdSettings, Time: cfg.Now(),
		Settings: &ledger.Settings{Account: account, WebhookSecret: &s, WebhookSecretIfUnset: true},
	})
	if err != nil {
		return "", err
	}
	if res.Error != "" {
		return "", fmt.Errorf("billing: the ledger refused the webhook secret: %s %s", res.Error, res.Message)
	}
	if a, err = cfg.State.Account(account); err != nil {
		return "", err
	}
	if a.WebhookSecret == "" {
		return "", errors.New("billing: the ledger replica trails: the new webhook secret is not in it yet")
	}
	return a.WebhookSecret, nil
}

// Package hooksecret is the contract by which a cell gets an account's
// webhook secret from its region's gate (docs/firecrawl.md, "Webhooks"):
// the path, the messages and the cells' client. The secret is kept in
// the ledger (ledger.Account.WebhookSecret), so every region signs an
// account's deliveries alike; the gate reads it from its replica, making
// it on the account's first use (billing.WebhookSecret). The gate's
// server is gate.hookSecrets. Calls are signed both ways with the
// region's keys (regionauth.Call): only a member of the region can ask,
// and a cell takes only an answer a member signed. No customer key is
// involved: the cell names the account the gate signed its request for.
package hooksecret

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/trawlhq/trawl/internal/regionauth"
)

// Path is where a gate answers its cells (a public Gate row of
// internal/routes: the caller is a cell, which signs).
const Path = "/webhook-secret"

// maxAnswer bounds an answer (a secret is at most 256 bytes).
const maxAnswer = 16 << 10

// Request asks for account's secret.
type Request struct {
	Account string `json:"account"`
}

// Answer is the account's secret.
type Answer struct {
	Secret string `json:"secret"`
}

// ErrNoAccount is an account the ledger does not know.
var ErrNoAccount = errors.New("hooksecret: no such account")

// Client asks the region's gate.
type Client struct {
	regionauth.Gate
}

// WebhookSecret returns account's webhook secret; an error wrapping
// regionauth.ErrNoGate when no gate answered with the region's signature.
func (c *Client) WebhookSecret(ctx context.Context, account string) (string, error) {
	status, raw, err := c.Gate.Call(ctx, Path, Request{Account: account}, maxAnswer)
	if err != nil {
		return "", err
	}
	switch status {
	case http.StatusOK:
	case http.StatusNotFound:
		return "", ErrNoAccount
	default:
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		json.Unmarshal(raw, &e)
		return "", fmt.Errorf("hooksecret: the gate answered HTTP %d: %s", status, e.Error.Message)
	}
	var a Answer
	if err := json.Unmarshal(raw, &a); err != nil {
		return "", fmt.Errorf("hooksecret: %w", err)
	}
	if a.Secret == "" {
		return "", errors.New("hooksecret: the gate answered no secret")
	}
	return a.Secret, nil
}

package gate

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/hooksecret"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/routes"
)

// hookSecrets answers the region's cells' POST /webhook-secret
// (internal/hooksecret): an account's webhook secret from this gate's
// ledger replica, made on the account's first use (billing.WebhookSecret).
// Only a request signed with the region's keys and without an account (a
// member's own call) is answered, and the answer is signed.
type hookSecrets struct {
	Billing billing.Config
	V       *regionauth.Verifier
	Log     *slog.Logger
}

func (s *hookSecrets) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	claims, body, err := s.V.ReadCall(r, routes.Limit(r))
	if err != nil {
		s.Log.Warn("webhook secrets: refused a request not signed by a member of the region", "from", r.RemoteAddr, "err", err)
		httpjson.Error(w, http.StatusForbidden, "forbidden", "only the region's cells read webhook secrets")
		return
	}
	answer := func(status int, out any) { s.V.Keys().WriteAnswer(w, claims, status, out) }
	fail := func(status int, code, msg string) {
		answer(status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
	}
	var q hooksecret.Request
	if err := json.Unmarshal(body, &q); err != nil || q.Account == "" {
		fail(http.StatusBadRequest, "bad_input", "send {\"account\": id}")
		return
	}
	secret, err := billing.WebhookSecret(r.Context(), s.Billing, q.Account)
	switch {
	case errors.Is(err, billing.ErrNoAccount):
		fail(http.StatusNotFound, "not_found", "no such account")
		return
	case err != nil:
		s.Log.Warn("webhook secrets: the ledger", "account", q.Account, "err", err)
		fail(http.StatusServiceUnavailable, "ledger_unavailable", "the ledger did not answer; try again")
		return
	}
	answer(http.StatusOK, hooksecret.Answer{Secret: secret})
}

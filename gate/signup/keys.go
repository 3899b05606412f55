package signup

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/ledger"
)

// Error codes of the keys API, besides billing's (bad_input, unauthorized,
// not_found, method_not_allowed, ledger_unavailable, internal).
const (
	// CodeKeyLimit (409): the account has as many active keys as its plan
	// allows; revoke one first.
	CodeKeyLimit = "key_limit"
	// CodeLastKey (409): revoking this key would leave the account none.
	CodeLastKey = "last_key"
	// CodeNotVerified (403): a pass key's account makes no permanent keys
	// before its e-mail address is verified.
	CodeNotVerified = "not_verified"
)

// KeyInfo is a key as the keys API shows it: never the hash.
type KeyInfo struct {
	ID        string     `json:"id"`
	Name      string     `json:"name,omitempty"`
	Prefix    string     `json:"prefix"`
	Kind      string     `json:"kind"`
	Role      string     `json:"role"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at"` // null: never
	Revoked   bool       `json:"revoked"`
	// Active is true while the key authenticates (not revoked, not expired).
	Active bool `json:"active"`
	// Current marks the key the request was made with.
	Current bool `json:"current,omitempty"`
}

// KeyList is the body of GET /v1/keys.
type KeyList struct {
	Keys []KeyInfo `json:"keys"`
	// ActiveKeys counts the active keys; Limit is the plan's bound on them
	// (0: none).
	ActiveKeys int `json:"active_keys"`
	Limit      int `json:"limit"`
}

// NewKey is the body of POST /v1/keys: the key's record and, this once, its
// secret.
type NewKey struct {
	KeyInfo
	Key     string `json:"key"`
	Message string `json:"message"`
}

func info(k *ledger.Key, current *ledger.Key, now time.Time) KeyInfo {
	ki := KeyInfo{ID: k.ID, Name: k.Name, Prefix: k.Prefix, Kind: k.Kind, Role: k.Role, CreatedAt: k.CreatedAt.UTC(),
		Revoked: k.Revoked, Active: active(k, now), Current: current != nil && k.ID == current.ID}
	exp := k.ExpiresAt
	if exp.IsZero() && k.Kind == KindPass {
		exp = k.CreatedAt.Add(billing.PassTTL)
	}
	if !exp.IsZero() {
		e := exp.UTC()
		ki.ExpiresAt = &e
	}
	return ki
}

type authedFunc func(w http.ResponseWriter, r *http.Request, k *ledger.Key, a *ledger.Account)

// authed runs fn with the caller's key and account, any key of the
// account: Config.Billing.Identity's (the gate's trawl_auth found it), or
// when that is unset the request's key's (billing.Authenticate).
func (h *handler) authed(fn authedFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var k *ledger.Key
		var a *ledger.Account
		err := billing.ErrMissingKey
		if h.bc.Identity != nil {
			if k, a = h.bc.Identity(r.Context()); k != nil && a != nil {
				err = nil
			}
		} else {
			k, a, err = billing.Authenticate(h.bc.State, r, h.bc.Now())
		}
		if err != nil {
			if billing.IsAuthError(err) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="trawl"`)
				httpjson.Error(w, http.StatusUnauthorized, billing.CodeUnauthorized, billing.AuthMessage(err))
				return
			}
			h.apiInternal(w, "authenticate", err)
			return
		}
		fn(w, r, k, a)
	}
}

// GET /v1/keys
func (h *handler) listKeys(w http.ResponseWriter, r *http.Request, k *ledger.Key, a *ledger.Account) {
	keys, err := h.bc.State.AccountKeys(a.ID)
	if err != nil {
		h.apiInternal(w, "account keys", err)
		return
	}
	now := h.bc.Now()
	out := KeyList{Keys: []KeyInfo{}, Limit: h.keyLimit(a)}
	for _, kk := range keys {
		ki := info(kk, k, now)
		if ki.Active {
			out.ActiveKeys++
		}
		out.Keys = append(out.Keys, ki)
	}
	httpjson.Write(w, http.StatusOK, out)
}

// keyLimit is the plan's bound on active keys, 0 for none.
func (h *handler) keyLimit(a *ledger.Account) int {
	return h.bc.CurrentPrices().Plans[a.Plan].Keys
}

// createRequest is the optional body of POST /v1/keys.
type createRequest struct {
	// Name is the caller's label for the key, stored with it and listed.
	Name string `json:"name"`
}

// POST /v1/keys: a permanent key, within the plan's limit.
func (h *handler) createKey(w http.ResponseWriter, r *http.Request, k *ledger.Key, a *ledger.Account) {
	var req createRequest
	if status, msg := billing.DecodeJSON(w, r, routes.Limit(r), &req, true); status != 0 {
		code := billing.CodeBadInput
		if status == http.StatusRequestEntityTooLarge {
			code = billing.CodeTooLarge
		}
		httpjson.Error(w, status, code, msg)
		return
	}
	if len(req.Name) > 64 || strings.IndexFunc(req.Name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		httpjson.Error(w, http.StatusBadRequest, billing.CodeBadInput, "name must be at most 64 printable characters")
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	keys, err := h.bc.State.AccountKeys(a.ID)
	if err != nil {
		h.apiInternal(w, "account keys", err)
		return
	}
	if !verified(keys) {
		httpjson.Error(w, http.StatusForbidden, CodeNotVerified, "verify your e-mail address first (open the link we mailed you): a pass key cannot make permanent keys")
		return
	}
	now := h.bc.Now()
	n := 0
	for _, kk := range keys {
		if active(kk, now) {
			n++
		}
	}
	if limit := h.keyLimit(a); limit > 0 && n >= limit {
		httpjson.Error(w, http.StatusConflict, CodeKeyLimit, fmt.Sprintf("the %s plan allows %d active keys and this account has %d; revoke one first (DELETE /v1/keys/{id})", a.Plan, limit, n))
		return
	}
	secret, key := newKey(a.ID, KindPermanent, time.Time{})
	key.Name = req.Name
	// The ledger checks the limit again, in Raft order: two gates creating
	// keys at once cannot both pass the check above.
	key.MaxActive = h.keyLimit(a)
	res, err := h.submit(r.Context(), &ledger.Command{ID: "keys/add/" + key.ID, Type: ledger.CmdAddKey, AddKey: key}, ledger.ErrCodeKeyLimit)
	if err != nil {
		h.ledgerError(w, "add key", err)
		return
	}
	if res.Error == ledger.ErrCodeKeyLimit {
		httpjson.Error(w, http.StatusConflict, CodeKeyLimit, fmt.Sprintf("the %s plan allows %d active keys (%s); revoke one first (DELETE /v1/keys/{id})", a.Plan, key.MaxActive, res.Message))
		return
	}
	stored, err := h.bc.State.KeyByID(key.ID)
	if err != nil {
		h.apiInternal(w, "read back key", err)
		return
	}
	httpjson.Write(w, http.StatusCreated, NewKey{KeyInfo: info(stored, nil, now), Key: secret,
		Message: "store this key now: it is not shown again"})
}

// DELETE /v1/keys/{id}
func (h *handler) revokeKey(w http.ResponseWriter, r *http.Request, k *ledger.Key, a *ledger.Account) {
	id := r.PathValue("id")
	h.mu.Lock()
	defer h.mu.Unlock()
	target, err := h.bc.State.KeyByID(id)
	if errors.Is(err, ledger.ErrNotFound) || (err == nil && target.Account != a.ID) {
		httpjson.Error(w, http.StatusNotFound, billing.CodeNotFound, "no key "+id+" on this account")
		return
	}
	if err != nil {
		h.apiInternal(w, "read key", err)
		return
	}
	now := h.bc.Now()
	if target.Revoked {
		httpjson.Write(w, http.StatusOK, info(target, k, now))
		return
	}
	keys, err := h.bc.State.AccountKeys(a.ID)
	if err != nil {
		h.apiInternal(w, "account keys", err)
		return
	}
	others := 0
	for _, kk := range keys {
		if kk.ID != target.ID && active(kk, now) {
			others++
		}
	}
	if others == 0 && active(target, now) {
		httpjson.Error(w, http.StatusConflict, CodeLastKey, "this is the account's last active key; create another (POST /v1/keys) before revoking it")
		return
	}
	if _, err := h.submit(r.Context(), &ledger.Command{ID: "keys/revoke/" + target.ID, Type: ledger.CmdRevokeKey, RevokeKey: &ledger.RevokeKey{KeyID: target.ID}}); err != nil {
		h.ledgerError(w, "revoke key", err)
		return
	}
	after, err := h.bc.State.KeyByID(target.ID)
	if err != nil {
		h.apiInternal(w, "read back key", err)
		return
	}
	httpjson.Write(w, http.StatusOK, info(after, k, now))
}

func (h *handler) apiInternal(w http.ResponseWriter, what string, err error) {
	h.bc.Logger.Error("signup: "+what, "err", err)
	httpjson.Error(w, http.StatusInternalServerError, billing.CodeInternal, "something went wrong on our side; try again")
}

func (h *handler) ledgerError(w http.ResponseWriter, what string, err error) {
	if errors.Is(err, errRefused) {
		h.apiInternal(w, what, err)
		return
	}
	h.bc.Logger.Warn("signup: ledger "+what, "err", err)
	httpjson.Error(w, http.StatusServiceUnavailable, billing.CodeLedger, "the ledger did not answer; try again in a few seconds")
}

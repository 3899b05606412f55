package billing

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/trawlhq/trawl/ledger"
)

// Errors of Authenticate. Each is a 401; any other error is the replica
// failing (500).
var (
	ErrMissingKey = errors.New("missing API key")
	ErrInvalidKey = errors.New("API key not valid")
	ErrRevokedKey = errors.New("API key revoked")
	ErrExpiredKey = errors.New("API key expired")
)

// PassTTL is the life of a pass key whose record carries no expiry.
const PassTTL = 24 * time.Hour

// maxKeyLen bounds what is hashed; real keys are far shorter.
const maxKeyLen = 256

// KeyFromRequest returns the API key of r: "Authorization: Bearer <key>"
// (the scheme in any case), else "x-api-key: <key>", else, on a WebSocket
// upgrade, the first subprotocol (Firecrawl's clients send the key so, a
// browser's WebSocket having no headers; the gate strips it before the
// request goes on: WebSocketKey); "" when none is set.
func KeyFromRequest(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, key, ok := strings.Cut(strings.TrimSpace(h), " ")
		if ok && strings.EqualFold(scheme, "bearer") {
			if key = strings.TrimSpace(key); key != "" {
				return key
			}
		}
	}
	if k := strings.TrimSpace(r.Header.Get("x-api-key")); k != "" {
		return k
	}
	return WebSocketKey(r)
}

// WebSocketKey is the key a WebSocket upgrade carries as its first
// subprotocol; "" for any other request.
func WebSocketKey(r *http.Request) string {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return ""
	}
	first, _, _ := strings.Cut(r.Header.Get("Sec-WebSocket-Protocol"), ",")
	return strings.TrimSpace(first)
}

// HashKey is what the ledger stores of a key: hex SHA-256 of its secret.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Authenticate finds the key of r in the local replica by its hash and
// returns it with its account. Revoked keys, keys past ExpiresAt and pass
// keys older than PassTTL (when they carry no expiry) are refused. The
// lookup is by hash, so timing reveals nothing about the secret; the stored
// hash is compared in constant time all the same. The gate's auth module
// calls this too.
func Authenticate(state *ledger.State, r *http.Request, now time.Time) (*ledger.Key, *ledger.Account, error) {
	hash, err := RequestKeyHash(r)
	if err != nil {
		return nil, nil, err
	}
	k, a, err := LookupKey(state, hash)
	if err != nil {
		return nil, nil, err
	}
	if err := CheckKey(k, now); err != nil {
		return nil, nil, err
	}
	return k, a, nil
}

// RequestKeyHash is the hash of r's API key (HashKey); ErrMissingKey or
// ErrInvalidKey when there is none or it is too long to be one.
func RequestKeyHash(r *http.Request) (string, error) {
	key := KeyFromRequest(r)
	if key == "" {
		return "", ErrMissingKey
	}
	if len(key) > maxKeyLen {
		return "", ErrInvalidKey
	}
	return HashKey(key), nil
}

// LookupKey finds a key by its hash in the replica, with its account. It
// does not check whether the key may be used now: CheckKey does. The
// results may be cached for as long as the replica's applied index has
// not moved.
func LookupKey(state *ledger.State, hash string) (*ledger.Key, *ledger.Account, error) {
	k, err := state.KeyByHash(hash)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, nil, ErrInvalidKey
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read key: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(k.Hash), []byte(hash)) != 1 {
		return nil, nil, ErrInvalidKey
	}
	a, err := state.Account(k.Account)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, nil, ErrInvalidKey
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read account: %w", err)
	}
	return k, a, nil
}

// CheckKey refuses a revoked key, a key past ExpiresAt, and a pass key
// older than PassTTL when it carries no expiry.
func CheckKey(k *ledger.Key, now time.Time) error {
	if k.Revoked {
		return ErrRevokedKey
	}
	expires := k.ExpiresAt
	if expires.IsZero() && k.Kind == "pass" {
		expires = k.CreatedAt.Add(PassTTL)
	}
	if !expires.IsZero() && !now.Before(expires) {
		return ErrExpiredKey
	}
	return nil
}

// IsAuthError reports whether err from Authenticate is a 401 (any other
// error is the replica failing).
func IsAuthError(err error) bool {
	return errors.Is(err, ErrMissingKey) || errors.Is(err, ErrInvalidKey) ||
		errors.Is(err, ErrRevokedKey) || errors.Is(err, ErrExpiredKey)
}

// AuthMessage is the 401 message for an Authenticate error.
func AuthMessage(err error) string {
	switch {
	case errors.Is(err, ErrMissingKey):
		return "send your API key as Authorization: Bearer <key> or x-api-key: <key>"
	case errors.Is(err, ErrRevokedKey):
		return "this API key was revoked; use another key of the account"
	case errors.Is(err, ErrExpiredKey):
		return "this API key has expired (a pass key lasts 24 hours); verify your e-mail address for a permanent key"
	default:
		return "this API key is not valid"
	}
}

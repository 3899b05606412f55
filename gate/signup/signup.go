// Package signup is the gate's sign-up and key management (docs/spec/hosted-api.md §5):
// the sign-up page that hands out a 24-hour pass key at once, the e-mail
// verification that turns it into a permanent key with the sign-up credit,
// and the keys API (/v1/keys) an account manages its keys with.
//
// It is plain net/http over the ledger (no Caddy): the gate mounts Handlers
// on the route table's signup rows (internal/routes). Every
// change is a ledger command with a deterministic id, so a retried or
// repeated request changes nothing twice; reads come from the local replica.
package signup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/ledger"
)

// Config configures New. Billing (State, Ledger, Prices), Mailer, BaseURL and
// TokenSecret are required.
type Config struct {
	// Billing gives the ledger replica (State: reads), the command
	// submitter (Ledger), the price table (Prices: the pass and sign-up
	// grants, each plan's key limit and starting spend cap), the caller of
	// the keys API (Identity: the key the gate's trawl_auth found; unset,
	// the keys API authenticates the request's key itself), the clock
	// (Now), SubmitTimeout and Logger. Other fields are not used.
	Billing billing.Config
	// Mailer sends the verification mail (SMTPMailer in production).
	Mailer Mailer
	// BaseURL is this gate's public address ("https://eu.trawl.example");
	// the mail links to BaseURL + "/signup/verify?token=…".
	BaseURL string
	// TokenSecret keys the HMAC of verification links: at least 32 random
	// bytes, the same on every gate that may receive a link.
	TokenSecret []byte
	// TokenTTL is how long a verification link works (default 48 h).
	TokenTTL time.Duration
	// MailTimeout bounds sending one mail (default 30 s).
	MailTimeout time.Duration
	// PerAddressHour bounds sign-ups from one client IP address per hour
	// (default 5; negative: no bound): each sign-up hands out a pass key
	// with credit before any verification, so farming them with throwaway
	// mail addresses is stopped at the network address.
	PerAddressHour int
}

// Defaults and bounds.
const (
	DefaultTokenTTL = 48 * time.Hour
	// MinSecretLen is the shortest TokenSecret New accepts.
	MinSecretLen = 32
	// maxPending is how many unverified sign-ups one address may have in
	// pendingWindow: enough for a lost mail, too few to bomb an inbox.
	maxPending    = 3
	pendingWindow = 24 * time.Hour
)

// KeyPrefix starts every key this package issues: "trawl_" and 64 hex digits
// (32 random bytes).
const KeyPrefix = "trawl_"

// Key kinds as stored in ledger.Key.Kind.
const (
	KindPass      = "pass"
	KindPermanent = "permanent"
)

type handler struct {
	cfg Config
	bc  billing.Config
	// mu serialises sign-ups, verifications and key changes on this gate,
	// so the address and key-limit checks see each other's commands. Two
	// gates may still race past a limit by one.
	mu sync.Mutex
	// perAddr counts sign-ups per client IP address (nil: unbounded).
	perAddr *limiter.Limiter
}

// Handlers are the sign-up pages and the keys API by their row of the
// route table (internal/routes, service signup):
//
//	GET|POST /signup          the form; POST creates an account and a pass key
//	GET|POST /signup/verify   the mail's link; POST verifies (GET shows a button)
//	/signup/                  the 404 page
//	GET|POST /v1/keys         list keys, create a permanent key
//	DELETE   /v1/keys/{id}    revoke a key
//
// Each reads its body within its row's BodyLimit (routes.Limit). It panics
// when a required Config field is missing or TokenSecret is shorter than
// MinSecretLen.
func Handlers(cfg Config) routes.Handlers {
	bc := cfg.Billing
	if bc.State == nil || bc.Ledger == nil || bc.Prices == nil {
		panic("signup: Config.Billing needs State, Ledger and Prices")
	}
	if cfg.Mailer == nil || cfg.BaseURL == "" {
		panic("signup: Config needs Mailer and BaseURL")
	}
	if len(cfg.TokenSecret) < MinSecretLen {
		panic(fmt.Sprintf("signup: TokenSecret must be at least %d bytes", MinSecretLen))
	}
	if bc.SubmitTimeout <= 0 {
		bc.SubmitTimeout = 10 * time.Second
	}
	if bc.Now == nil {
		bc.Now = time.Now
	}
	if bc.Logger == nil {
		bc.Logger = slog.Default()
	}
	if cfg.TokenTTL <= 0 {
		cfg.TokenTTL = DefaultTokenTTL
	}
	if cfg.MailTimeout <= 0 {
		cfg.MailTimeout = 30 * time.Second
	}
	if cfg.PerAddressHour == 0 {
		cfg.PerAddressHour = 5
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	cfg.Billing = bc
	h := &handler{cfg: cfg, bc: bc}
	if cfg.PerAddressHour > 0 {
		h.perAddr = limiter.New(memory.NewStore(), limiter.Rate{Period: time.Hour, Limit: int64(cfg.PerAddressHour)})
	}
	// Form posts from another site are refused (the browser says where a
	// request comes from); API clients send no such headers.
	cop := http.NewCrossOriginProtection()
	return routes.Handlers{
		"GET /signup":          http.HandlerFunc(h.signupForm),
		"POST /signup":         cop.Handler(http.HandlerFunc(h.signup)),
		"GET /signup/verify":   http.HandlerFunc(h.verifyForm),
		"POST /signup/verify":  cop.Handler(http.HandlerFunc(h.verify)),
		"/signup/":             http.HandlerFunc(h.notFound),
		"GET /v1/keys":         h.authed(h.listKeys),
		"POST /v1/keys":        h.authed(h.createKey),
		"DELETE /v1/keys/{id}": h.authed(h.revokeKey),
	}
}

func (h *handler) notFound(w http.ResponseWriter, r *http.Request) {
	h.render(w, http.StatusNotFound, pageError, pageData{Title: "Not found", Error: "There is no page here."})
}

// Errors of submit: the ledger did not answer (the command may or may not
// have been applied), or it refused the command (a bug here).
var (
	errLedger  = errors.New("ledger did not answer")
	errRefused = errors.New("ledger refused the command")
)

// submit applies cmd and waits until this replica has applied it too, so the
// reads after it see it. A refusal other than the codes in allow is
// errRefused.
func (h *handler) submit(ctx context.Context, cmd *ledger.Command, allow ...string) (*ledger.Result, error) {
	if cmd.Time.IsZero() {
		cmd.Time = h.bc.Now().UTC()
	}
	ctx, cancel := context.WithTimeout(ctx, h.bc.SubmitTimeout)
	defer cancel()
	res, err := h.bc.Ledger.Submit(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errLedger, cmd.ID, err)
	}
	if res.Error != "" && !slices.Contains(allow, res.Error) {
		return nil, fmt.Errorf("%w: %s: %s: %s", errRefused, cmd.ID, res.Error, res.Message)
	}
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for h.bc.State.Meta().AppliedIndex < res.Index {
		select {
		case <-ctx.Done():
			h.bc.Logger.Warn("signup: replica trails the ledger", "index", res.Index, "applied", h.bc.State.Meta().AppliedIndex)
			return res, nil
		case <-t.C:
		}
	}
	return res, nil
}

// newKey returns a fresh secret and its ledger record (without CreatedAt,
// which the ledger sets).
func newKey(account, kind string, expires time.Time) (string, *ledger.Key) {
	b := make([]byte, 32)
	rand.Read(b)
	secret := KeyPrefix + hex.EncodeToString(b)
	return secret, &ledger.Key{
		ID: newID("key_"), Account: account, Hash: billing.HashKey(secret),
		Prefix: secret[:len(KeyPrefix)+8], Role: ledger.RoleUser, Kind: kind, ExpiresAt: expires,
	}
}

// newID is prefix and 20 random hex digits.
func newID(prefix string) string {
	b := make([]byte, 10)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// active says whether k still authenticates at now (billing.Authenticate's
// rules).
func active(k *ledger.Key, now time.Time) bool {
	if k.Revoked {
		return false
	}
	exp := k.ExpiresAt
	if exp.IsZero() && k.Kind == KindPass {
		exp = k.CreatedAt.Add(billing.PassTTL)
	}
	return exp.IsZero() || now.Before(exp)
}

// verified says whether the account was verified: it has (or had) a key
// that is not a pass. Only verification and a verified account's keys API
// make such keys, so a revoked one still counts.
func verified(keys []*ledger.Key) bool {
	for _, k := range keys {
		if k.Kind != KindPass {
			return true
		}
	}
	return false
}

package billing

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/trawlhq/trawl/gate/payments"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/ledger"
)

// Config configures the billing API and the functions that share it
// (CompleteCheckout, RunRecharges). State, Ledger and Prices are required.
type Config struct {
	// State is this region's replica of the ledger: every read.
	State *ledger.State
	// Ledger applies commands (the raft Node; any Submitter in tests).
	Ledger ledger.Submitter
	// Holds is the region's holds client; nil shows no unsettled spend.
	Holds *ledger.HoldsClient
	// Prices is the price table.
	Prices *Prices
	// Table, when set, holds the table in force instead of Prices (the
	// gate's: an operator may change it; gate/billing/table.go).
	Table *Table
	// Provider takes payments; nil answers top-ups with 503.
	Provider payments.Provider
	// Region is this gate's region ("eu").
	Region string
	// PublicURL is this region's address ("https://eu.trawl.example"), put
	// before the checkout return URL. Required with Stripe (it wants an
	// absolute success URL); empty gives a path (fine for Local).
	PublicURL string
	// Identity, when set, is the caller's key and account as the server's
	// authentication found them (the gate's trawl_auth, gate.IdentityFrom;
	// this package cannot import gate): the keyed routes take them from
	// it and do not look the key up again, and a nil key is 401. Unset,
	// they authenticate the request's key themselves (Authenticate), as a
	// server without the gate's modules must (trawl ledger serve). The
	// public checkout completion always does: no module authenticates a
	// public route.
	Identity func(ctx context.Context) (*ledger.Key, *ledger.Account)
	// SubmitTimeout bounds one ledger command (default 10 s).
	SubmitTimeout time.Duration
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.State == nil || c.Ledger == nil || c.Prices == nil {
		panic("billing: Config needs State, Ledger and Prices")
	}
	if c.SubmitTimeout <= 0 {
		c.SubmitTimeout = 10 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	return c
}

type handler struct {
	cfg Config
}

// Handlers are the billing API's handlers by their row of the route table
// (internal/routes, service billing; docs/billing.md). Each reads its body
// within its row's BodyLimit (routes.Limit). With a provider that serves
// checkout pages (Local), they are the pages under payments.CheckoutPath,
// and a confirmed page credits the ledger at once; otherwise those paths
// are 404. It panics when State, Ledger or Prices is missing.
func Handlers(cfg Config) routes.Handlers {
	h := &handler{cfg: cfg.withDefaults()}
	checkout := http.Handler(http.HandlerFunc(h.notFound))
	if pages, ok := h.cfg.Provider.(interface{ Handler() http.Handler }); ok {
		checkout = h.checkoutPages(pages.Handler())
	}
	return routes.Handlers{
		"GET /v1/prices":                               http.HandlerFunc(h.prices),
		"GET /v1/billing/balance":                      h.authed(h.balance),
		"POST /v1/billing/settings":                    h.authed(h.settings),
		"POST /v1/billing/topup":                       h.authed(h.topup),
		"GET /v1/billing/checkout/{session}/complete":  http.HandlerFunc(h.completeReturn),
		"POST /v1/billing/checkout/{session}/complete": h.keyed(h.complete),
		payments.CheckoutPath:                          checkout,
		"GET /v1/ledger/journal":                       h.authed(h.journal),
		"GET /v2/team/credit-usage":                    h.authed(h.teamCreditUsage), // firecrawl.go
		"GET /v2/team/token-usage":                     h.authed(h.teamTokenUsage),
		"/v1/":                                         http.HandlerFunc(h.notFound),
	}
}

// NewHandler serves Handlers on the route table's billing rows (405 with
// Allow for another method of a row's path) and answers every other path
// 404: the billing API of a server without the gate (trawl ledger serve).
// It panics when State, Ledger or Prices is missing.
func NewHandler(cfg Config) http.Handler {
	h := &handler{cfg: cfg.withDefaults()}
	mux, err := routes.Mux(routes.Default().Service("billing"), Handlers(cfg), routes.MuxOptions{})
	if err != nil {
		panic(err) // the table and Handlers are both in this repository: TestRouting catches it
	}
	mux.HandleFunc("/", h.notFound)
	return mux
}

func (h *handler) notFound(w http.ResponseWriter, r *http.Request) {
	httpjson.Error(w, http.StatusNotFound, CodeNotFound, "no such route")
}

type authedFunc func(w http.ResponseWriter, r *http.Request, k *ledger.Key, a *ledger.Account)

// authed runs fn with the caller's key and account: Config.Identity's, or
// when it is unset the request's key's (keyed).
func (h *handler) authed(fn authedFunc) http.HandlerFunc {
	if h.cfg.Identity == nil {
		return h.keyed(fn)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		k, a := h.cfg.Identity(r.Context())
		if k == nil || a == nil {
			unauthorized(w, ErrMissingKey)
			return
		}
		fn(w, r, k, a)
	}
}

// keyed authenticates the request's key (Authenticate) and runs fn with
// it: a route no module authenticated.
func (h *handler) keyed(fn authedFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		k, a, err := Authenticate(h.cfg.State, r, h.cfg.Now())
		if err != nil {
			if IsAuthError(err) {
				unauthorized(w, err)
				return
			}
			h.internal(w, "authenticate", err)
			return
		}
		fn(w, r, k, a)
	}
}

func unauthorized(w http.ResponseWriter, err error) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="trawl"`)
	httpjson.Error(w, http.StatusUnauthorized, CodeUnauthorized, AuthMessage(err))
}

func (h *handler) internal(w http.ResponseWriter, what string, err error) {
	h.cfg.Logger.Error("billing: "+what, "err", err)
	httpjson.Error(w, http.StatusInternalServerError, CodeInternal, "something went wrong on our side; try again")
}

// GET /v1/prices: the table as configured; public.
func (h *handler) prices(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "public, max-age=60")
	httpjson.Write(w, http.StatusOK, h.cfg.CurrentPrices())
}

// Balance is the body of GET /v1/billing/balance and the balance object of a
// top-up. Amounts are credits, decimal strings with three places.
type Balance struct {
	Account string `json:"account"`
	Plan    string `json:"plan"`
	Region  string `json:"region"`
	// Balance is what the account can still spend: Total minus what this
	// region has spent and not yet settled (the x-svc-balance figure).
	Balance string `json:"balance"`
	// Total is buckets plus holds as the ledger replica has them.
	Total string `json:"total"`
	// Buckets are monthly, pass, signup and pack, not counting holds.
	Buckets map[string]string `json:"buckets"`
	// Holds is the credit held per region for fast charging.
	Holds map[string]string `json:"holds"`
	// Unsettled is what was spent in this region and not yet settled.
	Unsettled string `json:"unsettled"`
	// PassExpires is when the pass bucket lapses; absent without a pass.
	PassExpires *time.Time `json:"pass_expires,omitempty"`
	// SpendCapMC is the monthly cap in millicredits, 0 for none; SpendCap
	// and CapLeft are null without a cap.
	SpendCapMC int64   `json:"spend_cap_mc"`
	SpendCap   *string `json:"spend_cap"`
	CapLeft    *string `json:"cap_left"`
	// Month is the calendar month MonthSpent counts ("2026-11"); it
	// includes Unsettled.
	Month      string          `json:"month"`
	MonthSpent string          `json:"month_spent"`
	Recharge   RechargeBalance `json:"recharge"`
	// LedgerIndex is the replica's applied index these figures are at.
	LedgerIndex uint64 `json:"ledger_index"`
	// WebhookSecret signs the account's Firecrawl webhooks
	// (docs/firecrawl.md): shown to the account's own keys (not an
	// auditor's) once it has one.
	WebhookSecret string `json:"webhook_secret,omitempty"`
}

// RechargeSettings are the auto-recharge settings as the settings route
// reads and writes them.
type RechargeSettings struct {
	On bool `json:"on"`
	// UnderCredits: recharge when the balance falls under this many whole
	// credits.
	UnderCredits int64 `json:"under_credits"`
	// PackUSD is the pack bought, one of the packs.
	PackUSD int `json:"pack_usd"`
	// MaxPerMonth bounds recharges per calendar month.
	MaxPerMonth int `json:"max_per_month"`
}

// RechargeBalance is RechargeSettings with this month's state.
type RechargeBalance struct {
	RechargeSettings
	ThisMonth int  `json:"this_month"`
	Due       bool `json:"due"`
}

// Settings is the body of POST /v1/billing/settings's answer: the same shape
// it accepts, so a client can change a field and send it back.
type Settings struct {
	SpendCapMC int64            `json:"spend_cap_mc"`
	Recharge   RechargeSettings `json:"recharge"`
	// WebhookSecret is the account's webhook secret (not to an auditor's
	// key): sent back as it is, it changes nothing.
	WebhookSecret string `json:"webhook_secret,omitempty"`
}

func rechargeSettings(r ledger.Recharge) RechargeSettings {
	return RechargeSettings{On: r.On, UnderCredits: int64(r.UnderCredits) / 1000, PackUSD: r.PackUSD, MaxPerMonth: r.MaxPerMonth}
}

func (h *handler) balance(w http.ResponseWriter, r *http.Request, k *ledger.Key, a *ledger.Account) {
	b, err := h.balanceOf(a)
	if err != nil {
		h.internal(w, "balance", err)
		return
	}
	if seesWebhookSecret(k) {
		if now, err := h.cfg.State.Account(a.ID); err == nil {
			b.WebhookSecret = now.WebhookSecret
		}
	}
	httpjson.Write(w, http.StatusOK, b)
}

func (h *handler) balanceOf(a *ledger.Account) (*Balance, error) {
	return balanceOf(h.cfg, a)
}

func balanceOf(cfg Config, a *ledger.Account) (*Balance, error) {
	v, unsettled, err := view(cfg, a.ID)
	if err != nil {
		return nil, err
	}
	a, ab, idx := v.Account, v.Balance, v.Index
	b := &Balance{
		Account:     a.ID,
		Plan:        a.Plan,
		Region:      cfg.Region,
		Balance:     (ab.Total - unsettled).String(),
		Total:       ab.Total.String(),
		Buckets:     map[string]string{},
		Holds:       map[string]string{},
		Unsettled:   unsettled.String(),
		SpendCapMC:  int64(a.SpendCapMC),
		Month:       a.Month,
		MonthSpent:  (a.MonthSpent + unsettled).String(),
		Recharge:    RechargeBalance{RechargeSettings: rechargeSettings(a.Recharge), ThisMonth: a.RechargesThisMonth, Due: a.RechargeDue},
		LedgerIndex: idx,
	}
	for k, v := range ab.Buckets {
		b.Buckets[k] = v.String()
	}
	for k, v := range ab.Holds {
		b.Holds[k] = v.String()
	}
	if !a.PassExpires.IsZero() {
		t := a.PassExpires.UTC()
		b.PassExpires = &t
	}
	if a.SpendCapMC > 0 {
		capStr := a.SpendCapMC.String()
		left := max(a.SpendCapMC-a.MonthSpent-unsettled, 0).String()
		b.SpendCap, b.CapLeft = &capStr, &left
	}
	return b, nil
}

// settingsRequest is the body of POST /v1/billing/settings; an absent field
// keeps its value.
type settingsRequest struct {
	SpendCapMC *int64           `json:"spend_cap_mc"`
	Recharge   *rechargeRequest `json:"recharge"`
	// WebhookSecret "rotate" makes the account a new webhook secret; the
	// secret it has changes nothing (the answer sent back).
	WebhookSecret *string `json:"webhook_secret"`
}

type rechargeRequest struct {
	On           *bool  `json:"on"`
	UnderCredits *int64 `json:"under_credits"`
	PackUSD      *int   `json:"pack_usd"`
	MaxPerMonth  *int   `json:"max_per_month"`
}

// Bounds of the settings.
const (
	maxSpendCapMC   = int64(1_000_000_000) * 1000 // a billion credits
	maxUnderCredits = int64(1_000_000_000)
	maxPerMonth     = 100
)

func (h *handler) settings(w http.ResponseWriter, r *http.Request, k *ledger.Key, a *ledger.Account) {
	var req settingsRequest
	if status, msg := DecodeJSON(w, r, routes.Limit(r), &req, false); status != 0 {
		code := CodeBadInput
		if status == http.StatusRequestEntityTooLarge {
			code = CodeTooLarge
		}
		httpjson.Error(w, status, code, msg)
		return
	}
	cmd := &ledger.Settings{Account: a.ID}
	if req.SpendCapMC == nil && req.Recharge == nil && req.WebhookSecret == nil {
		httpjson.Error(w, http.StatusBadRequest, CodeBadInput, "send spend_cap_mc, recharge and/or webhook_secret")
		return
	}
	if v := req.WebhookSecret; v != nil {
		switch {
		case !seesWebhookSecret(k):
			httpjson.Error(w, http.StatusForbidden, CodeForbidden, "an auditor's key cannot change the webhook secret")
			return
		case *v == WebhookSecretRotate:
			s := newWebhookSecret()
			cmd.WebhookSecret = &s
		case *v != a.WebhookSecret || *v == "":
			httpjson.Error(w, http.StatusBadRequest, CodeBadInput, `webhook_secret takes "rotate" (a new secret), or the secret the account has (no change)`)
			return
		}
	}
	if v := req.SpendCapMC; v != nil {
		if *v < 0 || *v > maxSpendCapMC {
			httpjson.Error(w, http.StatusBadRequest, CodeBadInput, "spend_cap_mc must be 0 (no cap) or a positive number of millicredits")
			return
		}
		c := ledger.MC(*v)
		cmd.SpendCapMC = &c
	}
	if rq := req.Recharge; rq != nil {
		rc := a.Recharge
		if rq.On != nil {
			rc.On = *rq.On
		}
		if rq.UnderCredits != nil {
			if *rq.UnderCredits < 0 || *rq.UnderCredits > maxUnderCredits {
				httpjson.Error(w, http.StatusBadRequest, CodeBadInput, "recharge.under_credits must be a whole number of credits, 0 or more")
				return
			}
			rc.UnderCredits = ledger.Credits(*rq.UnderCredits)
		}
		if rq.PackUSD != nil {
			rc.PackUSD = *rq.PackUSD
		}
		if rq.MaxPerMonth != nil {
			if *rq.MaxPerMonth < 0 || *rq.MaxPerMonth > maxPerMonth {
				httpjson.Error(w, http.StatusBadRequest, CodeBadInput, fmt.Sprintf("recharge.max_per_month must be 0 to %d", maxPerMonth))
				return
			}
			rc.MaxPerMonth = *rq.MaxPerMonth
		}
		// A pack the table has since dropped may stay while recharge is off.
		if _, ok := h.cfg.CurrentPrices().Pack(rc.PackUSD); (rq.PackUSD != nil || rc.On) && !ok {
			httpjson.Error(w, http.StatusBadRequest, CodeBadInput, "recharge.pack_usd must be one of the packs: "+h.cfg.CurrentPrices().PackList())
			return
		}
		if rc.On && (rc.UnderCredits <= 0 || rc.PackUSD == 0 || rc.MaxPerMonth <= 0) {
			httpjson.Error(w, http.StatusBadRequest, CodeBadInput, "auto-recharge needs under_credits above 0, a pack_usd and max_per_month of 1 or more")
			return
		}
		cmd.Recharge = &rc
	}
	res, err := h.submit(r.Context(), &ledger.Command{
		ID: "settings/" + a.ID + "/" + rand.Text(), Type: ledger.CmdSettings, Time: h.cfg.Now(), Settings: cmd,
	})
	if err != nil {
		h.ledgerError(w, "settings", err)
		return
	}
	if res.Error == ledger.ErrCodeInvalid {
		httpjson.Error(w, http.StatusBadRequest, CodeBadInput, res.Message)
		return
	}
	if res.Error != "" {
		h.internal(w, "settings refused", fmt.Errorf("%s: %s", res.Error, res.Message))
		return
	}
	after, err := h.cfg.State.Account(a.ID)
	if err != nil {
		h.internal(w, "settings read back", err)
		return
	}
	out := Settings{SpendCapMC: int64(after.SpendCapMC), Recharge: rechargeSettings(after.Recharge)}
	if seesWebhookSecret(k) {
		out.WebhookSecret = after.WebhookSecret
	}
	httpjson.Write(w, http.StatusOK, out)
}

// DecodeJSON reads exactly one JSON object of at most limit bytes with no
// unknown fields, declared (if at all) as application/json; with emptyOK an
// empty body is all defaults. A non-zero status is the refusal, with the
// billing and key routes' wording.
func DecodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any, emptyOK bool) (int, string) {
	if !httpjson.IsJSON(r) {
		return http.StatusBadRequest, "send the body as application/json"
	}
	de, ok := errors.AsType[*httpjson.DecodeError](httpjson.Decode(w, r, limit, v))
	if !ok {
		return 0, ""
	}
	switch de.Problem {
	case httpjson.Empty:
		if emptyOK {
			return 0, ""
		}
		return http.StatusBadRequest, "the body is empty; send a JSON object"
	case httpjson.TooLarge:
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over %d bytes", limit)
	case httpjson.WrongType:
		return http.StatusBadRequest, fmt.Sprintf("%s has the wrong type: want %s", de.Field, de.GoType)
	case httpjson.UnknownField:
		return http.StatusBadRequest, de.Error()
	case httpjson.Trailing:
		return http.StatusBadRequest, "send one JSON object and nothing after it"
	}
	return http.StatusBadRequest, "the body is not valid JSON"
}

// submit applies a command and waits until this replica has applied it too,
// so a read after it sees it (a follower's replica may trail the leader).
func (h *handler) submit(ctx context.Context, cmd *ledger.Command) (*ledger.Result, error) {
	return submit(ctx, h.cfg, cmd)
}

func submit(ctx context.Context, cfg Config, cmd *ledger.Command) (*ledger.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.SubmitTimeout)
	defer cancel()
	res, err := cfg.Ledger.Submit(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if cfg.State.Meta().AppliedIndex >= res.Index {
		return res, nil
	}
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for cfg.State.Meta().AppliedIndex < res.Index {
		select {
		case <-ctx.Done():
			cfg.Logger.Warn("billing: replica trails the ledger; answering with older figures", "index", res.Index, "applied", cfg.State.Meta().AppliedIndex)
			return res, nil
		case <-t.C:
		}
	}
	return res, nil
}

func (h *handler) ledgerError(w http.ResponseWriter, what string, err error) {
	h.cfg.Logger.Warn("billing: ledger "+what, "err", err)
	httpjson.Error(w, http.StatusServiceUnavailable, CodeLedger, "the ledger did not answer; nothing was changed, try again in a few seconds")
}

// journalPage is how many entries are read from the store per write; the
// store iterator is not held while the client reads.
const journalPage = 1000

// GET /v1/ledger/journal?after=N: NDJSON, one ledger.Entry per line, index
// > N, up to the journal's end when the request came; auditor keys only.
func (h *handler) journal(w http.ResponseWriter, r *http.Request, k *ledger.Key, _ *ledger.Account) {
	if k.Role != ledger.RoleAuditor {
		httpjson.Error(w, http.StatusForbidden, CodeForbidden, "the journal is readable with an auditor key only")
		return
	}
	var after uint64
	for name, vals := range r.URL.Query() {
		if name != "after" || len(vals) != 1 {
			httpjson.Error(w, http.StatusBadRequest, CodeBadInput, "the only parameter is after, once")
			return
		}
		v, err := strconv.ParseUint(vals[0], 10, 64)
		if err != nil {
			httpjson.Error(w, http.StatusBadRequest, CodeBadInput, "after must be a journal index (0 or more)")
			return
		}
		after = v
	}
	end := h.cfg.State.Meta().Entries
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Ledger-Entries", strconv.FormatUint(end, 10))
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	rc := http.NewResponseController(w)
	for after < end && r.Context().Err() == nil {
		var page []*ledger.Entry
		err := h.cfg.State.Journal(after, func(e *ledger.Entry) (bool, error) {
			if e.Index > end {
				return false, nil
			}
			page = append(page, e)
			return len(page) < journalPage, nil
		})
		if err != nil {
			// The status is sent: a short stream is all the client sees; it
			// resumes from the last index it got.
			h.cfg.Logger.Error("billing: read journal", "after", after, "err", err)
			return
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			b, _ := json.Marshal(e)
			bw.Write(b)
			bw.WriteByte('\n')
		}
		after = page[len(page)-1].Index
		if bw.Flush() != nil {
			return
		}
		_ = rc.Flush()
	}
	_ = bw.Flush()
}

// view reads the account's balance and this region's unsettled charges
// from one snapshot of the replica (ledger.State.BalanceView with the
// journal's settle mark), so a batch being settled is counted once:
// neither in both the balance and the unsettled sum nor in neither.
func view(cfg Config, acct string) (*ledger.BalanceView, ledger.MC, error) {
	var region, epoch string
	if cfg.Holds != nil {
		region, epoch = cfg.Holds.Journal()
	}
	v, err := cfg.State.BalanceView(acct, cfg.Now(), region, epoch)
	if err != nil {
		return nil, 0, err
	}
	var unsettled ledger.MC
	if cfg.Holds != nil {
		unsettled = cfg.Holds.UnsettledAt(acct, v.Mark)
	}
	return v, unsettled, nil
}

// CapLeft is what the account may still spend this month under its cap
// (ok false: no cap).
func CapLeft(cfg Config, a *ledger.Account) (left ledger.MC, ok bool) {
	if a.SpendCapMC <= 0 {
		return 0, false
	}
	v, unsettled, err := view(cfg, a.ID)
	if err != nil {
		// The replica could not be read again: what the caller holds.
		if cfg.Holds != nil {
			unsettled = cfg.Holds.Unsettled(a.ID)
		}
		return max(a.SpendCapMC-a.MonthSpent-unsettled, 0), true
	}
	a = v.Account
	return max(a.SpendCapMC-a.MonthSpent-unsettled, 0), true
}

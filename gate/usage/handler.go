package usage

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/ledger"
)

// HandlerConfig configures Handlers. Log and Region are required.
type HandlerConfig struct {
	// Log is the region's usage history.
	Log *Log
	// Region is this gate's region ("eu"): the only region whose lines
	// this handler has.
	Region string
	// Identity returns the account the gate's auth module found for the
	// request's context, or nil. The gate sets it to read
	// gate.IdentityFrom(ctx).Account (this package cannot import gate:
	// gate assembles the routes that use it).
	Identity func(ctx context.Context) *ledger.Account
	// State is the ledger replica used to authenticate the key of a
	// request Identity knows nothing of (billing.Authenticate). Nil
	// answers such requests 401.
	State *ledger.State
	// Now is the clock for key expiry (default time.Now).
	Now func() time.Time
	// Logger receives internal errors (default slog.Default).
	Logger *slog.Logger
}

// Page is the body of GET /v1/billing/usage: one page of the account's
// lines in this region, oldest first.
type Page struct {
	// Region is where these lines were spent (this gate's region).
	Region string `json:"region"`
	// Account is the account the key belongs to.
	Account string `json:"account"`
	// After is the after the page was asked for.
	After uint64 `json:"after"`
	// Lines are the lines with seq above After, at most limit; never null.
	Lines []Line `json:"lines"`
	// NextAfter is the after of the next page: the seq of the last line,
	// or After when the page is empty. Poll with it to follow new lines.
	NextAfter uint64 `json:"next_after"`
	// More is true when lines after NextAfter already exist.
	More bool `json:"more"`
}

// Error codes of the route (as in gate/billing).
const (
	codeBadInput     = "bad_input"
	codeUnauthorized = "unauthorized"
	codeInternal     = "internal"
)

// Handlers are the usage history's handler by its row of the route table
// (internal/routes, service usage): GET /v1/billing/usage?after=N&limit=M,
// the lines of the caller's account with seq above after (default 0), at
// most limit (default 100, 1 to 1000). It panics without Log or Region.
func Handlers(cfg HandlerConfig) routes.Handlers {
	if cfg.Log == nil || cfg.Region == "" {
		panic("usage: HandlerConfig needs Log and Region")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return routes.Handlers{"GET /v1/billing/usage": &handler{cfg: cfg}}
}

type handler struct{ cfg HandlerConfig }

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	account, ok := h.account(w, r)
	if !ok {
		return
	}
	after, limit, region, msg := parseQuery(r)
	if msg != "" {
		httpjson.Error(w, http.StatusBadRequest, codeBadInput, msg)
		return
	}
	if region != "" && region != h.cfg.Region {
		httpjson.Error(w, http.StatusBadRequest, codeBadInput,
			"this gate keeps the history of region "+h.cfg.Region+"; ask the gate of region "+region+" (the public address forwards ?region="+region+")")
		return
	}
	lines, next, err := h.cfg.Log.List(account, after, limit+1)
	if err != nil {
		h.cfg.Logger.Error("usage: list", "account", account, "err", err)
		httpjson.Error(w, http.StatusInternalServerError, codeInternal, "something went wrong on our side; try again")
		return
	}
	p := Page{Region: h.cfg.Region, Account: account, After: after, Lines: lines, NextAfter: next}
	if len(lines) > limit {
		p.Lines, p.More = lines[:limit], true
		p.NextAfter = lines[limit-1].Seq
	}
	if p.Lines == nil {
		p.Lines = []Line{}
	}
	httpjson.Write(w, http.StatusOK, p)
}

// account returns the caller's account id, or answers 401/500 and false.
func (h *handler) account(w http.ResponseWriter, r *http.Request) (string, bool) {
	if h.cfg.Identity != nil {
		if a := h.cfg.Identity(r.Context()); a != nil {
			return a.ID, true
		}
	}
	if h.cfg.State == nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="trawl"`)
		httpjson.Error(w, http.StatusUnauthorized, codeUnauthorized, billing.AuthMessage(billing.ErrMissingKey))
		return "", false
	}
	_, a, err := billing.Authenticate(h.cfg.State, r, h.cfg.Now())
	if err != nil {
		if billing.IsAuthError(err) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="trawl"`)
			httpjson.Error(w, http.StatusUnauthorized, codeUnauthorized, billing.AuthMessage(err))
			return "", false
		}
		h.cfg.Logger.Error("usage: authenticate", "err", err)
		httpjson.Error(w, http.StatusInternalServerError, codeInternal, "something went wrong on our side; try again")
		return "", false
	}
	return a.ID, true
}

// parseQuery reads after, limit and region; msg is the 400 message.
func parseQuery(r *http.Request) (after uint64, limit int, region, msg string) {
	q := r.URL.Query()
	for _, name := range []string{"after", "limit", "region"} {
		if len(q[name]) > 1 {
			return 0, 0, "", name + " is given more than once"
		}
	}
	limit = DefaultLimit
	if s := q.Get("after"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, "", "after must be a whole number: the next_after of the page before, or 0"
		}
		after = v
	}
	if s := q.Get("limit"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > MaxLimit {
			return 0, 0, "", "limit must be a whole number from 1 to " + strconv.Itoa(MaxLimit)
		}
		limit = v
	}
	return after, limit, q.Get("region"), ""
}

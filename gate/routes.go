package gate

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/gate/estimate"
	"github.com/trawlhq/trawl/gate/usage"
	"github.com/trawlhq/trawl/ledger"
)

// Local reports whether the gate answers r itself: its health, the
// ledger's internal routes, sign-up, and everything under /v1/ (billing,
// keys, estimate, this region's usage history). The rest goes to a cell.
func (rt *Runtime) Local(r *http.Request) bool {
	p := r.URL.Path
	switch {
	case p == "/health", p == "/signup", strings.HasPrefix(p, "/signup/"), strings.HasPrefix(p, "/internal/"):
		return true
	case p == "/v1/billing/usage":
		region := r.URL.Query().Get("region")
		return region == "" || region == rt.cfg.Region
	case strings.HasPrefix(p, "/v1/"):
		return true
	}
	return false
}

// Handler serves the gate's own routes (see Local).
func (rt *Runtime) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/internal/", rt.node.Handler())
	mux.HandleFunc("GET /health", rt.health)
	mux.Handle("/signup", rt.signup)
	mux.Handle("/signup/", rt.signup)
	mux.Handle("/v1/keys", rt.signup)
	mux.Handle("/v1/keys/", rt.signup)
	mux.Handle("/v1/estimate", estimate.Handler(estimate.Config{Prices: rt.cfg.Prices, Observer: rt.obs}))
	mux.Handle("/v1/billing/usage", usage.Handler(usage.HandlerConfig{
		Log: rt.usage, State: rt.node.State(), Region: rt.cfg.Region, Now: rt.cfg.Now, Logger: rt.cfg.Logger,
		Identity: func(ctx context.Context) *ledger.Account {
			if id := IdentityFrom(ctx); id != nil {
				return id.Account
			}
			return nil
		},
	}))
	mux.Handle("/", billing.NewHandler(rt.billing))
	return mux
}

// Health is the gate's health: its ledger voter and its region's cells.
type Health struct {
	Status       string `json:"status"` // ok, degraded (no live cell or no ledger leader)
	Region       string `json:"region"`
	Cells        int    `json:"cells"`
	LedgerLeader string `json:"ledger_leader"`
	LedgerIndex  uint64 `json:"ledger_index"`
	Unsettled    int64  `json:"unsettled_charges"`
}

func (rt *Runtime) health(w http.ResponseWriter, r *http.Request) {
	st := rt.node.Status()
	h := Health{Status: "ok", Region: rt.cfg.Region, Cells: len(rt.Cells()), LedgerLeader: st.Leader,
		LedgerIndex: rt.node.State().Meta().AppliedIndex, Unsettled: rt.holds.Pending()}
	if h.Cells == 0 || h.LedgerLeader == "" {
		h.Status = "degraded"
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(h)
}

package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/gate/estimate"
	"github.com/trawlhq/trawl/gate/issues"
	"github.com/trawlhq/trawl/gate/mcp"
	"github.com/trawlhq/trawl/gate/recipehealth"
	"github.com/trawlhq/trawl/gate/search"
	"github.com/trawlhq/trawl/gate/usage"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/ledger"
)

// Routes is the route table the gate's modules read in Provision.
func (rt *Runtime) Routes() *routes.Table { return routes.Default() }

// Handler serves the gate's own routes: the Gate rows of the route table,
// each answered by the handler of its service. Every service but health
// answers a method its path does not take with its own 405; health is
// registered with its method, so another method gets the billing API's 404
// as before.
func (rt *Runtime) Handler() http.Handler {
	services := map[string]http.Handler{
		"health":   http.HandlerFunc(rt.health),
		"ledger":   rt.node.Handler(),
		"signup":   rt.signup,
		"estimate": estimate.Handler(estimate.Config{Prices: rt.cfg.Prices, Table: rt.prices, Observer: rt.obs}),
		"usage": usage.Handler(usage.HandlerConfig{
			Log: rt.usage, State: rt.node.State(), Region: rt.cfg.Region, Now: rt.cfg.Now, Logger: rt.cfg.Logger,
			Identity: func(ctx context.Context) *ledger.Account {
				if id := IdentityFrom(ctx); id != nil {
					return id.Account
				}
				return nil
			},
		}),
		"billing":     billing.NewHandler(rt.billing),
		"monstore":    rt.monitors.server,
		"recipestore": &recipeStore{State: rt.node.State(), V: regionauth.NewVerifier(rt.cfg.RegionKeys, time.Now), Log: rt.cfg.Logger},
		"recipes": recipehealth.Handler(recipehealth.Config{
			Region: rt.cfg.Region, Cells: rt.Cells, Keys: rt.cfg.RegionKeys, Private: rt.cfg.AllowPrivateNetworks, Now: rt.cfg.Now, Logger: rt.cfg.Logger,
		}),
		"operator": rt.operatorHandler(), // gate/operator.go
		"search": search.Handler(search.Config{
			Cells: rt.Cells, Keys: rt.cfg.RegionKeys, Private: rt.cfg.AllowPrivateNetworks, Now: rt.cfg.Now, Logger: rt.cfg.Logger,
			Account: func(r *http.Request) string {
				if id := IdentityFrom(r.Context()); id != nil {
					return id.Account.ID
				}
				return ""
			},
		}),
		// The tool server: each tool call goes through the gate's
		// pipeline again (trawl_api puts it in the request's context).
		"mcp": mcp.Handler(mcp.Config{Region: rt.cfg.Region, Pipeline: PipelineFrom, Logger: rt.cfg.Logger}),
		"issues": issues.Handler(issues.Config{
			Store: rt.st, Region: rt.cfg.Region, Now: rt.cfg.Now, OperatorOnly: rt.operatorOnly,
			Account: func(r *http.Request) string {
				if id := IdentityFrom(r.Context()); id != nil && id.Account != nil {
					return id.Account.ID
				}
				return ""
			},
		}),
	}
	mux, err := serviceMux(rt.Routes(), services)
	if err != nil {
		panic(err) // the table and this map are both in this repository: a test catches it
	}
	return mux
}

// serviceMux registers each Gate row of t with its service's handler, and
// everything else with billing's 404. It refuses a row without a handler
// and a handler without a row.
func serviceMux(t *routes.Table, services map[string]http.Handler) (*http.ServeMux, error) {
	mux := http.NewServeMux()
	used := map[string]bool{}
	paths := map[string]bool{}
	for _, row := range t.Rows() {
		if row.Server != routes.Gate {
			continue
		}
		h, ok := services[row.Service]
		if !ok {
			return nil, fmt.Errorf("gate: route %q: no handler for service %q", row.Pattern, row.Service)
		}
		used[row.Service] = true
		pattern := row.Path()
		if paths[pattern] {
			continue
		}
		paths[pattern] = true
		mux.Handle(pattern, h)
	}
	for name := range services {
		if !used[name] {
			return nil, fmt.Errorf("gate: service %q serves no route of the table", name)
		}
	}
	if !paths["/"] {
		mux.Handle("/", services["billing"])
	}
	return mux, nil
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
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		httpjson.Error(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed on /health")
		return
	}
	st := rt.node.Status()
	h := Health{Status: "ok", Region: rt.cfg.Region, Cells: len(rt.Cells()), LedgerLeader: st.Leader,
		LedgerIndex: rt.node.State().Meta().AppliedIndex, Unsettled: rt.holds.Pending()}
	if h.Cells == 0 || h.LedgerLeader == "" {
		h.Status = "degraded"
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(h)
}

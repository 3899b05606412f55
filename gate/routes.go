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
	"github.com/trawlhq/trawl/internal/hooksecret"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/ledger"
)

// Routes is the route table the gate's modules read in Provision.
func (rt *Runtime) Routes() *routes.Table { return routes.Default() }

// Handler serves the gate's own routes: the Gate rows of the route table,
// each with the handler its service has for the row's pattern (routes.Mux:
// the row in the request's context, HEAD by GET, 405 with Allow for
// another method of a row's path). A row without a handler, a handler
// without a row, or a service's handler on another service's row is an
// error: Provision fails (caddy-modules/api).
func (rt *Runtime) Handler() (http.Handler, error) {
	account := func(r *http.Request) string {
		if id := IdentityFrom(r.Context()); id != nil && id.Account != nil {
			return id.Account.ID
		}
		return ""
	}
	services := map[string]routes.Handlers{
		"health":   {"GET /health": http.HandlerFunc(rt.health)},
		"ledger":   {"/internal/": rt.node.Handler()},
		"signup":   rt.signup,
		"estimate": estimate.Handlers(estimate.Config{Prices: rt.cfg.Prices, Table: rt.prices, Observer: rt.obs}),
		"usage": usage.Handlers(usage.HandlerConfig{
			Log: rt.usage, State: rt.node.State(), Region: rt.cfg.Region, Now: rt.cfg.Now, Logger: rt.cfg.Logger,
			Identity: func(ctx context.Context) *ledger.Account {
				if id := IdentityFrom(ctx); id != nil {
					return id.Account
				}
				return nil
			},
		}),
		"billing":     billing.Handlers(rt.billing),
		"monstore":    {"/monitor-store/": rt.monitors.server},
		"recipestore": {"/recipe-store/": &recipeStore{State: rt.node.State(), V: regionauth.NewVerifier(rt.cfg.RegionKeys, time.Now), Log: rt.cfg.Logger}},
		"hooksecret":  {"POST " + hooksecret.Path: &hookSecrets{Billing: rt.billing, V: regionauth.NewVerifier(rt.cfg.RegionKeys, time.Now), Log: rt.cfg.Logger}},
		"recipes": recipehealth.Handlers(recipehealth.Config{
			Region: rt.cfg.Region, Cells: rt.Cells, Keys: rt.cfg.RegionKeys, Private: rt.cfg.AllowPrivateNetworks, Now: rt.cfg.Now, Logger: rt.cfg.Logger,
		}),
		"operator": rt.operatorHandlers(), // gate/operator.go
		// POST /v2/search scrapes its results through the gate's pipeline
		// with scrapeOptions (each the caller's own /v2/scrape call).
		"search": search.Handlers(search.Config{
			Cells: rt.Cells, Keys: rt.cfg.RegionKeys, Private: rt.cfg.AllowPrivateNetworks, Now: rt.cfg.Now, Logger: rt.cfg.Logger,
			Account: account, Pipeline: PipelineFrom,
		}),
		// The tool server: each tool call goes through the gate's
		// pipeline again (trawl_api puts it in the request's context).
		"mcp":       mcp.Handlers(mcp.Config{Region: rt.cfg.Region, Pipeline: PipelineFrom, Logger: rt.cfg.Logger}),
		"issues":    issues.Handlers(issues.Config{Store: rt.st, Region: rt.cfg.Region, Now: rt.cfg.Now, Account: account}),
		"firecrawl": rt.firecrawlHandlers(), // gate/firecrawl.go
	}
	return gateMux(rt.Routes().Rows(), services)
}

// gateMux registers each Gate row of rows with its service's handler for
// the row's pattern (routes.Mux), a row that needs a role behind
// requireRole, and answers any other path 404 (trawl_api sends only Gate
// rows here). It refuses a row without a handler, a handler without a row,
// and a handler a service has for another service's row.
func gateMux(rows []routes.Route, services map[string]routes.Handlers) (*http.ServeMux, error) {
	var gate []routes.Route
	service := map[string]string{} // pattern → the service its row names
	for _, row := range rows {
		if row.Server == routes.Gate {
			gate = append(gate, row)
			service[row.Pattern] = row.Service
		}
	}
	hs := routes.Handlers{}
	for name, handlers := range services {
		for pattern, h := range handlers {
			if s, ok := service[pattern]; ok && s != name {
				return nil, fmt.Errorf("gate: service %q has a handler for %q, a row of service %q", name, pattern, s)
			}
			hs[pattern] = h // a pattern of no row: routes.Mux refuses it
		}
	}
	for _, row := range gate {
		if h, ok := hs[row.Pattern]; ok && row.Role != "" {
			hs[row.Pattern] = requireRole(row.Role, h)
		}
	}
	mux, err := routes.Mux(gate, hs, routes.MuxOptions{})
	if err != nil {
		return nil, fmt.Errorf("gate: %w", err)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpjson.Error(w, http.StatusNotFound, billing.CodeNotFound, "no such route")
	})
	return mux, nil
}

// requireRole lets through a request whose identity is a key of role.
// trawl_auth refuses any other from the row (401, 403) before its body is
// read; this keeps a row's role if the handler is ever served without
// trawl_auth in front of it, as the operator handlers check no key.
func requireRole(role string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := IdentityFrom(r.Context())
		switch {
		case id == nil || (id.Key == nil && id.Forwarded == ""):
			w.Header().Set("WWW-Authenticate", `Bearer realm="trawl"`)
			httpjson.Error(w, http.StatusUnauthorized, billing.CodeUnauthorized, "this route needs a key with the "+role+" role")
			return
		case id.Key == nil || id.Key.Role != role:
			httpjson.Error(w, http.StatusForbidden, billing.CodeForbidden, "this route needs a key with the "+role+" role; this key is not one")
			return
		}
		next.ServeHTTP(w, r)
	})
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

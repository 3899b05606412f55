package main

import (
	"sync/atomic"

	"github.com/trawlhq/trawl/cell"
	"github.com/trawlhq/trawl/internal/hooksecret"
	"github.com/trawlhq/trawl/internal/members"
	"github.com/trawlhq/trawl/internal/monstore"
	"github.com/trawlhq/trawl/internal/recipestore"
	"github.com/trawlhq/trawl/internal/regionauth"
)

// regionGateStores points a cell at what its region's gate keeps for it:
// the monitor store (docs/monitors.md), the operator recipes from the
// ledger (docs/operations.md) and the accounts' webhook secrets
// (docs/firecrawl.md), at the gate that the region's membership
// names. cluster is set once the cell has joined; until then, and while
// no gate is live, monitor calls answer 503, checks wait and the
// replicated recipes are looked for again later.
func regionGateStores(cfg *cell.Config, cluster *atomic.Pointer[members.Cluster]) {
	region := cfg.Region
	gate := func() string {
		c := cluster.Load()
		if c == nil {
			return ""
		}
		for _, g := range c.Live(members.RoleGate, region) {
			if g.API != "" {
				return g.API
			}
		}
		return ""
	}
	g := regionauth.Gate{Keys: cfg.RegionKeys, Addr: gate}
	cfg.Monitor.Shared = &monstore.Client{Gate: g}
	cfg.Recipes.Remote = &recipestore.Client{Gate: g}
	cfg.WebhookSecrets = &hooksecret.Client{Gate: g}
}

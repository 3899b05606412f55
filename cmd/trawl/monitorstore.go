package main

import (
	"sync/atomic"

	"github.com/trawlhq/trawl/cell"
	"github.com/trawlhq/trawl/internal/members"
	"github.com/trawlhq/trawl/internal/monstore"
)

// regionMonitorStore points a cell's monitors at its region's monitor
// store: the gate that the region's membership names (docs/monitors.md).
// cluster is set once the cell has joined; until then, and while no gate
// is live, monitor calls answer 503 and checks wait.
func regionMonitorStore(cfg *cell.Config, cluster *atomic.Pointer[members.Cluster]) {
	region := cfg.Region
	cfg.Monitor.Shared = &monstore.Client{Keys: cfg.RegionKeys, Gate: func() string {
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
	}}
}

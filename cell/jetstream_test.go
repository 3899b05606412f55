package cell

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/jsnode/jsnodetest"
	"github.com/trawlhq/trawl/internal/members"
)

// A cell without a route listener runs a standalone node, ready within
// milliseconds.
func TestStandaloneJetStream(t *testing.T) {
	tc := newTestCell(t, nil)
	start := time.Now()
	jsnodetest.WaitFor(t, 10*time.Second, "a standalone node", func() (bool, string) {
		h := tc.JetStreamHealth()
		return h.Ready, fmt.Sprintf("%+v", h)
	})
	t.Logf("ready %v after New", time.Since(start))
	h := tc.JetStreamHealth()
	if h.Clustered || !h.Ready || h.ClusterSize != 1 || h.Server == "" || h.MetaLeader != h.Server || h.State != "" {
		t.Fatalf("standalone node: %+v", h)
	}
	if tc.RouteURL() != "" {
		t.Fatalf("a standalone cell advertises a route: %q", tc.RouteURL())
	}
}

// startClusteredCell starts a cell with a loopback route listener, its
// membership seeded by seed, and lets it join its region.
func startClusteredCell(t *testing.T, seed *members.Cluster, name string) *Cell {
	t.Helper()
	c, _ := startStoppableCell(t, seed, name)
	return c
}

// startStoppableCell is startClusteredCell with the cell's stop: it leaves
// the region's membership and closes (idempotent).
func startStoppableCell(t *testing.T, seed *members.Cluster, name string) (*Cell, func()) {
	t.Helper()
	c, err := New(Config{
		Name:       name,
		DataDir:    t.TempDir(),
		Logger:     jsnodetest.Logger(t).With("cell", name),
		RegionKeys: testKeys,
		JetStream:  JetStreamConfig{RouteListen: "127.0.0.1:0", AppearWait: 300 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	leave := joinTestRegion(t, c, seed, name, func() { c.Close() })
	stop := func() {
		once.Do(func() {
			leave()
			c.Close()
		})
	}
	t.Cleanup(stop)
	return c, stop
}

// joinTestRegion starts c's membership (seeded by seed) and lets c join
// its region; it returns the leave. A membership that does not start
// calls fail (the cell's close) before failing t.
func joinTestRegion(t *testing.T, c *Cell, seed *members.Cluster, name string, fail func()) func() {
	t.Helper()
	m, err := members.Start(members.Config{
		Meta: members.Meta{Role: members.RoleCell, Region: "eu", Name: name, API: "127.0.0.1:1",
			Routes: c.RouteURL(), JS: c.JetStreamState()},
		Join:   []string{seed.LocalAddr()},
		Keys:   testKeys.All(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		fail()
		t.Fatal(err)
	}
	c.JoinRegion(m)
	return func() { m.Close() }
}

// newClusteredTestCell is newTestCell (its handler behind a gate of the
// tests, on the real clock) as a clustered cell that joins the region
// seed seeds.
func newClusteredTestCell(t *testing.T, seed *members.Cluster, name string) *testCell {
	t.Helper()
	tc := newTestCell(t, func(cfg *Config) {
		cfg.Name = name
		cfg.Now = time.Now
		cfg.Logger = jsnodetest.Logger(t).With("cell", name)
		cfg.JetStream = JetStreamConfig{RouteListen: "127.0.0.1:0", AppearWait: 300 * time.Millisecond}
	})
	t.Cleanup(joinTestRegion(t, tc.Cell, seed, name, func() {}))
	return tc
}

// Two cells joining a running one-cell region at the same moment enter
// its meta group one at a time (two at once can split it: docs
// jetstream-design.md §10), and the region ends as one meta group of
// three around the first cell's.
func TestCellsJoinOneAtATime(t *testing.T) {
	seed, err := members.Start(members.Config{
		Meta:   members.Meta{Role: members.RoleGate, Region: "eu", Name: "g1"},
		Keys:   testKeys.All(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seed.Close() })

	// Every membership view the seed sees: never two cells joining.
	var mu sync.Mutex
	var joiningAtOnce []string
	var order []string
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			changed := seed.Watch()
			var joining []string
			for _, m := range seed.Live(members.RoleCell, "eu") {
				if m.JS == members.JSJoining {
					joining = append(joining, m.Name)
				}
			}
			mu.Lock()
			if len(joining) > 1 {
				joiningAtOnce = append(joiningAtOnce, strings.Join(joining, "+"))
			}
			if len(joining) == 1 && (len(order) == 0 || order[len(order)-1] != joining[0]) {
				order = append(order, joining[0])
			}
			mu.Unlock()
			select {
			case <-changed:
			case <-stop:
				return
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-watched })

	start := time.Now()
	c1 := startClusteredCell(t, seed, "c1")
	jsnodetest.WaitFor(t, 30*time.Second, "c1 the leader of a region of one", func() (bool, string) {
		h := c1.JetStreamHealth()
		return h.Ready && h.ClusterSize == 1 && h.MetaLeader == h.Server, fmt.Sprintf("%+v", h)
	})
	t.Logf("c1 alone ready after %v", time.Since(start))

	start = time.Now()
	c3 := startClusteredCell(t, seed, "c3") // the later name first
	c2 := startClusteredCell(t, seed, "c2")
	cells := []*Cell{c1, c2, c3}
	jsnodetest.WaitFor(t, 60*time.Second, "one meta group of three", func() (bool, string) {
		var views []string
		leaders := map[string]bool{}
		ok := true
		var peers []string
		for _, c := range cells {
			h := c.JetStreamHealth()
			views = append(views, fmt.Sprintf("%s %+v", c.Name(), h))
			if !h.Ready || h.ClusterSize != 3 || len(h.Peers) != 3 {
				ok = false
			}
			if peers != nil && !slices.Equal(peers, h.Peers) {
				ok = false
			}
			peers = h.Peers
			leaders[h.MetaLeader] = true
		}
		return ok && len(leaders) == 1 && slices.Contains(peers, c1.JetStream().Name()), strings.Join(views, "; ")
	})
	t.Logf("c2 and c3 joined in %v (c2 %.2fs, c3 %.2fs from their start)", time.Since(start),
		c2.JetStreamHealth().JoinSeconds, c3.JetStreamHealth().JoinSeconds)

	mu.Lock()
	defer mu.Unlock()
	if len(joiningAtOnce) > 0 {
		t.Errorf("cells joined at once: %v", joiningAtOnce)
	}
	// c2 sorts first, so it joins first, though it started second.
	if want := []string{"c1", "c2", "c3"}; !slices.Equal(order, want) {
		t.Errorf("joined in order %v, want %v", order, want)
	}
	if d2, d3 := c2.JetStreamHealth().JoinSeconds, c3.JetStreamHealth().JoinSeconds; d2 >= d3 {
		t.Errorf("c2 ready after %.2fs, c3 after %.2fs: c3 should have waited for c2", d2, d3)
	}
}

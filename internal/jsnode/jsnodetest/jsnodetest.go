// Package jsnodetest starts jsnode nodes for tests: one standalone node,
// or a region's cluster of several on 127.0.0.1 with ephemeral route
// ports, each in its own t.TempDir(), closed when the test ends.
package jsnodetest

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/testlog"

	"github.com/trawlhq/trawl/internal/jsnode"
	"github.com/trawlhq/trawl/internal/regionauth"
)

// Keys returns a new random region keyring.
func Keys(t testing.TB) *regionauth.Keys {
	t.Helper()
	k, err := regionauth.ParseKeys(regionauth.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Standalone starts one node without a cluster (trawl dev's single cell)
// and waits until JetStream answers.
func Standalone(t testing.TB) *jsnode.Node {
	t.Helper()
	n, err := jsnode.Start(context.Background(), jsnode.Config{
		Region: "eu", Cell: "c1", Dir: t.TempDir(), Logger: Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	ready(t, n, 10*time.Second)
	return n
}

// Cluster is a region's nodes on loopback. Each node's Peers are the
// route URLs of the other running nodes, asked again every 100 ms, as a
// cell's are from memberlist.
type Cluster struct {
	t      testing.TB
	Region string
	Keys   *regionauth.Keys
	// TLS runs the routes over TLS though they are on loopback.
	TLS bool
	// Logger receives every node's log; nil means the test's log.
	Logger *slog.Logger
	// Cuttable routes every node's routes through relays, so that Cut
	// can drop a node's routes as a SIGKILL would (cut.go). Set it
	// before the first Add.
	Cuttable bool

	base   string // the nodes' data directories are in it
	mu     sync.Mutex
	dirs   map[string]string // cell → data directory (kept over restarts)
	addrs  map[string]string // cell → route host:port (kept over restarts)
	nodes  map[string]*jsnode.Node
	order  []string
	relays map[string]*relay // Cuttable: cell → the relay to its node
	cut    map[string]bool
}

// NewCluster returns an empty cluster for region "eu" with new keys.
func NewCluster(t testing.TB) *Cluster {
	c := &Cluster{t: t, Region: "eu", Keys: Keys(t), base: t.TempDir(),
		dirs: map[string]string{}, addrs: map[string]string{}, nodes: map[string]*jsnode.Node{},
		relays: map[string]*relay{}, cut: map[string]bool{}}
	// Registered after the TempDir, so it runs before its removal.
	t.Cleanup(func() {
		c.mu.Lock()
		nodes := make([]*jsnode.Node, 0, len(c.nodes))
		for _, n := range c.nodes {
			nodes = append(nodes, n)
		}
		c.mu.Unlock()
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Go(func() { n.Close() })
		}
		wg.Wait()
	})
	return c
}

// Start starts n nodes c1…cn, each routing to the ones before it, and
// waits until JetStream answers on all of them.
func Start(t testing.TB, n int) (*Cluster, []*jsnode.Node) {
	t.Helper()
	c := NewCluster(t)
	nodes := make([]*jsnode.Node, n)
	for i := range n {
		nodes[i] = c.Add(fmt.Sprintf("c%d", i+1))
	}
	for _, nd := range nodes {
		ready(t, nd, 30*time.Second)
	}
	c.WaitPeers(n)
	return c, nodes
}

// WaitPeers waits until the meta leader sees n JetStream peers online,
// so that a stream of n replicas can be placed.
func (c *Cluster) WaitPeers(n int) {
	c.t.Helper()
	WaitFor(c.t, 30*time.Second, fmt.Sprintf("%d JetStream peers", n), func() (bool, string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, nd := range c.nodes {
			if p := nd.Server().JetStreamClusterPeers(); p != nil {
				return len(p) == n, fmt.Sprintf("the leader %s sees %v", nd.Name(), p)
			}
		}
		return false, "no meta leader"
	})
}

// Config is the configuration Add gives cell: its data directory and
// route address are the ones it had before, if it ran.
func (c *Cluster) Config(cell string) jsnode.Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	dir, ok := c.dirs[cell]
	if !ok {
		dir = filepath.Join(c.base, cell)
		c.dirs[cell] = dir
	}
	listen := c.addrs[cell]
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	logger := c.Logger
	if logger == nil {
		logger = Logger(c.t)
	}
	advertise := ""
	if c.Cuttable {
		advertise = c.relayAddr(cell)
	}
	return jsnode.Config{
		RouteAdvertise: advertise,
		Region:         c.Region,
		Cell:           cell,
		Dir:            dir,
		Keys:           c.Keys,
		RouteListen:    listen,
		Peers:          func() []string { return c.peers(cell) },
		PeerInterval:   100 * time.Millisecond,
		TLS:            c.TLS,
		Logger:         logger,
	}
}

// Add starts cell with Config(cell), without waiting for JetStream.
func (c *Cluster) Add(cell string) *jsnode.Node {
	c.t.Helper()
	return c.StartWith(c.Config(cell))
}

// StartWith starts a node of the cluster with a given configuration (a
// test's variation of Config).
func (c *Cluster) StartWith(cfg jsnode.Config) *jsnode.Node {
	c.t.Helper()
	n, err := jsnode.Start(context.Background(), cfg)
	if err != nil {
		c.t.Fatalf("start %s: %v", cfg.Cell, err)
	}
	c.mu.Lock()
	c.nodes[cfg.Cell] = n
	c.addrs[cfg.Cell] = n.RouteURL()[len("nats-route://"):]
	if !slices.Contains(c.order, cfg.Cell) {
		c.order = append(c.order, cfg.Cell)
	}
	c.mu.Unlock()
	return n
}

// Stop closes cell's node; Add starts it again on the same data
// directory and route address.
func (c *Cluster) Stop(cell string) {
	c.mu.Lock()
	n := c.nodes[cell]
	delete(c.nodes, cell)
	c.mu.Unlock()
	if n != nil {
		n.Close()
	}
}

// Node is cell's running node, nil if it is not running.
func (c *Cluster) Node(cell string) *jsnode.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[cell]
}

func (c *Cluster) peers(self string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, cell := range c.order {
		n := c.nodes[cell]
		switch {
		case n == nil || cell == self:
		case c.Cuttable:
			out = append(out, "nats-route://"+c.relayAddr(cell))
		default:
			out = append(out, n.RouteURL())
		}
	}
	return out
}

// Ready waits until JetStream answers on n.
func Ready(t testing.TB, n *jsnode.Node) { t.Helper(); ready(t, n, 30*time.Second) }

func ready(t testing.TB, n *jsnode.Node, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := n.Ready(ctx); err != nil {
		t.Fatalf("%s: %v", n.Name(), err)
	}
}

// WaitFor polls cond every 20 ms until it holds or d passes, then fails
// the test with cond's last description of what it saw.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, still not %s: %s", d, what, saw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Logger is a slog.Logger at warn that writes to the test's log until the
// test ends (a server goroutine may log after that).
func Logger(t testing.TB) *slog.Logger { return testlog.New(t, slog.LevelWarn) }

package cell

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/trawlhq/trawl/cell/coord"
	"github.com/trawlhq/trawl/cell/jobs"
	"github.com/trawlhq/trawl/cell/recipe"
	"github.com/trawlhq/trawl/internal/jsnode"
	"github.com/trawlhq/trawl/internal/members"
)

// JetStreamConfig configures the cell's embedded NATS JetStream node
// (docs/jetstream-design.md §1). Nothing uses the node yet.
type JetStreamConfig struct {
	// RouteListen is the host:port of the node's cluster listener (port
	// 0: a free one). "" runs a standalone node that can never grow: one
	// cell alone (trawl dev, tests).
	RouteListen string
	// TLS runs routes over TLS though RouteListen is on loopback; any
	// other address always uses TLS.
	TLS bool
	// RouteTLS, if set, replaces the certificates derived from the
	// region key (--route-tls-cert/key/ca).
	RouteTLS *tls.Config
	// MaxStore bounds JetStream's file storage (0: the server's choice).
	MaxStore int64
	// SyncAlways fsyncs every write.
	SyncAlways bool
	// AppearWait is how long a clustered cell with a new data directory
	// waits for another cell of its region to appear before it starts
	// its node alone (default 5 s).
	AppearWait time.Duration
}

// joinSettle is how long a clustered cell's turn to join must hold before
// it starts its node: a gossip round or two, so that a cell that appeared
// at the same moment and sorts before it is seen.
const joinSettle = 500 * time.Millisecond

// awaitShare is how long a cell's jobs wait for sharing to start
// (jobs.Config.AwaitShare): a minute for a clustered cell (a new region's
// first cell takes its election timeout, a rejoining one a second or
// two), none for a standalone one, which never shares.
func awaitShare(cfg JetStreamConfig) time.Duration {
	if cfg.RouteListen == "" {
		return 0
	}
	return time.Minute
}

// jsState is the cell's node and how it joined its region.
type jsState struct {
	cfg   JetStreamConfig
	dir   string
	route string // our route URL ("nats-route://host:port"), "" when standalone
	// reserved holds an ephemeral route port from the cell's start (its
	// URL is in the membership meta) until the node binds it: a port
	// freed at once was taken by another process before a node that
	// waited its turn to join started (CI: "bind: address already in
	// use", the cell never joined).
	reserved net.Listener

	node   atomic.Pointer[jsnode.Node]
	state  atomic.Value // string: members.JSWaiting, JSJoining, JSReady; "" standalone
	start  time.Time
	took   atomic.Int64 // ns from the join's start to ready
	err    atomic.Value // string: why the node did not start
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// shared is the node once the cell shares work (shareJobs);
	// onShared the calls waiting for it (OnShared).
	drained atomic.Bool // an operator drained the cell (watchDrain)
	// lease is the region's coordinator lease this cell takes when it is
	// free (cell/coord); nil until the cell shares.
	lease    atomic.Pointer[coord.Lease]
	mu       sync.Mutex
	shared   *jsnode.Node
	onShared []func(jetstream.JetStream)
}

// startLease starts taking the region's coordinator lease, until ctx
// ends (octx bounds the bucket's lookup).
func (c *Cell) startLease(ctx, octx context.Context, n *jsnode.Node) error {
	kv, err := n.JetStream().KeyValue(octx, jsnode.BucketLease)
	if err != nil {
		return fmt.Errorf("the coordinator's lease bucket: %w", err)
	}
	l, err := coord.New(coord.Config{KV: kv, Cell: c.cfg.Name, Instance: n.Name(), Logger: c.cfg.Logger})
	if err != nil {
		return err
	}
	c.js.lease.Store(l)
	c.js.wg.Add(1)
	go func() {
		defer c.js.wg.Done()
		l.Run(ctx)
	}()
	return nil
}

// Coordinating reports whether this cell holds the region's coordinator
// lease now (it feeds the jobs of cells that are down).
func (c *Cell) Coordinating() bool {
	l := c.js.lease.Load()
	if l == nil {
		return false
	}
	_, ok := l.Acting()
	return ok
}

// Drained reports whether an operator drained this cell (a gate of its
// region lists it in its membership meta): it takes no work from the
// region's queues.
func (c *Cell) Drained() bool { return c.js.drained.Load() }

// drainedCells are the cells the region's gates list as drained.
func (c *Cell) drainedCells(m *members.Cluster) []string {
	var out []string
	for _, g := range m.Live(members.RoleGate, c.cfg.Region) {
		out = append(out, strings.Split(g.Drained, ",")...)
	}
	return out
}

// pagePeers are the region's other cells that may index this cell's
// pages beside it (pages.go): live, in the region's cluster, not drained.
func (c *Cell) pagePeers(m *members.Cluster) []string {
	if m == nil {
		return nil
	}
	drained := c.drainedCells(m)
	var out []string
	for _, o := range c.otherCells(m) {
		if o.JS == members.JSReady && !slices.Contains(drained, o.Name) {
			out = append(out, o.Name)
		}
	}
	return out
}

// watchDrain follows the gates' lists of drained cells until ctx ends.
func (c *Cell) watchDrain(ctx context.Context, m *members.Cluster) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		changed := m.Watch()
		on := slices.Contains(c.drainedCells(m), c.cfg.Name)
		if c.js.drained.Swap(on) != on {
			c.cfg.Logger.Info("cell: drain", "drained", on)
		}
		c.jobs.SetDrained(on)
		if l := c.js.lease.Load(); l != nil {
			// A drained cell hands the coordinator's work (feeding dead
			// owners' jobs, scheduling monitor checks) to another.
			l.SetStandby(on)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-t.C:
		}
	}
}

// OnShared calls fn once the cell shares work with its region (its node
// is in the region's cluster and the streams exist): at once, in its own
// goroutine, if it does already. A standalone cell never calls it. The
// crawl server beside a cell shares its tasks this way.
func (c *Cell) OnShared(fn func(js jetstream.JetStream)) {
	j := c.js
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.shared != nil {
		go fn(j.shared.JetStream())
		return
	}
	j.onShared = append(j.onShared, fn)
}

// openJetStream starts a standalone node in the background; a clustered
// one starts when the cell joins its region (JoinRegion).
func (c *Cell) openJetStream() error {
	j := &jsState{cfg: c.cfg.JetStream, dir: filepath.Join(c.cfg.DataDir, "nats")}
	j.state.Store("")
	c.js = j
	if j.cfg.RouteListen == "" {
		// In the background: nothing uses the node yet, and New's many
		// callers (tests above all) need not wait its few milliseconds.
		j.wg.Add(1)
		go func() {
			defer j.wg.Done()
			n, err := jsnode.Start(context.Background(), c.nodeConfig(nil))
			if err != nil {
				j.err.Store(err.Error())
				c.cfg.Logger.Error("jetstream: standalone node", "err", err)
				return
			}
			j.node.Store(n)
		}()
		return nil
	}
	host, port, err := net.SplitHostPort(j.cfg.RouteListen)
	if err != nil {
		return fmt.Errorf("route listen %q: %w", j.cfg.RouteListen, err)
	}
	if port == "0" || port == "" {
		// Fixed now: the route URL goes into the cell's membership meta
		// before the node starts.
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return fmt.Errorf("route listen %q: %w", j.cfg.RouteListen, err)
		}
		port = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		j.reserved = l
	}
	j.cfg.RouteListen = net.JoinHostPort(host, port)
	j.route = "nats-route://" + j.cfg.RouteListen
	j.state.Store(members.JSWaiting)
	return nil
}

func (c *Cell) nodeConfig(peers func() []string) jsnode.Config {
	j := c.js
	return jsnode.Config{
		Region:      c.cfg.Region,
		Cell:        c.cfg.Name,
		Dir:         j.dir,
		Keys:        c.cfg.RegionKeys,
		RouteListen: j.cfg.RouteListen,
		Peers:       peers,
		TLS:         j.cfg.TLS,
		RouteTLS:    j.cfg.RouteTLS,
		MaxStore:    j.cfg.MaxStore,
		SyncAlways:  j.cfg.SyncAlways,
		Logger:      c.cfg.Logger,
	}
}

// RouteURL is the cell's NATS route URL for its membership meta
// (members.Meta.Routes), "" for a standalone node.
func (c *Cell) RouteURL() string { return c.js.route }

// JetStreamState is the cell's join state for its membership meta
// (members.Meta.JS), "" for a standalone node.
func (c *Cell) JetStreamState() string { return c.js.state.Load().(string) }

// JetStream is the cell's node, nil until it has started: a standalone
// node milliseconds after New, a clustered one when its turn to join
// its region has come.
func (c *Cell) JetStream() *jsnode.Node { return c.js.node.Load() }

// JoinRegion starts a clustered cell's node in the background, its peers
// from m (nil: no membership, the node starts alone). A cell with a new
// data directory joins a running region only when no other cell is
// joining and no waiting cell sorts before it by name, so that cells
// enter the meta group one at a time (two at once can split it, docs
// §10). Its state goes into m's meta as it goes. A standalone cell does
// nothing.
func (c *Cell) JoinRegion(m *members.Cluster) {
	j := c.js
	if j.route == "" || j.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	j.cancel = cancel
	j.start = time.Now()
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		if err := c.join(ctx, m); err != nil && ctx.Err() == nil {
			j.err.Store(err.Error())
			c.cfg.Logger.Error("jetstream: join", "err", err)
		}
	}()
}

func (c *Cell) join(ctx context.Context, m *members.Cluster) error {
	j := c.js
	setState := func(s string) {
		j.state.Store(s)
		if m != nil {
			if err := m.UpdateMeta(func(mm *members.Meta) { mm.JS = s }); err != nil {
				c.cfg.Logger.Warn("jetstream: membership meta", "err", err)
			}
		}
	}
	rejoin := jsnode.HasState(j.dir)
	if m != nil && !rejoin {
		wait := j.cfg.AppearWait
		if wait <= 0 {
			wait = 5 * time.Second
		}
		deadline := time.Now().Add(wait)
		for len(c.otherCells(m)) == 0 && time.Now().Before(deadline) {
			if !sleepWatch(ctx, m, time.Until(deadline)) {
				return ctx.Err()
			}
		}
		var turn time.Time
		var waitingFor string
		for {
			if ok, why := c.myTurn(m); !ok {
				if why != waitingFor {
					c.cfg.Logger.Info("jetstream: waiting to join", "why", why)
					waitingFor = why
				}
				turn = time.Time{}
			} else if turn.IsZero() {
				turn = time.Now()
			} else if time.Since(turn) >= joinSettle {
				break
			}
			if !sleepWatch(ctx, m, 100*time.Millisecond) {
				return ctx.Err()
			}
		}
	}
	setState(members.JSJoining)
	// A new peer routes first only to the cells already in the meta
	// group (with none, it starts a cluster of one); once started, and
	// a restarted one from the start, to every cell that has started its
	// node.
	var started atomic.Bool
	started.Store(rejoin)
	if j.reserved != nil {
		j.reserved.Close() // the node binds it now
		j.reserved = nil
	}
	n, err := jsnode.Start(ctx, c.nodeConfig(func() []string { return c.peerRoutes(m, !started.Load()) }))
	if err != nil {
		// Not joining any more: the next cell may take its turn.
		setState(members.JSFailed)
		return err
	}
	started.Store(true)
	j.node.Store(n)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	c.cfg.Logger.Info("jetstream: node started", "server", n.Name(), "route", j.route, "took", time.Since(j.start))
	for !inMetaGroup(n) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	j.took.Store(int64(time.Since(j.start)))
	setState(members.JSReady)
	c.cfg.Logger.Info("jetstream: in the region's meta group", "server", n.Name(), "took", time.Since(j.start))
	return c.shareJobs(ctx, n, m)
}

// retry calls fn until it succeeds, waiting longer after each failure
// (up to 5 s), or until ctx ends.
func (c *Cell) retry(ctx context.Context, what string, fn func() error) error {
	for wait := 250 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		err := fn()
		if err == nil {
			return nil
		}
		c.cfg.Logger.Warn("jetstream: "+what+"; retrying", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// shareJobs creates the region's streams at the replicas the ready
// cells allow (a cell joining later raises them; they never go down) and
// starts sharing job URLs through them.
func (c *Cell) shareJobs(ctx context.Context, n *jsnode.Node, m *members.Cluster) error {
	ready := 1
	for _, mm := range c.otherCells(m) {
		if mm.JS == members.JSReady {
			ready++
		}
	}
	layout := jsnode.RegionLayout(jsnode.Replicas(ready), c.cfg.JobRetention)
	// A new peer may take a moment before its group can place streams,
	// and a stream whose replicas just rose refuses new consumers
	// ("insufficient resources") until its new peers have caught up.
	for wait := 250 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := jsnode.Ensure(ectx, n.JetStream(), layout)
		if err == nil && c.js.lease.Load() == nil {
			err = c.startLease(ctx, ectx, n)
		}
		if err == nil {
			cfg := jobs.ShareConfig{Cell: c.cfg.Name}
			if m != nil {
				// The region's coordinator feeds the jobs of cells
				// that are down (cell/jobs/adopt.go).
				cfg.Live = func(cell string) bool {
					return slices.ContainsFunc(m.Live(members.RoleCell, c.cfg.Region), func(mm members.Meta) bool { return mm.Name == cell })
				}
				cfg.Coordinating = c.Coordinating
				// New jobs' ids name no cell: the gates place each on
				// the cell that minted it (routes.Grammar.Placed).
				cfg.Place = func(id string) bool {
					p, ok := members.Rendezvous(members.Placed(m.Live(members.RoleCell, c.cfg.Region)), id)
					return ok && p.Name == c.cfg.Name
				}
			}
			err = c.jobs.Share(ectx, n.JetStream(), cfg)
		}
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.cfg.Logger.Warn("jetstream: the region's streams are not ready; retrying", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	c.cfg.Logger.Info("jetstream: job URLs shared with the region", "replicas", jsnode.Replicas(ready))
	// Page copies first: a page archived before they start is never
	// copied (TestSearchSurvivesDeadCell lost 4 of 90 with recipe runs
	// shared before them).
	if err := c.retry(ctx, "page copies not started", func() error {
		return c.sharePages(ctx, n.JetStream(), func() []string { return c.pagePeers(m) }, func() []string {
			var out []string
			for _, o := range c.otherCells(m) {
				out = append(out, o.Name)
			}
			return out
		}, c.freshDisk)
	}); err != nil {
		return err
	}
	if m != nil {
		// Checks as work items need the lease's holder to schedule them.
		if err := c.retry(ctx, "monitor checks not shared", func() error { return c.shareChecks(ctx, n.JetStream()) }); err != nil {
			return err
		}
	}
	// Recipe runs in the background: their first reads of the log (the
	// runs to restore) hold up nothing else.
	c.js.wg.Go(func() {
		c.retry(ctx, "background recipe runs not shared", func() error {
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			return c.recipes.Share(sctx, n.JetStream(), recipe.ShareConfig{Cell: c.cfg.Name, Seal: c.cfg.RegionKeys, Paused: c.Drained})
		})
	})
	c.js.mu.Lock()
	c.js.shared = n
	for _, fn := range c.js.onShared {
		go fn(n.JetStream())
	}
	c.js.onShared = nil
	c.js.mu.Unlock()
	if m != nil {
		c.js.wg.Add(1)
		go func() {
			defer c.js.wg.Done()
			c.watchDrain(ctx, m)
		}()
	}
	if m != nil {
		c.advertiseWork(ctx, m)
	}
	return nil
}

// advertiseWork puts the cell's share of the job queue in its membership
// meta every 5 s while it changes, until ctx ends.
func (c *Cell) advertiseWork(ctx context.Context, m *members.Cluster) {
	var last *members.Work
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		st := c.jobs.ShareStats()
		w := members.Work{Queued: int64(st.Queued), Fetching: st.Fetching, Backlog: st.Backlog, Lag: st.Lag, Coordinator: c.Coordinating(),
			Recipes: c.recipes.ShareStats().Running}
		if last == nil || w != *last {
			if err := m.UpdateMeta(func(mm *members.Meta) { mm.Work = &w }); err != nil {
				c.cfg.Logger.Warn("jetstream: membership meta", "err", err)
			} else {
				last = &w
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sleepWatch waits for a membership change, d, or ctx; false when ctx ended.
func sleepWatch(ctx context.Context, m *members.Cluster, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-m.Watch():
	case <-t.C:
	}
	return true
}

// otherCells are the region's other live cells with a route URL.
func (c *Cell) otherCells(m *members.Cluster) []members.Meta {
	var out []members.Meta
	if m == nil {
		return nil
	}
	for _, mm := range m.Live(members.RoleCell, c.cfg.Region) {
		if mm.Name != c.cfg.Name && mm.Routes != "" {
			out = append(out, mm)
		}
	}
	return out
}

// myTurn reports whether this cell may start its node now: no other cell
// is joining, and no waiting cell sorts before it.
func (c *Cell) myTurn(m *members.Cluster) (bool, string) {
	for _, o := range c.otherCells(m) {
		switch {
		case o.JS == members.JSJoining:
			return false, o.Name + " is joining"
		case (o.JS == members.JSWaiting || o.JS == "") && o.Name < c.cfg.Name:
			return false, o.Name + " waits before this cell"
		}
	}
	return true, ""
}

// peerRoutes are the route URLs of the other live cells that have started
// their node (only those in the meta group with ready).
func (c *Cell) peerRoutes(m *members.Cluster, ready bool) []string {
	var out []string
	for _, o := range c.otherCells(m) {
		if o.JS == members.JSReady || (!ready && o.JS == members.JSJoining) {
			out = append(out, o.Routes)
		}
	}
	slices.Sort(out)
	return out
}

// inMetaGroup reports whether n follows or leads its region's meta group
// and knows its real size (a joining node assumes a size no region has
// until its leader tells it).
func inMetaGroup(n *jsnode.Node) bool {
	srv := n.Server()
	if !srv.JetStreamIsCurrent() {
		return false
	}
	jsz, err := srv.Jsz(&server.JSzOptions{})
	if err != nil || jsz.Meta == nil {
		return false
	}
	return jsz.Meta.Leader != "" && jsz.Meta.Size >= 1 && jsz.Meta.Size < 50
}

// JetStreamHealth is the node's part of the cell's /health.
type JetStreamHealth struct {
	Server      string   `json:"server,omitempty"`
	Clustered   bool     `json:"clustered"`
	Route       string   `json:"route,omitempty"`
	State       string   `json:"state,omitempty"` // waiting, joining, ready
	Ready       bool     `json:"ready"`
	MetaLeader  string   `json:"meta_leader,omitempty"`
	IsLeader    bool     `json:"is_meta_leader"`
	ClusterSize int      `json:"cluster_size"`
	Peers       []string `json:"peers,omitempty"` // the meta group's servers, this one included
	RoutedTo    []string `json:"routed_to,omitempty"`
	JoinSeconds float64  `json:"join_seconds,omitempty"`
	Error       string   `json:"error,omitempty"` // why the node did not start
}

// LogReplicas is the region's job log's replicas as this cell sees them:
// how many the stream has, and how many are current (its leader, and the
// followers caught up with it). With 3 replicas and 3 current the region
// survives the loss of any one cell; while a joining cell's replica
// catches up, a cell lost can take the log's quorum with it.
type LogReplicas struct {
	Replicas int    `json:"replicas"`
	Current  int    `json:"current"`
	Leader   string `json:"leader,omitempty"`
}

// JobLogReplicas reports the job log's replicas; nil before the cell
// shares work, or when the log does not answer within a second.
func (c *Cell) JobLogReplicas() *LogReplicas {
	j := c.js
	j.mu.Lock()
	n := j.shared
	j.mu.Unlock()
	if n == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := n.JetStream().Stream(ctx, jsnode.StreamJobLog)
	if err != nil {
		return nil
	}
	info := st.CachedInfo()
	lr := &LogReplicas{Replicas: info.Config.Replicas}
	if ci := info.Cluster; ci != nil {
		lr.Leader = ci.Leader
		if ci.Leader != "" {
			lr.Current++
		}
		for _, r := range ci.Replicas {
			if r.Current {
				lr.Current++
			}
		}
	} else {
		lr.Current = 1 // a standalone node's stream
	}
	return lr
}

// JetStreamHealth reports the node's state.
func (c *Cell) JetStreamHealth() JetStreamHealth {
	j := c.js
	h := JetStreamHealth{Clustered: j.route != "", Route: j.route, State: j.state.Load().(string)}
	h.Error, _ = j.err.Load().(string)
	if d := j.took.Load(); d > 0 {
		h.JoinSeconds = time.Duration(d).Seconds()
	}
	n := j.node.Load()
	if n == nil {
		return h
	}
	h.Server = n.Name()
	srv := n.Server()
	if !h.Clustered {
		h.Ready = srv.JetStreamEnabled()
		h.ClusterSize, h.MetaLeader, h.IsLeader, h.Peers = 1, n.Name(), true, []string{n.Name()}
		return h
	}
	h.RoutedTo = n.RoutedTo()
	jsz, err := srv.Jsz(&server.JSzOptions{})
	if err != nil || jsz.Meta == nil {
		return h
	}
	h.MetaLeader, h.ClusterSize = jsz.Meta.Leader, jsz.Meta.Size
	h.IsLeader = jsz.Meta.Leader == n.Name()
	h.Peers = []string{n.Name()}
	for _, r := range jsz.Meta.Replicas {
		if r != nil {
			h.Peers = append(h.Peers, r.Name)
		}
	}
	slices.Sort(h.Peers)
	h.Ready = h.State == members.JSReady && srv.JetStreamIsCurrent() && h.MetaLeader != ""
	return h
}

// closeJetStream stops the join and the node.
func (c *Cell) closeJetStream() error {
	j := c.js
	if j == nil {
		return nil
	}
	if j.cancel != nil {
		j.cancel()
	}
	j.wg.Wait()
	if j.reserved != nil { // closed before its turn to join
		j.reserved.Close()
		j.reserved = nil
	}
	if n := j.node.Load(); n != nil {
		return n.Close()
	}
	return nil
}

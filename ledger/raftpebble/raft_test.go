package raftpebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/trawlhq/trawl/internal/syncbuf"
	"github.com/trawlhq/trawl/internal/testwait"
	"github.com/trawlhq/trawl/ledger/ledgertest/rafttest"
)

// counter is a deterministic FSM: each command is a big-endian uint64
// added to sum.
type counter struct {
	mu    sync.Mutex
	sum   uint64
	n     uint64 // commands applied
	index uint64 // raft index of the last command applied
}

func (c *counter) Apply(l *raft.Log) any {
	if len(l.Data) != 8 {
		return fmt.Errorf("command at %d: %d bytes, want 8", l.Index, len(l.Data))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sum += binary.BigEndian.Uint64(l.Data)
	c.n++
	c.index = l.Index
	return c.sum
}

func (c *counter) state() (sum, n, index uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sum, c.n, c.index
}

func (c *counter) Snapshot() (raft.FSMSnapshot, error) {
	sum, n, _ := c.state()
	return counterSnapshot{sum: sum, n: n}, nil
}

func (c *counter) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var b [16]byte
	if _, err := io.ReadFull(rc, b[:]); err != nil {
		return fmt.Errorf("restore counter: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sum, c.n = binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	return nil
}

type counterSnapshot struct{ sum, n uint64 }

func (s counterSnapshot) Persist(sink raft.SnapshotSink) error {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], s.sum)
	binary.BigEndian.PutUint64(b[8:], s.n)
	if _, err := sink.Write(b[:]); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (counterSnapshot) Release() {}

// node is one raft server whose log and stable state live in a Store on
// disk; dir and snapDir survive a restart. It is a rafttest.Server.
type node struct {
	c       *cluster
	id      raft.ServerID
	addr    raft.ServerAddress
	dir     string
	snapDir string

	store *Store
	snaps *raft.FileSnapshotStore
	trans *raft.InmemTransport
	fsm   *counter
	raft  *raft.Raft
}

type cluster struct {
	t     *testing.T
	nodes []*node
	logs  *syncbuf.Buffer
	rc    *rafttest.Cluster
}

func newCluster(t *testing.T, n int) *cluster {
	c := &cluster{t: t, logs: new(syncbuf.Buffer), rc: rafttest.NewCluster()}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("raft log:\n%s", c.logs.String())
		}
	})
	for i := range n {
		nd := &node{
			c:       c,
			id:      raft.ServerID(fmt.Sprintf("n%d", i)),
			addr:    raft.ServerAddress(fmt.Sprintf("n%d", i)),
			dir:     t.TempDir(),
			snapDir: t.TempDir(),
		}
		c.nodes = append(c.nodes, nd)
		c.rc.Add(string(nd.id), nd)
	}
	t.Cleanup(func() {
		if err := c.rc.Close(); err != nil {
			t.Error(err)
		}
	})
	for _, nd := range c.nodes {
		c.start(nd)
	}
	return c
}

// start opens nd's stores from disk and starts raft on them.
func (c *cluster) start(nd *node) {
	c.t.Helper()
	if err := c.rc.Start(string(nd.id)); err != nil {
		c.t.Fatal(err)
	}
}

// stop shuts raft down and closes the store, as a process exit would.
func (c *cluster) stop(nd *node) {
	c.t.Helper()
	if err := c.rc.Stop(string(nd.id)); err != nil {
		c.t.Error(err)
	}
}

// Start opens nd's stores from disk and starts raft on them.
func (nd *node) Start() error {
	var err error
	nd.store, err = Open(nd.dir, &Options{FS: vfs.Default, Logger: testLogger(nd.c.t)})
	if err != nil {
		return err
	}
	nd.snaps, err = raft.NewFileSnapshotStore(nd.snapDir, 2, io.Discard)
	if err != nil {
		nd.store.Close()
		return err
	}
	_, nd.trans = raft.NewInmemTransport(nd.addr)
	for _, o := range nd.c.nodes {
		if o != nd && o.trans != nil {
			o.trans.Connect(nd.addr, nd.trans)
			nd.trans.Connect(o.addr, o.trans)
		}
	}
	conf := raft.DefaultConfig()
	conf.LocalID = nd.id
	// Raft's defaults (1 s, 1 s, 500 ms): shorter ones made the leader
	// step down under -race on two loaded cores ("leadership lost while
	// committing log"), and no step of this test waits on an election
	// after the first.
	conf.HeartbeatTimeout = time.Second
	conf.ElectionTimeout = time.Second
	conf.LeaderLeaseTimeout = 500 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	// Snapshots only when the test asks, so compaction happens at known
	// points; TrailingLogs makes that compaction a front DeleteRange that
	// leaves 100 entries.
	conf.SnapshotThreshold = 1 << 40
	conf.SnapshotInterval = time.Hour
	conf.TrailingLogs = 100
	conf.Logger = hclog.New(&hclog.LoggerOptions{Name: string(nd.id), Output: nd.c.logs, Level: hclog.Info})
	nd.fsm = &counter{}
	nd.raft, err = raft.NewRaft(conf, nd.fsm, nd.store, nd.store, nd.snaps, nd.trans)
	if err != nil {
		nd.store.Close()
		nd.trans = nil
		return fmt.Errorf("NewRaft: %w", err)
	}
	return nil
}

// Stop shuts raft down and closes the store, as a process exit would.
func (nd *node) Stop() error {
	var errs []error
	if err := nd.raft.Shutdown().Error(); err != nil {
		errs = append(errs, fmt.Errorf("shutdown: %w", err))
	}
	for _, o := range nd.c.nodes {
		if o != nd && o.trans != nil {
			o.trans.Disconnect(nd.addr)
		}
	}
	nd.trans.DisconnectAll()
	if err := nd.store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close store: %w", err))
	}
	nd.raft, nd.trans = nil, nil
	return errors.Join(errs...)
}

// Raft is nd's running raft, nil while stopped.
func (nd *node) Raft() *raft.Raft { return nd.raft }

func (c *cluster) leader() *node {
	c.t.Helper()
	id, err := c.rc.Leader(20*time.Second, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, nd := range c.nodes {
		if string(nd.id) == id {
			return nd
		}
	}
	panic(id)
}

// apply submits commands from..to (each adds its own number) through the
// leader, pipelined, and checks every future's error and response.
func (c *cluster) apply(from, to uint64) {
	t := c.t
	t.Helper()
	l := c.leader()
	futures := make([]raft.ApplyFuture, 0, to-from+1)
	for i := from; i <= to; i++ {
		futures = append(futures, l.raft.Apply(binary.BigEndian.AppendUint64(nil, i), 5*time.Second))
	}
	for k, f := range futures {
		i := from + uint64(k)
		if err := f.Error(); err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
		if want := i * (i + 1) / 2; f.Response() != want {
			t.Fatalf("apply %d: response %v, want sum %d", i, f.Response(), want)
		}
	}
}

// converge waits until every running node has applied the leader's last
// index, then checks every FSM holds the sum of 1..n.
func (c *cluster) converge(n uint64) {
	t := c.t
	t.Helper()
	l := c.leader()
	if err := l.raft.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatalf("barrier: %v", err)
	}
	want := l.raft.AppliedIndex()
	for _, nd := range c.nodes {
		if nd.raft == nil {
			continue
		}
		testwait.Until(t, 20*time.Second, fmt.Sprintf("%s to apply index %d", nd.id, want), func() bool {
			return nd.raft.AppliedIndex() >= want
		})

		// Raft's AppliedIndex moves when entries are handed to the FSM, not
		// when the FSM has applied them: wait for the FSM itself too.
		testwait.Until(t, 20*time.Second, fmt.Sprintf("%s's FSM to reach %d commands", nd.id, n), func() bool {
			_, cnt, _ := nd.fsm.state()
			return cnt >= n
		})

		if sum, cnt, _ := nd.fsm.state(); sum != n*(n+1)/2 || cnt != n {
			t.Fatalf("%s: FSM sum %d count %d; want sum %d count %d", nd.id, sum, cnt, n*(n+1)/2, n)
		}
	}
}

// snapshot forces a snapshot on nd and checks raft compacted its log from
// the front down to TrailingLogs entries.
func (c *cluster) snapshot(nd *node) {
	t := c.t
	t.Helper()
	if err := nd.raft.Snapshot().Error(); err != nil {
		t.Fatalf("%s: snapshot: %v", nd.id, err)
	}
	first, last := bounds(t, nd.store)
	if first <= 1 || last-first+1 != 100 {
		t.Fatalf("%s: log after snapshot is [%d, %d]; want the last 100 entries", nd.id, first, last)
	}
	if err := nd.store.GetLog(first-1, new(raft.Log)); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("%s: GetLog(%d) below first = %v; want raft.ErrLogNotFound", nd.id, first-1, err)
	}
}

// TestRaftCluster runs three raft nodes on Stores on disk through
// replication, snapshots with log compaction, and two restarts of a
// follower: one that catches up from the leader's log and one that is so
// far behind it must be sent a snapshot.
func TestRaftCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node raft cluster")
	}
	c := newCluster(t, 3)
	cfg := raft.Configuration{}
	for _, nd := range c.nodes {
		cfg.Servers = append(cfg.Servers, raft.Server{ID: nd.id, Address: nd.addr})
	}
	if err := c.nodes[0].raft.BootstrapCluster(cfg).Error(); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}

	c.apply(1, 1000)
	c.converge(1000)
	for _, nd := range c.nodes {
		c.snapshot(nd)
	}

	leader := c.leader()
	var f *node
	for _, nd := range c.nodes {
		if nd != leader {
			f = nd
			break
		}
	}

	// Restart 1: the follower misses 200 commands that are still in the
	// leader's log.
	firstBefore, lastBefore := bounds(t, f.store)
	c.stop(f)
	c.apply(1001, 1200)
	c.start(f)
	if first, last := bounds(t, f.store); first != firstBefore || last < lastBefore {
		t.Fatalf("%s after reopen: log [%d, %d]; before stop [%d, %d]", f.id, first, last, firstBefore, lastBefore)
	}
	c.converge(1200)
	// Its term and vote came back from the stable store.
	if term, err := f.store.GetUint64([]byte("CurrentTerm")); err != nil || term != leader.raft.CurrentTerm() {
		t.Fatalf("%s: CurrentTerm = %d, %v; leader's term %d", f.id, term, err, leader.raft.CurrentTerm())
	}

	// Restart 2: the follower misses 300 commands and the leader compacts
	// past them, so it must install the leader's snapshot.
	_, fLast := bounds(t, f.store)
	c.stop(f)
	c.apply(1201, 1500)
	c.snapshot(leader)
	if lFirst, _ := bounds(t, leader.store); lFirst <= fLast+1 {
		t.Fatalf("leader's log starts at %d; follower needs %d, so no snapshot would be sent", lFirst, fLast+1)
	}
	c.start(f)
	c.converge(1500)
	if !hasSnapshotAtLeast(t, f.snaps, leader.raft.AppliedIndex()-1) {
		t.Errorf("%s caught up without installing the leader's snapshot", f.id)
	}

	// Every node's bounds name entries that exist, and where nodes hold the
	// same index they hold the same entry. The restarted follower's log has
	// a gap: raft kept some of its old entries below the installed
	// snapshot and appended after it (the non-monotonic path).
	c.apply(1501, 1550)
	c.converge(1550)
	var lo, hi uint64 = ^uint64(0), 0
	for _, nd := range c.nodes {
		first, last := bounds(t, nd.store)
		for _, i := range []uint64{first, last} {
			if err := nd.store.GetLog(i, new(raft.Log)); err != nil {
				t.Fatalf("%s: bound %d of [%d, %d]: %v", nd.id, i, first, last, err)
			}
		}
		lo, hi = min(lo, first), max(hi, last)
	}
	shared := 0
	for i := lo; i <= hi; i++ {
		var want raft.Log
		if err := leader.store.GetLog(i, &want); err != nil {
			continue
		}
		held := 0
		for _, nd := range c.nodes {
			var got raft.Log
			switch err := nd.store.GetLog(i, &got); {
			case errors.Is(err, raft.ErrLogNotFound):
				continue
			case err != nil:
				t.Fatalf("%s GetLog(%d): %v", nd.id, i, err)
			}
			if got.Term != want.Term || got.Type != want.Type || string(got.Data) != string(want.Data) || !got.AppendedAt.Equal(want.AppendedAt) {
				t.Fatalf("%s entry %d differs from the leader's", nd.id, i)
			}
			held++
		}
		if held == len(c.nodes) {
			shared++
		}
	}
	if shared < 50 {
		t.Fatalf("only %d entries held by every node; want at least the last 50 commands", shared)
	}
}

func hasSnapshotAtLeast(t *testing.T, snaps raft.SnapshotStore, index uint64) bool {
	t.Helper()
	metas, err := snaps.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range metas {
		if m.Index >= index {
			return true
		}
	}
	return false
}

package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/trawlhq/trawl/internal/testwait"
	"github.com/trawlhq/trawl/ledger"
	"github.com/trawlhq/trawl/ledger/ledgertest/rafttest"
)

// Regions are the default voters: one per region, as in production.
var Regions = []string{"eu", "sin", "us"}

// Options shape a Cluster. The zero value is three voters (Regions) with
// FastRaft, data in a temporary directory.
type Options struct {
	// Regions are the voters' ids; the i-th listens on 127.0.0.(i+1).
	Regions []string
	// Dir holds each voter's data in Dir/<id>/ledger (New: t.TempDir()).
	Dir string
	// Secret is the voters' shared secret (default "s3cret").
	Secret string
	// Raft is every voter's Raft configuration (default FastRaft());
	// RaftOf overrides it for some voters.
	Raft   ledger.RaftConfig
	RaftOf map[string]ledger.RaftConfig
	// Delay, when set, is each link's one-way delay from the start
	// (Net.SetDelay).
	Delay func(from, to string) time.Duration
	// HTTPTimeout bounds a forwarded command (default 2 s).
	HTTPTimeout time.Duration
	// LeaderTimeout bounds the wait for the first leader (default 10 s).
	LeaderTimeout time.Duration
	// Logger defaults to Quiet().
	Logger *slog.Logger
	// StateFS, when set, gives the filesystem of voter id's state store
	// at each start (nil: the OS's): fault injection and simulated
	// crashes of the FSM's store.
	StateFS func(id string) vfs.FS
}

// Cluster is a ledger group on loopback: each voter serves Raft and its
// HTTP API (forwarded commands, membership) on its own 127.0.0.x address,
// through Net. Safe for concurrent use.
type Cluster struct {
	o   Options
	net *Net
	rc  *rafttest.Cluster

	mu    sync.Mutex
	nodes map[string]*voter
	next  int // the next voter's 127.0.0.x
}

// voter is one ledger.Node that can be stopped and started again on its
// data and addresses.
type voter struct {
	c         *Cluster
	peer      ledger.Peer
	peers     []ledger.Peer // the voters it starts knowing
	bootstrap bool
	dir       string
	raftLn    net.Listener // the first start's listeners, opened to pick ports
	apiLn     net.Listener

	mu   sync.Mutex
	node *ledger.Node
	srv  *http.Server
	tr   *http.Transport
}

// New starts a cluster for t and waits for its leader; t's cleanup closes
// it.
func New(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	c, err := Start(o)
	if c != nil {
		t.Cleanup(func() { c.Close() })
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Start starts a cluster and waits for its leader. On error the cluster
// returned (if any) has been closed.
func Start(o Options) (*Cluster, error) {
	if o.Dir == "" {
		return nil, errors.New("ledgertest: Options.Dir is required")
	}
	if len(o.Regions) == 0 {
		o.Regions = Regions
	}
	if o.Secret == "" {
		o.Secret = "s3cret"
	}
	if o.Raft == (ledger.RaftConfig{}) {
		o.Raft = FastRaft()
	}
	if o.HTTPTimeout == 0 {
		o.HTTPTimeout = 2 * time.Second
	}
	if o.LeaderTimeout == 0 {
		o.LeaderTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = Quiet()
	}
	c := &Cluster{o: o, net: NewNet(), rc: rafttest.NewCluster(), nodes: map[string]*voter{}, next: 1}
	c.net.SetDelay(o.Delay)
	var peers []ledger.Peer
	var vs []*voter
	for _, id := range o.Regions {
		v, err := c.newVoter(id)
		if err != nil {
			c.Close()
			return nil, err
		}
		peers = append(peers, v.peer)
		vs = append(vs, v)
	}
	for _, v := range vs {
		v.peers, v.bootstrap = peers, true
	}
	if err := c.rc.StartAll(); err != nil {
		c.Close()
		return nil, err
	}
	if _, err := c.Leader(o.LeaderTimeout); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// newVoter registers a stopped voter on the next loopback address.
func (c *Cluster) newVoter(id string) (*voter, error) {
	c.mu.Lock()
	ip := fmt.Sprintf("127.0.0.%d", c.next)
	c.next++
	c.mu.Unlock()
	raftLn, err := net.Listen("tcp", ip+":0")
	if err != nil {
		return nil, err
	}
	apiLn, err := net.Listen("tcp", ip+":0")
	if err != nil {
		raftLn.Close()
		return nil, err
	}
	dir := filepath.Join(c.o.Dir, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		raftLn.Close()
		apiLn.Close()
		return nil, err
	}
	v := &voter{c: c, dir: dir, raftLn: raftLn, apiLn: apiLn,
		peer: ledger.Peer{ID: id, RaftAddr: raftLn.Addr().String(), APIAddr: apiLn.Addr().String()}}
	c.net.Register(id, v.peer.RaftAddr, v.peer.APIAddr)
	c.mu.Lock()
	c.nodes[id] = v
	c.mu.Unlock()
	c.rc.Add(id, v)
	return v, nil
}

func (v *voter) Start() error {
	o := v.c.o
	raftLn, apiLn := v.raftLn, v.apiLn
	v.raftLn, v.apiLn = nil, nil
	var err error
	if raftLn == nil {
		if raftLn, err = net.Listen("tcp", v.peer.RaftAddr); err != nil {
			return err
		}
	}
	if apiLn == nil {
		if apiLn, err = net.Listen("tcp", v.peer.APIAddr); err != nil {
			raftLn.Close()
			return err
		}
	}
	rc, ok := o.RaftOf[v.peer.ID]
	if !ok {
		rc = o.Raft
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	var fs vfs.FS
	if o.StateFS != nil {
		fs = o.StateFS(v.peer.ID)
	}
	n, err := ledger.OpenNode(ledger.NodeConfig{
		StateFS: fs,
		ID:      v.peer.ID, DataDir: filepath.Join(v.dir, "ledger"), RaftAddr: v.peer.RaftAddr,
		Peers: v.peers, Bootstrap: v.bootstrap, Secret: o.Secret, Raft: rc, Logger: o.Logger,
		RaftListener: raftLn, RaftDialer: v.c.net.Dialer(v.peer.ID),
		HTTPClient: &http.Client{Timeout: o.HTTPTimeout, Transport: v.c.net.Transport(v.peer.ID, tr)},
	})
	if err != nil {
		apiLn.Close()
		return err
	}
	srv := &http.Server{Handler: n.Handler()}
	go srv.Serve(apiLn)
	v.mu.Lock()
	v.node, v.srv, v.tr = n, srv, tr
	v.mu.Unlock()
	return nil
}

func (v *voter) Stop() error {
	v.mu.Lock()
	n, srv, tr := v.node, v.srv, v.tr
	v.node, v.srv, v.tr = nil, nil, nil
	v.mu.Unlock()
	srv.Close()
	err := n.Close()
	tr.CloseIdleConnections()
	return err
}

func (v *voter) Raft() *raft.Raft {
	if n := v.Node(); n != nil {
		return n.Raft()
	}
	return nil
}

// Node is the running node, nil while stopped.
func (v *voter) Node() *ledger.Node {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.node
}

func (c *Cluster) voter(id string) *voter {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

// Net is the network between the voters.
func (c *Cluster) Net() *Net { return c.net }

// IDs are the voters' ids, in the order they were added.
func (c *Cluster) IDs() []string { return c.rc.IDs() }

// Peer is voter id's addresses.
func (c *Cluster) Peer(id string) ledger.Peer {
	v := c.voter(id)
	if v == nil {
		panic("ledgertest: no voter " + id)
	}
	return v.peer
}

// Node is voter id's running node, nil while it is stopped.
func (c *Cluster) Node(id string) *ledger.Node {
	if v := c.voter(id); v != nil {
		return v.Node()
	}
	return nil
}

// StartNode starts voter id again on its data and addresses.
func (c *Cluster) StartNode(id string) error { return c.rc.Start(id) }

// StopNode stops voter id: its API server, Raft and stores close, as when
// its process exits.
func (c *Cluster) StopNode(id string) error { return c.rc.Stop(id) }

// AddNode starts a voter on the next loopback address that knows only
// itself and does not bootstrap: one waiting to be joined through a
// leader's members API.
func (c *Cluster) AddNode(id string) (ledger.Peer, error) {
	v, err := c.newVoter(id)
	if err != nil {
		return ledger.Peer{}, err
	}
	v.peers = []ledger.Peer{v.peer}
	return v.peer, c.rc.Start(id)
}

// Leader polls until a running voter that is not cut off leads, within
// timeout.
func (c *Cluster) Leader(timeout time.Duration) (*ledger.Node, error) {
	for {
		id, err := c.rc.Leader(timeout, func(id string) bool { return !c.net.IsCut(id) })
		if err != nil {
			return nil, err
		}
		if n := c.Node(id); n != nil { // else it stopped since: look again
			return n, nil
		}
	}
}

// Converge waits until every running replica has applied the leader's
// last index, then audits each and checks they have the same state hash.
func (c *Cluster) Converge(timeout time.Duration) (*ledger.AuditReport, error) {
	deadline := time.Now().Add(timeout)
	var leader *ledger.Node
	for {
		var err error
		if leader, err = c.Leader(timeout); err != nil {
			return nil, err
		}
		err = leader.Barrier(5 * time.Second)
		if err == nil {
			break
		}
		// Leadership may move between finding the leader and the barrier.
		if !errors.Is(err, raft.ErrNotLeader) && !errors.Is(err, raft.ErrLeadershipLost) || time.Now().After(deadline) {
			return nil, fmt.Errorf("ledgertest: barrier on %s: %w", leader.ID(), err)
		}
	}
	// Raft's AppliedIndex moves when entries are handed to the FSM, not when
	// it has applied them: compare the FSM's own applied index.
	want := leader.State().Meta().AppliedIndex
	var running []string
	for _, id := range c.IDs() {
		if c.Node(id) != nil {
			running = append(running, id)
		}
	}
	for _, id := range running {
		n := c.Node(id)
		if n == nil {
			continue
		}
		for n.State().Meta().AppliedIndex < want {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("ledgertest: %s stuck at %d < %d", id, n.State().Meta().AppliedIndex, want)
			}
			time.Sleep(testwait.Every)
		}
		// A replica that restored a snapshot fetches the journal before it
		// from another voter: wait for it, so every replica's journal is
		// whole.
		for {
			a, err := n.State().Anchor()
			if err != nil {
				return nil, err
			}
			if a == nil {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("ledgertest: %s never fetched the journal up to its anchor at %d", id, a.Entries)
			}
			time.Sleep(testwait.Every)
		}
	}
	var first *ledger.AuditReport
	for _, id := range running {
		n := c.Node(id)
		if n == nil {
			continue
		}
		rep, err := n.State().Audit()
		if err != nil {
			return nil, fmt.Errorf("ledgertest: audit %s: %w", id, err)
		}
		if !rep.OK() {
			return nil, fmt.Errorf("ledgertest: audit %s: %v", id, rep.Violations)
		}
		if first == nil {
			first = rep
		} else if rep.StateHash != first.StateHash || rep.Entries != first.Entries {
			var views []string
			for _, id2 := range c.IDs() {
				if n2 := c.Node(id2); n2 != nil {
					views = append(views, fmt.Sprintf("%s: raft applied %d, meta %+v", id2, n2.Raft().AppliedIndex(), n2.State().Meta()))
				}
			}
			return nil, fmt.Errorf("ledgertest: replica %s: %d entries %s, others %d %s\n\t%s",
				id, rep.Entries, rep.StateHash, first.Entries, first.StateHash, strings.Join(views, "\n\t"))
		}
	}
	return first, nil
}

// Submit submits cmd through voter id's node and fails unless the ledger
// accepts it, within timeout.
func (c *Cluster) Submit(id string, cmd *ledger.Command, timeout time.Duration) (*ledger.Result, error) {
	n := c.Node(id)
	if n == nil {
		return nil, fmt.Errorf("ledgertest: voter %s is stopped", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := n.Submit(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("submit %s via %s: %w", cmd.ID, id, err)
	}
	if res.Error != "" {
		return res, fmt.Errorf("%s refused: %s", cmd.ID, res.Message)
	}
	return res, nil
}

// Close stops every running voter.
func (c *Cluster) Close() error {
	err := c.rc.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.nodes { // never started
		if v.raftLn != nil {
			v.raftLn.Close()
			v.apiLn.Close()
		}
	}
	return err
}

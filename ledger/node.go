package ledger

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/ledger/raftpebble"
)

// Peer is one voter of the ledger group: its Raft id (the region), its Raft
// address and the address of its HTTP API (where followers forward
// commands to the leader).
type Peer struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft"`
	APIAddr  string `json:"api"`
}

// Dialer opens connections; *net.Dialer, *tls.Dialer and
// golang.org/x/net/proxy's ContextDialer satisfy it.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// RaftConfig is the part of Raft's configuration an operator may tune. A
// zero field takes the default given. The defaults suit regions a few
// hundred milliseconds apart; shorter timeouts elect faster on a LAN (and
// in tests) and flap between distant regions.
type RaftConfig struct {
	// HeartbeatTimeout is how long a follower goes without hearing from
	// the leader before it stands for election (default 1 s).
	HeartbeatTimeout time.Duration
	// ElectionTimeout is how long a candidate waits for votes before it
	// tries again (default 1 s).
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout is how long a leader stays leader without
	// reaching a quorum (default 500 ms); at most HeartbeatTimeout.
	LeaderLeaseTimeout time.Duration
	// CommitTimeout is how long the leader waits before it tells the
	// followers the commit index without new entries (default 50 ms).
	CommitTimeout time.Duration
	// SnapshotThreshold is how many log entries since the last snapshot
	// make the next one (default 8192).
	SnapshotThreshold uint64
	// SnapshotInterval is how often Raft checks whether to snapshot
	// (default 120 s; each node adds up to as much again at random).
	SnapshotInterval time.Duration
	// TrailingLogs is how many entries stay in the log after a snapshot,
	// so a follower a little behind catches up from the log rather than
	// from a whole snapshot (default 10240).
	TrailingLogs uint64
}

// apply sets rc's fields from the non-zero fields of c.
func (c RaftConfig) apply(rc *raft.Config) {
	set := func(dst *time.Duration, v time.Duration) {
		if v != 0 {
			*dst = v
		}
	}
	set(&rc.HeartbeatTimeout, c.HeartbeatTimeout)
	set(&rc.ElectionTimeout, c.ElectionTimeout)
	set(&rc.LeaderLeaseTimeout, c.LeaderLeaseTimeout)
	set(&rc.CommitTimeout, c.CommitTimeout)
	set(&rc.SnapshotInterval, c.SnapshotInterval)
	if c.SnapshotThreshold != 0 {
		rc.SnapshotThreshold = c.SnapshotThreshold
	}
	if c.TrailingLogs != 0 {
		rc.TrailingLogs = c.TrailingLogs
	}
}

// NodeConfig configures a ledger voter.
type NodeConfig struct {
	// ID is the node's Raft server id: its region (eu, sin, us).
	ID string
	// DataDir holds raft/ (log and stable store), snapshots/ and state/.
	DataDir string
	// RaftAddr is the address Raft listens on and advertises.
	RaftAddr string
	// Peers are all voters, this node included.
	Peers []Peer
	// Bootstrap forms a new cluster of Peers when DataDir has no Raft
	// state. Safe to leave on: an existing cluster ignores it.
	Bootstrap bool
	// Secret is shared by the group's nodes; it authorises forwarded
	// commands.
	Secret string
	// RaftListener, when set, is where Raft accepts connections instead
	// of a listener the node opens on RaftAddr (which it still
	// advertises): a socket handed over by systemd, a TLS listener. The
	// node closes it, also when OpenNode fails.
	RaftListener net.Listener
	// RaftDialer connects to the other voters' Raft addresses; default a
	// net.Dialer.
	RaftDialer Dialer
	// HTTPClient forwards commands to the leader; default has a 10 s timeout.
	HTTPClient *http.Client
	// StateFS is the filesystem of the state store (DataDir/state); nil is
	// the OS's. Tests inject faults through it (vfs, errorfs).
	StateFS vfs.FS
	// OnHoldsReduced hears of holds a command took back (State.OnHoldsReduced),
	// from the first command this node applies: the region's holds client
	// (HoldsClient.HoldsReduced).
	OnHoldsReduced func(index uint64, holds []HoldBalance)
	// Raft tunes Raft's timeouts and snapshots; zero fields take defaults.
	Raft   RaftConfig
	Logger *slog.Logger
}

// Node is a ledger voter: Raft with our Pebble stores and the FSM.
type Node struct {
	cfg   NodeConfig
	raft  *raft.Raft
	state *State
	st    *store.Store
	logs  *raftpebble.Store
	trans *raft.NetworkTransport

	mu    sync.RWMutex
	peers map[string]Peer

	stop   chan struct{}
	done   chan struct{}
	bfDone chan struct{} // the backfill loop has ended
}

// OpenNode starts a voter.
func OpenNode(cfg NodeConfig) (*Node, error) {
	if cfg.ID == "" || cfg.DataDir == "" || cfg.RaftAddr == "" {
		if cfg.RaftListener != nil {
			cfg.RaftListener.Close()
		}
		return nil, errors.New("ledger: node needs id, data dir and raft address")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.RaftDialer == nil {
		cfg.RaftDialer = &net.Dialer{}
	}
	for _, d := range []string{"raft", "snapshots", "state"} {
		if err := os.MkdirAll(filepath.Join(cfg.DataDir, d), 0o755); err != nil {
			if cfg.RaftListener != nil {
				cfg.RaftListener.Close()
			}
			return nil, fmt.Errorf("ledger: %w", err)
		}
	}
	n := &Node{cfg: cfg, peers: map[string]Peer{}, stop: make(chan struct{}), done: make(chan struct{}), bfDone: make(chan struct{})}
	for _, p := range cfg.Peers {
		n.peers[p.ID] = p
	}
	var err error
	closeAll := func() {
		if n.logs != nil {
			n.logs.Close()
		}
		if n.st != nil {
			n.st.Close()
		}
		if n.trans != nil {
			n.trans.Close()
		} else if cfg.RaftListener != nil {
			cfg.RaftListener.Close()
		}
	}
	if n.logs, err = raftpebble.Open(filepath.Join(cfg.DataDir, "raft"), &raftpebble.Options{Logger: cfg.Logger}); err != nil {
		closeAll()
		return nil, err
	}
	if n.st, err = store.Open(filepath.Join(cfg.DataDir, "state"), &store.Options{FS: cfg.StateFS, Logger: cfg.Logger}); err != nil {
		closeAll()
		return nil, err
	}
	if n.state, err = OpenState(n.st); err != nil {
		closeAll()
		return nil, err
	}
	if cfg.OnHoldsReduced != nil {
		n.state.OnHoldsReduced(cfg.OnHoldsReduced)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(cfg.DataDir, "snapshots"), 3, hclogger(cfg.Logger))
	if err != nil {
		closeAll()
		return nil, err
	}
	ln := cfg.RaftListener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.RaftAddr); err != nil {
			closeAll()
			return nil, fmt.Errorf("ledger: raft listen: %w", err)
		}
	}
	layer := &streamLayer{Listener: ln, self: cfg.ID, dialer: cfg.RaftDialer}
	n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: layer, MaxPool: 3, Timeout: 5 * time.Second, Logger: hclogger(cfg.Logger),
	})
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = hclogger(cfg.Logger)
	// The FSM lives on disk and knows its applied index: no restore of the
	// last snapshot at start, Raft replays the log after it and Apply skips
	// what the state already has.
	rc.NoSnapshotRestoreOnStart = true
	if n.state.HalfRestored() {
		// A restore was cut short (a crash while a snapshot was installed):
		// the store holds part of a snapshot. Raft keeps the snapshot it
		// was restoring (it is written to the snapshot store before the
		// FSM sees it), so have Raft restore its last snapshot now; the log
		// after it is replayed as usual.
		metas, err := snaps.List()
		if err != nil {
			closeAll()
			return nil, err
		}
		if len(metas) == 0 {
			closeAll()
			return nil, fmt.Errorf("ledger: %s holds a half-restored state and there is no snapshot to restore: remove %s and join the node again", filepath.Join(cfg.DataDir, "state"), cfg.DataDir)
		}
		cfg.Logger.Warn("ledger state was left half restored; restoring the last snapshot", "snapshot", metas[0].ID, "index", metas[0].Index)
		rc.NoSnapshotRestoreOnStart = false
	}
	rc.SnapshotThreshold = 8192
	cfg.Raft.apply(rc)
	r, err := raft.NewRaft(rc, (*fsm)(n.state), n.logs, n.logs, snaps, n.trans)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("ledger: start raft: %w", err)
	}
	n.raft = r
	go n.watchLeadership()
	go n.backfillLoop()
	if cfg.Bootstrap {
		has, err := raft.HasExistingState(n.logs, n.logs, snaps)
		if err != nil {
			n.Close()
			return nil, err
		}
		if !has {
			var servers []raft.Server
			for _, p := range cfg.Peers {
				servers = append(servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr), Suffrage: raft.Voter})
			}
			if err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
				n.Close()
				return nil, fmt.Errorf("ledger: bootstrap: %w", err)
			}
		}
	}
	return n, nil
}

// watchLeadership replicates the configured voters' addresses whenever this
// node becomes leader, so a voter that joins later (or any follower) can
// forward to whichever node leads. set_peer is idempotent by id, and carries
// no time: a node's clock must not turn the ledger's month.
func (n *Node) watchLeadership() {
	defer close(n.done)
	for {
		select {
		case <-n.stop:
			return
		case leader := <-n.raft.LeaderCh():
			if !leader {
				continue
			}
			n.mu.RLock()
			peers := make([]Peer, 0, len(n.peers))
			for _, p := range n.peers {
				peers = append(peers, p)
			}
			n.mu.RUnlock()
			for _, p := range peers {
				if p.APIAddr == "" {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := n.applyLocal(ctx, mustJSON(&Command{ID: "peer/" + p.ID + "/" + p.RaftAddr + "/" + p.APIAddr, Type: CmdSetPeer, SetPeer: &p}))
				cancel()
				if err != nil {
					n.cfg.Logger.Debug("replicating peer addresses", "peer", p.ID, "err", err)
					break
				}
			}
		}
	}
}

// State is this node's replica (reads are local and may lag the leader).
func (n *Node) State() *State { return n.state }

// Raft exposes the Raft instance (operations, tests).
func (n *Node) Raft() *raft.Raft { return n.raft }

// ID is the node's id.
func (n *Node) ID() string { return n.cfg.ID }

// IsLeader reports whether this node leads the group now.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Close shuts Raft down and closes the stores.
func (n *Node) Close() error {
	close(n.stop)
	<-n.done
	<-n.bfDone
	err := n.raft.Shutdown().Error()
	n.trans.Close()
	if e := n.logs.Close(); err == nil {
		err = e
	}
	if e := n.st.Close(); err == nil {
		err = e
	}
	return err
}

// ErrNoLeader is returned when no leader can be reached before the context
// ends.
var ErrNoLeader = errors.New("ledger: no leader reachable")

// Submit applies cmd through Raft and returns its result: on the leader
// directly, from a follower by forwarding to the leader. It retries across
// leader changes until ctx ends. Commands are idempotent by id, so a retry
// after an ambiguous failure is safe.
func (n *Node) Submit(ctx context.Context, cmd *Command) (*Result, error) {
	data, err := json.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	backoff := 10 * time.Millisecond
	var last error = ErrNoLeader
	for {
		var res *Result
		if n.IsLeader() {
			res, err = n.applyLocal(ctx, data)
		} else {
			res, err = n.forward(ctx, data)
		}
		if err == nil {
			return res, nil
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %v", ErrNoLeader, last)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 500*time.Millisecond)
	}
}

func (n *Node) applyLocal(ctx context.Context, data []byte) (*Result, error) {
	f := n.raft.Apply(data, 5*time.Second)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case err := <-done:
		if err != nil {
			return nil, err
		}
	}
	switch r := f.Response().(type) {
	case *Result:
		return r, nil
	case error:
		return nil, r
	default:
		return nil, fmt.Errorf("ledger: unexpected apply response %T", r)
	}
}

func (n *Node) forward(ctx context.Context, data []byte) (*Result, error) {
	_, id := n.raft.LeaderWithID()
	if id == "" {
		return nil, ErrNoLeader
	}
	n.mu.RLock()
	p, ok := n.peers[string(id)]
	n.mu.RUnlock()
	if !ok {
		// A voter that joined after this node started: its addresses are
		// replicated state.
		if rp, err := n.state.Peer(string(id)); err == nil {
			p, ok = *rp, true
		}
	}
	if !ok || p.APIAddr == "" {
		return nil, fmt.Errorf("ledger: no API address for leader %s", id)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.APIAddr+ApplyPath, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Ledger-Secret", n.cfg.Secret)
	req.Header.Set("X-Ledger-From", n.cfg.ID)
	resp, err := n.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode != http.StatusOK {
		var ae APIError
		if json.Unmarshal(body, &ae) != nil || ae.Error == "" {
			return nil, fmt.Errorf("ledger: leader %s answered %d: %s", p.ID, resp.StatusCode, strings.TrimSpace(string(body)))
		}
		if ae.Error == "not_leader" {
			return nil, &NotLeaderError{Node: p.ID, Leader: ae.Leader}
		}
		return nil, fmt.Errorf("ledger: leader %s answered %d %s: %s", p.ID, resp.StatusCode, ae.Error, ae.Message)
	}
	var res Result
	if err := json.Unmarshal(body, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// APIError is the JSON body of every refusal of the node's internal API.
type APIError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	// Leader is the leader this node knows of, with a not_leader error.
	Leader string `json:"leader,omitempty"`
}

// NotLeaderError is the answer of a node that is not the leader (a
// forwarded command, a join, a removal). It is raft.ErrNotLeader to
// errors.Is, as the leader's own Raft answers.
type NotLeaderError struct {
	Node   string // the node that answered
	Leader string // the leader it knows of, if any
}

func (e *NotLeaderError) Error() string {
	if e.Leader != "" {
		return fmt.Sprintf("ledger: %s is not the leader (%s is)", e.Node, e.Leader)
	}
	return fmt.Sprintf("ledger: %s is not the leader", e.Node)
}

// Is makes errors.Is(err, raft.ErrNotLeader) true.
func (e *NotLeaderError) Is(target error) bool { return target == raft.ErrNotLeader }

func writeError(w http.ResponseWriter, status int, body APIError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

func (n *Node) notLeader(w http.ResponseWriter, msg string) {
	_, leader := n.raft.LeaderWithID()
	writeError(w, http.StatusMisdirectedRequest, APIError{Error: "not_leader", Message: msg, Leader: string(leader)})
}

// ApplyPath is where a leader takes forwarded commands.
const ApplyPath = "/internal/ledger/apply"

// MembersPath adds (POST {id, raft, api}) and removes (DELETE /{id}) voters.
const MembersPath = "/internal/ledger/members"

func (n *Node) authorised(w http.ResponseWriter, r *http.Request) bool {
	if subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Ledger-Secret")), []byte(n.cfg.Secret)) != 1 {
		writeError(w, http.StatusUnauthorized, APIError{Error: "unauthorized", Message: "bad ledger secret"})
		return false
	}
	return true
}

// JournalPath serves this replica's journal entries after ?after=N up to
// &upto=M (NDJSON), for a replica that restored a snapshot and backfills
// the entries before it. 409 when this replica lacks them itself.
const JournalPath = "/internal/ledger/journal"

// backfillLoop fetches, while this replica's journal resumes from an anchor
// (it restored a snapshot without the entries before it), those entries
// from another voter, every few seconds until one has them.
func (n *Node) backfillLoop() {
	defer close(n.bfDone)
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		if a, err := n.state.Anchor(); err == nil && a != nil {
			if err := n.backfill(a); err != nil {
				n.cfg.Logger.Warn("ledger journal backfill", "anchor", a.Entries, "err", err)
			} else {
				n.cfg.Logger.Info("ledger journal backfilled", "entries", a.Entries)
			}
		}
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
	}
}

func (n *Node) backfill(a *Anchor) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	hc := *n.cfg.HTTPClient
	hc.Timeout = 0 // a long journal; n.stop ends it
	// The voters this node was configured with, and those replicated (a
	// node that joined knows only itself).
	known := map[string]Peer{}
	if rp, err := n.state.Peers(); err == nil {
		for _, p := range rp {
			known[p.ID] = p
		}
	}
	n.mu.RLock()
	for _, p := range n.peers {
		known[p.ID] = p
	}
	n.mu.RUnlock()
	var peers []Peer
	for _, p := range known {
		if p.ID != n.cfg.ID && p.APIAddr != "" {
			peers = append(peers, p)
		}
	}
	slices.SortFunc(peers, func(x, y Peer) int { return strings.Compare(x.ID, y.ID) })
	last := errors.New("no other voter known")
	for _, p := range peers {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s%s?after=0&upto=%d", p.APIAddr, JournalPath, a.Entries), nil)
		if err != nil {
			return err
		}
		req.Header.Set("X-Ledger-Secret", n.cfg.Secret)
		resp, err := hc.Do(req)
		if err != nil {
			last = err
			continue
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			last = fmt.Errorf("%s answered %s", p.ID, resp.Status)
			continue
		}
		dec := json.NewDecoder(bufio.NewReaderSize(resp.Body, 1<<20))
		err = n.state.Backfill(func() (*Entry, error) {
			var e Entry
			if err := dec.Decode(&e); err != nil {
				return nil, err
			}
			return &e, nil
		})
		resp.Body.Close()
		if err == nil {
			return nil
		}
		last = fmt.Errorf("from %s: %w", p.ID, err)
	}
	return last
}

// StatusPath reports a node's view of the group (for operators and tests).
const StatusPath = "/internal/ledger/status"

// NodeStatus is the body of StatusPath.
type NodeStatus struct {
	ID       string `json:"id"`
	State    string `json:"state"` // Leader, Follower, Candidate
	Leader   string `json:"leader"`
	Applied  uint64 `json:"applied_index"`
	Entries  uint64 `json:"entries"`
	LastHash string `json:"last_hash"`
}

// Status is this node's view.
func (n *Node) Status() NodeStatus {
	_, leader := n.raft.LeaderWithID()
	m := n.state.Meta()
	return NodeStatus{ID: n.cfg.ID, State: n.raft.State().String(), Leader: string(leader),
		Applied: m.AppliedIndex, Entries: m.Entries, LastHash: m.LastHash}
}

// Progress is how far the node's replica has come: whether it knows a
// leader, the index it has applied and the index it knows committed.
func (n *Node) Progress() (leader bool, applied, committed uint64) {
	_, id := n.raft.LeaderWithID()
	return id != "", n.raft.AppliedIndex(), n.raft.CommitIndex()
}

// Handler serves the node's internal API (forwarded commands, status).
func (n *Node) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+StatusPath, func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Ledger-Secret")), []byte(n.cfg.Secret)) != 1 {
			writeError(w, http.StatusUnauthorized, APIError{Error: "unauthorized", Message: "bad ledger secret"})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(n.Status())
	})
	mux.HandleFunc("GET "+JournalPath, func(w http.ResponseWriter, r *http.Request) {
		if !n.authorised(w, r) {
			return
		}
		after, err1 := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
		upto, err2 := strconv.ParseUint(r.URL.Query().Get("upto"), 10, 64)
		if err1 != nil || err2 != nil {
			writeError(w, http.StatusBadRequest, APIError{Error: "bad_input", Message: "want ?after=N&upto=M"})
			return
		}
		if a, err := n.state.Anchor(); err != nil || (a != nil && a.Entries > after) {
			writeError(w, http.StatusConflict, APIError{Error: "not_here", Message: "this replica restored a snapshot without those entries"})
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		bw := bufio.NewWriterSize(w, 1<<20)
		enc := json.NewEncoder(bw)
		n.state.Journal(after, func(e *Entry) (bool, error) {
			if e.Index > upto {
				return false, nil
			}
			return true, enc.Encode(e)
		})
		bw.Flush()
	})
	mux.HandleFunc("POST "+MembersPath, func(w http.ResponseWriter, r *http.Request) {
		if !n.authorised(w, r) {
			return
		}
		var p Peer
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&p); err != nil || p.ID == "" || p.RaftAddr == "" || p.APIAddr == "" {
			writeError(w, http.StatusBadRequest, APIError{Error: "bad_input", Message: `want {"id","raft","api"}`})
			return
		}
		if !n.IsLeader() {
			n.notLeader(w, "send joins to the leader")
			return
		}
		if err := n.AddVoter(r.Context(), p); err != nil {
			writeError(w, http.StatusServiceUnavailable, APIError{Error: "join_failed", Message: err.Error()})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(n.Status())
	})
	mux.HandleFunc("DELETE "+MembersPath+"/{id}", func(w http.ResponseWriter, r *http.Request) {
		if !n.authorised(w, r) {
			return
		}
		if !n.IsLeader() {
			n.notLeader(w, "send removals to the leader")
			return
		}
		if err := n.RemoveVoter(r.PathValue("id")); err != nil {
			writeError(w, http.StatusServiceUnavailable, APIError{Error: "remove_failed", Message: err.Error()})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST "+ApplyPath, func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Ledger-Secret")), []byte(n.cfg.Secret)) != 1 {
			writeError(w, http.StatusUnauthorized, APIError{Error: "unauthorized", Message: "bad ledger secret"})
			return
		}
		if !n.IsLeader() {
			n.notLeader(w, "this node is not the leader")
			return
		}
		data, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			writeError(w, http.StatusBadRequest, APIError{Error: "bad_input", Message: err.Error()})
			return
		}
		res, err := n.applyLocal(r.Context(), data)
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			n.notLeader(w, err.Error())
			return
		}
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, APIError{Error: "apply_failed", Message: err.Error()})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(res)
	})
	return mux
}

// AddVoter adds (or re-addresses) a voter; run on the leader. Its addresses
// are replicated first, so every node can forward to it once it leads.
func (n *Node) AddVoter(ctx context.Context, p Peer) error {
	// Every voter's addresses, so the newcomer can forward to any leader
	// (configured peers were never replicated; set_peer is idempotent).
	n.mu.Lock()
	n.peers[p.ID] = p
	all := make([]Peer, 0, len(n.peers))
	for _, q := range n.peers {
		all = append(all, q)
	}
	n.mu.Unlock()
	for _, q := range all {
		res, err := n.applyLocal(ctx, mustJSON(&Command{ID: "peer/" + q.ID + "/" + q.RaftAddr + "/" + q.APIAddr, Type: CmdSetPeer, SetPeer: &q}))
		if err != nil {
			return err
		}
		if res.Error != "" {
			return fmt.Errorf("ledger: %s", res.Message)
		}
	}
	return n.raft.AddVoter(raft.ServerID(p.ID), raft.ServerAddress(p.RaftAddr), 0, 10*time.Second).Error()
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// RemoveVoter removes a voter; run on the leader.
func (n *Node) RemoveVoter(id string) error {
	return n.raft.RemoveServer(raft.ServerID(id), 0, 10*time.Second).Error()
}

// Barrier waits until every command committed before it is applied on this
// node (leader only).
func (n *Node) Barrier(timeout time.Duration) error { return n.raft.Barrier(timeout).Error() }

// streamLayer is Raft's TCP transport with a one-line preamble naming the
// sender (for operators reading connection logs and proxies; a node reads
// and drops it).
type streamLayer struct {
	net.Listener
	self   string
	dialer Dialer
}

func (s *streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := s.dialer.DialContext(ctx, "tcp", string(addr))
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(c, s.self+"\n"); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (s *streamLayer) Accept() (net.Conn, error) {
	for {
		c, err := s.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		_, err = br.ReadString('\n')
		c.SetReadDeadline(time.Time{})
		if err != nil {
			c.Close()
			continue
		}
		return &bufferedConn{Conn: c, r: br}, nil
	}
}

func (s *streamLayer) Addr() net.Addr { return s.Listener.Addr() }

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// hclogger adapts slog for Raft's hclog (at warn and above: Raft is chatty).
func hclogger(l *slog.Logger) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:   "raft",
		Level:  hclog.Warn,
		Output: slogWriter{l},
	})
}

type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.l.Warn(strings.TrimSpace(string(p)), "component", "raft")
	return len(p), nil
}

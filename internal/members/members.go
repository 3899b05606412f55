// Package members is the membership of a region: its cells and its gate gossip
// with hashicorp/memberlist, and each member keeps a live view of the others.
// The gate builds its upstream list from the live cells (Live), and work with
// one owner is placed over the same list.
//
// # Meta
//
// Every member carries a Meta as its memberlist node metadata, JSON-encoded:
// its role ("cell" or "gate"), region, name within the region and the
// host:port of its HTTP API, which is what a gate proxies to. Memberlist caps
// metadata at 512 bytes; Start refuses a larger Meta with ErrMetaTooLarge.
//
// # Keys
//
// All gossip, UDP and TCP, is encrypted and authenticated with the
// region's keys (Config.Keys, memberlist's keyring): a process without
// them cannot join, and its packets are dropped unread. Start refuses an
// empty keyring.
// A member's memberlist name defaults to "<role>:<region>.<name>" and must be
// unique in the cluster. Packets are labelled "trawl/<region>", so a member
// given another region's seeds cannot join it.
//
// # Timings
//
// A cell that dies must leave the gate's upstream list within 5 seconds.
// Memberlist's LAN defaults take about 5 s with three members and up to 26 s
// with more: a suspect waits 4 probe intervals of 1 s, and from four members
// on that wait starts 6 times longer and shortens only as other members
// confirm the suspicion. So they are tightened:
//
//   - ProbeInterval 500ms, ProbeTimeout 200ms: each member probes another every
//     half second; a loopback or LAN ack takes well under a millisecond, so
//     200 ms leaves room for a busy machine, and the rest of the interval goes
//     to indirect probes through other members and a TCP probe.
//   - SuspicionMult 4, SuspicionMaxTimeoutMult 1: a suspect is declared dead
//     after 4 probe intervals (2 s) times max(1, log10(members)), a fixed time
//     rather than one that starts 6 times longer and waits for confirmations.
//     A member that is merely slow has those 2 s to refute.
//   - AwarenessMaxMultiplier 2: a member that thinks itself unhealthy may slow
//     its probes to at most 1 s (default 8 s), so the bound survives a loaded
//     machine.
//   - GossipInterval 100ms: the death reaches everyone within a few rounds.
//
// So a killed member is gone from the others' views after at most about
// 0.5 (until someone probes it) + 0.5 (the failed probe round) + 2 (suspicion)
// + 0.2 (gossip) = 3.2 s with up to 10 members, about 4 s with 25 (the
// times measured: docs/performance.md, "Membership"). A member that stops
// cleanly (Close) is gone at once: it gossips its own departure before
// shutting down.
//
// Also: PushPullInterval 10s (a full state exchange, the repair path after a
// partition), TCPTimeout 3s (joins and TCP probes), and DeadNodeReclaimTime
// 1ns, so a restarted member may take over its predecessor's name at a new
// address as soon as that one is declared dead, not 30 s later when it is
// forgotten.
//
// # Joining
//
// Start never waits for the seeds: a cell may start before its gate. A
// background loop joins the seeds that are not live members, with a backoff
// from 250ms to 5s while they are unreachable, then rechecks every 5 s until
// Close, so a seed that restarts after everyone has forgotten it is joined
// again. A member restarted on a new port is refused by the others while its
// killed predecessor is still alive or suspect to them; told of that
// conflict, it exchanges state with the seeds every second for 10 s, and so
// hears of the predecessor's death and takes over its name within about a
// second of it.
package members

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Roles of a member.
const (
	RoleCell = "cell"
	RoleGate = "gate"
)

// ErrNoKeys is returned by Start without Keys: gossip is never in the
// clear.
var ErrNoKeys = errors.New("members: no keys: a region's gossip must be encrypted")

// ErrMetaTooLarge is returned by Start for a Meta whose encoding exceeds
// memberlist's 512-byte limit.
var ErrMetaTooLarge = errors.New("member meta too large")

// Meta is what a member tells the others about itself.
type Meta struct {
	Role   string `json:"role"`   // RoleCell or RoleGate
	Region string `json:"region"` // e.g. "eu"
	Name   string `json:"name"`   // unique within role and region, e.g. "c1"
	API    string `json:"api"`    // host:port of its HTTP API; required of a cell
	// Routes is a cell's NATS route URL ("nats-route://host:port", no
	// credentials): where the region's other cells route to its embedded
	// JetStream node (internal/jsnode). Empty for a gate and for a cell
	// without a cluster listener.
	Routes string `json:"routes,omitempty"`
	// JS is a clustered cell's JetStream join state (cell/jetstream.go):
	// JSWaiting before its node starts, JSJoining while it starts and
	// enters the region's meta group, JSReady once it is in it, JSFailed
	// when its node did not start. Cells join a running region one at a
	// time by it.
	JS string `json:"js,omitempty"`
	// Work is a sharing cell's part of the region's job queue
	// (cell/jobs/share.go), refreshed every few seconds: what the
	// operator's cells view shows without asking each cell.
	Work *Work `json:"work,omitempty"`
	// Drained is a gate's list of its region's cells an operator drained
	// (POST /operator/v1/cells/{name}/drain), comma-separated (Meta stays
	// comparable): such a cell takes no work from the region's queues,
	// and finishes what it holds.
	Drained string `json:"drained,omitempty"`
}

// Work is a cell's share of the region's job queue (Meta.Work).
type Work struct {
	Queued   int64 `json:"queued"`   // its jobs' URLs in the queue without an outcome
	Fetching int64 `json:"fetching"` // items its pullers hold
	Backlog  int64 `json:"backlog"`  // the region's URLs waiting for a puller
	Lag      int64 `json:"lag"`      // outcomes of its URLs not recorded yet
	// Recipes: the background recipe runs its runners hold (any cell's).
	Recipes int64 `json:"recipes,omitempty"`
	// Coordinator: it holds the region's coordinator lease (cell/coord):
	// it feeds the jobs of cells that are down.
	Coordinator bool `json:"coordinator,omitempty"`
}

// A clustered cell's JetStream join states (Meta.JS).
const (
	JSWaiting = "waiting"
	JSJoining = "joining"
	JSReady   = "ready"
	JSFailed  = "failed" // its node did not start (its /health says why)
)

func (m Meta) validate() error {
	if m.Role != RoleCell && m.Role != RoleGate {
		return fmt.Errorf("role %q: want %q or %q", m.Role, RoleCell, RoleGate)
	}
	if m.Region == "" || m.Name == "" {
		return errors.New("region and name are required")
	}
	if m.API == "" && m.Role == RoleCell {
		return errors.New("a cell needs its API address")
	}
	if m.API != "" {
		if _, _, err := net.SplitHostPort(m.API); err != nil {
			return fmt.Errorf("api address: %w", err)
		}
	}
	if m.Routes != "" {
		u, err := url.Parse(m.Routes)
		if err != nil || u.Scheme != "nats-route" || u.User != nil || u.Port() == "" {
			return fmt.Errorf("routes %q: want nats-route://host:port", m.Routes)
		}
	}
	return nil
}

// Config configures a member.
type Config struct {
	// Name is the member's name in the cluster, unique in it. Default
	// "<role>:<region>.<name>" from Meta.
	Name string
	// Bind is the host:port to gossip on, UDP and TCP; port 0 picks a free
	// one (see LocalAddr). Default "127.0.0.1:0".
	Bind string
	// Advertise is the host:port the others reach this member at, when it is
	// not the bound address (NAT, a 0.0.0.0 bind). A port of 0 means the bound
	// port.
	Advertise string
	// Join lists seeds (host:port), usually the region's gate. Empty: the
	// member waits for others to join it.
	Join []string
	Meta Meta
	// Keys encrypt and authenticate all gossip (AES-GCM, memberlist's
	// keyring): the first encrypts, every one decrypts, so a key can be
	// rotated without a restart of the whole region at once (see
	// docs/security.md). Required: a member without the region's keys
	// can neither join nor be heard. Each key has 16, 24 or 32 bytes.
	Keys [][]byte
	// LeaveTimeout bounds how long Close waits for its departure to be
	// gossiped. Default 1s.
	LeaveTimeout time.Duration
	Logger       *slog.Logger
}

// Timings; see the package comment.
const (
	probeInterval        = 500 * time.Millisecond
	probeTimeout         = 200 * time.Millisecond
	suspicionMult        = 4
	suspicionMaxMult     = 1
	awarenessMaxMult     = 2
	gossipInterval       = 100 * time.Millisecond
	pushPullInterval     = 10 * time.Second
	tcpTimeout           = 3 * time.Second
	joinRetryMin         = 250 * time.Millisecond
	joinRetryMax         = 5 * time.Second
	reclaimRetry         = time.Second
	reclaimWindow        = 10 * time.Second
	defaultLeaveTimeout  = time.Second
	deadNodeReclaimAfter = time.Nanosecond
)

// Cluster is this process's membership of its region.
type Cluster struct {
	ml           *memberlist.Memberlist
	name         string
	log          *slog.Logger
	seeds        []string
	leaveTimeout time.Duration

	mu    sync.Mutex      // guards nodes, addrs and publishing views
	nodes map[string]Meta // by memberlist name
	// addrs are the live members' addresses by name, as the events last
	// gave them: memberlist's own Node structs change under its lock, so
	// reading them from Members() races with its updates.
	addrs map[string]string
	view  atomic.Pointer[view]

	stop      chan struct{} // closed by Close: ends the join loop
	joined    chan struct{} // closed when the join loop has ended
	conflict  chan struct{} // another member holds our name
	closeOnce sync.Once
	closeErr  error

	localAddr  string
	delegate   *delegate
	metaMu     sync.Mutex // serialises UpdateMeta, and it with Close
	metaV      Meta
	metaClosed bool
}

type group struct{ role, region string }

// view is an immutable snapshot of the live members, replaced on every change.
type view struct {
	live    map[group][]Meta
	changed chan struct{} // closed when the view is replaced
}

// Start joins the region's membership. It binds at once and joins the seeds
// in the background; it fails only for a bad configuration or an address it
// cannot bind.
func Start(cfg Config) (*Cluster, error) {
	if err := cfg.Meta.validate(); err != nil {
		return nil, fmt.Errorf("members: meta: %w", err)
	}
	meta, err := json.Marshal(cfg.Meta)
	if err != nil {
		return nil, fmt.Errorf("members: meta: %w", err)
	}
	if len(meta) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("members: %w: %d bytes, limit %d", ErrMetaTooLarge, len(meta), memberlist.MetaMaxSize)
	}
	if len(cfg.Keys) == 0 {
		return nil, ErrNoKeys
	}
	keyring, err := memberlist.NewKeyring(cfg.Keys, cfg.Keys[0])
	if err != nil {
		return nil, fmt.Errorf("members: keys: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LeaveTimeout <= 0 {
		cfg.LeaveTimeout = defaultLeaveTimeout
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Meta.Role + ":" + cfg.Meta.Region + "." + cfg.Meta.Name
	}
	if cfg.Bind == "" {
		cfg.Bind = "127.0.0.1:0"
	}

	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.Name
	mc.Label = "trawl/" + cfg.Meta.Region
	if mc.BindAddr, mc.BindPort, err = splitHostPort(cfg.Bind); err != nil {
		return nil, fmt.Errorf("members: bind: %w", err)
	}
	if cfg.Advertise != "" {
		if mc.AdvertiseAddr, mc.AdvertisePort, err = splitHostPort(cfg.Advertise); err != nil {
			return nil, fmt.Errorf("members: advertise: %w", err)
		}
		if mc.AdvertisePort == 0 {
			mc.AdvertisePort = mc.BindPort // memberlist sets it when it picks the port
		}
	}
	mc.Keyring = keyring
	mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	mc.ProbeInterval = probeInterval
	mc.ProbeTimeout = probeTimeout
	mc.SuspicionMult = suspicionMult
	mc.SuspicionMaxTimeoutMult = suspicionMaxMult
	mc.AwarenessMaxMultiplier = awarenessMaxMult
	mc.GossipInterval = gossipInterval
	mc.PushPullInterval = pushPullInterval
	mc.TCPTimeout = tcpTimeout
	mc.DeadNodeReclaimTime = deadNodeReclaimAfter

	logger := cfg.Logger.With("member", cfg.Name)
	mc.Logger = newStdLogger(logger.With("component", "memberlist"))

	c := &Cluster{
		name:         cfg.Name,
		log:          logger,
		seeds:        slices.Clone(cfg.Join),
		leaveTimeout: cfg.LeaveTimeout,
		nodes:        map[string]Meta{},
		addrs:        map[string]string{},
		stop:         make(chan struct{}),
		joined:       make(chan struct{}),
		conflict:     make(chan struct{}, 1),
	}
	c.view.Store(&view{live: map[group][]Meta{}, changed: make(chan struct{})})
	c.delegate = &delegate{}
	c.delegate.meta.Store(&meta)
	c.metaV = cfg.Meta
	mc.Delegate = c.delegate
	mc.Events = events{c}
	mc.Conflict = conflicts{c}
	// Create reports this member to events before it returns: c is ready.
	c.ml, err = memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("members: start %s on %s: %w", cfg.Name, cfg.Bind, err)
	}
	// Read once: memberlist rewrites its local node's fields under its
	// own lock when the meta changes (UpdateMeta).
	c.localAddr = c.ml.LocalNode().Address()
	logger.Info("membership started", "addr", c.LocalAddr(), "seeds", cfg.Join)
	go c.joinLoop()
	return c, nil
}

func splitHostPort(hostport string) (string, int, error) {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", p, err)
	}
	return host, int(port), nil
}

// Live returns the live members of a role in a region, this member included,
// sorted by name. It is a map lookup in an immutable snapshot, cheap enough
// for every request; the slice is shared and must not be modified.
func (c *Cluster) Live(role, region string) []Meta {
	return c.view.Load().live[group{role, region}]
}

// Watch returns a channel that is closed at the next change of the live set.
// Read the members after taking the channel, so no change is missed:
//
//	for {
//		changed := c.Watch()
//		use(c.Live(members.RoleCell, "eu"))
//		<-changed
//	}
func (c *Cluster) Watch() <-chan struct{} {
	return c.view.Load().changed
}

// LocalAddr is the host:port this member gossips on as the others see it,
// the one to give other members as a seed.
func (c *Cluster) LocalAddr() string {
	return c.localAddr
}

// Close leaves the membership, so the others drop this member at once
// rather than after failure detection, and shuts it down. It may be called
// more than once.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		close(c.stop)
		<-c.joined
		c.metaMu.Lock() // no meta update from now on
		c.metaClosed = true
		c.metaMu.Unlock()
		// A leave that times out is not a failure of Close: the others then
		// notice the departure by failure detection.
		if err := c.ml.Leave(c.leaveTimeout); err != nil {
			c.log.Warn("leaving membership", "err", err)
		}
		if err := c.ml.Shutdown(); err != nil {
			c.closeErr = fmt.Errorf("members: shutdown: %w", err)
		}
	})
	return c.closeErr
}

// joinLoop joins the seeds that are not live members until Close: at once,
// then with backoff while none answers, then every joinRetryMax. After a name
// conflict it exchanges state with every seed each reclaimRetry for
// reclaimWindow, so that this member takes over its name as soon as the
// others declare its predecessor dead.
func (c *Cluster) joinLoop() {
	defer close(c.joined)
	timer := time.NewTimer(0)
	defer timer.Stop()
	backoff := joinRetryMin
	joined := false
	var reclaimUntil time.Time
	for {
		select {
		case <-c.stop:
			return
		case <-c.conflict:
			if time.Now().After(reclaimUntil) {
				c.log.Info("another member holds this member's name, probably its killed predecessor; retrying until it is declared dead")
				timer.Reset(reclaimRetry)
			}
			reclaimUntil = time.Now().Add(reclaimWindow)
			continue
		case <-timer.C:
		}
		reclaiming := time.Now().Before(reclaimUntil)
		seeds := c.seedsToJoin(reclaiming)
		next := joinRetryMax
		if len(seeds) > 0 {
			n, err := c.ml.Join(seeds)
			if err == nil {
				if !joined {
					c.log.Info("joined membership", "seeds_reached", n, "members", c.ml.NumMembers())
				}
				joined, backoff = true, joinRetryMin
			} else {
				level := slog.LevelDebug
				if backoff == joinRetryMin {
					level = slog.LevelWarn // the first failure of a run
				}
				c.log.Log(context.Background(), level, "cannot reach membership seeds; retrying", "seeds", seeds, "err", err, "retry_in", backoff)
				joined, next, backoff = false, backoff, min(2*backoff, joinRetryMax)
			}
		}
		if reclaiming {
			next = min(next, reclaimRetry)
		}
		timer.Reset(next)
	}
}

// seedsToJoin returns the seeds other than this member, only those that are
// not live members unless all. A seed that does not resolve counts as not
// live.
func (c *Cluster) seedsToJoin(all bool) []string {
	self := c.LocalAddr()
	live := map[string]bool{}
	if !all {
		c.mu.Lock()
		for _, a := range c.addrs {
			live[a] = true
		}
		c.mu.Unlock()
	}
	var out []string
	for _, s := range c.seeds {
		addr, err := net.ResolveUDPAddr("udp", s)
		if err == nil && (addr.String() == self || live[addr.String()]) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// set records a member's meta (nil: the member is gone) and publishes a new
// view. Memberlist calls it with its own lock held, so it must not call back.
func (c *Cluster) set(name string, m *Meta) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m == nil {
		if _, ok := c.nodes[name]; !ok {
			return
		}
		delete(c.nodes, name)
	} else {
		c.nodes[name] = *m
	}
	live := map[group][]Meta{}
	for _, m := range c.nodes {
		g := group{m.Role, m.Region}
		live[g] = append(live[g], m)
	}
	for g, ms := range live {
		slices.SortFunc(ms, func(a, b Meta) int { return strings.Compare(a.Name, b.Name) })
		live[g] = slices.Clip(ms)
	}
	old := c.view.Swap(&view{live: live, changed: make(chan struct{})})
	close(old.changed)
}

// events feeds memberlist's join, leave and update events to the view.
type events struct{ c *Cluster }

func (e events) NotifyJoin(n *memberlist.Node)   { e.update(n) }
func (e events) NotifyUpdate(n *memberlist.Node) { e.update(n) }
func (e events) NotifyLeave(n *memberlist.Node) {
	e.c.setAddr(n.Name, "")
	e.c.set(n.Name, nil)
}

// setAddr records a live member's address ("" when it left).
func (c *Cluster) setAddr(name, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if addr == "" {
		delete(c.addrs, name)
	} else {
		c.addrs[name] = addr
	}
}

func (e events) update(n *memberlist.Node) {
	e.c.setAddr(n.Name, n.Address())
	var m Meta
	if err := json.Unmarshal(n.Meta, &m); err != nil || m.validate() != nil {
		// Not one of ours, or a broken one: never route to it.
		e.c.log.Warn("ignoring member with unusable meta", "node", n.Name, "addr", n.Address(), "meta", string(n.Meta))
		e.c.set(n.Name, nil)
		return
	}
	e.c.set(n.Name, &m)
}

// conflicts hears of a member whose name is held at another address.
// Memberlist calls it with its lock held, so it must not call back.
type conflicts struct{ c *Cluster }

func (d conflicts) NotifyConflict(existing, other *memberlist.Node) {
	// Only the newcomer must act: the others keep the name's holder until it
	// is declared dead.
	if existing.Name == d.c.name {
		select {
		case d.c.conflict <- struct{}{}:
		default:
		}
	}
}

// UpdateMeta changes this member's meta with change and gossips it (the
// others see it within about a gossip round). Role, Region and Name must
// not change.
func (c *Cluster) UpdateMeta(change func(*Meta)) error {
	c.metaMu.Lock()
	defer c.metaMu.Unlock()
	if c.metaClosed {
		return errors.New("members: closed")
	}
	m := c.metaV
	change(&m)
	if m.Role != c.metaV.Role || m.Region != c.metaV.Region || m.Name != c.metaV.Name {
		return errors.New("members: meta: role, region and name cannot change")
	}
	if err := m.validate(); err != nil {
		return fmt.Errorf("members: meta: %w", err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("members: meta: %w", err)
	}
	if len(b) > memberlist.MetaMaxSize {
		return fmt.Errorf("members: %w: %d bytes, limit %d", ErrMetaTooLarge, len(b), memberlist.MetaMaxSize)
	}
	c.metaV = m
	c.delegate.meta.Store(&b)
	if err := c.ml.UpdateNode(c.leaveTimeout); err != nil {
		return fmt.Errorf("members: update meta: %w", err)
	}
	return nil
}

// delegate hands memberlist this member's meta; members exchange nothing else.
type delegate struct{ meta atomic.Pointer[[]byte] }

func (d *delegate) NodeMeta(limit int) []byte                  { return *d.meta.Load() }
func (d *delegate) NotifyMsg([]byte)                           {}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

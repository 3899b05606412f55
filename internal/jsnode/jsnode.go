// Package jsnode is the NATS server with JetStream that every cell
// process embeds (docs/jetstream-design.md §1). A region's cells form one
// NATS cluster; nothing listens for clients, every client connection is
// in the process.
//
// Only cell/ and cmd/trawl import this package: the gate and the ledger
// must not link NATS.
package jsnode

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/trawlhq/trawl/internal/regionauth"
)

// RouteUser is the one user of the cluster's route authorization.
const RouteUser = "trawl-route"

// Config configures a node. Region, Cell and Dir are required; Keys is
// required when RouteListen is set.
type Config struct {
	// Region and Cell name the node: the cluster is "trawl-<region>", the
	// server "<region>-<cell>-<instance>". Both are [a-z0-9]+.
	Region, Cell string
	// Dir holds the instance file and JetStream's files (DATA/nats).
	Dir string
	// Keys are the region's keys: the route password and the route CA
	// are derived from the primary.
	Keys *regionauth.Keys
	// RouteListen is the host:port of the cluster listener; port 0 picks
	// a free one. "" runs a standalone node with no cluster (trawl dev
	// with one cell): it can never grow.
	RouteListen string
	// RouteAdvertise is the host:port the other nodes are told to dial
	// for this one when they learn of it from a peer (NATS's
	// cluster.advertise), if not RouteListen's: a relay or a NAT in
	// front of it. Peers must give them the same address.
	RouteAdvertise string
	// Peers returns the route URLs of the region's other live cells
	// ("nats-route://host:port", no credentials). It is called at start
	// and every PeerInterval; nil means none.
	Peers func() []string
	// PeerInterval is how often Peers is asked again and a route to a
	// peer this node is not routed to added (UpdateRoutes). 0 means 2 s;
	// negative, never.
	PeerInterval time.Duration
	// TLS runs routes over mutually verified TLS 1.3. It is forced on
	// when RouteListen's host is not a loopback address.
	TLS bool
	// RouteTLS, if set, replaces the certificates derived from the
	// region key (an operator's own PKI). It must verify peers itself.
	RouteTLS *tls.Config
	// MaxStore bounds JetStream's file storage in bytes; 0 lets the
	// server choose from the volume's free space.
	MaxStore int64
	// SyncAlways fsyncs every write (--js-sync-always).
	SyncAlways bool
	// Logger receives the server's warnings and errors (its notices at
	// debug level). nil means slog.Default().
	Logger *slog.Logger
}

// Node is a running server and its in-process connection. Its methods are
// safe for concurrent use.
type Node struct {
	cfg      Config
	name     string
	instance string
	routeURL *url.URL // our own route, credentials included; nil when standalone
	base     *server.Options
	srv      *server.Server
	nc       *nats.Conn
	js       jetstream.JetStream
	// sys is a connection in the system account (clustered nodes only):
	// the meta group's peer removal (RemoveFormerSelves) is a system
	// request.
	sys     *nats.Conn
	sysPass string

	alone   bool // clustered, and no peer at start
	wmu     sync.Mutex
	witness *server.Server // see witness.go; nil once ended

	mu     sync.Mutex // serialises UpdateRoutes
	routes []string   // the routes last applied, sorted
	stop   chan struct{}
	wg     sync.WaitGroup
	closed sync.Once
}

var nameRE = regexp.MustCompile(`^[a-z0-9]+$`)

// ErrNotReady is returned by Start when the server does not accept
// connections within its start timeout.
var ErrNotReady = errors.New("jsnode: server not ready")

// Start starts the node: the server, its cluster listener, and the
// in-process connection. It returns once the server accepts connections;
// JetStream itself may still be electing its meta leader (see Ready).
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if !nameRE.MatchString(cfg.Region) || !nameRE.MatchString(cfg.Cell) {
		return nil, fmt.Errorf("jsnode: region %q and cell %q must be [a-z0-9]+", cfg.Region, cfg.Cell)
	}
	if cfg.Dir == "" {
		return nil, errors.New("jsnode: no data directory")
	}
	if cfg.RouteListen != "" && (cfg.Keys == nil || len(cfg.Keys.All()) == 0) {
		return nil, errors.New("jsnode: a clustered node needs the region's keys")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.PeerInterval == 0 {
		cfg.PeerInterval = 2 * time.Second
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("jsnode: %w", err)
	}
	instance, err := loadInstance(cfg.Dir)
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg:      cfg,
		name:     cfg.Region + "-" + cfg.Cell + "-" + instance,
		instance: instance,
		stop:     make(chan struct{}),
	}
	opts := &server.Options{
		ServerName:         n.name,
		DontListen:         true,
		NoSigs:             true,
		JetStream:          true,
		StoreDir:           cfg.Dir,
		JetStreamMaxMemory: 64 << 20,
		JetStreamMaxStore:  cfg.MaxStore,
		SyncAlways:         cfg.SyncAlways,
		// The in-process connection and JetStream's own clients are the
		// only ones; no monitoring port.
		HTTPPort: 0,
	}
	if cfg.RouteListen != "" {
		if err := n.clusterOptions(opts); err != nil {
			return nil, err
		}
		// nats-server starts routing only after its client listener is
		// up (StartRouting waits for the accept loop, which DontListen
		// never starts), so a clustered node listens for clients on a
		// loopback port that only holders of this start's random
		// token can use: the in-process connections.
		opts.DontListen = false
		opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
		// Two users, both with this start's random passwords: the
		// cell's (global account, as a standalone node's) and one in
		// the system account, for the meta group's peer removal.
		sys := server.NewAccount(server.DEFAULT_SYSTEM_ACCOUNT)
		opts.Accounts = []*server.Account{sys}
		opts.SystemAccount = server.DEFAULT_SYSTEM_ACCOUNT
		n.sysPass = randomHex(16)
		opts.Users = []*server.User{
			{Username: "cell", Password: randomHex(16)},
			{Username: "sys", Password: n.sysPass, Account: sys},
		}
	}
	n.base = opts.Clone()

	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("jsnode: %w", err)
	}
	srv.SetLoggerV2(&logger{l: cfg.Logger.With("nats", n.name)}, false, false, false)
	srv.Start()
	wait := 10 * time.Second
	if d, ok := ctx.Deadline(); ok && time.Until(d) < wait {
		wait = time.Until(d)
	}
	if !srv.ReadyForConnections(wait) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, ErrNotReady
	}
	n.srv = srv
	var auth nats.Option = func(*nats.Options) error { return nil }
	if len(opts.Users) > 0 {
		auth = nats.UserInfo(opts.Users[0].Username, opts.Users[0].Password)
	}
	nc, err := nats.Connect("", nats.InProcessServer(srv), nats.Name(n.name), nats.MaxReconnects(-1), auth)
	if err != nil {
		n.shutdown()
		return nil, fmt.Errorf("jsnode: connect in process: %w", err)
	}
	n.nc = nc
	if n.sysPass != "" {
		if n.sys, err = nats.Connect("", nats.InProcessServer(srv), nats.Name(n.name+"-sys"), nats.MaxReconnects(-1),
			nats.UserInfo("sys", n.sysPass)); err != nil {
			n.shutdown()
			return nil, fmt.Errorf("jsnode: connect in process (system): %w", err)
		}
	}
	if n.js, err = jetstream.New(nc); err != nil {
		n.shutdown()
		return nil, fmt.Errorf("jsnode: %w", err)
	}
	if n.alone {
		if err := n.startWitness(opts); err != nil {
			n.shutdown()
			return nil, err
		}
	}
	n.wg.Add(1)
	go n.run()
	return n, nil
}

// clusterOptions fills the cluster block: listener, derived credentials,
// TLS, and the routes (our own included: NATS ignores a route to itself,
// and JetStream needs at least one configured route to run clustered).
func (n *Node) clusterOptions(opts *server.Options) error {
	cfg := n.cfg
	host, portStr, err := net.SplitHostPort(cfg.RouteListen)
	if err != nil {
		return fmt.Errorf("jsnode: route listen %q: %w", cfg.RouteListen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return fmt.Errorf("jsnode: route listen %q: bad port", cfg.RouteListen)
	}
	if port == 0 {
		// The port must be known before start: it is part of our own
		// route, which the server needs configured at start.
		if port, err = freePort(host); err != nil {
			return err
		}
	}
	pass := RoutePassword(cfg.Keys, cfg.Region)
	opts.Cluster = server.ClusterOpts{
		Name:        "trawl-" + cfg.Region,
		Host:        host,
		Port:        port,
		Username:    RouteUser,
		Password:    pass,
		NoAdvertise: true,
		Advertise:   cfg.RouteAdvertise,
	}
	n.routeURL = &url.URL{Scheme: "nats-route", User: url.UserPassword(RouteUser, pass), Host: net.JoinHostPort(host, strconv.Itoa(port))}
	if cfg.RouteTLS != nil {
		opts.Cluster.TLSConfig = cfg.RouteTLS
	} else if cfg.TLS || !isLoopback(host) {
		tc, err := RouteTLS(cfg.Keys, cfg.Region, host)
		if err != nil {
			return err
		}
		opts.Cluster.TLSConfig = tc
	}
	if opts.Cluster.TLSConfig != nil {
		opts.Cluster.TLSTimeout = 2
	}
	peers, routes := n.peerRoutes()
	n.routes = routes
	for _, r := range routes {
		u, err := url.Parse(r)
		if err != nil {
			return fmt.Errorf("jsnode: route %q: %w", r, err)
		}
		opts.Routes = append(opts.Routes, u)
	}
	// Every Raft group waits for a first route (witness.go).
	n.alone = len(peers) == 0
	if hasMetaState(cfg.Dir) {
		return nil
	}
	// A new data directory (bootstrap.go).
	switch {
	case len(peers) == 0:
		// Nobody to join: a cluster of one that elects itself.
		return seedMeta(cfg.Dir, n.name, 1)
	case n.probeLeader(opts):
		// A running cluster: follow its leader, never elect.
		return seedMeta(cfg.Dir, n.name, joinClusterSize)
	default:
		// Peers that are starting too: bootstrap together.
		return nil
	}
}

// peerRoutes asks Peers and returns the peers' routes with our
// credentials, and the whole route list (ours included), sorted.
func (n *Node) peerRoutes() (peers, all []string) {
	var raw []string
	if n.cfg.Peers != nil {
		raw = n.cfg.Peers()
	}
	self := n.routeURL.Host
	for _, p := range raw {
		u, err := url.Parse(p)
		if err != nil || u.Host == "" {
			n.cfg.Logger.Warn("jsnode: ignoring a peer's route", "route", p, "err", err)
			continue
		}
		if u.Host == self {
			continue
		}
		u.Scheme = "nats-route"
		u.User = n.routeURL.User
		peers = append(peers, u.String())
	}
	all = append(slices.Clone(peers), n.routeURL.String())
	slices.Sort(all)
	all = slices.Compact(all)
	return peers, all
}

// UpdateRoutes asks Peers again and, if this node is routed to fewer
// servers than it has live peers and a peer's route is one the server
// does not have, adds the new routes by reloading the server's options.
// It never removes a route: NATS keeps dialling a configured route whose
// peer is gone, and reconnects it by itself when the peer returns to the
// same address.
//
// Reloading only then (§1: "a live peer it has no route to") keeps
// reloads rare, which also matters because nats-server v2.15.3 reads its
// options without a lock while answering a direct get
// (stream.getDirectRequest), a data race with ReloadOptions that the
// race detector reported in TestLeaseFailover when every peer change
// reloaded.
//
// The node calls it every PeerInterval; a caller that learns of a change
// first (a membership event) may call it at once.
func (n *Node) UpdateRoutes() error {
	if n.routeURL == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	peers, _ := n.peerRoutes()
	routed := 0
	for _, name := range n.RoutedTo() {
		if !strings.HasSuffix(name, "-witness") && !strings.HasSuffix(name, "-probe") {
			routed++
		}
	}
	if routed >= len(peers) {
		return nil
	}
	routes := slices.Clone(n.routes)
	for _, p := range peers {
		if !slices.Contains(routes, p) {
			routes = append(routes, p)
		}
	}
	if len(routes) == len(n.routes) {
		return nil
	}
	slices.Sort(routes)
	opts := n.base.Clone()
	opts.Routes = opts.Routes[:0]
	for _, r := range routes {
		u, err := url.Parse(r)
		if err != nil {
			return fmt.Errorf("jsnode: route %q: %w", r, err)
		}
		opts.Routes = append(opts.Routes, u)
	}
	if err := n.srv.ReloadOptions(opts); err != nil {
		return fmt.Errorf("jsnode: reload routes: %w", err)
	}
	n.routes = routes
	return nil
}

// run reloads the routes when the peers change, and ends the witness
// once it has done its work.
func (n *Node) run() {
	defer n.wg.Done()
	var tick <-chan time.Time
	if n.routeURL != nil && n.cfg.PeerInterval > 0 && n.cfg.Peers != nil {
		t := time.NewTicker(n.cfg.PeerInterval)
		defer t.Stop()
		tick = t.C
	}
	if n.witness != nil {
		n.wg.Add(1)
		go n.endWitness()
	}
	for {
		select {
		case <-n.stop:
			return
		case <-tick:
			if err := n.UpdateRoutes(); err != nil {
				n.cfg.Logger.Warn("jsnode: routes", "err", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if _, err := n.RemoveReplaced(ctx); err != nil {
				n.cfg.Logger.Warn("jsnode: replaced peers", "err", err)
			}
			cancel()
		}
	}
}

// Ready waits until JetStream answers on this node (in a cluster: a meta
// leader is elected and knows this node's account).
func (n *Node) Ready(ctx context.Context) error {
	for {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := n.js.AccountInfo(actx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("jsnode: JetStream not ready: %w (last: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// JetStream is the node's JetStream context over its in-process connection.
func (n *Node) JetStream() jetstream.JetStream { return n.js }

// Conn is the in-process connection. Callers must not close it.
func (n *Node) Conn() *nats.Conn { return n.nc }

// Server is the embedded server, for health figures (routes, JetStream
// cluster state). Callers must not shut it down.
func (n *Node) Server() *server.Server { return n.srv }

// RoutedTo is the names of the servers this node has a route to.
func (n *Node) RoutedTo() []string {
	rz, err := n.srv.Routez(&server.RoutezOptions{})
	if err != nil {
		return nil
	}
	var names []string
	for _, r := range rz.Routes {
		names = append(names, r.RemoteName)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Name is the server name, "<region>-<cell>-<instance>": JetStream's name
// for this peer.
func (n *Node) Name() string { return n.name }

// Instance is this data directory's peer instance (8 hex digits).
func (n *Node) Instance() string { return n.instance }

// RouteURL is what the other cells route to ("nats-route://host:port",
// without credentials), "" for a standalone node.
func (n *Node) RouteURL() string {
	if n.routeURL == nil {
		return ""
	}
	return "nats-route://" + n.routeURL.Host
}

// Close drains the connection and shuts the server down. It is safe to
// call more than once.
func (n *Node) Close() error {
	n.closed.Do(func() {
		close(n.stop)
		n.wg.Wait()
		n.shutdown()
	})
	return nil
}

func (n *Node) shutdown() {
	n.stopWitness()
	if n.sys != nil {
		n.sys.Close()
	}
	if n.nc != nil {
		closed := make(chan struct{})
		n.nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
		if err := n.nc.Drain(); err != nil {
			n.nc.Close()
		} else {
			select {
			case <-closed:
			case <-time.After(5 * time.Second):
				n.nc.Close()
			}
		}
	}
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
}

// loadInstance reads Dir/instance, writing a new one on first start.
func loadInstance(dir string) (string, error) {
	p := filepath.Join(dir, "instance")
	b, err := os.ReadFile(p)
	if err == nil {
		s := string(b)
		if len(s) == 8 {
			if _, err := hex.DecodeString(s); err == nil {
				return s, nil
			}
		}
		return "", fmt.Errorf("jsnode: %s holds %q: want 8 hex digits", p, s)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("jsnode: %w", err)
	}
	s := randomHex(4)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
		return "", fmt.Errorf("jsnode: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return "", fmt.Errorf("jsnode: %w", err)
	}
	return s, nil
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("jsnode: pick a route port on %q: %w", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// isLoopback reports whether host names only this machine.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

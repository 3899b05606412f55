package gate

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/gate/estimate"
	"github.com/trawlhq/trawl/gate/payments"
	"github.com/trawlhq/trawl/gate/signup"
	"github.com/trawlhq/trawl/gate/usage"
	"github.com/trawlhq/trawl/internal/members"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/ledger"
)

// Config is what a region's gate runs with. The Caddy app module "trawl"
// fills it from the Caddyfile's global trawl block.
type Config struct {
	// Region is the gate's region: eu, sin, us (any [a-z0-9]{1,16}).
	Region string
	// DataDir holds the gate's voter (ledger/) and its regional store
	// (holds/: the holds journal, usage lines, estimate observations).
	DataDir string
	// Addr is the host:port this gate serves on; peers reach the ledger's
	// internal routes there.
	Addr string
	// PublicURL is this region's public base URL (default http://Addr).
	PublicURL string
	// LedgerRaft is this voter's Raft address.
	LedgerRaft string
	// Peers are every region's gate: its Raft address and its gate
	// address. This gate's own entry may be left out.
	Peers []Peer
	// Bootstrap forms the Raft group from Peers when DataDir is new.
	Bootstrap bool
	// LedgerSecret is shared by the voters (forwarded commands).
	LedgerSecret string
	// Members is this gate's place in the region's memberlist cluster;
	// Meta and Keys are filled in.
	Members members.Config
	// RegionKeys are the region's keys (TRAWL_REGION_KEYS): they encrypt
	// the membership and sign every request the gate sends a cell.
	// Required.
	RegionKeys *regionauth.Keys
	// AllowPrivateNetworks lets the region's cells fetch loopback and
	// private addresses (development and tests); a cell refuses to serve
	// with that setting unless its gate allows it.
	AllowPrivateNetworks bool
	// Prices is the price table (default billing.DefaultPrices).
	Prices *billing.Prices
	// Payments takes money for top-ups; the zero value takes none (top-ups
	// answer 503 payments_off).
	Payments Payments
	// OperatorKey, when set (TRAWL_OPERATOR_KEY), is added to the ledger
	// as an operator key of the operator account (gate/operator.go).
	OperatorKey string
	// Mailer sends sign-up verification mail; nil logs each mail instead
	// (development: the link is in the log).
	Mailer signup.Mailer
	Now    func() time.Time
	// Logger defaults to slog.Default.
	Logger *slog.Logger
}

// Payments chooses the payment provider of top-ups (docs/payments.md).
type Payments struct {
	// Provider is "stripe", "local" (an operator confirms each checkout on
	// a page; no saved cards) or "" (none).
	Provider string
	// StripeKey is Stripe's secret key; StripeURL its API base (stripe-mock
	// in tests; default Stripe's).
	StripeKey, StripeURL string
	// ConfirmToken, for local, must be typed on the checkout page to
	// confirm a payment (empty: anyone with the session URL can).
	ConfirmToken string
}

// provider opens the configured provider; local checkout sessions are kept
// in the gate's store.
func (p Payments) provider(st *store.Store, publicURL string, now func() time.Time, log *slog.Logger) (payments.Provider, error) {
	switch p.Provider {
	case "":
		return nil, nil
	case "local":
		return payments.NewLocal(payments.LocalConfig{
			BaseURL: publicURL, ConfirmToken: p.ConfirmToken,
			Store: payments.NewStoreSessions(st), Now: now, Logger: log,
		})
	case "stripe":
		return payments.NewStripe(payments.StripeConfig{SecretKey: p.StripeKey, BackendURL: p.StripeURL})
	}
	return nil, fmt.Errorf("gate: payments provider %q is not stripe or local", p.Provider)
}

// Peer is another region's gate.
type Peer struct {
	Region string `json:"region"`
	// Raft is its voter's Raft address.
	Raft string `json:"raft"`
	// Gate is its gate's host:port.
	Gate string `json:"gate"`
}

var nameRe = regexp.MustCompile(`^[a-z0-9]{1,16}$`)

// Runtime is what the gate's modules share in one process: the ledger
// voter and its replica, the regional holds client, the region's store and
// the cell membership. It outlives config reloads (the app module keeps it
// in a caddy.UsagePool).
type Runtime struct {
	cfg Config
	// inflight reads an account's requests in flight (SetInFlight).
	inflightMu sync.RWMutex
	inflight   func(account, plan string) (n, max int)
	node       *ledger.Node
	holds      *ledger.HoldsClient
	st         *store.Store
	members    *members.Cluster
	billing    billing.Config
	replica    *replicaCache
	usage      *usage.Log
	obs        *estimate.Observer
	prices     *billing.Table // the table in force (gate/operator.go: operators change it)
	// priceVer is the ledger version of the table in force (0: the file's
	// or the built-in one); priceMu orders its updates.
	priceVer atomic.Uint64
	priceMu  sync.Mutex
	signup   routes.Handlers
	gates    map[string]string // region → gate host:port
	// forward signs and checks requests one region's gate sends another's
	// (an object the other region owns): keys every gate derives from the
	// voters' shared secret.
	forward   *regionauth.Keys
	forwarded *regionauth.Verifier
	gauges    metric.Registration // the runtime's observable gauges
	ready     atomic.Bool         // the replica has caught up once since start
	monitors  *monitorStore       // the region's monitor store (gate/monitorstore.go)
	readyAt   atomic.Uint64       // the commit index to reach: the first one seen with a leader
	stop      context.CancelFunc
	bg        sync.WaitGroup // maintenance and pruning
}

// Open starts the gate's runtime: the voter, the holds client and the
// membership. Close undoes it.
func Open(cfg Config) (rt *Runtime, err error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	log := cfg.Logger.With("region", cfg.Region)
	rt = &Runtime{cfg: cfg, gates: map[string]string{}, prices: billing.NewTable(cfg.Prices)}
	fmac := hmac.New(sha256.New, []byte(cfg.LedgerSecret))
	fmac.Write([]byte("trawl gate forward key v1"))
	if rt.forward, err = regionauth.KeysFrom(fmac.Sum(nil)); err != nil {
		return nil, err
	}
	rt.forwarded = regionauth.NewVerifier(rt.forward, cfg.Now)
	defer func() {
		if err != nil {
			rt.closeParts()
		}
	}()

	peers, err := rt.ledgerPeers()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	if err := rt.openLedger(peers, log); err != nil {
		return nil, err
	}
	if err := rt.joinMembers(log); err != nil {
		return nil, err
	}
	if err := rt.openServices(log); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	rt.stop = cancel
	if err := rt.startMonitorStore(ctx); err != nil {
		return nil, err
	}
	if err := rt.startBackground(ctx); err != nil {
		return nil, err
	}
	log.Info("gate runtime started", "addr", cfg.Addr, "ledger_raft", cfg.LedgerRaft,
		"members", rt.members.LocalAddr(), "data", cfg.DataDir)
	return rt, nil
}

// check refuses a Config the gate cannot run with.
func (cfg *Config) check() error {
	if !nameRe.MatchString(cfg.Region) {
		return fmt.Errorf("gate: region %q is not [a-z0-9]{1,16}", cfg.Region)
	}
	if cfg.DataDir == "" || cfg.Addr == "" || cfg.LedgerRaft == "" {
		return errors.New("gate: data, addr and ledger_raft are required")
	}
	if cfg.LedgerSecret == "" {
		return errors.New("gate: the ledger secret is empty (set TRAWL_LEDGER_SECRET)")
	}
	if cfg.RegionKeys == nil {
		return errors.New("gate: no region keys (set " + regionauth.EnvKeys + ")")
	}
	return nil
}

// setDefaults fills in the defaults of the fields left zero.
func (cfg *Config) setDefaults() {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Prices == nil {
		cfg.Prices = billing.DefaultPrices()
	}
	if cfg.PublicURL == "" {
		cfg.PublicURL = "http://" + cfg.Addr
	}
}

// ledgerPeers are the voters of the ledger, this gate's first, with each
// region's gate address noted in rt.gates.
func (rt *Runtime) ledgerPeers() ([]ledger.Peer, error) {
	cfg := &rt.cfg
	peers := []ledger.Peer{{ID: cfg.Region, RaftAddr: cfg.LedgerRaft, APIAddr: cfg.Addr}}
	rt.gates[cfg.Region] = cfg.Addr
	for _, p := range cfg.Peers {
		if p.Region == cfg.Region {
			continue
		}
		if !nameRe.MatchString(p.Region) || p.Raft == "" || p.Gate == "" {
			return nil, fmt.Errorf("gate: peer %+v needs region, raft and gate", p)
		}
		peers = append(peers, ledger.Peer{ID: p.Region, RaftAddr: p.Raft, APIAddr: p.Gate})
		rt.gates[p.Region] = p.Gate
	}
	return peers, nil
}

// openLedger opens the region's store, the holds client and the ledger
// voter, and starts the holds client.
func (rt *Runtime) openLedger(peers []ledger.Peer, log *slog.Logger) (err error) {
	cfg := &rt.cfg
	// The holds client exists before the voter, so it hears of every hold
	// the replica takes back (a lowered spend cap) from the first command
	// applied; it submits through the voter once that is open.
	if rt.st, err = store.Open(filepath.Join(cfg.DataDir, "holds"), &store.Options{CacheBytes: 16 << 20, Logger: log}); err != nil {
		return err
	}
	voter := &lateSubmitter{}
	hcfg := ledger.HoldsConfig{Region: cfg.Region, Store: rt.st, Ledger: voter, Now: cfg.Now, Logger: log}
	if rt.holds, err = ledger.NewHoldsClient(hcfg); err != nil {
		return fmt.Errorf("gate: holds client: %w", err)
	}
	ncfg := ledger.NodeConfig{
		ID: cfg.Region, DataDir: filepath.Join(cfg.DataDir, "ledger"), RaftAddr: cfg.LedgerRaft,
		Peers: peers, Bootstrap: cfg.Bootstrap, Secret: cfg.LedgerSecret, Logger: log,
		OnHoldsReduced: rt.holds.HoldsReduced,
	}
	if rt.node, err = ledger.OpenNode(ncfg); err != nil {
		return fmt.Errorf("gate: open ledger voter: %w", err)
	}
	voter.n.Store(rt.node)
	rt.holds.Start()
	return nil
}

// joinMembers joins the region's membership as its gate.
func (rt *Runtime) joinMembers(log *slog.Logger) (err error) {
	cfg := &rt.cfg
	mcfg := cfg.Members
	mcfg.Meta = members.Meta{Role: "gate", Region: cfg.Region, Name: "gate", API: cfg.Addr}
	mcfg.Keys = cfg.RegionKeys.All()
	if mcfg.Name == "" {
		mcfg.Name = cfg.Region + "-gate"
	}
	if mcfg.Logger == nil {
		mcfg.Logger = log
	}
	if rt.members, err = members.Start(mcfg); err != nil {
		return fmt.Errorf("gate: membership: %w", err)
	}
	return rt.publishDrained()
}

// openServices sets up what the gate's services read and write: billing
// (with the payment provider), the replica cache, the usage history, the
// estimate observations and sign-up.
func (rt *Runtime) openServices(log *slog.Logger) (err error) {
	cfg := &rt.cfg
	provider, err := cfg.Payments.provider(rt.st, cfg.PublicURL, cfg.Now, log)
	if err != nil {
		return err
	}
	rt.billing = billing.Config{
		State: rt.node.State(), Ledger: rt.node, Holds: rt.holds, Prices: cfg.Prices, Table: rt.prices, Provider: provider,
		Region: cfg.Region, PublicURL: cfg.PublicURL, Now: cfg.Now, Logger: log,
		// The billing and keys routes take the caller trawl_auth found.
		Identity: func(ctx context.Context) (*ledger.Key, *ledger.Account) {
			if id := IdentityFrom(ctx); id != nil && id.Key != nil {
				return id.Key, id.Account
			}
			return nil, nil
		},
	}
	rt.replica = newReplicaCache(rt.node.State())
	if rt.usage, err = usage.Open(rt.st); err != nil {
		return fmt.Errorf("gate: usage history: %w", err)
	}
	if rt.obs, err = estimate.Open(rt.st, 30*time.Second); err != nil {
		return fmt.Errorf("gate: estimate observations: %w", err)
	}
	mailer := cfg.Mailer
	if mailer == nil {
		mailer = signup.LogMailer{Logger: log}
	}
	// Every gate derives the same link key from the voters' shared secret,
	// so a verification link works at any region's gate.
	mac := hmac.New(sha256.New, []byte(cfg.LedgerSecret))
	mac.Write([]byte("trawl signup link key"))
	rt.signup = signup.Handlers(signup.Config{Billing: rt.billing, Mailer: mailer, BaseURL: cfg.PublicURL, TokenSecret: mac.Sum(nil)})
	return nil
}

// startBackground starts the runtime's work until ctx ends (billing
// maintenance, recording the cells, pruning usage, the monitors' charges,
// following the price table, the operator key) and registers its gauges.
func (rt *Runtime) startBackground(ctx context.Context) (err error) {
	cfg := &rt.cfg
	rt.bg.Add(4)
	go func() {
		defer rt.bg.Done()
		billing.RunMaintenance(ctx, rt.billing, rt.node.IsLeader, time.Minute)
	}()
	go func() {
		defer rt.bg.Done()
		rt.recordCells(ctx)
	}()
	go func() {
		defer rt.bg.Done()
		rt.pruneUsage(ctx, 6*time.Hour)
	}()
	if rt.gauges, err = rt.observe(); err != nil {
		return fmt.Errorf("gate: metrics: %w", err)
	}
	go func() {
		defer rt.bg.Done()
		rt.collectMonitorCharges(ctx) // gate/monitorcharges.go
	}()
	rt.syncPrices() // gate/operator.go: the replicated table wins over the file
	rt.bg.Add(1)
	go func() {
		defer rt.bg.Done()
		rt.followPrices(ctx, 500*time.Millisecond)
	}()
	if cfg.OperatorKey != "" {
		rt.bg.Add(1)
		go func() {
			defer rt.bg.Done()
			rt.ensureOperatorKey(ctx, cfg.OperatorKey)
		}()
	}
	return nil
}

// pruneUsage drops usage lines older than usage.Retention, now and every
// interval, until ctx ends.
func (rt *Runtime) pruneUsage(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if n, err := rt.usage.Prune(rt.cfg.Now().Add(-usage.Retention)); err != nil {
			rt.cfg.Logger.Warn("usage history: prune failed", "err", err)
		} else if n > 0 {
			rt.cfg.Logger.Info("usage history: pruned old lines", "lines", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Destruct lets a caddy.UsagePool close the runtime.
func (rt *Runtime) Destruct() error { return rt.Close() }

// Close stops the runtime: maintenance, membership, holds (unsettled
// charges stay journaled), the store and the voter.
func (rt *Runtime) Close() error {
	if rt.stop != nil {
		rt.stop()
		rt.bg.Wait()
		rt.stop = nil
	}
	return rt.closeParts()
}

func (rt *Runtime) closeParts() error {
	var errs []error
	if rt.gauges != nil {
		errs = append(errs, rt.gauges.Unregister())
		rt.gauges = nil
	}
	if rt.members != nil {
		errs = append(errs, rt.members.Close())
		rt.members = nil
	}
	if rt.obs != nil {
		errs = append(errs, rt.obs.Close())
		rt.obs = nil
	}
	if rt.holds != nil {
		rt.holds.Close()
	}
	// The voter goes before the holds store: its applies may still tell
	// the holds client of a reduced hold, which writes there.
	if rt.node != nil {
		errs = append(errs, rt.node.Close())
		rt.node = nil
	}
	rt.holds = nil
	if rt.st != nil {
		errs = append(errs, rt.st.Close())
		rt.st = nil
	}
	return errors.Join(errs...)
}

// Region is the gate's region.
func (rt *Runtime) Region() string { return rt.cfg.Region }

// Node is the ledger voter.
func (rt *Runtime) Node() *ledger.Node { return rt.node }

// State is the local ledger replica: every read.
func (rt *Runtime) State() *ledger.State { return rt.node.State() }

// Holds is the region's holds client.
func (rt *Runtime) Holds() *ledger.HoldsClient { return rt.holds }

// Store is the region's own store (holds journal, usage, observations).
func (rt *Runtime) Store() *store.Store { return rt.st }

// Prices is the price table.
func (rt *Runtime) Prices() *billing.Prices { return rt.prices.Load() }

// Billing is the billing configuration the gate's routes share.
func (rt *Runtime) Billing() billing.Config { return rt.billing }

// Now is the runtime's clock.
func (rt *Runtime) Now() time.Time { return rt.cfg.Now() }

// Logger is the runtime's logger.
func (rt *Runtime) Logger() *slog.Logger { return rt.cfg.Logger }

// Usage is the region's usage history.
func (rt *Runtime) Usage() *usage.Log { return rt.usage }

// Observer is what the region's cells were seen doing, for estimates.
func (rt *Runtime) Observer() *estimate.Observer { return rt.obs }

// Cells are the live cells of the region, as membership sees them now.
func (rt *Runtime) Cells() []members.Meta { return rt.members.Live("cell", rt.cfg.Region) }

// Ready reports whether the gate's replica has caught up with the ledger
// since the gate started. Before, a key it does not find may only not have
// arrived yet: the gate answers 503, not 401.
func (rt *Runtime) Ready() bool {
	if rt.ready.Load() {
		return true
	}
	// Caught up means: applied what was committed when this gate first
	// heard from a leader. Not "applied everything committed now", which
	// a busy ledger may never show at the instant it is asked.
	leader, applied, committed := rt.node.Progress()
	target := rt.readyAt.Load()
	if target == 0 {
		if !leader || committed == 0 {
			return false
		}
		rt.readyAt.CompareAndSwap(0, committed)
		target = rt.readyAt.Load()
	}
	if applied >= target {
		rt.ready.Store(true)
		return true
	}
	return false
}

// KnewCell reports whether a cell of this name has ever been a member of
// the region as this gate saw it: an id naming a cell the region never had
// is answered 404, one naming a cell that is down 503.
func (rt *Runtime) KnewCell(name string) bool {
	_, err := rt.st.Get([]byte(store.PrefixCells + name))
	return err == nil
}

// recordCells keeps the name of every cell that joins the region, until
// ctx ends.
func (rt *Runtime) recordCells(ctx context.Context) {
	for {
		changed := rt.members.Watch()
		for _, c := range rt.Cells() {
			k := []byte(store.PrefixCells + c.Name)
			if _, err := rt.st.Get(k); err != nil {
				if err := rt.st.Set(k, []byte(c.API), store.Sync); err != nil {
					rt.cfg.Logger.Warn("gate: record a cell's name", "cell", c.Name, "err", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// Gate returns the host:port of region's gate.
func (rt *Runtime) Gate(region string) (string, bool) {
	g, ok := rt.gates[region]
	return g, ok
}

// InternalHandler serves the ledger's internal routes (forwarded
// commands, status, members) under /internal/.
func (rt *Runtime) InternalHandler() http.Handler { return rt.node.Handler() }

// SignForward signs r for another region's gate on behalf of account and
// takes the customer's key off it: the other gate trusts this one's
// authentication and rate limiting, and never sees the key.
func (rt *Runtime) SignForward(r *http.Request, account string) {
	r.Header.Del("Authorization")
	r.Header.Del("X-Api-Key")
	r.Header.Set(HeaderForwardedBy, rt.cfg.Region)
	rt.forward.Sign(r, regionauth.Claims{Account: account}, rt.cfg.Now())
}

// HeaderForwardedBy names the region whose gate forwarded a request.
const HeaderForwardedBy = "Trawl-Forwarded-By"

// Forwarded reports whether r claims to come from another region's gate,
// and if so checks the claim and returns the account it was sent for. A
// claim that does not verify is an error.
func (rt *Runtime) Forwarded(r *http.Request) (*ledger.Account, string, bool, error) {
	if r.Header.Get(regionauth.HeaderAuth) == "" && r.Header.Get(HeaderForwardedBy) == "" {
		return nil, "", false, nil
	}
	from := r.Header.Get(HeaderForwardedBy)
	c, err := rt.forwarded.Verify(r)
	if err != nil || c.Account == "" || !nameRe.MatchString(from) || from == rt.cfg.Region {
		return nil, "", true, fmt.Errorf("gate: a request forwarded by %q does not verify (%v)", from, err)
	}
	a, err := rt.node.State().Account(c.Account)
	if err != nil {
		return nil, "", true, err
	}
	return a, from, true, nil
}

// RegionKeys are the region's keys.
func (rt *Runtime) RegionKeys() *regionauth.Keys { return rt.cfg.RegionKeys }

// AllowPrivateNetworks says whether the region's cells may fetch private
// and loopback addresses.
func (rt *Runtime) AllowPrivateNetworks() bool { return rt.cfg.AllowPrivateNetworks }

// MembersAddr is the address of the gate's memberlist node: the seed the
// region's cells join.
func (rt *Runtime) MembersAddr() string { return rt.members.LocalAddr() }

// lateSubmitter submits through a voter opened after the holds client.
type lateSubmitter struct{ n atomic.Pointer[ledger.Node] }

func (l *lateSubmitter) Submit(ctx context.Context, cmd *ledger.Command) (*ledger.Result, error) {
	n := l.n.Load()
	if n == nil {
		return nil, errors.New("gate: the ledger voter is not open yet")
	}
	return n.Submit(ctx, cmd)
}

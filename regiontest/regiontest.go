// Package regiontest runs a region's gate in the test process: the real Caddy
// config with trawl's modules, a one-voter ledger and real cells joined
// over memberlist, all on loopback. Caddy runs one config per process, so
// tests using it must not run in parallel with each other.
package regiontest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	_ "github.com/trawlhq/trawl/caddy-modules/all"
	"github.com/trawlhq/trawl/caddy-modules/app"
	"github.com/trawlhq/trawl/cell"
	"github.com/trawlhq/trawl/gate"
	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/hooksecret"
	"github.com/trawlhq/trawl/internal/members"
	"github.com/trawlhq/trawl/internal/monstore"
	"github.com/trawlhq/trawl/internal/recipestore"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/testwait"
	"github.com/trawlhq/trawl/ledger"
)

// Options shape the gate.
type Options struct {
	Region string // default eu
	Cells  int    // default 1
	// PricesFile is a price table file (default the built-in table).
	PricesFile string
	// Cell adjusts each cell's config.
	Cell func(*cell.Config)
	// TrustedProxies are the gate's trusted front proxies (CIDRs).
	TrustedProxies []string
	// Payments is the gate's top-up provider (default none).
	Payments gate.Payments
	// Peers are other regions' gates (default none: a one-voter ledger).
	// With peers that are not running the ledger has no quorum.
	Peers []gate.Peer
	// NoLeader skips the wait for a ledger leader.
	NoLeader bool
	// SMTP and SMTPFrom are the gate's mail server (sign-up mail and
	// monitors' notify.email); default none (mail is logged).
	SMTP, SMTPFrom string
}

// Gate is a running gate with its cells.
type Gate struct {
	URL     string // http://127.0.0.1:port
	Runtime *gate.Runtime
	Cells   []*Cell
	// Config is the Caddy JSON the gate runs; DataDir its data directory.
	Config  []byte
	DataDir string
	t       testing.TB
	n       int
}

// Cell is one running cell.
type Cell struct {
	Cell    *cell.Cell
	Addr    string
	srv     *http.Server
	members *members.Cluster
}

// Keys are the test region's keys (TRAWL_REGION_KEYS of its gate).
const Keys = "6761746574657374206b657973206f662074686520746573742072656769f00d"

// FreeAddr returns a loopback address with a port free right now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Start runs a gate and its cells until the test ends.
func Start(t testing.TB, o Options) *Gate {
	t.Helper()
	if o.Region == "" {
		o.Region = "eu"
	}
	if o.Cells == 0 {
		o.Cells = 1
	}
	t.Setenv("TRAWL_LEDGER_SECRET", "regiontest-secret")
	t.Setenv(regionauth.EnvKeys, Keys)
	// The ports are free when picked and taken when Caddy starts: another
	// test process may take one in between (seen in CI as "address
	// already in use"); then the gate starts again on others.
	var site gate.Site
	var listen string
	var cfgJSON []byte
	for attempt := 1; ; attempt++ {
		dir := t.TempDir()
		listen = FreeAddr(t)
		site = gate.Site{
			Listen: listen,
			Gate: gate.Config{
				Region: o.Region, DataDir: filepath.Join(dir, "gate"), LedgerRaft: FreeAddr(t),
				Bootstrap: true, Members: members.Config{Bind: "127.0.0.1:0"}, AllowPrivateNetworks: true,
				Payments: o.Payments, Peers: o.Peers,
			},
			PricesFile: o.PricesFile, TrustedProxies: o.TrustedProxies, SMTP: o.SMTP, SMTPFrom: o.SMTPFrom,
		}
		text, err := site.Caddyfile()
		if err != nil {
			t.Fatal(err)
		}
		if cfgJSON, _, err = caddyconfig.GetAdapter("caddyfile").Adapt([]byte(text), nil); err != nil {
			t.Fatalf("adapt:\n%s\n%v", text, err)
		}
		err = caddy.Load(cfgJSON, true)
		if err == nil {
			break
		}
		if attempt == 5 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
		t.Logf("gate start, attempt %d: %v; again on other ports", attempt, err)
	}
	g := &Gate{URL: "http://" + listen, t: t, Config: cfgJSON, DataDir: site.Gate.DataDir}
	t.Cleanup(func() {
		if err := caddy.Stop(); err != nil {
			t.Errorf("stop caddy: %v", err)
		}
	})
	rt, ok := app.Running(site.Gate.DataDir)
	if !ok {
		t.Fatal("no runtime")
	}
	g.Runtime = rt
	if o.NoLeader {
		return g
	}
	testwait.Until(t, 15*time.Second, "ledger leader", func() bool { return rt.Node().IsLeader() })
	for i := range o.Cells {
		g.AddCell(t, fmt.Sprintf("c%d", i+1), o.Cell)
	}
	return g
}

// AddCell starts one more cell in the gate's region and waits until the gate
// routes to it.
func (g *Gate) AddCell(t testing.TB, name string, adjust func(*cell.Config)) *Cell {
	t.Helper()
	cfg := cell.Config{DataDir: t.TempDir(), Region: g.Runtime.Region(), Name: name, AllowPrivateNetworks: true,
		RegionKeys: g.Runtime.RegionKeys()}
	// The region's monitors live in the gate's store.
	gateAddr := strings.TrimPrefix(g.URL, "http://")
	// And the operator recipes the ledger keeps.
	gate := regionauth.Gate{Keys: cfg.RegionKeys, Addr: func() string { return gateAddr }}
	cfg.Monitor.Shared = &monstore.Client{Gate: gate}
	cfg.Recipes.Remote = &recipestore.Client{Gate: gate}
	// And the accounts' webhook secrets.
	cfg.WebhookSecrets = &hooksecret.Client{Gate: gate}
	if adjust != nil {
		adjust(&cfg)
	}
	c, err := cell.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	want := len(g.Runtime.Cells()) + 1 // before the cell can join
	tc := &Cell{Cell: c, Addr: l.Addr().String(), srv: &http.Server{Handler: c.Handler()}}
	go tc.srv.Serve(l)
	tc.members, err = members.Start(members.Config{
		Bind: "127.0.0.1:0", Join: []string{g.Runtime.MembersAddr()},
		Meta: members.Meta{Role: "cell", Region: cfg.Region, Name: name, API: tc.Addr},
		Keys: cfg.RegionKeys.All(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Stop() })
	g.Cells = append(g.Cells, tc)
	testwait.Until(t, 10*time.Second, "cell "+name+" in the upstream set", func() bool { return len(g.Runtime.Cells()) >= want })
	return tc
}

// Stop stops the cell: it leaves the region, then closes. Safe to repeat.
func (c *Cell) Stop() {
	if c.members != nil {
		c.members.Close()
		c.members = nil
	}
	if c.srv != nil {
		c.srv.Close()
		c.srv = nil
		c.Cell.Close()
	}
}

// Account creates an account of plan holding credits (sign-up bucket) and
// returns an API key for it.
func (g *Gate) Account(t testing.TB, plan string, credits int64) string {
	t.Helper()
	g.n++
	acct := fmt.Sprintf("acct%d", g.n)
	key := fmt.Sprintf("trawl_test_%s_%d_%d", acct, time.Now().UnixNano(), g.n)
	hash := billing.HashKey(key)
	now := time.Now().UTC()
	cmds := []*ledger.Command{
		{ID: acct + "/create", Type: ledger.CmdCreateAccount, Time: now, CreateAccount: &ledger.CreateAccount{Account: acct, Plan: plan}},
		{ID: acct + "/key", Type: ledger.CmdAddKey, Time: now, AddKey: &ledger.Key{ID: "key_" + acct, Account: acct, Hash: hash, Prefix: key[:14], Role: ledger.RoleUser, Kind: "permanent"}},
	}
	if credits > 0 {
		cmds = append(cmds, &ledger.Command{ID: acct + "/grant", Type: ledger.CmdGrant, Time: now,
			Grant: &ledger.Grant{Account: acct, Bucket: ledger.BucketSignup, Amount: ledger.Credits(credits)}})
	}
	for _, c := range cmds {
		if err := Submit(g.Runtime.Node(), c); err != nil {
			t.Fatal(err)
		}
	}
	return key
}

// Submit applies a command and fails on a refusal.
func Submit(n *ledger.Node, c *ledger.Command) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := n.Submit(ctx, c)
	if err != nil {
		return err
	}
	if res.Error != "" && res.Error != ledger.ErrCodeExists {
		return errors.New(res.Error + ": " + res.Message)
	}
	return nil
}

// Restart stops the gate (its runtime closes: voter, stores, membership)
// and starts it again on the same data directory, as a process restart
// would; WaitReady waits for it to serve. Its cells are not brought back.
func (g *Gate) Restart(t testing.TB) {
	t.Helper()
	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := caddy.Load(g.Config, true); err != nil {
		t.Fatal(err)
	}
	rt, ok := app.Running(g.DataDir)
	if !ok {
		t.Fatal("no runtime after the restart")
	}
	g.Runtime = rt
}

// WaitReady waits until the gate's voter leads and its replica has caught
// up (before, keyed calls answer 503 starting).
func (g *Gate) WaitReady(t testing.TB) {
	t.Helper()
	testwait.Until(t, 15*time.Second, "gate ready", func() bool { return g.Runtime.Node().IsLeader() && g.Runtime.Ready() })
}

// Reload loads the gate's config again, as `caddy reload` would: new module
// instances are provisioned before the old ones are cleaned up.
func (g *Gate) Reload(t testing.TB) {
	t.Helper()
	if err := caddy.Load(g.Config, true); err != nil {
		t.Fatal(err)
	}
	// The old server closed its connections: a kept-alive one of the
	// default client would be reset on its next request (seen under load
	// as "connection reset by peer" in TestOwedReleaseIsResumedWhenTheMeterStarts).
	http.DefaultClient.CloseIdleConnections()
	// And a connection the old server accepted as it stopped is closed
	// unanswered (seen under load as EOF in TestReloadKeepsRuntimeAndLimits):
	// ready is three answers in a row (any status: no key is sent, so no
	// account's limit is spent), each on a new connection.
	ok := 0
	testwait.Until(t, 15*time.Second, "the reloaded gate answering", func() bool {
		defer http.DefaultClient.CloseIdleConnections()
		resp, err := http.Get(g.URL + "/v1/billing/balance")
		if err != nil {
			ok = 0
			return false
		}
		resp.Body.Close()
		ok++
		return ok >= 3
	})
}

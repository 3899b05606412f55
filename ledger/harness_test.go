package ledger_test

// Helpers of the external tests: the cluster, client and state tests use
// ledgertest, which imports the ledger, so they cannot be part of it.

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trawlhq/trawl/internal/store"
	. "github.com/trawlhq/trawl/ledger"
	"github.com/trawlhq/trawl/ledger/ledgertest"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

var regions = ledgertest.Regions

func quiet() *slog.Logger { return ledgertest.Quiet() }

func mustAudit(t *testing.T, s *State) *AuditReport {
	t.Helper()
	return ledgertest.Audit(t, s)
}

func newState(t testing.TB) *State {
	t.Helper()
	st, err := store.Open("state", &store.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s, err := OpenState(st)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// closeOnceStore lets a test close the store early (a "kill") without the
// cleanup closing it again. Tests must not close it otherwise: the cleanup
// closes the client first, then its store, so no background refill writes
// to a closed store.
type closeOnceStore struct {
	*store.Store
	once *sync.Once
}

func (s *closeOnceStore) Close() { s.once.Do(func() { s.Store.Close() }) }

func newClient(t *testing.T, dir string, l Submitter, mod func(*HoldsConfig)) (*HoldsClient, *closeOnceStore) {
	t.Helper()
	st, err := store.Open(dir, &store.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { st.Close() }) })
	cfg := HoldsConfig{Region: "eu", Store: st, Ledger: l, MinHold: Credits(5), SubmitTimeout: 50 * time.Millisecond, Logger: quiet()}
	if mod != nil {
		mod(&cfg)
	}
	c, err := NewHoldsClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close) // cleanups run last-in first-out: the client, then its store
	return c, &closeOnceStore{Store: st, once: &once}
}

func fundedLedger(t *testing.T, accts map[string]MC) *ledgertest.Direct {
	d := ledgertest.NewDirect(newState(t))
	ctx := context.Background()
	for id, amount := range accts {
		d.Submit(ctx, &Command{ID: "c-" + id, Type: CmdCreateAccount, Time: t0, CreateAccount: &CreateAccount{Account: id, Plan: PlanFree}})
		d.Submit(ctx, &Command{ID: "g-" + id, Type: CmdGrant, Time: t0, Grant: &Grant{Account: id, Bucket: BucketSignup, Amount: amount}})
	}
	return d
}

// cluster is a ledgertest.Cluster of one voter per region whose helpers
// fail the test.
type cluster struct {
	*ledgertest.Cluster
	t *testing.T
}

// newCluster starts one voter per region on 127.0.0.{1,2,3}, with real TCP
// between them.
func newCluster(t *testing.T) *cluster {
	return &cluster{Cluster: ledgertest.New(t, ledgertest.Options{}), t: t}
}

func (c *cluster) node(region string) *Node { return c.Node(region) }

func (c *cluster) start(region string) {
	c.t.Helper()
	if err := c.StartNode(region); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) stop(region string) {
	c.t.Helper()
	if err := c.StopNode(region); err != nil {
		c.t.Fatal(err)
	}
}

// cut cuts a region off from the others (its voter and its forwarded
// commands), or heals it.
func (c *cluster) cut(region string, cut bool) { c.Net().Cut(region, cut) }

func (c *cluster) waitLeader() *Node {
	c.t.Helper()
	n, err := c.Leader(10 * time.Second)
	if err != nil {
		c.t.Fatal(err)
	}
	return n
}

func (c *cluster) submit(region string, cmd *Command) *Result {
	c.t.Helper()
	res, err := c.Submit(region, cmd, 10*time.Second)
	if err != nil {
		c.t.Fatal(err)
	}
	return res
}

// converge waits until every running replica has applied the leader's last
// index, then checks they have the same state hash and pass the audit.
func (c *cluster) converge() *AuditReport {
	c.t.Helper()
	rep, err := c.Converge(10 * time.Second)
	if err != nil {
		c.t.Fatal(err)
	}
	return rep
}

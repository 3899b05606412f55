package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/trawlhq/trawl/internal/store"
)

// testNet partitions regions: a cut region can neither send to nor receive
// from any other.
type testNet struct {
	mu  sync.RWMutex
	cut map[string]bool
}

func (n *testNet) Allowed(from, to string) bool {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return !n.cut[from] && !n.cut[to]
}

func (n *testNet) set(region string, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cut == nil {
		n.cut = map[string]bool{}
	}
	n.cut[region] = cut
}

type cluster struct {
	t       *testing.T
	net     *testNet
	peers   []Peer
	dirs    map[string]string
	nodes   map[string]*Node
	servers map[string]*http.Server
	apiLn   map[string]net.Listener
	mu      sync.Mutex
}

var regions = []string{"eu", "sin", "us"}

func freeAddr(t *testing.T, ip string) string {
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func fastRaft(c *raft.Config) {
	// Short enough for fast tests, long enough that a loaded 2-core CI
	// machine (the race detector, other packages' tests) does not flap.
	c.HeartbeatTimeout = 300 * time.Millisecond
	c.ElectionTimeout = 300 * time.Millisecond
	c.LeaderLeaseTimeout = 200 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.SnapshotThreshold = 200
	c.TrailingLogs = 50
	c.SnapshotInterval = 200 * time.Millisecond
}

// newCluster starts one voter per region on 127.0.0.{1,2,3}, with real TCP
// between them.
func newCluster(t *testing.T) *cluster {
	c := &cluster{t: t, net: &testNet{}, dirs: map[string]string{}, nodes: map[string]*Node{}, servers: map[string]*http.Server{}, apiLn: map[string]net.Listener{}}
	for i, r := range regions {
		ip := fmt.Sprintf("127.0.0.%d", i+1)
		c.peers = append(c.peers, Peer{ID: r, RaftAddr: freeAddr(t, ip), APIAddr: freeAddr(t, ip)})
		c.dirs[r] = t.TempDir()
	}
	for _, r := range regions {
		c.start(r)
	}
	t.Cleanup(func() {
		for _, r := range regions {
			c.stop(r)
		}
	})
	c.waitLeader()
	return c
}

func (c *cluster) peer(region string) Peer {
	for _, p := range c.peers {
		if p.ID == region {
			return p
		}
	}
	panic(region)
}

func (c *cluster) start(region string) { c.open(region, true) }

func (c *cluster) open(region string, bootstrap bool) {
	c.t.Helper()
	p := c.peer(region)
	n, err := OpenNode(NodeConfig{
		ID: region, DataDir: filepath.Join(c.dirs[region], "ledger"), RaftAddr: p.RaftAddr,
		Peers: c.peers, Bootstrap: bootstrap, Secret: "s3cret", Network: c.net, Tune: fastRaft, Logger: quiet(),
		HTTPClient: &http.Client{Timeout: 2 * time.Second},
	})
	if err != nil {
		c.t.Fatal(err)
	}
	ln, err := net.Listen("tcp", p.APIAddr)
	if err != nil {
		c.t.Fatal(err)
	}
	srv := &http.Server{Handler: n.Handler()}
	go srv.Serve(ln)
	c.mu.Lock()
	c.nodes[region], c.servers[region] = n, srv
	c.mu.Unlock()
}

func (c *cluster) stop(region string) {
	c.mu.Lock()
	n, srv := c.nodes[region], c.servers[region]
	delete(c.nodes, region)
	delete(c.servers, region)
	c.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
	if n != nil {
		n.Close()
	}
}

func (c *cluster) node(region string) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[region]
}

func (c *cluster) waitLeader() *Node {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		for r, n := range c.nodes {
			if n.IsLeader() && c.net.Allowed(r, r) {
				c.mu.Unlock()
				return n
			}
		}
		c.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatal("no leader")
	return nil
}

func (c *cluster) submit(region string, cmd *Command) *Result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.node(region).Submit(ctx, cmd)
	if err != nil {
		c.t.Fatalf("submit %s via %s: %v", cmd.ID, region, err)
	}
	if res.Error != "" {
		c.t.Fatalf("%s refused: %s", cmd.ID, res.Message)
	}
	return res
}

// converge waits until every running replica has applied the leader's last
// index, then checks they have the same state hash and pass the audit.
func (c *cluster) converge() *AuditReport {
	c.t.Helper()
	leader := c.waitLeader()
	if err := leader.Barrier(5 * time.Second); err != nil {
		c.t.Fatal(err)
	}
	// Raft's AppliedIndex moves when entries are handed to the FSM, not when
	// it has applied them: compare the FSM's own applied index.
	want := leader.State().Meta().AppliedIndex
	deadline := time.Now().Add(10 * time.Second)
	c.mu.Lock()
	running := slices.Sorted(maps.Keys(c.nodes))
	c.mu.Unlock()
	for _, r := range running {
		n := c.node(r)
		if n == nil {
			continue
		}
		for n.State().Meta().AppliedIndex < want {
			if time.Now().After(deadline) {
				c.t.Fatalf("%s stuck at %d < %d", r, n.State().Meta().AppliedIndex, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	var first *AuditReport
	for _, r := range running {
		n := c.node(r)
		if n == nil {
			continue
		}
		rep := mustAudit(c.t, n.State())
		if first == nil {
			first = rep
		} else if rep.StateHash != first.StateHash || rep.Entries != first.Entries {
			for _, r2 := range regions {
				if n2 := c.node(r2); n2 != nil {
					c.t.Logf("%s: raft applied %d, meta %+v", r2, n2.Raft().AppliedIndex(), n2.State().Meta())
				}
			}
			c.t.Fatalf("replica %s: %d entries %s, others %d %s", r, rep.Entries, rep.StateHash, first.Entries, first.StateHash)
		}
	}
	return first
}

func TestClusterLeaderKilledLosesNothing(t *testing.T) {
	c := newCluster(t)
	c.submit("sin", &Command{ID: "acct", Type: CmdCreateAccount, Time: t0, CreateAccount: &CreateAccount{Account: "a", Plan: PlanFree}})
	for i := range 100 {
		region := regions[i%3]
		c.submit(region, &Command{ID: fmt.Sprintf("g%d", i), Type: CmdGrant, Time: t0, Grant: &Grant{Account: "a", Bucket: BucketSignup, Amount: 1000}})
	}
	before := c.converge()
	old := c.waitLeader()
	oldID := old.ID()
	c.stop(oldID)
	leader := c.waitLeader()
	if leader.ID() == oldID {
		t.Fatal("no new leader")
	}
	for i := 100; i < 150; i++ {
		c.submit(leader.ID(), &Command{ID: fmt.Sprintf("g%d", i), Type: CmdGrant, Time: t0, Grant: &Grant{Account: "a", Bucket: BucketSignup, Amount: 1000}})
	}
	c.start(oldID) // restarts on its data dir and catches up
	after := c.converge()
	if after.Entries != before.Entries+50 {
		t.Fatalf("entries %d, want %d", after.Entries, before.Entries+50)
	}
	if b, _ := c.node(oldID).State().Balance(BucketAccount("a", BucketSignup)); b != Credits(150) {
		t.Fatalf("restarted replica balance %s", b)
	}
}

// regionRig is one region's holds client over its local voter.
type regionRig struct {
	region string
	client *Client
	st     *store.Store
	ok     atomic.Int64 // millicredits charged successfully
	n      atomic.Int64
}

func TestClusterPartitionKeepsGuarantees(t *testing.T) {
	c := newCluster(t)
	const funded = 60 // credits per account
	accts := []string{"a1", "a2", "a3"}
	for _, a := range accts {
		c.submit("eu", &Command{ID: "c-" + a, Type: CmdCreateAccount, Time: t0, CreateAccount: &CreateAccount{Account: a, Plan: PlanFree}})
		c.submit("eu", &Command{ID: "g-" + a, Type: CmdGrant, Time: t0, Grant: &Grant{Account: a, Bucket: BucketSignup, Amount: Credits(funded)}})
	}
	rigs := map[string]*regionRig{}
	for _, r := range regions {
		st, err := store.Open(t.TempDir(), &store.Options{Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		cl, err := NewClient(ClientConfig{Region: r, Store: st, Ledger: c.node(r), MinHold: Credits(5), MaxHold: Credits(10),
			SettleEvery: 50 * time.Millisecond, SubmitTimeout: 300 * time.Millisecond, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		cl.Start()
		defer cl.Close()
		rigs[r] = &regionRig{region: r, client: cl, st: st}
	}
	// The region that is not the leader gets cut off: it keeps serving from
	// its holds, then refuses; the others go on.
	leader := c.waitLeader().ID()
	cutRegion := "sin"
	if leader == "sin" {
		cutRegion = "us"
	}
	var wg sync.WaitGroup
	stopCharges := make(chan struct{})
	var refusedCut atomic.Int64
	for _, r := range regions {
		for _, a := range accts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rig := rigs[r]
				for i := 0; ; i++ {
					select {
					case <-stopCharges:
						return
					default:
					}
					err := rig.client.Charge(context.Background(), a, fmt.Sprintf("%s/%s/%d", r, a, i), 250)
					switch {
					case err == nil:
						rig.ok.Add(250)
						rig.n.Add(1)
					case errors.Is(err, ErrNoCredit):
						if !c.net.Allowed(r, r) {
							refusedCut.Add(1)
						}
						time.Sleep(2 * time.Millisecond)
					default:
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	waitCharges := func(min int64) {
		deadline := time.Now().Add(10 * time.Second)
		for rigs[cutRegion].n.Load() < min {
			if time.Now().After(deadline) {
				t.Fatalf("charges stalled at %d", rigs[cutRegion].n.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitCharges(20)
	c.net.set(cutRegion, true)
	cutAt := rigs[cutRegion].n.Load()
	// The cut-off region drains its holds and starts refusing.
	deadline := time.Now().Add(10 * time.Second)
	for refusedCut.Load() < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("cut-off region never refused (charged %d since the cut)", rigs[cutRegion].n.Load()-cutAt)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if rigs[cutRegion].n.Load() == cutAt {
		t.Fatal("the cut-off region served nothing from its holds")
	}
	time.Sleep(200 * time.Millisecond) // the others keep charging meanwhile
	c.net.set(cutRegion, false)
	close(stopCharges)
	wg.Wait()

	// Healed: every local charge settles exactly once.
	var charged MC
	for _, r := range regions {
		rig := rigs[r]
		deadline := time.Now().Add(15 * time.Second)
		for rig.client.Pending() > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d charges never settled", r, rig.client.Pending())
			}
			time.Sleep(10 * time.Millisecond)
		}
		charged += MC(rig.ok.Load())
	}
	rep := c.converge()
	rev, _ := c.node("eu").State().Balance(SysRevenue)
	if rev != charged {
		t.Fatalf("revenue %s, charged %s: lost or doubled charges", rev, charged)
	}
	if charged > Credits(funded*int64(len(accts))) {
		t.Fatalf("overdraft: charged %s of %d credits", charged, funded*len(accts))
	}
	t.Logf("charged %s over %d entries; cut region served %d charges after the cut; state %s",
		charged, rep.Entries, rigs[cutRegion].n.Load()-cutAt, rep.StateHash[:12])
}

// TestClusterJoinAndRemove adds a fourth voter through the leader's members
// API, submits through it (it forwards to the leader, whose address it
// learned from replicated state), then removes a voter.
func TestClusterJoinAndRemove(t *testing.T) {
	c := newCluster(t)
	c.submit("eu", &Command{ID: "acct", Type: CmdCreateAccount, Time: t0, CreateAccount: &CreateAccount{Account: "a", Plan: PlanFree}})
	ap := Peer{ID: "ap", RaftAddr: freeAddr(t, "127.0.0.4"), APIAddr: freeAddr(t, "127.0.0.4")}
	c.peers = append(c.peers, ap)
	c.dirs["ap"] = t.TempDir()
	// The new voter starts knowing only itself: no bootstrap, no peers.
	n, err := OpenNode(NodeConfig{ID: "ap", DataDir: filepath.Join(c.dirs["ap"], "ledger"), RaftAddr: ap.RaftAddr,
		Peers: []Peer{ap}, Secret: "s3cret", Network: c.net, Tune: fastRaft, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", ap.APIAddr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: n.Handler()}
	go srv.Serve(ln)
	c.mu.Lock()
	c.nodes["ap"], c.servers["ap"] = n, srv
	c.mu.Unlock()
	t.Cleanup(func() { c.stop("ap") })

	leader := c.waitLeader()
	body := strings.NewReader(fmt.Sprintf(`{"id":"ap","raft":%q,"api":%q}`, ap.RaftAddr, ap.APIAddr))
	req, _ := http.NewRequest("POST", "http://"+c.peer(leader.ID()).APIAddr+MembersPath, body)
	req.Header.Set("X-Ledger-Secret", "s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("join: %v %v", err, resp)
	}
	resp.Body.Close()
	c.submit("ap", &Command{ID: "grant", Type: CmdGrant, Time: t0, Grant: &Grant{Account: "a", Bucket: BucketSignup, Amount: 7}})
	c.converge()
	if b, _ := n.State().Balance(BucketAccount("a", BucketSignup)); b != 7 {
		t.Fatalf("the joined voter has %s", b)
	}
	victim := "us"
	if leader.ID() == victim {
		victim = "sin"
	}
	req, _ = http.NewRequest("DELETE", "http://"+c.peer(leader.ID()).APIAddr+MembersPath+"/"+victim, nil)
	req.Header.Set("X-Ledger-Secret", "s3cret")
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("remove: %v %v", err, resp)
	}
	cfg := leader.Raft().GetConfiguration()
	if err := cfg.Error(); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, s := range cfg.Configuration().Servers {
		ids[string(s.ID)] = true
	}
	if len(ids) != 3 || ids[victim] || !ids["ap"] {
		t.Fatalf("configuration after join and remove: %v", ids)
	}
}

package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/testwait"
	. "github.com/trawlhq/trawl/ledger"
)

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
	client *HoldsClient
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
		cl, err := NewHoldsClient(HoldsConfig{Region: r, Store: st, Ledger: c.node(r), MinHold: Credits(5), MaxHold: Credits(10),
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
					case errors.Is(err, ErrNoCredit), errors.Is(err, ErrUnreachable):
						if c.Net().IsCut(r) {
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
		if err := testwait.Poll(10*time.Second, func() bool { return rigs[cutRegion].n.Load() >= min }); err != nil {
			t.Fatalf("%v: charges stalled at %d", err, rigs[cutRegion].n.Load())
		}
	}
	waitCharges(20)
	c.cut(cutRegion, true)
	cutAt := rigs[cutRegion].n.Load()
	// The cut-off region drains its holds and starts refusing.
	if err := testwait.Poll(10*time.Second, func() bool { return refusedCut.Load() >= 10 }); err != nil {
		t.Fatalf("%v: cut-off region never refused (charged %d since the cut)", err, rigs[cutRegion].n.Load()-cutAt)
	}
	if rigs[cutRegion].n.Load() == cutAt {
		t.Fatal("the cut-off region served nothing from its holds")
	}
	time.Sleep(200 * time.Millisecond) // the others keep charging meanwhile
	c.cut(cutRegion, false)
	close(stopCharges)
	wg.Wait()

	// Healed: every local charge settles exactly once.
	var charged MC
	for _, r := range regions {
		rig := rigs[r]
		if err := testwait.Poll(15*time.Second, func() bool { return rig.client.Pending() == 0 }); err != nil {
			t.Fatalf("%v: %s: %d charges never settled", err, r, rig.client.Pending())
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
	// The new voter starts knowing only itself: no bootstrap, no peers.
	ap, err := c.AddNode("ap")
	if err != nil {
		t.Fatal(err)
	}
	n := c.node("ap")

	leader := c.waitLeader()
	body := strings.NewReader(fmt.Sprintf(`{"id":"ap","raft":%q,"api":%q}`, ap.RaftAddr, ap.APIAddr))
	req, _ := http.NewRequest("POST", "http://"+c.Peer(leader.ID()).APIAddr+MembersPath, body)
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
	req, _ = http.NewRequest("DELETE", "http://"+c.Peer(leader.ID()).APIAddr+MembersPath+"/"+victim, nil)
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

// A follower answers a forwarded command with a JSON not_leader naming the
// leader, and every refusal body is JSON, whatever its message holds.
func TestClusterAPIAnswersJSONAndNotLeader(t *testing.T) {
	c := newCluster(t)
	leader := c.waitLeader()
	var follower string
	for _, id := range c.IDs() {
		if id != leader.ID() {
			follower = id
			break
		}
	}
	if err := testwait.Poll(10*time.Second, func() bool {
		_, l := c.node(follower).Raft().LeaderWithID()
		return string(l) == leader.ID()
	}); err != nil {
		t.Fatalf("%s never learnt the leader: %v", follower, err)
	}
	post := func(id, path, body string) (int, APIError) {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+c.Peer(id).APIAddr+path, strings.NewReader(body))
		req.Header.Set("X-Ledger-Secret", "s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var ae APIError
		if err := json.NewDecoder(resp.Body).Decode(&ae); err != nil {
			t.Fatalf("%s %s: %d, body is not JSON: %v", id, path, resp.StatusCode, err)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Fatalf("content type %q", ct)
		}
		return resp.StatusCode, ae
	}
	code, ae := post(follower, ApplyPath, `{"id":"x","type":"grant"}`)
	if code != http.StatusMisdirectedRequest || ae.Error != "not_leader" || ae.Leader != leader.ID() {
		t.Fatalf("follower: %d %+v", code, ae)
	}
	err := error(&NotLeaderError{Node: follower, Leader: ae.Leader})
	if !errors.Is(err, raft.ErrNotLeader) {
		t.Fatal("NotLeaderError is not raft.ErrNotLeader")
	}
	if code, ae = post(leader.ID(), MembersPath, `{"id":"q\"uote"}`); code != http.StatusBadRequest || ae.Error != "bad_input" {
		t.Fatalf("bad join: %d %+v", code, ae)
	}
}

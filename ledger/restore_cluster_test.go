package ledger_test

import (
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/testwait"
	. "github.com/trawlhq/trawl/ledger"
	"github.com/trawlhq/trawl/ledger/ledgertest"
)

// crashPoints records, at every write to a state store, what the disk would
// hold if the process were killed at that moment (only what was synced).
type crashPoints struct {
	mem   *vfs.MemFS
	armed atomic.Bool
	mu    sync.Mutex
	disks []*vfs.MemFS
}

func (c *crashPoints) String() string { return "crash points" }

func (c *crashPoints) MaybeError(op errorfs.Op) error {
	if c.armed.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
		d := c.mem.CrashClone(vfs.CrashCloneCfg{})
		c.mu.Lock()
		c.disks = append(c.disks, d)
		c.mu.Unlock()
	}
	return nil
}

// A follower killed while it installs a snapshot from the leader restarts
// on what its disk kept: at every point of the install it either has a
// whole state or knows it is half restored and restores Raft's last
// snapshot before it starts; then it catches up and agrees with the others
// (same state hash, audits pass).
func TestClusterKillDuringInstallSnapshot(t *testing.T) {
	var mu sync.Mutex
	points := &crashPoints{mem: vfs.NewCrashableMem()}
	usFS := vfs.FS(errorfs.Wrap(points.mem, points))
	dir := t.TempDir()
	c := &cluster{t: t, Cluster: ledgertest.New(t, ledgertest.Options{Dir: dir, StateFS: func(id string) vfs.FS {
		if id != "us" {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		return usFS
	}})}
	c.submit("eu", &Command{ID: "acct", Type: CmdCreateAccount, Time: t0, CreateAccount: &CreateAccount{Account: "a", Plan: PlanFree}})
	grant := func(from, to int) {
		for i := from; i < to; i++ {
			c.submit("eu", &Command{ID: fmt.Sprintf("g%d", i), Type: CmdGrant, Time: t0, Grant: &Grant{Account: "a", Bucket: BucketSignup, Amount: 1000}})
		}
	}
	grant(0, 20)
	c.converge()
	c.stop("us")
	behind := c.node("eu").State().Meta().AppliedIndex
	// Far enough ahead that the leader has compacted the log the follower
	// needs: it can only catch up from a snapshot.
	grant(20, 420)
	leader := c.waitLeader()
	if err := testwait.Poll(10*time.Second, func() bool {
		idx, _ := strconv.ParseUint(leader.Raft().Stats()["last_snapshot_index"], 10, 64)
		return idx > behind+200
	}); err != nil {
		t.Fatalf("the leader took no snapshot: %v", err)
	}
	points.armed.Store(true)
	c.start("us")
	want := c.converge()
	points.armed.Store(false)
	c.stop("us")

	// Every crash point: a whole state that audits, or one marked half
	// restored.
	var half []*vfs.MemFS
	for i, d := range points.disks {
		st, err := store.Open(filepath.Join(dir, "us", "ledger", "state"), &store.Options{FS: d, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		s, err := OpenState(st)
		if err != nil {
			t.Fatalf("crash point %d: %v", i, err)
		}
		if s.HalfRestored() {
			half = append(half, d)
		} else if rep, err := s.Audit(); err != nil || !rep.OK() {
			t.Fatalf("crash point %d: a whole state that fails its audit: %v %+v", i, err, rep)
		}
		st.Close()
	}
	if len(half) == 0 {
		t.Fatalf("no crash point fell inside the restore (%d points)", len(points.disks))
	}
	t.Logf("%d crash points, %d inside the restore", len(points.disks), len(half))
	// Restart on the first and on the last half-restored disk.
	for n, d := range []*vfs.MemFS{half[0], half[len(half)-1]} {
		mu.Lock()
		usFS = d
		mu.Unlock()
		grant(1000+n*10, 1010+n*10) // the group moves on meanwhile
		c.start("us")
		got := c.converge()
		if got.Entries != want.Entries+uint64(10*(n+1)) {
			t.Fatalf("restart %d: %d entries, want %d", n, got.Entries, want.Entries+uint64(10*(n+1)))
		}
		if c.node("us").State().HalfRestored() {
			t.Fatal("still half restored after the start")
		}
		// It fetches the journal entries the snapshot did not carry from
		// another voter, and audits from the first entry again.
		if err := testwait.Poll(20*time.Second, func() bool {
			a, err := c.node("us").State().Anchor()
			return err == nil && a == nil
		}); err != nil {
			t.Fatalf("restart %d: the journal was never backfilled: %v", n, err)
		}
		if rep := mustAudit(t, c.node("us").State()); rep.AnchoredAt != 0 || rep.StateHash != got.StateHash {
			t.Fatalf("restart %d: after backfill %+v", n, rep)
		}
		if b, _ := c.node("us").State().Balance(BucketAccount("a", BucketSignup)); b != Credits(int64(420+10*(n+1))) {
			t.Fatalf("restart %d: balance %s", n, b)
		}
		c.stop("us")
	}
}

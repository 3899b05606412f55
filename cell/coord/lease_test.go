package coord

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/trawlhq/trawl/internal/jsnode"
	"github.com/trawlhq/trawl/internal/jsnode/jsnodetest"
)

// fakeClock is a clock the test moves by hand; After is never used by
// the tests that drive take and renew themselves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
func (c *fakeClock) After(time.Duration) <-chan time.Time { return make(chan time.Time) }

// cutKV is a bucket whose writes fail while cut: a holder cut off from
// the quorum.
type cutKV struct {
	jetstream.KeyValue
	cut atomic.Bool
}

var errCut = errors.New("cut off from the quorum")

func (k *cutKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	if k.cut.Load() {
		return 0, errCut
	}
	return k.KeyValue.Update(ctx, key, value, rev)
}

func (k *cutKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	if k.cut.Load() {
		return 0, errCut
	}
	return k.KeyValue.Create(ctx, key, value, opts...)
}

func leaseBucket(t *testing.T, n *jsnode.Node, replicas int) jetstream.KeyValue {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := jsnode.Ensure(ctx, n.JetStream(), jsnode.RegionLayout(replicas, time.Hour)); err != nil {
		t.Fatal(err)
	}
	kv, err := n.JetStream().KeyValue(ctx, jsnode.BucketLease)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// A holder acts while its last renewal is younger than Valid, by its own
// clock: cut off from the quorum, it stops acting 4 s after its last
// successful renewal though it keeps trying; a revision conflict (the key
// taken by another) ends the lease at once.
func TestLeaseStopsActingWithoutRenewal(t *testing.T) {
	n := jsnodetest.Standalone(t)
	kv := &cutKV{KeyValue: leaseBucket(t, n, 1)}
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l, err := New(Config{KV: kv, Cell: "c1", Instance: "0123abcd", Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, ok := l.Acting(); ok {
		t.Fatal("acting before taking the lease")
	}
	if !l.take(ctx) {
		t.Fatal("could not take a free lease")
	}
	fence, ok := l.Acting()
	if !ok || fence == 0 {
		t.Fatalf("not acting after taking the lease: %d %v", fence, ok)
	}
	h, rev, err := Current(ctx, kv)
	if err != nil || h.Cell != "c1" || h.Instance != "0123abcd" || rev != fence {
		t.Fatalf("holder %+v rev %d err %v, fence %d", h, rev, err, fence)
	}
	// Another cell cannot take it.
	other, _ := New(Config{KV: kv, Cell: "c2", Instance: "89abcdef", Clock: clock})
	if other.take(ctx) {
		t.Fatal("a second cell took a held lease")
	}

	clock.advance(2 * time.Second)
	if !l.renew(ctx) {
		t.Fatal("renewal refused")
	}
	if f, ok := l.Acting(); !ok || f != fence {
		t.Fatalf("after a renewal: %d %v (fence stays %d)", f, ok, fence)
	}

	kv.cut.Store(true)
	clock.advance(2 * time.Second) // 2 s since the last renewal
	if l.renew(ctx) {
		t.Fatal("renewed while cut off")
	}
	if _, ok := l.Acting(); !ok {
		t.Fatal("stopped acting 2 s after its last renewal")
	}
	clock.advance(1999 * time.Millisecond)
	if _, ok := l.Acting(); !ok {
		t.Fatal("stopped acting before Valid")
	}
	clock.advance(time.Millisecond) // 4 s
	if _, ok := l.Acting(); ok {
		t.Fatal("still acting 4 s after its last renewal")
	}
	if !l.held() {
		t.Fatal("gave up the revision while the key may still be its own")
	}

	// The quorum is back, but the key was taken meanwhile (here by a
	// write of the test): the renewal is refused, the lease is lost.
	kv.cut.Store(false)
	if _, err := kv.KeyValue.Put(ctx, jsnode.LeaseCoordinator, []byte(`{"cell":"c3"}`)); err != nil {
		t.Fatal(err)
	}
	l.renew(ctx)
	if l.held() {
		t.Fatal("still holds after a revision conflict")
	}
	if _, ok := l.Acting(); ok {
		t.Fatal("acting after a revision conflict")
	}
}

// Three cells run the lease on an R3 bucket: exactly one acts. Its node
// is stopped without the lease being released (its Run is never told):
// it stops acting, and another cell acts within 7 s, never both at once.
func TestLeaseFailover(t *testing.T) {
	c, nodes := jsnodetest.Start(t, 3)
	leaseBucket(t, nodes[0], 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leases := make([]*Lease, len(nodes))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i, n := range nodes {
		octx, ocancel := context.WithTimeout(ctx, 10*time.Second)
		kv, err := n.JetStream().KeyValue(octx, jsnode.BucketLease)
		ocancel()
		if err != nil {
			t.Fatal(err)
		}
		if leases[i], err = New(Config{KV: kv, Cell: fmt.Sprintf("c%d", i+1), Instance: n.Instance()}); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { leases[i].Run(ctx) })
	}
	acting := func() []int {
		var out []int
		for i, l := range leases {
			if _, ok := l.Acting(); ok {
				out = append(out, i)
			}
		}
		return out
	}
	var holder int
	jsnodetest.WaitFor(t, 10*time.Second, "one coordinator", func() (bool, string) {
		a := acting()
		if len(a) > 1 {
			t.Fatalf("cells %v act at once", a)
		}
		if len(a) == 1 {
			holder = a[0]
		}
		return len(a) == 1, "none acts"
	})
	fence, _ := leases[holder].Acting()

	killed := time.Now()
	c.Stop(fmt.Sprintf("c%d", holder+1))
	var stoppedActing, next time.Duration
	deadline := killed.Add(10 * time.Second)
	for time.Now().Before(deadline) {
		a := acting()
		if len(a) > 1 {
			t.Fatalf("cells %v act at once", a)
		}
		if stoppedActing == 0 && (len(a) == 0 || a[0] != holder) {
			stoppedActing = time.Since(killed)
		}
		if len(a) == 1 && a[0] != holder {
			next = time.Since(killed)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if next == 0 {
		t.Fatalf("no coordinator 10 s after the holder's node stopped")
	}
	t.Logf("the killed holder stopped acting after %v; c%d acts after %v", stoppedActing, acting()[0]+1, next)
	if next > 7*time.Second {
		t.Fatalf("the next coordinator took %v, want ≤ 7 s", next)
	}
	if f, _ := leases[acting()[0]].Acting(); f <= fence {
		t.Fatalf("the new fencing token %d is not above the old %d", f, fence)
	}
}

// A lease on standby (its cell drained) is given up at once, so another
// cell takes it within its retry period rather than the TTL, and is not
// taken again while on standby; off standby, it waits for the lease to
// be free like any other.
func TestStandbyHandsOver(t *testing.T) {
	n := jsnodetest.Standalone(t)
	kv := leaseBucket(t, n, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	var leases [2]*Lease
	for i := range leases {
		var err error
		if leases[i], err = New(Config{KV: kv, Cell: fmt.Sprintf("c%d", i+1), Instance: fmt.Sprintf("i%d", i)}); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { leases[i].Run(ctx) })
	}
	acting := func() []int {
		var out []int
		for i, l := range leases {
			if _, ok := l.Acting(); ok {
				out = append(out, i)
			}
		}
		return out
	}
	waitOne := func(what string, not int) int {
		t.Helper()
		var a []int
		jsnodetest.WaitFor(t, 10*time.Second, what, func() (bool, string) {
			a = acting()
			return len(a) == 1 && a[0] != not, fmt.Sprint(a)
		})
		return a[0]
	}
	first := waitOne("one cell coordinating", -1)
	leases[first].SetStandby(true)
	start := time.Now()
	second := waitOne("the other cell coordinating", first)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the lease moved %v after the standby, want within the retry period (not the TTL)", took)
	}
	leases[first].SetStandby(false)
	time.Sleep(3 * DefaultRetry)
	if a := acting(); len(a) != 1 || a[0] != second {
		t.Fatalf("off standby, acting %v: want only the holder %d", a, second)
	}
}

package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/store"
	. "github.com/trawlhq/trawl/ledger"
)

func TestClientNeverOverdraws(t *testing.T) {
	d := fundedLedger(t, map[string]MC{"a": Credits(10)})
	c, _ := newClient(t, t.TempDir(), d, nil)
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.Charge(context.Background(), "a", fmt.Sprintf("r%d", i), 700)
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, ErrNoCredit):
				refused.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 14 { // 14 × 0.7 = 9.8 ≤ 10 < 15 × 0.7
		t.Fatalf("%d charges of 0.700 went through on 10 credits (refused %d)", ok.Load(), refused.Load())
	}
	if n, err := c.Settle(context.Background()); err != nil || n != 14 {
		t.Fatalf("settle %d %v", n, err)
	}
	if rev, _ := d.State().Balance(SysRevenue); rev != 14*700 {
		t.Fatalf("revenue %s", rev)
	}
	mustAudit(t, d.State())
}

func TestClientCutOffServesFromHoldThenRefuses(t *testing.T) {
	d := fundedLedger(t, map[string]MC{"a": Credits(100)})
	c, _ := newClient(t, t.TempDir(), d, nil)
	ctx := context.Background()
	if err := c.Charge(ctx, "a", "first", Credits(1)); err != nil { // takes a hold of 5
		t.Fatal(err)
	}
	held := c.Available("a") + Credits(1)
	d.SetCutOff(true)
	n := 1
	for ; ; n++ {
		err := c.Charge(ctx, "a", fmt.Sprintf("r%d", n), Credits(1))
		if errors.Is(err, ErrUnreachable) { // the account has credit: not ErrNoCredit
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if MC(n)*Credits(1) != held {
		t.Fatalf("cut off: %d charges from a hold of %s", n, held)
	}
	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err := c.Settle(sctx)
	cancel()
	if err == nil {
		t.Fatal("settle succeeded while cut off")
	}
	// Healed: every local charge is settled exactly once.
	d.SetCutOff(false)
	if _, err := c.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if rev, _ := d.State().Balance(SysRevenue); rev != MC(n)*Credits(1) {
		t.Fatalf("revenue %s after heal, want %d credits", rev, n)
	}
	if err := c.Charge(ctx, "a", "after", Credits(1)); err != nil {
		t.Fatalf("after heal: %v", err)
	}
	mustAudit(t, d.State())
}

func TestClientSettlesJournalAfterRestartAndLostReplies(t *testing.T) {
	d := fundedLedger(t, map[string]MC{"a": Credits(100), "b": Credits(100)})
	dir := t.TempDir()
	c, st := newClient(t, dir, d, nil)
	ctx := context.Background()
	for i := range 30 {
		acct := []string{"a", "b"}[i%2]
		if err := c.Charge(ctx, acct, fmt.Sprintf("r%d", i), 1000); err != nil {
			t.Fatal(err)
		}
	}
	// The ledger applies the settle but the reply is lost, then the process
	// dies before the journal is updated.
	d.LoseReplies(1, CmdSettle)
	if _, err := c.Settle(ctx); err == nil {
		t.Fatal("lost reply not reported")
	}
	c.Close()
	st.Close() // the "kill": nothing but the journal survives

	c2, _ := newClient(t, dir, d, nil)
	if c2.Pending() != 30 || c2.Unsettled("a") != Credits(15) {
		t.Fatalf("journal after restart: %d pending, a unsettled %s", c2.Pending(), c2.Unsettled("a"))
	}
	// Available after restart counts the unsettled charges against the hold.
	if got := c2.Available("a"); got != c.Available("a") {
		t.Fatalf("available after restart %s, before %s", got, c.Available("a"))
	}
	if n, err := c2.Settle(ctx); err != nil || n != 30 {
		t.Fatalf("resettle %d %v", n, err)
	}
	if rev, _ := d.State().Balance(SysRevenue); rev != Credits(30) {
		t.Fatalf("revenue %s: charged twice or lost", rev)
	}
	rep := mustAudit(t, d.State())
	if c2.Pending() != 0 {
		t.Fatalf("pending %d", c2.Pending())
	}
	t.Logf("journal %d entries, state %s", rep.Entries, rep.StateHash[:12])
}

func TestClientSpendCap(t *testing.T) {
	d := fundedLedger(t, map[string]MC{"a": Credits(100)})
	capMC := Credits(3)
	d.Submit(context.Background(), &Command{ID: "cap", Type: CmdSettings, Time: t0, Settings: &Settings{Account: "a", SpendCapMC: &capMC}})
	c, _ := newClient(t, t.TempDir(), d, nil)
	for i := range 3 {
		if err := c.Charge(context.Background(), "a", fmt.Sprintf("r%d", i), Credits(1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Charge(context.Background(), "a", "over", Credits(1)); !errors.Is(err, ErrSpendCap) {
		t.Fatalf("over the cap: %v", err)
	}
}

func TestClientReleasesIdleHolds(t *testing.T) {
	d := fundedLedger(t, map[string]MC{"a": Credits(100)})
	now := t0
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c, _ := newClient(t, t.TempDir(), d, func(cfg *HoldsConfig) { cfg.Now = clock; cfg.IdleRelease = time.Minute })
	ctx := context.Background()
	if err := c.Charge(ctx, "a", "r", Credits(1)); err != nil {
		t.Fatal(err)
	}
	c.Settle(ctx)
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	c.ReleaseIdle(ctx)
	if h, _ := d.State().Balance(HoldAccount("a", "eu")); h != 0 {
		t.Fatalf("hold %s after idle release", h)
	}
	if b, _ := d.State().Balance(BucketAccount("a", BucketSignup)); b != Credits(99) {
		t.Fatalf("signup %s", b)
	}
}

// One charge the ledger cannot take must not jam settlement: it is parked
// (kept in the region's journal, counted, logged), every other charge of
// its batch settles, and later settles go on.
func TestClientParksRefusedChargeAndSettlesTheRest(t *testing.T) {
	d := fundedLedger(t, map[string]MC{"a": Credits(100)})
	dir := t.TempDir()
	ctx := context.Background()
	c1, st1 := newClient(t, dir, d, nil)
	if err := c1.Charge(ctx, "a", "r1", 300); err != nil {
		t.Fatal(err)
	}
	if err := c1.Charge(ctx, "a", "", 1); err == nil {
		t.Fatal("a charge without a receipt was journaled")
	}
	c1.Close()
	st1.Close()
	// Charges the ledger refuses, as a journal written by an older gate (or
	// a bug) may hold them: no receipt, an account the ledger does not know.
	{
		st, err := store.Open(dir, &store.Options{Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		for i, ch := range []Charge{{Account: "a", Receipt: "", Amount: 200}, {Account: "ghost", Receipt: "g1", Amount: 400}} {
			if err := JournalRaw(st, uint64(2+i), ch); err != nil {
				t.Fatal(err)
			}
		}
		st.Close()
	}
	c2, _ := newClient(t, dir, d, nil)
	if err := c2.Charge(ctx, "a", "r4", 500); err != nil {
		t.Fatal(err)
	}
	n, err := c2.Settle(ctx)
	if err != nil || n != 4 {
		t.Fatalf("settle: %d, %v", n, err)
	}
	if rev, _ := d.State().Balance(SysRevenue); rev != 800 {
		t.Fatalf("revenue %s, want the two good charges (0.800)", rev)
	}
	if p := c2.Pending(); p != 0 {
		t.Fatalf("%d charges still pending", p)
	}
	m := c2.Metrics()
	if m.ParkedCharges != 2 || m.ParkedMC != 600 {
		t.Fatalf("metrics %+v", m)
	}
	parked, err := c2.Parked()
	if err != nil || len(parked) != 2 || parked[0].Receipt != "" || parked[0].Error != ErrCodeInvalid ||
		parked[1].Account != "ghost" || parked[1].Error != ErrCodeNoAccount || parked[1].Seq != 3 {
		t.Fatalf("parked %+v %v", parked, err)
	}
	// Settlement goes on.
	if err := c2.Charge(ctx, "a", "r5", 100); err != nil {
		t.Fatal(err)
	}
	if n, err := c2.Settle(ctx); err != nil || n != 1 {
		t.Fatalf("next settle: %d %v", n, err)
	}
	if rev, _ := d.State().Balance(SysRevenue); rev != 900 {
		t.Fatalf("revenue %s", rev)
	}
	if got := c2.Available("a") + c2.Unsettled("a"); got < 0 {
		t.Fatalf("hold went negative: %s", got)
	}
	mustAudit(t, d.State())
}

// A lowered spend cap holds from the next call in every region: holds
// already taken are not spent past it (31 were spent against a cap of 26
// before the ledger took holds back).
func TestClientLoweredCapHoldsInEveryRegion(t *testing.T) {
	d := fundedLedger(t, map[string]MC{"a": Credits(100)})
	big := func(c *HoldsConfig) { c.MinHold = Credits(20) }
	eu, _ := newClient(t, t.TempDir(), d, big)
	us, _ := newClient(t, t.TempDir(), d, func(c *HoldsConfig) { big(c); c.Region = "us" })
	d.State().OnHoldsReduced(func(i uint64, hs []HoldBalance) {
		eu.HoldsReduced(i, hs)
		us.HoldsReduced(i, hs)
	})
	ctx := context.Background()
	for i := range 3 {
		for j, c := range []*HoldsClient{eu, us} {
			if err := c.Charge(ctx, "a", fmt.Sprintf("before-%d-%d", j, i), Credits(1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if eu.Available("a") < Credits(10) || us.Available("a") < Credits(10) {
		t.Fatalf("holds %s and %s: the test needs large holds", eu.Available("a"), us.Available("a"))
	}
	// 6 spent (not yet settled); the cap now allows 4 more in all.
	capMC := Credits(10)
	if res, err := d.Submit(ctx, &Command{ID: "cap", Type: CmdSettings, Time: t0, Settings: &Settings{Account: "a", SpendCapMC: &capMC}}); err != nil || res.Error != "" {
		t.Fatalf("cap: %v %+v", err, res)
	}
	// Hearing of the reduced holds, each region settles at once (the
	// settle loop's kick); here, by hand.
	for _, c := range []*HoldsClient{eu, us} {
		if _, err := c.Settle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	served := 0
	for i := range 20 {
		for j, c := range []*HoldsClient{eu, us} {
			err := c.Charge(ctx, "a", fmt.Sprintf("after-%d-%d", j, i), Credits(1))
			switch {
			case err == nil:
				served++
			case !errors.Is(err, ErrSpendCap):
				t.Fatalf("charge after the cap: %v", err)
			}
		}
	}
	for _, c := range []*HoldsClient{eu, us} {
		if _, err := c.Settle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	acct, _ := d.State().Account("a")
	if served != 4 || acct.MonthSpent != capMC {
		t.Fatalf("served %d after the cap (want 4); month spent %s against a cap of %s", served, acct.MonthSpent, capMC)
	}
	mustAudit(t, d.State())
}

// releaseGate holds the ledger's answer to a release until it is let go.
type releaseGate struct {
	Submitter
	sent chan struct{}
	let  chan struct{}
}

func (g *releaseGate) Submit(ctx context.Context, cmd *Command) (*Result, error) {
	if cmd.Type == CmdRelease {
		g.sent <- struct{}{}
		<-g.let
	}
	return g.Submitter.Submit(ctx, cmd)
}

// A call that comes while the region's idle hold is being released is not
// refused for want of credit: the ledger, which has not applied the
// release yet, refuses more hold; the client waits for the release's
// answer and asks again (seen as a 402 with credit left in
// regiontest.TestDialRefusedURLsAreFree under load).
func TestClientEnsureDuringIdleRelease(t *testing.T) {
	d := fundedLedger(t, map[string]MC{"a": Credits(10)})
	g := &releaseGate{Submitter: d, sent: make(chan struct{}, 1), let: make(chan struct{})}
	now := t0
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c, _ := newClient(t, t.TempDir(), g, func(cfg *HoldsConfig) {
		cfg.Now, cfg.IdleRelease, cfg.MinHold, cfg.SubmitTimeout = clock, time.Minute, Credits(10), 5*time.Second
	})
	ctx := context.Background()
	if err := c.Ensure(ctx, "a", Credits(2)); err != nil {
		t.Fatal(err)
	}
	if h, _ := d.State().Balance(HoldAccount("a", "eu")); h != Credits(10) {
		t.Fatalf("hold %s, want the whole balance", h)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	released := make(chan struct{})
	go func() { defer close(released); c.ReleaseIdle(ctx) }()
	<-g.sent // the release is on its way, not answered
	ensured := make(chan error, 1)
	go func() { ensured <- c.Ensure(ctx, "a", Credits(2)) }()
	select {
	case err := <-ensured:
		t.Fatalf("Ensure during the release returned %v before the release was answered", err)
	case <-time.After(50 * time.Millisecond): // (a refusal would have come by now)
	}
	close(g.let)
	<-released
	if err := <-ensured; err != nil {
		t.Fatalf("Ensure after the release: %v", err)
	}
}

// afterApply is a ledger whose Submit runs hook once the command is
// applied and before the caller hears back: the window in which a replica
// already has a settle batch the region's client still counts as pending.
type afterApply struct {
	Submitter
	hook func(*Command)
}

func (l afterApply) Submit(ctx context.Context, cmd *Command) (*Result, error) {
	res, err := l.Submitter.Submit(ctx, cmd)
	if err == nil && l.hook != nil {
		l.hook(cmd)
	}
	return res, err
}

// A balance read while a settle batch is applied and not yet answered
// counts each charge once: the view's mark says the replica has the batch,
// and UnsettledAt leaves it out. (Unsettled alone counts it twice: the
// cmd/trawl MCP test once saw 75 for 76.)
func TestClientUnsettledAtCountsASettlingBatchOnce(t *testing.T) {
	d := fundedLedger(t, map[string]MC{"a": Credits(100)})
	var c *HoldsClient
	var seen []MC
	hook := func(cmd *Command) {
		if cmd.Type != CmdSettle {
			return
		}
		region, epoch := c.Journal()
		v, err := d.State().BalanceView("a", t0, region, epoch)
		if err != nil {
			t.Error(err)
			return
		}
		if v.Mark == 0 {
			t.Error("the view has no mark after a settle")
		}
		seen = append(seen, v.Balance.Total-c.UnsettledAt("a", v.Mark), v.Balance.Total-c.Unsettled("a"))
	}
	c, _ = newClient(t, t.TempDir(), afterApply{Submitter: d, hook: hook}, nil)
	ctx := context.Background()
	for i := range 3 {
		if err := c.Charge(ctx, "a", fmt.Sprintf("r%d", i), Credits(1)); err != nil {
			t.Fatal(err)
		}
	}
	region, epoch := c.Journal()
	before, err := d.State().BalanceView("a", t0, region, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if got := before.Balance.Total - c.UnsettledAt("a", before.Mark); got != Credits(97) {
		t.Fatalf("before the settle: %s", got)
	}
	if n, err := c.Settle(ctx); err != nil || n != 3 {
		t.Fatalf("settle %d %v", n, err)
	}
	if len(seen) != 2 || seen[0] != Credits(97) {
		t.Fatalf("during the settle: UnsettledAt gives %v, want 97.000", seen)
	}
	if seen[1] != Credits(94) {
		t.Errorf("Unsettled alone during the settle: %s (the double count this guards against)", seen[1])
	}
	after, _ := d.State().BalanceView("a", t0, region, epoch)
	if got := after.Balance.Total - c.UnsettledAt("a", after.Mark); got != Credits(97) || c.Unsettled("a") != 0 {
		t.Fatalf("after the settle: %s (unsettled %s)", got, c.Unsettled("a"))
	}
}

// holdAfterRelease is a ledger that, given a hold while a release is held
// back, applies the hold first (refused: every credit is still in the
// hold) and answers it only once the release has been applied and
// answered: the release ends while the refill is being weighed.
type holdAfterRelease struct {
	*releaseGate
	released chan struct{}
}

func (l *holdAfterRelease) Submit(ctx context.Context, cmd *Command) (*Result, error) {
	if cmd.Type != CmdHold {
		return l.releaseGate.Submit(ctx, cmd)
	}
	res, err := l.releaseGate.Submitter.Submit(ctx, cmd)
	select {
	case <-l.let: // already let go
	default:
		close(l.let)
	}
	<-l.released
	return res, err
}

// A hold just granted is not idle: the settle loop's release does not take
// it back before the call that asked for it has charged (a 402 with credit
// left in regiontest.TestMetricsEndpoint: the Ensure's grant was released at
// once, and the charge's refill raced the release). And a refill the
// ledger weighed while a release was on its way, answered after the
// release was, looks again instead of refusing.
func TestClientGrantNotIdleAndRefillDuringRelease(t *testing.T) {
	d := fundedLedger(t, map[string]MC{"a": Credits(10)})
	g := &holdAfterRelease{releaseGate: &releaseGate{Submitter: d, sent: make(chan struct{}, 1), let: make(chan struct{})}, released: make(chan struct{})}
	now := t0
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c, _ := newClient(t, t.TempDir(), g, func(cfg *HoldsConfig) {
		cfg.Now, cfg.IdleRelease, cfg.MinHold, cfg.SubmitTimeout = clock, time.Minute, Credits(10), 5*time.Second
	})
	ctx := context.Background()
	close(g.released) // the first hold is answered at once
	close(g.let)
	if err := c.Ensure(ctx, "a", Credits(2)); err != nil {
		t.Fatal(err)
	}
	c.ReleaseIdle(ctx) // at the grant's time: not idle
	if h, _ := d.State().Balance(HoldAccount("a", "eu")); h != Credits(10) || c.Available("a") != Credits(10) {
		t.Fatalf("a hold just granted was released: ledger %s, available %s", h, c.Available("a"))
	}

	// Idle now; its release is held back while a charge asks for more.
	g.let, g.released = make(chan struct{}), make(chan struct{})
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	go func() { defer close(g.released); c.ReleaseIdle(ctx) }()
	<-g.sent
	if err := c.Charge(ctx, "a", "r1", Credits(3)); err != nil {
		t.Fatalf("a charge during the release: %v", err)
	}
}

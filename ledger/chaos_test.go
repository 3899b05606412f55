package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/trawlhq/trawl/ledger"
)

// TestClusterChaos runs seeded random fault schedules against a real 3-voter
// cluster (newCluster) with a HoldsClient per region, while charges flow
// from every region on accounts with limited funds. Faults: a region cut off
// and healed, a voter stopped and restarted on its data, the leader
// stopped, a region's HoldsClient killed (Close, store closed, in-flight ledger
// requests dropped) and restarted from its journal (with charges pending, or
// drained first), settles sent again (the same command; its charges under a
// new id, all or a later part of them, with their journal epoch and
// sequences; the
// oldest unsettled charges of a journal, settled before its HoldsClient does
// it). After each
// schedule everything is healed, the clients settle, and the ledger must
// hold: audits pass and agree on every replica, revenue is exactly what the
// clients charged (per receipt), no account spent more than it was funded
// (or its cap), no settle had a shortfall, and no client believes it holds
// more than the ledger holds for it.
//
// TRAWL_CHAOS_SEED=N reproduces a schedule's faults (not its timing);
// TRAWL_CHAOS_SCHEDULES=N runs more schedules (seeds N, N+1, ...).
func TestClusterChaos(t *testing.T) {
	base := uint64(time.Now().UnixNano())
	schedules := 3
	if v := os.Getenv("TRAWL_CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("TRAWL_CHAOS_SEED=%q: %v", v, err)
		}
		base, schedules = s, 1
	}
	if v := os.Getenv("TRAWL_CHAOS_SCHEDULES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("TRAWL_CHAOS_SCHEDULES=%q: want a positive number", v)
		}
		schedules = n
	}
	if testing.Short() {
		schedules = 1
	}
	t.Logf("chaos: %d schedules from seed %d", schedules, base)
	for i := range schedules {
		seed := base + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runChaos(t, seed) })
	}
}

// chaosLedger is a region's HoldsClient's view of the ledger: its region's voter,
// whichever instance is running now (a stopped voter looks like silence).
// Closing dead drops every request in flight, as a killed process does.
type chaosLedger struct {
	c      *cluster
	region string
	dead   <-chan struct{}
	rec    *chaosRecorder
}

func (l *chaosLedger) Submit(ctx context.Context, cmd *Command) (*Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-l.dead:
			cancel()
		case <-ctx.Done():
		}
	}()
	l.rec.sending(cmd)
	var last error = ErrNoLeader
	for {
		if n := l.c.node(l.region); n != nil {
			actx, acancel := context.WithTimeout(ctx, 500*time.Millisecond)
			res, err := n.Submit(actx, cmd)
			acancel()
			if err == nil {
				l.rec.applied(cmd, res)
				return res, nil
			}
			last = err
		}
		select {
		case <-ctx.Done():
			if cmd.Type == CmdRelease {
				l.rec.mu.Lock()
				l.rec.unanswered = append(l.rec.unanswered, cmd.ID)
				l.rec.mu.Unlock()
			}
			return nil, fmt.Errorf("%w: %v", ErrNoLeader, last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// chaosRecorder keeps the settles the ledger answered (to send again) and
// what went wrong on the way: a shortfall, a command id reused for other
// content (the ledger would take it for the earlier command).
type chaosRecorder struct {
	mu       sync.Mutex
	settles  []*Command
	sent     map[string]string // command id: its content
	findings []string
	// unanswered are releases whose HoldsClient gave up (or was killed) before
	// the ledger answered.
	unanswered []string
}

func (r *chaosRecorder) sending(cmd *Command) {
	body, _ := json.Marshal(struct {
		T string
		S *Settle
		H *HoldRequest
		R *Release
	}{cmd.Type, cmd.Settle, cmd.Hold, cmd.Release})
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sent == nil {
		r.sent = map[string]string{}
	}
	if prev, ok := r.sent[cmd.ID]; ok && prev != string(body) {
		r.findings = append(r.findings, fmt.Sprintf("command id %s reused for different content: the ledger answers it with the earlier command's result (was %.200s, now %.200s)", cmd.ID, prev, body))
	}
	r.sent[cmd.ID] = string(body)
}

func (r *chaosRecorder) applied(cmd *Command, res *Result) {
	if cmd.Type != CmdSettle || res.Error != "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.settles = append(r.settles, cmd)
	if res.Shortfall > 0 {
		r.findings = append(r.findings, fmt.Sprintf("settle %s answered with a shortfall of %s", cmd.ID, res.Shortfall))
	}
}

func (r *chaosRecorder) pick(rng *rand.Rand) *Command {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.settles) == 0 {
		return nil
	}
	return r.settles[rng.IntN(len(r.settles))]
}

// chaosRig is a regionRig whose HoldsClient can be killed and restarted.
type chaosRig struct {
	*regionRig
	mu   sync.RWMutex // read-held around each Charge; held to swap the HoldsClient
	dir  string
	jst  *closeOnceStore
	dead chan struct{}

	doneMu sync.Mutex
	done   []Charge // charges the HoldsClient reported done
}

type chaosSchedule struct {
	t      *testing.T
	seed   uint64
	rng    *rand.Rand
	c      *cluster
	rec    *chaosRecorder
	rigs   map[string]*chaosRig
	accts  []string
	funded map[string]MC
	caps   map[string]MC
	idle   time.Duration
	minH   MC
	maxH   MC

	attempts atomic.Int64
	down     map[string]bool // voters stopped
	cut      map[string]bool // regions cut off
	dups     int
	// stopCharges, once charging has started, stops it and waits.
	stopCharges atomic.Pointer[func()]
}

func (s *chaosSchedule) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("seed %d: "+format, append([]any{s.seed}, args...)...)
}

func (s *chaosSchedule) logf(format string, args ...any) {
	s.t.Helper()
	s.t.Logf("seed %d: "+format, append([]any{s.seed}, args...)...)
}

func runChaos(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := &chaosSchedule{t: t, seed: seed, rng: rng, rec: &chaosRecorder{}, rigs: map[string]*chaosRig{},
		funded: map[string]MC{}, caps: map[string]MC{}, down: map[string]bool{}, cut: map[string]bool{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("reproduce the fault schedule (not its timing): TRAWL_CHAOS_SEED=%d go test -race -run Chaos ./ledger/", seed)
		}
	})
	s.idle = []time.Duration{250 * time.Millisecond, time.Second, 5 * time.Minute}[rng.IntN(3)]
	s.minH = Credits(2 + rng.Int64N(4))
	s.maxH = s.minH + Credits(rng.Int64N(15))
	for i := range 3 + rng.IntN(3) {
		a := fmt.Sprintf("a%d", i)
		s.accts = append(s.accts, a)
		s.funded[a] = Credits(20 + rng.Int64N(80))
	}
	if rng.IntN(3) == 0 {
		a := s.accts[rng.IntN(len(s.accts))]
		s.caps[a] = s.funded[a] / 2
	}
	steps := 5 + rng.IntN(5)
	s.logf("start: accounts %v, caps %v, holds %s-%s, idle release %s, %d steps", s.fundedList(), s.caps, s.minH, s.maxH, s.idle, steps)

	s.c = newCluster(t)
	for _, a := range s.accts {
		s.c.submit("eu", &Command{ID: "c-" + a, Type: CmdCreateAccount, Time: t0, CreateAccount: &CreateAccount{Account: a, Plan: PlanFree}})
		s.c.submit("eu", &Command{ID: "g-" + a, Type: CmdGrant, Time: t0, Grant: &Grant{Account: a, Bucket: BucketSignup, Amount: s.funded[a]}})
		if capMC, ok := s.caps[a]; ok {
			s.c.submit("eu", &Command{ID: "cap-" + a, Type: CmdSettings, Time: t0, Settings: &Settings{Account: a, SpendCapMC: &capMC}})
		}
	}
	for _, r := range regions {
		rig := &chaosRig{regionRig: &regionRig{region: r}, dir: t.TempDir()}
		s.rigs[r] = rig
		s.openClient(rig)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	stopCharges := sync.OnceFunc(func() { close(stop); wg.Wait() })
	s.stopCharges.Store(&stopCharges) // a failure stops them before any client closes
	for ri, r := range regions {
		for ai, a := range s.accts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.charge(r, a, rand.New(rand.NewPCG(seed, uint64(ri*100+ai+1))), stop)
			}()
		}
	}
	for step := range steps {
		s.let(int64(20 + rng.IntN(100)))
		s.fault(step)
	}
	s.let(int64(20 + rng.IntN(100)))

	// Heal everything, stop charging, let every region settle.
	for _, r := range regions {
		s.c.cut(r, false)
		if s.down[r] {
			s.c.start(r)
		}
	}
	s.down, s.cut = map[string]bool{}, map[string]bool{}
	stopCharges()
	for _, r := range regions {
		rig := s.rigs[r]
		deadline := time.Now().Add(20 * time.Second)
		for rig.client.Pending() > 0 {
			if time.Now().After(deadline) {
				s.fatalf("%s: %d charges never settled", r, rig.client.Pending())
			}
			time.Sleep(10 * time.Millisecond)
		}
		rig.client.Close() // a clean stop: what it believes is final
		s.checkHeldRecords(rig, "stopped")
	}
	s.quiesce()
	s.check(s.c.converge())
}

// quiesce waits until every replica has applied the same index and the
// leader's has not moved for 300 ms (a command the schedule gave up on may
// still be committed after it), logging what arrived late.
func (s *chaosSchedule) quiesce() {
	s.t.Helper()
	leader := s.c.waitLeader()
	start := leader.State().Meta()
	last, since := start.AppliedIndex, time.Now()
	deadline := time.Now().Add(10 * time.Second)
	for time.Since(since) < 300*time.Millisecond {
		if time.Now().After(deadline) {
			s.fatalf("the ledger never went quiet (leader at %d)", last)
		}
		time.Sleep(10 * time.Millisecond)
		idx := s.c.waitLeader().State().Meta().AppliedIndex
		for _, r := range regions {
			if n := s.c.node(r); n != nil && n.State().Meta().AppliedIndex != idx {
				since = time.Now()
			}
		}
		if idx != last {
			last, since = idx, time.Now()
		}
	}
	if end := s.c.waitLeader().State().Meta(); end.Entries != start.Entries {
		var ids []string
		s.c.waitLeader().State().Journal(start.Entries, func(e *Entry) (bool, error) {
			ids = append(ids, e.ID)
			return true, nil
		})
		s.logf("entries after the clients stopped: %v", head(ids))
	}
}

func (s *chaosSchedule) fundedList() string {
	var parts []string
	for _, a := range s.accts {
		parts = append(parts, a+"="+s.funded[a].String())
	}
	return strings.Join(parts, " ")
}

// openClient starts the region's HoldsClient on its journal directory.
func (s *chaosSchedule) openClient(rig *chaosRig) {
	dead := make(chan struct{})
	cl, st := newClient(s.t, rig.dir, &chaosLedger{c: s.c, region: rig.region, dead: dead, rec: s.rec}, func(cfg *HoldsConfig) {
		cfg.Region = rig.region
		cfg.MinHold, cfg.MaxHold = s.minH, s.maxH
		cfg.SettleEvery = 50 * time.Millisecond
		cfg.SubmitTimeout = 300 * time.Millisecond
		cfg.IdleRelease = s.idle
	})
	// Runs before newClient's cleanups: charging stops first, and a client
	// left in a partition is not waited on.
	s.t.Cleanup(func() {
		if stop := s.stopCharges.Load(); stop != nil {
			(*stop)()
		}
		select {
		case <-dead:
		default:
			close(dead)
		}
	})
	cl.Start()
	rig.client, rig.jst, rig.st, rig.dead = cl, st, st.Store, dead
}

// killClient kills the region's HoldsClient and restarts it from its journal.
// With drain, the region settles everything first (a restart of an idle
// region: its journal is empty).
func (s *chaosSchedule) killClient(rig *chaosRig, drain bool) string {
	rig.mu.Lock() // waits for the charges in flight
	defer rig.mu.Unlock()
	note := ""
	if drain {
		deadline := time.Now().Add(3 * time.Second)
		for rig.client.Pending() > 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		note = fmt.Sprintf(" (drained: %d pending)", rig.client.Pending())
	} else {
		note = fmt.Sprintf(" (%d pending)", rig.client.Pending())
	}
	close(rig.dead)
	rig.client.Close()
	s.checkHeldRecords(rig, "killed")
	rig.jst.Close()
	s.openClient(rig)
	return note
}

// checkHeldRecords compares, once rig's HoldsClient has stopped, the hold
// balances its journal keeps for a restart with the ones it went by: a
// record that says more than the HoldsClient knew lends a restarted HoldsClient
// credit the ledger no longer holds.
func (s *chaosSchedule) checkHeldRecords(rig *chaosRig, when string) {
	for _, v := range rig.client.HeldViews() {
		if v.Err != nil {
			s.t.Errorf("seed %d: %s: %v", s.seed, rig.region, v.Err)
			continue
		}
		if v.Recorded > v.Held {
			s.rec.mu.Lock()
			s.rec.findings = append(s.rec.findings, fmt.Sprintf("client %s (%s): journal records %s held for %s as of index %d, the client knew %s as of index %d: a restart starts with credit the ledger does not hold",
				rig.region, when, v.Recorded, v.Account, v.RecordedIndex, v.Held, v.Index))
			s.rec.mu.Unlock()
		}
	}
}

func (s *chaosSchedule) charge(r, a string, rng *rand.Rand, stop <-chan struct{}) {
	rig := s.rigs[r]
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		amount := MC(50 + rng.Int64N(700))
		receipt := fmt.Sprintf("%s/%s/%d", r, a, i)
		rig.mu.RLock()
		err := rig.client.Charge(context.Background(), a, receipt, amount)
		rig.mu.RUnlock()
		s.attempts.Add(1)
		switch {
		case err == nil:
			rig.ok.Add(int64(amount))
			rig.n.Add(1)
			rig.doneMu.Lock()
			rig.done = append(rig.done, Charge{Account: a, Receipt: receipt, Amount: amount})
			rig.doneMu.Unlock()
			time.Sleep(time.Duration(1+rng.IntN(6)) * time.Millisecond) // pace: funds last the schedule
		case errors.Is(err, ErrNoCredit), errors.Is(err, ErrSpendCap), errors.Is(err, ErrUnreachable):
			time.Sleep(10 * time.Millisecond)
		default:
			s.t.Errorf("seed %d: charge %s: %v", s.seed, receipt, err)
			return
		}
	}
}

// let lets n charge attempts happen (at most 1.5 s).
func (s *chaosSchedule) let(n int64) {
	target := s.attempts.Load() + n
	deadline := time.Now().Add(1500 * time.Millisecond)
	for s.attempts.Load() < target && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *chaosSchedule) leader() string {
	for _, r := range regions {
		if n := s.c.node(r); n != nil && !s.cut[r] && n.IsLeader() {
			return r
		}
	}
	return ""
}

func (s *chaosSchedule) fault(step int) {
	rng := s.rng
	faulty := len(s.down) + len(s.cut)
	var kinds []string
	if faulty < 2 {
		kinds = append(kinds, "cut", "stop-voter", "stop-leader")
	}
	if len(s.cut) > 0 {
		kinds = append(kinds, "heal")
	}
	if len(s.down) > 0 {
		kinds = append(kinds, "start-voter")
	}
	kinds = append(kinds, "kill-client", "kill-idle-client", "settle-again", "settle-new-id", "settle-part", "journal-resend")
	kind := kinds[rng.IntN(len(kinds))]
	pickFrom := func(ok func(string) bool) string {
		var c []string
		for _, r := range regions {
			if ok(r) {
				c = append(c, r)
			}
		}
		if len(c) == 0 {
			return ""
		}
		return c[rng.IntN(len(c))]
	}
	var what string
	switch kind {
	case "cut":
		r := pickFrom(func(r string) bool { return !s.cut[r] })
		s.c.cut(r, true)
		s.cut[r] = true
		what = "cut " + r
	case "heal":
		r := pickFrom(func(r string) bool { return s.cut[r] })
		s.c.cut(r, false)
		delete(s.cut, r)
		what = "heal " + r
	case "stop-voter":
		r := pickFrom(func(r string) bool { return !s.down[r] })
		s.c.stop(r)
		s.down[r] = true
		what = "stop voter " + r
	case "stop-leader":
		r := s.leader()
		if r == "" {
			what = "stop leader: no leader now"
			break
		}
		s.c.stop(r)
		s.down[r] = true
		what = "stop leader " + r
	case "start-voter":
		r := pickFrom(func(r string) bool { return s.down[r] })
		s.c.start(r)
		delete(s.down, r)
		what = "start voter " + r
	case "kill-client", "kill-idle-client":
		r := regions[rng.IntN(len(regions))]
		what = "kill and restart client " + r + s.killClient(s.rigs[r], kind == "kill-idle-client")
	case "settle-again", "settle-new-id", "settle-part":
		// A settle the ledger answered, sent again: as it was, under a new
		// id (what a restarted client sends), or part of it under a new id
		// (a batch cut differently). Repeats are found by the epoch's mark
		// alone: the ledger keeps no key per charge.
		prev := s.rec.pick(rng)
		if prev == nil {
			what = kind + ": no settle yet"
			break
		}
		cmd := prev
		switch kind {
		case "settle-new-id":
			cmd = s.dupSettle(prev.Settle.Region, prev.Settle.Epoch, prev.Settle.Charges)
		case "settle-part":
			from := rng.IntN(len(prev.Settle.Charges))
			cmd = s.dupSettle(prev.Settle.Region, prev.Settle.Epoch, prev.Settle.Charges[from:])
		}
		res, err := s.submitSomewhere(cmd)
		what = fmt.Sprintf("%s %s (%d charges)", kind, cmd.ID, len(cmd.Settle.Charges))
		if err != nil {
			what += ": not applied: " + err.Error()
			break
		}
		switch {
		case kind == "settle-again" && !res.Duplicate:
			s.fatalf("step %d: %s sent again was applied again: %+v", step, cmd.ID, res)
		case kind != "settle-again" && (res.Settled != 0 || res.Duplicates != len(cmd.Settle.Charges)):
			s.fatalf("step %d: %s: settled charges again: settled %d, duplicates %d of %d (first sent as %s)",
				step, what, res.Settled, res.Duplicates, len(cmd.Settle.Charges), prev.ID)
		}
		what += fmt.Sprintf(": duplicate=%v settled=%d duplicates=%d", res.Duplicate, res.Settled, res.Duplicates)
	case "journal-resend":
		// The oldest charges in a region's journal, maybe not settled yet,
		// settled under another id first (a settle whose reply was lost,
		// sent again by a restarted client).
		r := regions[rng.IntN(len(regions))]
		epoch, charges := s.journalHead(s.rigs[r], 1+rng.IntN(20))
		if len(charges) == 0 {
			what = kind + ": nothing unsettled in " + r
			break
		}
		cmd := s.dupSettle(r, epoch, charges)
		res, err := s.submitSomewhere(cmd)
		what = fmt.Sprintf("%s %s (%d charges of %s)", kind, cmd.ID, len(charges), r)
		if err != nil {
			what += ": not applied: " + err.Error()
			break
		}
		if res.Settled+res.Duplicates != len(charges) || res.Shortfall != 0 {
			s.fatalf("step %d: %s: %+v", step, what, res)
		}
		what += fmt.Sprintf(": settled=%d duplicates=%d", res.Settled, res.Duplicates)
	}
	s.logf("step %d: %s", step, what)
}

func (s *chaosSchedule) dupSettle(region, epoch string, charges []Charge) *Command {
	s.dups++
	return &Command{ID: fmt.Sprintf("chaos-settle/%d", s.dups), Type: CmdSettle, Time: time.Now(),
		Settle: &Settle{Region: region, Epoch: epoch, Charges: append([]Charge(nil), charges...)}}
}

// journalHead reads up to n of the oldest durable charges in rig's journal,
// as its HoldsClient would send them.
func (s *chaosSchedule) journalHead(rig *chaosRig, n int) (string, []Charge) {
	rig.mu.RLock()
	defer rig.mu.RUnlock()
	epoch, charges, err := rig.client.JournalHead(n)
	if err != nil {
		s.fatalf("read %s journal: %v", rig.region, err)
	}
	return epoch, charges
}

// submitSomewhere sends cmd through a random running voter.
func (s *chaosSchedule) submitSomewhere(cmd *Command) (*Result, error) {
	r := regions[s.rng.IntN(len(regions))]
	n := s.c.node(r)
	if n == nil {
		return nil, fmt.Errorf("voter %s is down", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	res, err := n.Submit(ctx, cmd)
	if err == nil {
		s.rec.applied(cmd, res)
	}
	return res, err
}

// check verifies the ledger once the schedule is over and every replica has
// converged (converge has audited each and compared state hashes). It
// reports every finding of the first replica that has any.
func (s *chaosSchedule) check(rep *AuditReport) {
	s.t.Helper()
	// What the clients reported done, per receipt.
	reported := map[string]Charge{}
	var total MC
	for _, r := range regions {
		rig := s.rigs[r]
		for _, ch := range rig.done {
			reported[ch.Receipt] = ch
			total += ch.Amount
		}
		if MC(rig.ok.Load()) != sumCharges(rig.done) {
			s.fatalf("%s: rig totals disagree", r)
		}
	}
	s.rec.mu.Lock()
	found := append([]string(nil), s.rec.findings...)
	s.rec.mu.Unlock()
	for _, r := range regions {
		if bad, notes := s.checkReplica(r, reported, total); len(bad) > 0 || len(found) > 0 {
			found = append(found, "replica "+r+":")
			found = append(found, bad...)
			found = append(found, notes...)
			break
		}
	}
	if len(found) > 0 {
		s.fatalf("\n\t%s", strings.Join(found, "\n\t"))
	}
	s.logf("ok: %d charges for %s over %d entries; state %s", len(reported), total, rep.Entries, rep.StateHash[:12])
}

func (s *chaosSchedule) checkReplica(r string, reported map[string]Charge, total MC) (bad, notes []string) {
	errf := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	st := s.c.node(r).State()
	// Every receipt charged once, for what the client charged.
	charged := map[string]MC{}
	byAcct := map[string]MC{}
	err := st.Journal(0, func(e *Entry) (bool, error) {
		if e.Kind == KindCharge {
			charged[e.Receipt] += e.Amount
			acct := strings.Split(e.Debit, ":")[1]
			byAcct[acct] += e.Amount
		}
		return true, nil
	})
	if err != nil {
		return []string{"journal: " + err.Error()}, nil
	}
	var lost, extra []string
	for id, ch := range reported {
		if charged[id] != ch.Amount {
			lost = append(lost, fmt.Sprintf("%s: client charged %s, ledger has %s", id, ch.Amount, charged[id]))
		}
	}
	for id, v := range charged {
		if _, ok := reported[id]; !ok {
			extra = append(extra, fmt.Sprintf("%s: %s", id, v))
		}
	}
	sort.Strings(lost)
	sort.Strings(extra)
	s.rec.mu.Lock()
	unanswered := append([]string(nil), s.rec.unanswered...)
	s.rec.mu.Unlock()
	for _, id := range unanswered { // not wrong in itself; a clue when something is
		if res, ok, err := st.CommandResult(id); err == nil && ok && res.Error == "" {
			notes = append(notes, fmt.Sprintf("note: release %s was applied (index %d, hold now %v) but its client never had the answer", id, res.Index, res.Holds))
		}
	}
	if len(lost) > 0 {
		errf("%d receipts differ from what the clients charged: %v", len(lost), head(lost))
	}
	if len(extra) > 0 {
		errf("%d receipts never charged by a client: %v", len(extra), head(extra))
	}
	if rev, err := st.Balance(SysRevenue); err != nil || rev != total {
		errf("revenue %s, clients charged %s (%v): lost or doubled charges", rev, total, err)
	}
	// No settle, whoever sent it and whether or not its reply arrived,
	// charged more than a hold had.
	err = st.CommandResults(func(id string, res *Result) error {
		if res.Shortfall > 0 {
			errf("settle %s had a shortfall of %s (settled %d, duplicates %d)", id, res.Shortfall, res.Settled, res.Duplicates)
		}
		return nil
	})
	if err != nil {
		errf("results: %v", err)
	}
	for _, a := range s.accts {
		acct, err := st.Account(a)
		if err != nil {
			errf("account %s: %v", a, err)
			continue
		}
		bal, err := st.AccountBalance(acct, t0)
		if err != nil {
			errf("balance %s: %v", a, err)
			continue
		}
		for k, v := range bal.Buckets {
			if v < 0 {
				errf("%s bucket %s is %s", a, k, v)
			}
		}
		if byAcct[a] > s.funded[a] {
			errf("overdraft: %s spent %s of %s", a, byAcct[a], s.funded[a])
		}
		if capMC, ok := s.caps[a]; ok && byAcct[a] > capMC {
			errf("%s spent %s over its cap %s", a, byAcct[a], capMC)
		}
		if bal.Total+byAcct[a] != s.funded[a] {
			errf("%s has %s and spent %s, funded %s", a, bal.Total, byAcct[a], s.funded[a])
		}
		if acct.MonthSpent != byAcct[a] {
			errf("%s month_spent %s, charged %s", a, acct.MonthSpent, byAcct[a])
		}
		// A client may know of less credit than it holds, never more.
		for _, reg := range regions {
			if avail := s.rigs[reg].client.Available(a); avail > bal.Holds[reg] {
				errf("client %s believes %s has %s available, the ledger holds %s", reg, a, avail, bal.Holds[reg])
			}
		}
	}
	return bad, notes
}

func sumCharges(chs []Charge) MC {
	var t MC
	for _, c := range chs {
		t += c.Amount
	}
	return t
}

func head(s []string) []string {
	if len(s) > 5 {
		return append(s[:5:5], "…")
	}
	return s
}

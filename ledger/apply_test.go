package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/trawlhq/trawl/internal/store"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

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

type applier struct {
	t     testing.TB
	s     *State
	index uint64
}

func (a *applier) do(c Command) *Result {
	a.t.Helper()
	a.index++
	if c.Time.IsZero() {
		c.Time = t0
	}
	if c.ID == "" {
		c.ID = fmt.Sprintf("cmd-%d", a.index)
	}
	res, err := a.s.Apply(&c, a.index)
	if err != nil {
		a.t.Fatalf("apply %s: %v", c.Type, err)
	}
	rep, err := a.s.Audit()
	if err != nil {
		a.t.Fatal(err)
	}
	if !rep.OK() {
		a.t.Fatalf("after %s %s: audit: %v", c.Type, c.ID, rep.Violations)
	}
	return res
}

func (a *applier) ok(c Command) *Result {
	a.t.Helper()
	r := a.do(c)
	if r.Error != "" {
		a.t.Fatalf("%s refused: %s %s", c.Type, r.Error, r.Message)
	}
	return r
}

func (a *applier) bal(acct string) MC {
	a.t.Helper()
	v, err := a.s.Balance(acct)
	if err != nil {
		a.t.Fatal(err)
	}
	return v
}

func newAccount(a *applier, id string, signup MC) {
	a.ok(Command{Type: CmdCreateAccount, CreateAccount: &CreateAccount{Account: id, Plan: PlanFree}})
	if signup > 0 {
		a.ok(Command{Type: CmdGrant, Grant: &Grant{Account: id, Bucket: BucketSignup, Amount: signup}})
	}
}

func TestHoldSettleRelease(t *testing.T) {
	a := &applier{t: t, s: newState(t)}
	newAccount(a, "acct1", Credits(10))
	a.ok(Command{Type: CmdGrant, Grant: &Grant{Account: "acct1", Bucket: BucketMonthly, Amount: Credits(2)}})

	r := a.ok(Command{Type: CmdHold, Hold: &HoldRequest{Account: "acct1", Region: "eu", Want: Credits(5)}})
	if r.Granted != Credits(5) || r.Reason != "" || r.Holds["acct1"] != Credits(5) {
		t.Fatalf("hold: %+v", r)
	}
	// Monthly is spent first: 2 from monthly, 3 from signup.
	if m, s := a.bal(BucketAccount("acct1", BucketMonthly)), a.bal(BucketAccount("acct1", BucketSignup)); m != 0 || s != Credits(7) {
		t.Fatalf("buckets after hold: monthly %s signup %s", m, s)
	}
	settle := Command{ID: "settle-1", Type: CmdSettle, Settle: &Settle{Region: "eu", Charges: []Charge{
		{Account: "acct1", Receipt: "r1", Amount: 1500},
		{Account: "acct1", Receipt: "r2", Amount: 500},
	}}}
	r = a.ok(settle)
	if r.Settled != 2 || r.Holds["acct1"] != Credits(3) || r.Shortfall != 0 {
		t.Fatalf("settle: %+v", r)
	}
	// The same command again (a retried settle) and the same receipts in a
	// new command: neither charges twice.
	if r = a.ok(settle); !r.Duplicate {
		t.Fatalf("retried settle not a duplicate: %+v", r)
	}
	r = a.ok(Command{Type: CmdSettle, Settle: &Settle{Region: "eu", Charges: []Charge{{Account: "acct1", Receipt: "r2", Amount: 500}, {Account: "acct1", Receipt: "r3", Amount: 250}}}})
	if r.Settled != 1 || r.Duplicates != 1 {
		t.Fatalf("receipt dedup: %+v", r)
	}
	if rev := a.bal(SysRevenue); rev != 2250 {
		t.Fatalf("revenue %s, want 2.250", rev)
	}
	acct, _ := a.s.Account("acct1")
	if acct.MonthSpent != 2250 {
		t.Fatalf("month spent %s", acct.MonthSpent)
	}
	// Release returns the rest; the hold parts say where to.
	r = a.ok(Command{Type: CmdRelease, Release: &Release{Account: "acct1", Region: "eu"}})
	if r.Holds["acct1"] != 0 {
		t.Fatalf("release: %+v", r)
	}
	b, _ := a.s.AccountBalance(acct, t0)
	if b.Total != Credits(12)-2250 {
		t.Fatalf("total %s", b.Total)
	}
}

func TestHoldNeverExceedsBalanceOrCap(t *testing.T) {
	a := &applier{t: t, s: newState(t)}
	newAccount(a, "acct1", Credits(3))
	r := a.ok(Command{Type: CmdHold, Hold: &HoldRequest{Account: "acct1", Region: "eu", Want: Credits(5)}})
	if r.Granted != Credits(3) || r.Reason != ReasonNoCredit {
		t.Fatalf("hold beyond balance: %+v", r)
	}
	r = a.ok(Command{Type: CmdHold, Hold: &HoldRequest{Account: "acct1", Region: "us", Want: 1}})
	if r.Granted != 0 || r.Reason != ReasonNoCredit {
		t.Fatalf("second region: %+v", r)
	}

	newAccount(a, "acct2", Credits(100))
	capMC := Credits(4)
	a.ok(Command{Type: CmdSettings, Settings: &Settings{Account: "acct2", SpendCapMC: &capMC}})
	r = a.ok(Command{Type: CmdHold, Hold: &HoldRequest{Account: "acct2", Region: "eu", Want: Credits(3)}})
	if r.Granted != Credits(3) {
		t.Fatalf("%+v", r)
	}
	// The cap counts what other regions hold.
	r = a.ok(Command{Type: CmdHold, Hold: &HoldRequest{Account: "acct2", Region: "sin", Want: Credits(3)}})
	if r.Granted != Credits(1) || r.Reason != ReasonSpendCap {
		t.Fatalf("cap: %+v", r)
	}
	// A settle larger than the hold takes the rest from the account's
	// buckets (the call was served), never a negative hold.
	r = a.ok(Command{Type: CmdSettle, Settle: &Settle{Region: "sin", Charges: []Charge{{Account: "acct2", Receipt: "x", Amount: Credits(2)}}}})
	if r.Shortfall != 0 || r.Holds["acct2"] != 0 {
		t.Fatalf("short hold: %+v", r)
	}
	if rev, _ := a.s.Balance(SysRevenue); rev != Credits(2) {
		t.Fatalf("revenue %s, want the whole charge", rev)
	}
	// What neither the hold nor the buckets cover is a shortfall.
	newAccount(a, "acct3", Credits(1))
	r = a.ok(Command{Type: CmdSettle, Settle: &Settle{Region: "sin", Charges: []Charge{{Account: "acct3", Receipt: "y", Amount: Credits(3)}}}})
	if r.Shortfall != Credits(2) || r.Holds["acct3"] != 0 {
		t.Fatalf("shortfall: %+v", r)
	}
	cleanAudit(t, a.s)
}

func TestLoweredCapTakesBackHolds(t *testing.T) {
	a := &applier{t: t, s: newState(t)}
	newAccount(a, "acct1", Credits(100))
	var heard []HoldBalance
	a.s.OnHoldsReduced(func(_ uint64, hs []HoldBalance) { heard = append(heard, hs...) })
	a.ok(Command{Type: CmdHold, Hold: &HoldRequest{Account: "acct1", Region: "eu", Want: Credits(10)}})
	a.ok(Command{Type: CmdHold, Hold: &HoldRequest{Account: "acct1", Region: "us", Want: Credits(6)}})
	a.ok(Command{Type: CmdSettle, Settle: &Settle{Region: "eu", Charges: []Charge{{Account: "acct1", Receipt: "r1", Amount: Credits(4)}}}})
	// Spent 4, held 6 + 6: a cap of 9 leaves 5 to hold. The largest hold
	// gives first (a tie goes in region order).
	capMC := Credits(9)
	r := a.ok(Command{Type: CmdSettings, Settings: &Settings{Account: "acct1", SpendCapMC: &capMC}})
	want := []HoldBalance{{Account: "acct1", Region: "eu", Balance: 0}, {Account: "acct1", Region: "us", Balance: Credits(5)}}
	if !reflect.DeepEqual(r.Reduced, want) || !reflect.DeepEqual(heard, want) {
		t.Fatalf("reduced %+v, heard %+v, want %+v", r.Reduced, heard, want)
	}
	// A raised cap takes nothing.
	heard = nil
	capMC = Credits(50)
	if r := a.ok(Command{Type: CmdSettings, Settings: &Settings{Account: "acct1", SpendCapMC: &capMC}}); len(r.Reduced) != 0 || heard != nil {
		t.Fatalf("raised cap reduced %+v", r.Reduced)
	}
	cleanAudit(t, a.s)
}

func TestRefusalsChangeNothing(t *testing.T) {
	a := &applier{t: t, s: newState(t)}
	newAccount(a, "acct1", Credits(1))
	before := a.s.Meta()
	for _, c := range []Command{
		{Type: "nope"},
		{Type: CmdCreateAccount, CreateAccount: &CreateAccount{Account: "acct1", Plan: PlanFree}},
		{Type: CmdCreateAccount, CreateAccount: &CreateAccount{Account: "x", Plan: "gold"}},
		{Type: CmdGrant, Grant: &Grant{Account: "ghost", Bucket: BucketSignup, Amount: 1}},
		{Type: CmdGrant, Grant: &Grant{Account: "acct1", Bucket: BucketPack, Amount: 1}},
		{Type: CmdHold, Hold: &HoldRequest{Account: "acct1", Region: "", Want: 1}},
		{Type: CmdSettle, Settle: &Settle{Region: "", Charges: []Charge{{Account: "acct1", Receipt: "a", Amount: 1}}}},
		{Type: CmdExpirePass, ExpirePass: &ExpirePass{Account: "acct1"}},
		{Type: CmdAddKey, AddKey: &Key{ID: "k", Account: "acct1", Hash: "short", Role: RoleUser}},
	} {
		if r := a.do(c); r.Error == "" {
			t.Errorf("%s accepted: %+v", c.Type, r)
		}
	}
	after := a.s.Meta()
	if after.Entries != before.Entries || after.LastHash != before.LastHash {
		t.Fatalf("refusals wrote entries: %+v -> %+v", before, after)
	}
}

func TestMonthResetPassAndTopup(t *testing.T) {
	a := &applier{t: t, s: newState(t)}
	newAccount(a, "acct1", Credits(5))
	a.ok(Command{Type: CmdGrant, Grant: &Grant{Account: "acct1", Bucket: BucketPass, Amount: Credits(50), PassExpires: t0.Add(7 * 24 * time.Hour)}})
	credits := map[string]MC{PlanFree: Credits(20), PlanSupporter: Credits(100)}
	a.ok(Command{ID: "reset-2026-12", Type: CmdResetMonth, Time: t0.AddDate(0, 0, 9), ResetMonth: &ResetMonth{Month: "2026-12", Credits: credits}})
	// A second reset of a started month is accepted and changes nothing
	// (reset_month is idempotent).
	if r := a.do(Command{Type: CmdResetMonth, ResetMonth: &ResetMonth{Month: "2026-12", Credits: credits}}); r.Error != "" {
		t.Fatalf("second reset of a month: %+v", r)
	}
	if m := a.bal(BucketAccount("acct1", BucketMonthly)); m != Credits(20) {
		t.Fatalf("monthly %s", m)
	}
	// The pass lapsed on day 7: a hold skips it, an expire command clears it.
	late := t0.AddDate(0, 0, 10)
	r := a.ok(Command{Type: CmdHold, Time: late, Hold: &HoldRequest{Account: "acct1", Region: "eu", Want: Credits(100)}})
	if r.Granted != Credits(25) {
		t.Fatalf("hold after the pass lapsed: %+v", r)
	}
	a.ok(Command{Type: CmdExpirePass, Time: late, ExpirePass: &ExpirePass{Account: "acct1"}})
	if p := a.bal(BucketAccount("acct1", BucketPass)); p != 0 {
		t.Fatalf("pass left %s", p)
	}
	top := Command{Type: CmdTopup, Topup: &Topup{Account: "acct1", PaymentID: "pi_1", USD: 10, Credits: Credits(1000)}}
	a.ok(top)
	top.ID = "" // a different command carrying the same payment
	a.ok(top)
	if p := a.bal(BucketAccount("acct1", BucketPack)); p != Credits(1000) {
		t.Fatalf("pack %s: a payment credited twice?", p)
	}
	acct, _ := a.s.Account("acct1")
	if acct.Plan != PlanSupporter {
		t.Fatalf("plan %s after a paid top-up", acct.Plan)
	}
}

func TestRechargeDue(t *testing.T) {
	a := &applier{t: t, s: newState(t)}
	newAccount(a, "acct1", Credits(10))
	a.ok(Command{Type: CmdSettings, Settings: &Settings{Account: "acct1", Recharge: &Recharge{On: true, UnderCredits: Credits(5), PackUSD: 10, MaxPerMonth: 1}}})
	a.ok(Command{Type: CmdHold, Hold: &HoldRequest{Account: "acct1", Region: "eu", Want: Credits(8)}})
	a.ok(Command{Type: CmdSettle, Settle: &Settle{Region: "eu", Charges: []Charge{{Account: "acct1", Receipt: "r1", Amount: Credits(6)}}}})
	acct, _ := a.s.Account("acct1")
	if !acct.RechargeDue {
		t.Fatal("balance 4 < 5 but no recharge due")
	}
	a.ok(Command{Type: CmdTopup, Topup: &Topup{Account: "acct1", PaymentID: "pi_r", USD: 10, Credits: Credits(1000), Recharge: true}})
	acct, _ = a.s.Account("acct1")
	if acct.RechargeDue || acct.RechargesThisMonth != 1 {
		t.Fatalf("after recharge: %+v", acct)
	}
}

func TestAuditDetectsTampering(t *testing.T) {
	a := &applier{t: t, s: newState(t)}
	newAccount(a, "acct1", Credits(10))
	a.ok(Command{Type: CmdHold, Hold: &HoldRequest{Account: "acct1", Region: "eu", Want: Credits(5)}})
	// Flip one byte of one journal entry's amount.
	raw, err := a.s.st.Get(keyJournal(2))
	if err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Replace(raw, []byte(`"amount_mc":5000`), []byte(`"amount_mc":4000`), 1)
	if bytes.Equal(tampered, raw) {
		t.Fatalf("entry 2 is not what the test expects: %s", raw)
	}
	a.s.st.Set(keyJournal(2), tampered, store.Sync)
	rep, err := a.s.Audit()
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || !strings.Contains(strings.Join(rep.Violations, "\n"), "content hashes to") {
		t.Fatalf("tampering not found: %+v", rep)
	}
}

func TestSnapshotRestoreAndReplay(t *testing.T) {
	a := &applier{t: t, s: newState(t)}
	newAccount(a, "acct1", Credits(10))
	a.ok(Command{Type: CmdHold, Hold: &HoldRequest{Account: "acct1", Region: "eu", Want: Credits(5)}})
	f := (*fsm)(a.s)
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	// Later writes are not in the snapshot.
	a.ok(Command{Type: CmdSettle, Settle: &Settle{Region: "eu", Charges: []Charge{{Account: "acct1", Receipt: "r", Amount: 1}}}})

	b := newState(t)
	if err := (*fsm)(b).Restore(sink.reader()); err != nil {
		t.Fatal(err)
	}
	ra, _ := (&applier{t: t, s: b}).s.Audit()
	if !ra.OK() || ra.Entries != 2 {
		t.Fatalf("restored: %+v", ra)
	}
	// Replaying an index at or below the applied one changes nothing.
	before := b.Meta()
	res, err := b.Apply(&Command{ID: "cmd-2", Type: CmdGrant, Grant: &Grant{Account: "acct1", Bucket: BucketSignup, Amount: 1}}, 2)
	if err != nil || !res.Duplicate || b.Meta() != before {
		t.Fatalf("replay: %+v %v", res, err)
	}
	// The raft face decodes commands and refuses garbage deterministically.
	out := (*fsm)(b).Apply(&raft.Log{Index: 10, Type: raft.LogCommand, Data: []byte("{")})
	if r, ok := out.(*Result); !ok || r.Error != ErrCodeInvalid {
		t.Fatalf("garbage: %#v", out)
	}
	cmd, _ := json.Marshal(Command{ID: "cmd-4", Type: CmdSettle, Time: t0, Settle: &Settle{Region: "eu", Charges: []Charge{{Account: "acct1", Receipt: "r", Amount: 1}}}})
	out = (*fsm)(b).Apply(&raft.Log{Index: 11, Type: raft.LogCommand, Data: cmd})
	if r := out.(*Result); r.Settled != 1 {
		t.Fatalf("settle through fsm: %+v", r)
	}
	ra, _ = b.Audit()
	rb, _ := a.s.Audit()
	if ra.StateHash != rb.StateHash {
		t.Fatalf("same history, different state hashes")
	}
}

type memSink struct{ bytes.Buffer }

func (m *memSink) ID() string    { return "mem" }
func (m *memSink) Cancel() error { return nil }
func (m *memSink) Close() error  { return nil }
func (m *memSink) reader() *readCloser {
	return &readCloser{bytes.NewReader(m.Bytes())}
}

type readCloser struct{ *bytes.Reader }

func (r *readCloser) Close() error { return nil }

func TestMC(t *testing.T) {
	for _, c := range []struct {
		in   string
		want MC
	}{{"12.345", 12345}, {"0.5", 500}, {"3", 3000}, {"-1.001", -1001}} {
		got, err := ParseMC(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseMC(%q) = %v, %v", c.in, got, err)
		}
	}
	if s := MC(12345).String(); s != "12.345" {
		t.Errorf("String = %s", s)
	}
	if s := MC(-5).String(); s != "-0.005" {
		t.Errorf("String = %s", s)
	}
	if _, err := ParseMC("1.2345"); err == nil {
		t.Error("four decimals accepted")
	}
}

func TestSettleEpochMarkSkipsRepeats(t *testing.T) {
	a := &applier{t: t, s: newState(t)}
	newAccount(a, "acct1", Credits(10))
	a.ok(Command{Type: CmdHold, Hold: &HoldRequest{Account: "acct1", Region: "eu", Want: Credits(5)}})
	ch := func(seq uint64) Charge {
		return Charge{Account: "acct1", Receipt: fmt.Sprintf("r%d", seq), Amount: 100, Seq: seq}
	}
	r := a.ok(Command{Type: CmdSettle, Settle: &Settle{Region: "eu", Epoch: "e1", Charges: []Charge{ch(1), ch(2), ch(3)}}})
	if r.Settled != 3 {
		t.Fatalf("%+v", r)
	}
	// A new batch that overlaps the last (its reply was lost, more charges
	// came): only the new ones are charged.
	r = a.ok(Command{Type: CmdSettle, Settle: &Settle{Region: "eu", Epoch: "e1", Charges: []Charge{ch(2), ch(3), ch(4)}}})
	if r.Settled != 1 || r.Duplicates != 2 {
		t.Fatalf("overlap: %+v", r)
	}
	// Another journal (a new epoch) starts its own sequence.
	other := Charge{Account: "acct1", Receipt: "x1", Amount: 100, Seq: 1}
	r = a.ok(Command{Type: CmdSettle, Settle: &Settle{Region: "eu", Epoch: "e2", Charges: []Charge{other}}})
	if r.Settled != 1 {
		t.Fatalf("new epoch: %+v", r)
	}
	if rev := a.bal(SysRevenue); rev != 500 {
		t.Fatalf("revenue %s", rev)
	}
}

// A charge the ledger cannot take is parked: the rest of its batch settles,
// and with an epoch the mark passes it, so a resend is a repeat.
func TestSettleParksWhatItCannotCharge(t *testing.T) {
	a := &applier{t: t, s: newState(t)}
	newAccount(a, "acct1", Credits(10))
	a.ok(Command{Type: CmdHold, Hold: &HoldRequest{Account: "acct1", Region: "eu", Want: Credits(5)}})
	charges := []Charge{
		{Account: "acct1", Receipt: "a", Amount: 100, Seq: 1},
		{Account: "ghost", Receipt: "b", Amount: 200, Seq: 2},
		{Account: "acct1", Receipt: "", Amount: 300, Seq: 3},
		{Account: "acct1", Receipt: "d", Amount: -1, Seq: 4},
		{Account: "acct1", Receipt: "e", Amount: 400, Seq: 5},
	}
	r := a.ok(Command{Type: CmdSettle, Settle: &Settle{Region: "eu", Epoch: "E", Charges: charges}})
	if r.Settled != 2 || len(r.Parked) != 3 || r.Holds["acct1"] != Credits(5)-500 {
		t.Fatalf("settle: %+v", r)
	}
	for i, want := range []struct {
		seq  uint64
		code string
	}{{2, ErrCodeNoAccount}, {3, ErrCodeInvalid}, {4, ErrCodeInvalid}} {
		if p := r.Parked[i]; p.Seq != want.seq || p.Error != want.code || p.Message == "" {
			t.Errorf("parked %d: %+v", i, p)
		}
	}
	if rev := a.bal(SysRevenue); rev != 500 {
		t.Fatalf("revenue %s", rev)
	}
	r = a.ok(Command{Type: CmdSettle, Settle: &Settle{Region: "eu", Epoch: "E", Charges: charges}})
	if r.Settled != 0 || r.Duplicates != 5 || len(r.Parked) != 0 {
		t.Fatalf("resend: %+v", r)
	}
}

// The month turns inside Apply, as a function of the commands' own time:
// spend before the ledger's first month start stays counted against the
// cap; the first command of a later month (any command: a settle, a
// refused one) lapses and grants the monthly credit even if maintenance
// never ran; replaying the log gives the same state.
func TestMonthTurnsWithTheLedgersTime(t *testing.T) {
	var log []Command
	a := &applier{t: t, s: newState(t)}
	do := func(c Command) *Result {
		t.Helper()
		if c.ID == "" {
			c.ID = fmt.Sprintf("cmd-%d", a.index+1)
		}
		if c.Time.IsZero() {
			c.Time = t0
		}
		log = append(log, c)
		return a.do(c)
	}
	do(Command{Type: CmdSetPlans, SetPlans: &Plans{Monthly: map[string]MC{PlanFree: Credits(20)}}})
	if m := a.s.Meta().Month; m != "2026-11" {
		t.Fatalf("a new ledger takes the first command's month, has %q", m)
	}
	do(Command{Type: CmdCreateAccount, CreateAccount: &CreateAccount{Account: "acct1", Plan: PlanFree}})
	do(Command{Type: CmdGrant, Grant: &Grant{Account: "acct1", Bucket: BucketSignup, Amount: Credits(100)}})
	capMC := Credits(10)
	do(Command{Type: CmdSettings, Settings: &Settings{Account: "acct1", SpendCapMC: &capMC}})
	do(Command{Type: CmdHold, Hold: &HoldRequest{Account: "acct1", Region: "eu", Want: Credits(6)}})
	do(Command{Type: CmdSettle, Settle: &Settle{Region: "eu", Epoch: "E", Charges: []Charge{{Account: "acct1", Receipt: "r1", Amount: Credits(6), Seq: 1}}}})
	// Maintenance of old sends reset_month for the month the ledger is in:
	// it must not forget the spend.
	if r := do(Command{ID: "reset_month/2026-11", Type: CmdResetMonth, Time: t0.Add(time.Minute),
		ResetMonth: &ResetMonth{Month: "2026-11", Credits: map[string]MC{PlanFree: Credits(20)}}}); r.Error != "" {
		t.Fatalf("reset of the current month: %+v", r)
	}
	if r := do(Command{Type: CmdHold, Hold: &HoldRequest{Account: "acct1", Region: "eu", Want: Credits(10)}}); r.Granted != Credits(4) || r.Reason != ReasonSpendCap {
		t.Fatalf("spend before the first month start was forgotten by the cap: %+v", r)
	}
	if m := a.bal(BucketAccount("acct1", BucketMonthly)); m != 0 {
		t.Fatalf("monthly credit %s granted without a month start", m)
	}
	// December: a settle is the first command of the month.
	dec := time.Date(2026, 12, 1, 0, 0, 3, 0, time.UTC)
	r := do(Command{Type: CmdSettle, Time: dec, Settle: &Settle{Region: "eu", Epoch: "E", Charges: []Charge{{Account: "acct1", Receipt: "r2", Amount: Credits(1), Seq: 2}}}})
	if r.Settled != 1 {
		t.Fatalf("settle: %+v", r)
	}
	acct, _ := a.s.Account("acct1")
	if a.s.Meta().Month != "2026-12" || acct.Month != "2026-12" || acct.MonthSpent != Credits(1) {
		t.Fatalf("after the first December command: meta %q, account %+v", a.s.Meta().Month, acct)
	}
	// The hold took the monthly credit first: 20 granted, 1 spent from the hold.
	if m := a.bal(BucketAccount("acct1", BucketMonthly)); m != Credits(20) {
		t.Fatalf("monthly %s after the month turned", m)
	}
	// Later December commands turn nothing; January turns again, also
	// through a refused command.
	do(Command{Type: CmdGrant, Time: dec.Add(time.Hour), Grant: &Grant{Account: "acct1", Bucket: BucketSignup, Amount: 1}})
	jan := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	if r := do(Command{Type: CmdGrant, Time: jan, Grant: &Grant{Account: "ghost", Bucket: BucketSignup, Amount: 1}}); r.Error == "" {
		t.Fatal("a grant to no account was accepted")
	}
	if m := a.s.Meta().Month; m != "2027-01" {
		t.Fatalf("a refused January command left the month at %s", m)
	}
	if m := a.bal(BucketAccount("acct1", BucketMonthly)); m != Credits(20) {
		t.Fatalf("monthly %s in January", m)
	}
	if e := a.bal(SysExpired); e != Credits(20) {
		t.Fatalf("expired %s: December's unspent monthly credit should have lapsed", e)
	}
	// The same log on a fresh replica gives the same state.
	b := &applier{t: t, s: newState(t)}
	for _, c := range log {
		b.do(c)
	}
	ra, _ := a.s.Audit()
	rb, _ := b.s.Audit()
	if ra.StateHash != rb.StateHash || a.s.Meta() != b.s.Meta() {
		t.Fatalf("replay differs: %s vs %s", ra.StateHash, rb.StateHash)
	}
}

func cleanAudit(t *testing.T, s *State) {
	t.Helper()
	rep, err := s.Audit()
	if err != nil || len(rep.Violations) > 0 {
		t.Fatalf("audit: %v %v", err, rep.Violations)
	}
}

// Issue 12: a key's name is stored; the plan's key limit is enforced in
// Raft order (two gates creating keys at once cannot both pass it); keys
// and e-mail addresses are found through indexes, also on a state written
// before the indexes existed.
func TestKeysNamedLimitedIndexed(t *testing.T) {
	a := &applier{t: t, s: newState(t)}
	a.ok(Command{Type: CmdCreateAccount, CreateAccount: &CreateAccount{Account: "ann", Email: "Ann@Example.com", Plan: PlanFree}})
	a.ok(Command{Type: CmdCreateAccount, CreateAccount: &CreateAccount{Account: "bob", Email: "bob@example.com", Plan: PlanFree}})
	key := func(id, acct string, limit int) Command {
		h := sha256.Sum256([]byte(id))
		return Command{Type: CmdAddKey, AddKey: &Key{ID: id, Account: acct, Hash: hex.EncodeToString(h[:]), Role: RoleUser, Kind: "permanent", Name: "n-" + id, MaxActive: limit}}
	}
	a.ok(key("k1", "ann", 2))
	a.ok(key("k2", "ann", 2))
	a.ok(key("b1", "bob", 2))
	if r := a.do(key("k3", "ann", 2)); r.Error != ErrCodeKeyLimit {
		t.Fatalf("third key past a limit of 2: %+v", r)
	}
	a.ok(Command{Type: CmdRevokeKey, RevokeKey: &RevokeKey{KeyID: "k1"}})
	a.ok(key("k3", "ann", 2))
	// An expired key does not count either.
	exp := key("k4", "bob", 0)
	exp.AddKey.ExpiresAt = t0.Add(time.Hour)
	a.ok(exp)
	if r := a.do(Command{Type: CmdAddKey, Time: t0.Add(2 * time.Hour), AddKey: key("b2", "bob", 2).AddKey}); r.Error != "" {
		t.Fatalf("bob's second active key: %+v", r)
	}

	check := func(s *State) {
		t.Helper()
		keys, err := s.AccountKeys("ann")
		if err != nil || len(keys) != 3 || keys[0].ID != "k1" || keys[0].Name != "n-k1" || keys[2].ID != "k3" || keys[2].MaxActive != 0 {
			t.Fatalf("ann's keys: %v %+v", err, keys)
		}
		accts, err := s.AccountsByEmail("ann@example.COM")
		if err != nil || len(accts) != 1 || accts[0].ID != "ann" {
			t.Fatalf("by e-mail: %v %+v", err, accts)
		}
		if accts, _ := s.AccountsByEmail("nobody@example.com"); len(accts) != 0 {
			t.Fatalf("nobody: %+v", accts)
		}
	}
	check(a.s)

	// A state written before the indexes: they are built when it opens.
	st := a.s.st
	for _, p := range [][]byte{[]byte(store.PrefixLedger + "akey/"), []byte(store.PrefixLedger + "email/")} {
		if err := st.DeletePrefix(p, store.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Delete(keyIndexed, store.Sync); err != nil {
		t.Fatal(err)
	}
	if keys, _ := a.s.AccountKeys("ann"); len(keys) != 0 {
		t.Fatalf("the indexes were not removed: %d keys", len(keys))
	}
	s2, err := OpenState(st)
	if err != nil {
		t.Fatal(err)
	}
	check(s2)
}

func TestSetCustomer(t *testing.T) {
	a := &applier{t: t, s: newState(t)}
	newAccount(a, "ann", 0)
	if r := a.do(Command{Type: CmdSetCustomer, SetCustomer: &SetCustomer{Account: "ann"}}); r.Error != ErrCodeInvalid {
		t.Fatalf("no customer id: %+v", r)
	}
	if r := a.do(Command{Type: CmdSetCustomer, SetCustomer: &SetCustomer{Account: "ghost", CustomerID: "cus_1"}}); r.Error != ErrCodeNoAccount {
		t.Fatalf("no account: %+v", r)
	}
	a.ok(Command{Type: CmdSetCustomer, SetCustomer: &SetCustomer{Account: "ann", CustomerID: "cus_1"}})
	if acct, _ := a.s.Account("ann"); acct.ProviderCustomerID != "cus_1" {
		t.Fatalf("customer %q", acct.ProviderCustomerID)
	}
	// A top-up that names the customer who paid records it with the credit.
	a.ok(Command{Type: CmdTopup, Topup: &Topup{Account: "ann", PaymentID: "pi_1", USD: 5, Credits: Credits(1000), CustomerID: "cus_2"}})
	if acct, _ := a.s.Account("ann"); acct.ProviderCustomerID != "cus_2" {
		t.Fatalf("customer after top-up %q", acct.ProviderCustomerID)
	}
}

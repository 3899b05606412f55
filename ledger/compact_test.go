package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/store"
)

// replicated counts the keys a snapshot carries and the bytes it takes.
func replicated(t testing.TB, s *State) (keys int, snapBytes int) {
	t.Helper()
	if err := s.st.Scan(prefixState, nil, func(k, _ []byte) (bool, error) {
		if bytes.HasPrefix(k, prefixLocal) {
			return false, nil
		}
		keys++
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	snap, err := (*fsm)(s).Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	return keys, sink.Len()
}

// settleRun applies n settles of per charges each from one holds client
// (epoch and sequences), as a region does, starting at sequence *seq.
func settleRun(a *applier, region string, n, per int, seq *uint64, at time.Time) {
	for range n {
		var charges []Charge
		for range per {
			*seq++
			charges = append(charges, Charge{Account: "acct1", Receipt: fmt.Sprintf("%s-%d", region, *seq), Amount: 1, Seq: *seq})
		}
		a.ok(Command{ID: fmt.Sprintf("settle/%s/E/%d", region, *seq), Type: CmdSettle, Time: at,
			Settle: &Settle{Region: region, Epoch: "E", Charges: charges}})
	}
}

// The replicated state and its snapshot stay the same size however many
// charges are settled: no key per charge, results dropped by compact, the
// journal outside the snapshot.
func TestReplicatedStateIsFlatInCharges(t *testing.T) {
	a := &applier{t: t, s: newState(t)}
	newAccount(a, "acct1", Credits(1_000_000))
	a.ok(Command{Type: CmdHold, Hold: &HoldRequest{Account: "acct1", Region: "eu", Want: Credits(1_000_000)}})
	var seq uint64
	sizes := map[int][2]int{}
	for _, total := range []int{1, 10, 40} {
		settleRun(a, "eu", total-int(seq/100), 100, &seq, t0)
		r := a.ok(Command{ID: fmt.Sprintf("compact-%d", total), Type: CmdCompact, Time: t0.Add(8 * 24 * time.Hour),
			Compact: &Compact{Before: t0.Add(8*24*time.Hour + time.Hour)}})
		if total == 40 && r.Compacted == 0 {
			t.Fatalf("compact dropped nothing: %+v", r)
		}
		k, b := replicated(t, a.s)
		sizes[total] = [2]int{k, b}
	}
	// Only the last compact's own result stays (and its count's digits).
	if k1, k40 := sizes[1][0], sizes[40][0]; k40 != k1 {
		t.Fatalf("replicated keys grow with charges: %v", sizes)
	}
	if b1, b40 := sizes[1][1], sizes[40][1]; b40-b1 > 16 {
		t.Fatalf("snapshot bytes grow with charges: %v", sizes)
	}
	t.Logf("replicated keys and snapshot bytes after 100, 1,000 and 4,000 charges: %v", sizes)
	if rep, _ := a.s.Audit(); !rep.OK() || rep.Entries != 2+4000 {
		t.Fatalf("audit: %+v", rep)
	}
	// A settle retried after its result was dropped still charges nothing
	// twice: the mark knows its charges.
	seq -= 100
	before := a.bal(SysRevenue)
	r := a.ok(Command{ID: "settle/eu/E/retry", Type: CmdSettle, Time: t0.Add(9 * 24 * time.Hour), Settle: &Settle{Region: "eu", Epoch: "E",
		Charges: []Charge{{Account: "acct1", Receipt: "eu-3950", Amount: 1, Seq: 3950}}}})
	if r.Duplicates != 1 || a.bal(SysRevenue) != before {
		t.Fatalf("retried settle after compact: %+v", r)
	}
}

// A replica restored from a snapshot of a longer history resumes its
// journal from an anchor: the audit verifies from there, Backfill takes the
// missing entries only if they chain to the anchor and give its balances,
// and then the audit runs from the first entry again.
func TestRestoreAnchorsAndBackfill(t *testing.T) {
	src := &applier{t: t, s: newState(t)}
	history(t, src, "acct1", 30)
	snap, err := (*fsm)(src.s).Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	dst := newState(t)
	if err := (*fsm)(dst).Restore(sink.reader()); err != nil {
		t.Fatal(err)
	}
	an, err := dst.Anchor()
	if err != nil || an == nil || an.Entries != src.s.Meta().Entries {
		t.Fatalf("anchor %+v %v", an, err)
	}
	// The group moves on; the restored replica applies the same commands.
	b := &applier{t: t, s: dst, index: src.index}
	for i := range 3 {
		c := Command{ID: fmt.Sprintf("more-%d", i), Type: CmdSettle, Time: t0, Settle: &Settle{Region: "eu", Charges: []Charge{{Account: "acct1", Receipt: fmt.Sprintf("more-%d", i), Amount: 5}}}}
		src.ok(c)
		b.ok(c)
	}
	ra, _ := dst.Audit()
	rs, _ := src.s.Audit()
	if !ra.OK() || ra.AnchoredAt != an.Entries || ra.StateHash != rs.StateHash {
		t.Fatalf("anchored audit %+v, source %+v", ra, rs)
	}
	var entries []*Entry
	if err := src.s.Journal(0, func(e *Entry) (bool, error) {
		entries = append(entries, e)
		return e.Index < an.Entries, nil
	}); err != nil {
		t.Fatal(err)
	}
	bad := make([]*Entry, len(entries))
	for i, e := range entries {
		c := *e
		bad[i] = &c
	}
	bad[3].Amount++
	if err := dst.Backfill(entryList(bad)); !errors.Is(err, ErrBackfill) {
		t.Fatalf("tampered backfill: %v", err)
	}
	if err := dst.Backfill(entryList(entries[:len(entries)-1])); !errors.Is(err, ErrBackfill) {
		t.Fatalf("short backfill: %v", err)
	}
	if ra, _ := dst.Audit(); !ra.OK() || ra.AnchoredAt == 0 {
		t.Fatalf("after refused backfills: %+v", ra)
	}
	if err := dst.Backfill(entryList(entries)); err != nil {
		t.Fatal(err)
	}
	ra, _ = dst.Audit()
	if !ra.OK() || ra.AnchoredAt != 0 || ra.StateHash != rs.StateHash || ra.Entries != rs.Entries {
		t.Fatalf("after backfill %+v", ra)
	}
}

// A data directory from before the journal left the replicated state
// opens with its journal moved, and audits the same.
func TestOldJournalMovesAtOpen(t *testing.T) {
	a := &applier{t: t, s: newState(t)}
	history(t, a, "acct1", 10)
	want, _ := a.s.Audit()
	// Put the journal back where earlier versions kept it.
	st := a.s.st
	var moved int
	if err := st.Scan(prefixJournal(), nil, func(k, v []byte) (bool, error) {
		b := st.NewBatch()
		b.Set(append(append([]byte{}, prefixOldJournal...), k[len(k)-8:]...), v)
		b.Delete(k)
		moved++
		return true, b.Commit(store.Sync)
	}); err != nil {
		t.Fatal(err)
	}
	s, err := OpenState(st)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := s.Audit()
	if moved == 0 || !got.OK() || got.StateHash != want.StateHash || got.Entries != want.Entries {
		t.Fatalf("after the move: %+v, want %+v", got, want)
	}
}

func entryList(es []*Entry) func() (*Entry, error) {
	return func() (*Entry, error) {
		if len(es) == 0 {
			return nil, io.EOF
		}
		e := es[0]
		es = es[1:]
		return e, nil
	}
}

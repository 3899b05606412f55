package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/trawlhq/trawl/internal/store"
)

// crashAfter fails every write operation from the n-th on (counting from
// 0): what a process sees of its disk once it has been killed. Reads still
// work, so the failing restore returns an error instead of hanging.
type crashAfter struct {
	n     int64
	armed atomic.Bool // counting starts when the restore does
	count atomic.Int64
}

func (c *crashAfter) String() string { return fmt.Sprintf("crash after %d writes", c.n) }

func (c *crashAfter) MaybeError(op errorfs.Op) error {
	if !c.armed.Load() || op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
		return nil
	}
	if c.count.Add(1)-1 >= c.n {
		return errorfs.ErrInjected
	}
	return nil
}

// dump is every replicated key and value, for comparing whole states (the
// replica's own journal is not part of a snapshot).
func dump(t testing.TB, st *store.Store) string {
	t.Helper()
	var b bytes.Buffer
	if err := st.Scan(prefixState, nil, func(k, v []byte) (bool, error) {
		if bytes.HasPrefix(k, prefixLocal) {
			return false, nil
		}
		fmt.Fprintf(&b, "%q=%q\n", k, v)
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// history applies n settle commands of one charge each after an account and
// a hold, so a state has a journal, receipts and results to restore.
func history(t testing.TB, a *applier, acct string, n int) {
	t.Helper()
	newAccount(a, acct, Credits(1000))
	a.ok(Command{Type: CmdHold, Hold: &HoldRequest{Account: acct, Region: "eu", Want: Credits(500)}})
	for i := range n {
		a.ok(Command{Type: CmdSettle, Settle: &Settle{Region: "eu", Charges: []Charge{{Account: acct, Receipt: fmt.Sprintf("%s-r%d", acct, i), Amount: 10}}}})
	}
}

// A restore is crash-atomic: killed at any write of it (the disk keeps
// exactly what was synced, or everything written), the store reopens as the
// old state whole, as the new state whole, or marked half restored — and a
// half-restored state refuses to apply until restored again, which gives
// the new state exactly. Never the old meta over missing receipts, never
// a meta over part of a state.
func TestRestoreIsCrashAtomic(t *testing.T) {
	// The snapshot to restore: a state with a longer history.
	src := &applier{t: t, s: newState(t)}
	history(t, src, "acct1", 40)
	snap, err := (*fsm)(src.s).Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	want := dump(t, src.s.st)

	// The old state, on a crashable in-memory disk, synced.
	base := vfs.NewCrashableMem()
	{
		st, err := store.Open("state", &store.Options{FS: base, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		s, err := OpenState(st)
		if err != nil {
			t.Fatal(err)
		}
		history(t, &applier{t: t, s: s}, "acct0", 5)
		sn, err := (*fsm)(s).Snapshot() // syncs the state
		if err != nil {
			t.Fatal(err)
		}
		sn.Release()
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	old := func() string {
		st, err := store.Open("state", &store.Options{FS: base.CrashClone(vfs.CrashCloneCfg{}), Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		return dump(t, st)
	}()
	if old == want {
		t.Fatal("old and new states are the same: the test proves nothing")
	}

	rng := rand.New(rand.NewPCG(1, 13))
	sawOld, sawHalf, sawNew := 0, 0, 0
	for n := int64(0); ; n++ {
		disk := base.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rng})
		inj := &crashAfter{n: n}
		st, err := store.Open("state", &store.Options{FS: errorfs.Wrap(disk, inj), Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		s, err := OpenState(st)
		if err != nil {
			t.Fatal(err)
		}
		s.RestoreBatch = 16 // several NoSync batches between the syncs
		inj.armed.Store(true)
		rerr := restoreNoPanic((*fsm)(s), sink)
		done := rerr == nil && inj.count.Load() <= n
		// The process dies here. What a restart finds: exactly the synced
		// data, or the synced data and some of the rest.
		for _, pct := range []int{0, 50, 100} {
			after := disk.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rng})
			st2, err := store.Open("state", &store.Options{FS: after, Logger: quietLogger()})
			if err != nil {
				t.Fatalf("step %d (%d%% unsynced kept): reopen: %v", n, pct, err)
			}
			s2, err := OpenState(st2)
			if err != nil {
				t.Fatalf("step %d: open state: %v", n, err)
			}
			switch got := dump(t, st2); {
			case s2.HalfRestored():
				sawHalf++
				if _, err := s2.Apply(&Command{ID: "x", Type: CmdSetPeer, SetPeer: &Peer{ID: "p", RaftAddr: "a", APIAddr: "b"}}, s2.Meta().AppliedIndex+1); !errors.Is(err, ErrHalfRestored) {
					t.Fatalf("step %d: apply on a half-restored state: %v", n, err)
				}
				if err := (*fsm)(s2).Restore(sink.reader()); err != nil {
					t.Fatalf("step %d: restore again: %v", n, err)
				}
				if dump(t, st2) != want || s2.HalfRestored() {
					t.Fatalf("step %d: restored again, the state differs from the snapshot", n)
				}
			case got == old:
				sawOld++
			case got == want:
				sawNew++
			default:
				t.Fatalf("step %d (%d%% unsynced kept, restore err %v): neither the old state, the new one nor marked half restored:\n%s", n, pct, rerr, got)
			}
			if !s2.HalfRestored() {
				if rep, err := s2.Audit(); err != nil || !rep.OK() {
					t.Fatalf("step %d: audit after reopen: %v %+v", n, err, rep)
				}
			}
			st2.Close()
		}
		closeNoPanic(st)
		if done {
			break
		}
		if n > 10000 {
			t.Fatal("the restore never finished without a fault")
		}
	}
	if sawOld == 0 || sawHalf == 0 || sawNew == 0 {
		t.Fatalf("crash points not covered: old %d, half %d, new %d", sawOld, sawHalf, sawNew)
	}
	t.Logf("crash points: old state %d, half restored %d, new state %d", sawOld, sawHalf, sawNew)
}

// restoreNoPanic restores from sink; Pebble panics (through our logger's
// Fatalf) on some write errors, which a killed process would not see.
func restoreNoPanic(f *fsm, sink *memSink) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f.Restore(sink.reader())
}

func closeNoPanic(st *store.Store) {
	defer func() { _ = recover() }()
	st.Close()
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

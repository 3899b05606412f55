package raftpebble

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/syncbuf"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
)

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// openStore opens dir on fs and closes the store at the end of the test
// unless the test closed it itself.
func openStore(t testing.TB, fs vfs.FS, dir string) *Store {
	t.Helper()
	s, err := Open(dir, &Options{FS: fs, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("Open(%q): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func reopen(t testing.TB, s *Store, fs vfs.FS, dir string) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return openStore(t, fs, dir)
}

func mkLogs(lo, hi, term uint64) []*raft.Log {
	var logs []*raft.Log
	for i := lo; i <= hi; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: term, Data: fmt.Appendf(nil, "cmd-%d", i)})
		if i == math.MaxUint64 {
			break
		}
	}
	return logs
}

func bounds(t testing.TB, s *Store) (first, last uint64) {
	t.Helper()
	first, err := s.FirstIndex()
	if err != nil {
		t.Fatalf("FirstIndex: %v", err)
	}
	last, err = s.LastIndex()
	if err != nil {
		t.Fatalf("LastIndex: %v", err)
	}
	return first, last
}

// sameLog reports how got differs from want, or "" if it does not.
// AppendedAt is compared as an instant; nil and empty slices differ.
func sameLog(got, want *raft.Log) string {
	var d []string
	if got.Index != want.Index {
		d = append(d, fmt.Sprintf("Index %d != %d", got.Index, want.Index))
	}
	if got.Term != want.Term {
		d = append(d, fmt.Sprintf("Term %d != %d", got.Term, want.Term))
	}
	if got.Type != want.Type {
		d = append(d, fmt.Sprintf("Type %v != %v", got.Type, want.Type))
	}
	if !bytes.Equal(got.Data, want.Data) || (got.Data == nil) != (want.Data == nil) {
		d = append(d, fmt.Sprintf("Data %.40q != %.40q", got.Data, want.Data))
	}
	if !bytes.Equal(got.Extensions, want.Extensions) || (got.Extensions == nil) != (want.Extensions == nil) {
		d = append(d, fmt.Sprintf("Extensions %q != %q", got.Extensions, want.Extensions))
	}
	if !got.AppendedAt.Equal(want.AppendedAt) || got.AppendedAt.IsZero() != want.AppendedAt.IsZero() {
		d = append(d, fmt.Sprintf("AppendedAt %v != %v", got.AppendedAt, want.AppendedAt))
	}
	return strings.Join(d, "; ")
}

func TestEmptyStore(t *testing.T) {
	s := openStore(t, vfs.NewMem(), "raft")
	if first, last := bounds(t, s); first != 0 || last != 0 {
		t.Errorf("bounds = %d, %d; want 0, 0", first, last)
	}
	for _, i := range []uint64{0, 1, math.MaxUint64} {
		if err := s.GetLog(i, new(raft.Log)); !errors.Is(err, raft.ErrLogNotFound) {
			t.Errorf("GetLog(%d) = %v; want raft.ErrLogNotFound", i, err)
		}
	}
	// raft tells "fresh node" from "broken store" by this exact text.
	if v, err := s.Get([]byte("CurrentTerm")); err == nil || err.Error() != "not found" || v != nil {
		t.Errorf("Get(missing) = %q, %v; want nil, \"not found\"", v, err)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); err == nil || err.Error() != "not found" || v != 0 {
		t.Errorf("GetUint64(missing) = %d, %v; want 0, \"not found\"", v, err)
	}
	if err := s.DeleteRange(1, 10); err != nil {
		t.Errorf("DeleteRange on empty store: %v", err)
	}
	if err := s.StoreLogs(nil); err != nil {
		t.Errorf("StoreLogs(nil): %v", err)
	}

	// The same checks raft's NewRaft and BootstrapCluster make.
	snaps := raft.NewInmemSnapshotStore()
	if has, err := raft.HasExistingState(s, s, snaps); err != nil || has {
		t.Fatalf("HasExistingState(fresh) = %v, %v; want false, nil", has, err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		t.Fatal(err)
	}
	if has, err := raft.HasExistingState(s, s, snaps); err != nil || !has {
		t.Fatalf("HasExistingState(after term) = %v, %v; want true, nil", has, err)
	}
}

func TestLogRoundTrip(t *testing.T) {
	large := make([]byte, 8<<20)
	for i := range large {
		large[i] = byte(i * 7)
	}
	now := time.Now()
	tests := []struct {
		name string
		log  raft.Log
	}{
		{"minimal", raft.Log{Index: 1}},
		{"all fields", raft.Log{Index: 2, Term: 3, Type: raft.LogCommand, Data: []byte("hello"), Extensions: []byte{0, 1, 2}, AppendedAt: now}},
		{"empty not nil", raft.Log{Index: 3, Term: 1, Data: []byte{}, Extensions: []byte{}}},
		{"extensions only", raft.Log{Index: 4, Term: 1, Extensions: []byte("ext")}},
		{"configuration", raft.Log{Index: 5, Term: 9, Type: raft.LogConfiguration, Data: []byte{1, 2, 3}}},
		{"noop", raft.Log{Index: 6, Term: 9, Type: raft.LogNoop}},
		{"barrier", raft.Log{Index: 7, Term: 9, Type: raft.LogBarrier}},
		{"unknown type", raft.Log{Index: 8, Term: 9, Type: 200}},
		{"max term", raft.Log{Index: 9, Term: math.MaxUint64}},
		{"nanoseconds", raft.Log{Index: 10, Term: 1, AppendedAt: time.Unix(1700000000, 999999999)}},
		{"before 1970", raft.Log{Index: 11, Term: 1, AppendedAt: time.Date(1066, 10, 14, 9, 0, 0, 1, time.UTC)}},
		{"other zone", raft.Log{Index: 12, Term: 1, AppendedAt: time.Date(2030, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 5*3600))}},
		{"large data", raft.Log{Index: 13, Term: 2, Data: large, Extensions: large[:1000], AppendedAt: now}},
		{"max index", raft.Log{Index: math.MaxUint64, Term: 1, Data: []byte("last")}},
	}
	fs := vfs.NewMem()
	s := openStore(t, fs, "raft")
	for _, tt := range tests {
		if err := s.StoreLog(&tt.log); err != nil {
			t.Fatalf("%s: StoreLog: %v", tt.name, err)
		}
	}
	check := func(s *Store) {
		for _, tt := range tests {
			// Start from a dirty destination: GetLog must replace every field.
			got := raft.Log{Term: 77, Data: []byte("stale"), Extensions: []byte("stale"), AppendedAt: now}
			if err := s.GetLog(tt.log.Index, &got); err != nil {
				t.Errorf("%s: GetLog: %v", tt.name, err)
				continue
			}
			if d := sameLog(&got, &tt.log); d != "" {
				t.Errorf("%s: %s", tt.name, d)
			}
		}
	}
	check(s)
	check(reopen(t, s, fs, "raft"))
}

func TestGetLogDoesNotAlias(t *testing.T) {
	s := openStore(t, vfs.NewMem(), "raft")
	in := &raft.Log{Index: 1, Term: 1, Data: []byte("abc"), Extensions: []byte("xyz")}
	if err := s.StoreLog(in); err != nil {
		t.Fatal(err)
	}
	in.Data[0], in.Extensions[0] = '!', '!'

	var a, b raft.Log
	if err := s.GetLog(1, &a); err != nil {
		t.Fatal(err)
	}
	// Data and Extensions share one allocation; appending to Data must not
	// overwrite Extensions.
	a.Data = append(a.Data, "def"...)
	if string(a.Extensions) != "xyz" {
		t.Errorf("append to Data changed Extensions to %q", a.Extensions)
	}
	a.Data[0] = '?'
	if err := s.GetLog(1, &b); err != nil {
		t.Fatal(err)
	}
	if string(b.Data) != "abc" || string(b.Extensions) != "xyz" {
		t.Errorf("stored entry changed by caller: Data %q Extensions %q", b.Data, b.Extensions)
	}
}

// op is one step of a log-bounds scenario.
type op struct {
	store    [2]uint64 // store [lo, hi] with term
	term     uint64
	del      [2]uint64 // delete [min, max] when isDel
	isDel    bool
	logs     []*raft.Log // stored as given, when non-nil
	singular bool        // use StoreLog for each of store's entries
}

func store(lo, hi uint64) op           { return op{store: [2]uint64{lo, hi}, term: 1} }
func storeTerm(lo, hi, term uint64) op { return op{store: [2]uint64{lo, hi}, term: term} }
func del(lo, hi uint64) op             { return op{del: [2]uint64{lo, hi}, isDel: true} }

func TestLogBounds(t *testing.T) {
	tests := []struct {
		name        string
		ops         []op
		first, last uint64
	}{
		{"append", []op{store(1, 10)}, 1, 10},
		{"append twice", []op{store(1, 10), store(11, 20)}, 1, 20},
		{"append one by one", []op{{store: [2]uint64{1, 5}, term: 1, singular: true}}, 1, 5},
		{"compaction from front", []op{store(1, 10), del(1, 5)}, 6, 10},
		{"compaction twice", []op{store(1, 10), del(1, 5), del(6, 8)}, 9, 10},
		{"compaction from below first", []op{store(5, 10), del(0, 7)}, 8, 10},
		{"conflict truncation from back", []op{store(1, 10), del(8, 10)}, 1, 7},
		{"truncate then re-append with new term", []op{store(1, 10), del(8, 10), storeTerm(8, 12, 2)}, 1, 12},
		{"truncate past last", []op{store(1, 10), del(8, math.MaxUint64)}, 1, 7},
		{"delete all exactly", []op{store(1, 10), del(1, 10)}, 0, 0},
		{"delete all wide", []op{store(1, 10), del(0, math.MaxUint64)}, 0, 0},
		{"delete all then append", []op{store(1, 10), del(1, 10), store(11, 12)}, 11, 12},
		{"delete middle leaves gap", []op{store(1, 10), del(4, 6)}, 1, 10},
		{"gap then compact into gap", []op{store(1, 3), store(10, 12), del(1, 5)}, 10, 12},
		{"gap then truncate into gap", []op{store(1, 3), store(10, 12), del(8, 12)}, 1, 3},
		{"delete outside above", []op{store(1, 10), del(20, 30)}, 1, 10},
		{"delete outside below", []op{store(5, 10), del(1, 4)}, 5, 10},
		{"inverted range is no-op", []op{store(1, 10), del(7, 3)}, 1, 10},
		{"overwrite same index", []op{store(1, 10), storeTerm(5, 5, 3)}, 1, 10},
		{"store below first", []op{store(5, 10), store(2, 3)}, 2, 10},
		{"index zero", []op{store(0, 0)}, 0, 0},
		{"index zero then one", []op{store(0, 0), store(1, 1)}, 0, 1},
		{"index zero deleted from front", []op{store(0, 3), del(0, 1)}, 2, 3},
		{"max index", []op{store(math.MaxUint64-1, math.MaxUint64)}, math.MaxUint64 - 1, math.MaxUint64},
		{"max index deleted", []op{store(math.MaxUint64-2, math.MaxUint64), del(math.MaxUint64, math.MaxUint64)}, math.MaxUint64 - 2, math.MaxUint64 - 1},
		{"large compaction", []op{store(1, 1000), del(1, 900)}, 901, 1000},
		{"large truncation", []op{store(1, 1000), del(100, 1000)}, 1, 99},
		{"large delete all", []op{store(1, 1000), del(0, math.MaxUint64)}, 0, 0},
		{"unsorted batch", []op{{logs: []*raft.Log{{Index: 7, Term: 1}, {Index: 3, Term: 1}, {Index: 5, Term: 1}}}}, 3, 7},
	}
	// DeleteRange removes up to pointDeleteMax entries with point deletions
	// and more with a range tombstone; run every case both ways.
	deletes := []struct {
		name string
		max  int
	}{{"point", math.MaxInt}, {"tombstone", 0}}
	for _, tt := range tests {
		for _, d := range deletes {
			t.Run(tt.name+"/"+d.name, func(t *testing.T) {
				fs := vfs.NewMem()
				s := openStore(t, fs, "raft")
				s.pointDeleteMax = d.max
				model := map[uint64]uint64{} // index -> term
				for _, o := range tt.ops {
					switch {
					case o.isDel:
						if err := s.DeleteRange(o.del[0], o.del[1]); err != nil {
							t.Fatalf("DeleteRange(%d, %d): %v", o.del[0], o.del[1], err)
						}
						for i := range model {
							if i >= o.del[0] && i <= o.del[1] {
								delete(model, i)
							}
						}
					default:
						logs := o.logs
						if logs == nil {
							logs = mkLogs(o.store[0], o.store[1], o.term)
						}
						if o.singular {
							for _, l := range logs {
								if err := s.StoreLog(l); err != nil {
									t.Fatal(err)
								}
							}
						} else if err := s.StoreLogs(logs); err != nil {
							t.Fatal(err)
						}
						for _, l := range logs {
							model[l.Index] = l.Term
						}
					}
				}
				checkModel(t, s, model, tt.first, tt.last)
				checkModel(t, reopen(t, s, fs, "raft"), model, tt.first, tt.last)
			})
		}
	}
}

// checkModel checks the bounds and that exactly the model's entries are
// present, probing around every present index and the bounds.
func checkModel(t *testing.T, s *Store, model map[uint64]uint64, wantFirst, wantLast uint64) {
	t.Helper()
	if first, last := bounds(t, s); first != wantFirst || last != wantLast {
		t.Errorf("bounds = %d, %d; want %d, %d", first, last, wantFirst, wantLast)
	}
	probe := map[uint64]bool{wantFirst: true, wantLast: true}
	for i := range model {
		probe[i] = true
	}
	for _, i := range slices.Collect(func(yield func(uint64) bool) {
		for i := range probe {
			for _, j := range []uint64{i - 1, i, i + 1} {
				if !yield(j) {
					return
				}
			}
		}
	}) {
		var l raft.Log
		err := s.GetLog(i, &l)
		term, ok := model[i]
		switch {
		case ok && err != nil:
			t.Errorf("GetLog(%d) = %v; want term %d", i, err, term)
		case ok && (l.Term != term || l.Index != i):
			t.Errorf("GetLog(%d) = index %d term %d; want term %d", i, l.Index, l.Term, term)
		case !ok && !errors.Is(err, raft.ErrLogNotFound):
			t.Errorf("GetLog(%d) = %v (term %d); want raft.ErrLogNotFound", i, err, l.Term)
		}
	}
}

func TestStableStore(t *testing.T) {
	large := bytes.Repeat([]byte("v"), 1<<20)
	tests := []struct {
		name string
		key  []byte
		val  []byte
	}{
		{"simple", []byte("LastVoteCand"), []byte("node-1")},
		{"empty value", []byte("empty"), []byte{}},
		{"binary key", []byte{0, 1, 0xff}, []byte{9}},
		{"empty key", []byte{}, []byte("e")},
		{"looks like a log key", []byte{prefixLog, 0, 0, 0, 0, 0, 0, 0, 1}, []byte("not a log")},
		{"large value", []byte("large"), large},
	}
	fs := vfs.NewMem()
	s := openStore(t, fs, "raft")
	for _, tt := range tests {
		if err := s.Set(tt.key, tt.val); err != nil {
			t.Fatalf("%s: Set: %v", tt.name, err)
		}
	}
	if err := s.Set([]byte("overwritten"), []byte("old")); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("overwritten"), []byte("new")); err != nil {
		t.Fatal(err)
	}
	uints := map[string]uint64{"CurrentTerm": 7, "LastVoteTerm": 0, "max": math.MaxUint64}
	for k, v := range uints {
		if err := s.SetUint64([]byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
	check := func(s *Store) {
		for _, tt := range tests {
			got, err := s.Get(tt.key)
			if err != nil || !bytes.Equal(got, tt.val) || got == nil {
				t.Errorf("%s: Get = %.20q, %v; want %.20q", tt.name, got, err, tt.val)
			}
		}
		if got, err := s.Get([]byte("overwritten")); err != nil || string(got) != "new" {
			t.Errorf("Get(overwritten) = %q, %v", got, err)
		}
		for k, v := range uints {
			if got, err := s.GetUint64([]byte(k)); err != nil || got != v {
				t.Errorf("GetUint64(%s) = %d, %v; want %d", k, got, err, v)
			}
		}
		// Stable keys and log keys live apart.
		if err := s.GetLog(1, new(raft.Log)); !errors.Is(err, raft.ErrLogNotFound) {
			t.Errorf("GetLog(1) = %v; stable key leaked into the log", err)
		}
		if first, last := bounds(t, s); first != 0 || last != 0 {
			t.Errorf("bounds = %d, %d; want 0, 0", first, last)
		}
	}
	check(s)
	s = reopen(t, s, fs, "raft")
	check(s)

	// Get returns a copy.
	got, _ := s.Get([]byte("LastVoteCand"))
	got[0] = 'X'
	if again, _ := s.Get([]byte("LastVoteCand")); string(again) != "node-1" {
		t.Errorf("caller's write reached the store: %q", again)
	}
	// SetUint64 is visible through Get as 8 big-endian bytes (as in
	// raft-boltdb); a value that is not 8 bytes is not a uint64.
	if got, err := s.Get([]byte("CurrentTerm")); err != nil || !bytes.Equal(got, []byte{0, 0, 0, 0, 0, 0, 0, 7}) {
		t.Errorf("Get(CurrentTerm) = %x, %v", got, err)
	}
	if _, err := s.GetUint64([]byte("LastVoteCand")); err == nil {
		t.Error("GetUint64 of a 6-byte value: want error")
	}
}

func TestReopenFromDisk(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, vfs.Default, dir)
	logs := mkLogs(1, 500, 3)
	logs[250].Data = bytes.Repeat([]byte{0xab}, 4<<20)
	logs[251].Extensions = []byte("ext")
	logs[252].AppendedAt = time.Now()
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(1, 99); err != nil { // compaction
		t.Fatal(err)
	}
	if err := s.DeleteRange(451, 500); err != nil { // conflict truncation
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("n2")); err != nil {
		t.Fatal(err)
	}

	s = reopen(t, s, vfs.Default, dir)
	if first, last := bounds(t, s); first != 100 || last != 450 {
		t.Fatalf("bounds after reopen = %d, %d; want 100, 450", first, last)
	}
	for _, want := range logs {
		var got raft.Log
		err := s.GetLog(want.Index, &got)
		if want.Index < 100 || want.Index > 450 {
			if !errors.Is(err, raft.ErrLogNotFound) {
				t.Fatalf("GetLog(%d) = %v; want raft.ErrLogNotFound", want.Index, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("GetLog(%d): %v", want.Index, err)
		}
		if d := sameLog(&got, want); d != "" {
			t.Fatalf("GetLog(%d): %s", want.Index, d)
		}
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 3 {
		t.Errorf("CurrentTerm = %d, %v", v, err)
	}
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "n2" {
		t.Errorf("LastVoteCand = %q, %v", v, err)
	}
}

// TestCrashDurability checks that Sync writes survive a simulated machine
// crash (only fsynced data kept) and that NoSync really skips fsync.
func TestCrashDurability(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s := openStore(t, fs, "raft")
	if err := s.StoreLogs(mkLogs(1, 10, 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(1, 3); err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	c := openStore(t, crashed, "raft")
	model := map[uint64]uint64{}
	for i := uint64(4); i <= 10; i++ {
		model[i] = 1
	}
	checkModel(t, c, model, 4, 10)
	if v, err := c.GetUint64([]byte("CurrentTerm")); err != nil || v != 1 {
		t.Errorf("CurrentTerm after crash = %d, %v; want 1", v, err)
	}

	// The same writes through a NoSync store are lost by the same crash.
	fs2 := vfs.NewCrashableMem()
	ns, err := Open("raft", &Options{FS: fs2, Logger: testLogger(t), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if err := ns.StoreLogs(mkLogs(1, 10, 1)); err != nil {
		t.Fatal(err)
	}
	c2 := openStore(t, fs2.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}), "raft")
	checkModel(t, c2, map[uint64]uint64{}, 0, 0)
}

// TestCrashAtomicBatches crashes a store holding many unsynced batches,
// keeping a random part of the unsynced bytes, and checks each StoreLogs
// batch comes back whole or not at all, and that the bounds found on
// reopen describe the entries that survived.
func TestCrashAtomicBatches(t *testing.T) {
	// Entries of 1000 bytes make each batch span several of the crash
	// model's 4 KiB blocks, so a batch can be torn on disk.
	const batches, perBatch, size = 30, 16, 1000
	fs := vfs.NewCrashableMem()
	s, err := Open("raft", &Options{FS: fs, Logger: testLogger(t), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for b := range uint64(batches) {
		logs := mkLogs(b*perBatch+1, (b+1)*perBatch, b+1)
		for _, l := range logs {
			l.Data = bytes.Repeat([]byte{byte(b)}, size)
		}
		if err := s.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
	}
	partial := 0 // crashes that kept some batches but not all
	for seed := range uint64(20) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
			c := openStore(t, crashed, "raft")
			model := map[uint64]uint64{}
			var wholeBatches uint64
			for b := range uint64(batches) {
				n := 0
				for i := b*perBatch + 1; i <= (b+1)*perBatch; i++ {
					var l raft.Log
					switch err := c.GetLog(i, &l); {
					case err == nil:
						if l.Term != b+1 || len(l.Data) != size || l.Data[0] != byte(b) {
							t.Fatalf("entry %d damaged: term %d, %d bytes", i, l.Term, len(l.Data))
						}
						n++
						model[i] = b + 1
					case !errors.Is(err, raft.ErrLogNotFound):
						t.Fatalf("GetLog(%d): %v", i, err)
					}
				}
				if n != 0 && n != perBatch {
					t.Fatalf("batch %d: %d of %d entries survived", b, n, perBatch)
				}
				if n == perBatch {
					if b != wholeBatches {
						t.Fatalf("batch %d survived but batch %d did not", b, wholeBatches)
					}
					wholeBatches++
				}
			}
			if wholeBatches > 0 && wholeBatches < batches {
				partial++
			}
			var first, last uint64
			if wholeBatches > 0 {
				first, last = 1, wholeBatches*perBatch
			}
			checkModel(t, c, model, first, last)
		})
	}
	t.Logf("%d of 20 crashes kept part of the log", partial)
	if partial == 0 {
		t.Error("no crash kept part of the log; the test proves nothing about torn batches")
	}
}

// TestConcurrentReadsDuringWrites runs raft's access pattern under -race:
// one writer appending and compacting, readers (the replication
// goroutines) reading the tail and the head.
func TestConcurrentReadsDuringWrites(t *testing.T) {
	s := openStore(t, vfs.NewMem(), "raft")
	const total, batch, keep = 3000, 25, 200
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for r := range 4 {
		wg.Go(func() {
			var l raft.Log
			for !done.Load() {
				last, _ := s.LastIndex()
				if last == 0 {
					continue
				}
				// The log is never emptied once written, so first is set;
				// it may exceed last if compaction ran in between.
				first, _ := s.FirstIndex()
				if first == 0 {
					errs <- fmt.Errorf("reader %d: bounds %d, %d", r, first, last)
					return
				}
				// last is published only after its batch committed and only
				// the front is ever deleted, so last is readable unless
				// compaction has since overtaken it (this reader was
				// descheduled for a while).
				if err := s.GetLog(last, &l); err != nil {
					if now, _ := s.FirstIndex(); !errors.Is(err, raft.ErrLogNotFound) || now <= last {
						errs <- fmt.Errorf("reader %d: GetLog(last=%d): %w (first now %d)", r, last, err, now)
						return
					}
					continue
				}
				if l.Term != l.Index || string(l.Data) != fmt.Sprintf("cmd-%d", l.Index) {
					errs <- fmt.Errorf("reader %d: entry %d has term %d data %q", r, l.Index, l.Term, l.Data)
					return
				}
				// The head may be compacted away between the two calls;
				// raft's oldestLog retries for exactly this.
				if err := s.GetLog(first, &l); err != nil && !errors.Is(err, raft.ErrLogNotFound) {
					errs <- fmt.Errorf("reader %d: GetLog(first=%d): %w", r, first, err)
					return
				}
				if _, err := s.GetUint64([]byte("CurrentTerm")); err != nil && err.Error() != "not found" {
					errs <- err
					return
				}
			}
		})
	}
	for lo := uint64(1); lo <= total; lo += batch {
		logs := mkLogs(lo, lo+batch-1, 0)
		for _, l := range logs {
			l.Term = l.Index
		}
		if err := s.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
		if err := s.SetUint64([]byte("CurrentTerm"), lo); err != nil {
			t.Fatal(err)
		}
		if last := lo + batch - 1; last > keep {
			first, _ := s.FirstIndex()
			if err := s.DeleteRange(first, last-keep); err != nil {
				t.Fatal(err)
			}
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if first, last := bounds(t, s); first != total-keep+1 || last != total {
		t.Errorf("bounds = %d, %d; want %d, %d", first, last, total-keep+1, total)
	}
}

func TestClosed(t *testing.T) {
	s := openStore(t, vfs.NewMem(), "raft")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close = %v; want ErrClosed", err)
	}
	calls := map[string]error{
		"StoreLog":    s.StoreLog(&raft.Log{Index: 1}),
		"GetLog":      s.GetLog(1, new(raft.Log)),
		"DeleteRange": s.DeleteRange(1, 2),
		"Set":         s.Set([]byte("k"), nil),
		"SetUint64":   s.SetUint64([]byte("k"), 1),
	}
	_, calls["FirstIndex"] = s.FirstIndex()
	_, calls["LastIndex"] = s.LastIndex()
	_, calls["Get"] = s.Get([]byte("k"))
	_, calls["GetUint64"] = s.GetUint64([]byte("k"))
	for name, err := range calls {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v; want ErrClosed", name, err)
		}
	}
}

func TestRejectsUnknownFormat(t *testing.T) {
	fs := vfs.NewMem()
	s := openStore(t, fs, "raft")
	if err := s.db.Set(metaFormatKey, []byte{99}, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := Open("raft", &Options{FS: fs, Logger: testLogger(t)}); err == nil {
		s.Close()
		t.Fatal("Open of a store with format 99: want error")
	}
}

func TestCorruptEntry(t *testing.T) {
	s := openStore(t, vfs.NewMem(), "raft")
	var k [logKeyLen]byte
	if err := s.db.Set(logKey(&k, 5), []byte{logCodecV1, 0, 0xff}, nil); err != nil {
		t.Fatal(err)
	}
	err := s.GetLog(5, new(raft.Log))
	if !errors.Is(err, errCorrupt) {
		t.Errorf("GetLog of a corrupt entry = %v; want errCorrupt", err)
	}
}

// TestPebbleLogsGoToSlog checks Pebble's messages (WAL recovery on reopen)
// arrive through Options.Logger and none reach the standard logger, which
// is where Pebble's default logger writes.
func TestPebbleLogsGoToSlog(t *testing.T) {
	var std bytes.Buffer
	prevOut, prevFlags := log.Writer(), log.Flags()
	log.SetOutput(&std)
	t.Cleanup(func() { log.SetOutput(prevOut); log.SetFlags(prevFlags) })

	var got syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&got, &slog.HandlerOptions{Level: slog.LevelDebug}))
	fs := vfs.NewMem()
	for range 2 {
		s, err := Open("raft", &Options{FS: fs, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.StoreLogs(mkLogs(1, 10, 1)); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if std.Len() != 0 {
		t.Errorf("Pebble wrote to the standard logger:\n%s", std.String())
	}
	out := got.String()
	if !strings.Contains(out, "component=pebble") || !strings.Contains(out, "WAL") {
		t.Errorf("no Pebble WAL message reached slog; got:\n%s", out)
	}
	if strings.Contains(out, "level=INFO") {
		t.Errorf("Pebble chatter logged above Debug:\n%s", out)
	}
}

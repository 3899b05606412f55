package usage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/ledger"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 123456789, time.UTC)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func memStore(t testing.TB, fs vfs.FS) *store.Store {
	t.Helper()
	if fs == nil {
		fs = vfs.NewMem()
	}
	st, err := store.Open("usage", &store.Options{FS: fs, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func openLog(t testing.TB, st *store.Store) *Log {
	t.Helper()
	g, err := Open(st)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func line(account string, i int) *Line {
	return &Line{
		Receipt: fmt.Sprintf("r_eu_%s_%d", account, i),
		At:      t0.Add(time.Duration(i) * time.Second),
		Region:  "eu",
		Account: account,
		Call:    billing.KindScrape,
		URL:     fmt.Sprintf("https://example.com/%d", i),
		Engine:  "http",
		Level:   billing.LevelLight,
		Cache:   billing.CacheMiss,
		Count:   1,
		Units:   billing.Amount(ledger.Credits(1)),
		Status:  200,
	}
}

func record(t testing.TB, g *Log, l *Line) uint64 {
	t.Helper()
	if err := g.Record(l); err != nil {
		t.Fatal(err)
	}
	return l.Seq
}

func list(t testing.TB, g *Log, account string, after uint64, limit int) ([]Line, uint64) {
	t.Helper()
	lines, next, err := g.List(account, after, limit)
	if err != nil {
		t.Fatal(err)
	}
	return lines, next
}

func seqs(lines []Line) []uint64 {
	out := make([]uint64, len(lines))
	for i, l := range lines {
		out[i] = l.Seq
	}
	return out
}

func TestRecordListRoundTrip(t *testing.T) {
	g := openLog(t, memStore(t, nil))
	want := &Line{
		Receipt: "r_eu_1", At: t0.In(time.FixedZone("x", 3600)), Region: "eu", Account: "acct1",
		Call: billing.KindExtract, URL: "https://example.com/a", Step: "extract", Engine: "browser",
		Level: billing.LevelBrowser, Cache: billing.CacheArchive, Count: 2,
		LLMTokens: Tokens{In: 6000, Out: 800}, Units: billing.Amount(4500), Status: 200,
		Boxes: []string{"browser", "llm"}, RemainingBefore: new(billing.Amount(12500)),
	}
	seq := record(t, g, want)
	if seq != 1 {
		t.Errorf("first seq = %d, want 1", seq)
	}
	if !want.At.Equal(t0.Truncate(time.Millisecond)) || want.At.Location() != time.UTC {
		t.Errorf("Record left At = %v, want UTC to the millisecond", want.At)
	}
	got, next := list(t, g, "acct1", 0, 10)
	if len(got) != 1 || next != seq {
		t.Fatalf("List = %d lines, next %d; want 1, %d", len(got), next, seq)
	}
	if !reflect.DeepEqual(got[0], *want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got[0], *want)
	}
	// A line of version 1 (no boxes, no cap) still reads.
	var v1 Line
	old := []byte{valueV1}
	old = append(old, appendValue(nil, &Line{At: t0, Receipt: "r_eu_0", Count: 1, Units: 1000, Status: 200})[1:]...)
	old = old[:len(old)-2] // no boxes count, no cap byte
	if err := decodeValue(old, &v1); err != nil || v1.Receipt != "r_eu_0" || v1.Units != 1000 || v1.Boxes != nil || v1.RemainingBefore != nil {
		t.Errorf("a version 1 line: %+v %v", v1, err)
	}
	if o := got[0].Object(); o.Receipt != want.Receipt || o.Units != want.Units || *o.RemainingBefore != *want.RemainingBefore || len(o.Boxes) != 2 {
		t.Errorf("object %+v", o)
	}
}

func TestRecordZeroAtIsNow(t *testing.T) {
	g := openLog(t, memStore(t, nil))
	g.now = func() time.Time { return t0 }
	l := line("acct1", 0)
	l.At = time.Time{}
	record(t, g, l)
	if !l.At.Equal(t0.Truncate(time.Millisecond)) {
		t.Errorf("At = %v, want %v", l.At, t0)
	}
}

func TestAccountsAreIsolated(t *testing.T) {
	g := openLog(t, memStore(t, nil))
	var a1, a2 []uint64
	for i := range 6 {
		if i%2 == 0 {
			a1 = append(a1, record(t, g, line("acct1", i)))
		} else {
			a2 = append(a2, record(t, g, line("acct2", i)))
		}
	}
	// acct1x shares acct1's first characters: its lines must not leak.
	record(t, g, line("acct1x", 9))
	for acct, want := range map[string][]uint64{"acct1": a1, "acct2": a2, "nobody": nil} {
		got, _ := list(t, g, acct, 0, 100)
		if !slices.Equal(seqs(got), want) {
			t.Errorf("%s: seqs %v, want %v", acct, seqs(got), want)
		}
		for _, l := range got {
			if l.Account != acct {
				t.Errorf("%s: line of %s", acct, l.Account)
			}
		}
	}
}

func TestBadAccount(t *testing.T) {
	g := openLog(t, memStore(t, nil))
	for _, acct := range []string{"", "a/b"} {
		if err := g.Record(line(acct, 0)); !errors.Is(err, ErrBadAccount) {
			t.Errorf("Record(%q) = %v, want ErrBadAccount", acct, err)
		}
		if _, _, err := g.List(acct, 0, 1); !errors.Is(err, ErrBadAccount) {
			t.Errorf("List(%q) = %v, want ErrBadAccount", acct, err)
		}
	}
}

func TestPagingAndAfter(t *testing.T) {
	g := openLog(t, memStore(t, nil))
	var all []uint64
	for i := range 25 {
		all = append(all, record(t, g, line("acct1", i)))
		record(t, g, line("acct2", i)) // gaps in acct1's seqs
	}
	// Page through with the next of each page.
	var got []uint64
	after, pages := uint64(0), 0
	for {
		lines, next := list(t, g, "acct1", after, 10)
		if len(lines) == 0 {
			if next != after {
				t.Errorf("empty page: next %d, want after %d", next, after)
			}
			break
		}
		pages++
		got = append(got, seqs(lines)...)
		if next != lines[len(lines)-1].Seq {
			t.Errorf("next %d, want last seq %d", next, lines[len(lines)-1].Seq)
		}
		after = next
	}
	if !slices.Equal(got, all) || pages != 3 {
		t.Errorf("paged %d pages %v, want 3 pages %v", pages, got, all)
	}

	for _, tc := range []struct {
		after uint64
		limit int
		want  []uint64
	}{
		{0, 3, all[:3]},
		{all[4], 2, all[5:7]},
		{all[4] + 1, 2, all[5:7]}, // a seq of another account: the next one of ours
		{all[24], 10, nil},
		{math.MaxUint64, 10, nil},
		{0, 0, all}, // 0 is DefaultLimit
	} {
		lines, _ := list(t, g, "acct1", tc.after, tc.limit)
		if !slices.Equal(seqs(lines), tc.want) {
			t.Errorf("after %d limit %d: %v, want %v", tc.after, tc.limit, seqs(lines), tc.want)
		}
	}
}

func TestSeqSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	var last uint64
	for round := range 3 {
		st, err := store.Open(dir, &store.Options{Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		g := openLog(t, st)
		for i := range 5 {
			s := record(t, g, line("acct1", round*10+i))
			if s <= last {
				t.Fatalf("round %d: seq %d after %d", round, s, last)
			}
			last = s
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	st, err := store.Open(dir, &store.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lines, _ := list(t, openLog(t, st), "acct1", 0, 100)
	if len(lines) != 15 {
		t.Errorf("%d lines after reopens, want 15", len(lines))
	}
}

// A crash loses unsynced writes at random; whatever survives, a seq handed
// out after the restart is above every surviving line's.
func TestSeqNeverRepeatsAfterCrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	rng := rand.New(rand.NewPCG(1, 2))
	var fresh []uint64 // seqs handed out since the last crash
	for round := range 8 {
		st, err := store.Open("usage", &store.Options{FS: fs, Logger: quiet()})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		g := openLog(t, st)
		g.block = 64 // a reservation (a Sync) now and then
		lines, _ := list(t, g, "acct1", 0, MaxLimit)
		survived := seqs(lines)
		maxSurvived := uint64(0)
		if len(survived) > 0 {
			maxSurvived = survived[len(survived)-1]
		}
		for i := range 40 {
			s := record(t, g, line("acct1", round*100+i))
			if s <= maxSurvived {
				t.Fatalf("round %d: seq %d handed out again (a line with seq %d survived the crash)", round, s, maxSurvived)
			}
			fresh = append(fresh, s)
			if i == 20 && round%2 == 0 {
				// A synced write elsewhere (the holds journal) makes the
				// WAL durable up to here.
				if err := st.Set([]byte("H/x"), []byte("x"), store.Sync); err != nil {
					t.Fatal(err)
				}
			}
		}
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
		st.Close()
		fs = crashed
	}
	if !slices.IsSorted(fresh) || len(slices.Compact(slices.Clone(fresh))) != len(fresh) {
		t.Errorf("seqs not strictly increasing: %v", fresh)
	}
}

func TestConcurrentRecordsGetDistinctSeqs(t *testing.T) {
	g := openLog(t, memStore(t, nil))
	g.block = 16
	const workers, each = 8, 300
	got := make([][]uint64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				l := line(fmt.Sprintf("acct%d", w), i)
				if err := g.Record(l); err != nil {
					t.Error(err)
					return
				}
				got[w] = append(got[w], l.Seq)
			}
		})
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for w, s := range got {
		if !slices.IsSorted(s) {
			t.Errorf("worker %d: seqs out of order", w)
		}
		for _, v := range s {
			if seen[v] {
				t.Fatalf("seq %d handed out twice", v)
			}
			seen[v] = true
		}
		lines, _ := list(t, g, fmt.Sprintf("acct%d", w), 0, MaxLimit)
		if !slices.Equal(seqs(lines), s) {
			t.Errorf("worker %d: stored %d lines, recorded %d", w, len(lines), len(s))
		}
	}
}

func TestPrune(t *testing.T) {
	st := memStore(t, nil)
	if err := st.Set([]byte("H/1"), []byte("holds journal"), store.NoSync); err != nil {
		t.Fatal(err)
	}
	g := openLog(t, st)
	for i := range 10 {
		l := line("acct1", i)
		l.At = t0.Add(time.Duration(i) * 24 * time.Hour)
		record(t, g, l)
		l = line("acct2", i)
		l.At = t0.Add(time.Duration(i) * 24 * time.Hour)
		record(t, g, l)
	}
	n, err := g.Prune(t0.Add(4 * 24 * time.Hour))
	if err != nil || n != 8 {
		t.Fatalf("Prune = %d, %v; want 8", n, err)
	}
	for _, acct := range []string{"acct1", "acct2"} {
		lines, _ := list(t, g, acct, 0, 100)
		if len(lines) != 6 || !lines[0].At.Equal(t0.Truncate(time.Millisecond).Add(4*24*time.Hour)) {
			t.Errorf("%s: %d lines left, first at %v", acct, len(lines), lines[0].At)
		}
	}
	if v, err := st.Get([]byte("H/1")); err != nil || string(v) != "holds journal" {
		t.Errorf("Prune touched another prefix: %q, %v", v, err)
	}
	// The seq ceiling is kept: no reuse after a prune of everything.
	if _, err := g.Prune(t0.Add(100 * 24 * time.Hour)); err != nil {
		t.Fatal(err)
	}
	g2 := openLog(t, st)
	if s := record(t, g2, line("acct1", 99)); s <= 20 {
		t.Errorf("seq after prune and reopen = %d, want above 20", s)
	}
}

func BenchmarkRecord(b *testing.B) {
	g := openLog(b, memStore(b, nil))
	l := line("acct_0123456789", 1)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		l.At = t0
		if err := g.Record(l); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRecordParallel(b *testing.B) {
	g := openLog(b, memStore(b, nil))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		l := line("acct_0123456789", 1)
		for pb.Next() {
			l.At = t0
			if err := g.Record(l); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

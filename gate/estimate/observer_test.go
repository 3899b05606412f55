package estimate

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/store"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func memStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open("estimate", &store.Options{FS: vfs.NewMem(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func openObserver(t testing.TB, st *store.Store, every time.Duration) *Observer {
	t.Helper()
	o, err := Open(st, every)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

func countKeys(t testing.TB, st *store.Store, prefix string) int {
	t.Helper()
	n := 0
	if err := st.Scan([]byte(prefix), nil, func(k, v []byte) (bool, error) { n++; return true, nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestDomain(t *testing.T) {
	for in, want := range map[string]string{
		"https://example.com/a?b#c":             "example.com",
		"https://WWW.Example.COM/":              "example.com",
		"http://www.example.com:8080/x":         "example.com",
		"https://user:pw@shop.example.co.uk/":   "shop.example.co.uk",
		"https://example.com.":                  "example.com",
		"https://example.com?x=1":               "example.com",
		"http://[2001:db8::1]:443/":             "[2001:db8::1]",
		"https://www./":                         "www",
		"example.com/no-scheme":                 "",
		"":                                      "",
		"https:///path":                         "",
		"https://wwwexample.com/":               "wwwexample.com",
		"https://www.www.example.com/two-www/x": "www.example.com",
	} {
		if got := Domain(in); got != want {
			t.Errorf("Domain(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestObserveLevels(t *testing.T) {
	o := openObserver(t, memStore(t), 0)
	for _, l := range []string{"", "http", "light", "browser", "browser_proxy", "browser", "warp"} {
		o.Observe("https://www.example.com/p", billing.KindScrape, l, 0, 0)
	}
	o.Observe("", billing.KindSearch, "light", 0, 0) // no URL: no domain
	// A map reads the site over plain HTTP whatever its pages need.
	o.Observe("https://example.com/", billing.KindMap, "light", 0, 0)
	got := o.Levels("example.com")
	if want := (LevelCounts{Light: 3, Browser: 2, BrowserProxy: 1}); got != want {
		t.Errorf("Levels = %+v, want %+v", got, want)
	}
	if got := o.Levels("other.org"); got.Total() != 0 {
		t.Errorf("unseen domain: %+v", got)
	}
	var nilObs *Observer
	if nilObs.Levels("example.com").Total() != 0 || nilObs.Tokens(billing.KindExtract).Calls != 0 {
		t.Error("a nil Observer has seen something")
	}
}

func TestDecay(t *testing.T) {
	o := openObserver(t, memStore(t), 0)
	o.Observe("https://a.com/", "scrape", "browser_proxy", 0, 0)
	for range decayAt - 1 {
		o.Observe("https://a.com/", "scrape", "light", 0, 0)
	}
	got := o.Levels("a.com")
	if got.Light != (decayAt-1)/2 || got.BrowserProxy != 0 {
		t.Errorf("after decay: %+v", got)
	}
}

func TestTokensBand(t *testing.T) {
	o := openObserver(t, memStore(t), 0)
	if b := o.Tokens(billing.KindExtract); b.Calls != 0 {
		t.Fatalf("nothing seen: %+v", b)
	}
	for i := range 100 {
		o.Observe("https://a.com/", billing.KindExtract, "light", 1000+i*100, 200)
	}
	o.Observe("https://a.com/", "no_such_kind", "light", 5, 5) // ignored
	o.Observe("https://a.com/", billing.KindExtract, "light", 0, 0)
	b := o.Tokens(billing.KindExtract)
	// 5th percentile 1,400, 95th 10,400; the band is widened to bucket
	// edges, each at most an eighth of its power of two wide.
	if b.Calls != 100 || b.InMin > 1400 || b.InMin < 1400*7/8 || b.InMax < 10400 || b.InMax > 10400*9/8 || b.OutMin > 200 || b.OutMax < 200 {
		t.Errorf("band = %+v", b)
	}
	if o.Tokens("no_such_kind").Calls != 0 {
		t.Error("unknown kind counted")
	}
}

func TestHistBuckets(t *testing.T) {
	prev := -1
	for v := 0; v < 1<<20; v += 1 + v/64 {
		i := bucketOf(v)
		if i < prev || i >= nBuckets {
			t.Fatalf("bucketOf(%d) = %d after %d", v, i, prev)
		}
		prev = i
		if lo, hi := bucketLow(i), bucketHigh(i); v < lo || v > hi || (hi-lo+1)*8 > max(lo, 16) {
			t.Fatalf("value %d in bucket %d [%d, %d]", v, i, lo, hi)
		}
	}
	for i := range nBuckets - 1 {
		if bucketOf(bucketLow(i)) != i || bucketOf(bucketHigh(i)) != i || bucketHigh(i)+1 != bucketLow(i+1) {
			t.Fatalf("bucket %d: [%d, %d] not contiguous", i, bucketLow(i), bucketHigh(i))
		}
	}
	if bucketOf(1<<40) != nBuckets-1 || bucketOf(-3) != 0 {
		t.Error("out-of-range values not clamped")
	}
}

func TestPersistAcrossCloseOpen(t *testing.T) {
	st := memStore(t)
	if err := st.Set([]byte("U/a/acct1/x"), []byte("usage"), store.NoSync); err != nil {
		t.Fatal(err)
	}
	o, err := Open(st, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		o.Observe("https://light.com/", billing.KindScrape, "light", 0, 0)
		o.Observe("https://mixed.com/", billing.KindScrape, billing.Levels[i%3], 0, 0)
		o.Observe("https://mixed.com/", billing.KindExtract, "light", 6000+i, 800)
	}
	wantLight, wantMixed, wantTok := o.Levels("light.com"), o.Levels("mixed.com"), o.Tokens(billing.KindExtract)
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := o.Flush(); err != ErrClosed {
		t.Errorf("Flush after Close = %v, want ErrClosed", err)
	}

	o2 := openObserver(t, st, 0)
	if got := o2.Levels("light.com"); got != wantLight {
		t.Errorf("light.com after reopen: %+v, want %+v", got, wantLight)
	}
	if got := o2.Levels("mixed.com"); got != wantMixed {
		t.Errorf("mixed.com after reopen: %+v, want %+v", got, wantMixed)
	}
	if got := o2.Tokens(billing.KindExtract); got != wantTok {
		t.Errorf("tokens after reopen: %+v, want %+v", got, wantTok)
	}
	// Only changed domains are written again.
	o2.Observe("https://light.com/", billing.KindScrape, "light", 0, 0)
	if err := o2.Flush(); err != nil {
		t.Fatal(err)
	}
	if v, err := st.Get([]byte("U/a/acct1/x")); err != nil || string(v) != "usage" {
		t.Errorf("another prefix touched: %q %v", v, err)
	}
}

func TestPeriodicFlush(t *testing.T) {
	st := memStore(t)
	o := openObserver(t, st, 5*time.Millisecond)
	o.Observe("https://a.com/", billing.KindScrape, "browser", 0, 0)
	deadline := time.Now().Add(5 * time.Second)
	for countKeys(t, st, "E/d/") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("nothing written by the periodic flush")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestBoundedDomains(t *testing.T) {
	st := memStore(t)
	o := newObserver(st, 2*shardCount) // 2 per shard
	for range 50 {
		o.Observe("https://busy.com/", billing.KindScrape, "light", 0, 0)
	}
	if err := o.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range 5000 {
		o.Observe(fmt.Sprintf("https://site%d.com/", i), billing.KindScrape, "light", 0, 0)
		if i%1000 == 0 {
			if err := o.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	n := 0
	for i := range o.shards {
		n += len(o.shards[i].m)
	}
	if n > 2*shardCount {
		t.Errorf("%d domains kept, cap %d", n, 2*shardCount)
	}
	if o.Levels("busy.com").Light != 50 {
		t.Error("a busy domain was evicted by one-off ones")
	}
	if err := o.Flush(); err != nil {
		t.Fatal(err)
	}
	if k := countKeys(t, st, "E/d/"); k != n {
		t.Errorf("%d domains stored, %d kept", k, n)
	}
	// A reload with a smaller cap keeps to it.
	o2 := newObserver(st, shardCount)
	if err := o2.load(); err != nil {
		t.Fatal(err)
	}
	if err := o2.Flush(); err != nil {
		t.Fatal(err)
	}
	if k := countKeys(t, st, "E/d/"); k > shardCount {
		t.Errorf("%d domains stored after reload with cap %d", k, shardCount)
	}
}

func TestObserveConcurrent(t *testing.T) {
	st := memStore(t)
	o := openObserver(t, st, time.Millisecond)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 500 {
				o.Observe(fmt.Sprintf("https://s%d.com/", i%7), billing.KindExtract, billing.Levels[(i+w)%3], i, i)
				_ = o.Levels("s1.com")
				_ = o.Tokens(billing.KindExtract)
			}
		})
	}
	wg.Wait()
	var total uint64
	for i := range 7 {
		total += o.Levels(fmt.Sprintf("s%d.com", i)).Total()
	}
	if total != 2000 {
		t.Errorf("counted %d observations, want 2000", total)
	}
}

var benchURLs = func() []string {
	u := make([]string, 4096)
	for i := range u {
		u[i] = fmt.Sprintf("https://www.site%d.example.com/some/path/%d?q=1", i%1000, i)
	}
	return u
}()

func BenchmarkObserve(b *testing.B) {
	o := newObserver(nil, MaxDomains)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		o.Observe(benchURLs[i&4095], billing.KindScrape, billing.LevelBrowser, 0, 0)
		i++
	}
}

func BenchmarkObserveParallel(b *testing.B) {
	o := newObserver(nil, MaxDomains)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			o.Observe(benchURLs[i&4095], billing.KindExtract, billing.LevelLight, 3000+i&1023, 400)
			i++
		}
	})
}

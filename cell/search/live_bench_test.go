package search

import (
	"context"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/content"
)

// TestLiveSpeed measures the live path of regiontest TestSearchSpeed
// alone (no job beside it, no gate): N pages as scrapes hand them to the
// indexer (converted: main content, links, metadata; copies of the
// corpora's pages under /cN/ prefixes, links to /c0/), through an Indexer
// of the cell's configuration into a fresh index on disk, then the anchor
// text refresh. It reports wall time, CPU seconds a page and peak RSS
// growth; CPU a page is the figure to compare across builds on a shared
// machine.
//
//	TRAWL_LIVE_SPEED=/usr/share/doc/postgresql-doc-15/html:/usr/share/doc/python3.11/html \
//	TRAWL_LIVE_PAGES=4000 go test ./cell/search -run TestLiveSpeed -v
//
// Knobs for a look at one setting: TRAWL_LIVE_BATCH (pages),
// TRAWL_LIVE_BATCH_BYTES, TRAWL_LIVE_COMMITS (IndexerConfig),
// TRAWL_LIVE_SCORCH (more scorch configuration, JSON); TRAWL_LIVE_HEAP, a
// directory, gets a heap profile every second and a line of the memory
// statistics (where the peak comes from).
func TestLiveSpeed(t *testing.T) {
	corpora := os.Getenv("TRAWL_LIVE_SPEED")
	if corpora == "" {
		t.Skip("set TRAWL_LIVE_SPEED to documentation directories (colon-separated)")
	}
	n := 4000
	if s := os.Getenv("TRAWL_LIVE_PAGES"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	convs, paths := liveConversions(t, strings.Split(corpora, ":"))
	const base = "http://docs.test"
	var urls []string
	for k := 0; len(urls) < n; k++ {
		for _, p := range paths {
			urls = append(urls, fmt.Sprintf("%s/c%d%s", base, k, p))
		}
	}
	urls = urls[:n]
	runtime.GC()
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // peak RSS from here
	rssBefore := procKB("VmRSS")
	if raw := os.Getenv("TRAWL_LIVE_SCORCH"); raw != "" {
		// More scorch configuration (a look at one setting), as JSON.
		old := scorchConfig
		scorchConfig = maps.Clone(old)
		if err := json.Unmarshal([]byte(raw), &scorchConfig); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { scorchConfig = old })
	}
	batch, _ := strconv.Atoi(os.Getenv("TRAWL_LIVE_BATCH"))
	batchBytes, _ := strconv.Atoi(os.Getenv("TRAWL_LIVE_BATCH_BYTES"))
	commits, _ := strconv.Atoi(os.Getenv("TRAWL_LIVE_COMMITS"))
	ix, err := Open(t.TempDir()+"/live", Config{})
	if err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("TRAWL_LIVE_HEAP"); dir != "" {
		// A profile's in-use figures are the heap live at the last
		// collection; the line beside it says how far the heap grew
		// past it (next: the collector's goal).
		stop := make(chan struct{})
		t.Cleanup(func() { close(stop) })
		go func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Second):
				}
				if f, err := os.Create(fmt.Sprintf("%s/heap-%03d.pb.gz", dir, i)); err == nil {
					pprof.Lookup("heap").WriteTo(f, 0)
					f.Close()
				}
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				fmt.Printf("HEAP %d MiB: rss=%d alloc=%d inuse=%d sys=%d released=%d next=%d\n", i,
					procKB("VmRSS")/1024, ms.HeapAlloc>>20, ms.HeapInuse>>20, ms.HeapSys>>20, ms.HeapReleased>>20, ms.NextGC>>20)
			}
		}()
	}
	cpu0 := cpuTime()
	start := time.Now()
	x := NewIndexer(ix, IndexerConfig{Batch: batch, BatchBytes: batchBytes, Commits: commits})
	fetched := time.Now()
	for i, u := range urls {
		if err := x.Put(context.Background(), Page{URL: u, ContentType: "text/html", Content: convs[i%len(convs)], Fetched: fetched}); err != nil {
			t.Fatal(err)
		}
	}
	for x.Indexed() < uint64(len(urls)) {
		time.Sleep(5 * time.Millisecond)
	}
	searchable := time.Since(start)
	x.Close()
	stale := ix.Stale()
	if _, err := ix.RefreshAnchors(0); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	cpu := cpuTime() - cpu0
	hwm := procKB("VmHWM")
	// At rest: every merge the ingest called for done (their CPU is the
	// ingest's too).
	for quiet := 0; quiet < 3; time.Sleep(200 * time.Millisecond) {
		if ix.Stats().Settled {
			quiet++
		} else {
			quiet = 0
		}
	}
	rest := cpuTime() - cpu0
	st := ix.Stats()
	t.Logf("scorch: %d batches; %d segments at the root; %d segments merged in %v (%.0f MiB written)",
		st.Batches, st.Segments, st.MergedSegments, st.MergeTime.Round(time.Millisecond), float64(st.MergedBytes)/(1<<20))
	ix.Close()
	t.Logf("live: %d pages searchable in %v, with the anchor text of %d pages in %v: %.0f pages/s; CPU %.2f ms/page (%.2f cores); peak RSS +%d MiB",
		n, searchable.Round(time.Millisecond), stale, took.Round(time.Millisecond), float64(n)/took.Seconds(),
		float64(cpu.Microseconds())/1000/float64(n), cpu.Seconds()/took.Seconds(), (hwm-rssBefore)/1024)
	fmt.Printf("LIVE pages=%d wall_s=%.3f pps=%.1f cpu_ms_page=%.3f rest_cpu_ms_page=%.3f peak_rss_mib=%d\n", n, took.Seconds(), float64(n)/took.Seconds(),
		float64(cpu.Microseconds())/1000/float64(n), float64(rest.Microseconds())/1000/float64(n), (hwm-rssBefore)/1024)
}

// liveConversions converts every HTML page of roots as a scrape does
// (cached in the temporary directory across runs: the conversion is not
// what is measured).
func liveConversions(t *testing.T, roots []string) ([]*content.Document, []string) {
	t.Helper()
	cache := filepath.Join(os.TempDir(), "trawl-live-speed-"+strconv.FormatUint(hashString(strings.Join(roots, ":")), 16)+".gob")
	type entry struct {
		Paths []string
		Docs  []*content.Document
	}
	if f, err := os.Open(cache); err == nil {
		var e entry
		err := gob.NewDecoder(f).Decode(&e)
		f.Close()
		if err == nil {
			return e.Docs, e.Paths
		}
	}
	var rel []string
	var files []string
	for j, root := range roots {
		if _, err := os.Stat(root); err != nil {
			t.Skipf("%s: %v", root, err)
		}
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".html") {
				r, _ := filepath.Rel(root, p)
				rel = append(rel, fmt.Sprintf("/d%d/%s", j, filepath.ToSlash(r)))
				files = append(files, p)
			}
			return nil
		})
	}
	idx := make([]int, len(rel))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return rel[idx[a]] < rel[idx[b]] })
	docs := make([]*content.Document, len(rel))
	next := make(chan int)
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				b, err := os.ReadFile(files[i])
				if err != nil {
					continue
				}
				u, _ := url.Parse("http://docs.test/c0" + rel[i])
				docs[i], _ = content.Process(b, u, content.Options{Parse: content.ParseOptions{Links: true, Metadata: true}})
			}
		}()
	}
	for _, i := range idx {
		next <- i
	}
	close(next)
	wg.Wait()
	var e entry
	for _, i := range idx {
		if docs[i] != nil {
			e.Paths = append(e.Paths, rel[i])
			e.Docs = append(e.Docs, docs[i])
		}
	}
	if f, err := os.Create(cache); err == nil {
		gob.NewEncoder(f).Encode(e)
		f.Close()
	}
	return e.Docs, e.Paths
}

func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func procKB(field string) int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field+":") {
			v, _ := strconv.ParseInt(strings.Fields(strings.TrimPrefix(l, field+":"))[0], 10, 64)
			return v
		}
	}
	return 0
}

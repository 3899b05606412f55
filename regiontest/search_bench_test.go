package regiontest

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell"
	"github.com/trawlhq/trawl/cell/content"
	cellsearch "github.com/trawlhq/trawl/cell/search"
	"github.com/trawlhq/trawl/cell/search/eval"
	"github.com/trawlhq/trawl/ledger"
)

// TestSearchSpeed measures search and indexing through the gate over
// documentation packages served from loopback (docs/performance.md,
// bench/run.sh part "search"):
//
//	TRAWL_SEARCH_SPEED=/usr/share/doc/postgresql-doc-15/html:/usr/share/doc/python3.11/html \
//	TRAWL_SEARCH_PAGES=10000 go test ./regiontest -run TestSearchSpeed -v -timeout 60m
//
// The directories' pages are served under as many path prefixes (/c0/,
// /c1/, …) as make TRAWL_SEARCH_PAGES distinct URLs (copies of a page are
// near-duplicates: indexed each, collapsed in the answers). A job fetches
// them all through the gate: the cell archives and indexes each. Then:
// search through the gate over those pages (distinct one-word queries,
// plain and rich=1) and the same queries on the cell's index in process;
// while further jobs run on the cell, the indexing rate of the live path
// (the pages as scrapes hand them, converted) and of a rebuild of the
// whole archive (converted again), each into a fresh index; index size
// and the process's RSS; SQLite FTS5 over the same pages (the baseline,
// same run). With TRAWL_SEARCH_SPEED_OUT set, the figures are written
// there as JSON.
func TestSearchSpeed(t *testing.T) {
	roots := filepath.SplitList(os.Getenv("TRAWL_SEARCH_SPEED"))
	if len(roots) == 0 {
		t.Skip("set TRAWL_SEARCH_SPEED to documentation directories (colon-separated)")
	}
	want := 10000
	if s := os.Getenv("TRAWL_SEARCH_PAGES"); s != "" {
		want, _ = strconv.Atoi(s)
	}
	// The distinct pages: corpus j's file rel is /dj/rel.
	mux := http.NewServeMux()
	var paths []string
	for j, root := range roots {
		prefix := fmt.Sprintf("/d%d/", j)
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".html") {
				rel, _ := filepath.Rel(root, p)
				paths = append(paths, prefix+filepath.ToSlash(rel))
			}
			return nil
		})
		fsrv := http.FileServer(http.Dir(root))
		mux.Handle(prefix, http.StripPrefix(prefix, fsrv))
	}
	if len(paths) == 0 {
		t.Fatalf("no .html pages under %v", roots)
	}
	copies := (want + len(paths) - 1) / len(paths)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// /c<k>/d<j>/rel → /d<j>/rel
		rest := strings.TrimPrefix(r.URL.Path, "/c")
		if i := strings.IndexByte(rest, '/'); i > 0 {
			r2 := r.Clone(r.Context())
			r2.URL.Path = rest[i:]
			mux.ServeHTTP(w, r2)
			return
		}
		http.NotFound(w, r)
	}))
	defer site.Close()
	urlsOf := func(from, to int) []string {
		var out []string
		for k := from; k < to; k++ {
			for _, p := range paths {
				out = append(out, fmt.Sprintf("%s/c%d%s", site.URL, k, p))
			}
		}
		return out
	}
	urls := urlsOf(0, copies)
	if len(urls) > want {
		urls = urls[:want]
	}

	var dataDir string
	g := Start(t, Options{Cell: func(c *cell.Config) { dataDir = c.DataDir }})
	c := g.Cells[0].Cell
	submit := func(us []string) {
		for i := 0; i < len(us); i += 5000 {
			key := g.Account(t, ledger.PlanSupporter, 1000000)
			body, _ := json.Marshal(map[string]any{"urls": us[i:min(i+5000, len(us))]})
			if r := call(t, "POST", g.URL+"/scrape/jobs", key, string(body)); r.status != 202 {
				t.Fatalf("job: %d %s", r.status, r.body)
			}
		}
	}
	out := map[string]any{"pages": len(urls), "distinct_pages": len(paths), "corpora": roots, "cores": runtime.NumCPU()}
	load := func() string {
		b, _ := os.ReadFile("/proc/loadavg")
		return strings.Join(strings.Fields(string(b))[:3], " ")
	}
	out["load_start"] = load()

	// 1. Fetched, archived and indexed through jobs.
	start := time.Now()
	submit(urls)
	// Done when the index holds 98 % of the pages (a page a full queue
	// dropped is indexed from the archive once the queue has room).
	deadline := time.Now().Add(45 * time.Minute)
	ix := c.SearchIndex()
	for ix.Count() < uint64(len(urls))*98/100 {
		if time.Now().After(deadline) {
			t.Fatalf("indexed %d of %d in 45 minutes", ix.Count(), len(urls))
		}
		time.Sleep(200 * time.Millisecond)
	}
	took := time.Since(start)
	indexed := ix.Count()
	jobRate := float64(indexed) / took.Seconds()
	t.Logf("%d pages fetched, archived and indexed through jobs in %v: %.0f pages/s (one cell; %d dropped by the full queue, indexed from the archive)", indexed, took.Round(time.Millisecond), jobRate, c.DroppedPages())
	out["job_pages_per_s"] = round(jobRate)

	// The index at rest: the pages' anchor text in (the indexer refreshes
	// a batch of stale pages a second once no page waits) and every
	// batch written. Queries during that refresh had a p99 twice as long
	// (docs/performance.md).
	settle := time.Now()
	for ix.Stale() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d pages still wait for their anchor text", ix.Stale())
		}
		time.Sleep(100 * time.Millisecond)
	}
	ix.Written(time.Minute)
	// And the merges the batches called for done: queries while the
	// index just built is still merged make the p99 (docs/performance.md,
	// "Search").
	for quiet := 0; quiet < 3; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the index's merges did not settle")
		}
		if ix.Stats().Settled {
			quiet++
		} else {
			quiet = 0
		}
	}
	t.Logf("the index at rest %v after the jobs' pages were searchable", time.Since(settle).Round(time.Millisecond))
	out["settle_s"] = round(time.Since(settle).Seconds())

	// 2. Queries, at the pages the first jobs indexed (before the jobs
	// below add more): words of the pages' file names, each once (no answer
	// from the gate's archive of results); a key per 100 queries (the
	// plan's rate limit).
	var qs []string
	seen := map[string]bool{}
	for _, p := range paths {
		w := strings.TrimSuffix(filepath.Base(p), ".html")
		for _, part := range strings.FieldsFunc(w, func(r rune) bool { return r == '-' || r == '_' || r == '.' }) {
			if len(part) > 3 && !seen[strings.ToLower(part)] {
				seen[strings.ToLower(part)] = true
				qs = append(qs, part)
			}
		}
	}
	if len(qs) > 400 {
		qs = eval.SampleStrings(qs, 400)
	}
	measure := func(extra string) []time.Duration {
		var d []time.Duration
		var k string
		for i, q := range qs {
			if i%100 == 0 {
				k = g.Account(t, ledger.PlanSupporter, 100000)
			}
			t0 := time.Now()
			r := call(t, "GET", g.URL+"/search?q="+url.QueryEscape(q)+extra, k, "")
			d = append(d, time.Since(t0))
			if r.status != 200 {
				t.Fatalf("%s: %d %s", q, r.status, r.body)
			}
		}
		slices.Sort(d)
		return d
	}
	plain := measure("")
	rich := measure("&rich=1")
	var local []time.Duration
	for _, q := range qs {
		t0 := time.Now()
		if _, err := ix.Search(context.Background(), q, 10); err != nil {
			t.Fatal(err)
		}
		local = append(local, time.Since(t0))
	}
	slices.Sort(local)
	t.Logf("search through the gate, %d queries over %d pages: p50 %v p99 %v; rich=1 p50 %v p99 %v; the cell's index in process p50 %v p99 %v",
		len(qs), ix.Count(), pct(plain, 50), pct(plain, 99), pct(rich, 50), pct(rich, 99), pct(local, 50), pct(local, 99))
	out["queries"] = len(qs)
	out["indexed_pages"] = ix.Count()
	out["gate_p50_ms"], out["gate_p99_ms"] = ms(pct(plain, 50)), ms(pct(plain, 99))
	out["rich_p50_ms"], out["rich_p99_ms"] = ms(pct(rich, 50)), ms(pct(rich, 99))
	out["local_p50_ms"], out["local_p99_ms"] = ms(pct(local, 50)), ms(pct(local, 99))

	// 3. Indexing beside a running job (a job of new URLs on the same
	// cell all along: three copies of the pages, which outlast the
	// indexing; rates are counted while the job runs), two ways:
	//
	// a. The live path: each page as a scrape hands it to the indexer,
	// with its conversion (main content, links, metadata; the scrape
	// made it for its own answer), through an Indexer of the cell's
	// configuration into a fresh index: the derived fields on every core,
	// batches, then the anchor text each page got from the others. The
	// conversions are made before the clock starts; copies of a page
	// share one.
	jobURLs := func(k int) []string { return urlsOf(copies+3*k, copies+3*k+3) }
	running := func(k int) uint64 {
		before := c.Indexed()
		submit(jobURLs(k))
		for c.Indexed() == before { // the job is running
			time.Sleep(10 * time.Millisecond)
		}
		return before
	}
	convs := make([]*content.Document, len(paths))
	next := make(chan int)
	done := make(chan struct{})
	for range runtime.NumCPU() {
		go func() {
			for i := range next {
				j, _ := strconv.Atoi(strings.TrimPrefix(strings.SplitN(paths[i], "/", 3)[1], "d"))
				body, err := os.ReadFile(filepath.Join(roots[j], strings.SplitN(paths[i], "/", 3)[2]))
				if err != nil {
					t.Error(err)
					continue
				}
				u, _ := url.Parse(site.URL + "/c0" + paths[i])
				convs[i], err = content.Process(body, u, content.Options{Parse: content.ParseOptions{Links: true, Metadata: true}})
				if err != nil {
					t.Error(err)
				}
			}
			done <- struct{}{}
		}()
	}
	for i := range paths {
		next <- i
	}
	close(next)
	for range runtime.NumCPU() {
		<-done
	}
	var live *cellsearch.Index
	var err error
	pprof.Do(context.Background(), pprof.Labels("index", "live"), func(context.Context) {
		live, err = cellsearch.Open(t.TempDir()+"/live", cellsearch.Config{})
	})
	if err != nil {
		t.Fatal(err)
	}
	before := running(0)
	fetchedAt := time.Now()
	start = time.Now()
	cpu0 := cpuSeconds()
	cellStats := ix.Stats()
	if p := os.Getenv("TRAWL_SEARCH_LIVE_PROFILE"); p != "" {
		// A CPU profile of this window alone.
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	var x *cellsearch.Indexer
	// The live index and its Indexer are labelled in CPU profiles
	// (index=live), their goroutines with them.
	pprof.Do(context.Background(), pprof.Labels("index", "live"), func(context.Context) {
		x = cellsearch.NewIndexer(live, cellsearch.IndexerConfig{})
	})
	// When the job's last page was indexed, and how many pages the live
	// path had indexed then.
	type jobEnd struct {
		at    time.Duration
		pages uint64
	}
	jobDone := make(chan jobEnd, 1)
	stopWatch := make(chan struct{})
	jobPages := uint64(len(jobURLs(0)))
	go func() {
		for c.Indexed()-before < jobPages*98/100 {
			select {
			case <-stopWatch:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		jobDone <- jobEnd{time.Since(start), x.Indexed()}
	}()
	for i, u := range urls {
		if err := x.Put(context.Background(), cellsearch.Page{URL: u, ContentType: "text/html", Content: convs[i%len(paths)], Fetched: fetchedAt}); err != nil {
			t.Fatal(err)
		}
	}
	for x.Indexed() < uint64(len(urls)) {
		time.Sleep(5 * time.Millisecond)
	}
	searchable := time.Since(start)
	x.Close()
	stale := live.Stale()
	if _, err := live.RefreshAnchors(0); err != nil {
		t.Fatal(err)
	}
	livePath := time.Since(start)
	besideLive := c.Indexed() - before
	cores := (cpuSeconds() - cpu0) / livePath.Seconds()
	close(stopWatch)
	var ended *jobEnd
	select {
	case e := <-jobDone:
		ended = &e
	default:
	}
	pprof.StopCPUProfile()
	for _, x := range []struct {
		name    string
		st, st0 cellsearch.Stats
	}{{"the live path's index", live.Stats(), cellsearch.Stats{}}, {"the cell's index", ix.Stats(), cellStats}} {
		t.Logf("%s in the window: %d batches, %d segments merged in %v (%.0f MiB written), %d segments at the end",
			x.name, x.st.Batches-x.st0.Batches, x.st.MergedSegments-x.st0.MergedSegments, (x.st.MergeTime - x.st0.MergeTime).Round(time.Millisecond),
			float64(x.st.MergedBytes-x.st0.MergedBytes)/(1<<20), x.st.Segments)
	}
	live.Close()
	liveRate := float64(len(urls)) / livePath.Seconds()
	t.Logf("the live path's window: %.2f cores busy", cores)
	out["live_window_cores"] = round(cores)
	t.Logf("indexing beside a job, the live path: %d pages as scrapes hand them (converted) searchable in %v, and with the anchor text of %d pages in %v: %.0f pages/s, while the job's %d pages were fetched, archived and indexed",
		len(urls), searchable.Round(time.Millisecond), stale, livePath.Round(time.Millisecond), liveRate, besideLive)
	if ended != nil {
		// The job ended first: the rate beside it is what was indexed
		// until then.
		liveRate = float64(ended.pages) / ended.at.Seconds()
		t.Logf("the job ended %v into the window, the live path's %d pages indexed by then: %.0f pages/s beside the job", ended.at.Round(time.Millisecond), ended.pages, liveRate)
		out["live_window_job_ended_s"] = round(ended.at.Seconds())
	} else {
		t.Logf("the job ran all along the window")
	}
	out["index_pages_per_s_beside_job"] = round(liveRate)
	out["job_pages_during_live_index"] = besideLive
	// The job's rest runs out before the next measure.
	for c.Indexed()-before < jobPages*98/100 {
		time.Sleep(100 * time.Millisecond)
	}

	// b. The archive rebuilt into a fresh index (a lost index: the pages'
	// main content made again from the archived HTML, every core).
	fresh, err := cellsearch.Open(t.TempDir()+"/rebuild", cellsearch.Config{})
	if err != nil {
		t.Fatal(err)
	}
	before = running(1)
	start = time.Now()
	n, err := c.RebuildSearchInto(context.Background(), fresh)
	if err != nil {
		t.Fatal(err)
	}
	rebuild := time.Since(start)
	besideJob := c.Indexed() - before
	for c.Indexed()-before < jobPages*98/100 { // (the rest of the job, before the next measures)
		time.Sleep(100 * time.Millisecond)
	}
	fresh.Close()
	rebuildRate := float64(n) / rebuild.Seconds()
	t.Logf("indexing beside a job, a rebuild: the archive's %d pages (main content made again, index) rebuilt into a fresh index in %v: %.0f pages/s, while the job's %d pages were fetched, archived and indexed", n, rebuild.Round(time.Millisecond), rebuildRate, besideJob)
	out["rebuild_pages_per_s_beside_job"] = round(rebuildRate)
	out["rebuild_pages"] = n
	out["job_pages_during_rebuild"] = besideJob

	// 4. Index size (after every batch is written) and RSS.
	ix.Written(time.Minute)
	size := dirSize(filepath.Join(dataDir, "search"))
	rss, hwm := procStatus("VmRSS"), procStatus("VmHWM")
	t.Logf("index on disk %.1f MiB for %d pages; process RSS %s (peak %s: gate, ledger, cell and this test in one process)", float64(size)/(1<<20), ix.Count(), rss, hwm)
	out["index_mib"] = round(float64(size) / (1 << 20))
	out["rss"], out["rss_peak"] = rss, hwm

	// 5. The baseline: SQLite FTS5 over the same pages (the cell's own
	// conversion of each distinct page, one row per URL), and the same
	// documents added to a bleve index of ours without conversion.
	var docs []*cellsearch.Doc
	for j, root := range roots {
		corp, err := eval.Load(fmt.Sprintf("d%d", j), root, runtime.NumCPU())
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range corp.Docs {
			rel := strings.TrimPrefix(d.URL, eval.Base)
			d.URL = fmt.Sprintf("/d%d/%s", j, rel)
			docs = append(docs, d)
		}
	}
	var all []*cellsearch.Doc
	for k := 0; k < copies && len(all) < len(urls); k++ {
		for _, d := range docs {
			cp := *d
			cp.URL = fmt.Sprintf("%s/c%d%s", site.URL, k, d.URL)
			all = append(all, &cp)
		}
	}
	all = all[:min(len(all), len(urls))]
	start = time.Now()
	fts, err := eval.NewFTS5(t.TempDir(), all)
	if err != nil {
		t.Fatal(err)
	}
	defer fts.Close()
	ftsIndex := time.Since(start)
	oursIx, err := cellsearch.Open(t.TempDir()+"/docs", cellsearch.Config{})
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	for i := 0; i < len(all); i += 256 {
		if err := oursIx.Add(all[i:min(i+256, len(all))]...); err != nil {
			t.Fatal(err)
		}
	}
	oursIndex := time.Since(start)
	oursIx.Close()
	// Any of the words, title 10: the simplest setup (speed, not quality).
	rank := fts.Ranker(eval.FTS5Variant{Form: "or", Title: 10, Headings: 1})
	var base []time.Duration
	for _, q := range qs {
		t0 := time.Now()
		if _, err := rank(q); err != nil {
			t.Fatal(err)
		}
		base = append(base, time.Since(t0))
	}
	slices.Sort(base)
	t.Logf("FTS5 over the same %d pages: indexed in %v (%.0f pages/s, documents already converted; ours the same documents %v, %.0f pages/s); queries in process p50 %v p99 %v",
		len(all), ftsIndex.Round(time.Millisecond), float64(len(all))/ftsIndex.Seconds(), oursIndex.Round(time.Millisecond), float64(len(all))/oursIndex.Seconds(), pct(base, 50), pct(base, 99))
	out["fts5_pages_per_s"] = round(float64(len(all)) / ftsIndex.Seconds())
	out["ours_docs_pages_per_s"] = round(float64(len(all)) / oursIndex.Seconds())
	out["fts5_p50_ms"], out["fts5_p99_ms"] = ms(pct(base, 50)), ms(pct(base, 99))
	out["load_end"] = load()
	if p := os.Getenv("TRAWL_SEARCH_SPEED_OUT"); p != "" {
		b, _ := json.MarshalIndent(out, "", "  ")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func pct(d []time.Duration, p int) time.Duration {
	return d[(len(d)-1)*p/100].Round(10 * time.Microsecond)
}

func ms(d time.Duration) float64 { return round(float64(d.Microseconds()) / 1000) }

func round(x float64) float64 { return float64(int64(x*100+0.5)) / 100 }

func dirSize(dir string) int64 {
	var size int64
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if fi, err := e.Info(); err == nil {
				size += fi.Size()
			}
		}
		return nil
	})
	return size
}

func procStatus(field string) string {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field+":") {
			return strings.TrimSpace(strings.TrimPrefix(l, field+":"))
		}
	}
	return ""
}

// cpuSeconds is the CPU time this process has used (user and system).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

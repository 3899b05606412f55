package crawl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/testlog"

	"github.com/trawlhq/trawl/internal/browsertest"
	"github.com/trawlhq/trawl/internal/sysstat"
	"github.com/trawlhq/trawl/internal/testcorpus"
	"github.com/trawlhq/trawl/internal/testwait"
)

// loadRequests is the figure: 100 concurrent /crawl requests.
const loadRequests = 100

// memoryBoundMB is how far above the baseline the process tree may stay
// once the janitor has run.
const memoryBoundMB = 100

// TestLoad100Concurrent is the load test: 100 concurrent /crawl
// requests on the local corpus (postgresql-doc-15 served from loopback; the
// committed fixtures when it is not installed), about a fifth of them with
// one of three non-default viewports so cold browsers start and turn hot.
// At least 99 must succeed (success true and markdown not empty), and once
// the janitor has removed the idle browsers (the injected clock is moved
// past the idle thresholds) the memory of the process tree — this test
// process, the server in it, and every Chromium it started — must be back
// within 100 MB of the baseline measured after start-up and one warm-up
// page. Each client polls its task every 250 ms for at most 5 minutes, as a
// legacy client would.
func TestLoad100Concurrent(t *testing.T) {
	if raceEnabled {
		// The race detector's shadow memory grows the test process (server
		// and clients) by ~100 MB under this load and never gives it back:
		// a figure of the instrumentation, not of the server. make test
		// runs this test a second time without -race.
		t.Skip("memory bound measured without the race detector (make test runs it so)")
	}
	browsertest.Require(t)
	urls, corpus := loadCorpus(t, loadRequests)
	t.Logf("corpus: %s", corpus)

	clock := newFakeClock()
	// The janitor sweeps every 2 s: soon enough after the clock moves, and
	// not so often that its task expiry pass (which reads every stored task,
	// results and all) takes the CPU the load needs.
	ts := startServer(t, Config{Now: clock.Now, JanitorEvery: 2 * time.Second,
		Logger: testlog.New(t, slog.LevelWarn)})
	sampler := sysstat.New()
	// The test process is the server and its 100 clients at once: the
	// clients' decoded results are garbage the Go runtime would hand back
	// to the OS only after minutes. Collect and return it before each
	// reading, so the figure is what the server and its browsers hold.
	memMB := func() float64 {
		debug.FreeOSMemory()
		s, err := sampler.Sample()
		if err != nil {
			t.Fatalf("sample the process tree: %v", err)
		}
		return mbOf(s.MemoryBytes)
	}

	// Warm-up: one default page, then the baseline.
	warm := poll(t, ts.URL, "", submit(t, ts.URL, "", map[string]any{"urls": urls[0]}), 250*time.Millisecond, time.Minute)
	if warm.Result == nil || !warm.Result.Success {
		t.Fatalf("warm-up page: %+v", warm)
	}
	baseline := memMB()
	var hb healthPayload
	call(t, "GET", ts.URL+"/monitor/health", "", nil, &hb)
	var browsersBase BrowsersPayload
	call(t, "GET", ts.URL+"/monitor/browsers", "", nil, &browsersBase)
	t.Logf("baseline: %.1f MB process tree (%d processes; /monitor/health says %.1f MB), pool %s",
		baseline, hb.Container.Processes, hb.Container.MemoryMB, browserFigures(browsersBase))

	// Peak memory while the load runs.
	var peak atomic.Uint64 // MB × 10
	stopPeak := make(chan struct{})
	peakDone := make(chan struct{})
	go func() {
		defer close(peakDone)
		s := sysstat.New()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			if smp, err := s.Sample(); err == nil {
				v := uint64(mbOf(smp.MemoryBytes) * 10)
				for old := peak.Load(); v > old && !peak.CompareAndSwap(old, v); old = peak.Load() {
				}
			}
			select {
			case <-stopPeak:
				return
			case <-tick.C:
			}
		}
	}()

	viewports := []map[string]int{{"width": 1024, "height": 768}, {"width": 800, "height": 600}, {"width": 1440, "height": 900}}
	type outcome struct {
		ok   bool
		why  string
		view string
	}
	outcomes := make([]outcome, loadRequests)
	start := time.Now()
	cpuStart := goCPU()
	var wg sync.WaitGroup
	startLine := make(chan struct{})
	for i := range loadRequests {
		req := map[string]any{"urls": urls[i]}
		view := "default"
		if i%5 == 4 { // 20 of 100
			vp := viewports[(i/5)%len(viewports)]
			req["browser_config"] = map[string]any{"viewport": vp}
			view = fmt.Sprintf("%dx%d", vp["width"], vp["height"])
		}
		wg.Go(func() {
			<-startLine
			ok, why := crawlAsClient(ts.URL, req, 250*time.Millisecond, 5*time.Minute)
			outcomes[i] = outcome{ok, why, view}
		})
	}
	close(startLine)
	wg.Wait()
	elapsed := time.Since(start)
	cpuGo := goCPU() - cpuStart
	close(stopPeak)
	<-peakDone
	peakMB := float64(peak.Load()) / 10

	succeeded := 0
	var failures []string
	for i, o := range outcomes {
		if o.ok {
			succeeded++
		} else {
			failures = append(failures, fmt.Sprintf("%s (%s): %s", urls[i], o.view, o.why))
		}
	}
	var ld [3]float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscan(string(b), &ld[0], &ld[1], &ld[2])
	}
	t.Logf("load: %d/%d succeeded in %s, %.2f pages/s; memory peak %.1f MB (baseline %.1f MB); Go process CPU %s; host load average %.1f on %d CPUs",
		succeeded, loadRequests, elapsed.Round(time.Millisecond), float64(loadRequests)/elapsed.Seconds(), peakMB, baseline,
		cpuGo.Round(time.Millisecond), ld[0], runtime.NumCPU())
	if len(failures) > 0 {
		t.Logf("failed requests:\n%s", strings.Join(failures, "\n"))
	}
	if succeeded < loadRequests*99/100 {
		t.Errorf("%d of %d requests succeeded, want at least %d", succeeded, loadRequests, loadRequests*99/100)
	}

	var busy BrowsersPayload
	call(t, "GET", ts.URL+"/monitor/browsers", "", nil, &busy)
	afterLoad := memMB()
	t.Logf("after the load, before the janitor: %.1f MB; pool %s", afterLoad, browserFigures(busy))
	if len(busy.Hot) == 0 {
		t.Errorf("no hot browser after the load: %d requests per viewport should have promoted them (after %d uses)", loadRequests/5/len(viewports), PromoteAfter)
	}

	// The janitor: every browser but the permanent one is idle past its
	// threshold (30 minutes is the longest, for hot browsers at low memory
	// pressure) on the injected clock, and the next sweep removes them.
	clock.Advance(31 * time.Minute)
	testwait.Until(t, 30*time.Second, "the janitor removes the idle hot and cold browsers", func() bool {
		var b BrowsersPayload
		call(t, "GET", ts.URL+"/monitor/browsers", "", nil, &b)
		return len(b.Hot) == 0 && len(b.Cold) == 0 && len(b.Permanent) == 1
	})

	var jl []JanitorEntry
	call(t, "GET", ts.URL+"/monitor/logs/janitor?limit=100", "", nil, &jl)
	removed := map[string]float64{}
	for _, e := range jl {
		if e.Action == "remove_idle" || e.Action == "evict" {
			removed[e.BrowserID] = float64(e.MemoryFreedMB)
		}
	}
	t.Logf("janitor removed %d browsers: %v (MB each)", len(removed), removed)
	for _, l := range [][]BrowserInfo{busy.Hot, busy.Cold} {
		for _, b := range l {
			if _, ok := removed[b.BrowserID]; !ok {
				t.Errorf("janitor log has no removal of %s browser %s: %+v", b.Tier, b.BrowserID, jl)
			}
		}
	}

	// The removed browsers close in the background: wait (a bounded while)
	// for the process tree to come back within the bound.
	var final float64
	deadline := time.Now().Add(30 * time.Second)
	for {
		final = memMB()
		if final-baseline <= memoryBoundMB || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	var idle BrowsersPayload
	call(t, "GET", ts.URL+"/monitor/browsers", "", nil, &idle)
	var ha healthPayload
	call(t, "GET", ts.URL+"/monitor/health", "", nil, &ha)
	t.Logf("after the janitor: %.1f MB process tree (%+.1f MB on the baseline; %d processes, /monitor/health says %.1f MB); pool %s",
		final, final-baseline, ha.Container.Processes, ha.Container.MemoryMB, browserFigures(idle))
	if final-baseline > memoryBoundMB {
		perm := 0.0
		if len(idle.Permanent) == 1 && len(browsersBase.Permanent) == 1 {
			perm = float64(idle.Permanent[0].MemoryMB - browsersBase.Permanent[0].MemoryMB)
		}
		t.Errorf("memory after the janitor is %.1f MB, %.1f MB over the baseline of %.1f MB (bound %d MB); the permanent browser grew by %.1f MB (%s → %s)",
			final, final-baseline, baseline, memoryBoundMB, perm, browserFigures(browsersBase), browserFigures(idle))
	}

	// The server still answers a default request after all this.
	if a := poll(t, ts.URL, "", submit(t, ts.URL, "", map[string]any{"urls": urls[1]}), 250*time.Millisecond, time.Minute); a.Result == nil || !a.Result.Success {
		t.Errorf("a request after the janitor: %+v", a)
	}
}

// crawlAsClient is one legacy client: POST /crawl, then GET the task every
// interval until it is done or limit passes. It reports whether the page
// came back with success and markdown, and if not, why. It runs on its own
// goroutine, so it returns errors instead of failing the test.
func crawlAsClient(base string, req map[string]any, interval, limit time.Duration) (bool, string) {
	body, _ := json.Marshal(req)
	resp, err := http.Post(base+"/crawl", "application/json", bytes.NewReader(body))
	if err != nil {
		return false, "POST /crawl: " + err.Error()
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var sub struct {
		TaskID string `json:"task_id"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(raw, &sub) != nil || sub.TaskID == "" {
		return false, fmt.Sprintf("POST /crawl: %d %s", resp.StatusCode, raw)
	}
	deadline := time.Now().Add(limit)
	for {
		resp, err := http.Get(base + "/task/" + sub.TaskID)
		if err != nil {
			return false, "GET /task: " + err.Error()
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var a taskAnswer
		if resp.StatusCode != 200 || json.Unmarshal(raw, &a) != nil {
			return false, fmt.Sprintf("GET /task/%s: %d %.300s", sub.TaskID, resp.StatusCode, raw)
		}
		switch a.Status {
		case StatusCompleted:
			switch {
			case a.Result == nil:
				return false, "completed without a result"
			case !a.Result.Success:
				return false, "result failed: " + string(a.Result.ErrorMessage)
			case strings.TrimSpace(a.Result.Markdown) == "":
				return false, "result has no markdown"
			}
			return true, ""
		case StatusFailed:
			return false, "task failed: " + a.Error
		case StatusPending, StatusProcessing:
		default:
			return false, "unknown status " + a.Status
		}
		if time.Now().After(deadline) {
			return false, fmt.Sprintf("still %s after %s", a.Status, limit)
		}
		time.Sleep(interval)
	}
}

// goCPU is the user and system CPU time of this process (the server and the
// test clients; not the browsers).
func goCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// browserFigures is the pool's memory, browser by browser.
func browserFigures(b BrowsersPayload) string {
	var parts []string
	for _, l := range [][]BrowserInfo{b.Permanent, b.Hot, b.Cold} {
		for _, x := range l {
			parts = append(parts, fmt.Sprintf("%s(%s, %s, %d pages)=%.1f MB", x.BrowserID, x.Tier, x.Config, x.RequestCount, x.MemoryMB))
		}
	}
	return fmt.Sprintf("%d browsers, %.1f MB [%s]", b.Summary.TotalCount, b.Summary.TotalMemoryMB, strings.Join(parts, ", "))
}

// loadCorpus serves n page URLs from loopback: n pages spread evenly over
// postgresql-doc-15 when it is installed (scripts/deps.sh test), else the
// committed fixtures of this package and of cell/content, reused in turn.
// It skips only when neither is there and no browser run is required.
func loadCorpus(t *testing.T, n int) ([]string, string) {
	t.Helper()
	if names, _ := filepath.Glob(filepath.Join(testcorpus.PostgresDocs, "*.html")); len(names) >= n {
		sort.Strings(names)
		srv := testcorpus.Serve(t, testcorpus.PostgresDocs)
		urls := make([]string, n)
		step := len(names) / n
		for i := range urls {
			urls[i] = srv.URL + "/" + filepath.Base(names[i*step])
		}
		return urls, fmt.Sprintf("%s (%d of its %d pages)", testcorpus.PostgresDocs, n, len(names))
	}
	dirs := map[string]string{"/site/": "testdata/site", "/extract/": "extract/testdata", "/content/": "../content/testdata"}
	mux := http.NewServeMux()
	var pages []string
	for prefix, dir := range dirs {
		m, _ := filepath.Glob(filepath.Join(dir, "*.html"))
		for _, p := range m {
			pages = append(pages, prefix+filepath.Base(p))
		}
		mux.Handle(prefix, http.StripPrefix(prefix, http.FileServer(http.Dir(dir))))
	}
	if len(pages) == 0 {
		if v := os.Getenv(browsertest.RequireEnv); v != "" && v != "0" {
			t.Fatalf("no corpus: neither %s nor the fixtures in testdata/site and ../content/testdata", testcorpus.PostgresDocs)
		}
		t.Skipf("no corpus: %s is not installed (bash scripts/deps.sh test) and there are no fixtures", testcorpus.PostgresDocs)
	}
	sort.Strings(pages)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	urls := make([]string, n)
	for i := range urls {
		// A query makes each URL distinct; the page is the same.
		urls[i] = fmt.Sprintf("%s%s?n=%d", srv.URL, pages[i%len(pages)], i)
	}
	return urls, fmt.Sprintf("fixtures (%s is not installed): %d pages of testdata/site and ../content/testdata, reused", testcorpus.PostgresDocs, len(pages))
}

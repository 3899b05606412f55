package browser

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/nettest"
	"github.com/trawlhq/trawl/internal/testwait"

	"github.com/trawlhq/trawl/cell/fetch"
)

// smallSite serves small pages that run a little script, as most pages do.
func smallSite(t *testing.T) *nettest.Server {
	return nettest.NewServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The data: icon spares each page a favicon request.
		html(fmt.Sprintf(`<!doctype html><title>%[1]s</title><link rel="icon" href="data:,"><h1>page %[1]s</h1><p id="n"></p>
<script>document.getElementById("n").textContent = "script ran on " + location.pathname</script>`, r.URL.Path))(w, r)
	}))
}

// gate is a handler that holds requests until opened, and says when the
// first has arrived.
type gate struct {
	arrived chan struct{}
	open    chan struct{}
	once    sync.Once
	n       atomic.Int64
}

func newGate() *gate {
	return &gate{arrived: make(chan struct{}, 64), open: make(chan struct{})}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/favicon.ico" {
		http.NotFound(w, r)
		return
	}
	g.n.Add(1)
	g.arrived <- struct{}{}
	select {
	case <-g.open:
	case <-r.Context().Done():
		return
	}
	html(`<!doctype html><p>slow page</p>`)(w, r)
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

// await waits for n requests to arrive.
func (g *gate) await(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-g.arrived:
		case <-time.After(30 * time.Second):
			t.Fatal("the slow page was never requested")
		}
	}
}

// leakPagesEnv sets how many pages TestFiveHundredPagesLeaveNoProcesses
// renders. The issue asks for 500; but every page gets a fresh context,
// hence a fresh renderer process, and 500 of them take minutes of both
// cores, over the suite's budget (docs/performance.md, "What a
// fresh-context page costs"). By default the
// test runs 60 pages (24 with -short), recycling scaled to match (a new
// browser every 2/5 of the run, as every 200 of 500 by default), so the
// same paths run: two recycles with their drains, then Close. Set
// TRAWL_BROWSER_LEAK_PAGES=500 for the count with the default
// recycling.
const leakPagesEnv = "TRAWL_BROWSER_LEAK_PAGES"

// TestFiveHundredPagesLeaveNoProcesses is the leak test: pages
// through the default pool, eight callers at a time (twice the page
// slots), with the recycling they bring; then Close. Chromium processes
// are counted before, at their peak and after.
func TestFiveHundredPagesLeaveNoProcesses(t *testing.T) {
	requireBrowser(t)
	pages := 60
	if testing.Short() {
		pages = 24
	}
	if v := os.Getenv(leakPagesEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q is not a page count", leakPagesEnv, v)
		}
		pages = n
	}
	recycleAfter := max(pages*2/5, 1) // 200 for 500 pages: the default
	const callers = 8
	before := countChromium(t)
	srv := smallSite(t)
	// Admission is not under test here: callers wait as long as it takes.
	pool := newTestPool(t, Config{RecycleAfterPages: recycleAfter, AcquireTimeout: 2 * time.Minute})
	eng := NewEngine(pool, EngineConfig{})

	var (
		next     atomic.Int64
		failures atomic.Int64
		firstErr sync.Once
		peak     chromiumCount
		peakPSS  int64
		wg       sync.WaitGroup
	)
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
			if c := countChromium(t); c.ours > peak.ours {
				peak = c
			}
			if pss, err := pool.PSS(); err == nil && pss > peakPSS {
				peakPSS = pss
			}
		}
	}()
	start := time.Now()
	for range callers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(pages) {
					return
				}
				path := fmt.Sprintf("/p/%d", i)
				resp, err := eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL + path})
				if err == nil && !bytes.Contains(resp.Body, []byte("script ran on "+path)) {
					err = fmt.Errorf("page %s not rendered: %.200s", path, resp.Body)
				}
				if err != nil {
					failures.Add(1)
					firstErr.Do(func() { t.Errorf("page %d: %v", i, err) })
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(stopSampling)
	<-sampled
	st := pool.Stats()
	during := countChromium(t)

	closeStart := time.Now()
	if err := pool.Close(); err != nil {
		t.Fatal(err)
	}
	closeTook := time.Since(closeStart)
	left := running(launched.all())
	after := countChromium(t)

	t.Logf("%d pages, %d callers, %d page slots, recycling every %d pages: %s (%.1f pages/s), %d failed", pages, callers, DefaultPagesPerBrowser, recycleAfter, took.Round(time.Millisecond), float64(pages)/took.Seconds(), failures.Load())
	t.Logf("stats: %+v", st)
	t.Logf("chromium processes: before %s; peak %s; at the end %s; after Close %s (Close took %s)", before, peak, during, after, closeTook.Round(time.Millisecond))
	t.Logf("peak PSS of the pool's browsers: %d MiB", peakPSS>>20)
	if failures.Load() != 0 {
		t.Errorf("%d of %d pages failed", failures.Load(), pages)
	}
	if st.PagesServed != int64(pages) || st.PagesInUse != 0 || st.Crashes != 0 {
		t.Errorf("stats: %+v", st)
	}
	// The last recycle may still be under way when the run ends (it counts
	// once the replacement is up), so one fewer is allowed.
	if want := max(int64(pages/recycleAfter)-1, 1); st.Recycles < want {
		t.Errorf("%d recycles; want at least %d (one per %d pages)", st.Recycles, want, recycleAfter)
	}
	if left != 0 || after.ours != 0 {
		t.Errorf("after Close: %d processes of our browsers left; census %s", left, after)
	}
	if after.live > before.live {
		// Other processes on the machine may run Chromium too: only ours
		// are asserted.
		t.Logf("note: more Chromium processes on the machine after (%s) than before (%s)", after, before)
	}
}

// TestKilledBrowserIsReplacedAndItsPagesRetried kills the browser with
// SIGKILL while four pages are in flight on it: each is retried once on
// the replacement and succeeds, and nothing of the dead browser is left.
func TestKilledBrowserIsReplacedAndItsPagesRetried(t *testing.T) {
	pool := newTestPool(t, Config{})
	eng := NewEngine(pool, EngineConfig{})
	g := newGate()
	srv := nettest.NewServer(t, g)

	pool.mu.Lock()
	victim := pool.current[0]
	pool.mu.Unlock()
	before := running([]*instance{victim})

	const inflight = 4
	errs := make(chan error, inflight)
	for i := range inflight {
		go func() {
			resp, err := eng.Fetch(t.Context(), &fetch.Request{URL: fmt.Sprintf("%s/slow/%d", srv.URL, i)})
			if err == nil && !bytes.Contains(resp.Body, []byte("slow page")) {
				err = fmt.Errorf("body: %s", resp.Body)
			}
			errs <- err
		}()
	}
	g.await(t, inflight)
	killed := time.Now()
	if err := syscall.Kill(victim.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Let the retries through once they come.
	go func() {
		g.await(t, inflight)
		g.release()
	}()
	for range inflight {
		if err := <-errs; err != nil {
			t.Errorf("page after the crash: %v", err)
		}
	}
	recovered := time.Since(killed)
	testwait.Until(t, 10*time.Second, "the dead browser's processes reaped", func() bool { return running([]*instance{victim}) == 0 })
	st := pool.Stats()
	t.Logf("killed browser %d (%d processes): %d pages retried and served in %s; stats %+v", victim.pid, before, inflight, recovered.Round(time.Millisecond), st)
	if st.Crashes != 1 || st.Retries != inflight || st.Browsers != 1 {
		t.Errorf("stats: %+v; want 1 crash, %d retries, 1 browser", st, inflight)
	}
	if pids := pool.currentPIDs(); len(pids) != 1 || pids[0] == victim.pid {
		t.Errorf("serving browsers %v; want one that is not %d", pids, victim.pid)
	}
	if err := pool.Close(); err != nil {
		t.Fatal(err)
	}
	if n := running(launched.all()); n != 0 {
		t.Errorf("%d processes left after Close", n)
	}
}

// TestFleetBusy holds the only page slot with a slow page: the next
// request fails with ErrFleetBusy after AcquireTimeout.
func TestFleetBusy(t *testing.T) {
	const acquire = 200 * time.Millisecond
	pool := newTestPool(t, Config{Browsers: 1, PagesPerBrowser: 1, AcquireTimeout: acquire})
	eng := NewEngine(pool, EngineConfig{})
	g := newGate()
	srv := nettest.NewServer(t, g)
	first := make(chan error, 1)
	go func() {
		_, err := eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL + "/slow"})
		first <- err
	}()
	g.await(t, 1)

	start := time.Now()
	_, err := eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL + "/next"})
	took := time.Since(start)
	if !errors.Is(err, fetch.ErrFleetBusy) {
		t.Fatalf("second request: %v; want ErrFleetBusy", err)
	}
	if took < acquire || took > acquire+time.Second {
		t.Errorf("refused after %s; want just after %s", took, acquire)
	}
	g.release()
	if err := <-first; err != nil {
		t.Errorf("the slow page: %v", err)
	}
	if st := pool.Stats(); st.FleetBusy != 1 || st.PagesServed != 1 {
		t.Errorf("stats: %+v", st)
	}
	// The slot is free again.
	if _, err := eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL + "/after"}); err != nil {
		t.Errorf("after the slow page: %v", err)
	}
}

// TestRecycleDrainsTheOldBrowser recycles a browser while a slow page is
// still open on it: new pages go to the replacement, the slow one
// finishes on the old browser, which is then closed.
func TestRecycleDrainsTheOldBrowser(t *testing.T) {
	pool := newTestPool(t, Config{RecycleAfterPages: 3})
	eng := NewEngine(pool, EngineConfig{})
	g := newGate()
	slow := nettest.NewServer(t, g)
	fast := smallSite(t)

	pool.mu.Lock()
	old := pool.current[0]
	pool.mu.Unlock()
	slowDone := make(chan error, 1)
	go func() {
		_, err := eng.Fetch(t.Context(), &fetch.Request{URL: slow.URL + "/slow"})
		slowDone <- err
	}()
	g.await(t, 1)
	for i := range 3 {
		if _, err := eng.Fetch(t.Context(), &fetch.Request{URL: fmt.Sprintf("%s/%d", fast.URL, i)}); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Until(t, 30*time.Second, "a replacement serving", func() bool {
		pids := pool.currentPIDs()
		return len(pids) == 1 && pids[0] != old.pid
	})

	if st := pool.Stats(); st.Draining != 1 || st.Browsers != 2 || st.Recycles != 1 {
		t.Errorf("while draining: %+v", st)
	}
	for i := range 2 { // under the replacement's own recycling
		if _, err := eng.Fetch(t.Context(), &fetch.Request{URL: fmt.Sprintf("%s/new/%d", fast.URL, i)}); err != nil {
			t.Fatal(err)
		}
	}
	pool.mu.Lock()
	oldServed := old.served
	pool.mu.Unlock()
	if oldServed != 3 {
		t.Errorf("the draining browser served %d pages; want 3 (new pages go to the replacement)", oldServed)
	}
	if !alive(old) {
		t.Fatal("the old browser closed with a page in flight")
	}
	g.release()
	if err := <-slowDone; err != nil {
		t.Errorf("the slow page on the draining browser: %v", err)
	}
	testwait.Until(t, 15*time.Second, "the drained browser closed", func() bool { return !alive(old) })
	if st := pool.Stats(); st.Draining != 0 || st.Browsers != 1 || st.Crashes != 0 {
		t.Errorf("after draining: %+v", st)
	}
}

// TestRecycleAboveMemory recycles browsers over a (tiny) memory limit.
func TestRecycleAboveMemory(t *testing.T) {
	pool := newTestPool(t, Config{RecycleAboveMB: 1, MemoryCheckInterval: 100 * time.Millisecond})
	eng := NewEngine(pool, EngineConfig{})
	srv := smallSite(t)
	pss, err := pool.PSS()
	if err != nil || pss < 10<<20 {
		t.Fatalf("PSS() = %d, %v; want a browser's worth", pss, err)
	}
	testwait.Until(t, 30*time.Second, "a recycle for memory", func() bool { return pool.Stats().Recycles >= 1 })
	if _, err := eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL}); err != nil {
		t.Errorf("fetch while recycling: %v", err)
	}
	st := pool.Stats()
	t.Logf("browser PSS %d MiB; stats %+v", pss>>20, st)
	if st.PSS == 0 || st.Crashes != 0 {
		t.Errorf("stats: %+v", st)
	}
}

// TestCloseWithPagesInFlight closes the pool under a page: the page fails,
// Close returns, no process is left and later requests are refused.
func TestCloseWithPagesInFlight(t *testing.T) {
	pool := newTestPool(t, Config{})
	eng := NewEngine(pool, EngineConfig{})
	g := newGate()
	srv := nettest.NewServer(t, g)
	defer g.release()
	done := make(chan error, 1)
	go func() {
		_, err := eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL + "/slow"})
		done <- err
	}()
	g.await(t, 1)
	start := time.Now()
	if err := pool.Close(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	select {
	case err := <-done:
		if err == nil {
			t.Error("the page in flight succeeded after Close")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the page in flight did not end")
	}
	if n := running(launched.all()); n != 0 {
		t.Errorf("%d processes left after Close", n)
	}
	if _, err := eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL}); !errors.Is(err, ErrClosed) {
		t.Errorf("fetch after Close: %v", err)
	}
	t.Logf("Close with a page in flight took %s", took.Round(time.Millisecond))
	if c := countChromium(t); c.ours != 0 {
		t.Errorf("census after Close: %s", c)
	}
}

// TestNoGoroutinesLeftAfterClose checks the pool's own goroutines stop.
func TestNoGoroutinesLeftAfterClose(t *testing.T) {
	requireBrowser(t)
	srv := smallSite(t)
	before := runtime.NumGoroutine()
	pool := newTestPool(t, Config{})
	eng := NewEngine(pool, EngineConfig{})
	for i := range 5 {
		if _, err := eng.Fetch(t.Context(), &fetch.Request{URL: fmt.Sprintf("%s/%d", srv.URL, i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pool.Close(); err != nil {
		t.Fatal(err)
	}
	var after int
	deadline := time.Now().Add(10 * time.Second)
	for {
		after = runtime.NumGoroutine()
		if after <= before+2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if after > before+2 {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		t.Errorf("%d goroutines before, %d after Close:\n%s", before, after, trimStacks(string(buf[:n])))
	}
}

func trimStacks(s string) string {
	var keep []string
	for _, g := range strings.Split(s, "\n\n") {
		if strings.Contains(g, "testing.") && !strings.Contains(g, "browser.") {
			continue
		}
		keep = append(keep, g)
	}
	return strings.Join(keep, "\n\n")
}

package crawl

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/sysstat"
	"github.com/trawlhq/trawl/internal/testwait"
)

// driverProcs finds the Playwright drivers this process runs (node
// children whose command line is `<dir>/node <dir>/package/cli.js
// run-driver`) and sums their memory (PSS).
func driverProcs(t testing.TB) (pids []int, pssMB float64) {
	t.Helper()
	procs, err := sysstat.Processes()
	if err != nil {
		t.Fatal(err)
	}
	self := os.Getpid()
	for _, p := range procs {
		if p.PPID != self || p.State == 'Z' {
			continue
		}
		args, err := sysstat.Cmdline(p.PID)
		if err != nil || len(args) < 3 || args[len(args)-1] != "run-driver" || !strings.HasSuffix(args[len(args)-2], "cli.js") {
			continue
		}
		pids = append(pids, p.PID)
	}
	if len(pids) > 0 {
		n, err := sysstat.SumPSS(pids)
		if err != nil {
			t.Fatal(err)
		}
		pssMB = mbOf(n)
	}
	return pids, pssMB
}

// TestOneDriverForThePool: the permanent browser and the cold and hot ones
// run on one Playwright driver (one node process, however many tier
// browsers are alive). When it is killed it is restarted once for all of
// them, the page in flight is retried, and every tier serves again;
// closing a tier browser (cleanup) leaves the driver to the others.
func TestOneDriverForThePool(t *testing.T) {
	st := startSite(t)
	ts := startServer(t, Config{})
	crawlWith := func(t *testing.T, viewport map[string]int) *Result {
		t.Helper()
		req := map[string]any{"urls": st.URL + "/article.html", "wait_for": "main"}
		if viewport != nil {
			req["browser_config"] = map[string]any{"viewport": viewport}
		}
		a := poll(t, ts.URL, "", submit(t, ts.URL, "", req), 50*time.Millisecond, 2*time.Minute)
		if a.Result == nil || !a.Result.Success {
			t.Fatalf("crawl: %+v", a)
		}
		return a.Result
	}
	views := []map[string]int{nil, {"width": 800, "height": 600}, {"width": 1024, "height": 768}}
	ids := map[string]bool{}
	for _, v := range views {
		ids[crawlWith(t, v).BrowserID] = true
	}
	b := browsers(t, ts)
	if len(ids) != 3 || b.Summary.TotalCount != 3 {
		t.Fatalf("want 3 tier browsers alive, served by %v; pool %s", ids, browserFigures(b))
	}
	pids, mb := driverProcs(t)
	t.Logf("%d tier browsers alive: %d Playwright driver processes, %.1f MB PSS (pool %s)", b.Summary.TotalCount, len(pids), mb, browserFigures(b))
	if len(pids) != 1 {
		t.Fatalf("%d driver processes (%v) for %d tier browsers; want exactly 1", len(pids), pids, b.Summary.TotalCount)
	}
	if got := ts.driver.PID(); got != pids[0] {
		t.Fatalf("the server's driver is %d; the process found is %d", got, pids[0])
	}

	// Killed with a page in flight: one restart for every tier, and the
	// page is retried on the new driver's browser.
	slow := submit(t, ts.URL, "", map[string]any{"urls": st.URL + "/slow", "wait_for": "main"})
	testwait.Until(t, time.Minute, "the slow page requested", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.seen["/slow"] > 0
	})

	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st.release()
	if a := poll(t, ts.URL, "", slow, 50*time.Millisecond, 2*time.Minute); a.Result == nil || !a.Result.Success {
		t.Errorf("the page in flight when the driver died: %+v", a)
	}
	for _, v := range views {
		crawlWith(t, v)
	}
	testwait.Until(t, 30*time.Second, "one new driver", func() bool {
		p, _ := driverProcs(t)
		return len(p) == 1 && p[0] != pids[0]
	})

	if n := ts.driver.Restarts(); n != 1 {
		t.Errorf("the driver was restarted %d times for %d browsers; want once", n, b.Summary.TotalCount)
	}
	if b := browsers(t, ts); b.Summary.TotalCount != 3 {
		t.Errorf("after the restart: pool %s", browserFigures(b))
	}

	// Closing tier browsers leaves the driver to the permanent one.
	if code := call(t, "POST", ts.URL+"/monitor/actions/cleanup", "", nil, nil); code != 200 {
		t.Fatalf("cleanup: %d", code)
	}
	crawlWith(t, nil)
	if p, _ := driverProcs(t); len(p) != 1 {
		t.Errorf("after cleanup: %d driver processes", len(p))
	}
	ts.stop()
	testwait.Until(t, 10*time.Second, "no driver after Close", func() bool {
		p, _ := driverProcs(t)
		return len(p) == 0
	})

}

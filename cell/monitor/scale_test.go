package monitor

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/monstore"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/store"
)

// TestScale is the monitor load figure of docs/performance.md: N monitors
// (default 1,000) on one service, each checked every TRAWL_MONITOR_EVERY
// (default 20 s, twelve times the load of the spec's 4-minute minimum)
// against a local site of N distinct pages, on the real clock and the
// real scheduler (Run), for three intervals. It reports how late the
// latest check was against its due time (the bar: 10 % of the interval),
// checks per second, CPU time and RSS of the test process (service and
// site together). An unchanged page costs a fetch, a parse and a hash
// comparison: the figure counts the diffs, which must be none.
//
// With TRAWL_MONITOR_SHARED=1 the service uses the region's store as a
// cell does: through monstore.Client, signed HTTP to a monstore.Server on
// loopback (the gate's side, in this process).
//
//	TRAWL_MONITOR_SCALE=1000 go test ./cell/monitor/ -run TestScale -v
func TestScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("TRAWL_MONITOR_SCALE"))
	if n <= 0 {
		t.Skip("set TRAWL_MONITOR_SCALE=1000 (docs/performance.md)")
	}
	every := 20 * time.Second
	if v, err := time.ParseDuration(os.Getenv("TRAWL_MONITOR_EVERY")); err == nil {
		every = v
	}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<html><head><title>Item %[1]s</title></head><body><nav>Home · Shop</nav><main><article>
<h1>Item %[1]s</h1><p>The item at %[1]s, described in enough words to be the main content of its page, with a table of prices.</p>
<table><thead><tr><th>Product</th><th>Price</th></tr></thead><tbody><tr><td>Widget %[1]s</td><td>50</td></tr><tr><td>Gadget</td><td>20</td></tr></tbody></table>
<p>%[2]s</p></article></main><footer>Rendered at %[3]s</footer></body></html>`, r.URL.Path, strings.Repeat("More text about the item. ", 40), time.Now().Format(time.TimeOnly))
	}))
	defer site.Close()
	e := newEnv(t, "", func(c *Config) {
		c.Now = time.Now
		c.MinEvery = every
		c.Limits = Limits{Account: n, Fast: n, Host: n}
		if os.Getenv("TRAWL_MONITOR_SHARED") == "1" {
			st, err := store.Open(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			keys, _ := regionauth.ParseKeys(regionauth.NewKey())
			srv := httptest.NewServer(monstore.NewServer(monstore.NewLocal(st, monstore.LocalConfig{}), regionauth.NewVerifier(keys, nil), nil))
			t.Cleanup(srv.Close)
			addr := srv.Listener.Addr().String()
			c.Shared = &monstore.Client{Gate: regionauth.Gate{Keys: keys, Addr: func() string { return addr }}}
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	created := time.Now()
	for i := range n {
		if _, err := e.svc.Create(ctx, "acct1", &Request{URL: str(fmt.Sprintf("%s/item/%d", site.URL, i)), Every: str(every.String())}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d monitors created in %s", n, time.Since(created).Round(time.Millisecond))
	var before syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	start := time.Now()
	done := make(chan struct{})
	go func() { e.svc.Run(ctx); close(done) }()
	deadline := time.NewTimer(3 * every)
	<-deadline.C
	cancel()
	<-done
	elapsed := time.Since(start)
	var after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) * time.Nanosecond
	st := e.svc.Stats()
	rss := readRSS()
	t.Logf("%d monitors every %s for %s: %d checks (%.1f/s; %d unchanged, %d diffs), latest end of a check %s after its due time (%.1f %% of the interval; latest baseline %s after creation); CPU %s (%.0f %% of one core); RSS %d MiB (max %d MiB)",
		n, every, elapsed.Round(time.Second), st.Checks, float64(st.Checks)/elapsed.Seconds(), st.Unchanged, st.Diffs,
		st.MaxLate.Round(time.Millisecond), 100*st.MaxLate.Seconds()/every.Seconds(), st.MaxBaselineLate.Round(time.Millisecond), cpu.Round(time.Millisecond),
		100*cpu.Seconds()/elapsed.Seconds(), rss>>20, after.Maxrss>>10)
	t.Logf("latest start of a check %s after its due time (%.1f %% of the interval)", st.MaxStartLate.Round(time.Millisecond), 100*st.MaxStartLate.Seconds()/every.Seconds())
	if st.MaxStartLate > every/10 {
		t.Errorf("a check started %s late: more than 10 %% of %s", st.MaxStartLate, every)
	}
	if want := int64(3 * n); st.Checks < want*9/10 {
		t.Errorf("%d checks in three intervals, want about %d", st.Checks, want)
	}
	if st.Diffs != 0 {
		t.Errorf("%d diffs of unchanged pages", st.Diffs)
	}
}

func readRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

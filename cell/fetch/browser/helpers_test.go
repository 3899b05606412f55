package browser

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/testlog"

	"github.com/trawlhq/trawl/internal/browsertest"
	"github.com/trawlhq/trawl/internal/sysstat"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

// requireBrowser skips t when no browser is installed, or fails it when
// TRAWL_REQUIRE_BROWSER is set, like internal/browsertest.
func requireBrowser(t testing.TB) {
	t.Helper()
	browsertest.Require(t)
}

// testConfig fills what tests need: the driver where the test setup puts
// it, and the pool's log in the test's.
func testConfig(t testing.TB, cfg Config) Config {
	cfg.DriverDir = browsertest.DriverDir()
	if p := os.Getenv("PLAYWRIGHT_NODEJS_PATH"); p != "" {
		cfg.NodePath = p
	}
	if cfg.Logger == nil {
		cfg.Logger = testlog.New(t, slog.LevelInfo) // stops after the pool's Close, registered later
	}
	return cfg
}

// newTestPool starts a pool that may reach loopback, closed at cleanup.
func newTestPool(t testing.TB, cfg Config) *Pool {
	t.Helper()
	cfg.AllowPrivateNetworks = true
	return startPool(t, cfg, nil)
}

// guardedPool starts a pool with the guard on, whose notion of a public
// address is widened to the loopback addresses in public, so a test can
// serve a "public" site on 127.0.0.1 and check that everything else on
// loopback is still refused.
func guardedPool(t testing.TB, cfg Config, public ...netip.Addr) *Pool {
	t.Helper()
	cfg.AllowPrivateNetworks = false
	return startPool(t, cfg, func(a netip.Addr) bool {
		for _, p := range public {
			if a.Unmap().WithZone("") == p {
				return true
			}
		}
		return urlpolicy.IsPublic(a)
	})
}

func startPool(t testing.TB, cfg Config, public func(netip.Addr) bool) *Pool {
	t.Helper()
	requireBrowser(t)
	cfg = testConfig(t, cfg)
	if public == nil {
		public = urlpolicy.IsPublic
	}
	cfg.onLaunch = launched.add
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := newPool(ctx, cfg, public)
	if err != nil {
		t.Fatalf("new pool: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close pool: %v", err)
		}
	})
	return p
}

// html answers with a page.
func html(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, body)
	}
}

// chromiumCount is what a census of Chromium processes found.
type chromiumCount struct {
	live, zombies int
	ours          int // live, of one of our pools' browsers or below this test process
}

func (c chromiumCount) String() string {
	return fmt.Sprintf("%d live (%d ours), %d zombies", c.live, c.ours, c.zombies)
}

// countChromium walks /proc for Chromium processes (their executable in
// /usr/lib/chromium, or named chrom* once they are zombies). Those of this
// test binary's pools, or below this process, are "ours".
func countChromium(t testing.TB) chromiumCount {
	t.Helper()
	procs, err := sysstat.Processes()
	if err != nil {
		t.Fatal(err)
	}
	parent := make(map[int]int, len(procs))
	for _, p := range procs {
		parent[p.PID] = p.PPID
	}
	self := os.Getpid()
	below := func(pid int) bool {
		for i := 0; pid > 1 && i < 64; i++ {
			if pid == self {
				return true
			}
			pid = parent[pid]
		}
		return false
	}
	ours := make(map[int]bool)
	for _, in := range launched.all() {
		for _, pid := range instanceProcs(procs, in) {
			ours[pid] = true
		}
	}
	var c chromiumCount
	for _, p := range procs {
		if p.State == 'Z' {
			comm, _ := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/comm")
			if strings.HasPrefix(string(comm), "chrom") {
				c.zombies++
			}
			continue
		}
		exe := sysstat.Exe(p.PID)
		if exe == "" || filepath.Dir(exe) != "/usr/lib/chromium" {
			continue
		}
		c.live++
		if ours[p.PID] || below(p.PID) {
			c.ours++
		}
	}
	return c
}

// browserLog records the browsers pools launch.
type browserLog struct {
	mu    sync.Mutex
	insts []*instance
}

func (l *browserLog) add(in *instance) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.insts = append(l.insts, in)
}

func (l *browserLog) all() []*instance {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*instance(nil), l.insts...)
}

// running counts the processes still running of the browsers in insts:
// their process groups and their crashpad handlers.
func running(insts []*instance) int {
	procs, err := sysstat.Processes()
	if err != nil {
		return -1
	}
	n := 0
	for _, in := range insts {
		n += len(instanceProcs(procs, in))
	}
	return n
}

// launched holds every browser any pool of this test binary started.
var launched browserLog

// currentPIDs are the browser processes serving new pages.
func (p *Pool) currentPIDs() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int
	for _, in := range p.current {
		out = append(out, in.pid)
	}
	return out
}

// openContexts counts the browser contexts open in the pool's browsers.
func (p *Pool) openContexts() int {
	p.mu.Lock()
	insts := make([]*instance, 0, len(p.all))
	for in := range p.all {
		insts = append(insts, in)
	}
	p.mu.Unlock()
	n := 0
	for _, in := range insts {
		n += len(in.browser.Contexts())
	}
	return n
}

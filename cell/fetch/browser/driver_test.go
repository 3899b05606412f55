package browser

import (
	"bytes"
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/nettest"
	"github.com/trawlhq/trawl/internal/testwait"

	"github.com/trawlhq/trawl/cell/fetch"
)

// driverOf returns the pool's driver process and directory, checking the
// process against the process tree: a child of this process running from
// the pool's private directory.
func driverOf(t *testing.T, p *Pool) (int, string) {
	t.Helper()
	p.mu.Lock()
	d := p.drv
	p.mu.Unlock()
	if d == nil {
		t.Fatal("the pool has no driver")
	}
	pid, err := findDriver(d.dir)
	if err != nil || pid != d.pid {
		t.Fatalf("driver process: found %d (%v); the pool watches %d", pid, err, d.pid)
	}
	return pid, d.dir
}

func (p *Pool) instances() []*instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*instance, 0, len(p.all))
	for in := range p.all {
		out = append(out, in)
	}
	return out
}

// TestKilledDriverIsRestarted kills the playwright driver (the node
// process) with SIGKILL while a page is in flight: the pool notices,
// reaps the browsers that went with it, starts another driver and
// browser, retries the page there, and serves the next ones; nothing of
// the old driver is left, nor of the new one after Close. While a driver
// cannot be started the pool says it is unhealthy, and recovers.
func TestKilledDriverIsRestarted(t *testing.T) {
	var failRestart atomic.Bool
	cfg := Config{beforeDriver: func() error {
		if failRestart.Load() {
			return errors.New("test: no driver for now")
		}
		return nil
	}}
	pool := newTestPool(t, cfg)
	eng := NewEngine(pool, EngineConfig{})
	srv := smallSite(t)
	g := newGate()
	slow := nettest.NewServer(t, g)
	defer g.release()
	if _, err := eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL + "/before"}); err != nil {
		t.Fatal(err)
	}
	if st := pool.Stats(); !st.Healthy || st.DriverRestarts != 0 {
		t.Fatalf("stats before: %+v", st)
	}
	oldPID, oldDir := driverOf(t, pool)
	oldInsts := pool.instances()

	inFlight := make(chan error, 1)
	go func() {
		resp, err := eng.Fetch(t.Context(), &fetch.Request{URL: slow.URL + "/slow"})
		if err == nil && !bytes.Contains(resp.Body, []byte("slow page")) {
			err = errors.New("the slow page was not rendered")
		}
		inFlight <- err
	}()
	g.await(t, 1)
	killed := time.Now()
	if err := syscall.Kill(oldPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	g.release()
	select {
	case err := <-inFlight:
		if err != nil {
			t.Errorf("the page in flight when the driver died: %v", err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("the page in flight never ended")
	}
	if _, err := eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL + "/after"}); err != nil {
		t.Fatalf("after the driver died: %v", err)
	}
	t.Logf("driver killed: pages served again %s later", time.Since(killed).Round(time.Millisecond))
	st := pool.Stats()
	if st.DriverRestarts != 1 || st.Retries < 1 || !st.Healthy || st.Browsers != 1 {
		t.Errorf("stats after: %+v", st)
	}
	newPID, newDir := driverOf(t, pool)
	if newPID == oldPID || newDir == oldDir {
		t.Errorf("the driver was not replaced: pid %d dir %s", newPID, newDir)
	}
	testwait.Until(t, 10*time.Second, "the dead driver's browsers and directory gone", func() bool {
		_, err := os.Stat(oldDir)
		return running(oldInsts) == 0 && !anyProcessMentions(oldDir) && os.IsNotExist(err)
	})

	// A driver that cannot start: unhealthy, requests fail rather than
	// wait, and the pool recovers by itself.
	failRestart.Store(true)
	pid, _ := driverOf(t, pool)
	syscall.Kill(pid, syscall.SIGKILL)
	testwait.Until(t, 30*time.Second, "the pool unhealthy", func() bool {
		st := pool.Stats()
		return !st.Healthy && st.LaunchFailures > 0
	})

	if _, err := eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL + "/down"}); err == nil {
		t.Error("a page was served with no driver")
	} else {
		t.Logf("with no driver: %v", err)
	}
	failRestart.Store(false)
	testwait.Until(t, 60*time.Second, "the pool healthy again", func() bool {
		st := pool.Stats()
		return st.Healthy && st.Browsers == 1
	})

	if _, err := eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL + "/recovered"}); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
	if st := pool.Stats(); st.DriverRestarts != 2 {
		t.Errorf("stats at the end: %+v", st)
	}

	_, lastDir := driverOf(t, pool)
	insts := pool.instances()
	if err := pool.Close(); err != nil {
		t.Fatal(err)
	}
	if n := running(insts); n != 0 || anyProcessMentions(lastDir) || anyProcessMentions(oldDir) {
		t.Errorf("after Close: %d browser processes, driver left: %v", n, anyProcessMentions(lastDir))
	}
	if c := countChromium(t); c.ours != 0 {
		t.Errorf("after Close: chromium census %s", c)
	}
}

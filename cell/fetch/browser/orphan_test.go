package browser

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/internal/sysstat"
	"github.com/trawlhq/trawl/internal/testwait"
)

// helperEnv makes the test binary run TestHelperPool as a stand-in for a
// cell process.
const helperEnv = "TRAWL_BROWSER_POOL_HELPER"

// helperBrowser is what the helper says about a browser it runs.
type helperBrowser struct {
	PID      int
	ExeDir   string
	CrashDir string
}

// TestHelperPool is not a test: run by TestKilledOwnerLeavesNoBrowsers in
// a child process, it starts a pool of two browsers, renders a page, says
// what it runs and waits to be killed.
func TestHelperPool(t *testing.T) {
	url := os.Getenv(helperEnv)
	if url == "" {
		t.Skip("helper process for TestKilledOwnerLeavesNoBrowsers")
	}
	pool := newTestPool(t, Config{Browsers: 2})
	if _, err := NewEngine(pool, EngineConfig{}).Fetch(t.Context(), &fetch.Request{URL: url}); err != nil {
		t.Fatal(err)
	}
	pool.mu.Lock()
	for in := range pool.all {
		b, _ := json.Marshal(helperBrowser{PID: in.pid, ExeDir: in.exeDir, CrashDir: in.crashDir})
		fmt.Printf("BROWSER %s\n", b)
	}
	fmt.Printf("DRIVER %s\n", pool.drv.dir)
	pool.mu.Unlock()
	fmt.Println("READY")
	select {} // until SIGKILL
}

// TestKilledOwnerLeavesNoBrowsers kills, with SIGKILL, a process that runs
// a pool (as when a cell crashes or is killed): the driver sees its input
// close and takes the browsers down with it, so no Chromium outlives the
// cell.
func TestKilledOwnerLeavesNoBrowsers(t *testing.T) {
	requireBrowser(t)
	srv := smallSite(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPool$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+srv.URL+"/helper")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var insts []*instance
	var driverDir string
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "BROWSER "):
				var b helperBrowser
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "BROWSER ")), &b); err != nil {
					ready <- err
					return
				}
				insts = append(insts, &instance{pid: b.PID, exeDir: b.ExeDir, crashDir: b.CrashDir})
			case strings.HasPrefix(line, "DRIVER "):
				driverDir = strings.TrimPrefix(line, "DRIVER ")
			case line == "READY":
				ready <- nil
				return
			}
		}
		ready <- fmt.Errorf("helper ended before it was ready: %v", sc.Err())
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("%v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("helper not ready\nstderr:\n%s", stderr.String())
	}
	before := running(insts)
	if len(insts) != 2 || before == 0 || driverDir == "" {
		t.Fatalf("helper runs %d browsers (%d processes), driver %q", len(insts), before, driverDir)
	}

	killed := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	testwait.Until(t, 30*time.Second, "the killed pool's browsers and driver gone", func() bool {
		return running(insts) == 0 && !anyProcessMentions(driverDir)
	})

	t.Logf("owner killed with %d browser processes running: all gone %s later", before, time.Since(killed).Round(time.Millisecond))

	// The killed pool could not remove its directory; the next pool does.
	if _, err := os.Stat(driverDir); err != nil {
		t.Fatalf("the killed pool's directory: %v", err)
	}
	newTestPool(t, Config{})
	if _, err := os.Stat(driverDir); !os.IsNotExist(err) {
		t.Errorf("the killed pool's directory %s is still there: %v", driverDir, err)
	}
}

// anyProcessMentions reports whether a live process has s in its command
// line (the driver runs from the pool's private directory).
func anyProcessMentions(s string) bool {
	procs, err := sysstat.Processes()
	if err != nil {
		return false
	}
	for _, p := range procs {
		if p.State == 'Z' {
			continue
		}
		args, err := sysstat.Cmdline(p.PID)
		if err == nil && strings.Contains(strings.Join(args, "\x00"), s) {
			return true
		}
	}
	return false
}

package sysstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/testwait"
)

const helperEnv = "SYSSTAT_TEST_HELPER"

// helperMiB is what the burning child allocates and touches.
const helperMiB = 96

// TestHelperBurn is not a test: run as a child by TestRealProcessTree (with
// helperEnv set), it allocates and touches helperMiB, says "ready", and spins
// until killed.
func TestHelperBurn(t *testing.T) {
	if os.Getenv(helperEnv) != "burn" {
		t.Skip("helper process only")
	}
	buf := make([]byte, helperMiB<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = byte(i)
	}
	fmt.Println("ready")
	x := 0
	for {
		for i := 0; i < len(buf); i += 4096 {
			x += int(buf[i])
		}
		runtime.KeepAlive(buf)
		_ = x
	}
}

// TestRealProcessTree measures this test process with the real /proc and
// cgroup filesystem while a child spins and holds helperMiB. The child must be
// counted, its memory must show, and the CPU time the sampler saw must match
// what the kernel says the child and this process used (their rusage). The
// comparison of CPU time, not a percentage threshold, keeps the test honest
// on a loaded machine where the child gets only a sliver of a CPU.
func TestRealProcessTree(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("procfs is Linux only")
	}
	s := New()
	cpus := s.availableCPUs(s.cgroups())
	selfCPU := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	self0 := selfCPU()
	before, err := s.Sample()
	if err != nil {
		t.Fatal(err)
	}
	if before.MemoryBytes <= 0 || before.MemoryLimitBytes <= 0 || before.Processes < 1 {
		t.Fatalf("implausible sample of this process: %+v", before)
	}
	last := time.Now() // the sampler's clock is time.Now too

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBurn$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=burn")
	// Should this test die, the kernel kills the child too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
	}
	t.Cleanup(stop)
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("helper said %q, %v", line, err)
	}

	// Sum the CPU time the samples report until the child has visibly
	// burned some.
	var seen float64 // CPU seconds
	clamped := false
	var got Sample
	take := func() {
		t.Helper()
		if got, err = s.Sample(); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		seen += got.CPUPercent / 100 * cpus * now.Sub(last).Seconds()
		last = now
		clamped = clamped || got.CPUPercent >= 100
	}
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for seen < 0.5 {
		<-tick.C
		take()
		if time.Now().After(deadline) {
			t.Fatalf("the samples saw only %.2f s of CPU in 60 s with a spinning child: last %+v", seen, got)
		}
	}
	t.Logf("before: %+v", before)
	t.Logf("with child: %+v", got)
	if got.Processes != before.Processes+1 {
		t.Errorf("Processes = %d with a child, %d before", got.Processes, before.Processes)
	}
	if grew := got.MemoryBytes - before.MemoryBytes; grew < helperMiB<<20*3/4 {
		t.Errorf("MemoryBytes grew by %d MiB with a child holding %d MiB", grew>>20, helperMiB)
	}
	if got.MemoryPercent <= 0 || got.MemoryPercent > 100 {
		t.Errorf("MemoryPercent = %v", got.MemoryPercent)
	}

	// Freeze the child so its ticks stop, take the last sample while it is
	// still in the tree, then compare with the kernel's accounting.
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, cmd.Process.Pid)
	take()
	self1 := selfCPU()
	stop()
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	child := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	want := (child + self1 - self0).Seconds()
	t.Logf("CPU seen by samples %.3f s; rusage: child %v + this process %v = %.3f s", seen, child, self1-self0, want)
	// Ticks are 10 ms per process and the window edges are a few ms apart.
	if tol := 0.1 + 0.1*want; !clamped && (seen < want-tol || seen > want+tol) {
		t.Errorf("samples saw %.3f s of CPU, the kernel accounted %.3f s (tolerance %.3f)", seen, want, tol)
	}

	// With the child gone it is no longer counted, and its ticks leaving
	// the tree make no negative delta.
	after, err := s.Sample()
	if err != nil {
		t.Fatal(err)
	}
	if after.CPUPercent < 0 || after.Processes != before.Processes {
		t.Errorf("after the child exited: %+v (before: %+v)", after, before)
	}
}

// waitStopped polls /proc/<pid>/stat until the process is in state T.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	var b []byte
	err := testwait.Poll(10*time.Second, func() bool {
		var err error
		if b, err = os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil {
			t.Fatal(err)
		}
		i := bytes.LastIndexByte(b, ')')
		return i > 0 && i+2 < len(b) && b[i+2] == 'T'
	})
	if err != nil {
		t.Fatalf("process %d did not stop: %v: %s", pid, err, b)
	}
}

// TestConcurrentSample runs Sample from several goroutines (for the race
// detector) against the real /proc.
func TestConcurrentSample(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("procfs is Linux only")
	}
	s := New()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				got, err := s.Sample()
				if err != nil {
					t.Error(err)
					return
				}
				if got.CPUPercent < 0 || got.CPUPercent > 100 || got.Processes < 1 {
					t.Errorf("bad sample %+v", got)
				}
			}
		})
	}
	wg.Wait()
}

package sysstat

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"syscall"
	"testing"
)

// holdMiB is what the holding child allocates and touches.
const holdMiB = 32

// TestHelperHold is not a test: run as a child by TestProcessFunctions
// (with helperEnv set), it touches holdMiB, says "ready" and waits for its
// stdin to close.
func TestHelperHold(t *testing.T) {
	if os.Getenv(helperEnv) != "hold" {
		t.Skip("helper process only")
	}
	buf := make([]byte, holdMiB<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	runtime.KeepAlive(buf)
}

// TestProcessFunctions checks the process functions the browser pool uses
// against a real child: found by a marker argument, its stat, executable,
// command line and PSS, and the errors once it has gone.
func TestProcessFunctions(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("procfs is Linux only")
	}
	marker := fmt.Sprintf("sysstat-marker=%d", os.Getpid())
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHold$", marker)
	cmd.Env = append(os.Environ(), helperEnv+"=hold")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() }()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("helper said %q, %v", line, err)
	}
	pid := cmd.Process.Pid

	if got, err := FindArg(marker); err != nil || got != pid {
		t.Errorf("FindArg(%q) = %d, %v; want %d", marker, got, err, pid)
	}
	if _, err := FindArg(marker + "-nobody"); err == nil {
		t.Error("FindArg found a marker nobody has")
	}
	st, err := ReadProcess(pid)
	if err != nil || st.PID != pid || st.PPID != os.Getpid() || st.PGID != syscall.Getpgrp() || st.State == 'Z' || st.StartTime == 0 {
		t.Errorf("ReadProcess = %+v, %v", st, err)
	}
	procs, err := Processes()
	if err != nil || !slices.ContainsFunc(procs, func(p Process) bool { return p == st || (p.PID == pid && p.StartTime == st.StartTime) }) {
		t.Errorf("Processes() lacks the child: %v", err)
	}
	self, _ := os.Executable()
	if exe := Exe(pid); exe != self {
		t.Errorf("Exe = %q, want %q", exe, self)
	}
	args, err := Cmdline(pid)
	if err != nil || len(args) != 3 || args[0] != os.Args[0] || args[2] != marker {
		t.Errorf("Cmdline = %q, %v", args, err)
	}
	if !HasArg(pid, marker) || HasArg(pid, "sysstat-marker") {
		t.Error("HasArg matches other than whole arguments")
	}
	pss, err := PSS(pid)
	if err != nil || pss < holdMiB<<20*9/10 {
		t.Errorf("PSS = %d MiB, %v; want at least %d MiB", pss>>20, err, holdMiB*9/10)
	}

	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := PSS(pid); !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ESRCH) {
		t.Errorf("PSS of a gone process: %v; want not exist", err)
	}
	if _, err := ReadProcess(pid); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadProcess of a gone process: %v; want not exist", err)
	}
	mine, err := PSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := SumPSS([]int{os.Getpid(), pid}); err != nil || sum < mine/2 {
		t.Errorf("SumPSS with a gone process = %d, %v; want about %d, the gone one skipped", sum, err, mine)
	}
}

// TestRootOfForkedChildren: a browser that has just forked shares its
// arguments with the child until it execs; the child may have a pid that
// /proc lists first (CI: "browser process 10089 is not its group's
// leader").
func TestRootOfForkedChildren(t *testing.T) {
	browser := Process{PID: 9990, PPID: 9980, PGID: 9990, StartTime: 500}
	forked := Process{PID: 10089, PPID: 9990, PGID: 9990, StartTime: 501}
	daemon := Process{PID: 10001, PPID: 1, PGID: 10001, StartTime: 502} // a double fork, reparented
	stray := Process{PID: 10002, PPID: 1, PGID: 9990, StartTime: 499}
	for _, tc := range []struct {
		name  string
		procs []Process
		want  int
	}{
		{"one", []Process{browser}, 9990},
		{"child listed first", []Process{forked, browser}, 9990},
		{"leader before an older non-leader", []Process{stray, forked, browser}, 9990},
		{"oldest of two leaders", []Process{daemon, forked, browser}, 9990},
		{"cycle", []Process{{PID: 1, PPID: 2, StartTime: 9}, {PID: 2, PPID: 1, StartTime: 8}}, 2},
	} {
		got, ok := rootOf(tc.procs)
		if !ok || got.PID != tc.want {
			t.Errorf("%s: rootOf = %d, %v; want %d", tc.name, got.PID, ok, tc.want)
		}
	}
	if _, ok := rootOf(nil); ok {
		t.Error("rootOf(nil) found a process")
	}
}

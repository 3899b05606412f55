package browser

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// proc is one process as /proc/<pid>/stat describes it.
type proc struct {
	pid, ppid, pgid int
	state           byte // R, S, D, Z...
}

// readProcs lists the processes visible in /proc. Processes that exit
// while it reads are skipped.
func readProcs() ([]proc, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	procs := make([]proc, 0, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, err := readStat(pid)
		if err != nil {
			continue
		}
		procs = append(procs, p)
	}
	return procs, nil
}

// readStat parses /proc/<pid>/stat. The command name may hold spaces and
// parentheses, so the fields are counted from its closing parenthesis.
func readStat(pid int) (proc, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return proc{}, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 3 || len(f[0]) != 1 {
		return proc{}, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return proc{}, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return proc{pid: pid, ppid: ppid, pgid: pgid, state: f[0][0]}, nil
}

// exePath is the executable of a live process; empty for a zombie or a
// process of another user.
func exePath(pid int) string {
	p, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	return p
}

// findMarked returns the process whose command line holds the argument
// marker, which a browser is launched with so that it can be found.
func findMarked(marker string) (int, error) {
	procs, err := readProcs()
	if err != nil {
		return 0, err
	}
	want := []byte(marker)
	for _, p := range procs {
		cl, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/cmdline")
		if err != nil {
			continue
		}
		for _, arg := range bytes.Split(cl, []byte{0}) {
			if bytes.Equal(arg, want) {
				return p.pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no process has the argument %s", marker)
}

// instanceProcs returns the live processes of a browser: the members of
// its process group (the browser, its zygotes, renderers, GPU and utility
// processes; all of them run from exeDir) and its crashpad handlers, which
// leave the group but carry its dump directory on their command line.
func instanceProcs(procs []proc, inst *instance) []int {
	if inst.pid <= 1 || inst.exeDir == "" {
		return nil
	}
	dbArg := []byte("--database=" + inst.crashDir)
	var out []int
	for _, p := range procs {
		if p.state == 'Z' || filepath.Dir(exePath(p.pid)) != inst.exeDir {
			continue
		}
		if p.pgid == inst.pid {
			out = append(out, p.pid)
			continue
		}
		cl, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/cmdline")
		if err != nil {
			continue
		}
		for _, arg := range bytes.Split(cl, []byte{0}) {
			if bytes.Equal(arg, dbArg) {
				out = append(out, p.pid)
				break
			}
		}
	}
	return out
}

// instancePSS sums the proportional set size, in bytes, of a browser's
// processes: what it costs the machine, pages shared between processes
// divided among them.
func instancePSS(procs []proc, inst *instance) (int64, error) {
	pids := instanceProcs(procs, inst)
	if len(pids) == 0 {
		return 0, fmt.Errorf("browser %d is gone", inst.pid)
	}
	var sum int64
	for _, pid := range pids {
		kb, err := pssKB(pid)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
				continue // exited while we read
			}
			return 0, err
		}
		sum += kb << 10
	}
	return sum, nil
}

// pssKB reads the Pss line of /proc/<pid>/smaps_rollup, in kB.
func pssKB(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse pss of %d: %w", pid, err)
			}
			return kb, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, nil // a zombie has no mappings
}

// reap sends SIGKILL to every live process of a browser (see
// instanceProcs) and returns how many it signalled. Checking the
// executable keeps a recycled group id from hitting an unrelated process.
func reap(inst *instance) int {
	procs, err := readProcs()
	if err != nil {
		return 0
	}
	n := 0
	for _, pid := range instanceProcs(procs, inst) {
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// alive reports whether any process of a browser is still running.
func alive(inst *instance) bool {
	procs, err := readProcs()
	if err != nil {
		return false
	}
	return len(instanceProcs(procs, inst)) > 0
}

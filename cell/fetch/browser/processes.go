package browser

import (
	"fmt"
	"path/filepath"
	"syscall"

	"github.com/trawlhq/trawl/internal/sysstat"
)

// instanceProcs returns the live processes of a browser: the members of
// its process group (the browser, its zygotes, renderers, GPU and utility
// processes; all of them run from exeDir) and its crashpad handlers, which
// leave the group but carry its dump directory on their command line.
func instanceProcs(procs []sysstat.Process, inst *instance) []int {
	if inst.pid <= 1 || inst.exeDir == "" {
		return nil
	}
	dbArg := "--database=" + inst.crashDir
	var out []int
	for _, p := range procs {
		if p.State == 'Z' || filepath.Dir(sysstat.Exe(p.PID)) != inst.exeDir {
			continue
		}
		if p.PGID == inst.pid || sysstat.HasArg(p.PID, dbArg) {
			out = append(out, p.PID)
		}
	}
	return out
}

// instancePSS sums the proportional set size, in bytes, of a browser's
// processes: what it costs the machine, pages shared between processes
// divided among them.
func instancePSS(procs []sysstat.Process, inst *instance) (int64, error) {
	pids := instanceProcs(procs, inst)
	if len(pids) == 0 {
		return 0, fmt.Errorf("browser %d is gone", inst.pid)
	}
	return sysstat.SumPSS(pids)
}

// reap sends SIGKILL to every live process of a browser (see
// instanceProcs) and returns how many it signalled. Checking the
// executable keeps a recycled group id from hitting an unrelated process.
func reap(inst *instance) int {
	procs, err := sysstat.Processes()
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
	procs, err := sysstat.Processes()
	if err != nil {
		return false
	}
	return len(instanceProcs(procs, inst)) > 0
}

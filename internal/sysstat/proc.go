package sysstat

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

// ProcRoot is where procfs is mounted. The package-level functions read
// it; a Sampler reads its own root (WithProcRoot).
const ProcRoot = "/proc"

// Process is one process as /proc/<pid>/stat describes it.
type Process struct {
	PID, PPID, PGID int
	// State is the state letter: R, S, D, Z (zombie), T, X...
	State byte
	// UTime and STime are the CPU ticks (USER_HZ) spent in user and
	// kernel mode; StartTime is when the process started, in ticks after
	// boot (it tells a reused pid from an earlier process).
	UTime, STime, StartTime uint64
}

// Processes lists the processes in /proc. Processes that exit while it
// reads are skipped.
func Processes() ([]Process, error) { return readProcesses(ProcRoot) }

// ReadProcess reads /proc/<pid>/stat; the error wraps os.ErrNotExist when
// there is no such process.
func ReadProcess(pid int) (Process, error) {
	b, err := os.ReadFile(filepath.Join(ProcRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return Process{}, err
	}
	return parseStat(b)
}

func readProcesses(root string) ([]Process, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("sysstat: read %s: %w", root, err)
	}
	out := make([]Process, 0, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, e.Name(), "stat"))
		if err != nil {
			continue
		}
		p, err := parseStat(b)
		if err != nil {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// parseStat parses /proc/<pid>/stat. The command name (field 2) is in
// parentheses and may itself hold spaces and parentheses, so fields are
// counted from the last ')'.
func parseStat(b []byte) (Process, error) {
	var st Process
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return st, errors.New("sysstat: malformed stat")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:open])))
	if err != nil {
		return st, fmt.Errorf("sysstat: malformed stat pid: %w", err)
	}
	f := strings.Fields(string(b[end+1:]))
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 20 || len(f[0]) != 1 {
		return st, errors.New("sysstat: short stat")
	}
	st.PID = pid
	st.State = f[0][0]
	if st.PPID, err = strconv.Atoi(f[1]); err != nil {
		return st, fmt.Errorf("sysstat: stat ppid: %w", err)
	}
	if st.PGID, err = strconv.Atoi(f[2]); err != nil {
		return st, fmt.Errorf("sysstat: stat pgrp: %w", err)
	}
	if st.UTime, err = strconv.ParseUint(f[11], 10, 64); err != nil {
		return st, fmt.Errorf("sysstat: stat utime: %w", err)
	}
	if st.STime, err = strconv.ParseUint(f[12], 10, 64); err != nil {
		return st, fmt.Errorf("sysstat: stat stime: %w", err)
	}
	if st.StartTime, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return st, fmt.Errorf("sysstat: stat starttime: %w", err)
	}
	return st, nil
}

// Exe is the executable of a live process; empty for a zombie or a process
// of another user.
func Exe(pid int) string {
	p, _ := os.Readlink(filepath.Join(ProcRoot, strconv.Itoa(pid), "exe"))
	return p
}

// Cmdline is the command line of a process, one string per argument
// (/proc/<pid>/cmdline, NUL-separated). A process that rewrote its title
// may give one string holding several words.
func Cmdline(pid int) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(ProcRoot, strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSuffix(b, []byte{0})
	if len(b) == 0 {
		return nil, nil
	}
	return strings.Split(string(b), "\x00"), nil
}

// HasArg reports whether arg is one of the arguments of a process.
func HasArg(pid int, arg string) bool {
	args, err := Cmdline(pid)
	if err != nil {
		return false
	}
	for _, a := range args {
		if a == arg {
			return true
		}
	}
	return false
}

// FindArg returns the process that has arg among its arguments: a marker
// a child was started with so that it can be found. A process that has
// just forked carries its parent's arguments until its child execs, and
// /proc lists pids as names (10089 before 9990), so of the processes that
// have arg it returns the one whose parent does not: the leader of its
// group if several are, else the oldest.
func FindArg(arg string) (int, error) {
	procs, err := Processes()
	if err != nil {
		return 0, err
	}
	var have []Process
	for _, p := range procs {
		if HasArg(p.PID, arg) {
			have = append(have, p)
		}
	}
	if p, ok := rootOf(have); ok {
		return p.PID, nil
	}
	return 0, fmt.Errorf("no process has the argument %s", arg)
}

// rootOf picks, of processes sharing an argument, the one that started
// the others: its parent is not among them; a group leader before other
// such processes, then the oldest.
func rootOf(procs []Process) (Process, bool) {
	in := make(map[int]bool, len(procs))
	for _, p := range procs {
		in[p.PID] = true
	}
	var best Process
	found := false
	for _, p := range procs {
		if in[p.PPID] {
			continue
		}
		leader, bestLeader := p.PGID == p.PID, best.PGID == best.PID
		var better bool
		switch {
		case !found:
			better = true
		case leader != bestLeader:
			better = leader
		default:
			better = p.StartTime < best.StartTime
		}
		if better {
			best, found = p, true
		}
	}
	if !found && len(procs) > 0 {
		// A cycle cannot happen in a process tree; a reused pid can make
		// one appear. Take the oldest.
		best = procs[0]
		for _, p := range procs[1:] {
			if p.StartTime < best.StartTime {
				best = p
			}
		}
		found = true
	}
	return best, found
}

// PSS is the proportional set size of a process in bytes, from the Pss
// line of /proc/<pid>/smaps_rollup: its memory, with pages shared between
// processes divided among them. A zombie has none (0). The error wraps
// os.ErrNotExist or syscall.ESRCH when the process has gone.
func PSS(pid int) (int64, error) {
	v, _, err := kBValue(filepath.Join(ProcRoot, strconv.Itoa(pid), "smaps_rollup"), "Pss:")
	if err != nil {
		return 0, fmt.Errorf("sysstat: pss of %d: %w", pid, err)
	}
	return v, nil
}

// SumPSS sums the PSS of pids, in bytes: what a group of processes costs
// the machine. Processes that exit while it reads are skipped.
func SumPSS(pids []int) (int64, error) {
	var sum int64
	for _, pid := range pids {
		v, err := PSS(pid)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
				continue // exited while we read
			}
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// kBField finds the line starting with key in a "Key:   123 kB" file and
// returns the value in bytes; false when the file cannot be read or has
// no such line.
func kBField(path, key string) (int64, bool) {
	v, ok, err := kBValue(path, key)
	return v, ok && err == nil
}

// kBValue is kBField that tells a missing line (false, nil) from a file
// that cannot be read or a value that cannot be parsed (an error).
func kBValue(path, key string) (int64, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, key) {
			continue
		}
		fs := strings.Fields(line[len(key):])
		if len(fs) == 0 {
			return 0, false, fmt.Errorf("no value after %s in %s", key, path)
		}
		v, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("parse %s in %s: %w", key, path, err)
		}
		if len(fs) > 1 && strings.EqualFold(fs[1], "kB") {
			v *= 1024
		}
		return v, true, nil
	}
	return 0, false, sc.Err()
}

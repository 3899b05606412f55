// Package sysstat reads /proc and the cgroup filesystem: the cell's code
// reads them only through it. Its Sampler measures the CPU and memory of this process tree — the Go
// process and every descendant (Chromium browsers, driver processes) — against
// the resources the process's cgroup grants, not the host's; the crawl
// server's monitor and memory pressure use it. Its process functions
// ([Processes], [ReadProcess], [Exe], [Cmdline], [FindArg], [PSS],
// [SumPSS]) let the browser pool find, measure and reap the processes of
// each browser.
//
// Everything is read from procfs and the cgroup filesystem (Linux only):
//
//   - CPU: utime+stime of each live process in the tree (/proc/<pid>/stat),
//     differenced per process between two calls to [Sampler.Sample] and
//     divided by the wall time between them and by the CPUs available
//     (cgroup CPU quota if set, else the online CPUs). Exited children's
//     cutime/cstime are deliberately not used: they land on the parent only
//     when it reaps, in one lump, and only for direct children.
//   - Memory: the sum of Pss over the tree (/proc/<pid>/smaps_rollup), which
//     counts shared pages (Chromium's shared libraries and shared memory) once
//     in total rather than once per process; VmRSS when smaps_rollup cannot be
//     read.
//   - Limit: cgroup v2 memory.max or v1 memory.limit_in_bytes (the smallest
//     over the cgroup and its ancestors) when below the host's MemTotal, else
//     MemTotal.
//
// The roots of procfs and the cgroup filesystem are injectable so tests can
// build fake trees; see [WithProcRoot] and [WithCgroupRoot].
package sysstat

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicks is USER_HZ, the unit of the tick counts in /proc/<pid>/stat. The
// kernel fixes it at 100 on every architecture Go supports for the values it
// exports to user space.
const clockTicks = 100

// Sample is one measurement of the process tree.
type Sample struct {
	// CPUPercent is the tree's CPU use between the previous Sample call and
	// this one, as a percentage (0–100) of the CPU available to us: the
	// cgroup quota (cpu.max, or cpu.cfs_quota_us/cpu.cfs_period_us) when set
	// and below the online CPUs, else the online CPUs. 0 on the first call.
	CPUPercent float64
	// MemoryBytes is the sum of Pss over the tree (VmRSS for a process whose
	// smaps_rollup cannot be read).
	MemoryBytes int64
	// MemoryLimitBytes is the cgroup memory limit when set and below the
	// host's MemTotal, else MemTotal.
	MemoryLimitBytes int64
	// MemoryPercent is max(MemoryBytes, CgroupMemoryBytes) as a percentage
	// of MemoryLimitBytes. The larger of the two is used because the kernel
	// enforces the limit on the cgroup's charge (memory.current, which also
	// counts page cache and processes outside this tree), while the tree's
	// Pss is the better figure when the cgroup is not readable or is shared
	// with the whole host.
	MemoryPercent float64
	// Processes is the number of live processes in the tree, the root
	// included.
	Processes int
	// UptimeSeconds is the time since the Sampler was created.
	UptimeSeconds float64
	// CgroupMemoryBytes is memory.current (v2) or memory.usage_in_bytes (v1)
	// of our own cgroup, 0 when not readable.
	CgroupMemoryBytes int64
}

// Pressure is MemoryPercent as a fraction, 0 to 1 (it may exceed 1 briefly
// when the tree's Pss is over a limit it is not charged against).
func (s Sample) Pressure() float64 { return s.MemoryPercent / 100 }

// Option configures a Sampler.
type Option func(*Sampler)

// WithProcRoot reads procfs from dir instead of /proc.
func WithProcRoot(dir string) Option { return func(s *Sampler) { s.proc = dir } }

// WithCgroupRoot reads the cgroup filesystem from dir instead of
// /sys/fs/cgroup.
func WithCgroupRoot(dir string) Option { return func(s *Sampler) { s.cgroup = dir } }

// WithPID measures the tree rooted at pid instead of this process's.
func WithPID(pid int) Option { return func(s *Sampler) { s.pid = pid } }

// WithClock replaces time.Now, the source of wall time for CPU percentages
// and uptime.
func WithClock(now func() time.Time) Option { return func(s *Sampler) { s.now = now } }

// Sampler measures a process tree. It is safe for concurrent use; each call
// to Sample measures CPU since the previous call, whoever made it, so one
// periodic caller should own the sampling and share the results.
type Sampler struct {
	proc   string
	cgroup string
	pid    int
	now    func() time.Time

	start time.Time

	mu       sync.Mutex
	prev     map[int]procTicks // by pid, live processes at the last sample
	prevWall time.Time
	prevBoot float64 // seconds since boot at the last sample (/proc/uptime)
	sampled  bool
}

// procTicks is what a sample remembers about a process: its start time tells
// a reused pid from the process it remembers.
type procTicks struct {
	start uint64 // starttime, ticks after boot
	ticks uint64 // utime+stime
}

// New returns a Sampler for this process's tree, reading /proc and
// /sys/fs/cgroup unless options say otherwise.
func New(opts ...Option) *Sampler {
	s := &Sampler{
		proc:   "/proc",
		cgroup: "/sys/fs/cgroup",
		pid:    os.Getpid(),
		now:    time.Now,
	}
	for _, o := range opts {
		o(s)
	}
	s.start = s.now()
	return s
}

// ErrNoProcess is returned when the root of the tree cannot be read.
var ErrNoProcess = errors.New("sysstat: root process not readable")

// Sample measures the tree now. It fails only when the root process cannot be
// read; cgroup files that are missing or unreadable are skipped.
func (s *Sampler) Sample() (Sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	now := s.now()
	boot, bootErr := s.uptime()
	stats, err := s.scan()
	if err != nil {
		return Sample{}, err
	}
	root, ok := stats[s.pid]
	if !ok {
		return Sample{}, fmt.Errorf("%w: pid %d under %s", ErrNoProcess, s.pid, s.proc)
	}
	tree := descendants(stats, root.PID)

	var out Sample
	out.UptimeSeconds = now.Sub(s.start).Seconds()
	out.Processes = len(tree)

	// CPU: per-process tick deltas since the last sample.
	var delta uint64
	next := make(map[int]procTicks, len(tree))
	for _, st := range tree {
		cur := procTicks{start: st.StartTime, ticks: st.UTime + st.STime}
		next[st.PID] = cur
		if !s.sampled {
			continue
		}
		if last, ok := s.prev[st.PID]; ok && last.start == cur.start {
			if cur.ticks > last.ticks {
				delta += cur.ticks - last.ticks
			}
			continue
		}
		// Not seen last time: if it started after the last sample, all its
		// ticks fall in this interval; otherwise (it joined the tree by
		// reparenting, or the uptime was unreadable) it is a baseline.
		if bootErr == nil && float64(cur.start)/clockTicks >= s.prevBoot {
			delta += cur.ticks
		}
	}
	cg := s.cgroups()
	if s.sampled {
		if wall := now.Sub(s.prevWall).Seconds(); wall > 0 {
			cpus := s.availableCPUs(cg)
			pct := float64(delta) / clockTicks / wall / cpus * 100
			out.CPUPercent = clamp(pct, 0, 100)
		}
	}
	s.prev = next
	s.prevWall = now
	s.prevBoot = boot
	s.sampled = true

	// Memory.
	for _, st := range tree {
		out.MemoryBytes += s.memoryOf(st.PID)
	}
	total := s.memTotal()
	out.MemoryLimitBytes = total
	if lim := cg.memoryLimit(); lim > 0 && (total <= 0 || lim < total) {
		out.MemoryLimitBytes = lim
	}
	out.CgroupMemoryBytes = cg.memoryCurrent()
	if out.MemoryLimitBytes > 0 {
		used := max(out.MemoryBytes, out.CgroupMemoryBytes)
		out.MemoryPercent = float64(used) / float64(out.MemoryLimitBytes) * 100
	}
	return out, nil
}

func clamp(v, lo, hi float64) float64 {
	if math.IsNaN(v) {
		return lo
	}
	return min(max(v, lo), hi)
}

// scan reads /proc/*/stat for every process, by pid.
func (s *Sampler) scan() (map[int]Process, error) {
	procs, err := readProcesses(s.proc)
	if err != nil {
		return nil, err
	}
	out := make(map[int]Process, len(procs))
	for _, p := range procs {
		out[p.PID] = p
	}
	return out, nil
}

// descendants returns root and every process below it.
func descendants(all map[int]Process, root int) []Process {
	children := make(map[int][]int, len(all))
	for pid, st := range all {
		if pid != root {
			children[st.PPID] = append(children[st.PPID], pid)
		}
	}
	out := []Process{all[root]}
	seen := map[int]bool{root: true}
	for i := 0; i < len(out); i++ {
		for _, c := range children[out[i].PID] {
			if !seen[c] {
				seen[c] = true
				out = append(out, all[c])
			}
		}
	}
	return out
}

// memoryOf is the Pss of pid, or its VmRSS, or 0 when it has gone.
func (s *Sampler) memoryOf(pid int) int64 {
	dir := filepath.Join(s.proc, strconv.Itoa(pid))
	if v, ok := kBField(filepath.Join(dir, "smaps_rollup"), "Pss:"); ok {
		return v
	}
	if v, ok := kBField(filepath.Join(dir, "status"), "VmRSS:"); ok {
		return v
	}
	return 0
}

func (s *Sampler) memTotal() int64 {
	v, _ := kBField(filepath.Join(s.proc, "meminfo"), "MemTotal:")
	return v
}

// uptime is the first figure of /proc/uptime, seconds since boot.
func (s *Sampler) uptime() (float64, error) {
	b, err := os.ReadFile(filepath.Join(s.proc, "uptime"))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, errors.New("sysstat: empty uptime")
	}
	return strconv.ParseFloat(f[0], 64)
}

// onlineCPUs counts the cpuN lines of /proc/stat, which lists online CPUs;
// runtime.NumCPU when that cannot be read.
func (s *Sampler) onlineCPUs() int {
	b, err := os.ReadFile(filepath.Join(s.proc, "stat"))
	if err != nil {
		return runtime.NumCPU()
	}
	n := 0
	for line := range strings.Lines(string(b)) {
		if len(line) > 3 && strings.HasPrefix(line, "cpu") && line[3] >= '0' && line[3] <= '9' {
			n++
		}
	}
	if n == 0 {
		return runtime.NumCPU()
	}
	return n
}

// availableCPUs is the cgroup quota in CPUs when set and below the online
// CPUs, else the online CPUs.
func (s *Sampler) availableCPUs(cg cgroupDirs) float64 {
	cpus := float64(s.onlineCPUs())
	if q := cg.cpuQuota(); q > 0 && q < cpus {
		return q
	}
	return cpus
}

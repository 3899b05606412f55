package sysstat

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeHost is a procfs and cgroup filesystem in a temporary directory.
type fakeHost struct {
	t      *testing.T
	proc   string
	cgroup string
	now    time.Time
}

func newFakeHost(t *testing.T) *fakeHost {
	t.Helper()
	dir := t.TempDir()
	h := &fakeHost{
		t:      t,
		proc:   filepath.Join(dir, "proc"),
		cgroup: filepath.Join(dir, "cgroup"),
		now:    time.Date(2025, 11, 22, 12, 0, 0, 0, time.UTC),
	}
	h.mkdir(h.proc)
	h.mkdir(h.cgroup)
	h.write(filepath.Join(h.proc, "meminfo"), "MemTotal:        8000000 kB\nMemFree:         1000 kB\n")
	h.cpus(4)
	h.uptime(1000)
	return h
}

func (h *fakeHost) mkdir(p string) {
	h.t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) write(p, s string) {
	h.t.Helper()
	h.mkdir(filepath.Dir(p))
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) cpus(n int) {
	var b strings.Builder
	b.WriteString("cpu  1 2 3 4 5 6 7 8 9 10\n")
	for i := range n {
		fmt.Fprintf(&b, "cpu%d 1 2 3 4 5 6 7 8 9 10\n", i)
	}
	b.WriteString("intr 12345\nctxt 999\nbtime 1763800000\n")
	h.write(filepath.Join(h.proc, "stat"), b.String())
}

// uptime sets seconds since boot.
func (h *fakeHost) uptime(sec float64) {
	h.write(filepath.Join(h.proc, "uptime"), fmt.Sprintf("%.2f 12345.67\n", sec))
}

// process writes /proc/<pid>: stat with the given ticks and start (ticks
// after boot), smaps_rollup with pssKB (none when negative) and status with
// rssKB.
func (h *fakeHost) process(pid, ppid int, utime, stime, start uint64, pssKB, rssKB int64) {
	dir := filepath.Join(h.proc, strconv.Itoa(pid))
	// A command name with spaces and parentheses, as Chromium's can be.
	h.write(filepath.Join(dir, "stat"), fmt.Sprintf(
		"%d (my (proc) %d) S %d %d %d 0 -1 4194560 100 0 0 0 %d %d 0 0 20 0 1 0 %d 5124096 930 18446744073709551615 0 0 0\n",
		pid, pid, ppid, pid, pid, utime, stime, start))
	if pssKB >= 0 {
		h.write(filepath.Join(dir, "smaps_rollup"), fmt.Sprintf(
			"55d000000000-7ffe00000000 ---p 00000000 00:00 0 [rollup]\nRss:  %d kB\nPss:  %d kB\nPss_Anon:  1 kB\n", rssKB, pssKB))
	} else {
		os.Remove(filepath.Join(dir, "smaps_rollup"))
	}
	h.write(filepath.Join(dir, "status"), fmt.Sprintf("Name:\tproc\nVmPeak:\t999999 kB\nVmRSS:\t%d kB\nThreads:\t1\n", rssKB))
}

func (h *fakeHost) exit(pid int) {
	if err := os.RemoveAll(filepath.Join(h.proc, strconv.Itoa(pid))); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) sampler(pid int) *Sampler {
	return New(WithProcRoot(h.proc), WithCgroupRoot(h.cgroup), WithPID(pid),
		WithClock(func() time.Time { return h.now }))
}

func (h *fakeHost) sample(s *Sampler) Sample {
	h.t.Helper()
	got, err := s.Sample()
	if err != nil {
		h.t.Fatal(err)
	}
	return got
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func TestParseStat(t *testing.T) {
	st, err := parseStat([]byte("4242 (Web Content) (x)) R 17 4242 4242 0 -1 0 0 0 0 0 31 7 0 0 20 0 9 0 88123 1 2 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if st.PID != 4242 || st.PPID != 17 || st.PGID != 4242 || st.State != 'R' || st.UTime != 31 || st.STime != 7 || st.StartTime != 88123 {
		t.Fatalf("parseStat = %+v", st)
	}
	for _, bad := range []string{"", "12 noparen S 1", "12 (x) S 1 2 3", "x (y) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) succeeded", bad)
		}
	}
}

// TestTreeCPUAndMemory walks a tree of three with an unrelated process
// beside it, then changes it between samples: ticks grow, one process exits
// (its ticks must not make the delta negative), one is born, and a pid is
// reused by a new process with fewer ticks than the old one.
func TestTreeCPUAndMemory(t *testing.T) {
	h := newFakeHost(t)
	h.process(100, 1, 1000, 500, 10_000, 100_000, 150_000)  // root
	h.process(101, 100, 4000, 1000, 20_000, 50_000, 90_000) // child
	h.process(102, 101, 300, 0, 30_000, -1, 20_000)         // grandchild, no smaps_rollup
	h.process(103, 100, 900, 0, 40_000, 1_000, 1_000)       // child whose pid is reused
	h.process(200, 1, 99_999, 0, 500, 7_000_000, 7_000_000) // not ours
	h.process(1, 0, 5, 5, 1, 1000, 1000)

	s := h.sampler(100)
	first := h.sample(s)
	want := Sample{
		CPUPercent:       0,
		MemoryBytes:      (100_000 + 50_000 + 20_000 + 1_000) * 1024,
		MemoryLimitBytes: 8_000_000 * 1024,
		Processes:        4,
	}
	want.MemoryPercent = float64(want.MemoryBytes) / float64(want.MemoryLimitBytes) * 100
	if first != want {
		t.Fatalf("first sample\n got %+v\nwant %+v", first, want)
	}

	// Two seconds later, at uptime 1002 s.
	h.now = h.now.Add(2 * time.Second)
	h.uptime(1002)
	h.process(100, 1, 1100, 500, 10_000, 100_000, 150_000)   // +100
	h.process(101, 100, 4150, 1050, 20_000, 50_000, 90_000)  // +200
	h.exit(102)                                              // gone with 300 ticks
	h.process(103, 100, 40, 10, 100_050, 1_000, 1_000)       // pid reused at 1000.5 s: +50
	h.process(104, 101, 30, 20, 100_100, 2_000, 2_000)       // born at 1001 s: +50
	h.process(105, 100, 5000, 0, 1, 3_000, 3_000)            // reparented in, started long ago: baseline
	h.process(200, 1, 199_999, 0, 500, 7_000_000, 7_000_000) // not ours: ignored

	got := h.sample(s)
	// 400 ticks = 4 s of CPU over 2 s of wall time on 4 CPUs.
	if !near(got.CPUPercent, 50) {
		t.Errorf("CPUPercent = %v, want 50", got.CPUPercent)
	}
	if got.Processes != 5 {
		t.Errorf("Processes = %d, want 5", got.Processes)
	}
	if want := int64(100_000+50_000+1_000+2_000+3_000) * 1024; got.MemoryBytes != want {
		t.Errorf("MemoryBytes = %d, want %d", got.MemoryBytes, want)
	}
	if !near(got.UptimeSeconds, 2) {
		t.Errorf("UptimeSeconds = %v, want 2", got.UptimeSeconds)
	}

	// The reparented process now has a baseline; only its growth counts.
	h.now = h.now.Add(time.Second)
	h.uptime(1003)
	h.process(105, 100, 5100, 0, 1, 3_000, 3_000)
	got = h.sample(s)
	if !near(got.CPUPercent, 25) {
		t.Errorf("after baseline: CPUPercent = %v, want 25", got.CPUPercent)
	}

	// More than all the CPUs (a quota exceeded between reads) clamps at 100.
	h.now = h.now.Add(time.Second)
	h.uptime(1004)
	h.process(101, 100, 9150, 1050, 20_000, 50_000, 90_000)
	if got := h.sample(s); got.CPUPercent != 100 {
		t.Errorf("CPUPercent = %v, want clamped to 100", got.CPUPercent)
	}
}

func TestRootMissing(t *testing.T) {
	h := newFakeHost(t)
	h.process(100, 1, 1, 1, 1, 1, 1)
	if _, err := h.sampler(555).Sample(); err == nil {
		t.Fatal("Sample of a missing root succeeded")
	}
}

func TestParseCPUMax(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"max 100000\n", 0, false},
		{"max\n", 0, false},
		{"50000 100000\n", 0.5, true},
		{"200000 100000\n", 2, true},
		{"150000\n", 1.5, true},
		{"garbage 100000\n", 0, false},
		{"", 0, false},
	} {
		p := filepath.Join(dir, "cpu.max")
		os.WriteFile(p, []byte(tc.in), 0o644)
		got, ok := parseCPUMax(p)
		if ok != tc.ok || !near(got, tc.want) {
			t.Errorf("parseCPUMax(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestCgroups covers the layouts a container meets: cgroup v2 with and
// without a namespace, limits set on a parent, v1 with joined controllers,
// and a hybrid host whose unified hierarchy has no memory controller.
func TestCgroups(t *testing.T) {
	const memTotal = 8_000_000 * 1024
	type files map[string]string
	for _, tc := range []struct {
		name       string
		membership string
		files      files
		// 10 ticks over one second; with 4 online CPUs that is 2.5%.
		wantCPU   float64
		wantLimit int64
		wantCur   int64
	}{
		{
			name:       "v2 no limits",
			membership: "0::/\n",
			files:      files{"cgroup.controllers": "cpu memory", "cpu.max": "max 100000", "memory.max": "max", "memory.current": "1048576"},
			wantCPU:    2.5, wantLimit: memTotal, wantCur: 1 << 20,
		},
		{
			name:       "v2 limits, namespaced root",
			membership: "0::/\n",
			files:      files{"cgroup.controllers": "cpu memory", "cpu.max": "50000 100000", "memory.max": "1073741824", "memory.current": "2097152"},
			wantCPU:    20, wantLimit: 1 << 30, wantCur: 2 << 20,
		},
		{
			name:       "v2 path not mounted falls back to root",
			membership: "0::/system.slice/docker-abc.scope\n",
			files:      files{"cgroup.controllers": "cpu memory", "cpu.max": "200000 100000", "memory.max": "536870912"},
			wantCPU:    5, wantLimit: 512 << 20,
		},
		{
			name:       "v2 limits on the parent",
			membership: "0::/kubepods/pod1/ctr\n",
			files: files{
				"cgroup.controllers":               "cpu memory",
				"kubepods/pod1/memory.max":         "268435456",
				"kubepods/pod1/cpu.max":            "100000 100000",
				"kubepods/pod1/ctr/memory.max":     "max",
				"kubepods/pod1/ctr/cpu.max":        "max 100000",
				"kubepods/pod1/ctr/memory.current": "4096",
				"kubepods/memory.max":              "999999999999",
			},
			wantCPU: 10, wantLimit: 256 << 20, wantCur: 4096,
		},
		{
			name:       "v2 limit above MemTotal",
			membership: "0::/\n",
			files:      files{"cgroup.controllers": "memory", "memory.max": "99999999999999"},
			wantCPU:    2.5, wantLimit: memTotal,
		},
		{
			name:       "v1 joined cpu,cpuacct",
			membership: "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n",
			files: files{
				"memory/docker/abc/memory.limit_in_bytes":  "2147483648",
				"memory/docker/abc/memory.usage_in_bytes":  "12345",
				"memory/memory.limit_in_bytes":             "9223372036854771712",
				"cpu,cpuacct/docker/abc/cpu.cfs_quota_us":  "100000",
				"cpu,cpuacct/docker/abc/cpu.cfs_period_us": "50000",
			},
			wantCPU: 5, wantLimit: 2 << 30, wantCur: 12345,
		},
		{
			name:       "v1 unlimited, bind-mounted",
			membership: "4:memory:/docker/abc\n3:cpu:/docker/abc\n",
			files: files{
				"memory/memory.limit_in_bytes": "9223372036854771712",
				"memory/memory.usage_in_bytes": "777",
				"cpu/cpu.cfs_quota_us":         "-1",
				"cpu/cpu.cfs_period_us":        "100000",
			},
			wantCPU: 2.5, wantLimit: memTotal, wantCur: 777,
		},
		{
			name:       "hybrid",
			membership: "4:memory:/x\n1:cpu:/\n0::/\n",
			files: files{
				"unified/cgroup.controllers":     "",
				"unified/cpu.stat":               "usage_usec 1",
				"memory/x/memory.limit_in_bytes": "1073741824",
				"memory/x/memory.usage_in_bytes": "4194304",
				"cpu/cpu.cfs_quota_us":           "50000",
				"cpu/cpu.cfs_period_us":          "100000",
			},
			wantCPU: 20, wantLimit: 1 << 30, wantCur: 4 << 20,
		},
		{
			name:       "no cgroup filesystem",
			membership: "0::/\n",
			wantCPU:    2.5, wantLimit: memTotal,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHost(t)
			h.process(100, 1, 0, 0, 10, 1024, 1024)
			h.write(filepath.Join(h.proc, "100", "cgroup"), tc.membership)
			for name, body := range tc.files {
				h.write(filepath.Join(h.cgroup, filepath.FromSlash(name)), body+"\n")
			}
			s := h.sampler(100)
			h.sample(s)
			h.now = h.now.Add(time.Second)
			h.uptime(1001)
			h.process(100, 1, 10, 0, 10, 1024, 1024)
			got := h.sample(s)
			if !near(got.CPUPercent, tc.wantCPU) {
				t.Errorf("CPUPercent = %v, want %v", got.CPUPercent, tc.wantCPU)
			}
			if got.MemoryLimitBytes != tc.wantLimit {
				t.Errorf("MemoryLimitBytes = %d, want %d", got.MemoryLimitBytes, tc.wantLimit)
			}
			if got.CgroupMemoryBytes != tc.wantCur {
				t.Errorf("CgroupMemoryBytes = %d, want %d", got.CgroupMemoryBytes, tc.wantCur)
			}
			used := max(got.MemoryBytes, tc.wantCur)
			if want := float64(used) / float64(tc.wantLimit) * 100; !near(got.MemoryPercent, want) {
				t.Errorf("MemoryPercent = %v, want %v", got.MemoryPercent, want)
			}
			if !near(got.Pressure(), got.MemoryPercent/100) {
				t.Errorf("Pressure = %v, MemoryPercent = %v", got.Pressure(), got.MemoryPercent)
			}
		})
	}
}

// TestPressureUsesLargerFigure: the cgroup's charge wins when it is larger
// than the tree's Pss, and the Pss wins when it is larger.
func TestPressureUsesLargerFigure(t *testing.T) {
	h := newFakeHost(t)
	h.process(100, 1, 0, 0, 10, 100*1024, 100*1024) // 100 MiB
	h.write(filepath.Join(h.proc, "100", "cgroup"), "0::/\n")
	h.write(filepath.Join(h.cgroup, "cgroup.controllers"), "memory\n")
	h.write(filepath.Join(h.cgroup, "memory.max"), "1073741824\n") // 1 GiB
	h.write(filepath.Join(h.cgroup, "memory.current"), "536870912\n")
	s := h.sampler(100)
	if got := h.sample(s).Pressure(); !near(got, 0.5) {
		t.Errorf("Pressure with cgroup charge 512 MiB = %v, want 0.5", got)
	}
	h.write(filepath.Join(h.cgroup, "memory.current"), "1048576\n")
	if got := h.sample(s).Pressure(); !near(got, 100.0/1024) {
		t.Errorf("Pressure with Pss 100 MiB = %v, want %v", got, 100.0/1024)
	}
}

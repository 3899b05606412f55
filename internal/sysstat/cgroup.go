package sysstat

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cgroupDirs locates the cgroup directories of the measured process: a
// cgroup v2 directory, and cgroup v1 memory and cpu directories. Any may be
// empty. On a hybrid host (v1 controllers plus a unified hierarchy without
// them) the v2 directory holds no memory or cpu files and the v1 ones answer.
type cgroupDirs struct {
	v2, v2Root   string
	mem, memRoot string
	cpu, cpuRoot string
}

// cgroups reads /proc/<pid>/cgroup and finds each hierarchy's directory under
// the cgroup root. A process's cgroup path is relative to the hierarchy's
// root, but inside a container the root mounted at /sys/fs/cgroup is often
// the container's own cgroup (a cgroup namespace, or Docker's bind mount on
// v1), so when root/path does not exist the root itself is the directory.
func (s *Sampler) cgroups() cgroupDirs {
	var d cgroupDirs
	b, err := os.ReadFile(filepath.Join(s.proc, strconv.Itoa(s.pid), "cgroup"))
	if err != nil {
		// No membership to go by: take whatever is mounted at the root.
		b = []byte("0::/\n")
	}
	v1 := false
	for line := range strings.Lines(string(b)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		hier, ctrls, path := parts[0], parts[1], parts[2]
		if hier == "0" && ctrls == "" {
			for _, root := range []string{s.cgroup, filepath.Join(s.cgroup, "unified")} {
				if isFile(filepath.Join(root, "cgroup.controllers")) {
					d.v2Root = root
					d.v2 = resolve(root, path)
					break
				}
			}
			continue
		}
		v1 = true
		names := strings.Split(ctrls, ",")
		for _, n := range names {
			switch n {
			case "memory":
				if d.mem == "" {
					d.memRoot, d.mem = v1Dir(s.cgroup, ctrls, names, path)
				}
			case "cpu":
				if d.cpu == "" {
					d.cpuRoot, d.cpu = v1Dir(s.cgroup, ctrls, names, path)
				}
			}
		}
	}
	if d.v2 == "" && !v1 && isFile(filepath.Join(s.cgroup, "cgroup.controllers")) {
		d.v2Root, d.v2 = s.cgroup, s.cgroup
	}
	return d
}

// v1Dir finds the mount of a v1 hierarchy: named for all its controllers
// ("cpu,cpuacct") or for one of them (a symlink "cpu").
func v1Dir(cgroot, ctrls string, names []string, path string) (root, dir string) {
	for _, n := range append([]string{ctrls}, names...) {
		root := filepath.Join(cgroot, n)
		if isDir(root) {
			return root, resolve(root, path)
		}
	}
	return "", ""
}

func resolve(root, path string) string {
	if dir := filepath.Join(root, filepath.FromSlash(path)); dir != root && isDir(dir) {
		return dir
	}
	return root
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// ancestors lists dir and its parents up to and including root.
func ancestors(root, dir string) []string {
	if root == "" || dir == "" {
		return nil
	}
	out := []string{dir}
	for dir != root {
		parent := filepath.Dir(dir)
		if parent == dir || len(parent) < len(root) {
			break
		}
		dir = parent
		out = append(out, dir)
	}
	return out
}

// memoryLimit is the smallest memory limit on the cgroup or its ancestors
// (a container's limit is often set on a parent, a Kubernetes pod's), 0 when
// none is set.
func (d cgroupDirs) memoryLimit() int64 {
	var lim int64
	take := func(v int64) {
		if v > 0 && (lim == 0 || v < lim) {
			lim = v
		}
	}
	for _, dir := range ancestors(d.v2Root, d.v2) {
		if v, ok := readInt(filepath.Join(dir, "memory.max")); ok {
			take(v)
		}
	}
	if lim > 0 {
		return lim
	}
	for _, dir := range ancestors(d.memRoot, d.mem) {
		// v1 writes "no limit" as a huge page-aligned number; the caller
		// discards anything at or above MemTotal.
		if v, ok := readInt(filepath.Join(dir, "memory.limit_in_bytes")); ok {
			take(v)
		}
	}
	return lim
}

// memoryCurrent is the memory charged to our own cgroup, 0 when unreadable.
func (d cgroupDirs) memoryCurrent() int64 {
	if d.v2 != "" {
		if v, ok := readInt(filepath.Join(d.v2, "memory.current")); ok {
			return v
		}
	}
	if d.mem != "" {
		if v, ok := readInt(filepath.Join(d.mem, "memory.usage_in_bytes")); ok {
			return v
		}
	}
	return 0
}

// cpuQuota is the smallest CPU quota on the cgroup or its ancestors, in
// CPUs, 0 when none is set.
func (d cgroupDirs) cpuQuota() float64 {
	var q float64
	take := func(v float64) {
		if v > 0 && (q == 0 || v < q) {
			q = v
		}
	}
	for _, dir := range ancestors(d.v2Root, d.v2) {
		if v, ok := parseCPUMax(filepath.Join(dir, "cpu.max")); ok {
			take(v)
		}
	}
	if q > 0 {
		return q
	}
	for _, dir := range ancestors(d.cpuRoot, d.cpu) {
		quota, ok1 := readInt(filepath.Join(dir, "cpu.cfs_quota_us"))
		period, ok2 := readInt(filepath.Join(dir, "cpu.cfs_period_us"))
		if ok1 && ok2 && quota > 0 && period > 0 {
			take(float64(quota) / float64(period))
		}
	}
	return q
}

// parseCPUMax reads cgroup v2 cpu.max, "$MAX $PERIOD" where $MAX may be
// "max"; ok is false when there is no quota.
func parseCPUMax(path string) (float64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 || f[0] == "max" {
		return 0, false
	}
	quota, err := strconv.ParseFloat(f[0], 64)
	if err != nil || quota <= 0 {
		return 0, false
	}
	period := 100000.0 // the kernel's default when only $MAX is written
	if len(f) > 1 {
		if p, err := strconv.ParseFloat(f[1], 64); err == nil && p > 0 {
			period = p
		}
	}
	return quota / period, true
}

// readInt reads a file holding one integer; "max" (v2's no limit) and
// anything unparsable report ok false.
func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

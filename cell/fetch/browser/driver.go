package browser

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/trawlhq/trawl/internal/pwdriver"
	"github.com/trawlhq/trawl/internal/sysstat"
)

// DriverVersion is the playwright-core release playwright-go speaks to;
// `bash scripts/deps.sh browser` unpacks it. It is declared in
// internal/pwdriver, which scripts/deps.sh reads too.
const DriverVersion = pwdriver.Version

// DefaultExecutablePath is Debian's chromium.
const DefaultExecutablePath = "/usr/bin/chromium"

// DefaultDriverDir is where scripts/deps.sh unpacks the driver: the
// directory that holds package/cli.js. Empty when there is no home
// directory.
func DefaultDriverDir() string { return pwdriver.DefaultDir() }

// CheckInstall reports, as an error naming what is missing and how to
// install it, whether NewPool can start browsers with cfg (defaults
// applied). It starts nothing.
func CheckInstall(cfg Config) error {
	cfg = cfg.withDefaults()
	if fi, err := os.Stat(cfg.ExecutablePath); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("no browser at %s (run: bash scripts/deps.sh browser)", cfg.ExecutablePath)
	}
	if cfg.DriverDir == "" {
		return errors.New("no driver directory (no home directory): set Config.DriverDir")
	}
	var pkg struct{ Version string }
	b, err := os.ReadFile(filepath.Join(cfg.DriverDir, "package", "package.json"))
	if err != nil || json.Unmarshal(b, &pkg) != nil || pkg.Version != DriverVersion {
		return fmt.Errorf("no playwright driver %s in %s (found %q; run: bash scripts/deps.sh browser)", DriverVersion, cfg.DriverDir, pkg.Version)
	}
	if _, err := nodePath(cfg); err != nil {
		return err
	}
	return nil
}

// nodePath is the node that runs the driver.
func nodePath(cfg Config) (string, error) {
	if cfg.NodePath != "" {
		return cfg.NodePath, nil
	}
	p, err := exec.LookPath("node")
	if err != nil {
		return "", errors.New("no node on PATH to run the playwright driver: set Config.NodePath")
	}
	return p, nil
}

// Driver is one Playwright driver (a node process, ~40 MB) that several
// pools may share: each Pool given it in Config.Driver launches its
// browsers on it instead of starting a driver of its own. It is
// restartable: when its process dies every browser on it dies too, each
// pool handles its own as crashed (their pages retried once), and the
// first pool to need a driver again starts one for all of them; the
// others find it running. Close it after the pools that use it. It is safe
// for concurrent use.
type Driver struct {
	cfg Config
	log *slog.Logger

	start sync.Mutex // held while a driver starts: one start for all pools

	mu       sync.Mutex
	cur      *driver // the running generation; nil after a failed start
	restarts int64
	closed   bool
}

// NewDriver starts a driver with cfg's DriverDir, NodePath and Logger
// (defaults applied), for the pools given it in Config.Driver.
func NewDriver(cfg Config) (*Driver, error) {
	cfg = cfg.withDefaults()
	if err := CheckInstall(cfg); err != nil {
		return nil, err
	}
	d := &Driver{cfg: cfg, log: cfg.Logger}
	cur, err := startDriver(cfg, d.log)
	if err != nil {
		return nil, err
	}
	d.cur = cur
	return d, nil
}

// get returns the running driver. When the running one is dead (the
// generation a pool saw die), or none runs, it starts another, once for
// every pool that asks: callers wait for the start under way and then
// share its result. started reports that this call started it.
func (d *Driver) get(dead *driver) (drv *driver, started bool, err error) {
	d.start.Lock()
	defer d.start.Unlock()
	d.mu.Lock()
	cur, closed := d.cur, d.closed
	d.mu.Unlock()
	if closed {
		return nil, false, ErrClosed
	}
	if cur != nil && cur != dead && !cur.exited() {
		return cur, false, nil
	}
	if cur != nil {
		cur.stop() // collects what is left of it; its error is the death
	}
	if d.cfg.beforeDriver != nil {
		err = d.cfg.beforeDriver()
	}
	if err == nil {
		drv, err = startDriver(d.cfg, d.log)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.cur = nil
		return nil, false, err
	}
	if d.closed {
		drv.stop()
		return nil, false, ErrClosed
	}
	d.cur = drv
	d.restarts++
	d.log.Info("playwright driver restarted", "pid", drv.pid)
	return drv, true, nil
}

// Restarts counts the drivers started again after one died.
func (d *Driver) Restarts() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.restarts
}

// PID is the driver's node process, 0 when none runs or it could not be
// found.
func (d *Driver) PID() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur == nil {
		return 0
	}
	return d.cur.pid
}

// Close stops the driver. The browsers of pools still using it die with
// it: close the pools first.
func (d *Driver) Close() error {
	d.start.Lock() // not in the middle of a start
	defer d.start.Unlock()
	d.mu.Lock()
	cur := d.cur
	already := d.closed
	d.closed, d.cur = true, nil
	d.mu.Unlock()
	if already || cur == nil {
		return nil
	}
	return cur.stop()
}

// driver is one run of the playwright driver (a node process).
type driver struct {
	pw     *playwright.Playwright
	dir    string // private driver directory, removed on stop
	stderr *tailBuffer
	pid    int           // the node process; 0 if it could not be found
	dead   chan struct{} // closed when the node process is seen gone
	quit   chan struct{} // closed by stop: the watch ends

	stopOnce sync.Once
	stopErr  error
}

// driverPoll is how often a driver's process is looked at.
const driverPoll = 200 * time.Millisecond

// startDriver runs the playwright driver. playwright-go finds node only
// through PLAYWRIGHT_NODEJS_PATH or beside the driver, so rather than
// change the process environment the pool gets a private driver directory
// of two symbolic links: node and the unpacked package. A
// PLAYWRIGHT_NODEJS_PATH set by the operator still wins.
func startDriver(cfg Config, log *slog.Logger) (*driver, error) {
	node, err := nodePath(cfg)
	if err != nil {
		return nil, err
	}
	sweepDriverDirs(log)
	dir, err := os.MkdirTemp("", driverDirPrefix)
	if err != nil {
		return nil, fmt.Errorf("playwright driver: %w", err)
	}
	err = os.WriteFile(filepath.Join(dir, ownerFile), []byte(processID(os.Getpid())), 0o600)
	pkg, err2 := filepath.Abs(filepath.Join(cfg.DriverDir, "package"))
	err = errors.Join(err, err2)
	if err == nil {
		err = os.Symlink(pkg, filepath.Join(dir, "package"))
	}
	if err == nil {
		err = os.Symlink(node, filepath.Join(dir, "node"))
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("playwright driver: %w", err)
	}
	d := &driver{dir: dir, stderr: &tailBuffer{max: 16 << 10}}
	d.pw, err = playwright.Run(&playwright.RunOptions{
		DriverDirectory:     dir,
		SkipInstallBrowsers: true,
		Verbose:             false,
		Stdout:              io.Discard,
		Stderr:              d.stderr,
		// Without a Logger, a Stderr makes playwright-go redirect the
		// standard logger of the whole process.
		Logger: log,
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start playwright driver: %w (stderr: %s)", err, d.stderr)
	}
	d.dead, d.quit = make(chan struct{}), make(chan struct{})
	// A scan of /proc can miss a process just started on a loaded
	// machine: look again for a while before going without a watch.
	for wait := 10 * time.Millisecond; ; wait *= 2 {
		if d.pid, err = findDriver(dir); err == nil || wait > time.Second {
			break
		}
		time.Sleep(wait)
	}
	if err != nil {
		// Its death is then noticed by the launches it fails.
		log.Warn("playwright driver: its process is not watched", "err", err)
	} else {
		go d.watch()
	}
	return d, nil
}

// findDriver returns the driver process this process started from dir:
// playwright-go runs <dir>/node <dir>/package/cli.js run-driver, or
// $PLAYWRIGHT_NODEJS_PATH <dir>/package/cli.js run-driver when that is
// set (by the operator, or by a test harness in this process).
func findDriver(dir string) (int, error) {
	procs, err := sysstat.Processes()
	if err != nil {
		return 0, err
	}
	self := os.Getpid()
	node, cli := filepath.Join(dir, "node"), filepath.Join(dir, "package", "cli.js")
	for _, p := range procs {
		if p.PPID != self || p.State == 'Z' {
			continue
		}
		if args, err := sysstat.Cmdline(p.PID); err == nil && len(args) > 1 && (args[0] == node || args[1] == cli) {
			return p.PID, nil
		}
	}
	return 0, fmt.Errorf("no process of %s among this process's children", dir)
}

// watch closes d.dead when the driver process ends: a zombie, or gone
// (playwright-go reaps it when its connection ends).
func (d *driver) watch() {
	t := time.NewTicker(driverPoll)
	defer t.Stop()
	for {
		select {
		case <-d.quit:
			return
		case <-t.C:
		}
		if st, err := sysstat.ReadProcess(d.pid); err != nil || st.State == 'Z' || st.State == 'X' {
			close(d.dead)
			return
		}
	}
}

// exited reports whether the driver process is gone now, without waiting
// for the watch to notice.
func (d *driver) exited() bool {
	if d.isDead() {
		return true
	}
	if d.pid == 0 {
		return false
	}
	st, err := sysstat.ReadProcess(d.pid)
	return err != nil || st.State == 'Z' || st.State == 'X'
}

// isDead reports whether the driver was seen gone.
func (d *driver) isDead() bool {
	select {
	case <-d.dead:
		return true
	default:
		return false
	}
}

// stop ends the driver process and removes its directory. Every pool
// that saw it die may call it; it runs once.
func (d *driver) stop() error {
	d.stopOnce.Do(func() {
		close(d.quit)
		err := d.pw.Stop()
		os.RemoveAll(d.dir)
		if err != nil {
			d.stopErr = fmt.Errorf("stop playwright driver: %w", err)
		}
	})
	return d.stopErr
}

// driverDirPrefix names pools' private directories in the temporary
// directory.
const driverDirPrefix = "trawl-playwright-"

// ownerFile, in a pool's directory, identifies the process that made it.
const ownerFile = "owner"

// processID identifies a process across pid reuse: its pid and its start
// time in clock ticks since boot.
func processID(pid int) string {
	st, err := sysstat.ReadProcess(pid)
	if err != nil {
		return ""
	}
	return strconv.Itoa(pid) + " " + strconv.FormatUint(st.StartTime, 10)
}

// sweepDriverDirs removes the directories of pools whose process is gone
// (killed before it could close them); their browsers went with their
// driver.
func sweepDriverDirs(log *slog.Logger) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), driverDirPrefix+"*"))
	for _, dir := range dirs {
		owner, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // not ours to judge, or being made
		}
		pidStr, _, _ := strings.Cut(string(owner), " ")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || processID(pid) == string(owner) {
			continue // its process still runs
		}
		if err := os.RemoveAll(dir); err == nil {
			log.Info("removed the directory of a pool whose process is gone", "dir", dir)
		}
	}
}

// tailBuffer keeps the last bytes written to it, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	if over := t.b.Len() - t.max; over > 0 {
		t.b.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}

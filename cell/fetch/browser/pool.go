package browser

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/playwright-community/playwright-go"
	"golang.org/x/sync/semaphore"

	"github.com/trawlhq/trawl/cell/fetch/guardproxy"
	"github.com/trawlhq/trawl/internal/sysstat"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

// Defaults for Config.
const (
	DefaultBrowsers            = 1
	DefaultPagesPerBrowser     = 4
	DefaultRecycleAfterPages   = 200
	DefaultRecycleAboveMB      = 1024
	DefaultAcquireTimeout      = 5 * time.Second
	DefaultMemoryCheckInterval = 5 * time.Second
	DefaultLaunchTimeout       = 30 * time.Second
	DefaultCloseGrace          = 5 * time.Second
)

// Errors of the pool, to be tested with errors.Is. A pool also returns
// fetch.ErrFleetBusy when no page slot comes free within AcquireTimeout.
var (
	// ErrClosed means the pool was closed before or during the request.
	ErrClosed = errors.New("browser pool is closed")
	// ErrCrashed means the browser died under the request twice: once on
	// the first try and again on the one retry.
	ErrCrashed = errors.New("browser crashed")
)

// Config configures a Pool. The zero value is usable: every zero field
// takes its default.
type Config struct {
	// Browsers is how many Chromium processes serve pages. Default 1,
	// which suits 2 cores: a second browser costs memory and buys little
	// when the renderers already share the cores.
	Browsers int
	// PagesPerBrowser is how many pages one browser renders at a time.
	// Browsers × PagesPerBrowser bounds the pages open in the pool.
	// Default 4.
	PagesPerBrowser int
	// RecycleAfterPages replaces a browser after it has served this many
	// pages (its in-flight pages finish on it while new ones go to its
	// replacement). Default 200; negative means never.
	RecycleAfterPages int
	// RecycleAboveMB replaces a browser whose process tree uses more than
	// this much memory (PSS, in MiB, summed over the browser and its
	// children), checked every MemoryCheckInterval. Default 1024;
	// negative means never.
	RecycleAboveMB int
	// MemoryCheckInterval is how often browsers' memory is read. Default
	// 5s.
	MemoryCheckInterval time.Duration
	// AcquireTimeout is how long a request waits for a page slot before
	// failing with fetch.ErrFleetBusy. Default 5s.
	AcquireTimeout time.Duration
	// LaunchTimeout bounds the start of one browser. Default 30s.
	LaunchTimeout time.Duration
	// CloseGrace is how long closing a page's context (or a browser) may
	// take before the browser is killed instead. Default 5s.
	CloseGrace time.Duration
	// AllowPrivateNetworks lets pages reach loopback, private and other
	// non-public addresses. Off by default; for tests and local use only,
	// as for the HTTP engine.
	AllowPrivateNetworks bool
	// Resolver resolves names for the pool's proxy; nil means
	// net.DefaultResolver. The guard checks the addresses it returns.
	Resolver *net.Resolver
	// ExecutablePath is the Chromium to run. Default
	// DefaultExecutablePath.
	ExecutablePath string
	// DriverDir holds the unpacked playwright-core package (package/cli.js).
	// Default DefaultDriverDir().
	DriverDir string
	// NodePath is the node that runs the driver. Default: node on PATH.
	NodePath string
	// Args are extra Chromium switches, after the pool's own.
	Args []string
	// GPU lets Chromium use the machine's GPU (compositing, rasterisation,
	// WebGL) instead of software rendering: the crawl server's gpu image.
	GPU bool
	// Logger receives the pool's events (launches, recycles, crashes).
	// Nil discards them.
	Logger *slog.Logger
	// Driver, when set, is the Playwright driver the pool's browsers run
	// on, shared with other pools (see NewDriver): the pool neither
	// starts nor stops it, and DriverDir and NodePath are its. Nil: the
	// pool starts a driver of its own and stops it on Close.
	Driver *Driver

	onLaunch     func(*instance) // tests: every browser started
	beforeDriver func() error    // tests: a driver restart fails with its error
}

func (c Config) withDefaults() Config {
	if c.Browsers <= 0 {
		c.Browsers = DefaultBrowsers
	}
	if c.PagesPerBrowser <= 0 {
		c.PagesPerBrowser = DefaultPagesPerBrowser
	}
	if c.RecycleAfterPages == 0 {
		c.RecycleAfterPages = DefaultRecycleAfterPages
	}
	if c.RecycleAboveMB == 0 {
		c.RecycleAboveMB = DefaultRecycleAboveMB
	}
	if c.MemoryCheckInterval <= 0 {
		c.MemoryCheckInterval = DefaultMemoryCheckInterval
	}
	if c.AcquireTimeout <= 0 {
		c.AcquireTimeout = DefaultAcquireTimeout
	}
	if c.LaunchTimeout <= 0 {
		c.LaunchTimeout = DefaultLaunchTimeout
	}
	if c.CloseGrace <= 0 {
		c.CloseGrace = DefaultCloseGrace
	}
	if c.ExecutablePath == "" {
		c.ExecutablePath = DefaultExecutablePath
	}
	if c.DriverDir == "" {
		c.DriverDir = DefaultDriverDir()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Stats is a snapshot of a pool, for health checks and benchmarks.
type Stats struct {
	// Browsers is the number of running browsers, draining ones included.
	Browsers int
	// Draining is the number of replaced browsers still finishing pages.
	Draining int
	// PagesInUse is the number of pages open now.
	PagesInUse int
	// PagesServed counts pages finished since the pool started, failed
	// ones included.
	PagesServed int64
	// Launches counts browsers started; LaunchFailures those that failed
	// to start.
	Launches, LaunchFailures int64
	// Recycles counts browsers replaced for their page count or memory.
	Recycles int64
	// Crashes counts browsers that died without being asked to; Retries
	// the requests retried on another browser because of it.
	Crashes, Retries int64
	// FleetBusy counts requests refused with fetch.ErrFleetBusy.
	FleetBusy int64
	// DriverRestarts counts the times the pool's playwright driver died
	// and the pool moved to a new one (its browsers die with it: each
	// counts as a crash). With a shared Driver, one restart moves every
	// pool on it.
	DriverRestarts int64
	// Healthy is false while the pool has no browser serving and its last
	// attempt to start one (or the driver) failed: browser requests fail
	// until a retry succeeds. A pool between a crash and its replacement
	// is still healthy.
	Healthy bool
	// PSS is the memory of all browsers' process trees in bytes, as last
	// measured (every MemoryCheckInterval); Pool.PSS measures it now.
	PSS int64
}

// Pool runs a bounded fleet of headless Chromium browsers and lends out
// pages, each in a browser context of its own. It is safe for concurrent
// use. See the package documentation for its design.
type Pool struct {
	cfg   Config
	log   *slog.Logger
	guard *guardproxy.Guard
	proxy *guardproxy.Proxy
	defRt *guardproxy.Route // the browsers' launch-time proxy
	// driver runs the pool's drivers: the pool's own (ownDriver) or one
	// shared with other pools.
	driver    *Driver
	ownDriver bool
	// drv is the running driver; nil while it is being restarted, and
	// deadDrv is then the one that died. Only newPool, the maintenance
	// goroutine and then Close touch them.
	drv     *driver
	deadDrv *driver
	slots   *semaphore.Weighted
	token   string // marks this pool's browsers' command lines
	// maintaining is set once the maintenance goroutine runs; only
	// newPool and Close read it, one after the other.
	maintaining bool
	life        context.Context // ends when Close starts
	endLife     context.CancelFunc
	kick        chan struct{}
	stopped     chan struct{} // maintain returned

	mu       sync.Mutex
	current  []*instance // serving new pages
	draining map[*instance]struct{}
	all      map[*instance]struct{} // every browser not yet reaped, for Close
	changed  chan struct{}          // closed and replaced when current changes
	closed   bool
	active   int           // run calls in progress
	idle     chan struct{} // closed when closed && active == 0
	nextID   int
	ua       string // the browsers' own user agent, without "Headless"
	st       Stats
	launchEr error
}

// instance is one running browser.
type instance struct {
	id      int
	browser playwright.Browser
	pid     int    // the browser process, leader of its process group
	exeDir  string // where its executables live, to recognise its processes
	// crashDir is its crash dump directory, which names its crashpad
	// handlers, the processes outside its group.
	crashDir string
	gone     chan struct{}
	once     sync.Once

	// Guarded by Pool.mu.
	inflight int
	served   int
	pss      int64
	recycle  bool // wants a replacement
	dead     bool // crashed
	closing  bool // being closed by the pool
}

// NewPool starts the playwright driver, the pool's proxy and
// cfg.Browsers browsers. ctx bounds the start only. Close the pool when
// done with it.
func NewPool(ctx context.Context, cfg Config) (*Pool, error) {
	return newPool(ctx, cfg, urlpolicy.IsPublic)
}

// newPool is NewPool with the proxy's notion of a public address
// injected, so tests can treat one loopback address as public while the
// guard is on.
func newPool(ctx context.Context, cfg Config, public func(netip.Addr) bool) (*Pool, error) {
	cfg = cfg.withDefaults()
	if err := CheckInstall(cfg); err != nil {
		return nil, err
	}
	tok := make([]byte, 6)
	rand.Read(tok)
	p := &Pool{
		cfg:      cfg,
		log:      cfg.Logger,
		guard:    &guardproxy.Guard{AllowPrivate: cfg.AllowPrivateNetworks, Public: public, Resolver: cfg.Resolver},
		slots:    semaphore.NewWeighted(int64(cfg.Browsers * cfg.PagesPerBrowser)),
		token:    hex.EncodeToString(tok),
		kick:     make(chan struct{}, 1),
		stopped:  make(chan struct{}),
		draining: make(map[*instance]struct{}),
		all:      make(map[*instance]struct{}),
		changed:  make(chan struct{}),
		idle:     make(chan struct{}),
	}
	p.life, p.endLife = context.WithCancel(context.Background())
	p.proxy = guardproxy.New(p.guard, p.log)
	var err error
	if p.defRt, err = p.proxy.Open("", false); err != nil {
		return nil, err
	}
	p.driver = cfg.Driver
	if p.driver == nil {
		if p.driver, err = NewDriver(cfg); err != nil {
			p.proxy.Close()
			return nil, err
		}
		p.ownDriver = true
	}
	if p.drv, _, err = p.driver.get(nil); err != nil {
		if p.ownDriver {
			p.driver.Close()
		}
		p.proxy.Close()
		return nil, fmt.Errorf("playwright driver: %w", err)
	}
	for range cfg.Browsers {
		inst, err := p.launch(ctx)
		if err != nil {
			p.Close()
			return nil, err
		}
		p.mu.Lock()
		p.current = append(p.current, inst)
		p.mu.Unlock()
	}
	p.maintaining = true
	go p.maintain()
	return p, nil
}

// gpuArgs replace --disable-gpu when Config.GPU is set.
var gpuArgs = []string{"--enable-gpu-rasterization", "--ignore-gpu-blocklist"}

// chromiumArgs are the switches every browser gets besides Playwright's;
// the first is dropped for Config.GPU.
var chromiumArgs = []string{
	"--disable-gpu",
	"--no-first-run",
	// Nothing is resolved by the browser: the proxy resolves and dials.
	"--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
	// WebRTC must not send UDP around the proxy.
	"--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
	"--webrtc-ip-handling-policy=disable_non_proxied_udp",
}

// launch starts one browser behind the pool's proxy.
func (p *Pool) launch(ctx context.Context) (*instance, error) {
	p.mu.Lock()
	p.nextID++
	id := p.nextID
	p.mu.Unlock()
	marker := fmt.Sprintf("--trawl-browser=%s-%d", p.token, id)
	base := chromiumArgs
	if p.cfg.GPU {
		base = append(append([]string(nil), gpuArgs...), chromiumArgs[1:]...)
	}
	args := append(append(append([]string(nil), base...), marker), p.cfg.Args...)
	// Debian's chromium starts two crashpad handlers that daemonise out
	// of the browser's process group (parented to init). Giving each
	// browser its own dump directory names them on their command line,
	// so the pool can count, measure and kill them with their browser.
	crashDir := filepath.Join(p.drv.dir, fmt.Sprintf("crash-%s-%d", p.token, id))
	env := make(map[string]string)
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	env["BREAKPAD_DUMP_LOCATION"] = crashDir
	timeout := p.cfg.LaunchTimeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = time.Until(dl)
	}
	start := time.Now()
	b, err := p.drv.pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath:  playwright.String(p.cfg.ExecutablePath),
		Headless:        playwright.Bool(true),
		ChromiumSandbox: playwright.Bool(false),
		Args:            args,
		Proxy:           &playwright.Proxy{Server: p.defRt.URL()},
		Env:             env,
		Timeout:         playwright.Float(float64(max(timeout.Milliseconds(), 1))),
	})
	if err != nil {
		p.mu.Lock()
		p.st.LaunchFailures++
		p.mu.Unlock()
		return nil, fmt.Errorf("launch %s: %w", p.cfg.ExecutablePath, trim(err))
	}
	inst := &instance{id: id, browser: b, crashDir: crashDir, gone: make(chan struct{})}
	b.OnDisconnected(func(playwright.Browser) { p.onDisconnect(inst) })
	inst.pid, err = sysstat.FindArg(marker)
	if err == nil {
		var st sysstat.Process
		if st, err = sysstat.ReadProcess(inst.pid); err == nil && st.PGID != inst.pid {
			err = fmt.Errorf("browser process %d is not its group's leader", inst.pid)
		}
	}
	if err != nil {
		b.Close()
		p.mu.Lock()
		p.st.LaunchFailures++
		p.mu.Unlock()
		return nil, fmt.Errorf("launch %s: %w", p.cfg.ExecutablePath, err)
	}
	inst.exeDir = filepath.Dir(sysstat.Exe(inst.pid))
	if p.cfg.onLaunch != nil {
		p.cfg.onLaunch(inst)
	}
	p.mu.Lock()
	p.all[inst] = struct{}{}
	p.st.Launches++
	if p.ua == "" {
		p.ua = defaultUserAgent(b.Version())
	}
	closed := p.closed
	p.mu.Unlock()
	if !b.IsConnected() {
		p.onDisconnect(inst)
	}
	p.log.Info("browser started", "browser", id, "pid", inst.pid, "version", b.Version(), "took", time.Since(start).Round(time.Millisecond))
	if closed {
		p.shutdown(inst)
		return nil, ErrClosed
	}
	return inst, nil
}

// defaultUserAgent is what the browser would send in a window: headless
// Chromium says "HeadlessChrome", which sites block on sight.
func defaultUserAgent(version string) string {
	major, _, _ := strings.Cut(version, ".")
	if major == "" {
		major = "140"
	}
	return "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/" + major + ".0.0.0 Safari/537.36"
}

// onDisconnect runs when a browser's connection ends: after the pool
// closed it, or because it died.
func (p *Pool) onDisconnect(inst *instance) {
	// gone is closed only once dead is set: a request that saw its call
	// fail waits on gone and then reads dead (browserDied), and must not
	// read it in between (it took a crash for a site error, and did not
	// retry the page: TestKilledDriverIsRestarted in CI).
	gone := func() { inst.once.Do(func() { close(inst.gone) }) }
	p.mu.Lock()
	if inst.closing || inst.dead {
		p.mu.Unlock()
		gone()
		return
	}
	inst.dead = true
	p.st.Crashes++
	p.removeCurrentLocked(inst)
	delete(p.draining, inst)
	p.broadcastLocked()
	closed := p.closed
	p.mu.Unlock()
	gone()
	p.log.Warn("browser died", "browser", inst.id, "pid", inst.pid)
	// Reap what is left of it (renderers, zygotes) and start a
	// replacement, off the driver's event goroutine.
	go func() {
		reap(inst)
		os.RemoveAll(inst.crashDir)
		p.mu.Lock()
		delete(p.all, inst)
		p.mu.Unlock()
		if !closed {
			p.poke()
		}
	}()
}

func (p *Pool) removeCurrentLocked(inst *instance) {
	for i, in := range p.current {
		if in == inst {
			p.current = append(p.current[:i], p.current[i+1:]...)
			return
		}
	}
}

// broadcastLocked wakes everyone waiting for a browser.
func (p *Pool) broadcastLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// poke asks the maintenance goroutine to look at the fleet.
func (p *Pool) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// maintain keeps the fleet at its size: it replaces dead browsers and
// browsers due for recycling, closes drained ones and reads memory.
func (p *Pool) maintain() {
	defer close(p.stopped)
	tick := time.NewTicker(p.cfg.MemoryCheckInterval)
	defer tick.Stop()
	var backoff time.Duration
	var retry <-chan time.Time
	for {
		var driverDead <-chan struct{}
		if p.drv != nil {
			driverDead = p.drv.dead
		}
		select {
		case <-p.life.Done():
			return
		case <-p.kick:
		case <-tick.C:
			p.checkMemory()
		case <-retry:
			retry = nil
		case <-driverDead:
			p.driverDied()
			retry, backoff = nil, 0 // start another at once
		}
		if retry != nil {
			continue // waiting out a failed launch
		}
		err := p.startDriver()
		if err == nil {
			err = p.reconcile()
		}
		if err != nil && p.drv != nil && p.drv.pid == 0 && closedRE.MatchString(err.Error()) {
			// An unwatched driver: a launch failing on a closed
			// connection says it died.
			p.driverDied()
			err = p.startDriver()
			if err == nil {
				err = p.reconcile()
			}
		}
		if errors.Is(err, ErrClosed) {
			return
		}
		if err != nil {
			backoff = min(max(2*backoff, 500*time.Millisecond), 30*time.Second)
			retry = time.After(backoff)
			p.log.Error("browser pool: cannot start a browser", "err", err, "retry_in", backoff)
		} else {
			backoff = 0
		}
	}
}

// driverDied handles the death of the playwright driver (its node process
// killed or crashed): every browser went with it, and is reaped and
// counted as crashed, so requests on them are retried once on the next
// driver's browsers. The maintenance goroutine then gets a new driver
// (from a shared Driver, the one another pool may have started already).
func (p *Pool) driverDied() {
	old := p.drv
	p.log.Error("playwright driver died; starting another", "pid", old.pid, "stderr", old.stderr.String())
	p.mu.Lock()
	p.drv, p.deadDrv = nil, old
	insts := make([]*instance, 0, len(p.all))
	for in := range p.all {
		insts = append(insts, in)
	}
	p.mu.Unlock()
	for _, in := range insts {
		p.onDisconnect(in)
	}
	old.stop() // collects what is left of it; its error is the death
}

// startDriver gets a running driver when the pool has none (after its
// death): it starts one, or finds the one another pool of a shared Driver
// started. A failure counts as a failed launch: requests waiting for a
// browser fail with it rather than wait.
func (p *Pool) startDriver() error {
	if p.drv != nil {
		return nil
	}
	d, started, err := p.driver.get(p.deadDrv)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.st.LaunchFailures++
		p.launchEr = err
		p.broadcastLocked()
		return err
	}
	if p.closed {
		return ErrClosed
	}
	p.drv, p.deadDrv = d, nil
	p.st.DriverRestarts++
	if !started {
		p.log.Info("playwright driver: on the one restarted for the pools sharing it", "pid", d.pid)
	}
	return nil
}

// reconcile brings the fleet to its size and closes drained browsers.
func (p *Pool) reconcile() error {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil
		}
		var drained []*instance
		for in := range p.draining {
			if in.inflight == 0 {
				drained = append(drained, in)
			}
		}
		need := p.cfg.Browsers - len(p.current)
		var old *instance
		for _, in := range p.current {
			if in.recycle {
				old = in
				break
			}
		}
		p.mu.Unlock()
		for _, in := range drained {
			p.shutdown(in)
		}
		if need <= 0 && old == nil {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.LaunchTimeout)
		inst, err := p.launch(ctx)
		cancel()
		if errors.Is(err, ErrClosed) {
			return nil
		}
		p.mu.Lock()
		if err != nil {
			p.launchEr = err
			p.broadcastLocked()
			p.mu.Unlock()
			return err
		}
		p.launchEr = nil
		if need <= 0 && old != nil && !old.dead {
			p.removeCurrentLocked(old)
			p.draining[old] = struct{}{}
			p.st.Recycles++
			p.log.Info("browser recycled", "browser", old.id, "pages", old.served, "pss_mb", old.pss>>20, "replacement", inst.id)
		}
		p.current = append(p.current, inst)
		p.broadcastLocked()
		p.mu.Unlock()
	}
}

// checkMemory reads every browser's memory and marks those over the limit
// for recycling.
func (p *Pool) checkMemory() {
	p.mu.Lock()
	insts := append([]*instance(nil), p.current...)
	p.mu.Unlock()
	procs, err := sysstat.Processes()
	if err != nil {
		return
	}
	limit := int64(p.cfg.RecycleAboveMB) << 20
	wantRecycle := false
	var total int64
	for _, in := range insts {
		pss, err := instancePSS(procs, in)
		if err != nil {
			continue
		}
		total += pss
		p.mu.Lock()
		in.pss = pss
		if p.cfg.RecycleAboveMB > 0 && pss > limit && !in.recycle {
			in.recycle = true
			wantRecycle = true
			p.log.Info("browser over its memory limit", "browser", in.id, "pss_mb", pss>>20, "limit_mb", p.cfg.RecycleAboveMB)
		}
		p.mu.Unlock()
	}
	p.mu.Lock()
	p.st.PSS = total
	p.mu.Unlock()
	if wantRecycle {
		p.poke()
	}
}

// shutdown closes a browser the pool is done with, killing its process
// group if it does not close within CloseGrace, and reaps stragglers.
func (p *Pool) shutdown(inst *instance) {
	p.mu.Lock()
	inst.closing = true
	p.removeCurrentLocked(inst)
	delete(p.draining, inst)
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		inst.browser.Close()
		close(done)
	}()
	t := time.NewTimer(p.cfg.CloseGrace)
	select {
	case <-done:
	case <-t.C:
		p.log.Warn("browser did not close in time; killing it", "browser", inst.id, "pid", inst.pid)
	}
	t.Stop()
	reap(inst)
	os.RemoveAll(inst.crashDir)
	p.mu.Lock()
	delete(p.all, inst)
	p.mu.Unlock()
}

// kill ends a browser that stopped answering; the pool treats it as
// crashed and replaces it.
func (p *Pool) kill(inst *instance, why string) {
	p.log.Warn("killing browser", "browser", inst.id, "pid", inst.pid, "why", why)
	reap(inst)
}

// Stats returns a snapshot of the pool.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.st
	s.Draining = len(p.draining)
	s.Browsers = len(p.current) + len(p.draining)
	s.Healthy = !p.closed && (len(p.current) > 0 || p.launchEr == nil)
	return s
}

// PSS measures the memory of every running browser's process tree (the
// browser and its renderers, GPU and utility processes) now, in bytes:
// the proportional set size from /proc/<pid>/smaps_rollup, so memory
// shared between processes is counted once.
func (p *Pool) PSS() (int64, error) {
	p.mu.Lock()
	insts := make([]*instance, 0, len(p.all))
	for in := range p.all {
		insts = append(insts, in)
	}
	p.mu.Unlock()
	procs, err := sysstat.Processes()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, in := range insts {
		pss, err := instancePSS(procs, in)
		if err != nil {
			continue // closed or died since
		}
		total += pss
	}
	return total, nil
}

// Close stops the pool: requests waiting for a page fail with ErrClosed,
// pages in flight fail, every browser is closed (its process group killed
// if it does not close within CloseGrace) and the driver and the proxy
// stop. When Close returns no process of the pool is left.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.endLife()
	p.broadcastLocked()
	if p.active == 0 {
		close(p.idle)
	}
	p.mu.Unlock()
	if p.maintaining {
		<-p.stopped // it may be mid-launch; it closes what it launched
	}
	p.mu.Lock()
	insts := make([]*instance, 0, len(p.all))
	for in := range p.all {
		insts = append(insts, in)
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, in := range insts {
		wg.Go(func() { p.shutdown(in) })
	}
	wg.Wait()
	// Pages in flight fail now that their browsers are gone.
	t := time.NewTimer(p.cfg.CloseGrace)
	select {
	case <-p.idle:
	case <-t.C:
		p.log.Warn("browser pool: requests still running after close")
	}
	t.Stop()
	var err error
	if p.ownDriver {
		err = p.driver.Close()
	}
	p.proxy.Close()
	// Belt and braces: nothing of ours outlives Close.
	for _, in := range insts {
		reap(in)
	}
	return err
}

package crawl

import (
	"go.opentelemetry.io/otel/metric"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trawlhq/trawl/cell/crawl/extract"
	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/fetch/browser"
	"github.com/trawlhq/trawl/cell/fetch/ladder"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/sysstat"
	"github.com/trawlhq/trawl/internal/webhook"
)

// DefaultListen is the crawl server's address (docs/spec/crawl-server.md §9: port 11235).
const DefaultListen = "127.0.0.1:11235"

// Defaults of Config.
const (
	DefaultMaxConcurrentTasks = 5
	DefaultMaxQueuedTasks     = 1000
	DefaultJanitorEvery       = 30 * time.Second
	DefaultPushEvery          = 2 * time.Second
)

// Config configures a Server. cmd/trawl fills it from flags and the
// spec's environment variables (FromEnv).
type Config struct {
	// DataDir holds the task store (DataDir/crawl).
	DataDir string
	// Token, when set, is required as `Authorization: Bearer <token>` on
	// every route but /health (SERVICE_API_TOKEN).
	Token string
	// MaxConcurrentTasks bounds the tasks (and streams) running at once
	// (MAX_CONCURRENT_TASKS). Default 5.
	MaxConcurrentTasks int
	// MaxQueuedTasks bounds the tasks waiting for a slot; past it a
	// submission gets 503 "No available slots". Default 1000.
	MaxQueuedTasks int
	// DefaultTTL is how long a finished task is kept when the request
	// gives no ttl. Default 1 hour.
	DefaultTTL time.Duration
	// AllowPrivateNetworks lets pages reach loopback and private
	// addresses (tests and local use).
	AllowPrivateNetworks bool
	// PagesPerBrowser bounds the pages one pool browser renders at once
	// (default 4); MaxBrowsers bounds the hot and cold browsers (default 6).
	PagesPerBrowser int
	MaxBrowsers     int
	// MaxSessions bounds the session_id browser contexts kept (default
	// DefaultMaxSessions, the least recently used closed past it);
	// SessionIdle is how long one is kept unused (default
	// DefaultSessionIdle, 30 minutes), on the Now clock, by the janitor.
	MaxSessions int
	SessionIdle time.Duration
	// Browser is the base configuration of every pool browser (each is a
	// browser.Pool of one Chromium); Engine configures their engines.
	Browser browser.Config
	Engine  browser.EngineConfig
	// DefaultViewport is the permanent browser's window and the size of
	// every page whose request names none; another size makes a
	// non-default configuration (a cold, then hot, browser). Default
	// DefaultViewport, Crawl4AI's 1080×600.
	DefaultViewport fetch.Viewport
	// CORSOrigins are the origins a web page may call the server from;
	// empty means any origin, as Crawl4AI v0.4 allowed. NoCORS turns
	// cross-origin answers off.
	CORSOrigins []string
	NoCORS      bool
	// FreshFor is how long a page fetched without a browser is served
	// from the page cache (default DefaultFreshFor; negative: no cache).
	FreshFor time.Duration
	// Proxies are the upstream proxy pools of the engine ladder, and
	// EscalateProxy the kind (isp, residential) of its last step; as the
	// cell's --proxy and --escalate-proxy.
	Proxies       []fetch.ProxySpec
	EscalateProxy string
	// WebhookSchedule is the retry ladder of task webhooks; nil means
	// webhook.DefaultSchedule (1 m, 5 m, 30 m, 2 h, 12 h).
	WebhookSchedule []time.Duration
	// SyncWait is how long POST /crawl_sync waits for its task before
	// answering 408 (default DefaultSyncWait, v0.4's 60 s).
	SyncWait time.Duration
	// Launch starts pool browsers; nil means Chromium (ChromiumLauncher),
	// every pool browser on one Playwright driver that the server starts
	// (unless Browser.Driver names one) and stops on Close.
	Launch Launcher
	// Extract configures the extraction strategies (LLM endpoints).
	Extract extract.Config
	// JanitorEvery is the janitor's period (default 30 s); PushEvery the
	// WebSocket's (default 2 s).
	JanitorEvery time.Duration
	PushEvery    time.Duration
	// AwaitShare, beside a clustered cell, holds the tasks accepted
	// before a restart for up to this long for Share, which queues them
	// on the region's work queue, rather than run them here at once (the
	// region may be running them: share.go). 0 resumes them at once.
	AwaitShare time.Duration
	// Pressure reports memory use from 0 to 1; nil means the process
	// tree against its cgroup limit, as measured (tests inject one).
	Pressure func() float64
	// Now is the clock of every time-driven decision (idle browsers, task
	// expiry). Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// FromEnv applies the spec's environment variables (SERVICE_API_TOKEN,
// MAX_CONCURRENT_TASKS) to cfg where getenv has them.
func (c *Config) FromEnv(getenv func(string) string) error {
	if t := getenv("SERVICE_API_TOKEN"); t != "" {
		c.Token = t
	}
	if v := getenv("MAX_CONCURRENT_TASKS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return fmt.Errorf("MAX_CONCURRENT_TASKS=%q: want an integer from 1 to 1000", v)
		}
		c.MaxConcurrentTasks = n
	}
	return nil
}

func (c *Config) defaults() {
	if c.MaxConcurrentTasks <= 0 {
		c.MaxConcurrentTasks = DefaultMaxConcurrentTasks
	}
	if c.MaxQueuedTasks <= 0 {
		c.MaxQueuedTasks = DefaultMaxQueuedTasks
	}
	if c.DefaultTTL <= 0 {
		c.DefaultTTL = DefaultTTL
	}
	if c.PagesPerBrowser <= 0 {
		c.PagesPerBrowser = browser.DefaultPagesPerBrowser
	}
	if c.JanitorEvery <= 0 {
		c.JanitorEvery = DefaultJanitorEvery
	}
	if c.DefaultViewport == (fetch.Viewport{}) {
		c.DefaultViewport = DefaultViewport
	}
	if c.FreshFor == 0 {
		c.FreshFor = DefaultFreshFor
	}
	if c.SyncWait <= 0 {
		c.SyncWait = DefaultSyncWait
	}
	if c.PushEvery <= 0 {
		c.PushEvery = DefaultPushEvery
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Browser.AllowPrivateNetworks = c.AllowPrivateNetworks
}

// Server is the self-hosted crawl server: the task API, the browser pool
// tiers and the operations monitor. Create it with New, serve Handler,
// stop it with Close.
type Server struct {
	cfg     Config
	log     *slog.Logger
	st      *store.Store
	tasks   taskStore
	sched   *scheduler
	pool    *Pool
	mon     *monitor
	hooks   *webhook.Sender
	http    *fetch.HTTP
	ladder  *ladder.Ladder
	sampler *sysstat.Sampler
	started time.Time
	// driver is the Playwright driver of every pool browser, when the
	// server started it (closed after the pool).
	driver *browser.Driver

	sampleMu  sync.Mutex
	last      sysstat.Sample
	sampledAt time.Time

	// waiters are the /crawl_sync answers waiting for their task, by id.
	waiters sync.Map

	life    context.Context
	endLife context.CancelFunc
	bg      sync.WaitGroup
	once    sync.Once
	gauges  metric.Registration // cell/crawl/metrics.go

	// share, once set (Share), queues tasks on the region's work queue
	// (share.go); finishMu orders the stores of a task's outcome.
	share atomic.Pointer[taskSharing]
	// restoring: a clustered server that started without tasks (a new
	// cell, or one whose disk was lost) until Share has restored its
	// tasks from the region's log (mirror.go): an unknown task id is
	// then a 503, not a 404.
	restoring atomic.Bool
	shared    chan struct{} // closed by Share
	paused    atomic.Pointer[func() bool]
	finishMu  sync.Mutex
}

// New opens the task store, starts the permanent browser, resumes the
// tasks a previous run accepted and did not finish, and starts the
// janitor.
func New(ctx context.Context, cfg Config) (*Server, error) {
	cfg.defaults()
	if cfg.DataDir == "" {
		return nil, errors.New("crawl: DataDir is required")
	}
	dir := filepath.Join(cfg.DataDir, "crawl")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("crawl: %w", err)
	}
	st, err := store.Open(dir, &store.Options{Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("crawl: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, st: st, tasks: taskStore{st}, mon: newMonitor(cfg.Now),
		sampler: sysstat.New(), started: cfg.Now()}
	s.life, s.endLife = context.WithCancel(context.Background())
	s.refreshSample()
	if cfg.Pressure == nil {
		cfg.Pressure = s.pressure
	}
	if cfg.Launch == nil {
		bcfg := cfg.Browser
		if bcfg.Driver == nil {
			dcfg := bcfg
			dcfg.Logger = cfg.Logger
			if s.driver, err = browser.NewDriver(dcfg); err != nil {
				st.Close()
				return nil, fmt.Errorf("crawl: %w", err)
			}
			bcfg.Driver = s.driver
		}
		cfg.Launch = ChromiumLauncher(bcfg, cfg.Engine, cfg.PagesPerBrowser, cfg.Logger)
		s.cfg.Launch = cfg.Launch
	}
	s.pool, err = NewPool(ctx, PoolConfig{Launch: cfg.Launch, PagesPerBrowser: cfg.PagesPerBrowser, MaxBrowsers: cfg.MaxBrowsers,
		Now: cfg.Now, Pressure: cfg.Pressure, Logger: cfg.Logger, Janitor: s.mon.logJanitor,
		MaxSessions: cfg.MaxSessions, SessionIdle: cfg.SessionIdle})
	if err != nil {
		s.closeDriver()
		st.Close()
		return nil, fmt.Errorf("crawl: %w", err)
	}
	proxies, err := fetch.NewProxyPools(cfg.Proxies)
	if err == nil {
		s.http = fetch.NewHTTP(fetch.HTTPConfig{AllowPrivateNetworks: cfg.AllowPrivateNetworks, MaxBodyBytes: cfg.Engine.MaxBodyBytes})
		s.ladder, err = ladder.New(st, ladder.Config{HTTP: s.http, Browser: permanentEngine{s}, Proxies: proxies,
			EscalateProxy: cfg.EscalateProxy, MemoryPrefix: store.PrefixCrawlSite, Now: cfg.Now, Logger: cfg.Logger})
	}
	if err != nil {
		s.pool.Close()
		s.closeDriver()
		st.Close()
		return nil, fmt.Errorf("crawl: %w", err)
	}
	s.hooks, err = webhook.New(st, webhook.Config{Prefix: store.PrefixCrawlWebhook, AllowPrivateNetworks: cfg.AllowPrivateNetworks,
		Schedule: cfg.WebhookSchedule, Now: cfg.Now, Logger: cfg.Logger})
	if err != nil {
		s.pool.Close()
		s.closeDriver()
		st.Close()
		return nil, fmt.Errorf("crawl: %w", err)
	}
	s.bg.Go(func() { s.hooks.Run(s.life) })
	s.sched = newScheduler(cfg.MaxConcurrentTasks, cfg.MaxQueuedTasks, s.runTask)
	s.shared = make(chan struct{})
	if cfg.AwaitShare > 0 {
		s.restoring.Store(s.tasks.empty())
		s.bg.Go(func() {
			t := time.NewTimer(cfg.AwaitShare)
			defer t.Stop()
			select {
			case <-s.shared:
			case <-s.life.Done():
			case <-t.C:
				s.restoring.Store(false)
				s.log.Warn("crawl: the region did not take this server's tasks in time; running them here", "waited", cfg.AwaitShare)
				if err := s.resume(); err != nil {
					s.log.Error("crawl: resume tasks", "err", err)
				}
			}
		})
	} else if err := s.resume(); err != nil {
		s.Close()
		return nil, err
	}
	s.bg.Go(s.janitor)
	if s.gauges, err = s.observe(); err != nil {
		s.Close()
		return nil, fmt.Errorf("crawl: metrics: %w", err)
	}
	return s, nil
}

// resume queues the tasks accepted before a restart and not finished.
func (s *Server) resume() error {
	var n int
	err := s.tasks.each(func(t *Task) error {
		if t.Status != StatusPending && t.Status != StatusProcessing {
			return nil
		}
		n++
		return s.sched.push(&queued{priority: t.Priority, seq: t.Seq, taskID: t.ID}, true)
	})
	if n > 0 {
		s.log.Info("crawl: resumed unfinished tasks", "tasks", n)
	}
	return err
}

// Close stops taking work, cancels running tasks (they resume at the next
// start), closes every browser and the store.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		if s.gauges != nil {
			s.gauges.Unregister()
		}
		s.hooks.Close()
		s.endLife()
		s.sched.close()
		s.bg.Wait()
		s.http.Close()
		err = errors.Join(s.pool.Close(), s.closeDriver(), s.st.Close())
	})
	return err
}

// closeDriver stops the Playwright driver the server started, once its
// browsers are closed.
func (s *Server) closeDriver() error {
	if s.driver == nil {
		return nil
	}
	return s.driver.Close()
}

// janitor runs the pool sweep, the task expiry and the timeline samples.
func (s *Server) janitor() {
	sweep := time.NewTicker(s.cfg.JanitorEvery)
	sample := time.NewTicker(timelineStep)
	defer sweep.Stop()
	defer sample.Stop()
	for {
		select {
		case <-s.life.Done():
			return
		case <-sweep.C:
			s.pool.Sweep(false)
			if _, err := s.ladder.Sweep(); err != nil {
				s.log.Warn("crawl: ladder memory sweep", "err", err)
			}
			if _, err := s.st.SweepExpired(pagePrefix, s.cfg.Now()); err != nil {
				s.log.Warn("crawl: page cache sweep", "err", err)
			}
			if n, err := s.tasks.sweep(s.cfg.Now()); err != nil {
				s.log.Warn("crawl: task sweep", "err", err)
			} else if n > 0 {
				s.log.Info("crawl: expired tasks removed", "tasks", n)
			}
		case <-sample.C:
			s.takeSample()
		}
	}
}

// refreshSample measures the process tree, at most once a second (CPU
// percentages need a window; several WebSocket clients share one).
func (s *Server) refreshSample() sysstat.Sample {
	s.sampleMu.Lock()
	defer s.sampleMu.Unlock()
	if !s.sampledAt.IsZero() && time.Since(s.sampledAt) < time.Second {
		return s.last
	}
	smp, err := s.sampler.Sample()
	s.sampledAt = time.Now()
	if err != nil {
		s.log.Debug("crawl: system sample", "err", err)
		return s.last
	}
	s.last = smp
	return smp
}

func (s *Server) lastSample() sysstat.Sample {
	s.sampleMu.Lock()
	defer s.sampleMu.Unlock()
	return s.last
}

func (s *Server) pressure() float64 { return s.lastSample().Pressure() }

func (s *Server) takeSample() {
	smp := s.refreshSample()
	perm, hot, cold, _ := s.pool.Browsers()
	_, running := s.sched.counts()
	s.mon.sample(TimelinePoint{Timestamp: unixSeconds(s.cfg.Now()), CPUPercent: round1(smp.CPUPercent),
		MemoryPercent: round1(smp.MemoryPercent), MemoryMB: round1(mbOf(smp.MemoryBytes)),
		Browsers: len(perm) + len(hot) + len(cold), ActiveTasks: running})
}

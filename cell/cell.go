// Package cell assembles the cell: its store, fetch engine, scrape service and
// job manager, and serves the cell API over HTTP.
package cell

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/trawlhq/trawl/cell/extract"
	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/fetch/browser"
	"github.com/trawlhq/trawl/cell/fetch/ladder"
	"github.com/trawlhq/trawl/cell/jobs"
	"github.com/trawlhq/trawl/cell/monitor"
	"github.com/trawlhq/trawl/cell/recipe"
	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/cell/search"
	"github.com/trawlhq/trawl/internal/jobid"
	"github.com/trawlhq/trawl/internal/monstore"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/webhook"
)

// Config is everything a cell needs; cmd/trawl builds it from flags.
type Config struct {
	// Region and Name address the cell: Name is unique within its region and
	// every job id carries both (j_<region>.<name>.<hex>), so any gate can
	// route a job to the cell that owns it. Both are 1 to 16 of [a-z0-9];
	// defaults "eu" and "c1".
	Region string
	Name   string
	// DataDir holds the cell's Pebble store (DataDir/store).
	DataDir string
	// AllowPrivateNetworks lets the cell fetch loopback and private
	// addresses. Off by default: local use and tests only. The cell then
	// serves only requests whose gate allows it too (regionauth.Claims).
	AllowPrivateNetworks bool
	// Pages are extra handlers by ServeMux pattern (trawl dev's /demo/
	// site), served like every route: only to its gate, answers signed.
	Pages map[string]http.Handler
	// RegionKeys are the region's keys (TRAWL_REGION_KEYS): the cell
	// answers only requests its region's gate signed with them, and signs
	// its answers. Required.
	RegionKeys *regionauth.Keys
	// Resolver resolves the names of the sites the cell fetches; nil is
	// net.DefaultResolver (tests give a static one).
	Resolver *net.Resolver
	// FreshFor is the cache freshness window for repeat scrapes (default 10m).
	FreshFor time.Duration
	// FetchTimeout is the per-request deadline of a page fetch (default 30s).
	FetchTimeout time.Duration
	// MaxPageBytes caps a fetched page (default 10 MiB).
	MaxPageBytes int64
	// BatchConcurrency bounds parallel fetches of one batch (default 8).
	BatchConcurrency int
	// JobConcurrency bounds parallel fetches across all jobs (default 16).
	JobConcurrency int
	// JobRetention is how long jobs and their results are kept (default 7d).
	JobRetention time.Duration
	// FleetBusyWait bounds how long one URL of a batch or a job waits out
	// a busy browser fleet (no page free) before 503 fleet-busy becomes its
	// result; they ask again with jittered backoff meanwhile. Default 2m;
	// negative: no wait. A single /scrape never waits: it answers 503
	// fleet-busy at once, uncharged, for its caller to repeat.
	FleetBusyWait time.Duration
	// SweepEvery is how often expired cache entries and old jobs are removed
	// (default 10m).
	SweepEvery time.Duration

	// Browsers is the number of Chromium processes in the browser pool:
	// 0 runs no browser (the engine ladder stops at plain HTTP); negative
	// means one when Chromium and the Playwright driver are installed, and
	// none (with a warning) when they are not.
	Browsers int
	// BrowserPages is how many pages each browser renders at once (default
	// 4); beyond Browsers × BrowserPages a request waits up to 5 s for a
	// page, then gets 503 fleet-busy.
	BrowserPages int
	// BrowserEngine, when set, is the browser engine to use instead of a
	// pool started from Browsers (tests use a fake). The cell does not
	// close it.
	BrowserEngine fetch.Engine
	// Proxies are the upstream proxies, pooled by kind and country
	// (`--proxy isp:us=http://user:pass@host:port`).
	Proxies []fetch.ProxySpec
	// EscalateProxy is the proxy kind (isp or residential) the engine
	// ladder may use as its last step for requests that ask for no proxy:
	// the browser through that kind of proxy, when the browser alone met a
	// bot wall. Empty: such requests never use a proxy.
	EscalateProxy string
	// StepDown is how long a site that needed the browser goes straight to
	// it before one request tries plain HTTP again (default 24h; negative:
	// never).
	StepDown time.Duration

	// Model is the operator's language model for /extract (cell/llm,
	// shared with the crawl server's llm strategy); nil: extraction runs
	// the deterministic extractor only.
	Model *extract.ModelConfig
	// Monitor holds the operator's monitor settings (MinEvery,
	// ConfirmAfter, Limits, WebhookRetries, Extractor; cmd/trawl flags);
	// the cell fills in the rest. Zero values are the spec's.
	Monitor monitor.Config
	// Recipes holds the operator's recipe settings (cell/recipes.go).
	Recipes RecipeConfig
	// WebhookSecrets gives an account's webhook secret, which signs the
	// webhooks of its batch scrapes and crawls (cell/v2_webhooks.go): the
	// region's gate's (hooksecret.Client). nil: a webhook is refused
	// with 503 (a cell without a gate).
	WebhookSecrets WebhookSecrets

	// JetStream configures the cell's embedded NATS JetStream node, in
	// DataDir/nats (cell/jetstream.go; nothing uses it yet). The zero
	// value is a standalone node.
	JetStream JetStreamConfig

	Now    func() time.Time
	Logger *slog.Logger

	busyBackoff time.Duration // tests: the first fleet-busy pause
}

// busy is how batches and jobs wait out a busy browser fleet.
func (c *Config) busy() jobs.BusyRetry {
	return jobs.BusyRetry{Wait: c.FleetBusyWait, Backoff: c.busyBackoff}
}

func (c *Config) defaults() {
	if c.Region == "" {
		c.Region = "eu"
	}
	if c.Name == "" {
		c.Name = "c1"
	}
	if c.BatchConcurrency <= 0 {
		c.BatchConcurrency = 8
	}
	if c.SweepEvery <= 0 {
		c.SweepEvery = 10 * time.Minute
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Cell is a running cell. Create it with New, serve Handler, stop with Close.
type Cell struct {
	cfg    Config
	store  *store.Store
	engine *fetch.HTTP
	pool   *browser.Pool // nil without a browser, or with Config.BrowserEngine
	gauges metric.Registration
	ladder *ladder.Ladder
	scrape *scrape.Service
	jobs   *jobs.Manager
	gate   *regionauth.Verifier
	// extractor serves /extract.
	extractor extract.Extractor

	monitors     *monitor.Service
	stopMonitors func()

	recipes     *recipe.Service
	stopRecipes func()

	// Firecrawl's webhooks (cell/v2_webhooks.go).
	v2Hooks     *webhook.Sender
	stopV2Hooks func()

	// Firecrawl's crawls (cell/v2_crawl.go): what each running crawl's
	// pages share, its WebSocket watchers, and the lock of the credits
	// the gate acknowledges.
	crawlRuns      sync.Map // job id → *crawlRun
	crawlWatch     watchers
	crawlCreditsMu sync.Mutex
	unnoted        map[string]bool // jobs whose credits note was not written (under crawlCreditsMu)
	// tracks keeps the snapshots of Firecrawl's change tracking
	// (cell/v2_change.go): the region's monitor store.
	tracks monstore.Store

	// The search index of the archived pages (cell/search.go).
	index       *search.Index
	indexer     *search.Indexer
	stopRebuild context.CancelFunc
	rebuilt     chan struct{}
	// Pages a full index queue dropped, indexed from the archive.
	dropCtx    context.Context
	dropCancel context.CancelFunc
	dropped    atomic.Uint64

	// The embedded JetStream node (cell/jetstream.go).
	js *jsState
	// pages sends the pages this cell archives to the cell that indexes
	// them beside it, and indexes the others' (cell/pages.go); nil until
	// the cell shares. freshDisk: the store held no page at start.
	pages     atomic.Pointer[pageCopies]
	checks    atomic.Pointer[checkQueue] // the region's queue of monitor checks (checks.go), once shared
	freshDisk bool

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// New opens the store, resumes unfinished jobs and starts the janitor.
func New(cfg Config) (*Cell, error) {
	cfg.defaults()
	if cfg.DataDir == "" {
		return nil, errors.New("cell: DataDir is required")
	}
	if cfg.RegionKeys == nil {
		return nil, errors.New("cell: no region keys (set " + regionauth.EnvKeys + ")")
	}
	if !jobid.ValidName(cfg.Region) {
		return nil, fmt.Errorf("cell: region %q: want 1 to 16 of [a-z0-9]", cfg.Region)
	}
	if !jobid.ValidName(cfg.Name) {
		return nil, fmt.Errorf("cell: name %q: want 1 to 16 of [a-z0-9]", cfg.Name)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("cell: %w", err)
	}
	st, err := store.Open(filepath.Join(cfg.DataDir, "store"), &store.Options{Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	engine := fetch.NewHTTP(fetch.HTTPConfig{
		AllowPrivateNetworks: cfg.AllowPrivateNetworks,
		Resolver:             cfg.Resolver,
		MaxBodyBytes:         cfg.MaxPageBytes,
		Timeout:              cfg.FetchTimeout,
	})
	proxies, err := fetch.NewProxyPools(cfg.Proxies)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("cell: %w", err)
	}
	brEngine, pool, err := startBrowser(cfg)
	if err != nil {
		st.Close()
		return nil, err
	}
	lad, err := ladder.New(st, ladder.Config{
		HTTP:          engine,
		Browser:       brEngine,
		Proxies:       proxies,
		EscalateProxy: cfg.EscalateProxy,
		StepDown:      cfg.StepDown,
		Now:           cfg.Now,
		Logger:        cfg.Logger,
	})
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		st.Close()
		return nil, fmt.Errorf("cell: %w", err)
	}
	if n := proxies.Len(); n > 0 {
		cfg.Logger.Info("proxy pools", "proxies", n, "pools", proxies.Configured(), "escalate", cfg.EscalateProxy)
	}
	c := &Cell{cfg: cfg, rebuilt: make(chan struct{})}
	if err := c.openSearch(); err != nil {
		if pool != nil {
			pool.Close()
		}
		st.Close()
		return nil, fmt.Errorf("cell: %w", err)
	}
	svc := scrape.New(st, lad, scrape.Config{
		FreshFor:             cfg.FreshFor,
		AllowPrivateNetworks: cfg.AllowPrivateNetworks,
		Now:                  cfg.Now,
		Logger:               cfg.Logger,
		Archived:             c.archived,
	})
	hooks, err := c.newV2Hooks(st) // Firecrawl's webhooks (cell/v2_webhooks.go)
	if err != nil {
		svc.Close()
		c.indexer.Close()
		c.index.Close()
		if pool != nil {
			pool.Close()
		}
		st.Close()
		return nil, err
	}
	mgr, err := jobs.NewManager(st, svc.Scrape, jobs.Config{
		Region:      cfg.Region,
		Cell:        cfg.Name,
		Concurrency: cfg.JobConcurrency,
		Retention:   cfg.JobRetention,
		Busy:        cfg.busy(),
		Shaped:      c.v2Shaped, // Firecrawl's batch scrapes and crawls (cell/v2.go)
		// A clustered cell shares its jobs once its node is in the
		// region (jetstream.go): until then its URLs wait, up to a
		// minute, rather than run here and again from the queue.
		AwaitShare: awaitShare(cfg.JetStream),
		Events:     jobs.Observers{crawlEvents{c}, extractEvents{}, hooks},
		TakeMark:   hooks.Take, // a down cell's pending webhook deliveries, sent from here
		Now:        cfg.Now,
		Logger:     cfg.Logger,
	})
	if err != nil {
		svc.Close()
		c.indexer.Close()
		c.index.Close()
		if pool != nil {
			pool.Close()
		}
		st.Close()
		return nil, err
	}
	hooks.SetMarks(mgr) // a shared job's deliveries are marked in the region's log
	c.store, c.engine, c.pool, c.ladder, c.scrape, c.jobs = st, engine, pool, lad, svc, mgr
	c.freshDisk = !hasPages(st)
	// Firecrawl's change tracking keeps its snapshots where the region's
	// monitors are (cell/v2_change.go).
	c.tracks = cfg.Monitor.Shared
	if c.tracks == nil {
		c.tracks = monstore.NewLocal(st, monstore.LocalConfig{})
	}
	c.gate, c.stop, c.done = regionauth.NewVerifier(cfg.RegionKeys, nil), make(chan struct{}), make(chan struct{})
	if cfg.Model != nil && cfg.Model.Client != nil {
		c.extractor.Model = extract.NewModel(*cfg.Model)
		cfg.Logger.Info("extract model", "provider", cfg.Model.Client.Provider())
	}
	var rctx context.Context
	rctx, c.stopRebuild = context.WithCancel(context.Background())
	go c.rebuildSearch(rctx)
	fail := func(what string, err error) (*Cell, error) {
		mgr.Close()
		svc.Close()
		if pool != nil {
			pool.Close()
		}
		c.closeSearch()
		st.Close()
		return nil, fmt.Errorf("cell: %s: %w", what, err)
	}
	if err := c.startMonitors(st); err != nil {
		return fail("monitors", err)
	}
	if err := c.startRecipes(); err != nil {
		c.stopMonitors()
		return fail("recipes", err)
	}
	if c.gauges, err = c.observe(); err != nil {
		c.stopRecipes()
		c.stopMonitors()
		return fail("metrics", err)
	}
	if err := c.openJetStream(); err != nil {
		c.gauges.Unregister()
		c.stopRecipes()
		c.stopMonitors()
		return fail("jetstream", err)
	}
	c.startV2Hooks()
	mgr.Start()
	go c.janitor()
	return c, nil
}

// startBrowser starts the browser pool Config asks for, and returns its
// engine; a nil engine means the cell runs no browser.
func startBrowser(cfg Config) (fetch.Engine, *browser.Pool, error) {
	if cfg.BrowserEngine != nil {
		return cfg.BrowserEngine, nil, nil
	}
	if cfg.Browsers == 0 {
		return nil, nil, nil
	}
	bcfg := browser.Config{
		Browsers:             cfg.Browsers,
		PagesPerBrowser:      cfg.BrowserPages,
		AllowPrivateNetworks: cfg.AllowPrivateNetworks,
		Logger:               cfg.Logger.With("component", "browser"),
	}
	if cfg.Browsers < 0 {
		bcfg.Browsers = 1
		if err := browser.CheckInstall(bcfg); err != nil {
			cfg.Logger.Warn("no browser engine: pages that need JavaScript or meet a bot wall will not be rendered", "why", err.Error())
			return nil, nil, nil
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool, err := browser.NewPool(ctx, bcfg)
	if err != nil {
		return nil, nil, fmt.Errorf("cell: browser engine: %w (run without one with --browsers 0)", err)
	}
	cfg.Logger.Info("browser engine", "browsers", bcfg.Browsers, "pages_per_browser", cmpOr(cfg.BrowserPages, browser.DefaultPagesPerBrowser))
	return browser.NewEngine(pool, browser.EngineConfig{MaxBodyBytes: cfg.MaxPageBytes}), pool, nil
}

func cmpOr(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

func (c *Cell) janitor() {
	defer close(c.done)
	t := time.NewTicker(c.cfg.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.sweep()
		}
	}
}

func (c *Cell) sweep() {
	if n, err := c.scrape.SweepCache(); err != nil {
		c.cfg.Logger.Warn("cache sweep failed", "err", err)
	} else if n > 0 {
		c.cfg.Logger.Info("cache sweep", "removed", n)
	}
	if n, err := c.ladder.Sweep(); err != nil {
		c.cfg.Logger.Warn("engine memory sweep failed", "err", err)
	} else if n > 0 {
		c.cfg.Logger.Info("engine memory sweep", "removed", n)
	}
	if n, err := c.jobs.Sweep(); err != nil {
		c.cfg.Logger.Warn("job sweep failed", "err", err)
	} else if n > 0 {
		c.cfg.Logger.Info("job sweep", "removed", n)
	}
	if err := c.sweepCrawlCredits(); err != nil {
		c.cfg.Logger.Warn("crawl credits sweep failed", "err", err)
	}
	c.renoteCrawlCredits()
	c.sweepCrawlRuns()
}

// Region is the cell's region, after defaults.
func (c *Cell) Region() string { return c.cfg.Region }

// Name is the cell's name within its region, after defaults.
func (c *Cell) Name() string { return c.cfg.Name }

// Close stops the workers (URLs in flight stay pending) and closes the store.
// It may be called more than once.
func (c *Cell) Close() error {
	c.closeOnce.Do(func() {
		close(c.stop)
		<-c.done
		if c.gauges != nil {
			c.gauges.Unregister()
		}
		c.stopRecipes()
		c.stopMonitors()
		c.jobs.Close()
		c.stopV2Hooks()
		c.scrape.Close()
		c.engine.Close()
		var errs []error
		errs = append(errs, c.closeJetStream())
		errs = append(errs, c.closeSearch())
		if c.pool != nil {
			errs = append(errs, c.pool.Close())
		}
		errs = append(errs, c.store.Close())
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

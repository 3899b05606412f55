// Package cell assembles the cell: its store, fetch engine, scrape service and
// job manager, and serves the cell API over HTTP.
package cell

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/jobs"
	"github.com/trawlhq/trawl/cell/jobs/jobid"
	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/cell/store"
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
	// addresses. Off by default: local use and tests only.
	AllowPrivateNetworks bool
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
	// SweepEvery is how often expired cache entries and old jobs are removed
	// (default 10m).
	SweepEvery time.Duration
	Now        func() time.Time
	Logger     *slog.Logger
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
	scrape *scrape.Service
	jobs   *jobs.Manager

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
		MaxBodyBytes:         cfg.MaxPageBytes,
		Timeout:              cfg.FetchTimeout,
	})
	svc := scrape.New(st, engine, scrape.Config{
		FreshFor:             cfg.FreshFor,
		AllowPrivateNetworks: cfg.AllowPrivateNetworks,
		Now:                  cfg.Now,
		Logger:               cfg.Logger,
	})
	mgr, err := jobs.NewManager(st, svc.Scrape, jobs.Config{
		Region:      cfg.Region,
		Cell:        cfg.Name,
		Concurrency: cfg.JobConcurrency,
		Retention:   cfg.JobRetention,
		Now:         cfg.Now,
		Logger:      cfg.Logger,
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	c := &Cell{cfg: cfg, store: st, engine: engine, scrape: svc, jobs: mgr,
		stop: make(chan struct{}), done: make(chan struct{})}
	mgr.Start()
	go c.janitor()
	return c, nil
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
	if n, err := c.jobs.Sweep(); err != nil {
		c.cfg.Logger.Warn("job sweep failed", "err", err)
	} else if n > 0 {
		c.cfg.Logger.Info("job sweep", "removed", n)
	}
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
		c.jobs.Close()
		c.scrape.Close()
		c.engine.Close()
		c.closeErr = c.store.Close()
	})
	return c.closeErr
}

// Package monitor watches pages for the changes a sentence describes
// (docs/spec/hosted-api.md §2.9, §3, §6, §8; docs/monitors.md): monitors
// of an account, their baseline and checks on an injectable clock, versions
// of the page's main-content Markdown stored once per distinct content,
// a structural diff into typed facts (cell/monitor/diff), the watch
// sentence's conditions (cell/monitor/watch), confirmation after a delay,
// signed webhook delivery with retries (internal/webhook), health events, and
// the charges of background checks and changes, kept in an outbox until
// the region's gate collects them (docs/api.md, "Monitors").
//
// A Service keeps everything in the region's monitor store
// (internal/monstore): at the region's gate (Config.Shared), so monitors
// outlive any one cell and each is checked by the live cell the gate's
// claims give it; or, without a gate, in the cell's own store, with its
// own webhook sender. Time runs on Config.Now: Tick runs the checks that
// are due, so tests move a fake clock and call Tick instead of waiting.
package monitor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trawlhq/trawl/cell/monitor/diff"
	"github.com/trawlhq/trawl/cell/monitor/watch"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/monstore"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/webhook"
)

// Defaults of Config: the spec's values.
const (
	DefaultMinEvery     = 4 * time.Minute
	DefaultConfirmAfter = 30 * time.Minute
	DefaultEvery        = "1d"
	// PerChangeCredits is the price of a confirmed change that matched
	// (hosted-api §8.3); a check costs 1 per `every` window.
	PerChangeCredits = 3
	// BaselineWithin is how soon after creation the first check runs.
	BaselineWithin = 10 * time.Second
	// refusedInARow is how many refused checks make a health event.
	refusedInARow = 3
)

// Limits are the monitor limits of hosted-api §8.
type Limits struct {
	// Account is how many monitors one account may have (100).
	Account int
	// Fast is how many of them may be checked more often than hourly (20).
	Fast int
	// Host is how many monitors may watch one host, across accounts (500).
	Host int
}

// DefaultLimits are the spec's.
var DefaultLimits = Limits{Account: 100, Fast: 20, Host: 500}

// Page is a fetched version of a watched page.
type Page struct {
	// Markdown is the page's main content.
	Markdown string
	// Engine and Level are how it was fetched (internal/metering).
	Engine, Level string
}

// Fetcher fetches a page's main content through the cell's engine ladder.
// A site's bot wall is an error wrapping ErrBlocked.
type Fetcher interface {
	Fetch(ctx context.Context, url, region string) (*Page, error)
}

// FetcherFunc adapts a function to Fetcher.
type FetcherFunc func(ctx context.Context, url, region string) (*Page, error)

// Fetch calls f.
func (f FetcherFunc) Fetch(ctx context.Context, url, region string) (*Page, error) {
	return f(ctx, url, region)
}

// ErrBlocked is a fetch refused by the site's bot wall (a `blocked` health
// event); any other fetch error is an `error` one.
var ErrBlocked = errors.New("the site refused the check")

// Extractor fills a monitor's schema from a version (the `custom` of a
// change): the extract service's extractor (cell/extract) when the cell
// has one. It returns a JSON object; a field the page does not show is
// null.
type Extractor interface {
	Extract(ctx context.Context, markdown string, schema json.RawMessage) (json.RawMessage, error)
}

// Splitter splits a watch sentence into conditions: watch.Split unless a
// model is configured. An error is the spec's 503.
type Splitter func(ctx context.Context, sentence string) ([]watch.Condition, error)

// Judge decides which conditions facts satisfy (Model.Judge).
type Judge func(ctx context.Context, conds []watch.Condition, facts []diff.Fact) ([]string, error)

// Config configures a Service; cmd/trawl builds it from flags.
type Config struct {
	// Region and Cell name the cell: they are in every monitor id.
	Region, Cell string
	// MinEvery is the shortest `every` (default 4m, --monitor-min-every).
	MinEvery time.Duration
	// ConfirmAfter is how long after first sight a change is re-checked
	// and confirmed (default 30m, --monitor-confirm-after).
	ConfirmAfter time.Duration
	// Limits (default DefaultLimits, --monitor-limits).
	Limits Limits
	// WebhookRetries is the webhook retry ladder (default 1m, 5m, 30m,
	// 2h, 12h; --webhook-retries).
	WebhookRetries []time.Duration
	// AllowPrivateNetworks lets monitors and webhooks use loopback and
	// private addresses (dev and tests only).
	AllowPrivateNetworks bool
	// CheckHost, when set, refuses a URL host that resolves to an address
	// the SSRF guard refuses (fetch.HTTP.CheckHost).
	CheckHost func(ctx context.Context, host string) error
	// Fetcher fetches pages; required.
	Fetcher Fetcher
	// Extractor fills `custom`; nil: the rules of ruleExtractor.
	Extractor Extractor
	// Split splits `watch`; nil: watch.Split (the cell sets Model.Split
	// when the operator configured a model).
	Split Splitter
	// Judge decides which conditions a change's facts satisfy; nil:
	// watch.Match. An error falls back to watch.Match.
	Judge Judge
	// Parallel bounds checks in flight (default 32).
	Parallel int
	// FetchTimeout bounds one check's fetch (default 60 s).
	FetchTimeout time.Duration
	// Mailer sends notify.email without a gate (with one, the gate sends
	// with the sign-up mail's SMTP settings); nil: such mails fail.
	Mailer monstore.Mailer
	// Shared is the region's monitor store at the gate
	// (monstore.Client); nil: the cell's own store, with its own webhook
	// sender (a cell without a gate: tests).
	Shared monstore.Store
	// Now is the clock of schedules, confirmation and the webhook ladder.
	Now    func() time.Time
	Logger *slog.Logger
}

func (c *Config) defaults() {
	if c.MinEvery <= 0 {
		c.MinEvery = DefaultMinEvery
	}
	if c.ConfirmAfter <= 0 {
		c.ConfirmAfter = DefaultConfirmAfter
	}
	if c.Limits == (Limits{}) {
		c.Limits = DefaultLimits
	}
	if c.Parallel <= 0 {
		c.Parallel = 32
	}
	if c.FetchTimeout <= 0 {
		c.FetchTimeout = 60 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Split == nil {
		c.Split = func(_ context.Context, s string) ([]watch.Condition, error) { return watch.Split(s), nil }
	}
	if c.Extractor == nil {
		c.Extractor = ruleExtractor{}
	}
}

// Service is a cell's part of the region's monitors: the API and the
// checks the region's store gives it. It is safe for concurrent use.
type Service struct {
	cfg   Config
	st    monstore.Store
	local *monstore.Local // without a gate: the cell's own store
	hooks *webhook.Sender // without a gate: its sender (else the gate's)
	own   *store.Store    // with a gate: the cell's store, until its old monitors moved
	log   *slog.Logger
	// instance names this process in its claims: claims of a previous
	// process of the same cell are void.
	instance string

	checks sync.WaitGroup
	wake   chan struct{}
	slots  chan struct{}
	// queue, once set (SetQueue), makes checks work items of the
	// region's queue (check.go, "Checks as work items").
	queue   atomic.Pointer[queueRef]
	stats   Stats
	statsMu sync.Mutex
}

// Stats count the service's work (the bench reads them).
type Stats struct {
	Checks, Unchanged, Diffs, Changes, Confirmed, Reverted, Failures int64
	// Lapsed counts queued checks dropped because their claim lapsed
	// before a slot took them (RunClaimed).
	Lapsed int64
	// MaxStartLate is the largest delay of a check's start past its due
	// time (the scheduler's lateness); MaxLate the same at the end of the
	// check (fetch and diff included); MaxBaselineLate the end of first
	// checks past creation.
	MaxStartLate, MaxLate, MaxBaselineLate time.Duration
}

// New opens the service: on cfg.Shared when set, else on st (which may
// then be nil). Run starts its scheduler (and its deliveries).
func New(st *store.Store, cfg Config) (*Service, error) {
	cfg.defaults()
	if cfg.Fetcher == nil {
		return nil, errors.New("monitor: Config.Fetcher is required")
	}
	s := &Service{cfg: cfg, log: cfg.Logger.With("component", "monitor"), wake: make(chan struct{}, 1),
		slots: make(chan struct{}, cfg.Parallel), instance: newInstance()}
	if cfg.Shared != nil {
		s.st = cfg.Shared
		s.own = st // its monitors of before move to the region's store (migrate.go)
		return s, nil
	}
	if st == nil {
		return nil, errors.New("monitor: a store or Config.Shared is required")
	}
	s.local = monstore.NewLocal(st, monstore.LocalConfig{OnHook: func() {
		if s.hooks != nil {
			s.hooks.Kick()
		}
	}})
	s.st = s.local
	hooks, err := webhook.New(st, webhook.Config{
		Prefix:               store.PrefixMonitorHook,
		AllowPrivateNetworks: cfg.AllowPrivateNetworks,
		Schedule:             cfg.WebhookRetries,
		Now:                  cfg.Now,
		OnFinish: func(d webhook.Delivery) {
			s.local.RecordDelivery(d.ID, d.Delivered, d.Attempts, d.LastStatus, cfg.Now())
		},
		Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	s.hooks = hooks
	return s, nil
}

// Run checks monitors as they fall due and sends deliveries until ctx
// ends. With a fake clock, the caller moves it and calls Tick and Kick.
func (s *Service) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if s.hooks != nil {
		wg.Go(func() { s.hooks.Run(ctx) })
		wg.Go(func() {
			s.local.RunMail(ctx, monstore.MailConfig{Mailer: s.cfg.Mailer, Now: s.cfg.Now, Logger: s.cfg.Logger})
		})
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if s.own != nil {
			if _, err := s.migrate(ctx, s.own); err == nil {
				s.own = nil
			} else if ctx.Err() == nil {
				s.log.Warn("monitor: move this cell's monitors into the region's store", "err", err)
			}
		}
		s.dispatch(ctx, false)
		select {
		case <-ctx.Done():
			s.checks.Wait()
			wg.Wait()
			return
		case <-t.C:
		case <-s.wake:
		}
	}
}

// Kick makes Run look for due checks and deliveries now.
func (s *Service) Kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
	if s.hooks != nil {
		s.hooks.Kick()
	}
}

// Close refuses further deliveries; Run ends with its context.
func (s *Service) Close() {
	if s.hooks != nil {
		s.hooks.Close()
	}
}

// Parallel is how many checks the service runs at once.
func (s *Service) Parallel() int { return s.cfg.Parallel }

// Stats returns a copy of the counters.
func (s *Service) Stats() Stats {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	return s.stats
}

func (s *Service) count(f func(*Stats)) {
	s.statsMu.Lock()
	f(&s.stats)
	s.statsMu.Unlock()
}

func newInstance() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// badInput is a refusal the caller must change. Refusals are
// *httpjson.HTTPError with the status and text of hosted-api §7.
func badInput(msg string) *httpjson.HTTPError {
	return &httpjson.HTTPError{Status: http.StatusBadRequest, Code: "bad_input", Message: msg}
}

// Errors of hosted-api §7 (monitor errors).
var (
	ErrNoMonitor = &httpjson.HTTPError{Status: http.StatusNotFound, Code: "not_found", Message: "no such monitor"}
	ErrNoVersion = &httpjson.HTTPError{Status: http.StatusNotFound, Code: "not_found", Message: "no such version"}
	ErrSentence  = &httpjson.HTTPError{Status: http.StatusServiceUnavailable, Code: "try_again", Message: "could not read the sentence, try again", RetryAfter: 5 * time.Second}
	// ErrBusy: a patch met other writes of the monitor too many times.
	ErrBusy = &httpjson.HTTPError{Status: http.StatusServiceUnavailable, Code: "try_again", Message: "the monitor is being changed, try again", RetryAfter: 5 * time.Second}
)

func limitError(msg string) *httpjson.HTTPError {
	return &httpjson.HTTPError{Status: http.StatusTooManyRequests, Code: "monitor_limit", Message: msg}
}

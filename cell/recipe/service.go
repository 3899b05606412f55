// Package recipe runs recipes (docs/spec/hosted-api.md §2.7, docs/recipes.md):
// named scrapers with typed inputs that return rows. A recipe is a
// manifest and a body of one of three kinds: json (declarative: URL
// templates, the crawl server's json_css selectors, pagination, joins
// with detail pages), module (WebAssembly in wazero) or script
// (JavaScript in goja). Modules and scripts reach the web only through
// the host API (fetch, select, extract, log), which keeps every run to
// its allowed hosts and page budget and sends the caller's session only
// with that run's fetches.
//
// The Service holds the catalog (built-ins shipped in the binary and the
// operator's recipe directory, reloaded when it changes), caches results
// by fresh_for_s in the cell's store, and checks every recipe every 6
// hours on its clock, promoting a staged recipe once its checks pass.
package recipe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trawlhq/trawl/cell/extract"
	"github.com/trawlhq/trawl/internal/recipespec"
	"github.com/trawlhq/trawl/internal/store"
)

// Defaults of Config.
const (
	DefaultCheckEvery   = 6 * time.Hour
	DefaultPromoteAfter = 2
	DefaultReloadEvery  = 5 * time.Second
	keepChecks          = 10
)

// Config configures a Service.
type Config struct {
	// Store is the cell's store: the result cache (store.PrefixRecipeCache)
	// and health records (store.PrefixRecipeHealth). Nil: no cache, health
	// kept in memory (trawl recipe run).
	Store *store.Store
	// Fetcher fetches the runs' pages; required.
	Fetcher Fetcher
	// Extractor serves the host API's extract; nil: deterministic.
	Extractor *extract.Extractor
	// Dir is the operator's recipe directory: one subdirectory per
	// recipe. Empty: built-ins only.
	Dir string
	// Remote is the region's replicated operator recipes (the operator
	// API's, kept in the ledger and served by the region's gate); nil:
	// none. They are looked for every ReloadEvery.
	Remote Remote
	// NoBuiltins leaves the built-ins out (trawl recipe run DIR).
	NoBuiltins bool
	// Extra are recipes loaded by the caller (trawl recipe run DIR).
	Extra []*Recipe
	// Region and Cell name where checks ran; Cell is also the owner a
	// background job's id names.
	Region, Cell string
	// AwaitShare: the cell is clustered and will share its background
	// runs (Share); until it does, a job it does not have may be in the
	// region's log (its store was lost), and is answered 503 try_again,
	// not 404.
	AwaitShare bool
	// HealthInputs are the operator's health inputs by recipe name, for
	// recipes (the built-ins) that ship none or to replace theirs.
	HealthInputs map[string]map[string]json.RawMessage
	// Timeout bounds a run (default RunTimeout, §8).
	Timeout time.Duration
	// CheckEvery is the health check interval (default 6 h).
	CheckEvery time.Duration
	// PromoteAfter is how many consecutive passing checks promote a
	// staged recipe (default 2: the check when it appears and the next).
	PromoteAfter int
	// ReloadEvery is how often Dir is read again (default 5 s, real time).
	ReloadEvery time.Duration
	Now         func() time.Time
	Logger      *slog.Logger
}

// Service is the recipe catalog and runner. Safe for concurrent use.
type Service struct {
	cfg Config

	mu      sync.RWMutex
	recipes map[string]*Recipe
	dirSig  string
	// remote are the replicated recipes by name, as of remoteVer.
	remote    map[string]*Recipe
	remoteVer uint64
	syncMu    sync.Mutex            // one sync with the remote at a time
	remoteErr string                // the last listing error said (guarded by syncMu)
	mem       map[string]*healthRec // health without a store
	checkMu   sync.Mutex            // one round of checks at a time

	// modules is the modules' compiled code.
	modules compiled

	// Background jobs (run: job) run under jobsCtx; Close ends them.
	jobsCtx  context.Context
	jobsStop context.CancelFunc
	jobsWG   sync.WaitGroup
	// share is set once the cell shares its runs with its region
	// (share.go); applyMu orders the outcomes recorded on its jobs.
	share   atomic.Pointer[runSharing]
	applyMu sync.Mutex
}

// New loads the built-ins and the operator's directory.
func New(cfg Config) (*Service, error) {
	if cfg.Fetcher == nil {
		return nil, errors.New("recipe: no fetcher")
	}
	if cfg.Extractor == nil {
		cfg.Extractor = &extract.Extractor{}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = RunTimeout
	}
	if cfg.CheckEvery <= 0 {
		cfg.CheckEvery = DefaultCheckEvery
	}
	if cfg.PromoteAfter <= 0 {
		cfg.PromoteAfter = DefaultPromoteAfter
	}
	if cfg.ReloadEvery <= 0 {
		cfg.ReloadEvery = DefaultReloadEvery
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Service{cfg: cfg, mem: map[string]*healthRec{}}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	s.jobsCtx, s.jobsStop = context.WithCancel(context.Background())
	s.failInterrupted()
	return s, nil
}

// Reload reads the operator's directory again (and the built-ins). A
// recipe that does not load is logged and left out; an operator recipe
// cannot replace a built-in of the same name.
func (s *Service) Reload() error {
	recipes := map[string]*Recipe{}
	if !s.cfg.NoBuiltins {
		bs, err := Builtins()
		if err != nil {
			return err
		}
		for _, r := range bs {
			recipes[r.Name] = r
		}
	}
	for _, r := range s.cfg.Extra {
		recipes[r.Name] = r
	}
	// The replicated recipes come before the directory's: they are the
	// region's (every cell has the same), the directory is one machine's.
	s.mu.RLock()
	for name, r := range s.remote {
		if prev, ok := recipes[name]; ok {
			s.cfg.Logger.Warn("replicated recipe not loaded: its name is taken", "name", name, "builtin", prev.Builtin)
			continue
		}
		recipes[name] = r
	}
	s.mu.RUnlock()
	sig := ""
	if s.cfg.Dir != "" {
		var err error
		sig, err = dirSignature(s.cfg.Dir)
		if err != nil {
			return fmt.Errorf("recipe directory: %w", err)
		}
		entries, err := os.ReadDir(s.cfg.Dir)
		if err != nil {
			return fmt.Errorf("recipe directory: %w", err)
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			r, err := LoadDir(filepath.Join(s.cfg.Dir, e.Name()))
			if err != nil {
				s.cfg.Logger.Warn("recipe not loaded", "dir", e.Name(), "err", err)
				continue
			}
			if prev, ok := recipes[r.Name]; ok {
				s.cfg.Logger.Warn("recipe not loaded: its name is taken", "dir", e.Name(), "name", r.Name, "builtin", prev.Builtin)
				continue
			}
			recipes[r.Name] = r
		}
	}
	s.mu.Lock()
	s.recipes, s.dirSig = recipes, sig
	s.mu.Unlock()
	keep := map[string]bool{}
	for _, r := range recipes {
		if r.Kind == recipespec.KindModule {
			keep[r.Hash] = true
		}
	}
	s.modules.prune(keep)
	return nil
}

// dirSignature changes when a file under dir changes (name, size, time).
func dirSignature(dir string) (string, error) {
	var b []byte
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if fi, err := d.Info(); err == nil {
			b = fmt.Appendf(b, "%s|%d|%d\n", p, fi.Size(), fi.ModTime().UnixNano())
		}
		return nil
	})
	return string(b), err
}

// Get returns the named recipe.
func (s *Service) Get(name string) (*Recipe, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.recipes[name]
	return r, ok
}

// List is the recipes by name.
func (s *Service) List() []*Recipe {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*Recipe, 0, len(s.recipes))
	for _, r := range s.recipes {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Loop reloads the operator's directory when it changes, runs the due
// health checks and sweeps the expired cache until ctx ends. tick is how
// often checks are looked for (the clock decides which are due).
func (s *Service) Loop(ctx context.Context, tick time.Duration) {
	if tick <= 0 {
		tick = time.Minute
	}
	reload := time.NewTicker(s.cfg.ReloadEvery)
	defer reload.Stop()
	check := time.NewTicker(tick)
	defer check.Stop()
	s.syncRemote(ctx)
	s.CheckDue(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-reload.C:
			if s.syncRemote(ctx) {
				s.cfg.Logger.Info("replicated recipes loaded", "recipes", len(s.List()))
				s.CheckDue(ctx)
			}
			if s.cfg.Dir == "" {
				continue
			}
			sig, err := dirSignature(s.cfg.Dir)
			s.mu.RLock()
			changed := err == nil && sig != s.dirSig
			s.mu.RUnlock()
			if changed {
				if err := s.Reload(); err != nil {
					s.cfg.Logger.Warn("recipe directory not reloaded", "err", err)
				} else {
					s.cfg.Logger.Info("recipe directory reloaded", "recipes", len(s.List()))
					s.CheckDue(ctx)
				}
			}
		case <-check.C:
			s.CheckDue(ctx)
			s.sweep()
		}
	}
}

package recipe

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/recipespec"
	"github.com/trawlhq/trawl/internal/store"
)

var prefixCache = []byte(store.PrefixRecipeCache)

// cached is a stored result.
type cached struct {
	Fields   []string `json:"fields"`
	Rows     [][]any  `json:"rows"`
	Warnings []string `json:"warnings"`
}

// Prepare finds the recipe and checks a request body against its inputs.
func (s *Service) Prepare(name string, body map[string]json.RawMessage) (*Recipe, Values, bool, error) {
	rc, ok := s.Get(name)
	if !ok {
		return nil, nil, false, Unknown(name)
	}
	vals, bypass, err := rc.Check(body)
	if err != nil {
		return nil, nil, false, err
	}
	return rc, vals, bypass, nil
}

// Run runs a checked request: from cache when a fresh result exists and
// bypass is false; otherwise a new run, stored for fresh_for_s (never
// for a recipe with a secret input). A failed run returns its Result too
// (the pages it fetched, to bill) with the error; its rows are empty.
func (s *Service) Run(ctx context.Context, rc *Recipe, vals Values, bypass bool) (*Result, error) {
	cacheable := s.cfg.Store != nil && rc.FreshForS > 0 && !rc.Secret()
	var key []byte
	if cacheable {
		key = append(append([]byte(nil), prefixCache...), rc.cacheKey(vals)...)
		if !bypass {
			if res, ok := s.fromCache(rc, key); ok {
				return res, nil
			}
		}
	}
	res, err := s.run(ctx, rc, vals)
	if err == nil && cacheable && res.Meta.Blocked == nil {
		b, merr := json.Marshal(cached{Fields: res.Fields, Rows: res.Rows, Warnings: res.Meta.Warnings})
		if merr == nil {
			exp := s.cfg.Now().Add(time.Duration(rc.FreshForS) * time.Second)
			if serr := s.cfg.Store.SetExpiring(key, b, exp, store.NoSync); serr != nil {
				s.cfg.Logger.Warn("recipe result not cached", "recipe", rc.Name, "err", serr)
			}
		}
	}
	return res, err
}

func (s *Service) fromCache(rc *Recipe, key []byte) (*Result, bool) {
	v, _, err := s.cfg.Store.GetLive(nil, key, s.cfg.Now())
	if err != nil {
		return nil, false
	}
	var c cached
	if err := json.Unmarshal(v, &c); err != nil || len(c.Fields) != len(rc.Outputs) {
		return nil, false
	}
	if c.Warnings == nil {
		c.Warnings = []string{}
	}
	if c.Rows == nil {
		c.Rows = [][]any{}
	}
	return &Result{Recipe: rc.Name, Version: rc.Version, Fields: rc.Outputs, Rows: c.Rows,
		Meta: Meta{FromCache: true, Warnings: c.Warnings}}, true
}

// run runs rc once, within the run's time limit.
func (s *Service) run(ctx context.Context, rc *Recipe, vals Values) (*Result, error) {
	r, err := newRun(rc, vals, s.cfg.Fetcher, s.cfg.Extractor, &s.modules)
	if err != nil {
		return &Result{Recipe: rc.Name, Version: rc.Version, Fields: rc.Outputs, Rows: [][]any{}, Meta: Meta{Warnings: []string{}}}, err
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	switch rc.Kind {
	case recipespec.KindJSON:
		err = r.runJSON(rctx)
	case recipespec.KindScript:
		err = r.runScript(rctx)
	case recipespec.KindModule:
		err = r.runModule(rctx)
	}
	if err != nil && errors.Is(rctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		err = timeout()
	}
	if _, ok := errors.AsType[*httpjson.HTTPError](err); err != nil && !ok && !errors.Is(err, errBadSession) && ctx.Err() == nil {
		err = badModule("the run failed: %v", err)
	}
	return r.finish(err)
}

// sweep drops expired cached results.
func (s *Service) sweep() {
	if s.cfg.Store == nil {
		return
	}
	if _, err := s.cfg.Store.SweepExpired(prefixJob, s.cfg.Now()); err != nil {
		s.cfg.Logger.Warn("recipe job sweep failed", "err", err)
	}
	if n, err := s.cfg.Store.SweepExpired(prefixCache, s.cfg.Now()); err != nil {
		s.cfg.Logger.Warn("recipe cache sweep failed", "err", err)
	} else if n > 0 {
		s.cfg.Logger.Info("recipe cache sweep", "removed", n)
	}
}

// Box names the sandbox of a kind, for usage boxes.
func Box(kind string) string {
	switch kind {
	case recipespec.KindModule:
		return "wasm"
	case recipespec.KindScript:
		return "js"
	}
	return "selectors"
}

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

var prefixHealth = []byte(store.PrefixRecipeHealth)

// Check is one health check of a recipe.
type Check struct {
	At     time.Time `json:"at"`
	OK     bool      `json:"ok"`
	Rows   int       `json:"rows"`
	Error  *string   `json:"error"`
	MS     int64     `json:"ms"`
	Region string    `json:"region"`
	Cell   string    `json:"cell"`
}

// healthRec is what a cell keeps of a recipe's checks.
type healthRec struct {
	Hash    string  `json:"hash"`
	Version int     `json:"version"`
	Stage   string  `json:"stage"`
	Passes  int     `json:"passes"` // consecutive passing checks
	Checks  []Check `json:"checks"` // newest last
	Skipped bool    `json:"skipped,omitempty"`
}

func (s *Service) loadHealth(name string) *healthRec {
	if s.cfg.Store == nil {
		s.mu.RLock()
		defer s.mu.RUnlock()
		if h, ok := s.mem[name]; ok {
			c := *h
			c.Checks = append([]Check(nil), h.Checks...)
			return &c
		}
		return nil
	}
	v, err := s.cfg.Store.Get(append(append([]byte(nil), prefixHealth...), name...))
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.cfg.Logger.Warn("recipe health unreadable", "recipe", name, "err", err)
		}
		return nil
	}
	var h healthRec
	if err := json.Unmarshal(v, &h); err != nil {
		return nil
	}
	return &h
}

func (s *Service) saveHealth(name string, h *healthRec) {
	if s.cfg.Store == nil {
		s.mu.Lock()
		s.mem[name] = h
		s.mu.Unlock()
		return
	}
	b, _ := json.Marshal(h)
	if err := s.cfg.Store.Set(append(append([]byte(nil), prefixHealth...), name...), b, store.Sync); err != nil {
		s.cfg.Logger.Warn("recipe health not saved", "recipe", name, "err", err)
	}
}

// record is rc's health record, new (staged, or published for a
// built-in) when rc is new or changed.
func (s *Service) record(rc *Recipe) *healthRec {
	h := s.loadHealth(rc.Name)
	if h == nil || h.Hash != rc.Hash {
		stage := StageStaged
		if rc.Builtin {
			stage = StagePublished
		}
		h = &healthRec{Hash: rc.Hash, Version: rc.Version, Stage: stage}
	}
	if rc.Builtin {
		h.Stage = StagePublished
	}
	return h
}

// healthInputs are the inputs a check runs with: the operator's for that
// recipe, else the manifest's.
func (s *Service) healthInputs(rc *Recipe) (map[string]json.RawMessage, int, bool) {
	minRows := 1
	if rc.Health != nil {
		minRows = rc.Health.MinRows
	}
	if in, ok := s.cfg.HealthInputs[rc.Name]; ok {
		return in, minRows, true
	}
	if rc.Health != nil {
		return rc.Health.Inputs, minRows, true
	}
	return nil, 0, false
}

// CheckDue runs the health checks that are due: a recipe never checked
// at its current hash, or last checked CheckEvery ago or more on the
// clock. It returns how many ran. A check bills nothing; it never uses
// the cache.
func (s *Service) CheckDue(ctx context.Context) int {
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	n := 0
	for _, rc := range s.List() {
		if ctx.Err() != nil {
			return n
		}
		h := s.record(rc)
		inputs, minRows, ok := s.healthInputs(rc)
		if !ok {
			if h.Hash != "" && s.loadHealth(rc.Name) == nil {
				s.saveHealth(rc.Name, h) // staged, health unknown
			}
			continue
		}
		now := s.cfg.Now()
		if len(h.Checks) > 0 && now.Before(h.Checks[len(h.Checks)-1].At.Add(s.cfg.CheckEvery)) {
			continue
		}
		s.check(ctx, rc, h, inputs, minRows)
		n++
	}
	return n
}

// check runs one health check of rc and records it.
func (s *Service) check(ctx context.Context, rc *Recipe, h *healthRec, inputs map[string]json.RawMessage, minRows int) {
	at := s.cfg.Now()
	c := Check{At: at.UTC(), Region: s.cfg.Region, Cell: s.cfg.Cell}
	vals, _, err := rc.Check(inputs)
	var res *Result
	if err == nil {
		delete(vals, recipespec.SessionInput) // a check never has a session
		res, err = s.run(ctx, rc, vals)
	}
	if res != nil {
		c.Rows = len(res.Rows)
		c.MS = res.Meta.ElapsedMS
	}
	switch {
	case err != nil:
		msg := err.Error()
		if e, ok := errors.AsType[*httpjson.HTTPError](err); ok {
			msg = e.Code + ": " + e.Message // the catalog shows the §7 code
		}
		c.Error = &msg
	case res.Meta.Blocked != nil:
		msg := "blocked: " + *res.Meta.Blocked
		c.Error = &msg
	case c.Rows < minRows:
		msg := "too few rows"
		c.Error = &msg
	default:
		c.OK = true
	}
	if c.OK {
		h.Passes++
	} else {
		h.Passes = 0
	}
	h.Checks = append(h.Checks, c)
	if len(h.Checks) > keepChecks {
		h.Checks = h.Checks[len(h.Checks)-keepChecks:]
	}
	if h.Stage == StageStaged && h.Passes >= s.cfg.PromoteAfter {
		h.Stage = StagePublished
		s.cfg.Logger.Info("recipe promoted", "recipe", rc.Name, "version", rc.Version, "passes", h.Passes)
	}
	s.saveHealth(rc.Name, h)
	if !c.OK {
		s.cfg.Logger.Warn("recipe health check failed", "recipe", rc.Name, "version", rc.Version, "err", *c.Error)
	}
}

// HealthSummary is a recipe's health in the catalog (§2.7).
type HealthSummary struct {
	Status string     `json:"status"` // ok, fail, unknown
	Rows   *int       `json:"rows"`
	At     *time.Time `json:"at"`
	Error  *string    `json:"error"`
}

// Stage and health of rc as its record says.
func (s *Service) Status(rc *Recipe) (stage string, hs HealthSummary, checks []Check) {
	h := s.record(rc)
	hs.Status = HealthUnknown
	if n := len(h.Checks); n > 0 {
		last := h.Checks[n-1]
		hs.Status = HealthFail
		if last.OK {
			hs.Status = HealthOK
		}
		rows, at := last.Rows, last.At
		hs.Rows, hs.At, hs.Error = &rows, &at, last.Error
	}
	checks = h.Checks
	if checks == nil {
		checks = []Check{}
	}
	return h.Stage, hs, checks
}

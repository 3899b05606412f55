package recipe

import (
	"encoding/json"
	"time"

	"github.com/trawlhq/trawl/internal/recipespec"
)

// Entry is a recipe in the catalog (GET /recipes, §2.7).
type Entry struct {
	Name        string               `json:"name"`
	Version     int                  `json:"version"`
	Title       string               `json:"title"`
	Stage       string               `json:"stage"`
	Health      HealthSummary        `json:"health"`
	Kind        string               `json:"kind"`
	Inputs      []InputView          `json:"inputs"`
	Outputs     []string             `json:"outputs"`
	FreshForS   int                  `json:"fresh_for_s"`
	Tags        []string             `json:"tags"`
	CostHint    *recipespec.CostHint `json:"cost_hint"`
	Run         string               `json:"run"`
	Description string               `json:"description"`
	Builtin     bool                 `json:"builtin"`
	PageBudget  int                  `json:"page_budget"`
}

// InputView is an input in the catalog.
type InputView struct {
	Name        string          `json:"name"`
	Type        string          `json:"type"`
	Default     json.RawMessage `json:"default"`
	Required    bool            `json:"required"`
	Secret      bool            `json:"secret"`
	Need        *string         `json:"need,omitempty"`
	Description string          `json:"description,omitempty"`
}

// Catalog lists every recipe with its stage and health.
func (s *Service) Catalog() []Entry {
	out := []Entry{}
	for _, rc := range s.List() {
		stage, hs, _ := s.Status(rc)
		e := Entry{Name: rc.Name, Version: rc.Version, Title: rc.Title, Stage: stage, Health: hs, Kind: rc.Kind,
			Outputs: rc.Outputs, FreshForS: rc.FreshForS, Tags: rc.Tags, CostHint: rc.CostHint, Run: rc.Run,
			Description: rc.Description, Builtin: rc.Builtin, PageBudget: rc.PageBudget, Inputs: []InputView{}}
		if e.Tags == nil {
			e.Tags = []string{}
		}
		if rc.Secret() {
			e.FreshForS = 0 // never cached
		}
		for _, in := range rc.Inputs {
			v := InputView{Name: in.Name, Type: in.Type, Default: in.Default, Required: in.Required, Secret: in.Secret, Description: in.Description}
			if v.Default == nil {
				v.Default = json.RawMessage("null")
			}
			if in.Need != "" {
				need := in.Need
				v.Need = &need
			}
			e.Inputs = append(e.Inputs, v)
		}
		out = append(out, e)
	}
	return out
}

// HealthEntry is a recipe in GET /recipes/health.
type HealthEntry struct {
	Name    string        `json:"name"`
	Version int           `json:"version"`
	Stage   string        `json:"stage"`
	Health  HealthSummary `json:"health"`
	Checks  []Check       `json:"checks"`
}

// HealthReport is the body of GET /recipes/health: this region's checks.
type HealthReport struct {
	Region       string        `json:"region"`
	Cell         string        `json:"cell"`
	CheckEveryS  int64         `json:"check_every_s"`
	PromoteAfter int           `json:"promote_after"`
	Recipes      []HealthEntry `json:"recipes"`
}

// Health is the health report of every recipe.
func (s *Service) Health() HealthReport {
	rep := HealthReport{Region: s.cfg.Region, Cell: s.cfg.Cell, CheckEveryS: int64(s.cfg.CheckEvery / time.Second),
		PromoteAfter: s.cfg.PromoteAfter, Recipes: []HealthEntry{}}
	for _, rc := range s.List() {
		stage, hs, checks := s.Status(rc)
		rep.Recipes = append(rep.Recipes, HealthEntry{Name: rc.Name, Version: rc.Version, Stage: stage, Health: hs, Checks: checks})
	}
	return rep
}

// Answer is the body of a run's answer (§2.7; the gate puts the usage
// object first).
type Answer struct {
	Recipe  string          `json:"recipe"`
	Version int             `json:"version"`
	Rows    json.RawMessage `json:"rows"`
	Meta    Meta            `json:"meta"`
}

// Answer is res as the API answers it.
func (res *Result) Answer() Answer {
	return Answer{Recipe: res.Recipe, Version: res.Version, Rows: res.rowsJSON(), Meta: res.Meta}
}

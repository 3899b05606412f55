// Package recipehealth is the gate's GET /recipes/health
// (docs/spec/hosted-api.md §4, §5.4; docs/recipes.md): every live cell of
// the region checks every recipe on its own clock and keeps its checks;
// the gate gathers each cell's report (GET /recipes/health/local, signed
// as every gate→cell request, without an account) and merges them into
// the region's. Another region's is read with ?region= (the route table
// sends it to that region's gate).
package recipehealth

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/members"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/routes"
)

// LocalPath is the cell route the gate gathers.
const LocalPath = "/recipes/health/local"

// keepChecks is how many checks of a recipe the merged report lists.
const keepChecks = 10

// Config configures the handler.
type Config struct {
	// Region is the gate's region.
	Region string
	// Cells are the region's live cells.
	Cells func() []members.Meta
	// Keys sign the requests to cells and check their answers.
	Keys *regionauth.Keys
	// Private is the region's policy on private networks.
	Private bool
	// Client reaches the cells; default a client with a 5 s timeout.
	Client *http.Client
	Now    func() time.Time
	Logger *slog.Logger
}

// Check is one health check, as a cell reports it.
type Check struct {
	At     time.Time `json:"at"`
	OK     bool      `json:"ok"`
	Rows   int       `json:"rows"`
	Error  *string   `json:"error"`
	MS     int64     `json:"ms"`
	Region string    `json:"region"`
	Cell   string    `json:"cell"`
}

// Health is a recipe's health summary.
type Health struct {
	Status string     `json:"status"`
	Rows   *int       `json:"rows"`
	At     *time.Time `json:"at"`
	Error  *string    `json:"error"`
}

// Entry is a recipe in a report.
type Entry struct {
	Name    string  `json:"name"`
	Version int     `json:"version"`
	Stage   string  `json:"stage"`
	Health  Health  `json:"health"`
	Checks  []Check `json:"checks"`
}

// cellReport is a cell's GET /recipes/health/local.
type cellReport struct {
	Region       string  `json:"region"`
	Cell         string  `json:"cell"`
	CheckEveryS  int64   `json:"check_every_s"`
	PromoteAfter int     `json:"promote_after"`
	Recipes      []Entry `json:"recipes"`
}

// Report is the region's GET /recipes/health.
type Report struct {
	Region       string   `json:"region"`
	Cells        []string `json:"cells"`
	CheckEveryS  int64    `json:"check_every_s"`
	PromoteAfter int      `json:"promote_after"`
	Recipes      []Entry  `json:"recipes"`
}

// Handlers are the recipe health's handler by its row of the route table
// (internal/routes, service recipes): GET /recipes/health.
func Handlers(cfg Config) routes.Handlers {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 5 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return routes.Handlers{"GET /recipes/health": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reps := gather(r.Context(), cfg)
		if len(reps) == 0 {
			httpjson.Error(w, http.StatusServiceUnavailable, "cell_unavailable", "no cell of this region answered; repeat in a few seconds")
			return
		}
		httpjson.Write(w, http.StatusOK, merge(cfg.Region, reps))
	})}
}

// gather asks every live cell; a cell that does not answer is left out
// (and logged).
func gather(ctx context.Context, cfg Config) []cellReport {
	cells := cfg.Cells()
	out := make([]*cellReport, len(cells))
	var wg sync.WaitGroup
	for i, c := range cells {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := ask(ctx, cfg, c)
			if err != nil {
				cfg.Logger.Warn("recipe health: a cell did not answer", "cell", c.Name, "err", err)
				return
			}
			out[i] = rep
		}()
	}
	wg.Wait()
	var reps []cellReport
	for _, r := range out {
		if r != nil {
			reps = append(reps, *r)
		}
	}
	return reps
}

// maxReport bounds a cell's health report.
const maxReport = 16 << 20

func ask(ctx context.Context, cfg Config, c members.Meta) (*cellReport, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.API+LocalPath, nil)
	if err != nil {
		return nil, err
	}
	a, err := cfg.Keys.Do(cfg.Client, req, regionauth.Claims{Private: cfg.Private}, cfg.Now(), maxReport)
	if err == nil {
		err = a.OK()
	}
	if err != nil {
		return nil, fmt.Errorf("cell %s: %w", c.Name, err)
	}
	var rep cellReport
	if err := json.Unmarshal(a.Body, &rep); err != nil {
		return nil, fmt.Errorf("cell %s: %w", c.Name, err)
	}
	if rep.Cell == "" {
		rep.Cell = c.Name
	}
	return &rep, nil
}

// merge is the region's report from its cells': per recipe (by name) the
// newest version any cell has, published when a cell has published that
// version, the cells' checks of it together (newest last, the last 10),
// and the health of the newest check.
func merge(region string, reps []cellReport) Report {
	out := Report{Region: region, Cells: []string{}, Recipes: []Entry{}}
	byName := map[string]*Entry{}
	var names []string
	for _, rep := range reps {
		out.Cells = append(out.Cells, rep.Cell)
		out.CheckEveryS, out.PromoteAfter = rep.CheckEveryS, rep.PromoteAfter
		for _, e := range rep.Recipes {
			m, ok := byName[e.Name]
			if !ok || e.Version > m.Version {
				if !ok {
					names = append(names, e.Name)
				}
				c := e
				c.Checks = append([]Check(nil), e.Checks...)
				byName[e.Name] = &c
				continue
			}
			if e.Version < m.Version {
				continue
			}
			if e.Stage == "published" {
				m.Stage = "published"
			}
			m.Checks = append(m.Checks, e.Checks...)
		}
	}
	sort.Strings(out.Cells)
	sort.Strings(names)
	for _, n := range names {
		e := byName[n]
		sort.SliceStable(e.Checks, func(i, j int) bool { return e.Checks[i].At.Before(e.Checks[j].At) })
		if len(e.Checks) > keepChecks {
			e.Checks = e.Checks[len(e.Checks)-keepChecks:]
		}
		if e.Checks == nil {
			e.Checks = []Check{}
		}
		e.Health = Health{Status: "unknown"}
		if k := len(e.Checks); k > 0 {
			last := e.Checks[k-1]
			e.Health.Status = "fail"
			if last.OK {
				e.Health.Status = "ok"
			}
			rows, at := last.Rows, last.At
			e.Health.Rows, e.Health.At, e.Health.Error = &rows, &at, last.Error
		}
		out.Recipes = append(out.Recipes, *e)
	}
	return out
}

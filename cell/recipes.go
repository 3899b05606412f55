package cell

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/trawlhq/trawl/cell/fetch/ladder"
	"github.com/trawlhq/trawl/cell/recipe"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/jobid"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

// startRecipes opens the recipe service (built-ins and the operator's
// directory) and starts its loop: directory reloads, health checks on the
// cell's clock, cache sweeps.
func (c *Cell) startRecipes() error {
	rc := c.cfg.Recipes
	svc, err := recipe.New(recipe.Config{
		Store:        c.store,
		Fetcher:      recipeFetcher{c},
		Extractor:    &c.extractor,
		Dir:          rc.Dir,
		Remote:       rc.Remote,
		Region:       c.cfg.Region,
		Cell:         c.cfg.Name,
		AwaitShare:   awaitShare(c.cfg.JetStream) > 0,
		HealthInputs: rc.HealthInputs,
		Timeout:      rc.Timeout,
		CheckEvery:   rc.CheckEvery,
		ReloadEvery:  rc.ReloadEvery,
		Now:          c.cfg.Now,
		Logger:       c.cfg.Logger.With("component", "recipes"),
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { svc.Loop(ctx, rc.CheckTick); close(done) }()
	c.recipes = svc
	c.stopRecipes = func() { cancel(); <-done; svc.Close() }
	return nil
}

// RecipeConfig is the operator's recipe settings (cmd/trawl flags).
type RecipeConfig struct {
	// Dir is the operator's recipe directory (--recipes), reloaded when
	// it changes; empty: built-ins only.
	Dir string
	// Remote is the region's operator recipes, kept in the ledger and
	// served by its gate (internal/recipestore); nil: none.
	Remote recipe.Remote
	// HealthInputs are health-check inputs by recipe (the built-ins ship
	// none).
	HealthInputs map[string]map[string]json.RawMessage
	// Timeout bounds a run (default 300 s).
	Timeout time.Duration
	// CheckEvery is the health check interval (default 6 h on the cell's
	// clock); CheckTick how often due checks are looked for (default 1 m).
	CheckEvery time.Duration
	CheckTick  time.Duration
	// ReloadEvery is how often Dir is looked at (default 5 s).
	ReloadEvery time.Duration
}

// Recipes is the cell's recipe service (tests drive its checks).
func (c *Cell) Recipes() *recipe.Service { return c.recipes }

// recipeFetcher fetches a recipe's pages live (fetchLive): never the
// cache or the archive (a page fetched with a session must not land
// there, and a recipe's own cache is by fresh_for_s), never logged with
// its session.
type recipeFetcher struct{ c *Cell }

func (f recipeFetcher) Fetch(ctx context.Context, raw, session string) (*recipe.Fetched, error) {
	lr, err := f.c.fetchLive(ctx, raw, session, recipe.ErrBlocked)
	if err != nil {
		return nil, err
	}
	return &recipe.Fetched{URL: lr.URL, Status: lr.Status, ContentType: lr.ContentType, Body: lr.Body, Engine: lr.Engine, Level: lr.Level}, nil
}

// fetchLive fetches a page as it is now, for a monitor's check or a
// recipe's run: the URL checked against the address policy, then the
// engine ladder, never the cache or the archive. cookie, when set, is one
// Cookie header line for this request only. A bot wall is an error
// wrapping both blocked (the caller's sentinel) and ladder.ErrBlocked.
func (c *Cell) fetchLive(ctx context.Context, raw, cookie string, blocked error) (*ladder.Result, error) {
	u, err := urlpolicy.Validate(raw, c.cfg.AllowPrivateNetworks)
	if err != nil {
		return nil, err
	}
	lr, err := c.ladder.Fetch(ctx, &ladder.Request{URL: u, Cookie: cookie})
	if errors.Is(err, ladder.ErrBlocked) {
		return nil, errors.Join(blocked, err)
	} else if err != nil {
		return nil, err
	}
	return lr, nil
}

func (c *Cell) handleRecipeList(w http.ResponseWriter, r *http.Request) {
	httpjson.Write(w, http.StatusOK, map[string]any{"recipes": c.recipes.Catalog()})
}

func (c *Cell) handleRecipeHealth(w http.ResponseWriter, r *http.Request) {
	httpjson.Write(w, http.StatusOK, c.recipes.Health())
}

// recipeError is the body of a refused or failed run (§7): the error,
// and for a run that started, what it did (the gate puts the usage
// object first).
type recipeError struct {
	httpjson.ErrorBody
	Recipe  string       `json:"recipe,omitempty"`
	Version int          `json:"version,omitempty"`
	Meta    *recipe.Meta `json:"meta,omitempty"`
}

// recipeJobRef is the answer to a run of a recipe declared run: job.
type recipeJobRef struct {
	JobID   string `json:"job_id"`
	Recipe  string `json:"recipe"`
	Version int    `json:"version"`
	Status  string `json:"status"`
	Results string `json:"results"`
}

// handleRecipeJob serves GET /recipes/jobs/{id}: a background run's
// status and, once done, its rows; another account's job is 404. Another
// cell's job is read from the region's log (the gate asks here while its
// owner is down).
func (c *Cell) handleRecipeJob(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, _, ok := jobid.Parse(id); !ok {
		httpjson.Error(w, http.StatusNotFound, "not_found", "no such recipe job")
		return
	}
	job, err := c.recipes.Job(r.Context(), accountOf(r), id)
	if err != nil {
		httpjson.WriteError(w, err)
		return
	}
	httpjson.Write(w, http.StatusOK, job)
}

// handleRecipeRun serves POST /recipes/{name} (§2.7): inputs checked,
// the run (or its cached result), rows in the output fields' order. A
// failed run reports the pages it fetched (none, maybe), which the gate
// bills and shows; a refused request (bad_input, unknown_recipe) reports
// nothing.
func (c *Cell) handleRecipeRun(w http.ResponseWriter, r *http.Request) {
	var body map[string]json.RawMessage
	if err := httpjson.Decode(w, r, routes.RecipeBody, &body); err != nil {
		httpjson.WriteError(w, err)
		return
	}
	rc, vals, bypass, err := c.recipes.Prepare(r.PathValue("name"), body)
	if err != nil {
		httpjson.WriteError(w, err)
		return
	}
	if rc.Run == "job" {
		// Placed (it names no cell) when other cells can read the run
		// from the region's log.
		id := c.jobs.NewID(c.recipes.Shared())
		job, err := c.recipes.Submit(accountOf(r), id, rc, body, vals, bypass)
		if err != nil {
			c.cfg.Logger.Error("recipe job not submitted", "recipe", rc.Name, "err", err)
			httpjson.Error(w, http.StatusServiceUnavailable, "unavailable", "the job could not be recorded; nothing was charged, repeat the call")
			return
		}
		w.Header().Set("Location", "/recipes/jobs/"+id)
		httpjson.Write(w, http.StatusAccepted, recipeJobRef{JobID: id, Recipe: rc.Name, Version: rc.Version, Status: job.Status, Results: "/recipes/jobs/" + id})
		return
	}
	res, err := c.recipes.Run(r.Context(), rc, vals, bypass)
	if r.Context().Err() != nil {
		return // the caller left: nothing is answered, nothing billed
	}
	if res != nil && (err == nil || recipe.RunError(err).Code != recipe.CodeBadInput) {
		w.Header().Set(UsageHeader, res.Usage(recipe.Box(rc.Kind)).String())
	}
	if err != nil {
		e := recipe.RunError(err)
		if e.Status >= 500 {
			c.cfg.Logger.Warn("recipe run failed", "recipe", rc.Name, "code", e.Code, "pages", res.Meta.PagesFetched)
		}
		httpjson.Write(w, e.Status, recipeError{ErrorBody: e.Body(), Recipe: rc.Name, Version: rc.Version, Meta: &res.Meta})
		return
	}
	httpjson.Write(w, http.StatusOK, res.Answer())
}

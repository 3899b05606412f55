// Package recipestore serves the region's replicated operator recipes
// (ledger state, set through the operator API) from a gate to its cells.
// Calls are signed both ways with the region's keys (regionauth.Call): a
// stranger can neither read the recipes nor hand a cell one.
package recipestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"

	"github.com/trawlhq/trawl/cell/recipe"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/ledger"
)

// Path is where a gate serves the recipes to its cells (a public Gate row
// of internal/routes: the caller is a cell, which signs).
const Path = "/recipe-store/"

// maxAnswer bounds an answer: one recipe and its module.
const maxAnswer = ledger.MaxRecipeBytes*2 + 1<<20

type listReq struct {
	Since uint64 `json:"since"`
}

type listResp struct {
	Version uint64             `json:"version"`
	Changed bool               `json:"changed"`
	Recipes []recipe.RemoteRef `json:"recipes,omitempty"`
}

type getReq struct {
	Name string `json:"name"`
}

type getResp struct {
	Manifest json.RawMessage   `json:"manifest"`
	Files    map[string][]byte `json:"files"`
}

// Server answers POST /recipe-store/{list,get} from a ledger replica.
type Server struct {
	State *ledger.State
	V     *regionauth.Verifier
	Log   *slog.Logger
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	claims, body, err := s.V.ReadCall(r, 1<<16)
	if err != nil {
		s.Log.Warn("recipe store: refused a request not signed by a member of the region", "path", r.URL.Path, "err", err)
		httpjson.Error(w, http.StatusForbidden, "forbidden", "only the region's cells read the recipe store")
		return
	}
	answer := func(status int, out any) { s.V.Keys().WriteAnswer(w, claims, status, out) }
	fail := func(status int, code, msg string) {
		answer(status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
	}
	switch strings.TrimPrefix(r.URL.Path, Path) {
	case "list":
		var q listReq
		if err := json.Unmarshal(body, &q); err != nil {
			fail(http.StatusBadRequest, "bad_input", "body is not valid JSON")
			return
		}
		v, err := s.State.RecipesVersion()
		if err != nil {
			s.Log.Error("recipe store: version", "err", err)
			fail(http.StatusInternalServerError, "internal", err.Error())
			return
		}
		if v == q.Since {
			answer(http.StatusOK, listResp{Version: v})
			return
		}
		out := listResp{Version: v, Changed: true, Recipes: []recipe.RemoteRef{}}
		out.Version, err = s.State.Recipes(func(sr *ledger.RecipeEntry) error {
			out.Recipes = append(out.Recipes, recipe.RemoteRef{Name: sr.Name, Hash: sr.Hash})
			return nil
		})
		if err != nil {
			s.Log.Error("recipe store: list", "err", err)
			fail(http.StatusInternalServerError, "internal", err.Error())
			return
		}
		answer(http.StatusOK, out)
	case "get":
		var q getReq
		if err := json.Unmarshal(body, &q); err != nil {
			fail(http.StatusBadRequest, "bad_input", "body is not valid JSON")
			return
		}
		sr, err := s.State.Recipe(q.Name)
		if errors.Is(err, ledger.ErrNotFound) {
			fail(http.StatusNotFound, "not_found", "no recipe "+q.Name)
			return
		} else if err != nil {
			s.Log.Error("recipe store: get", "err", err)
			fail(http.StatusInternalServerError, "internal", err.Error())
			return
		}
		answer(http.StatusOK, getResp{Manifest: sr.Manifest, Files: sr.Files})
	default:
		fail(http.StatusNotFound, "not_found", "no such route")
	}
}

// Client reads the recipes from the region's gate: a recipe.Remote.
type Client struct {
	regionauth.Gate
}

func (c *Client) call(ctx context.Context, op string, in, out any) error {
	status, raw, err := c.Gate.Call(ctx, Path+op, in, maxAnswer)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		json.Unmarshal(raw, &e)
		return fmt.Errorf("recipestore: the gate answered HTTP %d: %s", status, e.Error.Message)
	}
	return json.Unmarshal(raw, out)
}

// List implements recipe.Remote.
func (c *Client) List(ctx context.Context, since uint64) (uint64, []recipe.RemoteRef, bool, error) {
	var out listResp
	if err := c.call(ctx, "list", listReq{Since: since}, &out); err != nil {
		return 0, nil, false, err
	}
	sort.Slice(out.Recipes, func(i, j int) bool { return out.Recipes[i].Name < out.Recipes[j].Name })
	return out.Version, out.Recipes, out.Changed, nil
}

// Get implements recipe.Remote.
func (c *Client) Get(ctx context.Context, name string) ([]byte, map[string][]byte, error) {
	var out getResp
	if err := c.call(ctx, "get", getReq{Name: name}, &out); err != nil {
		return nil, nil, err
	}
	return out.Manifest, out.Files, nil
}

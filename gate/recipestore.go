package gate

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/recipestore"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/ledger"
)

// recipeStore answers the region's cells' POST /recipe-store/{list,get}
// (internal/recipestore) from this gate's ledger replica.
type recipeStore struct {
	State *ledger.State
	V     *regionauth.Verifier
	Log   *slog.Logger
}

func (s *recipeStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	claims, body, err := s.V.ReadCall(r, routes.Limit(r))
	if err != nil {
		s.Log.Warn("recipe store: refused a request not signed by a member of the region", "path", r.URL.Path, "err", err)
		httpjson.Error(w, http.StatusForbidden, "forbidden", "only the region's cells read the recipe store")
		return
	}
	answer := func(status int, out any) { s.V.Keys().WriteAnswer(w, claims, status, out) }
	fail := func(status int, code, msg string) {
		answer(status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
	}
	switch strings.TrimPrefix(r.URL.Path, recipestore.Path) {
	case "list":
		var q recipestore.ListRequest
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
			answer(http.StatusOK, recipestore.ListAnswer{Version: v})
			return
		}
		out := recipestore.ListAnswer{Version: v, Changed: true, Recipes: []recipestore.Ref{}}
		out.Version, err = s.State.Recipes(func(sr *ledger.RecipeEntry) error {
			out.Recipes = append(out.Recipes, recipestore.Ref{Name: sr.Name, Hash: sr.Hash})
			return nil
		})
		if err != nil {
			s.Log.Error("recipe store: list", "err", err)
			fail(http.StatusInternalServerError, "internal", err.Error())
			return
		}
		answer(http.StatusOK, out)
	case "get":
		var q recipestore.GetRequest
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
		answer(http.StatusOK, recipestore.GetAnswer{Manifest: sr.Manifest, Files: sr.Files})
	default:
		fail(http.StatusNotFound, "not_found", "no such route")
	}
}

package gate

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/recipespec"
	"github.com/trawlhq/trawl/ledger"
)

// Operator recipes (docs/operations.md, "Recipes"): the operator API keeps
// them in the ledger (set_recipe, delete_recipe), so every region has the
// same; each gate serves them to its cells (internal/recipestore), which
// load them beside their --recipes directory within ReloadEvery (5 s) and
// stage each new or changed one until two health checks pass.

// CodeBuiltin (409): the name is a built-in recipe's, which an operator
// recipe cannot replace.
const CodeBuiltin = "builtin"

// RecipeBody is an operator recipe as the operator API reads and writes
// it: the manifest (recipe.json) and, by its kind, the script's source or
// the module's bytes (base64 in JSON). Hash, Index and Updated are the
// ledger's, in answers only.
type RecipeBody struct {
	Name     string          `json:"name,omitempty"`
	Manifest json.RawMessage `json:"manifest"`
	Script   string          `json:"script,omitempty"`
	Module   []byte          `json:"module,omitempty"`
	Hash     string          `json:"hash,omitempty"`
	Index    uint64          `json:"index,omitempty"`
	Updated  *time.Time      `json:"updated,omitempty"`
}

// RecipeInfo is a recipe in GET /operator/v1/recipes.
type RecipeInfo struct {
	Name    string    `json:"name"`
	Version int       `json:"version"`
	Title   string    `json:"title"`
	Kind    string    `json:"kind"`
	Hash    string    `json:"hash"`
	Index   uint64    `json:"index"`
	Updated time.Time `json:"updated"`
	Bytes   int       `json:"bytes"`
}

// RecipeList is GET /operator/v1/recipes: the replicated recipes and the
// ledger index of the last change.
type RecipeList struct {
	Version uint64       `json:"version"`
	Recipes []RecipeInfo `json:"recipes"`
}

func recipeBody(sr *ledger.StoredRecipe) RecipeBody {
	t := sr.Updated
	return RecipeBody{Name: sr.Name, Manifest: sr.Manifest, Script: string(sr.Files[recipespec.ScriptFile]),
		Module: sr.Files[recipespec.ModuleFile], Hash: sr.Hash, Index: sr.Index, Updated: &t}
}

// GET /operator/v1/recipes
func (rt *Runtime) opRecipes(w http.ResponseWriter, r *http.Request) {
	out := RecipeList{Recipes: []RecipeInfo{}}
	var err error
	out.Version, err = rt.node.State().Recipes(func(sr *ledger.RecipeEntry) error {
		info := RecipeInfo{Name: sr.Name, Hash: sr.Hash, Index: sr.Index, Updated: sr.Updated, Bytes: sr.Bytes}
		var m recipespec.Manifest
		if json.Unmarshal(sr.Manifest, &m) == nil {
			info.Version, info.Title, info.Kind = m.Version, m.Title, m.Kind
		}
		out.Recipes = append(out.Recipes, info)
		return nil
	})
	if err != nil {
		rt.opInternal(w, "list recipes", err)
		return
	}
	httpjson.Write(w, http.StatusOK, out)
}

// GET /operator/v1/recipes/{name}
func (rt *Runtime) opRecipe(w http.ResponseWriter, r *http.Request) {
	sr, err := rt.node.State().Recipe(r.PathValue("name"))
	if errors.Is(err, ledger.ErrNotFound) {
		httpjson.Error(w, http.StatusNotFound, billing.CodeNotFound, "no operator recipe "+r.PathValue("name"))
		return
	} else if err != nil {
		rt.opInternal(w, "read recipe", err)
		return
	}
	httpjson.Write(w, http.StatusOK, recipeBody(sr))
}

// PUT /operator/v1/recipes/{name}: add or replace the whole recipe. It is
// checked with the cells' own parser, internal/recipespec (a manifest a
// cell would not load is 400 and changes nothing); its manifest's name is
// the path's. The same recipe again changes nothing (200, the ledger's
// record as it was).
func (rt *Runtime) opSetRecipe(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var req RecipeBody
	if !opDecode(w, r, &req) {
		return
	}
	if req.Name != "" && req.Name != name {
		httpjson.Error(w, http.StatusBadRequest, billing.CodeBadInput, fmt.Sprintf("name %q: the path names %q", req.Name, name))
		return
	}
	if len(req.Manifest) == 0 {
		httpjson.Error(w, http.StatusBadRequest, billing.CodeBadInput, "manifest is required: the recipe.json object (docs/recipes.md)")
		return
	}
	files := map[string][]byte{}
	if req.Script != "" {
		files[recipespec.ScriptFile] = []byte(req.Script)
	}
	if len(req.Module) > 0 {
		files[recipespec.ModuleFile] = req.Module
	}
	rc, err := recipespec.Parse(req.Manifest, files)
	if err != nil {
		httpjson.Error(w, http.StatusBadRequest, billing.CodeBadInput, "recipe: "+err.Error())
		return
	}
	if rc.Name != name {
		httpjson.Error(w, http.StatusBadRequest, billing.CodeBadInput, fmt.Sprintf("manifest name %q: the path names %q", rc.Name, name))
		return
	}
	switch rc.Kind { // the file its kind does not read is not kept
	case recipespec.KindScript:
		delete(files, recipespec.ModuleFile)
	case recipespec.KindModule:
		delete(files, recipespec.ScriptFile)
	default:
		clear(files)
	}
	builtins, err := recipespec.Builtins()
	if err != nil {
		rt.opInternal(w, "built-in recipes", err)
		return
	}
	for _, b := range builtins {
		if b.Name == name {
			httpjson.Error(w, http.StatusConflict, CodeBuiltin, "recipe "+name+" is built in; an operator recipe cannot replace it: choose another name")
			return
		}
	}
	prev, err := rt.node.State().Recipe(name)
	switch {
	case err == nil && prev.Hash == rc.Hash:
		httpjson.Write(w, http.StatusOK, recipeBody(prev))
		return
	case err != nil && !errors.Is(err, ledger.ErrNotFound):
		rt.opInternal(w, "read recipe", err)
		return
	}
	res, err := rt.opSubmit(r.Context(), &ledger.Command{ID: "operator/recipe/" + randHex(10), Type: ledger.CmdSetRecipe,
		SetRecipe: &ledger.SetRecipe{Name: name, Manifest: req.Manifest, Files: files, Hash: rc.Hash}})
	if err != nil {
		rt.opLedgerError(w, "set recipe", err)
		return
	}
	if res.Error != "" {
		status := http.StatusInternalServerError
		if res.Error == ledger.ErrCodeInvalid {
			status = http.StatusBadRequest // a limit of the ledger's (size, count)
		}
		httpjson.Error(w, status, billing.CodeBadInput, res.Message)
		return
	}
	sr, err := rt.node.State().Recipe(name)
	if err != nil {
		rt.opInternal(w, "read recipe", err)
		return
	}
	rt.cfg.Logger.Info("operator: recipe set", "name", name, "version", rc.Version, "hash", rc.Hash, "index", sr.Index)
	status := http.StatusOK
	if prev == nil {
		status = http.StatusCreated
	}
	httpjson.Write(w, status, recipeBody(sr))
}

// DELETE /operator/v1/recipes/{name}
func (rt *Runtime) opDeleteRecipe(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	res, err := rt.opSubmit(r.Context(), &ledger.Command{ID: "operator/recipe-delete/" + randHex(10), Type: ledger.CmdDeleteRecipe,
		DeleteRecipe: &ledger.DeleteRecipe{Name: name}})
	if err != nil {
		rt.opLedgerError(w, "delete recipe", err)
		return
	}
	switch res.Error {
	case "":
	case ledger.ErrCodeNotFound, ledger.ErrCodeInvalid:
		httpjson.Error(w, http.StatusNotFound, billing.CodeNotFound, "no operator recipe "+name)
		return
	default:
		rt.opInternal(w, "delete recipe", fmt.Errorf("%s: %s", res.Error, res.Message))
		return
	}
	rt.cfg.Logger.Info("operator: recipe deleted", "name", name)
	w.WriteHeader(http.StatusNoContent)
}

// Package recipestore is the contract by which a gate hands the region's
// replicated operator recipes (ledger state, set through the operator API)
// to its cells: the path, the messages, the size bound and the cells'
// client. The gate's server is gate.recipeStore. Calls are signed both ways
// with the region's keys (regionauth.Call): a stranger can neither read the
// recipes nor hand a cell one.
package recipestore

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"

	"github.com/trawlhq/trawl/internal/regionauth"
)

// Path is where a gate serves the recipes to its cells (a public Gate row
// of internal/routes: the caller is a cell, which signs); the operations
// are Path+"list" and Path+"get".
const Path = "/recipe-store/"

// MaxRecipeBytes is the most a replicated recipe holds, manifest and files
// together (the ledger refuses a larger one).
const MaxRecipeBytes = 16 << 20

// maxAnswer bounds an answer: one recipe and its module, base64 in JSON.
const maxAnswer = MaxRecipeBytes*2 + 1<<20

// Ref names a replicated recipe and the hash of its manifest and body
// (Recipe.Hash), so an unchanged one is not fetched again.
type Ref struct {
	Name string `json:"name"`
	Hash string `json:"hash"`
}

// ListRequest asks for the recipes newer than Since (a version).
type ListRequest struct {
	Since uint64 `json:"since"`
}

// ListAnswer is the newest version; Recipes when it changed since.
type ListAnswer struct {
	Version uint64 `json:"version"`
	Changed bool   `json:"changed"`
	Recipes []Ref  `json:"recipes,omitempty"`
}

// GetRequest asks for one recipe.
type GetRequest struct {
	Name string `json:"name"`
}

// GetAnswer is one recipe: its manifest and body files.
type GetAnswer struct {
	Manifest json.RawMessage   `json:"manifest"`
	Files    map[string][]byte `json:"files"`
}

// Client reads the recipes from the region's gate (recipe.Remote).
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

// List names the recipes at the newest version; changed is false (and
// refs nil) when it is still since.
func (c *Client) List(ctx context.Context, since uint64) (uint64, []Ref, bool, error) {
	var out ListAnswer
	if err := c.call(ctx, "list", ListRequest{Since: since}, &out); err != nil {
		return 0, nil, false, err
	}
	sort.Slice(out.Recipes, func(i, j int) bool { return out.Recipes[i].Name < out.Recipes[j].Name })
	return out.Version, out.Recipes, out.Changed, nil
}

// Get reads one recipe: its manifest and body files.
func (c *Client) Get(ctx context.Context, name string) ([]byte, map[string][]byte, error) {
	var out GetAnswer
	if err := c.call(ctx, "get", GetRequest{Name: name}, &out); err != nil {
		return nil, nil, err
	}
	return out.Manifest, out.Files, nil
}

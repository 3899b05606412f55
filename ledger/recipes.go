package ledger

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/trawlhq/trawl/internal/recipestore"
	"github.com/trawlhq/trawl/internal/store"
)

// Operator recipes as ledger state (docs/operations.md, "Recipes"). An
// operator who adds or changes a recipe through the operator API (PUT
// /operator/v1/recipes/{name}) sends set_recipe with the manifest and its
// body file, which the gate checked with the cells' own parser; every
// region's gate serves the replicated set to its cells, which load it
// beside their --recipes directory (staged until two checks pass). As with
// the price table, the ledger does not read the manifest: it keeps what the
// gate validated, so Apply needs no recipe code.

// Recipe command types.
const (
	CmdSetRecipe    = "set_recipe"
	CmdDeleteRecipe = "delete_recipe"
)

// Limits of the replicated recipes: every voter keeps them, and every
// snapshot of the ledger carries them.
const (
	MaxRecipes     = 64
	MaxRecipeBytes = recipestore.MaxRecipeBytes // manifest and files together
)

// RecipeFiles are the names of a recipe's body files (cell/recipe's
// ScriptFile and ModuleFile).
var RecipeFiles = []string{"script.js", "module.wasm"}

var recipeNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// SetRecipe is set_recipe's body: a whole recipe, added or replacing the
// one of that name. Hash is the gate's hash of manifest and files (the
// one the cells compute), so a cell can tell a changed recipe without
// fetching it.
type SetRecipe struct {
	Name     string            `json:"name"`
	Manifest json.RawMessage   `json:"manifest"`
	Files    map[string][]byte `json:"files,omitempty"`
	Hash     string            `json:"hash"`
}

// DeleteRecipe is delete_recipe's body.
type DeleteRecipe struct {
	Name string `json:"name"`
}

// StoredRecipe is a replicated recipe: SetRecipe's fields, the Raft index
// of the command that wrote it, that command's time and the recipe's size
// (manifest and files).
type StoredRecipe struct {
	SetRecipe
	Index   uint64    `json:"index"`
	Updated time.Time `json:"updated"`
	Bytes   int       `json:"bytes"`
}

// RecipeEntry is a replicated recipe without its files, as State.Recipes
// lists them (a listing does not decode every module).
type RecipeEntry struct {
	Name     string          `json:"name"`
	Manifest json.RawMessage `json:"manifest"`
	Hash     string          `json:"hash"`
	Index    uint64          `json:"index"`
	Updated  time.Time       `json:"updated"`
	Bytes    int             `json:"bytes"`
}

// ErrCodeNotFound refuses a change of a recipe that does not exist.
const ErrCodeNotFound = "not_found"

var keyRecipesVersion = []byte(store.PrefixLedger + "recipes-version")

func keyRecipe(name string) []byte { return []byte(store.PrefixLedger + "recipe/" + name) }

func prefixRecipes() []byte { return []byte(store.PrefixLedger + "recipe/") }

func (t *tx) setRecipe(r *SetRecipe, index uint64) error {
	if r == nil || !recipeNameRE.MatchString(r.Name) {
		return refuse(ErrCodeInvalid, "set_recipe needs a name of 1 to 63 of [a-z0-9-]")
	}
	if len(r.Manifest) == 0 || r.Manifest[0] != '{' || !json.Valid(r.Manifest) {
		return refuse(ErrCodeInvalid, "set_recipe needs the manifest, a JSON object")
	}
	if r.Hash == "" {
		return refuse(ErrCodeInvalid, "set_recipe needs the recipe's hash")
	}
	size := len(r.Manifest)
	for name, b := range r.Files {
		known := false
		for _, f := range RecipeFiles {
			known = known || name == f
		}
		if !known {
			return refuse(ErrCodeInvalid, "set_recipe: %q is not a recipe file (%v)", name, RecipeFiles)
		}
		size += len(b)
	}
	if size > MaxRecipeBytes {
		return refuse(ErrCodeInvalid, "set_recipe: %d bytes, over the %d a replicated recipe may hold", size, MaxRecipeBytes)
	}
	exists, err := t.exists(keyRecipe(r.Name))
	if err != nil {
		return err
	}
	if !exists {
		n := 0
		if err := t.r.Scan(prefixRecipes(), nil, func(_, _ []byte) (bool, error) {
			n++
			return n < MaxRecipes, nil
		}); err != nil {
			return err
		}
		if n >= MaxRecipes {
			return refuse(ErrCodeInvalid, "set_recipe: the ledger holds %d recipes, its most", MaxRecipes)
		}
	}
	t.putJSON(keyRecipe(r.Name), &StoredRecipe{SetRecipe: *r, Index: index, Updated: t.cmd.Time.UTC(), Bytes: size})
	t.b.Set(keyRecipesVersion, binary.BigEndian.AppendUint64(nil, index))
	return nil
}

func (t *tx) deleteRecipe(d *DeleteRecipe, index uint64) error {
	if d == nil || !recipeNameRE.MatchString(d.Name) {
		return refuse(ErrCodeInvalid, "delete_recipe needs a name")
	}
	exists, err := t.exists(keyRecipe(d.Name))
	if err != nil {
		return err
	}
	if !exists {
		return refuse(ErrCodeNotFound, "no recipe %q", d.Name)
	}
	t.b.Delete(keyRecipe(d.Name))
	t.b.Set(keyRecipesVersion, binary.BigEndian.AppendUint64(nil, index))
	return nil
}

// RecipesVersion is the Raft index of the last change to the replicated
// recipes (0: none was ever made): a reader compares it to skip a read.
func (s *State) RecipesVersion() (uint64, error) {
	b, err := s.st.Get(keyRecipesVersion)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("ledger: recipes version of %d bytes", len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// Recipe is one replicated recipe (ErrNotFound when there is none).
func (s *State) Recipe(name string) (*StoredRecipe, error) {
	var r StoredRecipe
	ok, err := getJSON(s.st, keyRecipe(name), &r)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrNotFound
	}
	return &r, nil
}

// Recipes calls fn with each replicated recipe (files left out), by name,
// from one snapshot, and returns the version they are at.
func (s *State) Recipes(fn func(*RecipeEntry) error) (uint64, error) {
	snap := s.st.NewSnapshot()
	defer snap.Close()
	var version uint64
	if b, err := snap.Get(keyRecipesVersion); err == nil && len(b) == 8 {
		version = binary.BigEndian.Uint64(b)
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return 0, err
	}
	err := snap.Scan(prefixRecipes(), nil, func(_, v []byte) (bool, error) {
		var r RecipeEntry
		if err := json.Unmarshal(v, &r); err != nil {
			return false, err
		}
		return true, fn(&r)
	})
	return version, err
}

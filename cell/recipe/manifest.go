package recipe

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/trawlhq/trawl/internal/recipespec"
)

// Stages and health (§2.7, §3).
const (
	StagePublished = "published"
	StageStaged    = "staged"
	HealthOK       = "ok"
	HealthFail     = "fail"
	HealthUnknown  = "unknown"
)

// Recipe is a loaded, checked recipe (the manifest format and its checks
// are internal/recipespec's) and where it came from.
type Recipe struct {
	recipespec.Recipe
	// Builtin: shipped in the binary.
	Builtin bool
	// Dir is where an operator recipe was read from.
	Dir string
}

// Parse checks a manifest and its body files (recipespec.Parse).
func Parse(manifest []byte, files map[string][]byte) (*Recipe, error) {
	s, err := recipespec.Parse(manifest, files)
	if err != nil {
		return nil, err
	}
	return &Recipe{Recipe: *s}, nil
}

// Builtins are the recipes shipped in the binary.
func Builtins() ([]*Recipe, error) {
	specs, err := recipespec.Builtins()
	if err != nil {
		return nil, err
	}
	out := make([]*Recipe, 0, len(specs))
	for _, s := range specs {
		out = append(out, &Recipe{Recipe: *s, Builtin: true})
	}
	return out, nil
}

// LoadDir reads a recipe directory: recipe.json and, by kind, script.js
// or module.wasm.
func LoadDir(dir string) (*Recipe, error) {
	raw, err := os.ReadFile(filepath.Join(dir, recipespec.ManifestFile))
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, f := range []string{recipespec.ScriptFile, recipespec.ModuleFile} {
		b, err := readCapped(filepath.Join(dir, f))
		if err == nil {
			files[f] = b
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	r, err := Parse(raw, files)
	if err != nil {
		return nil, fmt.Errorf("recipe %s: %w", dir, err)
	}
	r.Dir = dir
	return r, nil
}

func readCapped(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() > recipespec.MaxFileBytes {
		return nil, fmt.Errorf("%s: over %d bytes", path, recipespec.MaxFileBytes)
	}
	return os.ReadFile(path)
}

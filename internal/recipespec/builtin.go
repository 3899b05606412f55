package recipespec

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
)

//go:embed builtin
var builtinFS embed.FS

// Builtins are the recipes shipped in the binary (builtin/, one directory
// a recipe), checked by Parse, in the order of their directories' names.
func Builtins() ([]*Recipe, error) {
	entries, err := fs.ReadDir(builtinFS, "builtin")
	if err != nil {
		return nil, err
	}
	var out []*Recipe
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := path.Join("builtin", e.Name())
		manifest, err := builtinFS.ReadFile(path.Join(dir, ManifestFile))
		if err != nil {
			return nil, err
		}
		files := map[string][]byte{}
		if b, err := builtinFS.ReadFile(path.Join(dir, ScriptFile)); err == nil {
			files[ScriptFile] = b
		}
		r, err := Parse(manifest, files)
		if err != nil {
			return nil, fmt.Errorf("built-in recipe %s: %w", e.Name(), err)
		}
		out = append(out, r)
	}
	return out, nil
}

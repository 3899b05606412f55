package floors

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/trawlhq/trawl/"

// may says which top-level folders a folder's non-test code may import
// (besides itself). A folder not named here (cmd, regiontest, bench) may
// import anything.
var may = map[string][]string{
	"internal":      {},
	"ledger":        {"internal"},
	"cell":          {"internal"},
	"gate":          {"internal", "ledger"},
	"caddy-modules": {"internal", "ledger", "gate"},
}

// TestImportsRunDownward reads every non-test Go file's imports and fails
// on one that reaches up a floor (a cell importing the gate, internal/
// importing the cell).
func TestImportsRunDownward(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root not found at %s: %v", root, err)
	}
	files := 0
	for floor, allowed := range may {
		ok := map[string]bool{floor: true}
		for _, a := range allowed {
			ok[a] = true
		}
		err := filepath.WalkDir(filepath.Join(root, floor), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if n := d.Name(); n == "testdata" || strings.HasPrefix(n, ".") || n == "node_modules" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			files++
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				rest, ours := strings.CutPrefix(path, module)
				if !ours {
					continue
				}
				top, _, _ := strings.Cut(rest, "/")
				if !ok[top] {
					rel, _ := filepath.Rel(root, p)
					t.Errorf("%s imports %s: %s/ may import only %v", rel, path, floor, allowed)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 100 {
		t.Fatalf("read only %d files: is the walk looking in the right place?", files)
	}
}

// natsMay are the folders whose non-test code may import NATS or
// internal/jsnode (docs/jetstream-design.md §1): the cells and the
// binary. Anything under internal/ but jsnode is imported by the gate,
// so a NATS import there would link NATS into the gate.
var natsMay = []string{"cell/", "cmd/", "internal/jsnode/", "regiontest/", "bench/"}

// TestNATSOnlyInCells fails on a non-test Go file outside natsMay that
// imports github.com/nats-io/… or internal/jsnode.
func TestNATSOnlyInCells(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			n := d.Name()
			if n == "testdata" || (strings.HasPrefix(n, ".") && rel != ".") || n == "node_modules" || rel == "deploy" || rel == "terraform" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel = filepath.ToSlash(rel)
		for _, ok := range natsMay {
			if strings.HasPrefix(rel, ok) {
				return nil
			}
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/nats-io/") || path == module+"internal/jsnode" || strings.HasPrefix(path, module+"internal/jsnode/") {
				t.Errorf("%s imports %s: only %v may (the gate must not link NATS)", rel, path, natsMay)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read only %d files: is the walk looking in the right place?", files)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/internal/recipespec"
)

// `trawl recipe new` writes a starting point of each kind that loads and
// runs as it is (the module once built from its Go source), through
// `trawl recipe run`'s code.
func TestRecipeNewTemplatesRun(t *testing.T) {
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><body><h1 id="top">Tea</h1><p>x</p><h2 id="green">Green</h2><h3>Sencha</h3></body></html>`)
	}))
	t.Cleanup(page.Close)
	// Inside the module's tree, so the module template builds against
	// this checkout's guest package.
	root, err := os.MkdirTemp(".", "_recipe-new-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	want := map[string]string{
		recipespec.KindJSON:   `[{"text":"Tea","id":"top"},{"text":"Green","id":"green"},{"text":"Sencha","id":null}]`,
		recipespec.KindScript: `[{"level":1,"text":"Tea"},{"level":2,"text":"Green"},{"level":3,"text":"Sencha"}]`,
		recipespec.KindModule: `[{"level":1,"text":"Tea"},{"level":2,"text":"Green"},{"level":3,"text":"Sencha"}]`,
	}
	for kind, rows := range want {
		dir := filepath.Join(root, "heads-"+kind)
		var out, errb bytes.Buffer
		if err := recipeNew([]string{"--kind", kind, dir}, &out, &errb); err != nil {
			t.Fatalf("%s: %v %s", kind, err, errb.String())
		}
		if kind == recipespec.KindModule {
			if !strings.Contains(out.String(), "GOOS=wasip1 GOARCH=wasm go build") {
				t.Errorf("module: no build instruction: %s", out.String())
			}
			build := exec.Command("go", "build", "-o", "module.wasm", ".")
			build.Dir = dir
			build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
			if b, err := build.CombinedOutput(); err != nil {
				t.Fatalf("build the module template: %v\n%s", err, b)
			}
		}
		out.Reset()
		errb.Reset()
		err := recipeRun(context.Background(), []string{dir, "--input", "url=" + page.URL + "/", "--allow-private-networks"}, &out, &errb)
		if err != nil {
			t.Fatalf("%s: %v\n%s", kind, err, errb.String())
		}
		var ans struct {
			Recipe string          `json:"recipe"`
			Rows   json.RawMessage `json:"rows"`
		}
		if err := json.Unmarshal(out.Bytes(), &ans); err != nil {
			t.Fatalf("%s: %v %s", kind, err, out.String())
		}
		var compact bytes.Buffer
		json.Compact(&compact, ans.Rows)
		if ans.Recipe != "heads-"+kind || compact.String() != rows {
			t.Errorf("%s: %s rows %s, want %s", kind, ans.Recipe, compact.String(), rows)
		}
	}
	if err := recipeNew([]string{"--kind", "json", filepath.Join(root, "Bad Name")}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Errorf("a recipe named %q was written", "Bad Name")
	}
}

// --recipe-health takes NAME={json} (repeated) and what its String gives,
// which trawl dev --regions passes on to each region.
func TestRecipeHealthFlag(t *testing.T) {
	var h healthInputsFlag
	for _, v := range []string{`page-links={"url":"https://a.example/?x=1"}`, `article={"url":"https://b.example/"}`} {
		if err := h.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	var again healthInputsFlag
	if err := again.Set(h.String()); err != nil || again.String() != h.String() || len(again) != 2 {
		t.Errorf("round trip: %v %s", err, again.String())
	}
	for _, bad := range []string{"page-links", `x={"url":`, `{"x":1}`} {
		if err := new(healthInputsFlag).Set(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

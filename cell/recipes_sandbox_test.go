package cell

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// buildProbe builds the test module (cell/recipe/testdata/modules/probe)
// from Go source with the installed toolchain.
func buildProbe(t *testing.T, dst string) {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	cmd := exec.Command(gobin, "build", "-o", dst, "./recipe/testdata/modules/probe")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the module: %v\n%s", err, out)
	}
}

// A module built from Go source runs with the host API, and its limits
// hold: a spinning module stops at its time limit, a growing one at its
// memory limit (module_limit), bytes that are no module are bad_module,
// and a host outside the list ends the run with host_refused whatever
// the module does next.
func TestRecipeModule(t *testing.T) {
	site := newRecipeSite(t)
	dir := t.TempDir()
	mdir := writeRecipe(t, dir, "probe", `{"name":"probe","version":2,"title":"Probe module","kind":"module",
		"inputs":[{"name":"mode","type":"string","required":true},{"name":"url","type":"string","default":"`+site.URL+`/article.html"}],
		"outputs":["text","href"],"hosts":["{url}"],"page_budget":2,"limits":{"time_ms":3000,"memory_mib":48}}`, nil)
	buildProbe(t, filepath.Join(mdir, "module.wasm"))
	// The same module with a time limit it cannot reach first: "grow"
	// must stop at its memory limit, and on a loaded CI machine growing
	// to 48 MiB once took longer than the probe's 3 s.
	gdir := writeRecipe(t, dir, "probe-grow", `{"name":"probe-grow","version":1,"title":"Probe module, memory only","kind":"module",
		"inputs":[{"name":"mode","type":"string","required":true}],
		"outputs":["text"],"hosts":["127.0.0.1"],"limits":{"time_ms":120000,"memory_mib":48}}`, nil)
	wasm, err := os.ReadFile(filepath.Join(mdir, "module.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gdir, "module.wasm"), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	writeRecipe(t, dir, "junk", `{"name":"junk","version":1,"title":"Not a module","kind":"module","outputs":["x"],"hosts":["127.0.0.1"]}`,
		map[string]string{"module.wasm": "\x00asm\x01\x00\x00\x00garbage"})
	tc := newTestCell(t, func(c *Config) { c.Recipes = RecipeConfig{Dir: dir} })

	resp, a, u := tc.runRecipe(t, "probe", `{"mode":"links"}`)
	if resp.StatusCode != 200 || a.Version != 2 || len(a.Rows) != 2 || js2(a.RawRows[0]) != `{"text":"Home","href":"/"}` || a.Meta.PagesFetched != 1 {
		t.Fatalf("links: %d %+v", resp.StatusCode, a)
	}
	if !contains(a.Meta.Warnings, "log: 2 links on "+site.URL+"/article.html") || *u.Count != 1 || u.Boxes[1] != "wasm" {
		t.Errorf("links: warnings %q usage %+v", a.Meta.Warnings, u)
	}

	start := time.Now()
	resp, a, _ = tc.runRecipe(t, "probe", `{"mode":"spin"}`)
	if resp.StatusCode != 422 || a.Error != "module_limit" || !strings.Contains(a.Message, "3000 ms") {
		t.Errorf("spin: %d %s %s", resp.StatusCode, a.Error, a.Message)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("spin stopped after %v", d)
	}
	resp, a, _ = tc.runRecipe(t, "probe-grow", `{"mode":"grow"}`)
	if resp.StatusCode != 422 || a.Error != "module_limit" || !strings.Contains(a.Message, "48 MiB") {
		t.Errorf("grow: %d %s %s", resp.StatusCode, a.Error, a.Message)
	}
	resp, a, u = tc.runRecipe(t, "probe", `{"mode":"wander"}`)
	if resp.StatusCode != 403 || a.Error != "host_refused" || u.Count == nil || *u.Count != 0 {
		t.Errorf("wander: %d %s %s usage %+v", resp.StatusCode, a.Error, a.Message, u)
	}
	resp, a, _ = tc.runRecipe(t, "probe", `{"mode":"crash"}`)
	if resp.StatusCode != 422 || a.Error != "bad_module" || !strings.Contains(a.Message, "nil map") {
		t.Errorf("crash: %d %s %s", resp.StatusCode, a.Error, a.Message)
	}
	resp, a, _ = tc.runRecipe(t, "junk", `{}`)
	if resp.StatusCode != 422 || a.Error != "bad_module" {
		t.Errorf("junk: %d %s %s", resp.StatusCode, a.Error, a.Message)
	}
}

// A script's limits: time, heap growth; a script that does not compile
// or throws is bad_module.
func TestRecipeScriptLimits(t *testing.T) {
	site := newRecipeSite(t)
	dir := t.TempDir()
	manifest := func(name string, ms, mib int) string {
		return `{"name":"` + name + `","version":1,"title":"` + name + `","kind":"script","outputs":["n"],"hosts":["127.0.0.1"],
			"limits":{"time_ms":` + itoa(ms) + `,"memory_mib":` + itoa(mib) + `}}`
	}
	writeRecipe(t, dir, "spin", manifest("spin", 300, 64), map[string]string{"script.js": `function run(input) { for (;;) {} }`})
	writeRecipe(t, dir, "hog", manifest("hog", 30000, 32), map[string]string{"script.js": `function run(input) { const a = []; for (;;) { a.push(new Array(1 << 16).fill(a.length)); } }`})
	writeRecipe(t, dir, "broken", manifest("broken", 1000, 64), map[string]string{"script.js": `function run(input) { return [ }`})
	writeRecipe(t, dir, "throws", manifest("throws", 1000, 64), map[string]string{"script.js": `function run(input) { throw new Error("no luck"); }`})
	writeRecipe(t, dir, "count", manifest("count", 5000, 64), map[string]string{"script.js": `function run(input) {
		const p = fetch("` + site.URL + `/tables.html");
		log("status", p.status);
		return select(p, "td").map(function (td, i) { return {n: i, extra: td.text}; });
	}`})
	tc := newTestCell(t, func(c *Config) { c.Recipes = RecipeConfig{Dir: dir} })

	resp, a, _ := tc.runRecipe(t, "count", `{}`)
	if resp.StatusCode != 200 || len(a.Rows) != 12 || js2(a.RawRows[11]) != `{"n":11}` || !contains(a.Meta.Warnings, "log: status 200") {
		t.Errorf("count: %d %+v", resp.StatusCode, a)
	}
	for _, c := range []struct{ name, code, msg string }{
		{"spin", "module_limit", "300 ms"},
		{"hog", "module_limit", "32 MiB"},
		{"broken", "bad_module", "does not compile"},
		{"throws", "bad_module", "no luck"},
	} {
		resp, a, _ := tc.runRecipe(t, c.name, `{}`)
		if resp.StatusCode != 422 || a.Error != c.code || !strings.Contains(a.Message, c.msg) {
			t.Errorf("%s: %d %s %s", c.name, resp.StatusCode, a.Error, a.Message)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

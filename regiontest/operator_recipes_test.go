package regiontest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell"
	"github.com/trawlhq/trawl/gate"
	"github.com/trawlhq/trawl/internal/recipestore"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/testwait"
	"github.com/trawlhq/trawl/ledger"
)

const opRecipeJSON = `{"name":"site-headings","version":1,"title":"Headings of a page","kind":"json",
	"inputs":[{"name":"url","type":"string","required":true}],"outputs":["heading"],"hosts":["{url}"],"page_budget":1,
	"json":{"urls":["{url}"],"rows":{"baseSelector":"h2","fields":[{"name":"heading","type":"text"}]}}}`

const opRecipeScript = `{"name":"site-headings","version":2,"title":"Headings of a page","kind":"script",
	"inputs":[{"name":"url","type":"string","required":true}],"outputs":["heading"],"hosts":["{url}"],"page_budget":1}`

// Operator recipes through the operator API: checked with the cells'
// parser, kept in the ledger, loaded by every cell of the region within a
// reload (staged), run like any recipe, replaced and removed; the store
// the cells read them from answers only the region's members.
func TestOperatorRecipes(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><head><title>Guide</title></head><body><h2>Install</h2><p>x</p><h2>Configure</h2></body></html>`)
	}))
	defer site.Close()
	g := operatorGateWith(t, Options{Cells: 2, Cell: func(c *cell.Config) { c.Recipes.ReloadEvery = 100 * time.Millisecond }})
	customer := g.Account(t, ledger.PlanSupporter, 10)
	op := testOperatorKey
	put := func(name, body string) reply {
		return call(t, "PUT", g.URL+"/operator/v1/recipes/"+name, op, body)
	}
	body := func(manifest, script string) string {
		b, _ := json.Marshal(map[string]any{"manifest": json.RawMessage(manifest), "script": script})
		return string(b)
	}

	// Refused, and nothing kept.
	for _, c := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"site-headings", `{}`, 400, "bad_input"},
		{"site-headings", `{"manifest":{"name":"site-headings"}}`, 400, "bad_input"},                                     // no version, title…
		{"other", body(opRecipeJSON, ""), 400, "bad_input"},                                                              // the path names another
		{"site-headings", body(opRecipeScript, ""), 400, "bad_input"},                                                    // a script recipe without its script
		{"page-links", body(strings.ReplaceAll(opRecipeJSON, "site-headings", "page-links"), ""), 409, gate.CodeBuiltin}, // a built-in's name
		{"site-headings", `{"manifest":` + opRecipeJSON + `,"extra":1}`, 400, "bad_input"},
	} {
		r := put(c.name, c.body)
		if r.status != c.status || !strings.Contains(r.body, `"`+c.code+`"`) {
			t.Errorf("PUT %s %.60s: %d %s, want %d %s", c.name, c.body, r.status, r.body, c.status, c.code)
		}
	}
	var list gate.RecipeList
	if r := call(t, "GET", g.URL+"/operator/v1/recipes", op, ""); r.status != 200 || json.Unmarshal([]byte(r.body), &list) != nil || len(list.Recipes) != 0 || list.Version != 0 {
		t.Fatalf("after refusals: %d %s", r.status, r.body)
	}

	r := put("site-headings", body(opRecipeJSON, ""))
	var made gate.RecipeBody
	if r.status != 201 || json.Unmarshal([]byte(r.body), &made) != nil || made.Hash == "" || made.Index == 0 {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	// The same recipe again changes nothing.
	var again gate.RecipeBody
	if r := put("site-headings", body(opRecipeJSON, "")); r.status != 200 || json.Unmarshal([]byte(r.body), &again) != nil || again.Index != made.Index {
		t.Fatalf("PUT again: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", g.URL+"/operator/v1/recipes", op, ""); r.status != 200 || json.Unmarshal([]byte(r.body), &list) != nil ||
		len(list.Recipes) != 1 || list.Recipes[0].Kind != "json" || list.Recipes[0].Version != 1 || list.Recipes[0].Bytes == 0 || list.Version != made.Index {
		t.Fatalf("list: %d %s", r.status, r.body)
	}

	// Every cell of the region loads it, staged.
	waitCells := func(what string, ok func(c *Cell) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for _, c := range g.Cells {
			testwait.Until(t, time.Until(deadline), "cell "+c.Cell.Name()+": "+what, func() bool { return ok(c) })
		}
	}
	waitCells("never loaded the recipe", func(c *Cell) bool {
		rc, ok := c.Cell.Recipes().Get("site-headings")
		return ok && rc.Hash == made.Hash
	})
	for _, c := range g.Cells {
		rc, _ := c.Cell.Recipes().Get("site-headings")
		if stage, _, _ := c.Cell.Recipes().Status(rc); stage != "staged" {
			t.Errorf("cell %s: stage %q", c.Cell.Name(), stage)
		}
	}
	_, a := runRecipe(t, g, customer, "site-headings", `{"url":"`+site.URL+`/guide"}`)
	if a.Version != 1 || len(a.Rows) != 2 || a.Rows[1]["heading"] != "Configure" {
		t.Fatalf("run: %+v", a)
	}

	// Replaced by a script: the cells take the new version.
	r = put("site-headings", body(opRecipeScript, `function run(input) { return select(fetch(input.url), "h2").map(function (h) { return {heading: h.text.toUpperCase()}; }); }`))
	var v2 gate.RecipeBody
	if r.status != 200 || json.Unmarshal([]byte(r.body), &v2) != nil || v2.Hash == made.Hash || v2.Index <= made.Index || v2.Script == "" {
		t.Fatalf("replace: %d %s", r.status, r.body)
	}
	waitCells("never took version 2", func(c *Cell) bool {
		rc, ok := c.Cell.Recipes().Get("site-headings")
		return ok && rc.Version == 2
	})
	if _, a := runRecipe(t, g, customer, "site-headings", `{"url":"`+site.URL+`/guide","bypass_cache":true}`); a.Version != 2 || len(a.Rows) != 2 || a.Rows[0]["heading"] != "INSTALL" {
		t.Fatalf("run version 2: %+v", a)
	}
	if r := call(t, "GET", g.URL+"/operator/v1/recipes/site-headings", op, ""); r.status != 200 || !strings.Contains(r.body, `"script":"function run`) {
		t.Fatalf("GET one: %d %.200s", r.status, r.body)
	}

	// The store the cells read: a stranger, or a signature with other
	// keys, is refused.
	if r := call(t, "POST", g.URL+recipestore.Path+"list", "", `{}`); r.status != 403 {
		t.Errorf("unsigned store call: %d %s", r.status, r.body)
	}
	other, _ := regionauth.ParseKeys(regionauth.NewKey())
	stranger := &recipestore.Client{Gate: regionauth.Gate{Keys: other, Addr: func() string { return strings.TrimPrefix(g.URL, "http://") }}}
	if _, _, _, err := stranger.List(t.Context(), 0); err == nil {
		t.Error("a store call signed with other keys was answered")
	}
	member := &recipestore.Client{Gate: regionauth.Gate{Keys: g.Runtime.RegionKeys(), Addr: func() string { return strings.TrimPrefix(g.URL, "http://") }}}
	if v, refs, changed, err := member.List(t.Context(), 0); err != nil || !changed || v != v2.Index || len(refs) != 1 || refs[0].Hash != v2.Hash {
		t.Errorf("member list: %d %v %v %v", v, refs, changed, err)
	}
	if _, _, changed, err := member.List(t.Context(), v2.Index); err != nil || changed {
		t.Errorf("member list since the version: changed %v %v", changed, err)
	}

	// Removed from every cell.
	if r := call(t, "DELETE", g.URL+"/operator/v1/recipes/site-headings", op, ""); r.status != 204 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if r := call(t, "DELETE", g.URL+"/operator/v1/recipes/site-headings", op, ""); r.status != 404 {
		t.Fatalf("DELETE again: %d %s", r.status, r.body)
	}
	waitCells("kept the removed recipe", func(c *Cell) bool {
		_, ok := c.Cell.Recipes().Get("site-headings")
		return !ok
	})
	if r, a := runRecipe(t, g, customer, "site-headings", `{"url":"`+site.URL+`/guide"}`); r.status != 404 || a.Error != "unknown_recipe" {
		t.Fatalf("run after delete: %d %s", r.status, r.body)
	}
}

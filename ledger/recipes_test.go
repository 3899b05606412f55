package ledger

import (
	"encoding/json"
	"fmt"
	"testing"
)

func TestReplicatedRecipes(t *testing.T) {
	a := &applier{t: t, s: newState(t)}
	if v, err := a.s.RecipesVersion(); err != nil || v != 0 {
		t.Fatalf("a new ledger: version %d %v", v, err)
	}
	set := func(name, manifest string, files map[string][]byte) *SetRecipe {
		return &SetRecipe{Name: name, Manifest: json.RawMessage(manifest), Files: files, Hash: "h-" + name}
	}
	for _, bad := range []*SetRecipe{
		nil,
		set("Bad Name", `{}`, nil),
		set("ok", `[1]`, nil),
		set("ok", `{"a":`, nil),
		set("ok", `{}`, map[string][]byte{"run.sh": []byte("x")}),
		set("ok", `{}`, map[string][]byte{"module.wasm": make([]byte, MaxRecipeBytes)}),
		{Name: "ok", Manifest: json.RawMessage(`{}`)}, // no hash
	} {
		if r := a.do(Command{Type: CmdSetRecipe, SetRecipe: bad}); r.Error != ErrCodeInvalid {
			t.Fatalf("%+v: %+v, want invalid", bad, r)
		}
	}
	r1 := a.ok(Command{Type: CmdSetRecipe, SetRecipe: set("titles", `{"name":"titles"}`, map[string][]byte{"script.js": []byte("function run(){}")})})
	got, err := a.s.Recipe("titles")
	if err != nil || got.Index != r1.Index || string(got.Files["script.js"]) != "function run(){}" || got.Hash != "h-titles" || got.Bytes != len(`{"name":"titles"}`)+len("function run(){}") {
		t.Fatalf("after set: %+v %v", got, err)
	}
	r2 := a.ok(Command{Type: CmdSetRecipe, SetRecipe: set("links", `{"name":"links"}`, nil)})
	var names []string
	v, err := a.s.Recipes(func(r *RecipeEntry) error { names = append(names, r.Name); return nil })
	if err != nil || v != r2.Index || fmt.Sprint(names) != "[links titles]" {
		t.Fatalf("list: %d %v %v", v, names, err)
	}
	if r := a.do(Command{Type: CmdDeleteRecipe, DeleteRecipe: &DeleteRecipe{Name: "nope"}}); r.Error != ErrCodeNotFound {
		t.Fatalf("delete a missing recipe: %+v", r)
	}
	r3 := a.ok(Command{Type: CmdDeleteRecipe, DeleteRecipe: &DeleteRecipe{Name: "links"}})
	if _, err := a.s.Recipe("links"); err != ErrNotFound {
		t.Fatalf("deleted recipe: %v", err)
	}
	if v, _ := a.s.RecipesVersion(); v != r3.Index {
		t.Fatalf("version after delete: %d, want %d", v, r3.Index)
	}
	// At most MaxRecipes; replacing one is not one more.
	for i := 1; i < MaxRecipes; i++ {
		a.ok(Command{Type: CmdSetRecipe, SetRecipe: set(fmt.Sprintf("r%d", i), `{}`, nil)})
	}
	if r := a.do(Command{Type: CmdSetRecipe, SetRecipe: set("one-more", `{}`, nil)}); r.Error != ErrCodeInvalid {
		t.Fatalf("recipe %d: %+v", MaxRecipes+1, r)
	}
	a.ok(Command{Type: CmdSetRecipe, SetRecipe: set("titles", `{"name":"titles","version":2}`, nil)})
}

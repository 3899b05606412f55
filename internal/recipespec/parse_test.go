package recipespec

import (
	"strings"
	"testing"
)

const okManifest = `{"name":"t","version":1,"title":"T","kind":"json","outputs":["a"],"hosts":["example.com"],
	"inputs":[{"name":"q","type":"string","required":true},{"name":"n","type":"integer","default":2},{"name":"on","type":"boolean"},{"name":"d","type":"date"}],
	"json":{"urls":["https://example.com/s?q={q}&n={n}"],"rows":{"baseSelector":"li","fields":[{"name":"a","type":"text"}]}}}`

// Manifests that must not load, each with the reason named.
func TestParseRefuses(t *testing.T) {
	cases := []struct{ manifest, want string }{
		{`{"name":"Bad Name","version":1,"title":"T","kind":"json"}`, "name"},
		{`{"name":"health","version":1,"title":"T","kind":"json"}`, "taken"},
		{`{"name":"t","version":0,"title":"T","kind":"json"}`, "version"},
		{`{"name":"t","version":1,"title":"","kind":"json"}`, "title"},
		{`{"name":"t","version":1,"title":"T","kind":"json","outputs":[],"hosts":["a.b"]}`, "outputs"},
		{`{"name":"t","version":1,"title":"T","kind":"json","outputs":["a","a"],"hosts":["a.b"]}`, "outputs"},
		{`{"name":"t","version":1,"title":"T","kind":"json","outputs":["a"]}`, "hosts"},
		{`{"name":"t","version":1,"title":"T","kind":"json","outputs":["a"],"hosts":["{nope}"]}`, "names no string input"},
		{`{"name":"t","version":1,"title":"T","kind":"json","outputs":["a"],"hosts":["http://a.b/"]}`, "not a host name"},
		{`{"name":"t","version":1,"title":"T","kind":"wasm","outputs":["a"],"hosts":["a.b"]}`, "kind"},
		{`{"name":"t","version":1,"title":"T","kind":"json","outputs":["a"],"hosts":["a.b"]}`, "json body"},
		{`{"name":"t","version":1,"title":"T","kind":"script","outputs":["a"],"hosts":["a.b"]}`, "script.js"},
		{`{"name":"t","version":1,"title":"T","kind":"module","outputs":["a"],"hosts":["a.b"]}`, "module.wasm"},
		{`{"name":"t","version":1,"title":"T","kind":"json","outputs":["a"],"hosts":["a.b"],"page_budget":501,"json":{}}`, "page_budget"},
		{`{"name":"t","version":1,"title":"T","kind":"json","outputs":["a"],"hosts":["a.b"],"run":"later","json":{}}`, "run"},
		{`{"name":"t","version":1,"title":"T","kind":"json","outputs":["a"],"hosts":["a.b"],"inputs":[{"name":"x","type":"float"}]}`, "type"},
		{`{"name":"t","version":1,"title":"T","kind":"json","outputs":["a"],"hosts":["a.b"],"inputs":[{"name":"x","type":"integer","default":"two"}]}`, "default"},
		{`{"name":"t","version":1,"title":"T","kind":"json","outputs":["a"],"hosts":["a.b"],"inputs":[{"name":"session","type":"string","default":"a=b"}]}`, "secret"},
		{`{"name":"t","version":1,"title":"T","kind":"json","outputs":["a"],"hosts":["a.b"],"inputs":[{"name":"session","type":"integer"}]}`, "Cookie"},
		{`{"name":"t","version":1,"title":"T","kind":"json","outputs":["a"],"hosts":["a.b"],"health":{"inputs":{"zz":1}},"json":{}}`, "health.inputs"},
		{`{"name":"t","version":1,"title":"T","kind":"json","outputs":["a"],"hosts":["a.b"],"json":{"urls":["https://a.b/{q}"],"rows":{}}}`, "names no input"},
		{`{"name":"t","version":1,"title":"T","kind":"json","outputs":["a"],"hosts":["a.b"],"json":{"urls":["https://a.b/"],"rows":{"baseSelector":"li[","fields":[]}}}`, "invalid CSS selector"},
		{`{"name":"t","version":1,"title":"T","kind":"json","outputs":["a"],"hosts":["a.b"],"json":{"urls":["https://a.b/"],"rows":{"baseSelector":"li","fields":[]}},"surprise":1}`, "unknown field"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.manifest), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v, want an error with %q", c.manifest, err, c.want)
		}
	}
	if _, err := Parse([]byte(okManifest), nil); err != nil {
		t.Fatal(err)
	}
}

// The built-in recipes load, each of its kind with its body.
func TestBuiltins(t *testing.T) {
	bs, err := Builtins()
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) == 0 {
		t.Fatal("no built-in recipes")
	}
	for _, b := range bs {
		switch {
		case b.Hash == "":
			t.Errorf("%s: no hash", b.Name)
		case b.Kind == KindJSON && b.Rows == nil:
			t.Errorf("%s: a json recipe without its compiled rows", b.Name)
		case b.Kind == KindScript && b.Script == "":
			t.Errorf("%s: a script recipe without its script", b.Name)
		}
	}
}

// Defaults are filled in; a hash changes with the body.
func TestParseDefaults(t *testing.T) {
	r, err := Parse([]byte(okManifest), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.PageBudget != 10 || r.Run != "sync" || r.CostHint == nil || r.CostHint.MaxUnits != 10 || r.Limits.TimeMS != 60000 || r.Limits.MemoryMiB != 64 {
		t.Errorf("defaults: %+v %+v %+v", r.Manifest, r.CostHint, r.Limits)
	}
	script := func(src string) string {
		r, err := Parse([]byte(`{"name":"s","version":1,"title":"S","kind":"script","outputs":["a"],"hosts":["a.b"]}`), map[string][]byte{ScriptFile: []byte(src)})
		if err != nil {
			t.Fatal(err)
		}
		return r.Hash
	}
	if script("a()") == script("b()") {
		t.Error("the hash does not cover the script")
	}
}

func TestExpand(t *testing.T) {
	vals := map[string]string{"q": "green tea", "u": " https://a.b/x?y=1 "}
	value := func(n string) (string, bool) { v, ok := vals[n]; return v, ok }
	for tmpl, want := range map[string]string{
		"https://a.b/s?q={q}&z={none}": "https://a.b/s?q=green+tea&z=",
		"{u}":                          "https://a.b/x?y=1",
		"https://a.b/":                 "https://a.b/",
	} {
		if got := Expand(tmpl, value); got != want {
			t.Errorf("Expand(%q) = %q, want %q", tmpl, got, want)
		}
	}
}

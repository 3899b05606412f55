package recipe

import (
	"encoding/json"
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

// Inputs: types, defaults, required, unknown names; secret values are
// never echoed.
func TestCheckInputs(t *testing.T) {
	r, err := Parse([]byte(okManifest), nil)
	if err != nil {
		t.Fatal(err)
	}
	body := func(s string) map[string]json.RawMessage {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	vals, bypass, err := r.Check(body(`{"q":"green tea","on":true,"d":"2026-11-02","bypass_cache":true}`))
	if err != nil || !bypass || vals["q"] != "green tea" || vals["n"] != int64(2) || vals["on"] != true || vals["d"] != "2026-11-02" {
		t.Fatalf("%v %v %v", vals, bypass, err)
	}
	if got := expand(r.JSON.URLs[0], vals); got != "https://example.com/s?q=green+tea&n=2" {
		t.Errorf("expand: %s", got)
	}
	for _, b := range []string{`{}`, `{"q":1}`, `{"q":"x","n":1.5}`, `{"q":"x","n":"2"}`, `{"q":"x","on":"yes"}`, `{"q":"x","d":"02/11/2026"}`, `{"q":"x","z":1}`, `{"q":"x","bypass_cache":"no"}`} {
		if _, _, err := r.Check(body(b)); AsError(err) == nil || AsError(err).Code != CodeBadInput || AsError(err).Status != 400 {
			t.Errorf("%s: %v", b, err)
		}
	}
	s, err := Parse([]byte(`{"name":"s","version":1,"title":"S","kind":"json","outputs":["a"],"hosts":["a.b"],"inputs":[{"name":"session","type":"string","need":"required"}],
		"json":{"urls":["https://a.b/"],"rows":{"baseSelector":"li","fields":[{"name":"a","type":"text"}]}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Secret() || !s.Inputs[0].Required {
		t.Errorf("session: %+v", s.Inputs[0])
	}
	if _, _, err := s.Check(body(`{"session":{"sid":"t0p-s3cret"}}`)); err == nil || strings.Contains(err.Error(), "t0p-s3cret") {
		t.Errorf("a bad session: %v", err)
	}
}

// XML pages become trees CSS selectors read, with local names.
func TestParseXML(t *testing.T) {
	doc, err := parseXML([]byte(`<?xml version="1.0" encoding="ISO-8859-1"?><rss xmlns:dc="http://purl.org/dc/elements/1.1/"><channel><item><title>Caf` + "\xe9" + `</title><link>https://a.b/1</link><dc:creator>Ann</dc:creator></item></channel></rss>`))
	if err != nil {
		t.Fatal(err)
	}
	for css, want := range map[string]string{"item > title": "Café", "item > link": "https://a.b/1", "item creator": "Ann"} {
		sel, _ := compileSel(css)
		n := sel.MatchFirst(doc)
		if n == nil || nodeText(n) != want {
			t.Errorf("%s: %v", css, n)
		}
	}
}

func TestIsXML(t *testing.T) {
	for ct, want := range map[string]bool{"application/xml": true, "text/xml; charset=utf-8": true, "application/rss+xml": true, "application/atom+xml": true,
		"application/xhtml+xml": false, "text/html": false, "text/plain": false} {
		if got := isXML(ct, []byte("<x/>")); got != want {
			t.Errorf("%s: %v", ct, got)
		}
	}
	if !isXML("", []byte("  <?xml version=\"1.0\"?><urlset/>")) {
		t.Error("an XML declaration without a content type")
	}
}

package recipe

import (
	"encoding/json"
	"strings"
	"testing"
)

const okManifest = `{"name":"t","version":1,"title":"T","kind":"json","outputs":["a"],"hosts":["example.com"],
	"inputs":[{"name":"q","type":"string","required":true},{"name":"n","type":"integer","default":2},{"name":"on","type":"boolean"},{"name":"d","type":"date"}],
	"json":{"urls":["https://example.com/s?q={q}&n={n}"],"rows":{"baseSelector":"li","fields":[{"name":"a","type":"text"}]}}}`

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
		if _, _, err := r.Check(body(b)); RunError(err).Code != CodeBadInput || RunError(err).Status != 400 {
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

package htmlread

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestJSONLD(t *testing.T) {
	tests := []struct {
		name, src string
		max       int
		want      []string
	}{
		{"plain", `<script type="application/ld+json">{"@type": "Article", "headline": "H"}</script>`, 0, []string{`{"@type":"Article","headline":"H"}`}},
		{"type case and space", `<script type=" Application/LD+JSON ">[1, 2]</script>`, 0, []string{`[1,2]`}},
		{"comment", `<script type="application/ld+json"><!-- {"a": 1} --></script>`, 0, []string{`{"a":1}`}},
		{"CDATA", `<script type="application/ld+json"><![CDATA[ {"a": 1} ]]></script>`, 0, []string{`{"a":1}`}},
		{"commented CDATA", "<script type=\"application/ld+json\">//<![CDATA[\n{\"a\": 1}\n//]]></script>", 0, []string{`{"a":1}`}},
		{"invalid and empty skipped", `<script type="application/ld+json">{nope</script><script type="application/ld+json"> </script><script type="application/ld+json">{"b":2}</script>`, 0, []string{`{"b":2}`}},
		{"other scripts", `<script>{"a":1}</script><script type="application/json">{"a":1}</script>`, 0, nil},
		{"bound", `<script type="application/ld+json">{"a":1}</script><script type="application/ld+json">{"b":22222}</script>`, 10, []string{`{"a":1}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, b := range JSONLD(body(t, tc.src), tc.max) {
				got = append(got, string(b))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestEntities(t *testing.T) {
	tests := []struct {
		name, ld string
		types    []string // of each entity, in order
	}{
		{"one", `{"@type":"Recipe"}`, []string{"Recipe"}},
		{"array", `[{"@type":"A"},{"@type":"B"}]`, []string{"A", "B"}},
		{"graph only", `{"@context":"https://schema.org","@graph":[{"@type":"WebPage"},{"@type":["Article","NewsArticle"]}]}`, []string{"WebPage", "Article NewsArticle"}},
		{"graph with more", `{"@context":"x","@type":"Thing","@graph":[{"@type":"A"}]}`, []string{"A", "Thing"}},
		{"too deep", `[[[[{"@type":"Deep"}]]]]`, nil},
		{"scalars", `"text"`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var v any
			if err := json.Unmarshal([]byte(tc.ld), &v); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range Entities(v) {
				got = append(got, strings.Join(Types(e), " "))
			}
			if !reflect.DeepEqual(got, tc.types) {
				t.Errorf("got %q, want %q", got, tc.types)
			}
		})
	}
}

package extract

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// The json_css strategy is internal/cssschema's schema under
// params.schema (its own tests cover the language): what is tested here
// is the wiring, the schema's two forms and the errors as bad params.
func TestJSONCSS(t *testing.T) {
	const schema = `{"name":"x","baseSelector":"li","fields":[{"name":"t","type":"text"},{"name":"h","type":"html","selector":"i"}]}`
	for _, params := range []string{
		`{"schema":` + schema + `}`,
		`{"schema":` + quote(schema) + `}`, // pre-serialized
	} {
		s, err := New(Config{}, "json_css", json.RawMessage(params))
		if err != nil {
			t.Fatal(err)
		}
		if s.Name() != "json_css" {
			t.Errorf("Name() = %q", s.Name())
		}
		out, err := s.Extract(context.Background(), Page{HTML: `<ul><li>a <i>&lt;b&gt;</i></li><li>c</li></ul>`})
		if err != nil {
			t.Fatal(err)
		}
		if want := `[{"t":"a <b>","h":"<i>&lt;b&gt;</i>"},{"t":"c"}]`; out != want {
			t.Errorf("%s:\n got  %s\n want %s", params, out, want)
		}
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestJSONCSSBadParams(t *testing.T) {
	tests := []struct{ name, params, want string }{
		{"no schema", `{}`, "params.schema: is required"},
		{"schema not an object", `{"schema":[1]}`, "params.schema: must be a JSON object"},
		{"schema string not json", `{"schema":"nope"}`, "params.schema: must be a JSON object"},
		{"missing name", `{"schema":{"baseSelector":"div","fields":[]}}`, "params.schema.name: is required"},
		{"invalid selector", `{"schema":{"name":"x","baseSelector":"div","fields":[{"name":"a","type":"text"},{"name":"b","type":"text","selector":"p:nope"}]}}`, "params.schema.fields[1].selector: invalid CSS selector"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Config{}, "json_css", json.RawMessage(tc.params))
			if err == nil {
				t.Fatal("New succeeded")
			}
			if !IsBadParams(err) {
				t.Errorf("IsBadParams(%v) = false", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

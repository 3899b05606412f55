package cssschema

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/trawlhq/trawl/internal/golden"
)

// productsSchema uses every field type on testdata/products.html.
const productsSchema = `{
  "name": "products",
  "baseSelector": "li.product",
  "baseFields": [{"name": "sku", "type": "attribute", "attribute": "data-sku"}],
  "fields": [
    {"name": "name", "selector": "h2.name", "type": "text"},
    {"name": "name_upper", "selector": "h2.name", "type": "text", "transform": "uppercase"},
    {"name": "url", "selector": "a.link", "type": "attribute", "attribute": "href"},
    {"name": "image_alt", "selector": "img", "type": "attribute", "attribute": "alt", "default": ""},
    {"name": "price", "selector": ".price", "type": "regex", "pattern": "\\$([0-9.]+)", "default": null},
    {"name": "currency", "selector": ".price", "type": "regex", "pattern": "[$€£]"},
    {"name": "description", "selector": ".desc", "type": "html"},
    {"name": "stock", "type": "attribute", "attribute": "data-stock", "default": "unknown"},
    {"name": "maker", "selector": ".maker", "type": "nested", "fields": [
      {"name": "name", "selector": ".maker-name", "type": "text"},
      {"name": "country", "selector": ".country", "type": "text", "transform": "lowercase"}]},
    {"name": "features", "selector": ".features li", "type": "list", "fields": [{"name": "feature", "type": "text"}]},
    {"name": "feature_texts", "selector": ".features li", "type": "list"},
    {"name": "reviews", "selector": ".review", "type": "nested_list", "fields": [
      {"name": "author", "selector": ".author", "type": "text"},
      {"name": "stars", "selector": ".stars", "type": "regex", "pattern": "\\d"},
      {"name": "pros", "selector": ".pros li", "type": "list", "fields": [{"name": "pro", "type": "text"}]}]},
    {"name": "rating", "selector": ".rating", "type": "text", "default": 0}
  ]}`

// compile compiles a schema as the crawl server's params.schema.
func compile(t testing.TB, schema string) *Schema {
	t.Helper()
	s, err := Compile(json.RawMessage(schema), "params.schema.", "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// extract applies s to a page.
func extract(t testing.TB, ctx context.Context, s *Schema, page string) (string, error) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Extract(ctx, doc)
	return string(out), err
}

func readFixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestProducts(t *testing.T) {
	s := compile(t, productsSchema)
	out, err := extract(t, context.Background(), s, readFixture(t, "products.html"))
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "golden", "products.json"), []byte(out+"\n"))

	var items []map[string]any
	if err := json.Unmarshal([]byte(out), &items); err != nil {
		t.Fatal(err)
	}
	if len(items) != 3 {
		t.Fatalf("got %d items, want 3", len(items))
	}
	tent, bag, stove := items[0], items[1], items[2]
	checks := []struct {
		name      string
		got, want any
	}{
		{"base field", tent["sku"], "TNT-2"},
		{"text collapses whitespace", tent["name"], "Ridge Tent 2-person"},
		{"transform", tent["name_upper"], "RIDGE TENT 2-PERSON"},
		{"attribute", tent["url"], "/p/ridge-tent"},
		{"attribute", tent["image_alt"], "Ridge Tent"},
		{"missing attribute takes default", bag["image_alt"], ""},
		{"regex group", tent["price"], "199.00"},
		{"regex group", bag["price"], "89.50"},
		{"regex without group", tent["currency"], "$"},
		{"html is outer html", tent["description"], `<div class="desc"><p>Light <b>and</b> strong.</p></div>`},
		{"no selector: the base element", tent["stock"], "in"},
		{"no selector, default", bag["stock"], "unknown"},
		{"nested", tent["maker"], map[string]any{"name": "Alpine Co", "country": "ch"}},
		{"nested without match", bag["maker"], map[string]any{}},
		{"list", tent["features"], []any{map[string]any{"feature": "Waterproof"}, map[string]any{"feature": "Two doors"}, map[string]any{"feature": "1.9 kg"}}},
		{"list without fields", tent["feature_texts"], []any{"Waterproof", "Two doors", "1.9 kg"}},
		{"nested_list", tent["reviews"], []any{
			map[string]any{"author": "Ana", "stars": "5", "pros": []any{map[string]any{"pro": "dry"}, map[string]any{"pro": "roomy"}}},
			map[string]any{"author": "Ben", "stars": "4", "pros": []any{map[string]any{"pro": "light"}}},
		}},
		{"nested_list without match", bag["reviews"], []any{}},
		{"entities decoded", strings.Contains(bag["description"].(string), "−5\u00a0°C &amp; packs"), true},
		{"non-string default", tent["rating"], float64(0)},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %#v, want %#v", c.name, c.got, c.want)
		}
	}
	if _, ok := stove["price"]; ok {
		t.Errorf("a null default is no default (as Crawl4AI's None): got %#v, want the key left out", stove["price"])
	}
	if _, ok := stove["currency"]; ok {
		t.Errorf("regex miss without default must be left out, got %#v", stove["currency"])
	}
	if _, ok := stove["url"]; ok {
		t.Error("missing element without default must be left out")
	}
	// Keys keep the schema's order.
	if !strings.HasPrefix(out, `[{"sku":"TNT-2","name":"Ridge Tent 2-person","name_upper"`) {
		t.Errorf("keys out of schema order: %.80s", out)
	}
}

func TestCases(t *testing.T) {
	tests := []struct {
		name, schema, html string
		want               string // JSON
	}{
		{
			name:   "no match gives empty array",
			schema: `{"name":"x","baseSelector":"div.none","fields":[{"name":"a","type":"text"}]}`,
			html:   `<p>hi</p>`,
			want:   `[]`,
		},
		{
			name:   "elements without any value are skipped",
			schema: `{"name":"x","baseSelector":"li","fields":[{"name":"a","selector":"a","type":"attribute","attribute":"href"}]}`,
			html:   `<ul><li><a href="/1">1</a></li><li>none</li><li><a href="/3">3</a></li></ul>`,
			want:   `[{"a":"/1"},{"a":"/3"}]`,
		},
		{
			name:   "selector group and text between blocks",
			schema: `{"name":"x","baseSelector":"section, article","fields":[{"name":"t","type":"text"}]}`,
			html:   `<section><p>a</p><p>b</p></section><article>c<br>d</article><script>var x=1</script>`,
			want:   `[{"t":"a b"},{"t":"c d"}]`,
		},
		{
			name:   "html is not escaped",
			schema: `{"name":"x","baseSelector":"p","fields":[{"name":"h","type":"html"}]}`,
			html:   `<p>a &amp; <i>b</i></p>`,
			want:   `[{"h":"<p>a &amp; <i>b</i></p>"}]`,
		},
		{
			name:   "strip transform and duplicate names keep the last value",
			schema: `{"name":"x","baseSelector":"p","fields":[{"name":"v","type":"attribute","attribute":"title","transform":"strip"},{"name":"v","type":"attribute","attribute":"title"}]}`,
			html:   `<p title="  t  ">x</p>`,
			want:   `[{"v":"  t  "}]`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := extract(t, context.Background(), compile(t, tc.schema), tc.html)
			if err != nil {
				t.Fatal(err)
			}
			if out != tc.want {
				t.Errorf("got  %s\nwant %s", out, tc.want)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	field := func(f string) string {
		return `{"name":"x","baseSelector":"div","fields":[` + f + `]}`
	}
	tests := []struct{ name, schema, want string }{
		{"schema not an object", `[1]`, "params.schema: must be a JSON object"},
		{"missing name", `{"baseSelector":"div","fields":[]}`, "params.schema.name: is required"},
		{"name not a string", `{"name":3,"baseSelector":"div","fields":[]}`, "params.schema.name: must be a string"},
		{"missing baseSelector", `{"name":"x","fields":[]}`, "params.schema.baseSelector: is required"},
		{"invalid baseSelector", `{"name":"x","baseSelector":"div[","fields":[]}`, "params.schema.baseSelector: invalid CSS selector"},
		{"missing fields", `{"name":"x","baseSelector":"div"}`, "params.schema.fields: is required"},
		{"fields not an array", `{"name":"x","baseSelector":"div","fields":{}}`, "params.schema.fields: must be an array"},
		{"field not an object", field(`"a"`), "params.schema.fields[0]: must be a JSON object"},
		{"field without name", field(`{"type":"text"}`), "params.schema.fields[0].name: is required"},
		{"field without type", field(`{"name":"a"}`), "params.schema.fields[0].type: is required"},
		{"unknown type", field(`{"name":"a","type":"number"}`), `params.schema.fields[0].type: unknown type "number"`},
		{"computed", field(`{"name":"a","type":"computed","expression":"1+1"}`), "computed fields are not supported"},
		{"invalid selector", field(`{"name":"a","type":"text"},{"name":"b","type":"text","selector":"p:nope"}`), "params.schema.fields[1].selector: invalid CSS selector"},
		{"attribute without attribute", field(`{"name":"a","type":"attribute"}`), "params.schema.fields[0].attribute: is required"},
		{"regex without pattern", field(`{"name":"a","type":"regex"}`), "params.schema.fields[0].pattern: is required"},
		{"python-only regex", field(`{"name":"a","type":"regex","pattern":"(?<=\\$)\\d+"}`), "params.schema.fields[0].pattern: invalid regular expression"},
		{"nested without fields", field(`{"name":"a","type":"nested","selector":"p"}`), "params.schema.fields[0].fields: is required"},
		{"nested_list without fields", field(`{"name":"a","type":"nested_list","selector":"p"}`), "params.schema.fields[0].fields: is required"},
		{"bad sub-field", field(`{"name":"a","type":"list","selector":"p","fields":[{"name":"b","type":"text","selector":"!"}]}`), "params.schema.fields[0].fields[0].selector: invalid CSS selector"},
		{"unknown transform", field(`{"name":"a","type":"text","transform":"title"}`), `params.schema.fields[0].transform: unknown transform "title"`},
		{"bad baseFields", `{"name":"x","baseSelector":"div","fields":[],"baseFields":[{"name":"a","type":"attribute"}]}`, "params.schema.baseFields[0].attribute: is required"},
		{"too deep", `{"name":"x","baseSelector":"div","fields":[` + strings.Repeat(`{"name":"a","type":"nested","fields":[`, 20) + strings.Repeat(`]}`, 20) + `]}`, "nested deeper than 16 levels"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(json.RawMessage(tc.schema), "params.schema.", "")
			if err == nil {
				t.Fatal("Compile succeeded")
			}
			if _, ok := errors.AsType[*Error](err); !ok {
				t.Errorf("%v is not an *Error", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestCancelled(t *testing.T) {
	s := compile(t, productsSchema)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := extract(t, ctx, s, readFixture(t, "products.html")); err == nil {
		t.Error("Extract ignored a cancelled context")
	}
}

// FuzzCompile feeds arbitrary schemas to Compile; whatever it accepts must
// extract valid JSON from the products page without panicking.
func FuzzCompile(f *testing.F) {
	f.Add(productsSchema)
	f.Add(`{"name":"x","baseSelector":"li","fields":[{"name":"a","type":"list"}]}`)
	f.Add(`{"name":"x","baseSelector":"*","fields":[{"name":"a","type":"regex","pattern":"(a)|b"}],"baseFields":[{"name":"h","type":"html"}]}`)
	f.Add(`{"name":1}`)
	f.Add(`{"name":"x","baseSelector":":not(p) > a:nth-child(2n+1)","fields":[{"name":"","type":"text"}]}`)
	page := readFixture(f, "products.html")
	f.Fuzz(func(t *testing.T, schema string) {
		s, err := Compile(json.RawMessage(schema), "params.schema.", "")
		if err != nil {
			if _, ok := errors.AsType[*Error](err); !ok {
				t.Fatalf("Compile error is not an *Error: %v", err)
			}
			return
		}
		out, err := extract(t, context.Background(), s, page)
		if err != nil {
			t.Fatalf("Extract: %v", err)
		}
		var v []json.RawMessage
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("output is not a JSON array: %v", err)
		}
	})
}

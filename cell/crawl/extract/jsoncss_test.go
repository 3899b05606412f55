package extract

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/internal/golden"
)

// productsSchema uses every field type on testdata/products.html.
const productsSchema = `{"schema": {
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
  ]}}`

func extractJSONCSS(t *testing.T, params, html string) []map[string]any {
	t.Helper()
	s, err := New(Config{}, "json_css", json.RawMessage(params))
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Extract(context.Background(), Page{URL: "http://127.0.0.1/gear", HTML: html})
	if err != nil {
		t.Fatal(err)
	}
	var items []map[string]any
	if err := json.Unmarshal([]byte(out), &items); err != nil {
		t.Fatalf("output is not a JSON array of objects: %v\n%s", err, out)
	}
	return items
}

func TestJSONCSSProducts(t *testing.T) {
	s, err := New(Config{}, "json_css", json.RawMessage(productsSchema))
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Extract(context.Background(), Page{HTML: readFixture(t, "products.html")})
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

func TestJSONCSSCases(t *testing.T) {
	tests := []struct {
		name, params, html string
		want               string // JSON
	}{
		{
			name:   "no match gives empty array",
			params: `{"schema":{"name":"x","baseSelector":"div.none","fields":[{"name":"a","type":"text"}]}}`,
			html:   `<p>hi</p>`,
			want:   `[]`,
		},
		{
			name:   "elements without any value are skipped",
			params: `{"schema":{"name":"x","baseSelector":"li","fields":[{"name":"a","selector":"a","type":"attribute","attribute":"href"}]}}`,
			html:   `<ul><li><a href="/1">1</a></li><li>none</li><li><a href="/3">3</a></li></ul>`,
			want:   `[{"a":"/1"},{"a":"/3"}]`,
		},
		{
			name:   "selector group and text between blocks",
			params: `{"schema":{"name":"x","baseSelector":"section, article","fields":[{"name":"t","type":"text"}]}}`,
			html:   `<section><p>a</p><p>b</p></section><article>c<br>d</article><script>var x=1</script>`,
			want:   `[{"t":"a b"},{"t":"c d"}]`,
		},
		{
			name:   "schema sent as a JSON string",
			params: `{"schema":"{\"name\":\"x\",\"baseSelector\":\"b\",\"fields\":[{\"name\":\"t\",\"type\":\"text\"}]}"}`,
			html:   `<b>bold</b>`,
			want:   `[{"t":"bold"}]`,
		},
		{
			name:   "html is not escaped",
			params: `{"schema":{"name":"x","baseSelector":"p","fields":[{"name":"h","type":"html"}]}}`,
			html:   `<p>a &amp; <i>b</i></p>`,
			want:   `[{"h":"<p>a &amp; <i>b</i></p>"}]`,
		},
		{
			name:   "strip transform and duplicate names keep the last value",
			params: `{"schema":{"name":"x","baseSelector":"p","fields":[{"name":"v","type":"attribute","attribute":"title","transform":"strip"},{"name":"v","type":"attribute","attribute":"title"}]}}`,
			html:   `<p title="  t  ">x</p>`,
			want:   `[{"v":"  t  "}]`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Config{}, "json_css", json.RawMessage(tc.params))
			if err != nil {
				t.Fatal(err)
			}
			out, err := s.Extract(context.Background(), Page{HTML: tc.html})
			if err != nil {
				t.Fatal(err)
			}
			if out != tc.want {
				t.Errorf("got  %s\nwant %s", out, tc.want)
			}
		})
	}
}

func TestJSONCSSBadParams(t *testing.T) {
	field := func(f string) string {
		return `{"schema":{"name":"x","baseSelector":"div","fields":[` + f + `]}}`
	}
	tests := []struct{ name, params, want string }{
		{"schema not an object", `{"schema":[1]}`, "params.schema: must be a JSON object"},
		{"schema string not json", `{"schema":"nope"}`, "params.schema: must be a JSON object"},
		{"missing name", `{"schema":{"baseSelector":"div","fields":[]}}`, "params.schema.name: is required"},
		{"name not a string", `{"schema":{"name":3,"baseSelector":"div","fields":[]}}`, "params.schema.name: must be a string"},
		{"missing baseSelector", `{"schema":{"name":"x","fields":[]}}`, "params.schema.baseSelector: is required"},
		{"invalid baseSelector", `{"schema":{"name":"x","baseSelector":"div[","fields":[]}}`, "params.schema.baseSelector: invalid CSS selector"},
		{"missing fields", `{"schema":{"name":"x","baseSelector":"div"}}`, "params.schema.fields: is required"},
		{"fields not an array", `{"schema":{"name":"x","baseSelector":"div","fields":{}}}`, "params.schema.fields: must be an array"},
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
		{"bad baseFields", `{"schema":{"name":"x","baseSelector":"div","fields":[],"baseFields":[{"name":"a","type":"attribute"}]}}`, "params.schema.baseFields[0].attribute: is required"},
		{"too deep", `{"schema":{"name":"x","baseSelector":"div","fields":[` + strings.Repeat(`{"name":"a","type":"nested","fields":[`, 20) + strings.Repeat(`]}`, 20) + `]}}`, "nested deeper than 16 levels"},
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

func TestJSONCSSCancelled(t *testing.T) {
	s, err := New(Config{}, "json_css", json.RawMessage(productsSchema))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Extract(ctx, Page{HTML: readFixture(t, "products.html")}); err == nil {
		t.Error("Extract ignored a cancelled context")
	}
}

// FuzzJSONCSS feeds arbitrary params to New; whatever it accepts must
// extract valid JSON from the products page without panicking.
func FuzzJSONCSS(f *testing.F) {
	f.Add(productsSchema)
	f.Add(`{"schema":{"name":"x","baseSelector":"li","fields":[{"name":"a","type":"list"}]}}`)
	f.Add(`{"schema":{"name":"x","baseSelector":"*","fields":[{"name":"a","type":"regex","pattern":"(a)|b"}],"baseFields":[{"name":"h","type":"html"}]}}`)
	f.Add(`{"schema":"{\"name\":1}"}`)
	f.Add(`{"schema":{"name":"x","baseSelector":":not(p) > a:nth-child(2n+1)","fields":[{"name":"","type":"text"}]}}`)
	page := readFixture(f, "products.html")
	f.Fuzz(func(t *testing.T, params string) {
		s, err := New(Config{}, "json_css", json.RawMessage(params))
		if err != nil {
			if !IsBadParams(err) {
				t.Fatalf("New error is not bad params: %v", err)
			}
			return
		}
		out, err := s.Extract(context.Background(), Page{HTML: page})
		if err != nil {
			t.Fatalf("Extract: %v", err)
		}
		var v []json.RawMessage
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("output is not a JSON array: %v", err)
		}
	})
}

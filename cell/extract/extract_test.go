package extract

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/internal/textscore"
)

func TestParseNumber(t *testing.T) {
	for in, want := range map[string]float64{
		"1,299.00": 1299, "1.299,00": 1299, "$ 12": 12, "€12,50": 12.5, "4.5 out of 5": 4.5,
		"1 299 kr": 1299, "-3": -3, "1,299,000": 1299000, "12'000.5": 12000.5, "1.299.000": 1299000, "7": 7,
	} {
		if got, ok := parseNumber(in); !ok || got != want {
			t.Errorf("parseNumber(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	if _, ok := parseNumber("no digits"); ok {
		t.Error("a number from no digits")
	}
}

func TestParseDate(t *testing.T) {
	for in, want := range map[string]string{
		"2019-11-19":                           "2019-11-19",
		"2019-11-19T10:30:00Z":                 "2019-11-19T10:30:00Z",
		"2019-11-19T10:30:00-0500":             "2019-11-19T10:30:00-05:00",
		"Published November 19, 2019":          "2019-11-19",
		"Tue, Nov. 19th, 2019 at 3pm":          "2019-11-19",
		"19 November 2019":                     "2019-11-19",
		"on the 3rd of March 2024":             "2024-03-03",
		"2019/11/19":                           "2019-11-19",
		"11/19/2019":                           "2019-11-19",
		"19/11/2019":                           "2019-11-19",
		"11/19/19 06:56 AM EST":                "2019-11-19",
		"Updated 2 Dec 2020, first 2019-01-01": "2020-12-02", // the first date in the text
	} {
		if got, ok := parseDate(in); !ok || got != want {
			t.Errorf("parseDate(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"2019-02-30", "the 45th", "version 1.2.3"} {
		if got, ok := parseDate(in); ok {
			t.Errorf("parseDate(%q) = %q: not a date", in, got)
		}
	}
}

func TestTypedFinders(t *testing.T) {
	if b, ok := parseBool("https://schema.org/InStock"); !ok || !b {
		t.Error("InStock")
	}
	if b, ok := parseBool("Sold out"); !ok || b {
		t.Error("sold out")
	}
	if _, ok := parseBool("maybe"); ok {
		t.Error("maybe is no boolean")
	}
	if e, ok := findEmail("write to mailto:a.b+c@ex-ample.org now"); !ok || e != "a.b+c@ex-ample.org" {
		t.Errorf("email %q", e)
	}
	if p, ok := findPhone("Call +44 20 7946 0958 today"); !ok || p != "+44 20 7946 0958" {
		t.Errorf("phone %q", p)
	}
	if p, ok := findPhone("on 2019-11-19"); ok {
		t.Errorf("a date as phone %q", p)
	}
	if m, ok := findMoney("only 12 left, now EUR 49,90!"); !ok || m != "EUR 49,90" {
		t.Errorf("money %q", m)
	}
}

func TestSchemaFromInstruction(t *testing.T) {
	for in, want := range map[string]string{
		"the product name, its price and whether it is in stock": `{"name":["string","null"],"price":["number","null"],"in_stock":["boolean","null"]}`,
		"Extract the title, author and publication date":         `{"title":["string","null"],"author":["string","null"],"publication_date":["string","null"]}`,
		"get all the links":                 `{"links":"array"}`,
		"the rating; the number of reviews": `{"rating":["number","null"],"number_of_reviews":["number","null"]}`,
	} {
		raw := SchemaFromInstruction(in)
		sch, err := CompileSchema(raw)
		if err != nil {
			t.Fatalf("%q: %s: %v", in, raw, err)
		}
		got := map[string]any{}
		for _, p := range sch.Root.Props {
			if p.Node.Main() == "array" {
				got[p.Name] = "array"
			} else {
				got[p.Name] = p.Node.Types
			}
		}
		var w map[string]any
		json.Unmarshal([]byte(want), &w)
		if fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("%q → %s", in, raw)
		}
	}
	if SchemaFromInstruction("?!") != nil {
		t.Error("fields from nothing")
	}
}

func TestSchemaFromExample(t *testing.T) {
	raw, err := SchemaFromExample(json.RawMessage(`{"name":"x","price":1.5,"tags":["a"],"offers":[{"seller":"s","ok":true}],"extra":null}`))
	if err != nil {
		t.Fatal(err)
	}
	sch, err := CompileSchema(raw)
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	var names []string
	for _, p := range sch.Root.Props {
		names = append(names, p.Name+":"+p.Node.Main())
	}
	if strings.Join(names, " ") != "name:string price:number tags:array offers:array extra:" || sch.Root.Props[3].Node.Items.Props[1].Node.Main() != "boolean" {
		t.Errorf("%s", raw)
	}
}

func TestCompileSchemaErrors(t *testing.T) {
	for _, raw := range []string{`{"type":"strin"}`, `{"$ref":"https://example.com/s.json"}`, `{"$ref":"file:///etc/passwd"}`, `[1]`, `{"properties":{"a":{"minimum":"x"}}}`} {
		if _, err := CompileSchema(json.RawMessage(raw)); err == nil {
			t.Errorf("%s compiled", raw)
		} else if strings.Contains(err.Error(), schemaURL) {
			t.Errorf("%s: the error names our internal URL: %v", raw, err)
		}
	}
}

// A value the schema refuses is null, never returned wrong; the rest
// stays.
func TestValidateDropsToNull(t *testing.T) {
	sch, err := CompileSchema(json.RawMessage(`{"type":"object","properties":{"a":{"type":"string","maxLength":3},"b":{"type":"integer","minimum":0},"c":{"type":"array","items":{"type":"string","pattern":"^x"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := sch.Validate(map[string]any{"a": "toolong", "b": 5, "c": []any{"xa", "yb", "xc"}})
	if fmt.Sprint(got) != "map[a:<nil> b:5 c:[xa <nil> xc]]" {
		t.Errorf("%v", got)
	}
}

func readPage(t *testing.T, name string) string { return readPageB(t, name) }

func readPageB(t testing.TB, name string) string {
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(name, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(zr)
	}
	return string(b)
}

func extractJSON(t *testing.T, pageURL, html, schema string) string {
	t.Helper()
	plan, err := (&Request{URL: "http://x/", Schema: json.RawMessage(schema)}).Check()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(Deterministic(Page{URL: pageURL, HTML: html}, plan))
	return string(b)
}

// JSON-LD (@graph, arrays, nested types), microdata (nested items,
// repeated properties), RDFa Lite, OpenGraph, tables and definition
// lists, on one page.
func TestStructuredData(t *testing.T) {
	page := readPage(t, "structured.html")
	for _, c := range []struct{ schema, want string }{
		{`{"type":"object","properties":{"name":{"type":"string"},"start_date":{"type":"string","format":"date-time"},"price":{"type":"number"},"currency":{"type":"string"},"in_stock":{"type":"boolean"},"performers":{"type":"array","items":{"type":"string"}},"street_address":{"type":"string"}}}`,
			`{"currency":"EUR","in_stock":false,"name":"Spring Gala 2025","performers":["Ana Ruiz","Ben Okafor"],"price":35,"start_date":"2025-04-12T19:30:00+02:00","street_address":"1 Main St"}`},
		{`{"type":"object","properties":{"recipe":{"type":"object","properties":{"name":{"type":"string"},"author":{"type":"string"},"recipe_ingredient":{"type":"array","items":{"type":"string"}}}}}}`,
			`{"recipe":{"author":"Chef Lee","name":"Gala Punch","recipe_ingredient":["1 l apple juice","2 lemons","mint"]}}`},
		{`{"type":"object","properties":{"email":{"type":"string","format":"email"},"telephone":{"type":"string"},"url":{"type":"string","format":"uri"},"description":{"type":"string"},"doors_open":{"type":"string"},"dress_code":{"type":"string"}}}`,
			`{"description":"An evening of music at City Hall.","doors_open":"19:00","dress_code":"Smart casual","email":"arts@city.example","telephone":"+1 (555) 010-2030","url":"https://city.example/events/gala"}`},
		{`{"type":"array","items":{"type":"object","properties":{"seat":{"type":"string"},"price":{"type":"number"},"available":{"type":"boolean"}}}}`,
			`[{"available":false,"price":35,"seat":"Stalls"},{"available":true,"price":25,"seat":"Balcony"}]`},
	} {
		if got := extractJSON(t, "https://city.example/events/gala?x=1", page, c.schema); got != c.want {
			t.Errorf("schema %s\n got %s\nwant %s", c.schema, got, c.want)
		}
	}
}

// A real page (the article-extraction benchmark, MIT): its JSON-LD as
// published, and the same page without it or its <meta> tags, read
// from what a person sees.
func TestRealArticle(t *testing.T) {
	page := readPage(t, "aeb_232a43fb.html.gz")
	schema := `{"type":"object","properties":{"headline":{"type":"string"},"author":{"type":"string"},"date_published":{"type":"string","format":"date"}}}`
	want := `{"author":"Joe Rossignol","date_published":"2019-11-18","headline":"13-Inch MacBook Pro With Scissor Keyboard Expected in First Half of 2020"}`
	if got := extractJSON(t, "https://www.macrumors.com/2019/11/18/13-inch-macbook-pro-scissor-keyboard-2020/", page, schema); got != want {
		t.Errorf("with JSON-LD: %s", got)
	}
	if got := extractJSON(t, "https://www.macrumors.com/2019/11/18/13-inch-macbook-pro-scissor-keyboard-2020/", textscore.StripTags(page), schema); got != want {
		t.Errorf("visible only: %s", got)
	}
}

func TestDetect(t *testing.T) {
	for in, want := range map[string]Kind{
		"<html><body><p>x</p></body></html>": HTML,
		"<div>a</div><p>b</p>":               HTML,
		"# Title\n\nSome *text*.":            Markdown,
		"| a | b |\n|---|---|\n| 1 | 2 |":    Markdown,
		"see [the docs](http://x/)":          Markdown,
		"Name: Tent\nPrice: 5 < 6":           Text,
		"just words":                         Text,
	} {
		if got := Detect(in); got != want {
			t.Errorf("Detect(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestMerge(t *testing.T) {
	a := map[string]any{"title": nil, "items": []any{"a", "b"}, "o": map[string]any{"x": 1.0, "y": nil}}
	b := map[string]any{"title": "T", "items": []any{"b", "c"}, "o": map[string]any{"x": 2.0, "y": "Y"}}
	if got := fmt.Sprint(merge(a, b)); got != "map[items:[a b c] o:map[x:1 y:Y] title:T]" {
		t.Errorf("%s", got)
	}
}

func TestOrdered(t *testing.T) {
	sch, err := CompileSchema(json.RawMessage(`{"type":"object","properties":{"z":{"type":"object","properties":{"b":{},"a":{}}},"y":{"type":"array","items":{"type":"object","properties":{"d":{},"c":{}}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]any{"y": []any{map[string]any{"c": 1, "d": 2}}, "z": map[string]any{"a": 1, "b": 2}, "extra": true}
	b, _ := json.Marshal(sch.Ordered(data))
	if string(b) != `{"z":{"b":2,"a":1},"y":[{"d":2,"c":1}],"extra":true}` {
		t.Errorf("%s", b)
	}
}

// A real documentation page (Debian's postgresql-doc-15, when installed):
// a table's rows as records, columns matched to the properties by name,
// the headline from the page.
func TestRealTable(t *testing.T) {
	b, err := os.ReadFile("/usr/share/doc/postgresql-doc-15/html/datatype-numeric.html")
	if err != nil {
		t.Skip("postgresql-doc-15 is not installed:", err)
	}
	got := extractJSON(t, "https://www.postgresql.org/docs/15/datatype-numeric.html", string(b),
		`{"type":"object","properties":{"title":{"type":"string"},"types":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"storage_size":{"type":"integer"},"range":{"type":"string"}}}}}}`)
	var v struct {
		Title string
		Types []struct {
			Name        string
			StorageSize *int `json:"storage_size"`
			Range       string
		}
	}
	if err := json.Unmarshal([]byte(got), &v); err != nil {
		t.Fatal(err)
	}
	if v.Title != "8.1. Numeric Types" || len(v.Types) != 10 || v.Types[0].Name != "smallint" || *v.Types[0].StorageSize != 2 ||
		v.Types[0].Range != "-32768 to +32767" || v.Types[3].StorageSize != nil || v.Types[9].Name != "bigserial" {
		t.Errorf("%s", got)
	}
}

// Many bad values in a long list: every one is dropped, none survives.
func TestValidateManyBad(t *testing.T) {
	sch, err := CompileSchema(json.RawMessage(`{"type":"array","items":{"type":"object","properties":{"n":{"type":"integer","maximum":10}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	var list []any
	for i := range 300 {
		list = append(list, map[string]any{"n": i})
	}
	got := sch.Validate(list).([]any)
	for i, x := range got {
		n := x.(map[string]any)["n"]
		if (i <= 10 && n != i) || (i > 10 && n != nil) {
			t.Fatalf("item %d: %v", i, n)
		}
	}
}

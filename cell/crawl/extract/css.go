package extract

import (
	"context"
	"encoding/json"
	"strings"

	"golang.org/x/net/html"
)

// CSSSchema is a compiled json_css schema for callers outside the crawl
// server: the recipes' declarative kind (cell/recipe) selects its rows
// with the same language. Safe for concurrent use.
type CSSSchema struct{ s *cssSchema }

// CompileCSS compiles a json_css schema ({"name", "baseSelector",
// "fields", "baseFields"}); a missing name is "rows". Errors are
// *ParamError, with field paths under prefix ("json.rows.fields[1]...").
func CompileCSS(raw json.RawMessage, prefix string) (*CSSSchema, error) {
	p := params{prefix: prefix, m: map[string]json.RawMessage{}}
	if err := json.Unmarshal(raw, &p.m); err != nil || p.m == nil {
		return nil, badParams(strings.TrimSuffix(prefix, "."), "must be a JSON object")
	}
	if !p.has("name") {
		p.m["name"] = json.RawMessage(`"rows"`)
	}
	s, err := compileSchema(p)
	if err != nil {
		return nil, err
	}
	return &CSSSchema{s: s}, nil
}

// Items returns the schema's items found in doc, each a JSON object whose
// keys are in schema order (a field with no value and no default is left
// out).
func (c *CSSSchema) Items(ctx context.Context, doc *html.Node) ([]json.RawMessage, error) {
	text, err := c.s.extract(ctx, doc)
	if err != nil {
		return nil, err
	}
	var items []json.RawMessage
	if err := json.Unmarshal([]byte(text), &items); err != nil {
		return nil, err
	}
	return items, nil
}

// CompileCSSFields compiles a list of json_css field objects, to be
// applied to one element (a detail page's root) with Fields.
func CompileCSSFields(raw json.RawMessage, path string) (*CSSFields, error) {
	count := 0
	fs, err := compileFields(raw, path, 0, &count)
	if err != nil {
		return nil, err
	}
	return &CSSFields{fields: fs}, nil
}

// CSSFields are compiled json_css fields.
type CSSFields struct{ fields []cssField }

// Object is the fields' values under n, as a JSON object in field order.
func (c *CSSFields) Object(n *html.Node) (json.RawMessage, error) {
	obj := &object{}
	extractItem(n, c.fields, obj)
	return obj.MarshalJSON()
}

// Text is the text of n as json_css's text fields read it: whitespace
// collapsed, a space between block elements.
func Text(n *html.Node) string { return nodeText(n) }

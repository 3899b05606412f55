package extract

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/andybalholm/cascadia"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Bounds on a json_css schema, so that a request cannot make the server
// walk an unbounded tree of fields for every element of a page.
const (
	maxSchemaDepth  = 16
	maxSchemaFields = 1000
)

// cssSchema is a compiled json_css schema.
type cssSchema struct {
	name       string
	base       cascadia.Selector
	baseFields []cssField
	fields     []cssField
}

type cssField struct {
	name      string
	sel       cascadia.Selector // nil: the element itself
	typ       string
	attr      string
	pattern   *regexp.Regexp
	transform string
	def       json.RawMessage // nil: no default, the key is left out
	fields    []cssField
}

type jsonCSSStrategy struct{ schema *cssSchema }

func (jsonCSSStrategy) Name() string { return "json_css" }

func newJSONCSS(p params) (Strategy, error) {
	if !p.has("schema") {
		return nil, badParams(p.field("schema"), "is required")
	}
	sp, err := p.sub("schema")
	if err != nil {
		return nil, err
	}
	s, err := compileSchema(sp)
	if err != nil {
		return nil, err
	}
	return jsonCSSStrategy{schema: s}, nil
}

func compileSchema(p params) (*cssSchema, error) {
	name, _, err := p.str("name")
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(name) == "" {
		return nil, badParams(p.field("name"), "is required")
	}
	baseSel, _, err := p.str("baseSelector")
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(baseSel) == "" {
		return nil, badParams(p.field("baseSelector"), "is required")
	}
	base, err := cascadia.Compile(baseSel)
	if err != nil {
		return nil, badParams(p.field("baseSelector"), "invalid CSS selector %q: %v", baseSel, err)
	}
	s := &cssSchema{name: name, base: base}
	count := 0
	if !p.has("fields") {
		return nil, badParams(p.field("fields"), "is required")
	}
	if s.fields, err = compileFields(p.m["fields"], p.field("fields"), 0, &count); err != nil {
		return nil, err
	}
	if p.has("baseFields") {
		if s.baseFields, err = compileFields(p.m["baseFields"], p.field("baseFields"), 0, &count); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func compileFields(raw json.RawMessage, path string, depth int, count *int) ([]cssField, error) {
	if depth >= maxSchemaDepth {
		return nil, badParams(path, "nested deeper than %d levels", maxSchemaDepth)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badParams(path, "must be an array of field objects")
	}
	fields := make([]cssField, 0, len(items))
	for i, item := range items {
		*count++
		if *count > maxSchemaFields {
			return nil, badParams(path, "more than %d fields in the schema", maxSchemaFields)
		}
		fp := params{prefix: fmt.Sprintf("%s[%d].", path, i), m: map[string]json.RawMessage{}}
		if err := json.Unmarshal(item, &fp.m); err != nil || fp.m == nil {
			return nil, badParams(strings.TrimSuffix(fp.prefix, "."), "must be a JSON object")
		}
		f, err := compileField(fp, depth, count)
		if err != nil {
			return nil, err
		}
		fields = append(fields, f)
	}
	return fields, nil
}

func compileField(p params, depth int, count *int) (cssField, error) {
	var f cssField
	var err error
	if f.name, _, err = p.str("name"); err != nil {
		return f, err
	}
	if f.name == "" {
		return f, badParams(p.field("name"), "is required")
	}
	if f.typ, _, err = p.str("type"); err != nil {
		return f, err
	}
	sel, _, err := p.str("selector")
	if err != nil {
		return f, err
	}
	if strings.TrimSpace(sel) != "" {
		if f.sel, err = cascadia.Compile(sel); err != nil {
			return f, badParams(p.field("selector"), "invalid CSS selector %q: %v", sel, err)
		}
	}
	if p.has("default") {
		f.def = p.m["default"]
	}
	if f.transform, _, err = p.str("transform"); err != nil {
		return f, err
	}
	switch f.transform {
	case "", "lowercase", "uppercase", "strip":
	default:
		return f, badParams(p.field("transform"), "unknown transform %q (want lowercase, uppercase or strip)", f.transform)
	}
	switch f.typ {
	case "text", "html":
	case "attribute":
		if f.attr, _, err = p.str("attribute"); err != nil {
			return f, err
		}
		if f.attr == "" {
			return f, badParams(p.field("attribute"), "is required for type attribute")
		}
	case "regex":
		pat, _, err := p.str("pattern")
		if err != nil {
			return f, err
		}
		if pat == "" {
			return f, badParams(p.field("pattern"), "is required for type regex")
		}
		if f.pattern, err = regexp.Compile(pat); err != nil {
			return f, badParams(p.field("pattern"), "invalid regular expression (RE2 syntax): %v", err)
		}
	case "nested", "list", "nested_list":
		if !p.has("fields") {
			if f.typ == "list" {
				break // a list of the matches' texts
			}
			return f, badParams(p.field("fields"), "is required for type %s", f.typ)
		}
		if f.fields, err = compileFields(p.m["fields"], p.field("fields"), depth+1, count); err != nil {
			return f, err
		}
	case "computed":
		return f, badParams(p.field("type"), "computed fields are not supported (they evaluate Python expressions)")
	case "":
		return f, badParams(p.field("type"), "is required (text, attribute, html, regex, nested, list or nested_list)")
	default:
		return f, badParams(p.field("type"), "unknown type %q (want text, attribute, html, regex, nested, list or nested_list)", f.typ)
	}
	return f, nil
}

func (s jsonCSSStrategy) Extract(ctx context.Context, p Page) (string, error) {
	doc, err := html.Parse(strings.NewReader(p.HTML))
	if err != nil {
		return "", fmt.Errorf("parse html: %w", err)
	}
	return s.schema.extract(ctx, doc)
}

func (s *cssSchema) extract(ctx context.Context, doc *html.Node) (string, error) {
	items := []*object{}
	for i, n := range s.base.MatchAll(doc) {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return "", err
			}
		}
		item := &object{}
		for _, f := range s.baseFields {
			if v, ok := f.single(n); ok {
				item.set(f.name, v)
			}
		}
		extractItem(n, s.fields, item)
		if len(item.keys) > 0 {
			items = append(items, item)
		}
	}
	return marshal(items)
}

// extractItem adds the values of fields found under n to item; a field
// with no value and no default is left out, as Crawl4AI does.
func extractItem(n *html.Node, fields []cssField, item *object) {
	for _, f := range fields {
		if v, ok := f.value(n); ok {
			item.set(f.name, v)
		}
	}
}

func (f *cssField) value(n *html.Node) (any, bool) {
	switch f.typ {
	case "nested":
		el := n
		if f.sel != nil {
			el = cascadia.Query(n, f.sel)
		}
		obj := &object{}
		if el != nil {
			extractItem(el, f.fields, obj)
		}
		return obj, true
	case "list", "nested_list":
		els := []*html.Node{n}
		if f.sel != nil {
			els = f.sel.MatchAll(n)
		}
		if f.fields == nil {
			texts := make([]string, 0, len(els))
			for _, el := range els {
				texts = append(texts, applyTransform(nodeText(el), f.transform))
			}
			return texts, true
		}
		list := make([]*object, 0, len(els))
		for _, el := range els {
			obj := &object{}
			extractItem(el, f.fields, obj)
			list = append(list, obj)
		}
		return list, true
	}
	return f.single(n)
}

// single extracts a text, attribute, html or regex field from the first
// match of its selector under n (or n itself without selector).
func (f *cssField) single(n *html.Node) (any, bool) {
	el := n
	if f.sel != nil {
		el = cascadia.Query(n, f.sel)
	}
	if el == nil {
		return f.fallback()
	}
	var (
		v  string
		ok = true
	)
	switch f.typ {
	case "text":
		v = nodeText(el)
	case "attribute":
		v, ok = attr(el, f.attr)
	case "html":
		var b bytes.Buffer
		if err := html.Render(&b, el); err != nil {
			return f.fallback()
		}
		v = b.String()
	case "regex":
		m := f.pattern.FindStringSubmatch(nodeText(el))
		switch {
		case m == nil:
			ok = false
		case len(m) > 1:
			v = m[1]
		default:
			v = m[0]
		}
	default:
		return f.fallback()
	}
	if !ok {
		return f.fallback()
	}
	return applyTransform(v, f.transform), true
}

func (f *cssField) fallback() (any, bool) {
	if f.def == nil {
		return nil, false
	}
	return f.def, true
}

func applyTransform(s, t string) string {
	switch t {
	case "lowercase":
		return strings.ToLower(s)
	case "uppercase":
		return strings.ToUpper(s)
	case "strip":
		return strings.TrimSpace(s)
	}
	return s
}

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Namespace == "" && strings.EqualFold(a.Key, key) {
			return a.Val, true
		}
	}
	return "", false
}

// nodeText is the text of n with whitespace collapsed and a space between
// block elements (Crawl4AI's get_text(strip=True) glues "<li>a</li><li>b</li>"
// into "ab"; this gives "a b").
func nodeText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		switch n.Type {
		case html.TextNode:
			b.WriteString(n.Data)
			return
		case html.ElementNode:
			switch n.DataAtom {
			case atom.Script, atom.Style, atom.Noscript, atom.Template:
				return
			}
		}
		block := n.Type == html.ElementNode && blockElems[n.DataAtom]
		if block {
			b.WriteByte(' ')
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
		if block {
			b.WriteByte(' ')
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

var blockElems = map[atom.Atom]bool{
	atom.Address: true, atom.Article: true, atom.Aside: true, atom.Blockquote: true,
	atom.Br: true, atom.Dd: true, atom.Div: true, atom.Dl: true, atom.Dt: true,
	atom.Figcaption: true, atom.Figure: true, atom.Footer: true, atom.Form: true,
	atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true,
	atom.Header: true, atom.Hr: true, atom.Li: true, atom.Main: true, atom.Nav: true,
	atom.Ol: true, atom.P: true, atom.Pre: true, atom.Section: true, atom.Table: true,
	atom.Td: true, atom.Th: true, atom.Tr: true, atom.Ul: true, atom.Option: true,
}

// object is a JSON object that keeps its keys in schema order.
type object struct {
	keys []string
	vals []any
}

func (o *object) set(k string, v any) {
	for i, key := range o.keys {
		if key == k {
			o.vals[i] = v
			return
		}
	}
	o.keys = append(o.keys, k)
	o.vals = append(o.vals, v)
}

func (o *object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := encodeJSON(k)
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		vb, err := encodeJSON(o.vals[i])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

var (
	_ Strategy       = jsonCSSStrategy{}
	_ json.Marshaler = (*object)(nil)
)

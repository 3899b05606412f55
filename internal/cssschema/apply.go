package cssschema

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"github.com/andybalholm/cascadia"
	"golang.org/x/net/html"

	"github.com/trawlhq/trawl/internal/htmlread"
)

// Extract is the schema's items in doc as a JSON array, one object per
// baseSelector match, keys in schema order. A field with no value and no
// default is left out, and an element that yields no key at all is
// skipped, as in Crawl4AI.
func (s *Schema) Extract(ctx context.Context, doc *html.Node) ([]byte, error) {
	items, err := s.items(ctx, doc)
	if err != nil {
		return nil, err
	}
	return Encode(items)
}

// Items is what Extract returns, an object a value.
func (s *Schema) Items(ctx context.Context, doc *html.Node) ([]json.RawMessage, error) {
	items, err := s.items(ctx, doc)
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, 0, len(items))
	for _, it := range items {
		b, err := it.MarshalJSON()
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func (s *Schema) items(ctx context.Context, doc *html.Node) ([]*ordered, error) {
	items := []*ordered{}
	for i, n := range s.base.MatchAll(doc) {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		item := &ordered{}
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
	return items, nil
}

// Object is the fields' values under n, as a JSON object in field order.
func (c *Fields) Object(n *html.Node) (json.RawMessage, error) {
	obj := &ordered{}
	extractItem(n, c.fields, obj)
	return obj.MarshalJSON()
}

// extractItem adds the values of fields found under n to item; a field
// with no value and no default is left out, as Crawl4AI does.
func extractItem(n *html.Node, fields []field, item *ordered) {
	for _, f := range fields {
		if v, ok := f.value(n); ok {
			item.set(f.name, v)
		}
	}
}

func (f *field) value(n *html.Node) (any, bool) {
	switch f.typ {
	case "nested":
		el := n
		if f.sel != nil {
			el = cascadia.Query(n, f.sel)
		}
		obj := &ordered{}
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
				texts = append(texts, applyTransform(htmlread.FieldText(el), f.transform))
			}
			return texts, true
		}
		list := make([]*ordered, 0, len(els))
		for _, el := range els {
			obj := &ordered{}
			extractItem(el, f.fields, obj)
			list = append(list, obj)
		}
		return list, true
	}
	return f.single(n)
}

// single extracts a text, attribute, html or regex field from the first
// match of its selector under n (or n itself without selector).
func (f *field) single(n *html.Node) (any, bool) {
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
		v = htmlread.FieldText(el)
	case "attribute":
		v, ok = attr(el, f.attr)
	case "html":
		var b bytes.Buffer
		if err := html.Render(&b, el); err != nil {
			return f.fallback()
		}
		v = b.String()
	case "regex":
		m := f.pattern.FindStringSubmatch(htmlread.FieldText(el))
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

func (f *field) fallback() (any, bool) {
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

// attr is an attribute's value, its name matched without regard to case.
func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Namespace == "" && strings.EqualFold(a.Key, key) {
			return a.Val, true
		}
	}
	return "", false
}

// ordered is a JSON object that keeps its keys in schema order.
type ordered struct {
	keys []string
	vals []any
}

func (o *ordered) set(k string, v any) {
	for i, key := range o.keys {
		if key == k {
			o.vals[i] = v
			return
		}
	}
	o.keys = append(o.keys, k)
	o.vals = append(o.vals, v)
}

func (o *ordered) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := Encode(k)
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		vb, err := Encode(o.vals[i])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Encode is json.Marshal without HTML escaping: extracted content is read
// by json.loads, not embedded in a page, and "<div>" reads better than
// "\u003cdiv\u003e".
func Encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

var _ json.Marshaler = (*ordered)(nil)

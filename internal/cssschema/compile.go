package cssschema

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/andybalholm/cascadia"
)

// Bounds on a schema, so that a request cannot make the server walk an
// unbounded tree of fields for every element of a page.
const (
	maxSchemaDepth  = 16
	maxSchemaFields = 1000
)

// Error is a problem with a schema: a missing or invalid field.
type Error struct {
	// Field is the path of the offending field, e.g.
	// "params.schema.fields[2].selector".
	Field string
	// Reason says what is wrong with it.
	Reason string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

func bad(field, format string, args ...any) *Error {
	return &Error{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Schema is a compiled schema.
type Schema struct {
	name       string
	base       cascadia.Selector
	baseFields []field
	fields     []field
}

// Fields are compiled fields, applied to one element (Object).
type Fields struct{ fields []field }

type field struct {
	name      string
	sel       cascadia.Selector // nil: the element itself
	typ       string
	attr      string
	pattern   *regexp.Regexp
	transform string
	def       json.RawMessage // nil: no default, the key is left out
	fields    []field
}

// object is a decoded JSON object whose getters name the field in their
// errors. Unknown keys are ignored (Crawl4AI clients send options this
// server does not implement).
type object struct {
	prefix string
	m      map[string]json.RawMessage
}

func decodeObject(raw json.RawMessage, prefix string) (object, error) {
	o := object{prefix: prefix, m: map[string]json.RawMessage{}}
	if err := json.Unmarshal(raw, &o.m); err != nil || o.m == nil {
		return o, bad(strings.TrimSuffix(prefix, "."), "must be a JSON object")
	}
	return o, nil
}

func (o object) has(k string) bool {
	v, ok := o.m[k]
	return ok && strings.TrimSpace(string(v)) != "null"
}

func (o object) path(k string) string { return o.prefix + k }

// text is a string-valued key's value ("" when it is absent or null).
func (o object) text(k string) (string, error) {
	var s string
	if o.has(k) && json.Unmarshal(o.m[k], &s) != nil {
		return "", bad(o.path(k), "must be a string")
	}
	return s, nil
}

// Selector compiles a CSS selector; the error quotes it.
func Selector(css string) (cascadia.Selector, error) {
	s, err := cascadia.Compile(css)
	if err != nil {
		return nil, fmt.Errorf("invalid CSS selector %q: %v", css, err)
	}
	return s, nil
}

// Compile compiles a schema object. Errors are *Error, with field paths
// under prefix ("params.schema.fields[1].selector"). defaultName is the
// schema's name when it has none; "" makes the name required.
func Compile(raw json.RawMessage, prefix, defaultName string) (*Schema, error) {
	p, err := decodeObject(raw, prefix)
	if err != nil {
		return nil, err
	}
	if !p.has("name") && defaultName != "" {
		p.m["name"], _ = json.Marshal(defaultName)
	}
	name, err := p.text("name")
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(name) == "" {
		return nil, bad(p.path("name"), "is required")
	}
	baseSel, err := p.text("baseSelector")
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(baseSel) == "" {
		return nil, bad(p.path("baseSelector"), "is required")
	}
	base, err := Selector(baseSel)
	if err != nil {
		return nil, bad(p.path("baseSelector"), "%v", err)
	}
	s := &Schema{name: name, base: base}
	count := 0
	if !p.has("fields") {
		return nil, bad(p.path("fields"), "is required")
	}
	if s.fields, err = compileFields(p.m["fields"], p.path("fields"), 0, &count); err != nil {
		return nil, err
	}
	if p.has("baseFields") {
		if s.baseFields, err = compileFields(p.m["baseFields"], p.path("baseFields"), 0, &count); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// CompileFields compiles a list of field objects, to be applied to one
// element (a detail page's root) with Object. Errors are *Error, with
// field paths under path.
func CompileFields(raw json.RawMessage, path string) (*Fields, error) {
	count := 0
	fs, err := compileFields(raw, path, 0, &count)
	if err != nil {
		return nil, err
	}
	return &Fields{fields: fs}, nil
}

func compileFields(raw json.RawMessage, path string, depth int, count *int) ([]field, error) {
	if depth >= maxSchemaDepth {
		return nil, bad(path, "nested deeper than %d levels", maxSchemaDepth)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, bad(path, "must be an array of field objects")
	}
	fields := make([]field, 0, len(items))
	for i, item := range items {
		*count++
		if *count > maxSchemaFields {
			return nil, bad(path, "more than %d fields in the schema", maxSchemaFields)
		}
		fp, err := decodeObject(item, fmt.Sprintf("%s[%d].", path, i))
		if err != nil {
			return nil, err
		}
		f, err := compileField(fp, depth, count)
		if err != nil {
			return nil, err
		}
		fields = append(fields, f)
	}
	return fields, nil
}

func compileField(p object, depth int, count *int) (field, error) {
	var f field
	var err error
	if f.name, err = p.text("name"); err != nil {
		return f, err
	}
	if f.name == "" {
		return f, bad(p.path("name"), "is required")
	}
	if f.typ, err = p.text("type"); err != nil {
		return f, err
	}
	sel, err := p.text("selector")
	if err != nil {
		return f, err
	}
	if strings.TrimSpace(sel) != "" {
		if f.sel, err = Selector(sel); err != nil {
			return f, bad(p.path("selector"), "%v", err)
		}
	}
	if p.has("default") {
		f.def = p.m["default"]
	}
	if f.transform, err = p.text("transform"); err != nil {
		return f, err
	}
	switch f.transform {
	case "", "lowercase", "uppercase", "strip":
	default:
		return f, bad(p.path("transform"), "unknown transform %q (want lowercase, uppercase or strip)", f.transform)
	}
	return f, compileType(p, &f, depth, count)
}

// compileType reads what a field's type needs: its attribute, pattern or
// sub-fields.
func compileType(p object, f *field, depth int, count *int) error {
	var err error
	switch f.typ {
	case "text", "html":
	case "attribute":
		if f.attr, err = p.text("attribute"); err != nil {
			return err
		}
		if f.attr == "" {
			return bad(p.path("attribute"), "is required for type attribute")
		}
	case "regex":
		pat, err := p.text("pattern")
		if err != nil {
			return err
		}
		if pat == "" {
			return bad(p.path("pattern"), "is required for type regex")
		}
		if f.pattern, err = regexp.Compile(pat); err != nil {
			return bad(p.path("pattern"), "invalid regular expression (RE2 syntax): %v", err)
		}
	case "nested", "list", "nested_list":
		if !p.has("fields") {
			if f.typ == "list" {
				break // a list of the matches' texts
			}
			return bad(p.path("fields"), "is required for type %s", f.typ)
		}
		if f.fields, err = compileFields(p.m["fields"], p.path("fields"), depth+1, count); err != nil {
			return err
		}
	case "computed":
		return bad(p.path("type"), "computed fields are not supported (they evaluate Python expressions)")
	case "":
		return bad(p.path("type"), "is required (text, attribute, html, regex, nested, list or nested_list)")
	default:
		return bad(p.path("type"), "unknown type %q (want text, attribute, html, regex, nested, list or nested_list)", f.typ)
	}
	return nil
}

var _ error = (*Error)(nil)

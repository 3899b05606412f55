package extract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schema is a compiled request schema: the validator of the JSON Schema
// library, and the simple view of it the extractors fill (types,
// properties in the order the caller wrote them, items).
type Schema struct {
	Root *Node
	// Raw is the schema as the caller sent it (compact), for the model.
	Raw json.RawMessage
	sch *jsonschema.Schema
}

// Node is one schema of the simple view. What it does not model ($ref,
// allOf, conditionals) is left to validation.
type Node struct {
	Types       []string // "object", "array", "string", "number", "integer", "boolean", "null"
	Props       []Prop   // object properties, in the schema's order
	Items       *Node    // array items
	Enum        []any
	Format      string // date, date-time, email, uri, ...
	Description string
}

// Prop is a named property of an object node.
type Prop struct {
	Name string
	Node *Node
}

// Is reports whether t is one of n's types.
func (n *Node) Is(t string) bool {
	if n == nil {
		return false
	}
	for _, x := range n.Types {
		if x == t || (t == "number" && x == "integer") {
			return true
		}
	}
	return false
}

// Main is n's main type: the first that is not null ("" when untyped).
func (n *Node) Main() string {
	if n == nil {
		return ""
	}
	for _, t := range n.Types {
		if t != "null" {
			return t
		}
	}
	return ""
}

// SchemaError is a schema that does not compile; Error is the JSON
// Schema library's own message, which says where.
type SchemaError struct{ Err error }

func (e *SchemaError) Error() string { return "schema does not compile: " + e.Err.Error() }
func (e *SchemaError) Unwrap() error { return e.Err }

const schemaURL = "urn:trawl:extract:schema.json"

// CompileSchema compiles a JSON Schema (draft 2020-12 unless it says
// otherwise). It loads nothing: a $ref outside the schema itself fails.
func CompileSchema(raw json.RawMessage) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, &SchemaError{Err: fmt.Errorf("not JSON: %w", err)}
	}
	if _, ok := doc.(map[string]any); !ok {
		if _, isBool := doc.(bool); !isBool {
			return nil, &SchemaError{Err: errors.New("a schema is a JSON object")}
		}
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no file, no network
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, &SchemaError{Err: err}
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, &SchemaError{Err: errors.New(strings.ReplaceAll(compileMessage(err), schemaURL, "schema"))}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, &SchemaError{Err: err}
	}
	root, err := simpleNode(buf.Bytes())
	if err != nil {
		return nil, &SchemaError{Err: err}
	}
	return &Schema{Root: root, Raw: buf.Bytes(), sch: sch}, nil
}

// compileMessage is the library's message, with the places a schema
// that breaks the metaschema breaks it ("at '/properties/a/type': value
// must be one of ...") rather than its first line only.
func compileMessage(err error) string {
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if !errors.As(err, &sve) || !errors.As(sve.Err, &ve) {
		return err.Error()
	}
	lines := strings.Split(fmt.Sprintf("%v", ve), "\n")
	indent := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
	var leaves []string
	for i, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), "- at") {
			continue
		}
		if i+1 < len(lines) && indent(lines[i+1]) > indent(l) {
			continue
		}
		leaves = append(leaves, strings.TrimPrefix(strings.TrimSpace(l), "- "))
		if len(leaves) == 3 {
			break
		}
	}
	if len(leaves) == 0 {
		return err.Error()
	}
	return "not a valid JSON Schema: " + strings.Join(leaves, "; ")
}

// simpleNode reads the simple view of a schema, keeping property order.
func simpleNode(raw json.RawMessage) (*Node, error) {
	n := &Node{}
	if len(raw) == 0 || raw[0] != '{' {
		return n, nil // true/false schemas
	}
	keys, vals, err := orderedObject(raw)
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		v := vals[i]
		switch k {
		case "type":
			var one string
			var many []string
			if json.Unmarshal(v, &one) == nil {
				n.Types = []string{one}
			} else if json.Unmarshal(v, &many) == nil {
				n.Types = many
			}
		case "properties":
			pk, pv, err := orderedObject(v)
			if err != nil {
				return nil, err
			}
			for j, name := range pk {
				child, err := simpleNode(pv[j])
				if err != nil {
					return nil, err
				}
				n.Props = append(n.Props, Prop{Name: name, Node: child})
			}
		case "items":
			child, err := simpleNode(v)
			if err != nil {
				return nil, err
			}
			n.Items = child
		case "enum":
			_ = json.Unmarshal(v, &n.Enum)
		case "const":
			var c any
			if json.Unmarshal(v, &c) == nil {
				n.Enum = []any{c}
			}
		case "format":
			_ = json.Unmarshal(v, &n.Format)
		case "description":
			_ = json.Unmarshal(v, &n.Description)
		case "anyOf", "oneOf":
			// ["string","null"]-style unions: take the types of the branches.
			var branches []json.RawMessage
			if json.Unmarshal(v, &branches) == nil {
				for _, b := range branches {
					bn, err := simpleNode(b)
					if err != nil {
						return nil, err
					}
					n.Types = append(n.Types, bn.Types...)
					if bn.Items != nil && n.Items == nil {
						n.Items = bn.Items
					}
					if len(bn.Props) > 0 && len(n.Props) == 0 {
						n.Props = bn.Props
					}
					if n.Format == "" {
						n.Format = bn.Format
					}
				}
			}
		}
	}
	if len(n.Types) == 0 {
		switch {
		case len(n.Props) > 0:
			n.Types = []string{"object"}
		case n.Items != nil:
			n.Types = []string{"array"}
		}
	}
	return n, nil
}

// orderedObject decodes a JSON object's keys in order, with their raw
// values.
func orderedObject(raw json.RawMessage) ([]string, []json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	t, err := dec.Token()
	if err != nil {
		return nil, nil, err
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return nil, nil, errors.New("want a JSON object")
	}
	var keys []string
	var vals []json.RawMessage
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		keys = append(keys, k)
		vals = append(vals, v)
	}
	return keys, vals, nil
}

// Validate drops to null every value of data that the schema refuses,
// the deepest failing values of each round first, until the schema
// accepts it or nothing more can be dropped; it returns the result. A
// value that fails is never returned.
func (s *Schema) Validate(data any) any {
	for range 64 {
		inst, err := roundTrip(data)
		if err != nil {
			return nil
		}
		verr := s.sch.Validate(inst)
		if verr == nil {
			return data
		}
		var ve *jsonschema.ValidationError
		if !errors.As(verr, &ve) {
			return nil
		}
		var locs [][]string
		leaves(ve, &locs)
		changed := false
		// Every failing leaf at once, deepest first: a bad value costs
		// only itself (its parent is looked at again in the next round).
		sort.SliceStable(locs, func(i, j int) bool { return len(locs[i]) > len(locs[j]) })
		depth := -1
		for _, loc := range locs {
			if len(loc) == 0 || (depth >= 0 && len(loc) < depth) {
				continue
			}
			if setNull(data, loc) {
				changed = true
				depth = len(loc)
			}
		}
		if !changed {
			// Only the root, or nulls the schema refuses, are left: a
			// root that fails by itself is null; nulls stay (they say
			// "not on the page").
			if rootOnly(locs) {
				return nil
			}
			return data
		}
	}
	return data
}

// Problem says what in data the schema refuses, leaving out nulls (a
// null says "not on the page"); "" when nothing else is wrong.
func (s *Schema) Problem(data any) string {
	inst, err := roundTrip(data)
	if err != nil {
		return err.Error()
	}
	verr := s.sch.Validate(inst)
	if verr == nil {
		return ""
	}
	var ve *jsonschema.ValidationError
	if !errors.As(verr, &ve) {
		return verr.Error()
	}
	var bad []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		if v, ok := at(data, e.InstanceLocation); ok && v == nil {
			return
		}
		bad = append(bad, "/"+strings.Join(e.InstanceLocation, "/")+": "+e.Error())
	}
	walk(ve)
	return strings.Join(bad, "; ")
}

// at is the value at loc in data.
func at(data any, loc []string) (any, bool) {
	cur := data
	for _, k := range loc {
		switch v := cur.(type) {
		case map[string]any:
			x, ok := v[k]
			if !ok {
				return nil, false
			}
			cur = x
		case []any:
			n, err := strconv.Atoi(k)
			if err != nil || n < 0 || n >= len(v) {
				return nil, false
			}
			cur = v[n]
		default:
			return nil, false
		}
	}
	return cur, true
}

func rootOnly(locs [][]string) bool {
	for _, l := range locs {
		if len(l) > 0 {
			return false
		}
	}
	return true
}

func leaves(ve *jsonschema.ValidationError, out *[][]string) {
	if len(ve.Causes) == 0 {
		*out = append(*out, ve.InstanceLocation)
		return
	}
	for _, c := range ve.Causes {
		leaves(c, out)
	}
}

// setNull sets the value at loc to nil; false when it is nil already or
// not there.
func setNull(data any, loc []string) bool {
	cur := data
	for i, k := range loc {
		last := i == len(loc)-1
		switch v := cur.(type) {
		case map[string]any:
			x, ok := v[k]
			if !ok {
				return false
			}
			if last {
				if x == nil {
					return false
				}
				v[k] = nil
				return true
			}
			cur = x
		case []any:
			n, err := strconv.Atoi(k)
			if err != nil || n < 0 || n >= len(v) {
				return false
			}
			if last {
				if v[n] == nil {
					return false
				}
				v[n] = nil
				return true
			}
			cur = v[n]
		default:
			return false
		}
	}
	return false
}

// roundTrip turns data into the form the validator reads (json.Number).
func roundTrip(data any) (any, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// Ordered returns data with its objects' members in the schema's order
// (properties as the caller wrote them, then any others sorted), for
// JSON answers that read like the schema.
func (s *Schema) Ordered(data any) any { return ordered(data, s.Root) }

func ordered(data any, n *Node) any {
	switch v := data.(type) {
	case map[string]any:
		o := &jsonObject{vals: v}
		seen := map[string]bool{}
		if n != nil {
			for _, p := range n.Props {
				if _, ok := v[p.Name]; ok && !seen[p.Name] {
					seen[p.Name] = true
					o.keys = append(o.keys, p.Name)
					v[p.Name] = ordered(v[p.Name], p.Node)
				}
			}
		}
		var rest []string
		for k := range v {
			if !seen[k] {
				rest = append(rest, k)
			}
		}
		sort.Strings(rest)
		o.keys = append(o.keys, rest...)
		return o
	case []any:
		var items *Node
		if n != nil {
			items = n.Items
		}
		for i := range v {
			v[i] = ordered(v[i], items)
		}
		return v
	}
	return data
}

// jsonObject is a JSON object whose members keep an order.
type jsonObject struct {
	keys []string
	vals map[string]any
}

func (o *jsonObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		vb, err := json.Marshal(o.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

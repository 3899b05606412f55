package crawl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Crawl4AI's current clients (0.5 to 0.7) send configurations as their
// objects serialize: {"type": "CrawlerRunConfig", "params": {...}}, plain
// dictionaries as {"type": "dict", "value": {...}} (or bare), enums as
// {"type": "CacheMode", "params": "bypass"} (or the bare value). Crawl4AI
// rebuilds them by looking the type name up in its package; we parse them
// against an allow-list: a type not on it is a 400 naming it, and no name
// ever selects code.

// c4aObject is a typed configuration object after parsing.
type c4aObject struct {
	Type   string
	Params map[string]any // values: nil, bool, float64, string, []any, map[string]any, *c4aObject, c4aEnum
}

// c4aEnum is an enum member given as {"type": Enum, "params": value}.
type c4aEnum struct{ Type, Value string }

// c4aTypes are the configuration types the server builds. What each does
// is said where it is read (c4a_plan.go).
var c4aTypes = map[string]bool{
	"BrowserConfig": true, "CrawlerRunConfig": true, "LLMConfig": true, "ProxyConfig": true,
	"DefaultMarkdownGenerator": true, "PruningContentFilter": true, "BM25ContentFilter": true,
	"JsonCssExtractionStrategy": true, "LLMExtractionStrategy": true, "CosineStrategy": true,
	"NoExtractionStrategy": true, "LXMLWebScrapingStrategy": true, "WebScrapingStrategy": true,
	"RegexChunking":        true,
	"BFSDeepCrawlStrategy": true, "DFSDeepCrawlStrategy": true, "BestFirstCrawlingStrategy": true,
	"FilterChain": true, "DomainFilter": true, "URLPatternFilter": true, "ContentTypeFilter": true,
	"CompositeScorer": true, "KeywordRelevanceScorer": true, "PathDepthScorer": true,
	// Accepted and without effect: what Crawl4AI's client serializes into
	// every CrawlerRunConfig (its table extractor) and every deep-crawl
	// strategy (its Python logger).
	"DefaultTableExtraction": true, "NoTableExtraction": true, "Logger": true,
}

// c4aEnums are the enums, with their values (Crawl4AI's .value strings).
var c4aEnums = map[string][]string{
	"CacheMode": {"enabled", "disabled", "read_only", "write_only", "bypass"},
}

// maxConfigDepth bounds the nesting of a configuration.
const maxConfigDepth = 32

func c4aTypeList() string {
	var names []string
	for n := range c4aTypes {
		names = append(names, n)
	}
	for n := range c4aEnums {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// decodeAny decodes JSON keeping numbers as float64 and objects as maps.
func decodeAny(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// parseC4A rebuilds a serialized configuration value. An object with a
// string "type" and a "params" key is a typed object, which must be on
// the allow-list; {"type": "dict", "value": {...}} is a dictionary; any
// other object (a JSON schema, a json_css field with its own "type") is a
// dictionary whose values are parsed in turn, as Crawl4AI does.
func parseC4A(v any, path string, depth int) (any, error) {
	if depth > maxConfigDepth {
		return nil, bad("%s: nested deeper than %d levels", path, maxConfigDepth)
	}
	switch x := v.(type) {
	case map[string]any:
		if t, ok := x["type"].(string); ok {
			if val, ok := x["value"]; ok && t == "dict" {
				m, ok := val.(map[string]any)
				if !ok {
					return nil, bad("%s: a {\"type\": \"dict\"} needs an object as its value", path)
				}
				return parseMap(m, path, depth)
			}
			if p, ok := x["params"]; ok {
				return parseTyped(t, p, path, depth)
			}
		}
		return parseMap(x, path, depth)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			pe, err := parseC4A(e, fmt.Sprintf("%s[%d]", path, i), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = pe
		}
		return out, nil
	}
	return v, nil
}

func parseMap(m map[string]any, path string, depth int) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, e := range m {
		pe, err := parseC4A(e, path+"."+k, depth+1)
		if err != nil {
			return nil, err
		}
		out[k] = pe
	}
	return out, nil
}

func parseTyped(t string, p any, path string, depth int) (any, error) {
	if vals, ok := c4aEnums[t]; ok {
		s, _ := p.(string)
		for _, v := range vals {
			if strings.EqualFold(s, v) {
				return c4aEnum{Type: t, Value: v}, nil
			}
		}
		return nil, bad("%s: %v is not a %s (want one of %s)", path, p, t, strings.Join(vals, ", "))
	}
	if !c4aTypes[t] {
		return nil, bad("%s: unknown type %q: this server builds only %s", path, t, c4aTypeList())
	}
	obj := &c4aObject{Type: t, Params: map[string]any{}}
	if p == nil {
		return obj, nil
	}
	m, ok := p.(map[string]any)
	if !ok {
		return nil, bad("%s: the params of %s must be an object", path, t)
	}
	pm, err := parseMap(m, path+"."+t, depth)
	if err != nil {
		return nil, err
	}
	obj.Params = pm
	return obj, nil
}

// parseConfig reads browser_config or crawler_config: a typed object of
// the wanted type, or a plain object of its params (Crawl4AI's
// from_kwargs), or nothing.
func parseConfig(raw json.RawMessage, field, want string) (*c4aObject, error) {
	v, err := decodeAny(raw)
	if err != nil {
		return nil, bad("%s: %v", field, err)
	}
	if v == nil {
		return &c4aObject{Type: want, Params: map[string]any{}}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, bad("%s must be an object ({\"type\": %q, \"params\": {...}})", field, want)
	}
	pv, err := parseC4A(m, field, 0)
	if err != nil {
		return nil, err
	}
	switch o := pv.(type) {
	case *c4aObject:
		if o.Type != want {
			return nil, bad("%s: want type %q, got %q", field, want, o.Type)
		}
		return o, nil
	case map[string]any:
		return &c4aObject{Type: want, Params: o}, nil
	}
	return nil, bad("%s must be an object", field)
}

// Typed getters of a c4aObject's params: each names the field in its
// error. A missing or null param gives the zero value and false.

func (o *c4aObject) field(k string) string { return o.Type + "." + k }

func (o *c4aObject) str(k string) (string, bool, error) {
	v, ok := o.Params[k]
	if !ok || v == nil {
		return "", false, nil
	}
	switch x := v.(type) {
	case string:
		return x, true, nil
	case c4aEnum:
		return x.Value, true, nil
	}
	return "", false, bad("%s must be a string", o.field(k))
}

func (o *c4aObject) boolean(k string) (bool, error) {
	v, ok := o.Params[k]
	if !ok || v == nil {
		return false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, bad("%s must be true or false", o.field(k))
	}
	return b, nil
}

func (o *c4aObject) num(k string) (float64, bool, error) {
	v, ok := o.Params[k]
	if !ok || v == nil {
		return 0, false, nil
	}
	f, ok := v.(float64)
	if !ok {
		return 0, false, bad("%s must be a number", o.field(k))
	}
	return f, true, nil
}

func (o *c4aObject) strings(k string) ([]string, error) {
	v, ok := o.Params[k]
	if !ok || v == nil {
		return nil, nil
	}
	switch x := v.(type) {
	case string:
		return []string{x}, nil
	case []any:
		out := make([]string, 0, len(x))
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, bad("%s[%d] must be a string", o.field(k), i)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, bad("%s must be a string or a list of strings", o.field(k))
}

// object is a nested typed object, which must be one of types.
func (o *c4aObject) object(k string, types ...string) (*c4aObject, error) {
	v, ok := o.Params[k]
	if !ok || v == nil {
		return nil, nil
	}
	obj, ok := v.(*c4aObject)
	if !ok {
		return nil, bad("%s must be a typed object ({\"type\": one of %s, \"params\": {...}})", o.field(k), strings.Join(types, ", "))
	}
	for _, t := range types {
		if obj.Type == t {
			return obj, nil
		}
	}
	return nil, bad("%s: a %s is not accepted here (want one of %s)", o.field(k), obj.Type, strings.Join(types, ", "))
}

// objects is a list of typed objects, each one of types.
func (o *c4aObject) objects(k string, types ...string) ([]*c4aObject, error) {
	v, ok := o.Params[k]
	if !ok || v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, bad("%s must be a list", o.field(k))
	}
	var out []*c4aObject
	for i, e := range list {
		tmp := &c4aObject{Type: o.Type, Params: map[string]any{fmt.Sprintf("%s[%d]", k, i): e}}
		obj, err := tmp.object(fmt.Sprintf("%s[%d]", k, i), types...)
		if err != nil {
			return nil, err
		}
		if obj != nil {
			out = append(out, obj)
		}
	}
	return out, nil
}

// plainJSON turns a parsed value back into JSON (a schema, a dictionary);
// typed objects inside are refused.
func plainJSON(v any, field string) (json.RawMessage, error) {
	var conv func(any) (any, error)
	conv = func(v any) (any, error) {
		switch x := v.(type) {
		case *c4aObject:
			return nil, bad("%s: a %s cannot appear inside a plain value", field, x.Type)
		case c4aEnum:
			return x.Value, nil
		case map[string]any:
			out := map[string]any{}
			for k, e := range x {
				c, err := conv(e)
				if err != nil {
					return nil, err
				}
				out[k] = c
			}
			return out, nil
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				c, err := conv(e)
				if err != nil {
					return nil, err
				}
				out[i] = c
			}
			return out, nil
		}
		return v, nil
	}
	c, err := conv(v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(c)
}

package htmlread

import (
	"bytes"
	"encoding/json"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// IsJSONLD reports a <script type="application/ld+json">.
func IsJSONLD(n *html.Node) bool {
	return n.Type == html.ElementNode && n.DataAtom == atom.Script &&
		strings.EqualFold(strings.TrimSpace(attr(n, "type")), "application/ld+json")
}

// jsonLDWrappers are what some CMSs wrap a JSON-LD script's JSON in.
var jsonLDWrappers = [][2]string{{"<!--", "-->"}, {"<![CDATA[", "]]>"}, {"//<![CDATA[", "//]]>"}}

// scriptText is the raw text of a script, trimmed.
func scriptText(n *html.Node) string {
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	}
	return strings.TrimSpace(b.String())
}

// unwrapJSONLD removes an HTML comment or CDATA wrapper from a script's
// text; the JSON-LD is compacted, ok false if it is not valid JSON.
func unwrapJSONLD(raw string) (json.RawMessage, bool) {
	for _, w := range jsonLDWrappers {
		if strings.HasPrefix(raw, w[0]) && strings.HasSuffix(raw, w[1]) {
			raw = strings.TrimSpace(raw[len(w[0]) : len(raw)-len(w[1])])
		}
	}
	var out bytes.Buffer
	if raw == "" || json.Compact(&out, []byte(raw)) != nil {
		return nil, false
	}
	return out.Bytes(), true
}

// JSONLDScript is the JSON of a JSON-LD script element (IsJSONLD):
// compacted, without a comment or CDATA wrapper; ok is false when it is
// empty or not valid JSON.
func JSONLDScript(n *html.Node) (json.RawMessage, bool) {
	return unwrapJSONLD(scriptText(n))
}

// JSONLD is every JSON-LD block below root, in document order (as
// JSONLDScript reads each). maxBytes bounds the script text read in all;
// a script past it is skipped (0: no bound).
func JSONLD(root *html.Node, maxBytes int) []json.RawMessage {
	var out []json.RawMessage
	total := 0
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if IsJSONLD(n) {
			raw := scriptText(n)
			if total += len(raw); maxBytes > 0 && total > maxBytes {
				return
			}
			if v, ok := unwrapJSONLD(raw); ok {
				out = append(out, v)
			}
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
	return out
}

// maxEntityDepth bounds the nesting of arrays and @graph read for
// entities.
const maxEntityDepth = 3

// Entities are the JSON objects of a decoded JSON-LD block: the block
// itself, or the members of its arrays and @graph (to three levels). An
// object holding a @graph is an entity itself only if it says more than
// its @context.
func Entities(v any) []map[string]any {
	var out []map[string]any
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		if depth > maxEntityDepth {
			return
		}
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(e, depth+1)
			}
		case map[string]any:
			if g, ok := x["@graph"]; ok {
				walk(g, depth+1)
				if len(x) <= 2 {
					return
				}
			}
			out = append(out, x)
		}
	}
	walk(v, 0)
	return out
}

// Types is an entity's @type: one name or several.
func Types(m map[string]any) []string {
	switch t := m["@type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
			return a.Val
		}
	}
	return ""
}

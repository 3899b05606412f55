package extract

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/trawlhq/trawl/internal/htmlread"
)

// fill builds the value of n from the page's facts: the deterministic
// extractor. Nothing is made up: a property the page does not show is nil.
func (p *page) fill(n *Node) any {
	switch n.Main() {
	case "array":
		return p.array("", n, p.facts, true)
	case "object", "":
		return p.object(n, p.facts, true)
	}
	// A scalar root: the first fact its description names, else nil.
	return nil
}

func (p *page) object(n *Node, facts []fact, top bool) map[string]any {
	out := make(map[string]any, len(n.Props))
	for _, prop := range n.Props {
		out[prop.Name] = p.prop(prop.Name, prop.Node, facts, top)
	}
	return out
}

// candidates are the facts matching name, best first.
func candidates(name string, facts []fact) []fact {
	w := words(name)
	type scored struct {
		f fact
		s int
		i int
	}
	var c []scored
	for i, f := range facts {
		if s := score(w, f.key); s > 0 {
			c = append(c, scored{f, s, i})
		}
	}
	sort.SliceStable(c, func(i, j int) bool {
		// Same source: the closer name first. Across sources the better
		// source wins unless the name is much closer.
		a, b := c[i], c[j]
		ra, rb := a.f.src*15-a.s, b.f.src*15-b.s
		if ra != rb {
			return ra < rb
		}
		return a.i < b.i
	})
	out := make([]fact, len(c))
	for i, x := range c {
		out[i] = x.f
	}
	return out
}

func (p *page) prop(name string, n *Node, facts []fact, top bool) any {
	switch n.Main() {
	case "array":
		return p.array(name, n, facts, top)
	case "object":
		for _, f := range candidates(name, facts) {
			if m := asMap(f.val); m != nil {
				q := &page{base: p.base}
				q.addEntity("", m, f.src, 0)
				return p.object(n, q.facts, false)
			}
		}
		obj := p.object(n, facts, false)
		for _, v := range obj {
			if v != nil {
				return obj
			}
		}
		return nil
	}
	author := groupOf[words(name)] == groupOf["author"]
	for _, f := range candidates(name, facts) {
		v := coerce(f.val, n, name, p.base)
		if s, ok := v.(string); ok && author && (strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")) {
			continue // an author's page (microdata's <a itemprop=author href>): no name
		}
		if s, ok := v.(string); ok && author && f.src >= srcHeading {
			// What the page shows as a byline, not what its tags state:
			// a name, not a label, a role, a month or a commenter.
			if v = nil; personName(s, true) != "" {
				v = personName(s, true)
			}
		}
		if v != nil {
			return v
		}
	}
	if top {
		return p.fromText(name, n)
	}
	return nil
}

// fromText looks for a typed value in the page's visible text, for
// properties whose name or format says what they hold.
func (p *page) fromText(name string, n *Node) any {
	kind := kindOf(name)
	switch n.Format {
	case "email":
		kind = "email"
	case "date", "date-time":
		kind = "date"
	case "uri", "iri":
		kind = "url"
	}
	var s string
	var ok bool
	switch kind {
	case "email":
		s, ok = findEmail(p.text)
	case "phone":
		s, ok = findPhone(p.text)
	case "price":
		s, ok = findMoney(p.text)
	case "date":
		if p.base != nil {
			s, ok = dateFromURL(p.base.String())
		}
		if !ok {
			s, ok = parseDate(p.nearHeading(5, 30))
		}
		if !ok {
			s, ok = parseDate(firstLines(p.text, 60))
		}
	}
	if !ok {
		return nil
	}
	return coerce(s, n, name, p.base)
}

// nearHeading is the visible text from before lines above the headline
// to after lines below it ("" when the headline is not a line of it): a
// dateline is next to the headline, the site's "today" is not.
func (p *page) nearHeading(before, after int) string {
	if p.heading == "" {
		return ""
	}
	lines := strings.Split(p.text, "\n")
	for i, l := range lines {
		if l == p.heading {
			return strings.Join(lines[max(0, i-before):min(len(lines), i+after)], "\n")
		}
	}
	return ""
}

func firstLines(s string, n int) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			if n--; n == 0 {
				return s[:i]
			}
		}
	}
	return s
}

// array fills an array property: from a fact holding a list, else (for
// items that are objects) from the page's best list of records, else
// from every fact of that name.
func (p *page) array(name string, n *Node, facts []fact, top bool) any {
	items := n.Items
	if items == nil {
		items = &Node{}
	}
	var cands []fact
	if name != "" {
		cands = candidates(name, facts)
	}
	for _, f := range cands {
		if list, ok := f.val.([]any); ok && len(list) > 0 {
			if out := p.coerceList(list, items, singular(name)); len(out) > 0 {
				return out
			}
		}
	}
	if items.Main() == "object" && top {
		if recs := p.bestList(items); recs != nil {
			return recs
		}
	}
	var out []any
	seen := map[string]bool{}
	best := -1
	for _, f := range cands {
		if best >= 0 && f.src > best {
			break // one source only
		}
		var v any
		if items.Main() == "object" {
			if m := asMap(f.val); m != nil {
				q := &page{base: p.base}
				q.addEntity("", m, f.src, 0)
				v = p.object(items, q.facts, false)
			}
		} else {
			v = coerce(f.val, items, singular(name), p.base)
		}
		if v == nil {
			continue
		}
		k := fmt.Sprint(v)
		if !seen[k] {
			seen[k] = true
			out = append(out, v)
			best = f.src
		}
	}
	if out == nil {
		if name == "" {
			return []any{}
		}
		return nil
	}
	return out
}

func (p *page) coerceList(list []any, items *Node, name string) []any {
	out := make([]any, 0, len(list))
	for _, x := range list {
		var v any
		if items.Main() == "object" {
			m := asMap(x)
			if m == nil {
				continue
			}
			q := &page{base: p.base}
			q.addEntity("", m, srcJSONLD, 0)
			v = p.object(items, q.facts, false)
		} else {
			v = coerce(x, items, name, p.base)
		}
		if v != nil {
			out = append(out, v)
		}
	}
	return out
}

// bestList fills items from each list of records and keeps the list that
// fills the most of them: the share of properties filled, then the
// number of records, then the better source.
func (p *page) bestList(items *Node) []any {
	if len(items.Props) == 0 {
		return nil
	}
	var best []any
	bestScore := 0.0
	for _, l := range p.lists {
		if len(l.records) == 0 {
			continue
		}
		var recs []any
		filled := 0
		for _, r := range l.records {
			obj := p.object(items, r, false)
			k := 0
			for _, v := range obj {
				if v != nil {
					k++
				}
			}
			if k == 0 {
				continue
			}
			filled += k
			recs = append(recs, obj)
		}
		if len(recs) == 0 {
			continue
		}
		share := float64(filled) / float64(len(recs)*len(items.Props))
		s := share*100 + math.Min(float64(len(recs)), 50)/10 - float64(l.src)
		if s > bestScore {
			best, bestScore = recs, s
		}
	}
	return best
}

func asMap(v any) map[string]any {
	switch x := v.(type) {
	case map[string]any:
		return x
	case []any:
		if len(x) > 0 {
			if m, ok := x[0].(map[string]any); ok {
				return m
			}
		}
	}
	return nil
}

// text of a JSON-LD or microdata value: a string as it is, an object's
// name (or its value, or its url), a list's first item.
func textOf(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case bool:
		return strconv.FormatBool(x), true
	case map[string]any:
		for _, k := range []string{"name", "@value", "value", "text", "url", "@id", "price"} {
			if s, ok := textOf(x[k]); ok && s != "" {
				return s, true
			}
		}
		if g, f := x["givenName"], x["familyName"]; g != nil || f != nil {
			gs, _ := textOf(g)
			fs, _ := textOf(f)
			return strings.TrimSpace(gs + " " + fs), true
		}
	case []any:
		if len(x) > 0 {
			return textOf(x[0])
		}
	}
	return "", false
}

// coerce turns a found value into n's type, or nil when it cannot be one
// (validation drops what the schema refuses afterwards).
func coerce(v any, n *Node, name string, base *url.URL) any {
	if v == nil {
		return nil
	}
	main := n.Main()
	if len(n.Enum) > 0 {
		s, ok := textOf(v)
		if !ok {
			return nil
		}
		for _, e := range n.Enum {
			if es := fmt.Sprint(e); strings.EqualFold(es, htmlread.Collapse(s)) || strings.EqualFold(words(es), words(s)) {
				return e
			}
		}
		return nil
	}
	switch main {
	case "number", "integer":
		var f float64
		switch x := v.(type) {
		case float64:
			f = x
		default:
			s, ok := textOf(v)
			if !ok {
				return nil
			}
			if f, ok = parseNumber(s); !ok {
				return nil
			}
		}
		if main == "integer" {
			if f != math.Trunc(f) {
				return nil
			}
			return int64(f)
		}
		return f
	case "boolean":
		if b, ok := v.(bool); ok {
			return b
		}
		s, ok := textOf(v)
		if !ok {
			return nil
		}
		if b, ok := parseBool(s); ok {
			return b
		}
		return nil
	case "array":
		items := n.Items
		if items == nil {
			items = &Node{}
		}
		list, ok := v.([]any)
		if !ok {
			if s, isStr := v.(string); isStr && items.Main() != "object" && strings.Contains(s, ",") {
				for _, part := range strings.Split(s, ",") {
					list = append(list, strings.TrimSpace(part))
				}
			} else {
				list = []any{v}
			}
		}
		var out []any
		for _, x := range list {
			if c := coerce(x, items, singular(name), base); c != nil {
				out = append(out, c)
			}
		}
		if out == nil {
			return nil
		}
		return out
	case "object":
		if m := asMap(v); m != nil {
			q := &page{base: base}
			q.addEntity("", m, srcJSONLD, 0)
			return q.object(n, q.facts, false)
		}
		return nil
	case "null":
		return nil
	}
	// string, or untyped
	s, ok := textOf(v)
	if !ok {
		return nil
	}
	s = htmlread.Collapse(s)
	if s == "" {
		return nil
	}
	kind := kindOf(name)
	switch n.Format {
	case "date", "date-time":
		kind = "date"
	case "email", "idn-email":
		kind = "email"
	case "uri", "iri", "uri-reference":
		kind = "url"
	}
	switch kind {
	case "date":
		iso, ok := parseDate(s)
		if !ok {
			if n.Format != "" {
				return nil
			}
			return s
		}
		if n.Format == "date" {
			iso = iso[:10]
		} else if n.Format == "date-time" && len(iso) == 10 {
			return nil // no time on the page: not invented
		}
		return iso
	case "email":
		e, ok := findEmail(s)
		if !ok {
			return nil
		}
		return e
	case "url":
		if u := absURL(base, s); u != "" {
			return u
		}
		if n.Format != "" {
			return nil
		}
		if m := reURL.FindString(s); m != "" {
			return m
		}
		return nil
	case "phone":
		if ph, ok := findPhone(s); ok {
			return ph
		}
		return nil
	}
	if words(name) == "author" || groupOf[words(name)] == groupOf["author"] {
		s = cleanByline(s)
	}
	return s
}

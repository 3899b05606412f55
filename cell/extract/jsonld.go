package extract

import (
	"encoding/json"
	"strings"

	"github.com/PuerkitoBio/goquery"

	"github.com/trawlhq/trawl/internal/htmlread"
)

// JSON-LD: the entities of the page's JSON-LD blocks (internal/htmlread
// reads them) as facts, ranked by what they describe, and their lists.

// entityRank orders JSON-LD entities: what the page is about first, what
// the site is last.
func entityRank(types []string) int {
	for _, t := range types {
		switch t {
		case "WebSite", "Organization", "BreadcrumbList", "SearchAction", "SiteNavigationElement", "WPHeader", "WPFooter", "ImageObject":
			return srcWeak
		case "WebPage":
			return srcMeta
		}
	}
	return srcJSONLD
}

func (p *page) jsonLD(doc *goquery.Document) {
	var entities []map[string]any
	for _, raw := range htmlread.JSONLD(doc.Nodes[0], maxLDBytes) {
		var v any
		if json.Unmarshal(raw, &v) == nil {
			entities = append(entities, htmlread.Entities(v)...)
		}
	}
	byType := map[string][]map[string]any{}
	var order []string
	for _, e := range entities {
		types := htmlread.Types(e)
		src := entityRank(types)
		p.addEntity("", e, src, 0)
		for _, t := range types {
			p.add(t, e, src) // the entity itself, under its type ("recipe")
		}
		if len(types) > 0 {
			if byType[types[0]] == nil {
				order = append(order, types[0])
			}
			byType[types[0]] = append(byType[types[0]], e)
		}
		if types != nil && types[0] == "ItemList" {
			if items, ok := e["itemListElement"].([]any); ok {
				var l recordList
				for _, it := range items {
					m, ok := it.(map[string]any)
					if !ok {
						continue
					}
					if inner, ok := m["item"].(map[string]any); ok {
						m = inner
					}
					l.records = append(l.records, entityFacts(m))
				}
				if len(l.records) > 0 {
					p.lists = append(p.lists, l)
				}
			}
		}
	}
	for _, t := range order {
		if es := byType[t]; len(es) >= 2 && entityRank([]string{t}) != srcWeak {
			l := recordList{src: srcJSONLD}
			for _, e := range es {
				l.records = append(l.records, entityFacts(e))
			}
			p.lists = append(p.lists, l)
		}
	}
}

// entityFacts are the facts of one entity alone (a record).
func entityFacts(m map[string]any) []fact {
	q := &page{}
	q.addEntity("", m, srcJSONLD, 0)
	return q.facts
}

// addEntity adds an entity's properties as facts: each under its own name
// and, nested ones, under "parent child" too ("offers price").
func (p *page) addEntity(prefix string, m map[string]any, src, depth int) {
	if depth > 3 {
		return
	}
	for k, v := range m {
		switch k {
		case "@context", "@id", "@graph":
			continue
		case "@type":
			k = "type"
		case "@value":
			k = "value"
		}
		key := k
		if prefix != "" {
			key = prefix + " " + k
		}
		p.add(key, v, src)
		if prefix != "" {
			bare := src + 1 // the bare name, a little less sure
			if nameOfParty(prefix, k) {
				// The author's or publisher's name is not the page's.
				bare = srcWeak
			}
			p.add(k, v, bare)
		}
		switch x := v.(type) {
		case map[string]any:
			p.addEntity(key, x, src, depth+1)
		case []any:
			if len(x) > 0 {
				if first, ok := x[0].(map[string]any); ok {
					p.addEntity(key, first, src, depth+1)
				}
			}
		}
	}
}

// nameOfParty: k is the name of an entity that stands beside the page's
// subject (its author, publisher, brand), under prefix: "author name" is
// not the article's name, nor its headline.
func nameOfParty(prefix, k string) bool {
	switch k {
	case "name", "headline", "title", "alternate name":
	default:
		return false
	}
	// Only a main entity's name stands for the page's; an author's, a
	// breadcrumb's, a list item's does not.
	f := strings.Fields(prefix)
	return f[len(f)-1] != "entity"
}

// party are the entities beside a page's subject: their names and
// titles are not the subject's.
var party = map[string]bool{"author": true, "creator": true, "publisher": true, "editor": true, "contributor": true, "brand": true, "manufacturer": true, "seller": true, "provider": true, "organizer": true, "performer": true, "holder": true, "organization": true, "logo": true, "image": true, "person": true}

package extract

import (
	"net/url"
	"strings"

	"github.com/PuerkitoBio/goquery"
	"golang.org/x/net/html"

	"github.com/trawlhq/trawl/internal/htmlread"
)

// Microdata (itemscope, itemprop) and RDFa Lite (property on elements
// other than <meta>) as facts and lists of like items.

func itemValue(s *goquery.Selection, base *url.URL) string {
	if c, ok := s.Attr("content"); ok {
		return c
	}
	switch goquery.NodeName(s) {
	case "a", "link", "area":
		if h, ok := s.Attr("href"); ok {
			return absURL(base, h)
		}
	case "img", "audio", "video", "source", "iframe", "embed":
		if h, ok := s.Attr("src"); ok {
			return absURL(base, h)
		}
	case "time":
		if d, ok := s.Attr("datetime"); ok {
			return d
		}
	case "data", "meter":
		if d, ok := s.Attr("value"); ok {
			return d
		}
	}
	return visibleText(s)
}

// itemMap reads the properties of an itemscope element, nested items as
// maps.
func itemMap(s *goquery.Selection, base *url.URL, depth int) map[string]any {
	m := map[string]any{}
	if t, ok := s.Attr("itemtype"); ok {
		m["@type"] = words(t)
	}
	if depth > 4 {
		return m
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type != html.ElementNode {
				continue
			}
			cs := goquery.NewDocumentFromNode(c).Selection
			_, scope := cs.Attr("itemscope")
			if props, ok := cs.Attr("itemprop"); ok {
				var v any
				if scope {
					v = itemMap(cs, base, depth+1)
				} else {
					v = htmlread.Collapse(itemValue(cs, base))
				}
				for _, name := range strings.Fields(props) {
					switch old := m[name].(type) {
					case nil:
						m[name] = v
					case []any:
						m[name] = append(old, v)
					default:
						m[name] = []any{old, v}
					}
				}
			}
			if !scope {
				walk(c)
			}
		}
	}
	walk(s.Nodes[0])
	return m
}

func (p *page) microdata(doc *goquery.Document) {
	byType := map[string][]map[string]any{}
	var order []string
	doc.Find("[itemscope]").Each(func(_ int, s *goquery.Selection) {
		if _, nested := s.Attr("itemprop"); nested {
			return
		}
		m := itemMap(s, p.base, 0)
		t, _ := m["@type"].(string)
		src := srcMicrodata
		switch {
		case weakType(t):
			src = srcWeak
		case t == "" || strings.HasSuffix(t, "web page"):
			src = srcClass // the whole page as an item, or no type: says little
		}
		p.addEntity("", m, src, 0)
		if t != "" {
			f := strings.Fields(t)
			p.add(f[len(f)-1], m, src) // the item itself, under its type
		}
		if byType[t] == nil {
			order = append(order, t)
		}
		byType[t] = append(byType[t], m)
	})
	for _, t := range order {
		if ms := byType[t]; len(ms) >= 2 {
			l := recordList{src: srcMicrodata}
			for _, m := range ms {
				q := &page{}
				q.addEntity("", m, srcMicrodata, 0)
				l.records = append(l.records, q.facts)
			}
			p.lists = append(p.lists, l)
		}
	}
}

// weakType: an item type (in words) that describes the site, a person or
// a place in the navigation rather than what the page is about.
func weakType(t string) bool {
	for _, w := range []string{"web site", "website", "organization", "breadcrumb list", "breadcrumb", "list item", "site navigation element", "wp header", "wp footer", "wp side bar", "person", "image object", "logo", "search action", "comment"} {
		if strings.HasSuffix(t, w) {
			return true
		}
	}
	return false
}

// RDFa Lite: property on elements other than <meta>.

func (p *page) rdfa(doc *goquery.Document) {
	doc.Find("body [property]").Each(func(_ int, s *goquery.Selection) {
		if goquery.NodeName(s) == "meta" {
			return
		}
		props, _ := s.Attr("property")
		v := htmlread.Collapse(itemValue(s, p.base))
		src := srcRDFa
		if t, ok := s.Closest("[typeof]").Attr("typeof"); ok && weakType(words(t)) {
			src = srcWeak
		}
		for _, name := range strings.Fields(props) {
			p.add(name, v, src)
		}
	})
}

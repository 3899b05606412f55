package extract

import (
	"net/url"
	"sort"
	"strings"

	"github.com/PuerkitoBio/goquery"

	"github.com/trawlhq/trawl/internal/htmlread"
)

// Repeated sibling blocks (cards, rows, list items) read as records.

// Bounds of the blocks read from one page.
const (
	maxGroups    = 200
	maxRecords   = 1000
	maxBlockText = 2000
)

// blocks finds elements with three or more children of one kind (tag and
// class) and reads each child as a record.
func (p *page) blocks(doc *goquery.Document) {
	seen, groups := 0, 0
	doc.Find("body *").EachWithBreak(func(_ int, s *goquery.Selection) bool {
		if seen > 20000 {
			return false
		}
		seen++
		switch goquery.NodeName(s) {
		case "script", "style", "table", "tr", "thead", "tbody", "select", "nav", "head", "svg":
			return true
		}
		kids := s.Children()
		if kids.Length() < 3 {
			return true
		}
		sig := map[string][]*goquery.Selection{}
		var order []string
		kids.Each(func(_ int, k *goquery.Selection) {
			cl, _ := k.Attr("class")
			key := goquery.NodeName(k) + "." + strings.Join(strings.Fields(cl), ".")
			if sig[key] == nil {
				order = append(order, key)
			}
			sig[key] = append(sig[key], k)
		})
		for _, key := range order {
			group := sig[key]
			if len(group) < 3 || groups >= maxGroups {
				continue
			}
			// Cards and rows are short; a run of long children is
			// sections of a document, not records.
			if len(group) > maxRecords || len(visibleText(group[0])) > maxBlockText {
				continue
			}
			groups++
			l := recordList{src: srcClass}
			rich := 0
			for _, k := range group {
				rec := blockFacts(k, p.base)
				if len(rec) >= 2 {
					rich++
				}
				l.records = append(l.records, rec)
			}
			if rich*2 >= len(group) {
				p.lists = append(p.lists, l)
			}
		}
		return true
	})
}

// blockFacts reads one block: its item properties, its named parts
// (class words), its heading or first link as name, link as url, image,
// label lines and the amounts it shows.
func blockFacts(k *goquery.Selection, base *url.URL) []fact {
	q := &page{base: base}
	if _, ok := k.Attr("itemscope"); ok {
		q.addEntity("", itemMap(k, base, 0), srcMicrodata, 0)
	}
	k.Find("[itemprop]").Each(func(_ int, s *goquery.Selection) {
		props, _ := s.Attr("itemprop")
		for _, n := range strings.Fields(props) {
			q.add(n, itemValue(s, base), srcMicrodata)
		}
	})
	k.Find("*").Each(func(_ int, s *goquery.Selection) {
		if cl, ok := s.Attr("class"); ok && s.Children().Length() == 0 {
			t := visibleText(s)
			for _, c := range strings.Fields(cl) {
				w := words(c)
				// "card__price" → "card price": its last word names it.
				if f := strings.Fields(w); len(f) > 0 && len(t) < 300 {
					q.add(f[len(f)-1], t, srcClass)
					if len(f) > 1 {
						q.add(w, t, srcClass)
					}
				}
			}
		}
	})
	if h := k.Find("h1, h2, h3, h4, h5, h6").First(); h.Length() > 0 {
		q.add("heading", visibleText(h), srcHeading)
	}
	a := k.Find("a[href]").First()
	if goquery.NodeName(k) == "a" {
		a = k
	}
	if a.Length() > 0 {
		href, _ := a.Attr("href")
		q.add("url", absURL(base, href), srcHeading)
		q.add("heading", visibleText(a), srcText)
	}
	if img := k.Find("img[src]").First(); img.Length() > 0 {
		src, _ := img.Attr("src")
		q.add("image", absURL(base, src), srcHeading)
	}
	text := visibleText(k)
	if len(text) > maxBlockText {
		text = text[:maxBlockText]
	}
	q.labels(text)
	if m, ok := findMoney(text); ok {
		q.add("price", m, srcText)
	}
	if t := htmlread.Collapse(text); t != "" {
		q.add("text", t, srcWeak)
	}
	sort.SliceStable(q.facts, func(i, j int) bool { return q.facts[i].src < q.facts[j].src })
	return q.facts
}

package extract

import (
	"strings"

	"github.com/PuerkitoBio/goquery"

	"github.com/trawlhq/trawl/internal/htmlread"
)

// What class, id, rel and itemprop names hint at: authors, prices, dates.

func hintWords(s *goquery.Selection) string {
	var b strings.Builder
	for _, a := range []string{"class", "id", "rel", "itemprop", "data-testid"} {
		if v, ok := s.Attr(a); ok {
			b.WriteString(" " + words(v) + " ")
		}
	}
	return strings.ToLower(b.String())
}

func (p *page) hints(doc *goquery.Document) {
	count := map[string]int{}
	adds := func(key string, v any) {
		if count[key] < 20 {
			count[key]++
			p.add(key, v, srcClass)
		}
	}
	doc.Find("body *").EachWithBreak(func(i int, s *goquery.Selection) bool {
		if i > 50000 {
			return false
		}
		name := goquery.NodeName(s)
		switch name {
		case "script", "style", "noscript", "template", "svg", "head":
			return true
		case "time":
			// The datetime attribute; without one, the date the text shows.
			// (Preferring the shown date when the attribute is in UTC
			// gained as many pages of the evaluation as it lost.)
			d, ok := s.Attr("datetime")
			if text := visibleText(s); !ok {
				if iso, dated := parseDate(text); dated || !ok {
					if dated {
						d = iso
					} else {
						d = text
					}
				}
			}
			h := hintWords(s) + hintWords(s.Parent())
			if _, pub := s.Attr("pubdate"); pub || strings.Contains(h, "publish") || strings.Contains(h, "posted") || strings.Contains(h, "created") {
				adds("date published", d)
			} else if strings.Contains(h, "modif") || strings.Contains(h, "updated") {
				adds("date modified", d)
			} else {
				adds("time", d)
			}
			return true
		case "a":
			if h, ok := s.Attr("href"); ok {
				switch {
				case strings.HasPrefix(h, "mailto:"):
					adds("email", strings.TrimPrefix(h, "mailto:"))
				case strings.HasPrefix(h, "tel:"):
					adds("telephone", strings.TrimPrefix(h, "tel:"))
				}
			}
			if rel, _ := s.Attr("rel"); strings.Contains(rel, "author") {
				if t := authorName(visibleText(s)); t != "" {
					adds("author", t)
				}
				return true
			}
		}
		h := hintWords(s)
		if strings.TrimSpace(h) == "" {
			return true
		}
		text := func() string { return htmlread.Collapse(visibleText(s)) }
		switch {
		case hasWord(h, "author", "byline", "writer", "by line", "author name"):
			if hasWord(h, "bio", "avatar", "image", "photo", "description", "box", "info") || s.Find("[class*=author], [class*=byline], [rel=author], [itemprop=author]").Length() > 0 {
				return true // the name is in an inner element
			}
			if t := authorName(visibleText(s)); t != "" {
				adds("author", t)
			}
		case hasWord(h, "price", "amount", "cost"):
			if t := text(); len(t) < 60 {
				adds("price", t)
			}
		case hasWord(h, "date", "published", "pubdate", "timestamp", "dateline", "posted", "time"):
			if t := text(); len(t) < 120 {
				adds("date", t)
			}
		}
		return true
	})
}

func hasWord(h string, ws ...string) bool {
	for _, w := range ws {
		if strings.Contains(h, " "+w+" ") || strings.Contains(h, " "+w+"s ") || strings.Contains(h, w) && len(w) > 5 {
			return true
		}
	}
	return false
}

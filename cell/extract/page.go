package extract

import (
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/PuerkitoBio/goquery"
	"golang.org/x/net/html"

	"github.com/trawlhq/trawl/internal/htmlread"
)

// page is what the deterministic extractor knows of a page: its facts,
// in the order of their sources, the lists of records it shows, and its
// visible text.
type page struct {
	base  *url.URL
	facts []fact
	lists []recordList
	text  string // visible text, one block a line
	// heading is the page's headline, where the article starts, and
	// headingNode its element (nil when the headline is the <title>'s).
	heading     string
	headingNode *html.Node
	// dayFirst: the page's language writes d/m/y (its <html lang>).
	dayFirst bool
}

// recordList is a run of like records: a JSON-LD list, items of one
// microdata type, the rows of a table, repeated sibling blocks.
type recordList struct {
	src     int
	records [][]fact
}

// maxLDBytes bounds the JSON-LD read from one page.
const maxLDBytes = 4 << 20

// readHTML reads the facts of an HTML page. base makes its URLs absolute.
// lists asks for the repeated blocks too (a schema with arrays of
// objects): the costliest reading, skipped when nothing needs it.
func readHTML(src string, base *url.URL, lists bool) *page {
	return readHTMLAt(src, base, lists, time.Time{})
}

// readHTMLAt is readHTML for a page fetched at fetched, against which
// relative dates ("3 hours ago") are read; zero reads none.
func readHTMLAt(src string, base *url.URL, lists bool, fetched time.Time) *page {
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(src))
	if err != nil {
		return &page{base: base}
	}
	p := &page{base: base}
	if href, ok := doc.Find("base[href]").First().Attr("href"); ok {
		if u := absURL(base, href); u != "" {
			p.base, _ = url.Parse(u)
		}
	}
	p.jsonLD(doc)
	p.microdata(doc)
	p.rdfa(doc)
	p.meta(doc)
	p.headings(doc)
	p.article(doc, fetched)
	p.tables(doc)
	p.text = visibleText(doc.Selection)
	p.labels(p.text)
	p.hints(doc)
	if lists {
		p.blocks(doc)
	}
	sort.SliceStable(p.facts, func(i, j int) bool { return p.facts[i].src < p.facts[j].src })
	return p
}

func (p *page) add(key string, val any, src int) {
	key = words(key)
	if key == "" || val == nil {
		return
	}
	if s, ok := val.(string); ok {
		if s = htmlread.Collapse(s); s == "" {
			return
		}
		val = s
	}
	p.facts = append(p.facts, fact{key: key, val: val, src: src})
}

// visibleText is the text of a selection as a reader sees it, one block a
// line (htmlread.VisibleText).
func visibleText(s *goquery.Selection) string { return htmlread.VisibleText(s.Nodes...) }

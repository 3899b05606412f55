package extract

import (
	"regexp"
	"strings"

	"github.com/PuerkitoBio/goquery"
	"golang.org/x/net/html"

	"github.com/trawlhq/trawl/internal/htmlread"
)

// OpenGraph and <meta> tags, the canonical link, and the page's title and
// heading.

func (p *page) meta(doc *goquery.Document) {
	doc.Find("meta[content]").Each(func(_ int, s *goquery.Selection) {
		c, _ := s.Attr("content")
		for _, a := range []string{"property", "name", "itemprop"} {
			if k, ok := s.Attr(a); ok {
				k = strings.ToLower(k)
				switch k {
				case "viewport", "robots", "generator", "theme-color", "referrer", "format-detection", "google-site-verification":
					return
				}
				if strings.HasSuffix(k, ":url") || strings.HasSuffix(k, "image") || k == "og:image" {
					c = absURL(p.base, c)
				}
				p.add(k, c, srcMeta)
				return
			}
		}
	})
	if h, ok := doc.Find(`link[rel="canonical"]`).First().Attr("href"); ok {
		p.add("canonical", absURL(p.base, h), srcMeta)
	}
}

// The title and the heading.

var reTitleSep = regexp.MustCompile(`\s+[|–—·:»-]\s+`)

func (p *page) headings(doc *goquery.Document) {
	title := htmlread.Collapse(doc.Find("head title").First().Text())
	if title == "" {
		title = htmlread.Collapse(doc.Find("title").First().Text())
	}
	short := title
	if title != "" {
		// "Headline | Site": keep the longest part.
		parts := reTitleSep.Split(title, -1)
		short = parts[0]
		for _, x := range parts[1:] {
			if len(x) > len(short) {
				short = x
			}
		}
	}
	// The heading is the <h1> that says what the title says; without a
	// title, the first <h1> of the article, else of the page.
	var best string
	var bestNode *html.Node
	bestScore := -1.0
	doc.Find("h1").EachWithBreak(func(i int, h *goquery.Selection) bool {
		t := htmlread.Collapse(visibleText(h))
		if t == "" || len(t) > 400 {
			return i < 20
		}
		s := overlap(t, title)
		if h.Closest("article, main, [role=main]").Length() > 0 {
			s += 0.05
		}
		if s > bestScore {
			best, bestScore, bestNode = t, s, h.Nodes[0]
		}
		return i < 20
	})
	switch {
	case best != "" && (title == "" || bestScore >= 0.3):
		p.add("heading", best, srcHeading)
		p.headingNode = bestNode
	case short != "":
		p.add("heading", short, srcHeading)
		best = short
	}
	p.heading = best
	if short != "" {
		p.add("page title", short, srcText)
	}
}

// overlap is the share of a's word tokens found in b.
func overlap(a, b string) float64 {
	at, bt := strings.Fields(strings.ToLower(words(a))), strings.Fields(strings.ToLower(words(b)))
	if len(at) == 0 || len(bt) == 0 {
		return 0
	}
	in := map[string]bool{}
	for _, w := range bt {
		in[w] = true
	}
	n := 0
	for _, w := range at {
		if in[w] {
			n++
		}
	}
	return float64(n) / float64(len(at))
}

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

var reTitleSep = regexp.MustCompile(`\s+[|–—·:»•/-]\s+|^\s*[•|·»]\s*`)

func (p *page) headings(doc *goquery.Document) {
	title := htmlread.Collapse(doc.Find("head title").First().Text())
	if title == "" {
		title = htmlread.Collapse(doc.Find("title").First().Text())
	}
	// "Headline | Site": the title without the parts that name the site
	// (its host's name), then its longest part.
	var host string
	if p.base != nil {
		host = p.base.Hostname()
	}
	short := ""
	var kept []string
	for _, x := range reTitleSep.Split(title, -1) {
		if x = strings.TrimSpace(x); x != "" && !namesHost(x, host) {
			kept = append(kept, x)
			if len(x) > len(short) {
				short = x
			}
		}
	}
	// A title that is only the site's name, or one word ("News"), says
	// nothing of the article.
	informative := len(strings.Fields(short)) >= 2
	// The heading is the <h1> that says what the title says; where the
	// title says nothing, the first <h1> of the article that is more than
	// a word or the site's name.
	var best string
	var bestNode *html.Node
	bestScore := -1.0
	doc.Find("h1, h2, h3").EachWithBreak(func(i int, h *goquery.Selection) bool {
		// An <h2> or <h3> is a candidate when the page calls it the
		// title ("entry-title", itemprop=headline): blogs put the site's
		// name in the <h1>.
		if inComments(h.Nodes[0]) {
			return i < 60 // "Leave a reply", "Kommentar verfassen": the comment form's
		}
		titled := reTitleClass.MatchString(hintAttrs(h.Nodes[0]))
		if goquery.NodeName(h) != "h1" && !titled {
			return i < 60
		}
		t := headingText(h.Nodes[0])
		if t == "" || len(t) > 400 {
			return i < 60
		}
		var s float64
		if informative {
			// The part of the title the h1 says best, weighed by how much
			// of the title that part is: of "Need for Speed – Some Blog",
			// an h1 "Some Blog" is the site's.
			for _, x := range append(kept, title) {
				if f := f1(t, x); f > 0 {
					s = max(s, f*(0.8+0.2*float64(len(x))/float64(len(title))))
				}
			}
		} else if len(strings.Fields(t)) >= 2 && !namesHost(t, host) && !(title != "" && overlap(t, title) == 1) {
			s = 0.3
		}
		if h.Closest("article, main, [role=main]").Length() > 0 {
			s += 0.05
		}
		if titled {
			s += 0.05
		}
		if s > bestScore {
			best, bestScore, bestNode = t, s, h.Nodes[0]
		}
		return i < 60
	})
	switch {
	case best != "" && (title == "" || bestScore >= 0.3):
		p.add("heading", best, srcHeading)
		p.headingNode = bestNode
	case short != "":
		p.add("heading", short, srcHeading)
		best = short
		// The element that shows it (an <h2> under a logo's <h1>) is
		// where the byline is.
		doc.Find("h1, h2").EachWithBreak(func(i int, h *goquery.Selection) bool {
			if t := headingText(h.Nodes[0]); t != "" && overlap(t, short) >= 0.8 && overlap(short, t) >= 0.8 {
				p.headingNode = h.Nodes[0]
				return false
			}
			return i < 40
		})
	case title != "":
		best = title
		p.add("heading", title, srcHeading)
	}
	p.heading = best
	if short != "" {
		p.add("page title", short, srcText)
	}
}

// reTitleClass: a class, id or itemprop that calls a heading the page's
// title.
var reTitleClass = regexp.MustCompile(`(?i)entry-title|post-title|post__title|article-title|article__title|headline|page-title|story-title|\btitle\b`)

// namesHost: s is the name of the site at host, "Quanta Magazine" of
// www.quantamagazine.org, "PepTalks" of peptalks.de (letters and digits
// compared, the host's first label after www).
func namesHost(s, host string) bool {
	h := strings.TrimPrefix(strings.ToLower(host), "www.")
	if i := strings.IndexByte(h, '.'); i > 0 {
		h = h[:i]
	}
	h = strings.ReplaceAll(h, "-", "")
	n := strings.ReplaceAll(words(s), " ", "")
	n = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "com"), "de"), "org")
	return len(n) >= 3 && h != "" && (n == h || strings.HasPrefix(h, n) && len(h)-len(n) <= 4)
}

// f1 is the harmonic mean of overlap both ways.
func f1(a, b string) float64 {
	x, y := overlap(a, b), overlap(b, a)
	if x+y == 0 {
		return 0
	}
	return 2 * x * y / (x + y)
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

// reKicker names the parts of a heading that are not the headline: the
// kicker or roofline above it ("Klimaschutz", "Immobilienkrise"), a
// topic label, text for screen readers only.
var reKicker = regexp.MustCompile(`(?i)kicker|roofline|dachzeile|overline|topline|eyebrow|supertitle|topic-label|visually-hidden|sr-only|screen-reader`)

// reCommentArea are the class and id words of a comment section and its
// reply form (whole words: "responsive" is not one). Narrower than
// article.go's reElsewhere on purpose: headings in "teaser" or "promo"
// wrappers are often the article's own (held-out headline 0.734 → 0.721
// when reElsewhere ruled them out).
var reCommentArea = regexp.MustCompile(`(?i)(?:^|[\s_-])(?:comments?|reply|respond)(?:$|[\s_-])`)

// inComments: h or an element around it below <body> is the comment
// section (a site builder lists its modules' styles on <body>).
func inComments(h *html.Node) bool {
	for n := h; n != nil && n.Type == html.ElementNode && n.Data != "body" && n.Data != "html"; n = n.Parent {
		if reCommentArea.MatchString(attrOf(n, "class") + " " + attrOf(n, "id")) {
			return true
		}
	}
	return false
}

// headingText is a heading's text without its kicker.
func headingText(h *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			switch c.Type {
			case html.TextNode:
				b.WriteString(c.Data)
			case html.ElementNode:
				switch c.Data {
				case "script", "style", "noscript", "template":
					continue
				case "br":
					b.WriteString(" ")
					continue
				}
				if reKicker.MatchString(hintAttrs(c)) {
					b.WriteString(" ")
					continue
				}
				if !inline[c.Data] {
					b.WriteString(" ")
				}
				walk(c)
				if !inline[c.Data] {
					b.WriteString(" ")
				}
			}
		}
	}
	walk(h)
	// Soft hyphens ("Er\u00adin\u00adne\u00adrung") are hyphenation hints,
	// not text.
	return htmlread.Collapse(strings.ReplaceAll(b.String(), "\u00ad", ""))
}

var inline = map[string]bool{"a": true, "span": true, "em": true, "strong": true, "b": true, "i": true, "small": true, "abbr": true, "mark": true, "q": true, "sub": true, "sup": true, "u": true, "cite": true, "font": true}

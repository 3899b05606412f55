package content

import (
	"bytes"
	"strings"
	"unicode"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/trawlhq/trawl/internal/htmlread"
)

// The precision pass: what the extractors keep inside an article that is
// not the article. It runs on the chosen main-content element, after
// mapping, and removes
//
//   - figure captions and image credits (<figcaption>, class "caption",
//     "credit"): a caption describes a picture, it is not the text (a
//     <figcaption> of a figure with one image becomes that image's title,
//     so the Markdown keeps it as ![alt](src "caption"));
//   - blocks whose class names say what they are: sharing and social
//     buttons, related and recommended stories, newsletter and subscription
//     boxes, bylines, datelines and timestamps, tags, comments, galleries
//     and slideshows, advertising, paywall and cookie notices (after
//     trafilatura's discard rules and Readability's unlikely candidates);
//   - on pages that declare themselves articles (og:type article, or a
//     JSON-LD Article/NewsArticle/BlogPosting), link lists: blocks whose
//     text is mostly links (teasers, "Related:" lines, "more stories").
//
// Code blocks and data tables, and blocks that hold them, are never
// removed; a block holding a large share of the content is never removed
// by its class name (a wrapper named "post-share-wrapper" that holds the
// article is still the article).

// boilerClass are class-name words of non-content blocks, matched against
// the words of an element's class attribute (split at spaces, '-' and '_'),
// whole or as a prefix or suffix of a longer word ("sharebar",
// "imagecredit").
var boilerClass = []string{
	"share", "sharing", "social", "sociable", "related", "recommended",
	"newsletter", "subscribe", "subscription", "signup", "promo", "sponsor",
	"sponsored", "advert", "advertisement", "byline", "dateline",
	"timestamp", "caption", "credit", "credits", "gallery", "slideshow",
	"carousel", "comments", "comment", "outbrain", "taboola", "trending",
	"popular", "paywall", "breadcrumb", "breadcrumbs", "disclaimer",
	"tags", "tagged", "author", "authors", "widget", "toolbar", "rating",
}

// boilerShort are class words matched only as whole words: short words
// that occur inside longer, innocent ones.
var boilerShort = []string{"ad", "ads", "cta", "tag", "meta", "date", "cookie", "consent", "print", "hidden"}

// boilerID are id words: ids are often anchors derived from headings, so
// only words that no section title would produce.
var boilerID = []string{
	"share", "sharing", "social", "newsletter", "comments", "disqus",
	"outbrain", "taboola", "related", "recommended", "breadcrumb",
}

// classWords splits a class or id attribute into lower-case words.
func classWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return r == ' ' || r == '-' || r == '_' || r == '\t' || r == '\n' || r == ':' || r == '.'
	})
}

func matchWords(words, long, short []string) bool {
	for _, w := range words {
		for _, k := range long {
			if w == k || len(w) > len(k) && (strings.HasPrefix(w, k) || strings.HasSuffix(w, k)) {
				return true
			}
		}
		for _, k := range short {
			if w == k {
				return true
			}
		}
	}
	return false
}

// boilerByName reports elements whose class or id names them as
// non-content.
func boilerByName(n *html.Node) bool {
	if c := attr(n, "class"); c != "" && matchWords(classWords(c), boilerClass, boilerShort) {
		return true
	}
	if id := attr(n, "id"); id != "" && matchWords(classWords(id), nil, boilerID) {
		return true
	}
	return false
}

// declaresArticle reports pages that say they are an article: og:type
// article, or a JSON-LD block whose @type is an article type.
func declaresArticle(doc *html.Node) bool {
	return findFirst(doc, func(n *html.Node) bool {
		switch n.DataAtom {
		case atom.Meta:
			p := attr(n, "property")
			if p == "" {
				p = attr(n, "name")
			}
			return p == "og:type" && strings.EqualFold(strings.TrimSpace(attr(n, "content")), "article")
		case atom.Script:
			if !htmlread.IsJSONLD(n) {
				return false
			}
			ld, _ := htmlread.JSONLDScript(n)
			for _, t := range []string{`"Article"`, `"NewsArticle"`, `"BlogPosting"`, `"ReportageNewsArticle"`, `"AnalysisNewsArticle"`, `"OpinionNewsArticle"`, `"TechArticle"`} {
				if bytes.Contains(ld, []byte(t)) {
					return true
				}
			}
		}
		return false
	}) != nil
}

// blockStats are the counts precisionPass decides by, gathered for every
// element in one walk (deciding element by element with subtree walks
// would cost the square of the depth).
type blockStats struct {
	runes     int  // non-space runes of visible text
	linkRunes int  // of which inside <a>
	links     int  // <a href> elements
	guarded   bool // holds a code block or a data table
}

func gatherStats(n *html.Node, inLink bool, st map[*html.Node]blockStats) blockStats {
	var s blockStats
	if n.Type == html.TextNode {
		for _, r := range n.Data {
			if !unicode.IsSpace(r) {
				s.runes++
			}
		}
		if inLink {
			s.linkRunes = s.runes
		}
		return s
	}
	if n.Type == html.ElementNode && htmlread.NotText(n) {
		return s
	}
	isLink := n.Type == html.ElementNode && n.DataAtom == atom.A
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		cs := gatherStats(c, inLink || isLink, st)
		s.runes += cs.runes
		s.linkRunes += cs.linkRunes
		s.links += cs.links
		s.guarded = s.guarded || cs.guarded
	}
	if n.Type == html.ElementNode {
		if isLink && hasAttr(n, "href") {
			s.links++
		}
		if protected(n) {
			s.guarded = true
		}
		st[n] = s
	}
	return s
}

// precisionPass removes non-content blocks from main (see above). article
// says the page declares itself an article.
func precisionPass(main *html.Node, article bool) {
	st := map[*html.Node]blockStats{}
	total := gatherStats(main, false, st).runes
	if total == 0 {
		return
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		for c := n.FirstChild; c != nil; {
			next := c.NextSibling
			if c.Type == html.ElementNode && !htmlread.NotText(c) && c.DataAtom != atom.Pre && !protected(c) {
				if s, ok := st[c]; ok && dropForPrecision(c, s, total, article) {
					n.RemoveChild(c)
				} else {
					walk(c)
				}
			}
			c = next
		}
	}
	walk(main)
}

func dropForPrecision(n *html.Node, s blockStats, total int, article bool) bool {
	switch n.DataAtom {
	case atom.Figcaption:
		captionToTitle(n)
		return true
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6, atom.Code, atom.Tbody, atom.Thead, atom.Tr, atom.Td, atom.Th:
		return false
	}
	if s.runes == 0 || s.guarded || float64(s.runes) >= 0.3*float64(total) {
		return false
	}
	if boilerByName(n) {
		return true
	}
	if !article || s.links == 0 {
		return false
	}
	density := float64(s.linkRunes) / float64(s.runes)
	switch n.DataAtom {
	case atom.Ul, atom.Ol, atom.Div, atom.Section, atom.Dl:
	case atom.P:
		// A "Related: ..." or "Read more: ..." line, or a paragraph
		// that is a list of links (<br>-separated headlines); not a
		// paragraph that happens to hold a long link.
		if s.runes > 150 && (s.links < 3 || s.runes-s.linkRunes > 80) {
			return false
		}
	default:
		// List items are judged with their list: a list of linked
		// headlines, each with a sentence, is content.
		return false
	}
	return density > 0.6
}

// captionToTitle gives the single image of cap's <figure> the caption as
// its title, unless it has one.
func captionToTitle(cap *html.Node) {
	fig := cap.Parent
	if fig == nil || fig.DataAtom != atom.Figure {
		return
	}
	imgs := findAll(nil, fig, func(n *html.Node) bool { return n.DataAtom == atom.Img })
	if len(imgs) != 1 || attr(imgs[0], "title") != "" {
		return
	}
	if t := htmlread.InnerText(cap); t != "" {
		setAttr(imgs[0], "title", t)
	}
}

package content

import (
	"net/url"
	"strings"
	"unicode"

	readability "codeberg.org/readeck/go-readability"
	trafilatura "github.com/markusmobius/go-trafilatura"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/trawlhq/trawl/internal/htmlread"
)

// Main-content extraction. The choice of libraries and the thresholds below
// were made by measurement; see docs/content.md and eval_test.go.
//
//  1. If the page marks its main content with a single <main> or
//     role="main" landmark, only that subtree is considered.
//  2. The readeck port of Readability.js runs first (fast, and it returns
//     the page's own nodes, so code-block classes and tables survive).
//  3. If Readability kept implausibly little of the page's text, go-trafilatura
//     (FavorRecall, with Readability's result as its fallback candidate)
//     runs on the untouched tree, and its selection is mapped back onto the
//     page's own nodes (mapToOriginal), so the output keeps the page's markup.

const (
	// guardMinRunes: a Readability result shorter than this is a miss
	// (Readability.js itself retries below 500 characters).
	guardMinRunes = 500
	// guardMinShare: a Readability result with less than this share of the
	// scope's non-navigation text is a suspected miss.
	guardMinShare = 0.45
)

// extractor finds the main content of doc. It may mutate doc and may return
// a subtree of doc or a new tree. A nil node with a nil error means "nothing
// found".
type extractor func(doc *html.Node, pageURL *url.URL) (*html.Node, error)

// trafilaturaOptions are the options used for go-trafilatura: no date
// scanning (we never report a date, and htmldate's extensive mode is the
// slowest part of the library), tables, images and links kept.
func trafilaturaOptions(pageURL *url.URL, fallback bool, focus trafilatura.ExtractionFocus) trafilatura.Options {
	return trafilatura.Options{
		OriginalURL:     pageURL,
		EnableFallback:  fallback,
		Focus:           focus,
		ExcludeComments: true,
		IncludeImages:   true,
		IncludeLinks:    true,
		HtmlDateMode:    trafilatura.Disabled,
	}
}

// trafilaturaExtractor is go-trafilatura on its own (used by the evaluation).
func trafilaturaExtractor(fallback bool, focus trafilatura.ExtractionFocus) extractor {
	return func(doc *html.Node, pageURL *url.URL) (*html.Node, error) {
		res, err := trafilatura.ExtractDocument(doc, trafilaturaOptions(pageURL, fallback, focus))
		if err != nil {
			return nil, err
		}
		return res.ContentNode, nil
	}
}

// readabilityExtractor runs the readeck port of Readability.js. It mutates
// doc.
func readabilityExtractor(doc *html.Node, pageURL *url.URL) (*html.Node, error) {
	p := readability.NewParser()
	p.KeepClasses = true // code-block languages live in class names
	p.DisableJSONLD = true
	art, err := p.ParseAndMutate(doc, pageURL)
	if err != nil {
		return nil, err
	}
	return art.Node, nil
}

// extractConfig holds the tunables of extractMain; defaultExtract is what
// Process uses, the evaluation tries others.
type extractConfig struct {
	// mapReadability maps Readability's result back onto the page's
	// nodes (as for trafilatura) instead of using its tree.
	mapReadability bool
	// pruneBelow: a child block is pruned by mapToOriginal when less than
	// this share of its words are in the extractor's result.
	pruneBelow float64
	// noFallback disables the trafilatura fallback.
	noFallback bool
	// noLandmark ignores <main>/role="main".
	noLandmark bool
	// noPrecision skips the precision pass (precision.go).
	noPrecision bool
	// keepHeadline keeps (and restores) the headline of article pages,
	// as on other pages.
	keepHeadline bool
}

var defaultExtract = extractConfig{mapReadability: true, pruneBelow: 0.5}

// extractMain returns the element holding the main content of doc and the
// method that found it ("readability", "trafilatura" or "body"). doc is
// mutated. base resolves relative URLs.
func extractMain(doc *html.Node, base *url.URL, cfg extractConfig) (*html.Node, string) {
	body := findElem(doc, atom.Body)
	if body == nil {
		return doc, "body"
	}
	if lm := landmark(body); lm != nil && lm != body && !cfg.noLandmark {
		// Keep only the landmark: Readability then cannot wander into
		// the sidebar, and trafilatura sees less chrome.
		for c := body.FirstChild; c != nil; {
			next := c.NextSibling
			body.RemoveChild(c)
			c = next
		}
		detach(lm)
		body.AppendChild(lm)
	}
	lead := leadHeading(body)
	article := declaresArticle(doc)
	m, method := extractIn(doc, body, base, cfg)
	if !cfg.noPrecision && m != nil && m.Type == html.ElementNode {
		precisionPass(m, article)
	}
	if article && !cfg.keepHeadline {
		dropHeadline(m, lead, pageTitle(doc))
	} else {
		restoreHeading(m, lead)
	}
	return m, method
}

// dropHeadline removes an article's headline from the top of its body: on
// a page that declares an article, the headline is the Document's Title
// (and og:title), not body text, as in schema.org's articleBody and the
// article extractors (Readability, trafilatura). The headline is the
// first heading before any text, when it is the page's lead <h1> or
// its text is part of the page's title.
func dropHeadline(main, lead *html.Node, title string) {
	if main == nil || main.Type != html.ElementNode {
		return
	}
	var h *html.Node
	findFirst(main, func(n *html.Node) bool {
		if isHeading(n) {
			h = n
			return true
		}
		// Text before any heading: there is no headline on top.
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.TextNode && strings.TrimSpace(c.Data) != "" {
				return true
			}
		}
		return false
	})
	if h == nil || h == main {
		return
	}
	t := htmlread.InnerText(h)
	if t == "" {
		return
	}
	if lead != nil && htmlread.InnerText(lead) == t || strings.Contains(strings.ToLower(title), strings.ToLower(t)) {
		removeWithEmptyParents(h, main)
	}
}

// removeWithEmptyParents detaches n, then each ancestor below stop that it
// leaves without text or images.
func removeWithEmptyParents(n, stop *html.Node) {
	p := n.Parent
	detach(n)
	for p != nil && p != stop && visibleRunes(p, false) == 0 && findFirst(p, func(m *html.Node) bool { return m.DataAtom == atom.Img }) == nil {
		next := p.Parent
		detach(p)
		p = next
	}
}

// leadHeading returns the page's first <h1> outside navigation chrome.
func leadHeading(body *html.Node) *html.Node {
	var found *html.Node
	var walk func(*html.Node) bool
	walk = func(n *html.Node) bool {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type != html.ElementNode || isBoilerTag(c) {
				continue
			}
			if c.DataAtom == atom.H1 {
				found = c
				return true
			}
			if walk(c) {
				return true
			}
		}
		return false
	}
	walk(body)
	if found == nil || htmlread.InnerText(found) == "" {
		return nil
	}
	return clone(found)
}

// restoreHeading puts the page's lead heading back at the top of the
// content when the extractor dropped it (Readability removes a heading that
// repeats the <title>).
func restoreHeading(main, lead *html.Node) {
	if lead == nil || main == nil || main.Type != html.ElementNode {
		return
	}
	want := htmlread.InnerText(lead)
	if findFirst(main, func(n *html.Node) bool {
		switch n.DataAtom {
		case atom.H1, atom.H2, atom.H3:
			return htmlread.InnerText(n) == want
		}
		return false
	}) != nil {
		return
	}
	main.InsertBefore(lead, main.FirstChild)
}

func extractIn(doc, body *html.Node, base *url.URL, cfg extractConfig) (*html.Node, string) {
	scopeRunes := visibleRunes(body, true)

	// Readability mutates heavily; keep the original for the fallback.
	work := clone(doc)
	rnode, rerr := readabilityExtractor(work, base)
	if rerr == nil && rnode != nil {
		n := visibleRunes(rnode, false)
		ok := n >= guardMinRunes && float64(n) >= guardMinShare*float64(scopeRunes)
		// A short page: Readability's result is all there is.
		ok = ok || scopeRunes < guardMinRunes && n > 0 && float64(n) >= guardMinShare*float64(scopeRunes)
		if ok || cfg.noFallback {
			if cfg.mapReadability {
				if m := mapToOriginal(body, rnode, cfg.pruneBelow); m != nil {
					return m, "readability"
				}
			}
			return rnode, "readability"
		}
	}

	// Fallback: trafilatura, with Readability's result as its candidate so
	// that it does not run its own Readability and DOM Distiller.
	cand := rnode
	if cand == nil {
		cand = &html.Node{Type: html.ElementNode, Data: "div", DataAtom: atom.Div}
	}
	opts := trafilaturaOptions(base, true, trafilatura.FavorRecall)
	opts.FallbackCandidates = &trafilatura.FallbackCandidates{Readability: cand, Distiller: cand}
	res, err := trafilatura.ExtractDocument(doc, opts)
	if err != nil || res.ContentNode == nil {
		if rnode != nil {
			return rnode, "readability"
		}
		return body, "body"
	}
	tBest, tStats := bestMatch(body, res.ContentNode)
	if rnode != nil && tBest != nil && linkList(res.ContentNode) && prose(rnode) {
		// The fallback found a list of links where Readability found
		// prose. If the two are apart on the page, the list is a menu
		// beside a short article: keep the prose. (A list around the
		// prose, such as a chapter's table of contents after its
		// introduction, is the content.)
		if rBest, rStats := bestMatch(body, rnode); rBest != nil && !isAncestor(rBest, tBest) && !isAncestor(tBest, rBest) && rBest != tBest {
			prune(rBest, rStats, cfg.pruneBelow)
			return rBest, "readability"
		}
	}
	if tBest != nil {
		prune(tBest, tStats, cfg.pruneBelow)
		return tBest, "trafilatura"
	}
	if rnode != nil {
		return rnode, "readability"
	}
	return body, "body"
}

// linkList reports an extraction that is mostly link text. Extractors
// build their trees without atoms, so links are found by name.
func linkList(n *html.Node) bool {
	all := visibleRunes(n, false)
	if all == 0 {
		return false
	}
	links := 0
	for _, a := range findAll(nil, n, func(n *html.Node) bool { return n.Type == html.ElementNode && n.Data == "a" }) {
		links += visibleRunes(a, false)
	}
	return float64(links) > 0.5*float64(all)
}

// prose reports an extraction of some length that is mostly not links.
func prose(n *html.Node) bool { return visibleRunes(n, false) >= 200 && linkDensity(n) < 0.25 }

// landmark returns the single <main> or role="main" element below body
// when it holds a meaningful amount of text, or nil.
func landmark(body *html.Node) *html.Node {
	mains := findAll(nil, body, func(n *html.Node) bool {
		return (n.DataAtom == atom.Main && n.Namespace == "") || attr(n, "role") == "main"
	})
	if len(mains) == 0 {
		return nil
	}
	// Nested landmarks (<main><div role=main>) count once: take the outermost.
	m := mains[0]
	for _, o := range mains[1:] {
		if !isAncestor(m, o) {
			return nil
		}
	}
	if visibleRunes(m, false) < 200 {
		return nil
	}
	return m
}

func isAncestor(a, n *html.Node) bool {
	for p := n.Parent; p != nil; p = p.Parent {
		if p == a {
			return true
		}
	}
	return false
}

// wordsOf calls fn for each lower-cased word token of s.
func wordsOf(s string, fn func(w string)) {
	start := -1
	for i, r := range s {
		alnum := unicode.IsLetter(r) || unicode.IsDigit(r)
		if alnum && start < 0 {
			start = i
		} else if !alnum && start >= 0 {
			fn(strings.ToLower(s[start:i]))
			start = -1
		}
	}
	if start >= 0 {
		fn(strings.ToLower(s[start:]))
	}
}

// tokStats counts the words below an element: total, those in the
// extractor's vocabulary (words), and those whose pair with the word
// before is one of the extractor's pairs not yet taken (hits).
type tokStats struct{ hits, words, total int }

// mapToOriginal finds, below root, the page's own element whose words best
// match the words of extracted (a tree built by another extractor), and
// prunes from it the child blocks that the extractor left out. Code blocks
// and data tables inside the chosen element are kept even when the
// extractor dropped them. It returns nil if nothing matches.
//
// The element is chosen by words (F1 of the word multisets' overlap): the
// vocabulary is forgiving, so the chosen element is the whole content even
// when the extractor rewrote or dropped parts of it (a table it kept alone).
// Blocks are pruned by word pairs, each pair of the extractor's text
// matching at most as many times as it occurs there, in document order: a
// block that repeats the article (a hidden copy, a teaser, a caption that
// quotes it) finds its pairs already taken by the article itself.
func mapToOriginal(root, extracted *html.Node, pruneBelow float64) *html.Node {
	best, stats := bestMatch(root, extracted)
	if best == nil {
		return nil
	}
	prune(best, stats, pruneBelow)
	return best
}

// bestMatch is the first half of mapToOriginal: the page's element that
// best matches extracted, and the word counts of every element below root.
func bestMatch(root, extracted *html.Node) (*html.Node, map[*html.Node]tokStats) {
	// Words are interned: a pair of word ids is one uint64 key. Id 0 is
	// "no word yet" and words outside the extractor's vocabulary.
	vocab := map[string]uint32{}
	pairs := map[uint64]int32{}
	nWant := 0
	var prev uint32
	var collect func(*html.Node)
	collect = func(n *html.Node) {
		if n.Type == html.TextNode {
			wordsOf(n.Data, func(w string) {
				id, ok := vocab[w]
				if !ok {
					id = uint32(len(vocab) + 1)
					vocab[w] = id
				}
				pairs[uint64(prev)<<32|uint64(id)]++
				prev = id
				nWant++
			})
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			collect(c)
		}
	}
	collect(extracted)
	if nWant == 0 {
		return nil, nil
	}

	stats := map[*html.Node]tokStats{}
	var best *html.Node
	bestF := 0.0
	prev = 0
	var walk func(*html.Node) tokStats
	walk = func(n *html.Node) tokStats {
		var s tokStats
		if n.Type == html.TextNode {
			wordsOf(n.Data, func(w string) {
				id := vocab[w]
				s.total++
				if id != 0 {
					s.words++
					if k := uint64(prev)<<32 | uint64(id); pairs[k] > 0 {
						pairs[k]--
						s.hits++
					}
				}
				prev = id
			})
			return s
		}
		if htmlread.NotText(n) {
			return s
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			cs := walk(c)
			s.hits += cs.hits
			s.words += cs.words
			s.total += cs.total
		}
		if n.Type == html.ElementNode {
			stats[n] = s
			if f := 2 * float64(s.words) / float64(s.total+nWant); f > bestF {
				best, bestF = n, f
			}
		}
		return s
	}
	walk(root)
	return best, stats
}

// prune removes the child elements of n that are mostly words the
// extractor did not keep, and navigation chrome (by tag, ARIA role, or
// class/id, with mostly-link text) that the word test alone would keep when
// it repeats words of the content. It descends into mixed children. Blocks
// of one or two words (headings such as "Synopsis") are kept.
func prune(n *html.Node, stats map[*html.Node]tokStats, below float64) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		if c.Type == html.ElementNode {
			s := stats[c]
			switch {
			case s.total == 0 || protected(c):
			case isBoilerTag(c) || looksLikeNav(c) && linkDensity(c) > 0.3:
				n.RemoveChild(c)
			case s.total >= 3 && float64(blockHits(c, s)) < below*float64(s.total):
				switch {
				case isHeading(c):
					// Extractors drop a heading that repeats the
					// page's title; it is still the section's title.
				case findFirst(c, func(n *html.Node) bool { return protected(n) || isHeading(n) }) != nil:
					// A wrapper of a code block, a table or a heading
					// (DocBook's div.table, div.titlepage): keep those.
					prune(c, stats, below)
				default:
					n.RemoveChild(c)
				}
			case s.hits < s.total:
				prune(c, stats, below)
			}
		}
		c = next
	}
}

func isHeading(n *html.Node) bool {
	switch n.DataAtom {
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		return true
	}
	return false
}

// blockHits is how many of a block's words count as kept by the
// extractor: its matched word pairs, except in link lists (a table of
// contents, an index), which extractors rewrite or cut and whose entries
// are short: there any word of the extractor's vocabulary counts.
func blockHits(n *html.Node, s tokStats) int {
	if s.hits < s.words && linkDensity(n) >= 0.5 {
		return s.words
	}
	return s.hits
}

// navNames are class/id fragments of navigation chrome (after
// Readability's "unlikely candidates").
var navNames = []string{
	"nav", "menu", "breadcrumb", "sidebar", "footer", "header", "banner",
	"pagination", "pager", "related", "social", "share", "cookie", "consent",
	"gdpr", "popup", "skip", "toolbar", "masthead", "subscribe", "newsletter",
}

func looksLikeNav(n *html.Node) bool {
	s := strings.ToLower(attr(n, "class") + " " + attr(n, "id"))
	if strings.TrimSpace(s) == "" {
		return false
	}
	for _, w := range navNames {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// linkDensity is the share of n's text that sits inside links.
func linkDensity(n *html.Node) float64 {
	all := visibleRunes(n, false)
	if all == 0 {
		return 0
	}
	links := 0
	for _, a := range findAll(nil, n, func(n *html.Node) bool { return n.DataAtom == atom.A }) {
		links += visibleRunes(a, false)
	}
	return float64(links) / float64(all)
}

// protected reports blocks that are kept whenever their container is: code
// blocks and data tables, which extractors are prone to drop.
func protected(n *html.Node) bool {
	switch n.DataAtom {
	case atom.Pre:
		return true
	case atom.Table:
		return isDataTable(n)
	case atom.Dl:
		// A definition list with its descriptions (DocBook's
		// variablelist of settings, an API's entries) is the reference
		// page's content: Readability's conditional cleaning drops
		// whole ones it finds few commas in. A list of links is not.
		return linkDensity(n) < 0.5
	case atom.Div:
		// Sphinx: <div class="highlight-python3"><div class="highlight"><pre>
		var only *html.Node
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.ElementNode {
				if only != nil {
					return false
				}
				only = c
			}
		}
		return only != nil && protected(only)
	}
	return false
}

// isDataTable reports tables that hold data rather than layout: a header
// cell, a caption, or at least two rows of two cells, and no nested table.
func isDataTable(t *html.Node) bool {
	if r := attr(t, "role"); r == "presentation" || r == "none" {
		return false
	}
	header, nested := false, false
	rows, wide := 0, 0
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type != html.ElementNode {
				continue
			}
			switch c.DataAtom {
			case atom.Table:
				nested = true
				continue
			case atom.Th, atom.Caption, atom.Thead:
				header = true
			case atom.Tr:
				rows++
				cells := 0
				for d := c.FirstChild; d != nil; d = d.NextSibling {
					if isElem(d, atom.Td) || isElem(d, atom.Th) {
						cells++
					}
				}
				if cells >= 2 {
					wide++
				}
			}
			walk(c)
		}
	}
	walk(t)
	return !nested && (header || wide >= 2)
}

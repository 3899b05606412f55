package extract

import (
	"encoding/json"
	"net/url"
	"regexp"
	"sort"
	"strings"

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
	// heading is the page's headline, where the article starts.
	heading string
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

// ---- JSON-LD

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
			p.add(k, v, src+1) // the bare name, a little less sure
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

// ---- microdata

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

// ---- RDFa Lite (property on elements other than <meta>)

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

// ---- OpenGraph and <meta>

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

// ---- headings and the title

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
			best, bestScore = t, s
		}
		return i < 20
	})
	switch {
	case best != "" && (title == "" || bestScore >= 0.3):
		p.add("heading", best, srcHeading)
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

// ---- tables, definition lists, lists under a heading

// Bounds of the tables read from one page.
const (
	maxTables    = 200
	maxTableRows = 2000
)

func (p *page) tables(doc *goquery.Document) {
	for ti, t := range htmlread.Tables(doc.Nodes[0]) {
		if ti >= maxTables {
			break
		}
		headRow, rows := t.Header, t.Rows
		if nonEmpty(headRow) < 2 {
			// One heading over the table is a title, not column names.
			if headRow != nil {
				rows = append([][]string{headRow}, rows...)
			}
			headRow = nil
		}
		rows = rows[:min(len(rows), maxTableRows)]
		if headRow != nil && len(rows) > 0 {
			l := recordList{src: srcTable}
			for _, r := range rows {
				var rec []fact
				for j, c := range r {
					if j < len(headRow) && headRow[j] != "" && c != "" {
						rec = append(rec, fact{key: words(headRow[j]), val: c, src: srcTable})
					}
				}
				l.records = append(l.records, rec)
			}
			p.lists = append(p.lists, l)
			if len(rows) == 1 {
				p.facts = append(p.facts, l.records[0]...)
			}
			if len(headRow) > 2 {
				continue
			}
		}
		// Two-column rows are label/value pairs.
		for _, r := range rows {
			if r = trimRow(r); len(r) == 2 && r[0] != "" && len(r[0]) < 80 {
				p.add(strings.TrimSuffix(r[0], ":"), r[1], srcTable)
			}
		}
	}
	doc.Find("dl").Each(func(_ int, dl *goquery.Selection) {
		var key string
		dl.Find("dt, dd").Each(func(_ int, s *goquery.Selection) {
			if goquery.NodeName(s) == "dt" {
				key = strings.TrimSuffix(htmlread.Collapse(visibleText(s)), ":")
				return
			}
			if key != "" {
				p.add(key, visibleText(s), srcTable)
			}
		})
	})
	doc.Find("h2, h3, h4, h5, h6, p > strong:only-child, p > b:only-child").Each(func(_ int, h *goquery.Selection) {
		anchor := h
		if n := goquery.NodeName(h); n == "strong" || n == "b" {
			anchor = h.Parent()
		}
		list := anchor.NextAllFiltered("ul, ol").First()
		if list.Length() == 0 || anchor.NextUntil("ul, ol").Filter("h1, h2, h3, h4, h5, h6, p, div").Length() > 0 {
			return
		}
		var items []any
		list.ChildrenFiltered("li").Each(func(_ int, li *goquery.Selection) {
			if t := htmlread.Collapse(visibleText(li)); t != "" {
				items = append(items, t)
			}
		})
		if len(items) > 0 {
			p.add(strings.TrimSuffix(htmlread.Collapse(visibleText(h)), ":"), items, srcTable)
		}
	})
}

// nonEmpty counts the cells of a row that hold text.
func nonEmpty(row []string) int {
	n := 0
	for _, c := range row {
		if c != "" {
			n++
		}
	}
	return n
}

// trimRow drops a row's empty cells at its end: the grid's padding of a
// short row.
func trimRow(row []string) []string {
	for len(row) > 0 && row[len(row)-1] == "" {
		row = row[:len(row)-1]
	}
	return row
}

// ---- label: value lines

var (
	reLabel = regexp.MustCompile(`^([A-Za-z\p{L}][\p{L}\p{N} ./&()'-]{0,40}?)\s*[:：]\s+(\S.{0,300})$`)
	reBy    = regexp.MustCompile(`^(?i:by|written by|posted by|words by|story by)\s+(\p{Lu}[\p{L}.'-]*(?:\s+(?:\p{Lu}[\p{L}.'-]*|de|van|von|der|da|la|and|&|,)){0,8})`)
)

func (p *page) labels(text string) {
	n := 0
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || len(line) > 400 {
			continue
		}
		if n++; n > 5000 {
			return
		}
		if i := strings.IndexAny(line, ":："); i > 0 && i < 64 {
			if m := reLabel.FindStringSubmatch(line); m != nil && !strings.HasPrefix(m[2], "//") {
				p.add(m[1], m[2], srcLabel)
				continue
			}
		}
		if c := line[0] | 0x20; (c == 'b' || c == 'w' || c == 'p' || c == 's') && strings.Contains(strings.ToLower(line[:min(len(line), 12)]), "by ") {
			m := reBy.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			p.add("by", cleanByline(m[1]), srcLabel)
		}
	}
}

// cleanByline trims what follows a name in a byline.
func cleanByline(s string) string {
	s = htmlread.Collapse(s)
	for _, cut := range []string{" | ", " – ", " — ", " - ", " Updated", " Published", " Posted", " on ", " at "} {
		if i := strings.Index(s, cut); i > 0 {
			s = s[:i]
		}
	}
	s = strings.TrimSpace(strings.TrimRight(s, ",;:|&"))
	for _, pre := range []string{"By ", "by ", "BY ", "Written by ", "Posted by "} {
		s = strings.TrimPrefix(s, pre)
	}
	return strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(s, " and"), ","))
}

// authorName is the name in an author element's text: its first line
// that is not "By", cut before a handle, a date or a role.
func authorName(text string) string {
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if l := strings.ToLower(strings.TrimRight(line, ":")); l == "" || l == "by" || l == "author" || l == "written by" || l == "posted by" {
			continue
		}
		if i := strings.IndexAny(line, "@|/•·"); i > 0 {
			line = line[:i]
		}
		if m := reDigit.FindStringIndex(line); m != nil && m[0] > 0 {
			line = line[:m[0]]
		}
		for _, role := range []string{"Staff Writer", "Staff Reporter", "Contributor", "View More Articles", "More Articles", "Biography", "Follow", "Updated", "Published", "Posted"} {
			if i := strings.Index(line, role); i > 0 {
				line = line[:i]
			}
		}
		if mi := reMonthWord.FindStringIndex(line); mi != nil && mi[0] > 0 {
			line = line[:mi[0]]
		}
		line = cleanByline(line)
		if line == "" || len(line) > 80 {
			return ""
		}
		return line
	}
	return ""
}

var (
	reDigit     = regexp.MustCompile(`\d`)
	reMonthWord = regexp.MustCompile(`\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*\b|\b(?:January|February|March|April|June|July|August|September|October|November|December)\b`)
)

// ---- class, id, rel and itemprop hints

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

// ---- repeated sibling blocks (cards, rows, list items)

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

// visibleText is the text of a selection as a reader sees it, one block a
// line (htmlread.VisibleText).
func visibleText(s *goquery.Selection) string { return htmlread.VisibleText(s.Nodes...) }

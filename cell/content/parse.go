package content

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Limits that keep hostile markup from blowing up the table grid.
const (
	maxSpan      = 100   // colspan/rowspan beyond this is clamped
	maxTableCols = 1000  // cells per row
	maxTableRows = 10000 // rows per table
)

// parse collects the requested parse data from the whole document in one
// walk. It does not modify doc.
func parse(doc *html.Node, pageURL, base *url.URL, opts ParseOptions) *Parsed {
	p := &Parsed{}
	c := collector{page: pageURL, base: base, opts: opts, p: p, seenLink: map[string]int{}, seenMedia: map[string]bool{}}
	if opts.Metadata {
		p.Metadata = &Metadata{}
	}
	c.walk(doc)
	if m := p.Metadata; m != nil {
		if m.Description == "" {
			m.Description = m.OpenGraph["og:description"]
		}
		if m.Title == "" {
			m.Title = m.OpenGraph["og:title"]
		}
		if m.Language == "" {
			m.Language = c.contentLanguage
		}
	}
	return p
}

type collector struct {
	page, base      *url.URL
	opts            ParseOptions
	p               *Parsed
	seenLink        map[string]int // href → index in p.Links
	seenMedia       map[string]bool
	contentLanguage string
	inHead          bool
}

func (c *collector) walk(n *html.Node) {
	if n.Type == html.ElementNode && n.Namespace == "" {
		switch n.DataAtom {
		case atom.A, atom.Area:
			if c.opts.Links {
				c.link(n)
			}
		case atom.Img:
			if c.opts.Media {
				c.image(n)
			}
		case atom.Video, atom.Audio:
			if c.opts.Media {
				c.av(n)
			}
		case atom.Table:
			if c.opts.Tables {
				c.table(n)
			}
		case atom.Html:
			if c.opts.Metadata {
				c.p.Metadata.Language = strings.TrimSpace(attr(n, "lang"))
			}
		case atom.Title:
			if c.opts.Metadata && c.p.Metadata.Title == "" && !c.inSVG(n) {
				c.p.Metadata.Title = collapsedText(titleText(n))
			}
		case atom.Meta:
			if c.opts.Metadata {
				c.meta(n)
			}
		case atom.Link:
			if c.opts.Metadata && c.p.Metadata.Canonical == "" && relHas(attr(n, "rel"), "canonical") {
				c.p.Metadata.Canonical = resolve(c.base, attr(n, "href"))
			}
		case atom.Script:
			if c.opts.Metadata && strings.EqualFold(strings.TrimSpace(attr(n, "type")), "application/ld+json") {
				c.jsonLD(n)
			}
			return
		case atom.Style, atom.Template:
			return
		}
	}
	for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
		c.walk(ch)
	}
}

func (c *collector) inSVG(n *html.Node) bool {
	for p := n.Parent; p != nil; p = p.Parent {
		if p.Namespace != "" {
			return true
		}
	}
	return false
}

// titleText wraps the raw text of a <title> so collapsedText can read it
// (skipText hides <title> itself).
func titleText(n *html.Node) *html.Node {
	w := &html.Node{Type: html.ElementNode, Data: "span", DataAtom: atom.Span}
	for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
		if ch.Type == html.TextNode {
			w.AppendChild(&html.Node{Type: html.TextNode, Data: ch.Data})
		}
	}
	return w
}

func relHas(rel, want string) bool {
	for _, r := range strings.Fields(rel) {
		if strings.EqualFold(r, want) {
			return true
		}
	}
	return false
}

// link records an <a>/<area> link. Kept: http(s) links, made absolute
// against the base URL, with the fragment removed, once per URL (the first
// non-empty text wins), plus mailto: and tel: links as written (external).
// Dropped: links without href, fragment-only links (they point into the
// page itself), and javascript:, vbscript: and data: links, which do not
// name a resource.
func (c *collector) link(n *html.Node) {
	raw := cleanRef(attr(n, "href"))
	if raw == "" || strings.HasPrefix(raw, "#") {
		return
	}
	var href string
	internal := false
	switch scheme(raw) {
	case "javascript", "vbscript", "data", "blob", "about":
		return
	case "mailto", "tel", "sms":
		href = raw
	default:
		ref, err := url.Parse(raw)
		if err != nil {
			return
		}
		u := c.base.ResolveReference(ref)
		if s := u.Scheme; s != "http" && s != "https" && s != "" {
			// ftp:, file: and the like: keep, they name resources.
			href = u.String()
			break
		}
		u.Fragment, u.RawFragment = "", ""
		href = u.String()
		internal = u.Host != "" && strings.EqualFold(u.Hostname(), c.page.Hostname())
	}
	text := collapsedText(n)
	if text == "" {
		text = collapseSpace(attr(n, "title"))
	}
	if text == "" {
		text = collapseSpace(attr(n, "aria-label"))
	}
	if text == "" {
		if img := findElem(n, atom.Img); img != nil {
			text = collapseSpace(attr(img, "alt"))
		}
	}
	if n.DataAtom == atom.Area && text == "" {
		text = collapseSpace(attr(n, "alt"))
	}
	if i, ok := c.seenLink[href]; ok {
		if c.p.Links[i].Text == "" {
			c.p.Links[i].Text = text
		}
		return
	}
	c.seenLink[href] = len(c.p.Links)
	c.p.Links = append(c.p.Links, Link{Href: href, Text: text, Internal: internal})
}

func (c *collector) addMedia(m Media) {
	if m.Src == "" {
		return
	}
	key := m.Kind + " " + m.Src
	if c.seenMedia[key] {
		return
	}
	c.seenMedia[key] = true
	c.p.Media = append(c.p.Media, m)
}

// image records an <img>: src, else a lazy-loading data-src, else the first
// srcset candidate; data: URIs are skipped.
func (c *collector) image(n *html.Node) {
	src := strings.TrimSpace(attr(n, "src"))
	if src == "" || strings.HasPrefix(src, "data:") {
		src = strings.TrimSpace(attr(n, "data-src"))
	}
	if src == "" {
		src = firstSrcset(attr(n, "srcset"))
	}
	if src == "" || strings.HasPrefix(src, "data:") {
		return
	}
	c.addMedia(Media{
		Kind:  "image",
		Src:   resolve(c.base, src),
		Alt:   collapseSpace(attr(n, "alt")),
		Title: collapseSpace(attr(n, "title")),
	})
}

// av records a <video> or <audio>: its src, else each <source> child.
func (c *collector) av(n *html.Node) {
	kind := "video"
	if n.DataAtom == atom.Audio {
		kind = "audio"
	}
	m := Media{Kind: kind, Title: collapseSpace(attr(n, "title"))}
	if p := attr(n, "poster"); p != "" {
		m.Poster = resolve(c.base, p)
	}
	if src := attr(n, "src"); src != "" {
		m.Src = resolve(c.base, src)
		c.addMedia(m)
		return
	}
	for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
		if isElem(ch, atom.Source) {
			if src := attr(ch, "src"); src != "" {
				m.Src = resolve(c.base, src)
				c.addMedia(m)
			}
		}
	}
}

// meta records description, Open Graph (og:*) and Twitter (twitter:*)
// properties, and the Content-Language pragma. Open Graph uses property=,
// Twitter name=, but pages mix them up, so both are read. The first value
// of a repeated key wins.
func (c *collector) meta(n *html.Node) {
	m := c.p.Metadata
	content := strings.TrimSpace(attr(n, "content"))
	if strings.EqualFold(attr(n, "http-equiv"), "content-language") && c.contentLanguage == "" {
		c.contentLanguage = strings.TrimSpace(strings.Split(content, ",")[0])
		return
	}
	for _, key := range []string{attr(n, "property"), attr(n, "name")} {
		key = strings.ToLower(strings.TrimSpace(key))
		switch {
		case key == "description":
			if m.Description == "" {
				m.Description = collapseSpace(content)
			}
		case strings.HasPrefix(key, "og:"):
			if m.OpenGraph == nil {
				m.OpenGraph = map[string]string{}
			}
			if _, ok := m.OpenGraph[key]; !ok {
				m.OpenGraph[key] = content
			}
		case strings.HasPrefix(key, "twitter:"):
			if m.Twitter == nil {
				m.Twitter = map[string]string{}
			}
			if _, ok := m.Twitter[key]; !ok {
				m.Twitter[key] = content
			}
		default:
			continue
		}
		return
	}
}

// jsonLD records a JSON-LD script if it is valid JSON (compacted); invalid
// ones are skipped.
func (c *collector) jsonLD(n *html.Node) {
	var b strings.Builder
	for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
		if ch.Type == html.TextNode {
			b.WriteString(ch.Data)
		}
	}
	raw := strings.TrimSpace(b.String())
	// Some CMSs wrap the JSON in an HTML comment or CDATA marker.
	for _, w := range [][2]string{{"<!--", "-->"}, {"<![CDATA[", "]]>"}, {"//<![CDATA[", "//]]>"}} {
		if strings.HasPrefix(raw, w[0]) && strings.HasSuffix(raw, w[1]) {
			raw = strings.TrimSpace(raw[len(w[0]) : len(raw)-len(w[1])])
		}
	}
	var out bytes.Buffer
	if raw == "" || json.Compact(&out, []byte(raw)) != nil {
		return
	}
	c.p.Metadata.JSONLD = append(c.p.Metadata.JSONLD, json.RawMessage(out.Bytes()))
}

// table records a data table as text cells. Layout tables are skipped:
// role="presentation"/"none", tables containing tables, and tables of a
// single cell. The header is the first row of <thead>, else the first row
// if all its cells are <th>. Spanning cells put their text in the first
// column/row they cover and "" in the others, so every row has a cell per
// column.
func (c *collector) table(t *html.Node) {
	if r := attr(t, "role"); r == "presentation" || r == "none" {
		return
	}
	if findFirst(t, func(n *html.Node) bool { return n != t && n.DataAtom == atom.Table }) != nil {
		return
	}
	var caption string
	var head, body []*html.Node
	for ch := t.FirstChild; ch != nil; ch = ch.NextSibling {
		if ch.Type != html.ElementNode {
			continue
		}
		switch ch.DataAtom {
		case atom.Caption:
			caption = collapsedText(ch)
		case atom.Thead:
			head = append(head, rowsOf(ch)...)
		case atom.Tbody, atom.Tfoot:
			body = append(body, rowsOf(ch)...)
		case atom.Tr:
			body = append(body, ch)
		}
	}
	rows := append(head, body...)
	if len(rows) > maxTableRows {
		rows = rows[:maxTableRows]
	}
	grid := tableGrid(rows)
	cells := 0
	for _, r := range grid {
		cells += len(r)
	}
	if cells <= 1 {
		return
	}
	tbl := Table{Caption: caption}
	start := 0
	switch {
	case len(head) > 0:
		tbl.Header = grid[0]
		// Further <thead> rows (multi-row headers) stay as data rows.
		start = 1
	case len(rows) > 0 && allHeaderCells(rows[0]):
		tbl.Header = grid[0]
		start = 1
	}
	tbl.Rows = grid[start:]
	if tbl.Rows == nil {
		tbl.Rows = [][]string{}
	}
	c.p.Tables = append(c.p.Tables, tbl)
}

func rowsOf(section *html.Node) []*html.Node {
	var rows []*html.Node
	for ch := section.FirstChild; ch != nil; ch = ch.NextSibling {
		if isElem(ch, atom.Tr) {
			rows = append(rows, ch)
		}
	}
	return rows
}

func cellsOf(tr *html.Node) []*html.Node {
	var cells []*html.Node
	for ch := tr.FirstChild; ch != nil; ch = ch.NextSibling {
		if isElem(ch, atom.Td) || isElem(ch, atom.Th) {
			cells = append(cells, ch)
		}
	}
	return cells
}

func allHeaderCells(tr *html.Node) bool {
	cells := cellsOf(tr)
	for _, c := range cells {
		if c.DataAtom != atom.Th {
			return false
		}
	}
	return len(cells) > 0
}

func span(n *html.Node, key string) int {
	v, err := strconv.Atoi(strings.TrimSpace(attr(n, key)))
	if err != nil || v < 1 {
		return 1
	}
	return min(v, maxSpan)
}

// tableGrid lays rows out on a grid, honouring colspan and rowspan, and
// pads every row to the widest.
func tableGrid(rows []*html.Node) [][]string {
	// A colspan wider than the widest row is noise (or hostile).
	widest := 1
	for _, tr := range rows {
		widest = max(widest, len(cellsOf(tr)))
	}
	grid := make([][]string, len(rows))
	filled := make([][]bool, len(rows))
	width := 0
	for r, tr := range rows {
		col := 0
		for _, cell := range cellsOf(tr) {
			for col < len(filled[r]) && filled[r][col] {
				col++
			}
			if col >= maxTableCols {
				break
			}
			text := collapsedText(cell)
			cs, rs := min(span(cell, "colspan"), widest), span(cell, "rowspan")
			for dr := 0; dr < rs && r+dr < len(rows); dr++ {
				for dc := 0; dc < cs && col+dc < maxTableCols; dc++ {
					v := ""
					if dr == 0 && dc == 0 {
						v = text
					}
					put(&grid[r+dr], &filled[r+dr], col+dc, v)
				}
			}
			col += cs
		}
		width = max(width, len(grid[r]))
	}
	for r := range grid {
		for len(grid[r]) < width {
			grid[r] = append(grid[r], "")
		}
	}
	return grid
}

func put(row *[]string, filled *[]bool, col int, v string) {
	for len(*row) <= col {
		*row = append(*row, "")
		*filled = append(*filled, false)
	}
	(*row)[col] = v
	(*filled)[col] = true
}

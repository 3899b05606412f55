package content

import (
	"strconv"
	"strings"
	"sync"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/strikethrough"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/trawlhq/trawl/internal/htmlread"
)

// markdownConverter is built once: it holds configuration only, and
// ConvertNode keeps its per-call state on the stack, so sharing it between
// goroutines is safe.
var markdownConverter = sync.OnceValue(func() *converter.Converter {
	return converter.NewConverter(converter.WithPlugins(
		base.NewBasePlugin(),
		commonmark.NewCommonmarkPlugin(
			commonmark.WithHeadingStyle(commonmark.HeadingStyleATX),
			commonmark.WithBulletListMarker("-"),
			commonmark.WithCodeBlockFence("```"),
			// The default separates adjacent lists with an HTML comment.
			commonmark.WithListEndComment(false),
		),
		strikethrough.NewStrikethroughPlugin(),
		table.NewTablePlugin(
			table.WithSpanCellBehavior(table.SpanBehaviorEmpty),
			table.WithHeaderPromotion(true),
			table.WithCellPaddingBehavior(table.CellPaddingBehaviorMinimal),
			table.WithSkipEmptyRows(true),
		),
	))
})

// toMarkdown converts the cleaned content tree to Markdown. It rewrites
// table cells in place (see flattenCell), so it runs after the HTML has
// been rendered.
func toMarkdown(root *html.Node) (string, error) {
	for _, t := range findAll(nil, root, func(n *html.Node) bool { return n.DataAtom == atom.Table }) {
		prepareTable(t)
	}
	out, err := markdownConverter().ConvertNode(root)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(out))
	if s == "" {
		return "", nil
	}
	return s + "\n", nil
}

// prepareTable makes a table convertible to a GFM table: a GFM cell is one
// line of inline content, so block content inside cells (paragraphs, lists,
// line breaks, code blocks) is flattened to inline content separated by
// spaces. Tables that contain tables are layout and are left alone (the
// converter then writes their rows as text).
func prepareTable(t *html.Node) {
	if htmlread.HoldsTable(t) {
		return
	}
	width := maxRowCells(t)
	for _, cell := range findAll(nil, t, func(n *html.Node) bool {
		return n.DataAtom == atom.Td || n.DataAtom == atom.Th
	}) {
		flattenCell(cell)
		// A colspan wider than the table is noise (or hostile).
		if htmlread.Span(cell, "colspan") > width {
			setAttr(cell, "colspan", strconv.Itoa(width))
		}
		if htmlread.Span(cell, "rowspan") > 1 && attr(cell, "rowspan") != strconv.Itoa(htmlread.Span(cell, "rowspan")) {
			setAttr(cell, "rowspan", strconv.Itoa(htmlread.Span(cell, "rowspan")))
		}
	}
	// The converter writes a caption after the table; DocBook and others
	// put a title before it, which reads better, so move it out in front.
	if c := findFirst(t, func(n *html.Node) bool { return n.DataAtom == atom.Caption }); c != nil && t.Parent != nil {
		detach(c)
		p := &html.Node{Type: html.ElementNode, Data: "p", DataAtom: atom.P}
		for c.FirstChild != nil {
			ch := c.FirstChild
			c.RemoveChild(ch)
			p.AppendChild(ch)
		}
		t.Parent.InsertBefore(p, t)
	}
}

func flattenCell(n *html.Node) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		if c.Type == html.ElementNode {
			switch c.DataAtom {
			case atom.Br, atom.Hr:
				n.InsertBefore(&html.Node{Type: html.TextNode, Data: " "}, c)
				n.RemoveChild(c)
			case atom.Pre:
				// A code block in a cell becomes inline code.
				var b strings.Builder
				preText(&b, c)
				code := &html.Node{Type: html.ElementNode, Data: "code", DataAtom: atom.Code}
				code.AppendChild(&html.Node{Type: html.TextNode, Data: htmlread.Collapse(b.String())})
				n.InsertBefore(&html.Node{Type: html.TextNode, Data: " "}, c)
				n.InsertBefore(code, c)
				n.InsertBefore(&html.Node{Type: html.TextNode, Data: " "}, c)
				n.RemoveChild(c)
			case atom.P, atom.Div, atom.Ul, atom.Ol, atom.Li, atom.Dl, atom.Dt, atom.Dd,
				atom.Blockquote, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6,
				atom.Section, atom.Article, atom.Header, atom.Footer, atom.Figure, atom.Figcaption,
				atom.Table, atom.Tbody, atom.Thead, atom.Tfoot, atom.Tr, atom.Td, atom.Th, atom.Caption:
				flattenCell(c)
				n.InsertBefore(&html.Node{Type: html.TextNode, Data: " "}, c)
				for c.FirstChild != nil {
					ch := c.FirstChild
					c.RemoveChild(ch)
					n.InsertBefore(ch, c)
				}
				n.InsertBefore(&html.Node{Type: html.TextNode, Data: " "}, c)
				n.RemoveChild(c)
			default:
				flattenCell(c)
			}
		} else if c.Type == html.TextNode && strings.ContainsAny(c.Data, "\n\r") {
			c.Data = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(c.Data)
		}
		c = next
	}
}

// maxRowCells is the largest number of cells in one row of t (at least 1).
func maxRowCells(t *html.Node) int {
	w := 1
	for _, tr := range findAll(nil, t, func(n *html.Node) bool { return n.DataAtom == atom.Tr }) {
		w = max(w, len(htmlread.Cells(tr)))
	}
	return w
}

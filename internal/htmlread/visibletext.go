package htmlread

import (
	"strings"
	"unicode"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Collapse folds every run of white space in s to one space and trims it.
func Collapse(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// NotText reports elements whose text is never a page's visible content:
// scripts, styles, templates, noscript, the head and the title.
func NotText(n *html.Node) bool {
	if n.Type != html.ElementNode {
		return false
	}
	switch n.DataAtom {
	case atom.Script, atom.Style, atom.Template, atom.Noscript, atom.Head, atom.Title:
		return true
	}
	return false
}

// InnerText is the text below n, NotText elements aside, white space
// collapsed: a cell's, a link's or a caption's text (cell/content).
func InnerText(n *html.Node) string {
	var b strings.Builder
	writeText(&b, n, NotText, 0)
	return Collapse(b.String())
}

// FieldText is the text of n with a space between block elements, white
// space collapsed: what a json_css text field reads (Crawl4AI's
// get_text(strip=True) glues "<li>a</li><li>b</li>" into "ab"; this gives
// "a b"). Only code and templates are left out, so an element of the head
// (a <title>) has its text.
func FieldText(n *html.Node) string {
	var b strings.Builder
	writeText(&b, n, isCode, ' ')
	return Collapse(b.String())
}

// VisibleText is the text of nodes as a reader sees it, one block a line:
// no code, head, embedded objects, or hidden elements (hidden,
// aria-hidden="true"); each line's white space collapsed, empty lines
// dropped.
func VisibleText(nodes ...*html.Node) string {
	var b strings.Builder
	for _, n := range nodes {
		writeText(&b, n, isUnseen, '\n')
	}
	lines := strings.Split(b.String(), "\n")
	out := lines[:0]
	for _, l := range lines {
		if l = Collapse(l); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// writeText is the one walk behind the readers: the text below n, less
// the elements skip reports, with brk (unless 0) on both sides of a block
// element.
func writeText(b *strings.Builder, n *html.Node, skip func(*html.Node) bool, brk byte) {
	switch n.Type {
	case html.TextNode:
		b.WriteString(n.Data)
		return
	case html.ElementNode:
		if skip(n) {
			return
		}
	}
	block := brk != 0 && n.Type == html.ElementNode && blockElems[n.DataAtom]
	if block {
		b.WriteByte(brk)
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		writeText(b, c, skip, brk)
	}
	if block {
		b.WriteByte(brk)
	}
}

func isCode(n *html.Node) bool {
	switch n.DataAtom {
	case atom.Script, atom.Style, atom.Noscript, atom.Template:
		return true
	}
	return false
}

func isUnseen(n *html.Node) bool {
	switch n.DataAtom {
	case atom.Head, atom.Svg, atom.Iframe, atom.Object:
		return true
	}
	if isCode(n) {
		return true
	}
	for _, a := range n.Attr {
		if a.Key == "hidden" || (a.Key == "aria-hidden" && a.Val == "true") {
			return true
		}
	}
	return false
}

// blockElems start a new block of text.
var blockElems = map[atom.Atom]bool{
	atom.Address: true, atom.Article: true, atom.Aside: true, atom.Blockquote: true,
	atom.Br: true, atom.Dd: true, atom.Div: true, atom.Dl: true, atom.Dt: true,
	atom.Figcaption: true, atom.Figure: true, atom.Footer: true, atom.Form: true,
	atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true,
	atom.Header: true, atom.Hr: true, atom.Li: true, atom.Main: true, atom.Nav: true,
	atom.Ol: true, atom.P: true, atom.Pre: true, atom.Section: true, atom.Table: true,
	atom.Td: true, atom.Th: true, atom.Tr: true, atom.Ul: true, atom.Option: true,
}

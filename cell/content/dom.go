package content

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/trawlhq/trawl/internal/htmlread"
)

// Small helpers over golang.org/x/net/html. Everything here works on the
// tree in place; none of it re-parses or re-serialises.

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
			return true
		}
	}
	return false
}

func setAttr(n *html.Node, key, val string) {
	for i, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
			n.Attr[i].Val = val
			return
		}
	}
	n.Attr = append(n.Attr, html.Attribute{Key: key, Val: val})
}

// hasClass reports whether the class attribute of n contains name.
func hasClass(n *html.Node, name string) bool {
	for _, c := range strings.Fields(attr(n, "class")) {
		if c == name {
			return true
		}
	}
	return false
}

func isElem(n *html.Node, a atom.Atom) bool {
	return n != nil && n.Type == html.ElementNode && n.DataAtom == a && n.Namespace == ""
}

// findFirst returns the first element (document order) for which match is
// true, or nil.
func findFirst(n *html.Node, match func(*html.Node) bool) *html.Node {
	if n.Type == html.ElementNode && match(n) {
		return n
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if f := findFirst(c, match); f != nil {
			return f
		}
	}
	return nil
}

// findAll appends to dst every element below (and including) n for which
// match is true, in document order.
func findAll(dst []*html.Node, n *html.Node, match func(*html.Node) bool) []*html.Node {
	if n.Type == html.ElementNode && match(n) {
		dst = append(dst, n)
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		dst = findAll(dst, c, match)
	}
	return dst
}

func findElem(n *html.Node, a atom.Atom) *html.Node {
	return findFirst(n, func(n *html.Node) bool { return n.DataAtom == a && n.Namespace == "" })
}

// detach removes n from its parent, if any.
func detach(n *html.Node) {
	if n.Parent != nil {
		n.Parent.RemoveChild(n)
	}
}

// unwrap replaces n by its children.
func unwrap(n *html.Node) {
	p := n.Parent
	if p == nil {
		return
	}
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		n.RemoveChild(c)
		p.InsertBefore(c, n)
		c = next
	}
	p.RemoveChild(n)
}

func clone(n *html.Node) *html.Node {
	m := &html.Node{
		Type:      n.Type,
		DataAtom:  n.DataAtom,
		Data:      n.Data,
		Namespace: n.Namespace,
	}
	if len(n.Attr) > 0 {
		m.Attr = make([]html.Attribute, len(n.Attr))
		copy(m.Attr, n.Attr)
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		m.AppendChild(clone(c))
	}
	return m
}

// visibleRunes counts non-space runes of text below n, skipping elements
// that are boilerplate by their tag alone when boiler is true.
func visibleRunes(n *html.Node, boiler bool) int {
	if n == nil {
		return 0
	}
	if n.Type == html.TextNode {
		c := 0
		for i := 0; i < len(n.Data); {
			r, size := utf8.DecodeRuneInString(n.Data[i:])
			if !unicode.IsSpace(r) {
				c++
			}
			i += size
		}
		return c
	}
	if htmlread.NotText(n) || (boiler && isBoilerTag(n)) {
		return 0
	}
	c := 0
	for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
		c += visibleRunes(ch, boiler)
	}
	return c
}

// isBoilerTag reports elements that are navigation or chrome by their tag or
// ARIA role alone.
func isBoilerTag(n *html.Node) bool {
	if n.Type != html.ElementNode {
		return false
	}
	switch n.DataAtom {
	case atom.Nav, atom.Header, atom.Footer, atom.Aside, atom.Form, atom.Button, atom.Select, atom.Textarea, atom.Input:
		return true
	}
	switch attr(n, "role") {
	case "navigation", "banner", "contentinfo", "complementary", "search":
		return true
	}
	return false
}

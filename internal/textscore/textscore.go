// Package textscore scores extracted text against a truth, the one way
// trawl's quality measurements do: the metadata evaluation
// (cell/extract's TestEvalMetadata) and bench/metaeval.
package textscore

import (
	"bytes"
	"regexp"
	"strings"

	"golang.org/x/net/html"
)

var reTok = regexp.MustCompile(`[\p{L}\p{N}_]+`)

// Tokens are s's words (letters, digits, underscore), case folded.
func Tokens(s string) []string { return reTok.FindAllString(strings.ToLower(s), -1) }

// TokenF1 is the F1 of got's tokens against want's (a bag of words); 0
// when either has none.
func TokenF1(got, want string) float64 {
	g, w := Tokens(got), Tokens(want)
	if len(g) == 0 || len(w) == 0 {
		return 0
	}
	count := map[string]int{}
	for _, x := range w {
		count[x]++
	}
	common := 0
	for _, x := range g {
		if count[x] > 0 {
			count[x]--
			common++
		}
	}
	if common == 0 {
		return 0
	}
	p, r := float64(common)/float64(len(g)), float64(common)/float64(len(w))
	return 2 * p * r / (p + r)
}

// NormName is a person's name as compared: its tokens, space separated.
func NormName(s string) string { return strings.Join(Tokens(s), " ") }

// StripTags is the page src with every <meta> tag and every JSON-LD
// script removed: the page as the metadata evaluations read it when a
// page's own structured data is not to be the answer (src when it does
// not parse).
func StripTags(src string) string {
	root, err := html.Parse(strings.NewReader(src))
	if err != nil {
		return src
	}
	var drop []*html.Node
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "meta":
				// The encoding declarations stay: they say how to read
				// the page's bytes, nothing about the article.
				if !isCharset(n) {
					drop = append(drop, n)
				}
			case "script":
				for _, a := range n.Attr {
					if a.Key == "type" && strings.Contains(strings.ToLower(a.Val), "ld+json") {
						drop = append(drop, n)
						break
					}
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
	for _, n := range drop {
		n.Parent.RemoveChild(n)
	}
	var b bytes.Buffer
	if err := html.Render(&b, root); err != nil {
		return src
	}
	return b.String()
}

// isCharset: a <meta charset> or <meta http-equiv="Content-Type">.
func isCharset(n *html.Node) bool {
	for _, a := range n.Attr {
		if strings.EqualFold(a.Key, "charset") || strings.EqualFold(a.Key, "http-equiv") && strings.EqualFold(a.Val, "content-type") {
			return true
		}
	}
	return false
}

package monitor

import (
	"bytes"
	"net/url"
	"regexp"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/trawlhq/trawl/cell/content"
)

// minMainWords: main content with fewer words of text than this is a page
// the extractor found little in (a hub of links, an index): MainContent
// then keeps the whole body without its navigation.
const minMainWords = 80

// MainContent is what a monitor compares: the page's main content as
// Markdown (cell/content). A page whose extracted main content is nearly
// empty — an index made of link lists, which the extractor drops as
// boilerplate — is read instead as its whole body without the parts that
// are navigation by their element or their name (nav, header, footer,
// aside; ids and classes naming nav, menu, breadcrumb, header, footer,
// sidebar, cookie, banner or a language bar), so a change of its links is
// still seen.
func MainContent(page []byte, pageURL *url.URL) (string, error) {
	doc, err := content.Process(page, pageURL, content.Options{})
	if err != nil {
		return "", err
	}
	if words(doc.Markdown) >= minMainWords {
		return doc.Markdown, nil
	}
	root, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		return doc.Markdown, nil
	}
	stripNavigation(root)
	var b bytes.Buffer
	if err := html.Render(&b, root); err != nil {
		return doc.Markdown, nil
	}
	body, err := content.Process(b.Bytes(), pageURL, content.Options{KeepBoilerplate: true})
	if err != nil || words(body.Markdown) <= words(doc.Markdown) {
		return doc.Markdown, nil
	}
	return body.Markdown, nil
}

var (
	reMDLink = regexp.MustCompile(`\]\([^)]*\)`)
	reNavID  = regexp.MustCompile(`(?i)(^|[-_ ])(nav|navbar|navigation|menu|breadcrumbs?|header|footer|sidebar|cookies?|banner|toplang|bottomlang|lang(uages?)?)($|[-_ ])`)
)

func words(md string) int { return len(strings.Fields(reMDLink.ReplaceAllString(md, "]"))) }

func stripNavigation(n *html.Node) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		if c.Type == html.ElementNode && isNavigation(c) {
			n.RemoveChild(c)
		} else {
			stripNavigation(c)
		}
		c = next
	}
}

func isNavigation(n *html.Node) bool {
	switch n.DataAtom {
	case atom.Nav, atom.Header, atom.Footer, atom.Aside, atom.Script, atom.Style, atom.Noscript:
		return true
	}
	for _, a := range n.Attr {
		switch a.Key {
		case "role":
			if a.Val == "navigation" || a.Val == "banner" || a.Val == "contentinfo" {
				return true
			}
		case "id", "class":
			for _, tok := range strings.Fields(a.Val) {
				if reNavID.MatchString(tok) {
					return true
				}
			}
		}
	}
	return false
}

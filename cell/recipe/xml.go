package recipe

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"

	"github.com/trawlhq/trawl/internal/htmlread"
)

// maxXMLDepth bounds the nesting of an XML page.
const maxXMLDepth = 256

// parseXML reads an XML page (a sitemap, an RSS or Atom feed) into the
// same tree HTML pages become, so CSS selectors work on both: element and
// attribute names are their local names in lower case (dc:creator is
// "creator"), text and CDATA are text.
func parseXML(body []byte) (*html.Node, error) {
	dec := xml.NewDecoder(bytes.NewReader(body))
	dec.Strict = false
	dec.CharsetReader = charset.NewReaderLabel
	doc := &html.Node{Type: html.DocumentNode}
	cur := doc
	depth := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if doc.FirstChild != nil {
				break // what was read before the error
			}
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			if depth > maxXMLDepth {
				return nil, errors.New("xml nested too deep")
			}
			n := &html.Node{Type: html.ElementNode, Data: strings.ToLower(t.Name.Local)}
			for _, a := range t.Attr {
				if a.Name.Space == "xmlns" || a.Name.Local == "xmlns" {
					continue
				}
				n.Attr = append(n.Attr, html.Attribute{Key: strings.ToLower(a.Name.Local), Val: a.Value})
			}
			cur.AppendChild(n)
			cur = n
		case xml.EndElement:
			if cur.Parent != nil {
				cur = cur.Parent
				depth--
			}
		case xml.CharData:
			if cur != doc {
				cur.AppendChild(&html.Node{Type: html.TextNode, Data: string(t)})
			}
		}
	}
	return doc, nil
}

// nodeText is an element's text as json_css reads it.
func nodeText(n *html.Node) string { return htmlread.FieldText(n) }

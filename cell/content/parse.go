package content

import (
	"net/url"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/trawlhq/trawl/internal/htmlread"
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
				if t, ok := htmlread.ReadTable(n); ok {
					c.p.Tables = append(c.p.Tables, t)
				}
			}
		case atom.Html:
			if c.opts.Metadata {
				c.p.Metadata.Language = strings.TrimSpace(attr(n, "lang"))
			}
		case atom.Title:
			if c.opts.Metadata && c.p.Metadata.Title == "" && !c.inSVG(n) {
				c.p.Metadata.Title = htmlread.InnerText(titleText(n))
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
			if c.opts.Metadata && htmlread.IsJSONLD(n) {
				if v, ok := htmlread.JSONLDScript(n); ok {
					c.p.Metadata.JSONLD = append(c.p.Metadata.JSONLD, v)
				}
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
	text := htmlread.InnerText(n)
	if text == "" {
		text = htmlread.Collapse(attr(n, "title"))
	}
	if text == "" {
		text = htmlread.Collapse(attr(n, "aria-label"))
	}
	if text == "" {
		if img := findElem(n, atom.Img); img != nil {
			text = htmlread.Collapse(attr(img, "alt"))
		}
	}
	if n.DataAtom == atom.Area && text == "" {
		text = htmlread.Collapse(attr(n, "alt"))
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
		Alt:   htmlread.Collapse(attr(n, "alt")),
		Title: htmlread.Collapse(attr(n, "title")),
	})
}

// av records a <video> or <audio>: its src, else each <source> child.
func (c *collector) av(n *html.Node) {
	kind := "video"
	if n.DataAtom == atom.Audio {
		kind = "audio"
	}
	m := Media{Kind: kind, Title: htmlread.Collapse(attr(n, "title"))}
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
				m.Description = htmlread.Collapse(content)
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

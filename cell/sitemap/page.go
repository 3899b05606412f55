package sitemap

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"
)

// Bounds of one page's parse.
const (
	maxPageLinks = 10000 // links kept from one page
	maxTextRunes = 300   // of a title, description or anchor text
)

// anchor is one <a href> of a page, not yet resolved.
type anchor struct{ href, text string }

// pageResult is a fetched page: ok when it answered 2xx.
type pageResult struct {
	status      int
	err         error
	base        *url.URL // what its links resolve against
	title       string
	description string
	links       []anchor
}

func (p *pageResult) ok() bool {
	return p != nil && p.err == nil && p.status >= 200 && p.status <= 299
}

// cause says why p is not ok.
func (p *pageResult) cause() error {
	switch {
	case p == nil:
		return fmt.Errorf("start page not fetched")
	case p.err != nil:
		return p.err
	default:
		return fmt.Errorf("status %d", p.status)
	}
}

// getPage fetches u and, when it is HTML, reads its title, description and
// links.
func (m *mapper) getPage(ctx context.Context, u string) *pageResult {
	base, _ := url.Parse(u)
	status, ct, body, err := m.get(ctx, u)
	p := &pageResult{status: status, err: err, base: base}
	if !p.ok() || !isHTML(ct, body) {
		return p
	}
	if int64(len(body)) > m.b.MaxBodyBytes {
		body = body[:m.b.MaxBodyBytes]
		m.markTruncated()
	}
	parsePage(p, body, ct)
	m.mu.Lock()
	m.pages++
	m.mu.Unlock()
	return p
}

func isHTML(contentType string, body []byte) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "" {
		mt, _, _ = mime.ParseMediaType(http.DetectContentType(body))
	}
	return mt == "text/html" || mt == "application/xhtml+xml"
}

// parsePage reads the title, description, <base> and links of an HTML
// document into p. It streams tokens: no tree is built.
func parsePage(p *pageResult, body []byte, contentType string) {
	var r io.Reader = bytes.NewReader(body)
	if !utf8.Valid(body) {
		if cr, err := charset.NewReader(r, contentType); err == nil {
			r = cr
		}
	}
	z := html.NewTokenizer(r)
	var (
		title, ogDesc     string
		inTitle, seenBase bool
		cur               *anchor // the <a> being read
		text              strings.Builder
		skip              int // depth in <script>, <style>, <template>, <svg>
	)
	closeAnchor := func() {
		if cur != nil {
			cur.text = clip(text.String())
			if len(p.links) < maxPageLinks {
				p.links = append(p.links, *cur)
			}
			cur = nil
		}
	}
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			closeAnchor()
			if p.title = clip(title); p.description == "" {
				p.description = clip(ogDesc)
			}
			return
		case html.TextToken:
			switch {
			case inTitle:
				if len(title) < 4*maxTextRunes {
					title += string(z.Text())
				}
			case cur != nil && skip == 0 && text.Len() < 4*maxTextRunes:
				text.Write(z.Text())
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			a := atom.Lookup(name)
			attr := func() map[string]string {
				out := map[string]string{}
				for more := hasAttr; more; {
					var k, v []byte
					k, v, more = z.TagAttr()
					if _, dup := out[string(k)]; !dup {
						out[string(k)] = string(v)
					}
				}
				return out
			}
			switch a {
			case atom.Script, atom.Style, atom.Template, atom.Svg, atom.Noscript:
				if tt == html.StartTagToken {
					skip++
				}
			case atom.Title:
				inTitle = tt == html.StartTagToken && skip == 0 && title == ""
			case atom.Base:
				if h, ok := attr()["href"]; ok && !seenBase {
					seenBase = true
					if b, err := p.base.Parse(strings.TrimSpace(h)); err == nil {
						p.base = b
					}
				}
			case atom.Meta:
				at := attr()
				key := at["name"]
				if key == "" {
					key = at["property"]
				}
				switch strings.ToLower(key) {
				case "description":
					if p.description == "" {
						p.description = clip(at["content"])
					}
				case "og:description":
					ogDesc = at["content"]
				}
			case atom.A:
				closeAnchor()
				if h, ok := attr()["href"]; ok && skip == 0 {
					cur = &anchor{href: h}
					text.Reset()
					if tt == html.SelfClosingTagToken {
						closeAnchor()
					}
				}
			case atom.Img:
				if cur != nil && strings.TrimSpace(text.String()) == "" {
					text.WriteString(attr()["alt"])
				}
			case atom.Br, atom.P, atom.Div, atom.Li, atom.Span:
				if cur != nil {
					text.WriteByte(' ')
				}
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			switch atom.Lookup(name) {
			case atom.Script, atom.Style, atom.Template, atom.Svg, atom.Noscript:
				if skip > 0 {
					skip--
				}
			case atom.Title:
				inTitle = false
			case atom.A:
				closeAnchor()
			}
		}
	}
}

// clip collapses s's white space and cuts it to maxTextRunes.
func clip(s string) string {
	s = strings.Join(strings.FieldsFunc(s, unicode.IsSpace), " ")
	if utf8.RuneCountInString(s) > maxTextRunes {
		r := []rune(s)
		s = strings.TrimSpace(string(r[:maxTextRunes-1])) + "…"
	}
	return s
}

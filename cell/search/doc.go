// Package search is a cell's search index: the pages the cell archived,
// as their main content, in a bleve index on disk (BM25 over title,
// headings, anchor text, URL words and body, with boosts), and what a
// query needs beside the ranked list: the passage of each page that best
// answers it with the matched words marked, near-duplicate collapsing,
// spelling correction from the index's own term dictionary, and the parts
// of the rich block a page can give (entity, follow-up questions, related
// queries, news/videos/discussions by schema.org type).
//
// The gate merges the answers of its region's live cells (gate/search);
// docs/search.md says how the pieces fit and how ranking was tuned.
package search

import (
	"encoding/json"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/trawlhq/trawl/cell/content"
)

// Doc is one page as the index holds it.
type Doc struct {
	URL      string   `json:"url"`
	Title    string   `json:"title"`
	Headings []string `json:"headings,omitempty"`
	Body     string   `json:"body"`
	// Anchors is the text of links from other pages to this one.
	Anchors []string `json:"anchors,omitempty"`
	// Lang is the page's language (html lang), Type its schema.org type
	// from JSON-LD ("NewsArticle", "VideoObject", "QAPage", …).
	Lang string `json:"lang,omitempty"`
	Type string `json:"type,omitempty"`
	// Date is when the page says it was published or modified, else when
	// it was fetched.
	Date time.Time `json:"date"`
	// Description is the page's meta description.
	Description string `json:"description,omitempty"`
	// JSONLD is the page's first JSON-LD object (for the entity block).
	JSONLD string `json:"jsonld,omitempty"`
	// Links are the page's outgoing links with their text (for the anchor
	// text of the pages they point to).
	Links []content.Link `json:"-"`
	// Fetched is when the cell fetched it (the index's watermark).
	Fetched time.Time `json:"-"`

	// prepared is the document as the index mapping reads it but for the
	// anchor text (Prepare), computed before Add takes the index's lock.
	prepared map[string]any
	// words are the page's distinct words, lower-cased (Prepare), for the
	// did_you_mean dictionary.
	words []string
	// notDefs are the body's lines (by number) that define no name
	// (FromMarkdown): a line that is one link (a table of contents, a
	// menu: a name there points to where it is defined) and a line of
	// code (an example uses names).
	notDefs map[int]bool
	// defs are the definitions read back from the index (docOf), for
	// indexing the page again without its Markdown (nav is gone then).
	defs      []string
	defsKnown bool
}

// FromHTML builds the Doc of an HTML page fetched from pageURL (its final
// URL) at fetched.
func FromHTML(page []byte, pageURL string, fetched time.Time) (*Doc, error) {
	u, err := url.Parse(pageURL)
	if err != nil {
		return nil, err
	}
	cd, err := content.Process(page, u, content.Options{Parse: content.ParseOptions{Links: true, Metadata: true}})
	if err != nil {
		return nil, err
	}
	return FromContent(cd, pageURL, fetched), nil
}

// FromContent builds the Doc of a page from its converted content (parsed
// with links and metadata).
func FromContent(cd *content.Document, pageURL string, fetched time.Time) *Doc {
	d := FromMarkdown(pageURL, cd.Title, cd.Markdown, fetched)
	if p := cd.Parsed; p != nil {
		d.Links = p.Links
		if m := p.Metadata; m != nil {
			d.Lang, d.Description = m.Language, m.Description
			for _, raw := range m.JSONLD {
				typ, date := jsonLDType(raw)
				if typ == "" {
					continue
				}
				if d.Type == "" {
					d.Type, d.JSONLD = typ, string(raw)
				}
				if !date.IsZero() {
					d.Date = date
				}
			}
		}
	}
	return d
}

// FromMarkdown builds a Doc from a page's main content as Markdown.
func FromMarkdown(pageURL, title, md string, fetched time.Time) *Doc {
	d := &Doc{URL: pageURL, Title: strings.TrimSpace(title), Date: fetched.UTC(), Fetched: fetched.UTC()}
	body := make([]byte, 0, len(md)+len(md)/16)
	var raw []byte // appendPlain's scratch, one for the page
	fence := ""    // the fence of the code block the line is in
	n := -1        // the line's number
	for line := range strings.SplitSeq(md, "\n") {
		n++
		t := strings.TrimSpace(line)
		// A line of code that starts with # is a comment (Python, shell),
		// not a heading: read as a heading, every commented line of a
		// page's examples weighed as a heading and was taken for a name
		// the page defines.
		if f := codeFence(t); f != "" && (fence == "" || strings.HasPrefix(t, fence) && strings.TrimLeft(t, f[:1]) == "") {
			if fence == "" {
				fence = f
			} else {
				fence = ""
			}
		} else if fence == "" && strings.HasPrefix(t, "#") {
			at := len(body)
			h := strings.TrimSpace(strings.TrimLeft(t, "#"))
			body, raw = appendPlain(body, raw, h)
			if h != "" {
				d.Headings = append(d.Headings, string(body[at:]))
			}
			body = append(body, ".\n"...)
			continue
		}
		if fence != "" || linkLine(t) {
			if d.notDefs == nil {
				d.notDefs = map[int]bool{}
			}
			d.notDefs[n] = true
		}
		body, raw = appendPlain(body, raw, t)
		body = append(body, '\n')
	}
	d.Body = string(body)
	if d.Title == "" && len(d.Headings) > 0 {
		d.Title = d.Headings[0]
	}
	return d
}

// wordBefore reports whether s[i] follows a letter or digit, past a
// Markdown escape's backslash.
func wordBefore(s string, i int) bool {
	if i > 0 && s[i-1] == '\\' {
		i--
	}
	return i > 0 && isWord(rune(s[i-1]))
}

// linkLine reports whether a Markdown line is one link, alone or as a
// list item: "- [`XMLBuilder`](builders.html#XMLBuilder)".
func linkLine(t string) bool {
	t = strings.TrimLeft(t, "-*+0123456789. ")
	return strings.HasPrefix(t, "[") && strings.HasSuffix(t, ")") && strings.Count(t, "](") == 1
}

// codeFence is the fence a Markdown line opens or closes a code block
// with (three or more ` or ~), or "".
func codeFence(t string) string {
	for _, c := range []string{"`", "~"} {
		n := len(t) - len(strings.TrimLeft(t, c))
		if n >= 3 {
			return t[:n]
		}
	}
	return ""
}

// appendPlain appends s to dst stripped of the Markdown that would
// otherwise be read as words (link targets, emphasis and code marks, table
// pipes, list bullets), its words joined by single spaces (raw is scratch,
// returned for the next call): one pass for the marks, one for the spaces,
// and no allocation once the buffers are grown (it runs for every page
// indexed: docs/performance.md, "Search").
func appendPlain(dst, raw []byte, s string) ([]byte, []byte) {
	raw = raw[:0]
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '*', '`', '|', '>':
			raw = append(raw, ' ')
			continue
		case '_':
			// Keep identifiers (snake_case, and c\_extra\_keywords as
			// Markdown escapes it); drop emphasis at word edges.
			if wordBefore(s, i) && i+1 < len(s) && isWord(rune(s[i+1])) {
				raw = append(raw, c)
			} else {
				raw = append(raw, ' ')
			}
			continue
		case ']':
			// [text](target): keep the text, drop the target.
			if i+1 < len(s) && s[i+1] == '(' {
				if j := strings.IndexByte(s[i+1:], ')'); j > 0 {
					i += j + 1
					continue
				}
			}
			// A bracket that is text separates words: Sphinx's
			// "Builder[source]" (a name and its source link) is two words,
			// not "Buildersource".
			raw = append(raw, ' ')
			continue
		case '[':
			raw = append(raw, ' ')
			continue
		case '!':
			if i+1 >= len(s) || s[i+1] != '[' {
				raw = append(raw, c)
			}
			continue
		case '\\':
			continue
		}
		raw = append(raw, c)
	}
	// The words of raw (strings.Fields) joined by single spaces, less a
	// leading "- " (a list bullet).
	start, word := len(dst), false
	for i := 0; i < len(raw); {
		c := raw[i]
		n, sp := 1, false
		if c < utf8.RuneSelf {
			sp = !fieldBytes[c]
		} else {
			var r rune
			r, n = utf8.DecodeRune(raw[i:])
			sp = unicode.IsSpace(r)
		}
		if sp {
			word = false
		} else {
			if !word && len(dst) > start {
				dst = append(dst, ' ')
			}
			word = true
			dst = append(dst, raw[i:i+n]...)
		}
		i += n
	}
	if len(dst)-start >= 2 && dst[start] == '-' && dst[start+1] == ' ' {
		dst = append(dst[:start], dst[start+2:]...)
	}
	return dst, raw
}

func isWord(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// jsonLDType is the schema.org @type of a JSON-LD object (the first of an
// array or @graph) and its date.
func jsonLDType(raw json.RawMessage) (string, time.Time) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "", time.Time{}
	}
	obj := firstObject(v)
	if obj == nil {
		return "", time.Time{}
	}
	typ := ""
	switch t := obj["@type"].(type) {
	case string:
		typ = t
	case []any:
		if len(t) > 0 {
			typ, _ = t[0].(string)
		}
	}
	var date time.Time
	for _, k := range []string{"dateModified", "datePublished", "uploadDate"} {
		if s, ok := obj[k].(string); ok {
			if t, err := time.Parse(time.RFC3339, s); err == nil {
				date = t.UTC()
				break
			}
			if t, err := time.Parse("2006-01-02", s); err == nil {
				date = t.UTC()
				break
			}
		}
	}
	return typ, date
}

func firstObject(v any) map[string]any {
	switch t := v.(type) {
	case map[string]any:
		if g, ok := t["@graph"].([]any); ok && len(g) > 0 {
			return firstObject(g[0])
		}
		return t
	case []any:
		if len(t) > 0 {
			return firstObject(t[0])
		}
	}
	return nil
}

// urlWords are the words of a URL's host and path ("docs.python.org/3/library/os.path.html"
// → "docs python org 3 library os path").
func urlWords(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	s := p.Host + " " + p.Path
	s = strings.TrimSuffix(strings.TrimSuffix(s, ".html"), ".htm")
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return !isWord(r) }), " ")
}

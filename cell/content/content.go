// Package content turns a fetched page into its main content: cleaned HTML,
// Markdown, and optional parse data (links, media, metadata, tables).
//
// Everything here is a pure function of the page bytes and its URL: no I/O,
// no clock, no global mutable state. Process is safe for concurrent use.
package content

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"runtime"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/trawlhq/trawl/internal/htmlread"
)

// ParseOptions selects the parse data that Process collects from the whole
// page (not only the main content).
type ParseOptions struct {
	Links    bool `json:"links,omitempty"`
	Media    bool `json:"media,omitempty"`
	Metadata bool `json:"metadata,omitempty"`
	Tables   bool `json:"tables,omitempty"`
}

// Any reports whether any parse data is requested.
func (p ParseOptions) Any() bool { return p.Links || p.Media || p.Metadata || p.Tables }

// Options configures Process. The zero value extracts main content only and
// no parse data.
type Options struct {
	// Parse selects the parse data to collect.
	Parse ParseOptions
	// KeepBoilerplate keeps the whole <body> (navigation, header, footer,
	// sidebars) instead of extracting the main content.
	KeepBoilerplate bool
}

// Document is the result of Process.
type Document struct {
	// Title is the page's <title>, else og:title, else its first <h1>.
	Title string
	// HTML is the main content as an HTML fragment: scripts, styles and
	// forms removed, links and images absolute.
	HTML string
	// Markdown is the main content as GitHub-flavoured Markdown. On a
	// page that declares an article (og:type article, JSON-LD Article),
	// the headline is Title, not part of the Markdown; other pages keep
	// their lead <h1>.
	Markdown string
	// Parsed is nil unless Options.Parse.Any().
	Parsed *Parsed
	// Method says which extractor chose the main content: "readability",
	// "trafilatura", or "body" (nothing better found, or KeepBoilerplate).
	Method string
}

// Parsed is parse data from the whole page.
type Parsed struct {
	Links    []Link    `json:"links,omitempty"`
	Media    []Media   `json:"media,omitempty"`
	Metadata *Metadata `json:"metadata,omitempty"`
	Tables   []Table   `json:"tables,omitempty"`
}

// Link is a hyperlink of the page. Href is absolute, without fragment; see
// collectLinks for which links are kept.
type Link struct {
	Href     string `json:"href"`
	Text     string `json:"text"`
	Internal bool   `json:"internal"`
}

// Media is an image, video or audio element of the page.
type Media struct {
	Kind   string `json:"kind"` // image, video or audio
	Src    string `json:"src"`
	Alt    string `json:"alt,omitempty"`
	Title  string `json:"title,omitempty"`
	Poster string `json:"poster,omitempty"`
}

// Metadata is the page's own description of itself.
type Metadata struct {
	Title       string            `json:"title,omitempty"`
	Description string            `json:"description,omitempty"`
	Language    string            `json:"language,omitempty"`
	Canonical   string            `json:"canonical,omitempty"`
	OpenGraph   map[string]string `json:"open_graph,omitempty"`
	Twitter     map[string]string `json:"twitter,omitempty"`
	JSONLD      []json.RawMessage `json:"json_ld,omitempty"`
}

// Table is a table of the page as text cells.
type Table = htmlread.Table

// Process extracts the main content of page, a UTF-8 HTML document fetched
// from pageURL (the final URL, after redirects). Relative URLs are resolved
// against the page's <base href> if it has one, else against pageURL. A nil
// pageURL leaves relative URLs relative.
//
// page is not retained or modified.
//
// At most GOMAXPROCS conversions run at once in the process (slots); a call
// beyond them waits for one to end.
func Process(page []byte, pageURL *url.URL, opts Options) (*Document, error) {
	slots <- struct{}{}
	defer func() { <-slots }()
	d, _, err := process(page, pageURL, opts, defaultExtract)
	return d, err
}

// slots bounds the conversions running at once to the cores Go runs on. A
// conversion is CPU work from start to end (parse, extract, render), so
// more at once share the same cores and are no faster in total, while each
// holds its page's trees in memory: a job's 16 fetches converting at once
// held 16 pages' trees. Fetches are not bounded by it, only the conversion
// after one. (Measured beside the search indexer: neither the job's rate
// nor the indexer's moved; docs/performance.md, "This round: indexing,
// third pass".)
var slots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))

// process is Process with the extraction tunables exposed; it also returns
// the main-content tree (after Markdown conversion) for the evaluation.
func process(page []byte, pageURL *url.URL, opts Options, cfg extractConfig) (*Document, *html.Node, error) {
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		return nil, nil, fmt.Errorf("parse html: %w", err)
	}
	if pageURL == nil {
		pageURL = &url.URL{}
	}
	base := baseURL(doc, pageURL)

	d := &Document{Title: pageTitle(doc)}
	// Parse data reads the whole page, so it runs before extraction
	// mutates the tree.
	if opts.Parse.Any() {
		d.Parsed = parse(doc, pageURL, base, opts.Parse)
	}
	// Mark code-block languages on the <pre> itself: extractors drop or
	// flatten the wrappers that carry them.
	annotateCode(doc)

	var main *html.Node
	if opts.KeepBoilerplate {
		main = findElem(doc, atom.Body)
		if main == nil {
			main = doc
		}
		d.Method = "body"
	} else {
		main, d.Method = extractMain(doc, base, cfg)
	}

	cleanContent(main, base)
	var b strings.Builder
	for c := main.FirstChild; c != nil; c = c.NextSibling {
		if err := html.Render(&b, c); err != nil {
			return nil, nil, fmt.Errorf("render html: %w", err)
		}
	}
	d.HTML = b.String()

	md, err := toMarkdown(main)
	if err != nil {
		return nil, nil, fmt.Errorf("convert to markdown: %w", err)
	}
	d.Markdown = md
	return d, main, nil
}

// Hash returns "sha256:" and the lower-case hex SHA-256 of the Markdown's
// bytes: the content's identity for change detection.
func Hash(markdown string) string {
	sum := sha256.Sum256([]byte(markdown))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// pageTitle is the document's <title>, else og:title, else its first <h1>.
func pageTitle(doc *html.Node) string {
	if t := findFirst(doc, func(n *html.Node) bool {
		return n.DataAtom == atom.Title && n.Namespace == ""
	}); t != nil {
		var b strings.Builder
		for c := t.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.TextNode {
				b.WriteString(c.Data)
			}
		}
		if s := htmlread.Collapse(b.String()); s != "" {
			return s
		}
	}
	if m := findFirst(doc, func(n *html.Node) bool {
		return n.DataAtom == atom.Meta && (attr(n, "property") == "og:title" || attr(n, "name") == "og:title")
	}); m != nil {
		if s := htmlread.Collapse(attr(m, "content")); s != "" {
			return s
		}
	}
	if h := findElem(doc, atom.H1); h != nil {
		return htmlread.InnerText(h)
	}
	return ""
}

// Package pdftext turns a PDF into text: the text layer of each page, read
// by github.com/ledongthuc/pdf, and the Markdown and HTML a scrape answers
// with (pages in order, separated by a blank line or by Firecrawl's page
// markers). It reads no images: a scanned PDF without a text layer gives
// empty pages (there is no OCR).
//
// A PDF comes from any site, so reading one is bounded. The body is
// already capped by the fetch engine (--max-page-bytes). Each page's
// content streams and font maps are decompressed and measured before the
// page is read, and a page over MaxPageContent fails the PDF (a
// decompression bomb stops there, after reading MaxPageContent bytes);
// the text of all pages together is capped by MaxText. A conversion has a
// deadline (Timeout and the caller's context), checked between pages.
// The library cannot be interrupted inside a page, and a crafted file can
// make it loop (an object stream that extends itself): the conversion runs
// on its own goroutine, Convert returns at the deadline whatever it is
// doing, and at most Concurrency conversions run at once, so that files
// which never finish hold at most that many cores. A PDF waits for a free
// slot within its deadline, then fails with ErrBusy.
package pdftext

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/ledongthuc/pdf"
)

// Defaults for Config.
const (
	DefaultTimeout        = 30 * time.Second
	DefaultMaxPageContent = 16 << 20
	DefaultMaxText        = 10 << 20
	DefaultConcurrency    = 2
)

// Errors of Convert, to be tested with errors.Is.
var (
	// ErrUnreadable means the bytes are not a PDF the library can read
	// (corrupt, encrypted, an unsupported filter).
	ErrUnreadable = errors.New("the PDF could not be read")
	// ErrTooLarge means a page's content, or the text of the pages, is
	// over the converter's bounds.
	ErrTooLarge = errors.New("the PDF is larger than this cell converts")
	// ErrTimeout means the conversion did not finish within its deadline.
	ErrTimeout = errors.New("the PDF was not converted in time")
	// ErrBusy means no conversion slot came free within the deadline
	// (other PDFs, or PDFs that never finish, hold them all).
	ErrBusy = errors.New("no PDF conversion slot is free")
)

// Config bounds a Converter. The zero value takes every default.
type Config struct {
	// Timeout bounds one conversion. Default DefaultTimeout.
	Timeout time.Duration
	// MaxPageContent bounds the decompressed content streams and font
	// maps of one page. Default DefaultMaxPageContent.
	MaxPageContent int64
	// MaxText bounds the text of all pages. Default DefaultMaxText.
	MaxText int
	// Concurrency is how many conversions run at once. Default
	// DefaultConcurrency.
	Concurrency int
}

// Converter converts PDFs within its Config's bounds. It is safe for
// concurrent use.
type Converter struct {
	cfg   Config
	slots chan struct{}
	read  func(ctx context.Context, data []byte, o Options) (*Document, error) // readPDF; tests stall it
}

// New returns a converter bounded by cfg.
func New(cfg Config) *Converter {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxPageContent <= 0 {
		cfg.MaxPageContent = DefaultMaxPageContent
	}
	if cfg.MaxText <= 0 {
		cfg.MaxText = DefaultMaxText
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	c := &Converter{cfg: cfg, slots: make(chan struct{}, cfg.Concurrency)}
	c.read = c.readPDF
	return c
}

// Options say what to read of one PDF.
type Options struct {
	// MaxPages reads only the first MaxPages pages; 0 reads all.
	MaxPages int
}

// Document is a PDF's text.
type Document struct {
	// Title is the document information's title, if any.
	Title string
	// NumPages is the PDF's page count, also when fewer were read.
	NumPages int
	// Pages is the text of each page read, in order: lines trimmed,
	// ligatures spelt out, at most one blank line in a row.
	Pages []string
}

// Looks reports whether body is a PDF by its first bytes, whatever type
// the site declared.
func Looks(body []byte) bool {
	return bytes.HasPrefix(body, []byte("%PDF-"))
}

// Convert reads the text of the PDF in data. The caller must not modify
// data until Convert returns; after a timeout the conversion may still be
// reading it, so data must not be reused at all then (a fetched body never
// is).
func (c *Converter) Convert(parent context.Context, data []byte, o Options) (*Document, error) {
	ctx, cancel := context.WithTimeout(parent, c.cfg.Timeout)
	defer cancel()
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		if err := parent.Err(); err != nil {
			return nil, err // the caller gave up
		}
		return nil, ErrBusy
	}
	type result struct {
		doc *Document
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() { <-c.slots }() // held until the reading really ends
		doc, err := c.read(ctx, data, o)
		done <- result{doc, err}
	}()
	select {
	case r := <-done:
		return r.doc, r.err
	case <-ctx.Done():
		if err := parent.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w (%s): %w", ErrTimeout, c.cfg.Timeout, ctx.Err())
	}
}

// readPDF converts data page by page, stopping when ctx ends.
func (c *Converter) readPDF(ctx context.Context, data []byte, o Options) (doc *Document, err error) {
	defer func() {
		// The library panics on malformed input.
		if p := recover(); p != nil {
			doc, err = nil, fmt.Errorf("%w: %v", ErrUnreadable, p)
		}
	}()
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	doc = &Document{NumPages: r.NumPage(), Title: cleanTitle(r.Trailer().Key("Info").Key("Title").Text())}
	n := doc.NumPages
	if o.MaxPages > 0 && o.MaxPages < n {
		n = o.MaxPages
	}
	text := 0
	for i := 1; i <= n; i++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrTimeout, err)
		}
		page := r.Page(i)
		if page.V.IsNull() {
			break // the page tree holds fewer pages than it counts
		}
		if err := c.measure(page); err != nil {
			return nil, fmt.Errorf("page %d: %w", i, err)
		}
		s, err := page.GetPlainText(nil)
		if err != nil {
			return nil, fmt.Errorf("%w: page %d: %w", ErrUnreadable, i, err)
		}
		s = clean(s)
		if text += len(s); text > c.cfg.MaxText {
			return nil, fmt.Errorf("%w: more than %d bytes of text", ErrTooLarge, c.cfg.MaxText)
		}
		doc.Pages = append(doc.Pages, s)
	}
	return doc, nil
}

// measure decompresses the page's content streams and font maps without
// keeping them, and fails when together they pass MaxPageContent: what
// the library then interprets is bounded.
func (c *Converter) measure(page pdf.Page) error {
	left := c.cfg.MaxPageContent
	streams := []pdf.Value{page.V.Key("Contents")}
	for _, name := range page.Fonts() {
		streams = append(streams, page.Font(name).V.Key("ToUnicode"))
	}
	for _, v := range streams {
		parts := []pdf.Value{v}
		if v.Kind() == pdf.Array {
			parts = parts[:0]
			for i := range v.Len() {
				parts = append(parts, v.Index(i))
			}
		}
		for _, p := range parts {
			if p.Kind() != pdf.Stream {
				continue
			}
			n, err := io.CopyN(io.Discard, p.Reader(), left+1)
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("%w: %w", ErrUnreadable, err)
			}
			if left -= n; left < 0 {
				return fmt.Errorf("%w: a page's content is over %d bytes", ErrTooLarge, c.cfg.MaxPageContent)
			}
		}
	}
	return nil
}

// ligatures are spelt out: a search for "five" must find "ﬁve".
var ligatures = strings.NewReplacer("ﬀ", "ff", "ﬁ", "fi", "ﬂ", "fl", "ﬃ", "ffi", "ﬄ", "ffl", "ﬅ", "st", "ﬆ", "st")

// clean trims each line and keeps at most one blank line in a row.
func clean(s string) string {
	s = ligatures.Replace(strings.ToValidUTF8(s, "\uFFFD"))
	var b strings.Builder
	blank := true // no blank line at the start
	for line := range strings.SplitSeq(s, "\n") {
		line = strings.TrimSpace(strings.ReplaceAll(line, "\x00", ""))
		if line == "" {
			if !blank {
				b.WriteString("\n")
			}
			blank = true
			continue
		}
		b.WriteString(line)
		b.WriteString("\n")
		blank = false
	}
	return strings.TrimSpace(b.String())
}

func cleanTitle(s string) string {
	return strings.Join(strings.Fields(strings.ToValidUTF8(s, "")), " ")
}

// PageMarker is what Markdown puts between pages with markers: Firecrawl's
// pageMarkers separator, n the 1-based page that follows.
func PageMarker(n int) string {
	return "\n\n---\n\n<!-- page " + strconv.Itoa(n) + " -->\n\n"
}

// Markdown is the pages' text, separated by a blank line, or by
// PageMarker when markers is set. The text is as the PDF has it: nothing
// in it is escaped.
func (d *Document) Markdown(markers bool) string {
	var b strings.Builder
	for i, p := range d.Pages {
		if i > 0 {
			if markers {
				b.WriteString(PageMarker(i + 1))
			} else {
				b.WriteString("\n\n")
			}
		}
		b.WriteString(p)
	}
	return b.String()
}

// HTML is the pages as <section data-page="N"> elements, each blank-line
// separated block a <p>.
func (d *Document) HTML() string {
	var b strings.Builder
	for i, p := range d.Pages {
		fmt.Fprintf(&b, `<section data-page="%d">`, i+1)
		for para := range strings.SplitSeq(p, "\n\n") {
			if para = strings.TrimSpace(para); para != "" {
				b.WriteString("<p>")
				b.WriteString(strings.ReplaceAll(html.EscapeString(para), "\n", "<br>"))
				b.WriteString("</p>")
			}
		}
		b.WriteString("</section>")
	}
	return b.String()
}

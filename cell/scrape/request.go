// Package scrape turns one URL into a scrape result: cache, fetch engine,
// content pipeline and archive, behind one call that /scrape, batches and jobs
// share.
package scrape

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/trawlhq/trawl/cell/content"
	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/internal/httpjson"
)

// Options are the per-URL fields of docs/spec/hosted-api.md §2.1 that every scrape route accepts,
// and trawl's browser fields (docs/api.md, "Engines"): asking for any of
// WaitFor, JS, Screenshot or Viewport sends the page to the browser.
type Options struct {
	Format  string     `json:"format,omitempty"`
	Proxy   string     `json:"proxy,omitempty"`
	Country string     `json:"country,omitempty"`
	Parse   ParseField `json:"parse,omitzero"`

	// WaitFor is a CSS selector, or "js:" and a JavaScript expression, that
	// must hold before the page is captured.
	WaitFor string `json:"wait_for,omitempty"`
	// JS is JavaScript run in the page after it loads, before WaitFor.
	JS string `json:"js,omitempty"`
	// Screenshot asks for a full-page PNG (base64 in `screenshot`).
	Screenshot bool `json:"screenshot,omitempty"`
	// Viewport is the browser window in CSS pixels.
	Viewport Viewport `json:"viewport,omitzero"`
	// BypassCache fetches the page again even when a fresh copy is
	// cached (the new copy replaces it); jobs_submit's bypass_cache.
	BypassCache bool `json:"bypass_cache,omitempty"`
	// NoStore keeps the page out of the cache, the archive and the search
	// index (Firecrawl's storeInCache: false); it implies BypassCache.
	// Not a field of the native API.
	NoStore bool `json:"-"`
	// Header holds the caller's request headers, checked by
	// fetch.CheckHeaders: every engine sends them. They make the scrape
	// the caller's own (Shared). Not in the options' JSON, so that no job
	// record keeps them: POST /scrape reads them from Request.Headers,
	// Firecrawl's routes from their headers field.
	Header http.Header `json:"-"`
	// Actions are steps the browser runs on the page before capturing it
	// (fetch.BrowserOptions.Actions; Firecrawl's actions): they send the
	// page to the browser and make the scrape the caller's own (Shared).
	// Not a field of the native API.
	Actions []fetch.Action `json:"-"`
	// PDF says how a PDF is read; the zero value converts all its pages.
	// Not a field of the native API.
	PDF PDFOptions `json:"-"`
	// Timeout is the browser's page deadline (0: the engine's own), for
	// a caller whose whole call has one (Firecrawl's timeout): the page,
	// which runs apart from the caller, ends with it, and an action
	// waiting for its element gives up in time to say so. Not a field of
	// the native API, nor of the cache key.
	Timeout time.Duration `json:"-"`
}

// PDFOptions say how a scrape reads a PDF (Firecrawl's parsers).
type PDFOptions struct {
	// Skip leaves a PDF unconverted: the result has no Markdown nor HTML,
	// and the PDF's bytes are Outcome.Fetched's body (Firecrawl's
	// parsers: [] answers them in base64).
	Skip bool
	// MaxPages converts only the first MaxPages pages; 0 all.
	MaxPages int
	// PageMarkers separates the pages' Markdown with Firecrawl's page
	// markers (pdftext.PageMarker) rather than a blank line.
	PageMarkers bool
}

// Viewport is the `viewport` field: {"width": W, "height": H}.
type Viewport struct {
	Width  int `json:"width"`
	Height int `json:"height"`
}

// Bounds of the browser fields.
const (
	maxWaitFor = 4 << 10
	maxJS      = 64 << 10
	minWidth   = 320
	maxWidth   = 3840
	minHeight  = 200
	maxHeight  = 4320
)

// NeedsBrowser reports whether the options ask for what only the browser
// does.
func (o *Options) NeedsBrowser() bool {
	return o.WaitFor != "" || o.JS != "" || o.Screenshot || o.Viewport != (Viewport{}) || len(o.Actions) > 0
}

// Shared reports whether a scrape with these options may be served from,
// and written to, the cache and the archive (and so the search index).
// Not with NoStore, and not with a caller's headers or actions: another
// caller's Cookie or Authorization, or clicks, may have changed the page,
// and the page may hold what they unlocked. Such a scrape is fetched
// anew every time and kept nowhere; identical ones in flight at once
// still share one fetch.
func (o *Options) Shared() bool {
	return !o.NoStore && len(o.Header) == 0 && len(o.Actions) == 0
}

// Request is the body of POST /scrape.
type Request struct {
	URL string `json:"url"`
	Options
	// Headers are request headers for the page (fetch.CheckHeaders says
	// which): POST /scrape only, since a batch or a job would keep them
	// in its records.
	Headers map[string]string `json:"headers,omitempty"`
}

// Normalize is Options.Normalize, and checks Headers into Options.Header.
func (r *Request) Normalize() error {
	if err := r.Options.Normalize(); err != nil {
		return err
	}
	h, err := fetch.CheckHeaders(r.Headers)
	if err != nil {
		return BadInput("headers: " + err.Error())
	}
	r.Header = h
	return nil
}

// Formats.
const (
	FormatBoth     = "both"
	FormatMarkdown = "md"
	FormatHTML     = "html"
)

// Normalize fills defaults and rejects values outside the spec. It does not
// look at URLs: a bad URL inside a batch or job is that URL's error, not the
// request's.
func (o *Options) Normalize() error {
	switch o.Format {
	case "":
		o.Format = FormatBoth
	case FormatBoth, FormatMarkdown, FormatHTML:
	default:
		return BadInput(fmt.Sprintf("format must be one of both, md, html (got %q)", o.Format))
	}
	switch o.Proxy {
	case "", fetch.ProxyNone:
		o.Proxy = fetch.ProxyNone
	case fetch.ProxyISP, fetch.ProxyResidential:
		// Whether this cell has such a pool is the service's check
		// (Service.Check): the answer depends on its configuration.
	default:
		return BadInput(fmt.Sprintf("proxy must be one of none, isp, residential (got %q)", o.Proxy))
	}
	if o.Country != "" {
		c := strings.ToLower(o.Country)
		if !fetch.ValidCountry(c) {
			return BadInput(fmt.Sprintf("country must be a two-letter country code (got %q)", o.Country))
		}
		o.Country = c
	}
	if len(o.WaitFor) > maxWaitFor {
		return BadInput(fmt.Sprintf("wait_for must be at most %d bytes", maxWaitFor))
	}
	if o.WaitFor != "" && strings.TrimSpace(strings.TrimPrefix(o.WaitFor, "js:")) == "" {
		return BadInput("wait_for must be a CSS selector or js: followed by an expression")
	}
	if len(o.JS) > maxJS {
		return BadInput(fmt.Sprintf("js must be at most %d bytes", maxJS))
	}
	if v := o.Viewport; v != (Viewport{}) {
		if v.Width < minWidth || v.Width > maxWidth || v.Height < minHeight || v.Height > maxHeight {
			return BadInput(fmt.Sprintf("viewport must have width %d to %d and height %d to %d (got %dx%d)",
				minWidth, maxWidth, minHeight, maxHeight, v.Width, v.Height))
		}
	}
	return nil
}

// browserOptions are the fetch engine's form of the browser fields; nil
// when none is set.
func (o *Options) browserOptions() *fetch.BrowserOptions {
	if !o.NeedsBrowser() {
		return nil
	}
	return &fetch.BrowserOptions{
		WaitFor:    o.WaitFor,
		JS:         o.JS,
		Screenshot: o.Screenshot,
		Viewport:   fetch.Viewport{Width: o.Viewport.Width, Height: o.Viewport.Height},
		Actions:    o.Actions,
		Timeout:    o.Timeout,
	}
}

// cacheKey identifies everything that shapes the result of a URL. The
// browser fields are appended only when set, so the keys of requests
// without them are those they always were.
func (o *Options) cacheKey(url string) string {
	p := o.Parse
	k := fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%t%t%t%t", url, o.Format, o.Proxy, o.Country,
		p.Links, p.Media, p.Metadata, p.Tables)
	if o.NeedsBrowser() {
		k += fmt.Sprintf("\x00b\x00%q\x00%q\x00%t\x00%dx%d", o.WaitFor, o.JS, o.Screenshot, o.Viewport.Width, o.Viewport.Height)
	}
	if o.PDF != (PDFOptions{}) {
		k += fmt.Sprintf("\x00pdf\x00%+v", o.PDF)
	}
	if len(o.Header) > 0 || len(o.Actions) > 0 {
		// Never stored, but identical requests in flight share a fetch:
		// the key tells apart what the caller sent.
		h, _ := json.Marshal(struct {
			H http.Header
			A []fetch.Action
		}{o.Header, o.Actions})
		k += "\x00own\x00" + string(h)
	}
	return k
}

// ParseField is the `parse` field: true (everything), false, or an object of
// booleans links, media, metadata, tables.
type ParseField content.ParseOptions

func (p *ParseField) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch string(b) {
	case "true":
		*p = ParseField{Links: true, Media: true, Metadata: true, Tables: true}
		return nil
	case "false", "null":
		*p = ParseField{}
		return nil
	}
	if len(b) == 0 || b[0] != '{' {
		return errors.New("parse must be true, false or an object of booleans links, media, metadata, tables")
	}
	var obj struct {
		Links, Media, Metadata, Tables bool
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&obj); err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	*p = ParseField(obj)
	return nil
}

func (p ParseField) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Links    bool `json:"links"`
		Media    bool `json:"media"`
		Metadata bool `json:"metadata"`
		Tables   bool `json:"tables"`
	}(p))
}

// BadInput is a 400 for a request the caller must change.
func BadInput(msg string) *httpjson.HTTPError {
	return &httpjson.HTTPError{Status: http.StatusBadRequest, Code: "bad_input", Message: msg}
}

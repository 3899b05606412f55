package firecrawl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/scrape"
)

// DefaultMaxAge is Firecrawl's default maxAge: a copy fetched in the last
// two days is served from the archive.
const DefaultMaxAge = 2 * 24 * time.Hour

// Bounds of the fields.
const (
	maxTimeout  = 300 * time.Second
	maxWaitFor  = 60 * time.Second
	maxSelector = 1 << 10
	maxTags     = 100
	maxPDFPages = 10000
)

// ScrapeOptions are Firecrawl's scrape options: POST /v2/scrape's body
// besides url, and the scrapeOptions of batch, crawl and search. Pointers
// tell an absent field from its zero.
type ScrapeOptions struct {
	Formats             []Format          `json:"formats,omitempty"`
	Headers             map[string]string `json:"headers,omitempty"`
	IncludeTags         []string          `json:"includeTags,omitempty"`
	ExcludeTags         []string          `json:"excludeTags,omitempty"`
	OnlyMainContent     *bool             `json:"onlyMainContent,omitempty"`
	Timeout             *int64            `json:"timeout,omitempty"` // ms
	WaitFor             int64             `json:"waitFor,omitempty"` // ms
	Mobile              bool              `json:"mobile,omitempty"`
	Parsers             []json.RawMessage `json:"parsers"` // [] (PDFs not parsed) must survive a job's copy of the options
	Actions             []json.RawMessage `json:"actions,omitempty"`
	Location            *Location         `json:"location,omitempty"`
	SkipTLSVerification *bool             `json:"skipTlsVerification,omitempty"`
	RemoveBase64Images  *bool             `json:"removeBase64Images,omitempty"`
	BlockAds            *bool             `json:"blockAds,omitempty"`
	Proxy               string            `json:"proxy,omitempty"`
	MaxAge              *int64            `json:"maxAge,omitempty"` // ms
	MinAge              *int64            `json:"minAge,omitempty"` // ms
	StoreInCache        *bool             `json:"storeInCache,omitempty"`
	FastMode            bool              `json:"fastMode,omitempty"`
	RedactPII           json.RawMessage   `json:"redactPII,omitempty"`
	Lockdown            bool              `json:"lockdown,omitempty"`
}

// ScrapeRequest is the body of POST /v2/scrape.
type ScrapeRequest struct {
	URL string `json:"url"`
	ScrapeOptions
}

// Location is Firecrawl's location: a country (ISO 3166-1 alpha-2) and
// the languages asked for.
type Location struct {
	Country   string   `json:"country,omitempty"`
	Languages []string `json:"languages,omitempty"`
}

// Format is one entry of formats: a name ("markdown") or an object
// ({"type": "json", "schema": …}).
type Format struct {
	Type     string          `json:"type"`
	Schema   json.RawMessage `json:"schema,omitempty"`
	Prompt   string          `json:"prompt,omitempty"`
	FullPage *bool           `json:"fullPage,omitempty"`
	Viewport *struct {
		Width  int `json:"width"`
		Height int `json:"height"`
	} `json:"viewport,omitempty"`
	Quality *int `json:"quality,omitempty"`
	// Modes and Tag are the changeTracking format's.
	Modes []string `json:"modes,omitempty"`
	Tag   string   `json:"tag,omitempty"`
}

// UnmarshalJSON takes a string or an object.
func (f *Format) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = Format{Type: s}
		return nil
	}
	type plain Format
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*f = Format(p)
	return nil
}

// Plan is a scrape request translated: the native options the scrape
// service runs, and what the answer is shaped from.
type Plan struct {
	// Options are the scrape service's.
	Options scrape.Options
	// The formats asked for.
	Markdown, HTML, RawHTML, Links, Images, Screenshot, Summary bool
	// JSON is the json format, when asked for.
	JSON *Format
	// Track is the changeTracking format, when asked for (change.go).
	Track *Format
	// MainOnly is onlyMainContent (default true).
	MainOnly bool
	// IncludeTags and ExcludeTags are CSS selectors the content is cut
	// to, or cut from, before conversion.
	IncludeTags, ExcludeTags []string
	// Timeout bounds the whole call (0: the engine's own deadline).
	Timeout time.Duration
	// MaxAge: a copy fetched within it may be served; 0 fetches anew.
	MaxAge time.Duration
	// MinAge: only a copy at least this old is served (none: 404-like
	// error), Firecrawl's cached-only mode; 0 is off.
	MinAge time.Duration
	// Store is storeInCache (default true); false with headers or actions,
	// as Firecrawl forces it.
	Store bool
	// Actions says the request has actions: the document gets their
	// results (Document.Actions).
	Actions bool
}

// Reprocess says whether the answer needs the page as fetched rather than
// the scrape service's main content.
func (p *Plan) Reprocess() bool {
	return !p.MainOnly || len(p.IncludeTags) > 0 || len(p.ExcludeTags) > 0 || p.RawHTML
}

// Compile checks o and translates it. field prefixes the names in errors
// ("scrapeOptions." inside a crawl).
func (o *ScrapeOptions) Compile(field string) (*Plan, error) {
	p := &Plan{MainOnly: true, Store: true, MaxAge: DefaultMaxAge}
	if err := p.formats(o.Formats, field); err != nil {
		return nil, err
	}
	if o.OnlyMainContent != nil {
		p.MainOnly = *o.OnlyMainContent
	}
	for name, tags := range map[string][]string{"includeTags": o.IncludeTags, "excludeTags": o.ExcludeTags} {
		if len(tags) > maxTags {
			return nil, BadRequest(field+name, fmt.Sprintf("%s holds at most %d selectors", name, maxTags))
		}
		for _, t := range tags {
			if t == "" || len(t) > maxSelector {
				return nil, BadRequest(field+name, name+" entries are CSS selectors of 1 to 1,024 bytes")
			}
			if err := checkSelector(t); err != nil {
				return nil, BadRequest(field+name, fmt.Sprintf("%q is not a CSS selector: %v", t, err))
			}
		}
	}
	p.IncludeTags, p.ExcludeTags = o.IncludeTags, o.ExcludeTags
	if o.Timeout != nil {
		d := time.Duration(*o.Timeout) * time.Millisecond
		if d < time.Second || d > maxTimeout {
			return nil, BadRequest(field+"timeout", "timeout is in milliseconds, 1000 to 300000")
		}
		p.Timeout = d
		p.Options.Timeout = d
	}
	if o.WaitFor < 0 || time.Duration(o.WaitFor)*time.Millisecond > maxWaitFor {
		return nil, BadRequest(field+"waitFor", "waitFor is in milliseconds, 0 to 60000")
	}
	if o.WaitFor > 0 {
		// The browser waits until the page has been open that long
		// (performance.now counts from the navigation's start).
		p.Options.WaitFor = fmt.Sprintf("js:performance.now() >= %d", o.WaitFor)
	}
	if o.Mobile {
		p.Options.Viewport = scrape.Viewport{Width: 390, Height: 844}
	}
	if err := p.unhonoured(o, field); err != nil {
		return nil, err
	}
	if err := p.parsers(o.Parsers, field); err != nil {
		return nil, err
	}
	if err := p.headers(o.Headers, field); err != nil {
		return nil, err
	}
	if len(o.Actions) > 0 {
		acts, err := actions(o.Actions, field, o.WaitFor, p.Timeout)
		if err != nil {
			return nil, err
		}
		p.Options.Actions, p.Actions = acts, true
	}
	switch o.Proxy {
	case "", "basic", "auto":
		// The engine ladder climbs to the browser and a proxy by itself
		// when the site asks for it (docs/content.md).
	case "stealth", "enhanced":
		p.Options.Proxy = "residential"
	default:
		return nil, BadRequest(field+"proxy", fmt.Sprintf("proxy must be basic, stealth, enhanced or auto (got %q)", o.Proxy))
	}
	if o.Location != nil && o.Location.Country != "" {
		c := strings.ToLower(o.Location.Country)
		if len(c) != 2 || c[0] < 'a' || c[0] > 'z' || c[1] < 'a' || c[1] > 'z' {
			return nil, BadRequest(field+"location.country", "location.country is an ISO 3166-1 alpha-2 code")
		}
		if c != "us" || p.Options.Proxy != "" {
			// A country is a proxy's: a site seen from it. The default
			// "US" asks for nothing.
			p.Options.Country = c
			if p.Options.Proxy == "" {
				p.Options.Proxy = "residential"
			}
		}
	}
	if o.MaxAge != nil {
		if *o.MaxAge < 0 {
			return nil, BadRequest(field+"maxAge", "maxAge is in milliseconds, 0 or more")
		}
		p.MaxAge = time.Duration(*o.MaxAge) * time.Millisecond
	}
	if o.MinAge != nil {
		if *o.MinAge < 0 {
			return nil, BadRequest(field+"minAge", "minAge is in milliseconds, 0 or more")
		}
		p.MinAge = time.Duration(*o.MinAge) * time.Millisecond
	}
	if o.StoreInCache != nil {
		p.Store = *o.StoreInCache
	}
	if !p.Options.Shared() {
		// Firecrawl's rule, and trawl's (scrape.Options.Shared): a page
		// fetched with the caller's headers or actions is neither served
		// from the cache or the archive nor kept.
		p.Store = false
	}
	p.Options.BypassCache = p.MaxAge == 0
	p.Options.NoStore = !p.Store
	if p.Screenshot {
		p.Options.Screenshot = true
	}
	if p.Links || p.Images {
		p.Options.Parse.Links, p.Options.Parse.Media = p.Links, p.Images
	}
	p.Options.Parse.Metadata = true
	// The scrape service converts (and caches) only what the answer
	// shows: Markdown alone is the SDKs' default.
	switch {
	case p.HTML && !p.Markdown:
		p.Options.Format = scrape.FormatHTML
	case !p.HTML:
		p.Options.Format = scrape.FormatMarkdown
	}
	if err := p.Options.Normalize(); err != nil {
		return nil, err
	}
	return p, nil
}

// formats reads the formats list; the default is markdown.
func (p *Plan) formats(fs []Format, field string) error {
	if len(fs) == 0 {
		p.Markdown = true
		return nil
	}
	seen := map[string]bool{}
	for i, f := range fs {
		name := fmt.Sprintf("%sformats.%d", field, i)
		if seen[f.Type] {
			return BadRequest(name, fmt.Sprintf("format %q is listed twice", f.Type))
		}
		seen[f.Type] = true
		switch f.Type {
		case "markdown":
			p.Markdown = true
		case "html":
			p.HTML = true
		case "rawHtml":
			p.RawHTML = true
		case "links":
			p.Links = true
		case "images":
			p.Images = true
		case "screenshot", "screenshot@fullPage":
			// trawl's screenshot is of the full page; a viewport one is
			// the full page's first screen, which the caller can crop.
			if f.FullPage != nil && !*f.FullPage {
				return Unsupported(name, "a screenshot of the viewport only is not supported; trawl's screenshot is of the full page (fullPage: true)")
			}
			if f.Viewport != nil {
				return Unsupported(name+".viewport", "a screenshot's own viewport is not supported; use mobile for a phone's")
			}
			p.Screenshot = true
		case "json":
			if len(f.Schema) == 0 && f.Prompt == "" {
				return BadRequest(name, "the json format needs a schema or a prompt")
			}
			ff := f
			p.JSON = &ff
		case "summary":
			p.Summary = true
		case "changeTracking":
			if err := checkTrack(f, name); err != nil {
				return err
			}
			ff := f
			p.Track = &ff
		case "":
			return BadRequest(name, "a format needs a type")
		case "attributes", "branding", "product", "menu", "audio", "video", "question", "highlights", "query":
			return Unsupported(name, fmt.Sprintf("the %s format is not supported by trawl", f.Type))
		default:
			return BadRequest(name, fmt.Sprintf("unknown format %q", f.Type))
		}
	}
	if p.Track != nil && !p.Markdown {
		return BadRequest(field+"formats", "the changeTracking format needs the markdown format too (it compares the page's Markdown)")
	}
	return nil
}

// unhonoured refuses what trawl would otherwise have to ignore.
func (p *Plan) unhonoured(o *ScrapeOptions, field string) error {
	switch {
	case o.Location != nil && len(o.Location.Languages) > 0:
		return Unsupported(field+"location.languages", "location.languages is not supported; the site is asked in its default language")
	case o.SkipTLSVerification != nil && *o.SkipTLSVerification:
		return Unsupported(field+"skipTlsVerification", "trawl always verifies a site's TLS certificate")
	case len(o.RedactPII) > 0 && string(o.RedactPII) != "false" && string(o.RedactPII) != "null":
		return Unsupported(field+"redactPII", "PII redaction is not supported")
	case o.Lockdown:
		return Unsupported(field+"lockdown", "lockdown mode is not supported")
	}
	return nil
}

// parsers reads the parsers list: "pdf" (a name or {type: "pdf", …}) has
// PDFs converted to text, and is Firecrawl's default; a list without it
// (parsers: []) leaves a PDF unconverted, answered in base64 as Firecrawl
// does. "image" is accepted: trawl has no OCR, an image answers
// unsupported_content as it would without it.
func (p *Plan) parsers(raw []json.RawMessage, field string) error {
	pdf := raw == nil
	for i, r := range raw {
		name := fmt.Sprintf("%sparsers.%d", field, i)
		var pp struct {
			Type         string `json:"type"`
			Mode         string `json:"mode"`
			MaxPages     *int   `json:"maxPages"`
			Pages        bool   `json:"pages"`
			PageMarkdown bool   `json:"pageMarkdown"`
			Blocks       bool   `json:"blocks"`
			PageMarkers  bool   `json:"pageMarkers"`
		}
		if json.Unmarshal(r, &pp.Type) != nil {
			if err := json.Unmarshal(r, &pp); err != nil {
				return BadRequest(name, "a parser is a name or an object with a type")
			}
		}
		switch pp.Type {
		case "pdf":
			pdf = true
		case "image":
			continue
		default:
			return BadRequest(name, fmt.Sprintf("unknown parser %q", pp.Type))
		}
		switch {
		case pp.Mode != "" && pp.Mode != "fast" && pp.Mode != "auto":
			if pp.Mode == "ocr" {
				return Unsupported(name+".mode", "OCR of PDFs is not supported; trawl reads a PDF's text layer (mode fast or auto)")
			}
			return BadRequest(name+".mode", fmt.Sprintf("mode is fast, auto or ocr (got %q)", pp.Mode))
		case pp.MaxPages != nil && (*pp.MaxPages < 1 || *pp.MaxPages > maxPDFPages):
			return BadRequest(name+".maxPages", fmt.Sprintf("maxPages is 1 to %d", maxPDFPages))
		case pp.Pages || pp.PageMarkdown:
			return Unsupported(name+".pages", "per-page Markdown (pages) is not supported; pageMarkers marks the pages in markdown")
		case pp.Blocks:
			return Unsupported(name+".blocks", "PDF layout blocks are not supported")
		}
		if pp.MaxPages != nil {
			p.Options.PDF.MaxPages = *pp.MaxPages
		}
		p.Options.PDF.PageMarkers = pp.PageMarkers
	}
	p.Options.PDF.Skip = !pdf
	return nil
}

// headers checks the caller's request headers (fetch.CheckHeaders) into
// the scrape's.
func (p *Plan) headers(h map[string]string, field string) error {
	hdr, err := fetch.CheckHeaders(h)
	if err != nil {
		name := field + "headers"
		if he, ok := err.(*fetch.HeaderError); ok && he.Name != "" && !strings.Contains(he.Name, ".") {
			name += "." + he.Name
		}
		return BadRequest(name, err.Error())
	}
	p.Options.Header = hdr
	return nil
}

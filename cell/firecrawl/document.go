package firecrawl

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"net/url"
	"strings"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/andybalholm/cascadia"

	"github.com/trawlhq/trawl/cell/content"
	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/scrape"
)

// Document is a scraped page in Firecrawl's shape.
type Document struct {
	Markdown   *string  `json:"markdown,omitempty"`
	HTML       *string  `json:"html,omitempty"`
	RawHTML    *string  `json:"rawHtml,omitempty"`
	Links      []string `json:"links,omitempty"`
	Images     []string `json:"images,omitempty"`
	Screenshot string   `json:"screenshot,omitempty"`
	JSON       any      `json:"json,omitempty"`
	Summary    *string  `json:"summary,omitempty"`
	// ChangeTracking compares the page with the caller's last tracked
	// scrape of it (change.go); only with the changeTracking format.
	ChangeTracking *ChangeTracking `json:"changeTracking,omitempty"`
	// Actions is what the request's actions produced; only with actions.
	Actions  *Actions `json:"actions,omitempty"`
	Metadata Metadata `json:"metadata"`
	Warning  string   `json:"warning,omitempty"`
}

// Actions is a document's actions results, Firecrawl's v2 shape: each
// list in the order of the actions that made it, never null.
type Actions struct {
	// Screenshots are data: URLs (image/png, or image/jpeg with a
	// quality), where Firecrawl gives URLs of its storage.
	Screenshots       []string      `json:"screenshots"`
	Scrapes           []PageCopy    `json:"scrapes"`
	JavascriptReturns []ScriptValue `json:"javascriptReturns"`
	// PDFs stays empty: the pdf action is refused.
	PDFs []string `json:"pdfs"`
}

// PageCopy is a scrape action's copy of the page.
type PageCopy struct {
	URL  string `json:"url"`
	HTML string `json:"html"`
}

// ScriptValue is what an executeJavascript action returned: typeof its
// value, and the value.
type ScriptValue struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

// Metadata is a document's metadata: Firecrawl's names, the page's own
// metadata first, then the scrape's (sourceURL, url, statusCode,
// contentType, cacheState, cachedAt, proxyUsed, creditsUsed).
type Metadata map[string]any

// Page is what a document is shaped from: the scrape service's result and
// the page as fetched, when the plan needs it (Plan.Reprocess).
type Page struct {
	// Requested is the URL the caller asked for.
	Requested string
	Result    *scrape.Result
	// Raw is the page as fetched; nil when the plan does not need it.
	Raw *scrape.ArchivedPage
	// Cached: served from trawl's cache or archive, fetched at CachedAt.
	Cached   bool
	CachedAt time.Time
	// Proxy is the proxy kind the fetch went through ("" none).
	Proxy string
	// FromArchive: Result carries only the fetch's facts (URL, status,
	// type, time); the content is converted here from Raw.
	FromArchive bool
}

// Shape builds the document of pg as p asks. A page read again (another
// content selection than the scrape service's main content) is converted
// here from pg.Raw.
func Shape(p *Plan, pg *Page) (*Document, error) {
	res := pg.Result
	d := &Document{Metadata: Metadata{}}
	md, htm := res.Markdown, res.HTML
	parsed := res.Parsed
	if pg.IsPDF() {
		md, htm = pdfContent(p, pg)
		if p.RawHTML {
			// Firecrawl's rawHtml of a PDF is its content as HTML.
			d.RawHTML = htm
		}
	} else if pg.Raw != nil && (p.Reprocess() || pg.FromArchive) {
		doc, err := reprocess(p, pg.Raw)
		if err != nil {
			return nil, err
		}
		md, htm = &doc.Markdown, &doc.HTML
		if pg.FromArchive {
			parsed = doc.Parsed
			if res.Title == "" {
				res.Title = doc.Title
			}
		}
		if p.RawHTML {
			raw := string(pg.Raw.Body)
			d.RawHTML = &raw
		}
	}
	if p.Markdown {
		d.Markdown = orEmpty(md)
	}
	if p.HTML {
		d.HTML = orEmpty(htm)
	}
	if p.Links {
		d.Links = []string{}
		if parsed != nil {
			for _, l := range parsed.Links {
				d.Links = append(d.Links, l.Href)
			}
		}
	}
	if p.Images {
		d.Images = []string{}
		if parsed != nil {
			for _, m := range parsed.Media {
				if m.Kind == "image" {
					d.Images = append(d.Images, m.Src)
				}
			}
		}
	}
	if p.Screenshot && len(res.Screenshot) > 0 {
		d.Screenshot = dataURL("image/png", res.Screenshot)
	}
	if p.Actions {
		d.Actions = actionResults(res.Actions)
	}
	d.metadata(pg, parsed)
	return d, nil
}

func dataURL(media string, b []byte) string {
	return "data:" + media + ";base64," + base64.StdEncoding.EncodeToString(b)
}

// IsPDF reports whether the page is a PDF (the scrape service says so
// whatever type the site declared).
func (pg *Page) IsPDF() bool { return pg.Result.ContentType == scrape.PDFType }

// pdfContent is a PDF's Markdown and HTML: its text as the scrape service
// converted it, or with PDF parsing off (parsers: []) the PDF itself in
// base64, as Firecrawl answers it.
func pdfContent(p *Plan, pg *Page) (md, htm *string) {
	if p.Options.PDF.Skip {
		var b64 string
		if pg.Raw != nil {
			b64 = base64.StdEncoding.EncodeToString(pg.Raw.Body)
		}
		return &b64, &b64
	}
	md, htm = pg.Result.Markdown, pg.Result.HTML
	if htm == nil && md != nil {
		// The service converted the Markdown only: the same text as HTML.
		h := "<pre>" + html.EscapeString(*md) + "</pre>"
		htm = &h
	}
	return md, htm
}

// actionResults is Firecrawl's actions object of what the page's actions
// produced (none, when the page never reached them).
func actionResults(r *fetch.ActionResults) *Actions {
	a := &Actions{Screenshots: []string{}, Scrapes: []PageCopy{}, JavascriptReturns: []ScriptValue{}, PDFs: []string{}}
	if r == nil {
		return a
	}
	for _, s := range r.Screenshots {
		a.Screenshots = append(a.Screenshots, dataURL(s.Type, s.Data))
	}
	for _, s := range r.Scrapes {
		a.Scrapes = append(a.Scrapes, PageCopy{URL: s.URL, HTML: s.HTML})
	}
	for _, s := range r.Scripts {
		a.JavascriptReturns = append(a.JavascriptReturns, ScriptValue{Type: s.Type, Value: s.Value})
	}
	return a
}

func orEmpty(s *string) *string {
	if s == nil {
		e := ""
		return &e
	}
	return s
}

// metadata fills Firecrawl's metadata names from the page's and the
// scrape's.
func (d *Document) metadata(pg *Page, parsed *content.Parsed) {
	m, res := d.Metadata, pg.Result
	m["title"] = res.Title
	if parsed != nil && parsed.Metadata != nil {
		pm := parsed.Metadata
		set(m, "description", pm.Description)
		set(m, "language", pm.Language)
		for k, v := range pm.OpenGraph {
			// og:title → ogTitle, og:site_name → ogSiteName.
			set(m, ogName(k), v)
		}
		if pm.Canonical != "" {
			m["canonical"] = pm.Canonical
		}
	}
	m["sourceURL"] = pg.Requested
	m["url"] = res.FinalURL
	m["statusCode"] = res.Status
	m["contentType"] = res.ContentType
	if pg.IsPDF() && res.Pages > 0 {
		m["numPages"] = res.Pages
	}
	m["proxyUsed"] = "basic"
	if pg.Proxy != "" {
		m["proxyUsed"] = "stealth"
	}
	if pg.Cached {
		m["cacheState"] = "hit"
		m["cachedAt"] = pg.CachedAt.UTC().Format(time.RFC3339Nano)
	} else {
		m["cacheState"] = "miss"
	}
	if res.Status >= 400 {
		m["error"] = fmt.Sprintf("the site answered HTTP %d", res.Status)
	}
}

func set(m Metadata, k, v string) {
	if v != "" {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
}

// ogName is Firecrawl's name of an Open Graph property: og:site_name →
// ogSiteName.
func ogName(k string) string {
	out := []byte("og")
	up := true
	for _, c := range []byte(strings.TrimPrefix(k, "og:")) {
		switch {
		case c == ':' || c == '_' || c == '-':
			up = true
			continue
		case up && 'a' <= c && c <= 'z':
			c -= 'a' - 'A'
		}
		up = false
		out = append(out, c)
	}
	return string(out)
}

// reprocess converts the page as fetched with p's content selection:
// excludeTags removed, cut to includeTags, the main content or the whole
// body.
func reprocess(p *Plan, raw *scrape.ArchivedPage) (*content.Document, error) {
	base, _ := url.Parse(raw.URL)
	body := raw.Body
	keep := !p.MainOnly
	if len(p.IncludeTags) > 0 || len(p.ExcludeTags) > 0 {
		doc, err := goquery.NewDocumentFromReader(bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("read the page: %w", err)
		}
		for _, sel := range p.ExcludeTags {
			doc.Find(sel).Remove()
		}
		if len(p.IncludeTags) > 0 {
			// The selected elements, in page order, are the content.
			var buf bytes.Buffer
			buf.WriteString("<!DOCTYPE html><html><head>")
			if t, err := doc.Find("head").Html(); err == nil {
				buf.WriteString(t)
			}
			buf.WriteString("</head><body>")
			doc.Find(joinSelectors(p.IncludeTags)).Each(func(_ int, s *goquery.Selection) {
				if h, err := goquery.OuterHtml(s); err == nil {
					buf.WriteString(h)
				}
			})
			buf.WriteString("</body></html>")
			body = buf.Bytes()
			keep = true // what the caller selected is the content
		} else {
			h, err := doc.Html()
			if err != nil {
				return nil, fmt.Errorf("write the page: %w", err)
			}
			body = []byte(h)
		}
	}
	po := content.ParseOptions{Metadata: true, Links: p.Links, Media: p.Images}
	return content.Process(body, base, content.Options{KeepBoilerplate: keep, Parse: po})
}

// joinSelectors is one selector list of all: an element matched by two
// is taken once, in page order.
func joinSelectors(sels []string) string {
	var b bytes.Buffer
	for i, s := range sels {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(s)
	}
	return b.String()
}

func checkSelector(s string) error {
	_, err := cascadia.ParseGroup(s)
	return err
}

package cell

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/store"
)

// The parts of POST /v2/scrape that issue 30 added: the caller's headers,
// page actions in the browser, and PDFs.

// v2Full is a Firecrawl answer with the fields these tests read.
type v2Full struct {
	Success bool            `json:"success"`
	Error   string          `json:"error"`
	Code    string          `json:"code"`
	Details json.RawMessage `json:"details"`
	Data    struct {
		Markdown   *string        `json:"markdown"`
		HTML       *string        `json:"html"`
		RawHTML    *string        `json:"rawHtml"`
		Screenshot string         `json:"screenshot"`
		Metadata   map[string]any `json:"metadata"`
		Actions    *struct {
			Screenshots []string `json:"screenshots"`
			Scrapes     []struct {
				URL  string `json:"url"`
				HTML string `json:"html"`
			} `json:"scrapes"`
			JavascriptReturns []struct {
				Type  string          `json:"type"`
				Value json.RawMessage `json:"value"`
			} `json:"javascriptReturns"`
			PDFs []string `json:"pdfs"`
		} `json:"actions"`
	} `json:"data"`
}

// path is the field a refusal names (details[0].path), dotted.
func (r *v2Full) path() string {
	var d []struct {
		Path []string `json:"path"`
	}
	if json.Unmarshal(r.Details, &d) != nil || len(d) != 1 {
		return ""
	}
	return strings.Join(d[0].Path, ".")
}

func (tc *testCell) v2Full(t *testing.T, body string) (int, v2Full, metering.Usage) {
	t.Helper()
	resp, b := tc.post(t, "/v2/scrape", body)
	r := decode[v2Full](t, b)
	var u metering.Usage
	if h := resp.Header.Get(metering.Header); h != "" {
		if err := json.Unmarshal([]byte(h), &u); err != nil {
			t.Fatalf("usage %q: %v", h, err)
		}
	}
	return resp.StatusCode, r, u
}

// headerSite answers a page that shows what it was sent: its members'
// area to a caller with the right Authorization, its public page to
// anyone else. It logs what each request carried.
type headerSite struct {
	*httptest.Server
	mu   sync.Mutex
	seen []http.Header
}

func newHeaderSite(t *testing.T) *headerSite {
	s := &headerSite{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/favicon.ico" {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		s.seen = append(s.seen, r.Header.Clone())
		s.mu.Unlock()
		area := "the public page, for everyone who comes by without signing in to the tea club"
		if r.Header.Get("Authorization") == "Bearer member-token" {
			area = "the members' area: tasting notes for the spring harvest, kept for signed-in members only"
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><title>Tea club</title></head><body><main><h1>Tea club</h1>
<p>This is %s. %s</p><p>Trace %s.</p></main></body></html>`, area, articleText, r.Header.Get("X-Trace"))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *headerSite) requests() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.seen...)
}

// Headers go with the page's request; a page fetched with them is the
// caller's own: not served from the cache or the archive, not kept in
// them, so another caller never sees what a Cookie or an Authorization
// unlocked.
func TestV2ScrapeHeaders(t *testing.T) {
	site := newHeaderSite(t)
	tc := newTestCell(t, nil)
	u := site.URL + "/club"
	withAuth := fmt.Sprintf(`{"url":%q,"headers":{"Authorization":"Bearer member-token","X-Trace":"t-42","User-Agent":"tea-bot/1.0"}}`, u)

	status, r, us := tc.v2Full(t, withAuth)
	if status != 200 || !strings.Contains(*r.Data.Markdown, "members' area") || !strings.Contains(*r.Data.Markdown, "Trace t-42") {
		t.Fatalf("with headers: %d %+v", status, r)
	}
	seen := site.requests()
	if len(seen) != 1 || seen[0].Get("X-Trace") != "t-42" || seen[0].Get("User-Agent") != "tea-bot/1.0" {
		t.Fatalf("the site saw %v", seen)
	}
	if r.Data.Metadata["cacheState"] != "miss" || us.Cache != metering.CacheMiss || us.Engine != "http" {
		t.Errorf("metadata %v, usage %+v", r.Data.Metadata, us)
	}
	if _, err := tc.scrape.Archived(u); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the page fetched with the caller's headers was archived: %v", err)
	}

	// Anyone else: fetched anew, the public page.
	status, r, _ = tc.v2Full(t, fmt.Sprintf(`{"url":%q}`, u))
	if status != 200 || strings.Contains(*r.Data.Markdown, "members' area") || len(site.requests()) != 2 {
		t.Fatalf("a plain scrape after one with headers: %d %s (%d requests)", status, *r.Data.Markdown, len(site.requests()))
	}
	// The same headers again, now that the public page is cached and
	// archived: fetched again, not served the public copy.
	status, r, _ = tc.v2Full(t, withAuth)
	if status != 200 || !strings.Contains(*r.Data.Markdown, "members' area") || r.Data.Metadata["cacheState"] != "miss" || len(site.requests()) != 3 {
		t.Fatalf("headers after a cached plain scrape: %d %+v", status, r.Data.Metadata)
	}

	// A header that would break the transport is refused, named.
	status, r, _ = tc.v2Full(t, fmt.Sprintf(`{"url":%q,"headers":{"Transfer-Encoding":"chunked"}}`, u))
	if status != 400 || r.Code != "BAD_REQUEST" || r.path() != "headers.Transfer-Encoding" {
		t.Errorf("Transfer-Encoding: %d %+v", status, r)
	}
	if len(site.requests()) != 3 {
		t.Error("a refused request reached the site")
	}
}

// POST /scrape takes headers too, with the same rules.
func TestNativeScrapeHeaders(t *testing.T) {
	site := newHeaderSite(t)
	tc := newTestCell(t, nil)
	u := site.URL + "/club"
	body := fmt.Sprintf(`{"url":%q,"format":"md","headers":{"Authorization":"Bearer member-token"}}`, u)
	for i := range 2 {
		resp, b := tc.post(t, "/scrape", body)
		r := decode[scrapeResp](t, b)
		if resp.StatusCode != 200 || !strings.Contains(*r.Markdown, "members' area") {
			t.Fatalf("scrape %d: %d %s", i, resp.StatusCode, b)
		}
		if u := usageOf(t, resp); u == nil || u.Cache != "miss" {
			t.Errorf("scrape %d with headers: usage %+v", i, u)
		}
	}
	if n := len(site.requests()); n != 2 {
		t.Errorf("the site saw %d requests, want 2 (never from the cache)", n)
	}
	resp, b := tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q,"headers":{"Host":"evil.example"}}`, u))
	if r := decode[scrapeResp](t, b); resp.StatusCode != 400 || r.Error != "bad_input" || !strings.Contains(r.Message, `"Host"`) {
		t.Errorf("Host: %d %s", resp.StatusCode, b)
	}
}

// kettlesPDF is the PDF fixture of cell/content/pdftext: two pages, a
// title.
func kettlesPDF(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("content/pdftext/testdata/kettles.pdf")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pdfSite serves the fixture as application/pdf, as an untyped download,
// and a file that says it is a PDF and is not.
func pdfSite(t *testing.T) *httptest.Server {
	pdf := kettlesPDF(t)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/report.pdf":
			w.Header().Set("Content-Type", "application/pdf")
			w.Write(pdf)
		case "/download":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(pdf)
		case "/broken.pdf":
			w.Header().Set("Content-Type", "application/pdf")
			io.WriteString(w, "%PDF-1.7\nnot a PDF after all\n")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func TestV2ScrapePDF(t *testing.T) {
	site := pdfSite(t)
	tc := newTestCell(t, nil)
	const page1, page2 = "The copper kettle boiled one litre in four minutes.", "The glass kettle took six and a half minutes."

	for _, path := range []string{"/report.pdf", "/download"} {
		status, r, us := tc.v2Full(t, fmt.Sprintf(`{"url":%q,"formats":["markdown","html","rawHtml"]}`, site.URL+path))
		if status != 200 || r.Data.Markdown == nil {
			t.Fatalf("%s: %d %+v", path, status, r)
		}
		md := *r.Data.Markdown
		if !strings.Contains(md, page1) || !strings.Contains(md, page2) || !strings.Contains(md, "took five minutes") {
			t.Errorf("%s: markdown\n%s", path, md)
		}
		m := r.Data.Metadata
		if m["contentType"] != "application/pdf" || m["numPages"] != 2.0 || m["title"] != "Kettle Report" || m["statusCode"] != 200.0 {
			t.Errorf("%s: metadata %v", path, m)
		}
		if r.Data.HTML == nil || !strings.Contains(*r.Data.HTML, `<section data-page="2">`) || r.Data.RawHTML == nil || *r.Data.RawHTML != *r.Data.HTML {
			t.Errorf("%s: html %v, rawHtml %v", path, r.Data.HTML, r.Data.RawHTML)
		}
		if us.Engine != "http" || us.Cache != metering.CacheMiss {
			t.Errorf("%s: usage %+v", path, us)
		}
	}

	// maxPages and Firecrawl's page markers.
	status, r, _ := tc.v2Full(t, fmt.Sprintf(`{"url":%q,"maxAge":0,"parsers":[{"type":"pdf","maxPages":1}]}`, site.URL+"/report.pdf"))
	if status != 200 || !strings.Contains(*r.Data.Markdown, page1) || strings.Contains(*r.Data.Markdown, page2) || r.Data.Metadata["numPages"] != 2.0 {
		t.Errorf("maxPages 1: %d %v", status, r.Data.Markdown)
	}
	status, r, _ = tc.v2Full(t, fmt.Sprintf(`{"url":%q,"maxAge":0,"parsers":[{"type":"pdf","pageMarkers":true}]}`, site.URL+"/report.pdf"))
	if status != 200 || !strings.Contains(*r.Data.Markdown, "\n\n---\n\n<!-- page 2 -->\n\nSecond page") {
		t.Errorf("pageMarkers: %d %v", status, r.Data.Markdown)
	}

	// PDF parsing off: the PDF itself, in base64, as Firecrawl answers it;
	// the same from the cache.
	for i := range 2 {
		status, r, _ = tc.v2Full(t, fmt.Sprintf(`{"url":%q,"parsers":[]}`, site.URL+"/report.pdf"))
		if status != 200 || r.Data.Markdown == nil {
			t.Fatalf("parsers [] (%d): %d %+v", i, status, r)
		}
		raw, err := base64.StdEncoding.DecodeString(*r.Data.Markdown)
		if err != nil || string(raw) != string(kettlesPDF(t)) || r.Data.Metadata["contentType"] != "application/pdf" {
			t.Errorf("parsers [] (%d): markdown is not the PDF in base64 (%v)", i, err)
		}
	}

	// A file that is not a PDF after all: Firecrawl's envelope, nothing
	// charged.
	status, r, us := tc.v2Full(t, fmt.Sprintf(`{"url":%q}`, site.URL+"/broken.pdf"))
	if status != 422 || r.Success || r.Code != "SCRAPE_FAILED" || us.Units != 0 {
		t.Errorf("a broken PDF: %d %+v %+v", status, r, us)
	}
}

// POST /scrape converts PDFs through the same path, with the page count.
func TestNativeScrapePDF(t *testing.T) {
	site := pdfSite(t)
	tc := newTestCell(t, nil)
	resp, b := tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q}`, site.URL+"/report.pdf"))
	var r struct {
		scrapeResp
		ContentType string `json:"content_type"`
		Pages       int    `json:"pages"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || r.ContentType != "application/pdf" || r.Pages != 2 || r.Title != "Kettle Report" ||
		!strings.Contains(*r.Markdown, "glass kettle") || !strings.Contains(*r.HTML, `<section data-page="1">`) {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
}

// actionsSite is a page to act on: a search box that shows what was
// searched, and headers logged per request (told apart by engine).
func actionsSite(t *testing.T, log *hitLog) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var traces []string
	s := newHTMLSite(t, log, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		traces = append(traces, r.Header.Get("X-Trace"))
		mu.Unlock()
		io.WriteString(w, `<!doctype html><html><head><title>Tea search</title></head><body><main><h1>Tea search</h1>
<p>`+articleText+`</p>
<input id="q"><button id="go" onclick="document.getElementById('out').textContent = 'You searched for ' + document.getElementById('q').value">Search</button>
<p id="out">Nothing searched yet.</p></main></body></html>`)
	})
	return s, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), traces...)
	}
}

// Actions run in the browser, in order, before the capture: the document
// is the page as they left it, with their results in Firecrawl's shape,
// billed at the browser's level. A selector that never appears is
// Firecrawl's SCRAPE_ACTION_ERROR, before the request's timeout.
func TestV2ScrapeActionsWithBrowser(t *testing.T) {
	requireBrowser(t)
	tc := newTestCell(t, func(c *Config) {
		c.Browsers = 1
		c.BrowserPages = 2
	})
	var log hitLog
	site, traces := actionsSite(t, &log)
	body := fmt.Sprintf(`{"url":%q,"formats":["markdown","screenshot"],"headers":{"X-Trace":"t-7"},"actions":[
		{"type":"click","selector":"#q"},
		{"type":"write","text":"oolong"},
		{"type":"click","selector":"#go"},
		{"type":"wait","milliseconds":20},
		{"type":"executeJavascript","script":"return document.getElementById('out').textContent"},
		{"type":"executeJavascript","script":"document.title.length"},
		{"type":"screenshot"},
		{"type":"scrape"}]}`, site.URL+"/search")
	status, r, us := tc.v2Full(t, body)
	if status != 200 || r.Data.Markdown == nil {
		t.Fatalf("actions: %d %+v", status, r)
	}
	if !strings.Contains(*r.Data.Markdown, "You searched for oolong") {
		t.Errorf("the document is not the page as the actions left it:\n%s", *r.Data.Markdown)
	}
	a := r.Data.Actions
	if a == nil || a.PDFs == nil || len(a.PDFs) != 0 || len(a.JavascriptReturns) != 2 || len(a.Screenshots) != 1 || len(a.Scrapes) != 1 {
		t.Fatalf("actions: %+v", a)
	}
	if js := a.JavascriptReturns[0]; js.Type != "string" || string(js.Value) != `"You searched for oolong"` {
		t.Errorf("javascriptReturns[0]: %s %s", js.Type, js.Value)
	}
	if js := a.JavascriptReturns[1]; js.Type != "number" || string(js.Value) != "10" {
		t.Errorf("javascriptReturns[1]: %s %s", js.Type, js.Value)
	}
	if !strings.HasPrefix(a.Screenshots[0], "data:image/png;base64,") || !strings.HasPrefix(r.Data.Screenshot, "data:image/png;base64,") {
		t.Errorf("screenshots: %.40s, screenshot format %.40s", a.Screenshots[0], r.Data.Screenshot)
	}
	if sc := a.Scrapes[0]; sc.URL != site.URL+"/search" || !strings.Contains(sc.HTML, "You searched for oolong") {
		t.Errorf("scrapes: %s %.100s", sc.URL, sc.HTML)
	}
	if us.Engine != "browser" || us.Level != "browser" || us.Cache != metering.CacheMiss {
		t.Errorf("usage %+v, want the browser's level", us)
	}
	if got := log.take(); got != "/search browser" {
		t.Errorf("the site saw %q, want one browser request", got)
	}
	if tr := traces(); len(tr) != 1 || tr[0] != "t-7" {
		t.Errorf("the browser sent X-Trace %q", tr)
	}

	// A selector that never appears: the action's error, named, in time.
	body = fmt.Sprintf(`{"url":%q,"timeout":8000,"actions":[{"type":"click","selector":"#q"},{"type":"wait","selector":"#never"}]}`, site.URL+"/search")
	status, r, us = tc.v2Full(t, body)
	if status != 500 || r.Code != "SCRAPE_ACTION_ERROR" || r.path() != "actions.1" || !strings.HasPrefix(r.Error, "Action(s) failed to complete") {
		t.Errorf("a missing selector: %d %+v", status, r)
	}
	if us.Units != 0 || us.Engine != "" {
		t.Errorf("a failed action carries usage %+v", us)
	}
	t.Logf("a missing selector: %d %s", status, r.Error)

	// A PDF in the browser: Chromium shows its viewer, and the page's
	// document is read again for the PDF's own bytes.
	pdf := pdfSite(t)
	status, r, _ = tc.v2Full(t, fmt.Sprintf(`{"url":%q,"actions":[{"type":"scrape"}]}`, pdf.URL+"/report.pdf"))
	if status != 200 || r.Data.Metadata["contentType"] != "application/pdf" || r.Data.Metadata["numPages"] != 2.0 ||
		!strings.Contains(*r.Data.Markdown, "The glass kettle took six and a half minutes.") {
		t.Errorf("a PDF in the browser: %d %+v", status, r)
	}
}

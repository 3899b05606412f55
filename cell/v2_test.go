package cell

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/metering"
)

// v2Page is a page with navigation, a main article, an ad, a footer,
// links, an image and its own metadata.
const v2Page = `<!DOCTYPE html><html lang="en"><head><title>Kettles compared</title>
<meta name="description" content="Three kettles boiled side by side.">
<meta property="og:title" content="Kettles, compared"><meta property="og:site_name" content="Tea Lab">
</head><body>
<nav><a href="/">Home</a> <a href="/about">About us</a></nav>
<main id="main"><article><h1>Kettles compared</h1>
<p class="lead">We boiled three kettles side by side and timed each one from cold water to a rolling boil.</p>
<div class="ad">Buy the Turbo Kettle 9000 today, now with a free mug!</div>
<p>The copper kettle was the fastest at four minutes, the enamel one took five, and the glass one six and a half.
Each was filled with one litre of water from the same tap at the same temperature before it went on the stove.</p>
<img src="/img/kettles.jpg" alt="three kettles">
<p>Read the <a href="/method">method</a> or see <a href="https://other.example/tea">another test</a>.</p>
</article></main>
<footer>Copyright Tea Lab, all rights reserved.</footer>
</body></html>`

type v2Site struct {
	*httptest.Server
	hits atomic.Int64
}

func newV2Site(t *testing.T) *v2Site {
	s := &v2Site{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			<-r.Context().Done()
			return
		case "/missing":
			http.NotFound(w, r)
			return
		}
		s.hits.Add(1)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, v2Page)
	}))
	t.Cleanup(s.Close)
	return s
}

type v2Doc struct {
	Markdown *string        `json:"markdown"`
	HTML     *string        `json:"html"`
	RawHTML  *string        `json:"rawHtml"`
	Links    []string       `json:"links"`
	Images   []string       `json:"images"`
	JSON     map[string]any `json:"json"`
	Metadata map[string]any `json:"metadata"`
}

type v2Resp struct {
	Success bool   `json:"success"`
	Data    v2Doc  `json:"data"`
	Error   string `json:"error"`
	Code    string `json:"code"`
	Details any    `json:"details"`
}

func (tc *testCell) v2(t *testing.T, body string) (int, v2Resp, metering.Usage) {
	t.Helper()
	resp, b := tc.post(t, "/v2/scrape", body)
	r := decode[v2Resp](t, b)
	var u metering.Usage
	if h := resp.Header.Get(metering.Header); h != "" {
		if err := json.Unmarshal([]byte(h), &u); err != nil {
			t.Fatalf("usage %q: %v", h, err)
		}
	}
	return resp.StatusCode, r, u
}

func TestV2ScrapeFormatsAndMetadata(t *testing.T) {
	site := newV2Site(t)
	tc := newTestCell(t, nil)

	// The SDKs' defaults and their unknown keys: Markdown of the main
	// content, the page's metadata in Firecrawl's names.
	status, r, u := tc.v2(t, fmt.Sprintf(`{"url":%q,"origin":"js-sdk@4.42.0","integration":"test"}`, site.URL+"/a"))
	if status != 200 || !r.Success || r.Data.Markdown == nil {
		t.Fatalf("scrape: %d %+v", status, r)
	}
	md := *r.Data.Markdown
	if !strings.Contains(md, "copper kettle was the fastest") || strings.Contains(md, "About us") || strings.Contains(md, "all rights reserved") {
		t.Errorf("markdown is not the main content:\n%s", md)
	}
	if r.Data.HTML != nil || r.Data.RawHTML != nil || r.Data.Links != nil {
		t.Errorf("formats not asked for: %+v", r.Data)
	}
	m := r.Data.Metadata
	for k, want := range map[string]any{"title": "Kettles compared", "description": "Three kettles boiled side by side.", "language": "en",
		"ogTitle": "Kettles, compared", "ogSiteName": "Tea Lab", "sourceURL": site.URL + "/a", "url": site.URL + "/a",
		"statusCode": 200.0, "cacheState": "miss", "proxyUsed": "basic"} {
		if m[k] != want {
			t.Errorf("metadata %s = %#v, want %#v", k, m[k], want)
		}
	}
	if u.Cache != metering.CacheMiss || u.Engine != "http" || u.Kind != "" {
		t.Errorf("usage %+v", u)
	}

	// The whole page, as fetched and converted, with its links and images.
	status, r, _ = tc.v2(t, fmt.Sprintf(`{"url":%q,"formats":["markdown","html","rawHtml","links","images"],"onlyMainContent":false,"maxAge":0}`, site.URL+"/b"))
	if status != 200 {
		t.Fatalf("full page: %d %+v", status, r)
	}
	if !strings.Contains(*r.Data.Markdown, "About us") || !strings.Contains(*r.Data.Markdown, "all rights reserved") {
		t.Errorf("onlyMainContent false lost the page's navigation or footer:\n%s", *r.Data.Markdown)
	}
	if r.Data.RawHTML == nil || *r.Data.RawHTML != v2Page {
		t.Errorf("rawHtml is not the page as served")
	}
	if r.Data.HTML == nil || !strings.Contains(*r.Data.HTML, "<footer") && !strings.Contains(*r.Data.HTML, "all rights reserved") {
		t.Errorf("html: %v", r.Data.HTML)
	}
	wantLinks := []string{site.URL + "/method", "https://other.example/tea"}
	for _, l := range wantLinks {
		if !slices.Contains(r.Data.Links, l) {
			t.Errorf("links %v lack %s", r.Data.Links, l)
		}
	}
	if !slices.Contains(r.Data.Images, site.URL+"/img/kettles.jpg") {
		t.Errorf("images %v", r.Data.Images)
	}

	// Tags: the content cut to the article's paragraphs, the ad removed.
	status, r, _ = tc.v2(t, fmt.Sprintf(`{"url":%q,"includeTags":["article p"],"excludeTags":[".ad"],"maxAge":0}`, site.URL+"/c"))
	if status != 200 {
		t.Fatalf("tags: %d %+v", status, r)
	}
	md = *r.Data.Markdown
	if !strings.Contains(md, "copper kettle") || strings.Contains(md, "Turbo Kettle") || strings.Contains(md, "Kettles compared") {
		t.Errorf("includeTags/excludeTags:\n%s", md)
	}
}

func TestV2ScrapeMaxAgeServesTheArchive(t *testing.T) {
	site := newV2Site(t)
	tc := newTestCell(t, nil)
	u := site.URL + "/page"
	if status, r, _ := tc.v2(t, fmt.Sprintf(`{"url":%q}`, u)); status != 200 || r.Data.Metadata["cacheState"] != "miss" {
		t.Fatalf("first: %d %+v", status, r)
	}
	fetched := site.hits.Load()
	// An hour on, past the cache's ten minutes but within maxAge's two
	// days: from the archive, billed as an archive hit.
	tc.now.Add(int64(time.Hour))
	status, r, us := tc.v2(t, fmt.Sprintf(`{"url":%q,"formats":["markdown","links"]}`, u))
	if status != 200 || r.Data.Metadata["cacheState"] != "hit" || r.Data.Metadata["cachedAt"] == nil || site.hits.Load() != fetched {
		t.Fatalf("within maxAge: %d %+v (fetches %d → %d)", status, r.Data.Metadata, fetched, site.hits.Load())
	}
	if !strings.Contains(*r.Data.Markdown, "copper kettle") || !slices.Contains(r.Data.Links, u[:strings.LastIndex(u, "/")]+"/method") {
		t.Errorf("archive copy: %+v", r.Data)
	}
	if us.Cache != metering.CacheArchive {
		t.Errorf("usage of an archive copy: %+v", us)
	}
	// maxAge shorter than the copy's age: fetched again.
	status, r, _ = tc.v2(t, fmt.Sprintf(`{"url":%q,"maxAge":60000}`, u))
	if status != 200 || r.Data.Metadata["cacheState"] != "miss" || site.hits.Load() != fetched+1 {
		t.Fatalf("maxAge 60 s: %d %+v", status, r.Data.Metadata)
	}
	// storeInCache false: fetched, and kept nowhere.
	nu := site.URL + "/private"
	tc.v2(t, fmt.Sprintf(`{"url":%q,"storeInCache":false}`, nu))
	before := site.hits.Load()
	if status, r, _ := tc.v2(t, fmt.Sprintf(`{"url":%q}`, nu)); status != 200 || r.Data.Metadata["cacheState"] != "miss" || site.hits.Load() != before+1 {
		t.Errorf("a page scraped with storeInCache false was kept: %d %+v", status, r.Data.Metadata)
	}
	// minAge: only a copy at least that old; none is.
	if status, r, _ := tc.v2(t, fmt.Sprintf(`{"url":%q,"minAge":86400000}`, u)); status != 404 || r.Success || r.Code != "NOT_FOUND" {
		t.Errorf("minAge with no old copy: %d %+v", status, r)
	}
}

func TestV2ScrapeJSONFormat(t *testing.T) {
	tc := newTestCell(t, nil)
	site := productSite(t)
	status, r, u := tc.v2(t, `{"url":"`+site.URL+`/p/ridge","formats":["markdown",{"type":"json","schema":`+productSchema+`}]}`)
	if status != 200 || r.Data.JSON == nil {
		t.Fatalf("json: %d %+v", status, r)
	}
	if r.Data.JSON["name"] != "Ridge Tent 2P" || r.Data.JSON["price"] != 1299.0 {
		t.Errorf("json %v", r.Data.JSON)
	}
	if u.Kind != metering.KindExtract || len(u.Lines) == 0 || u.Lines[0].Call != metering.KindScrape {
		t.Errorf("a json format bills as an extraction with the scrape as its first line: %+v", u)
	}
}

// Firecrawl's error envelope: a wrong type, a missing url, a feature trawl
// does not honour, a timeout. Nothing of them is charged.
func TestV2ScrapeErrors(t *testing.T) {
	site := newV2Site(t)
	tc := newTestCell(t, nil)
	tests := []struct {
		name, body string
		status     int
		code       string
	}{
		{"formats not a list", `{"url":"` + site.URL + `/a","formats":"markdown"}`, 400, "BAD_REQUEST"},
		{"no url", `{"formats":["markdown"]}`, 400, "BAD_REQUEST"},
		{"unknown format", `{"url":"` + site.URL + `/a","formats":["telepathy"]}`, 400, "BAD_REQUEST"},
		{"bad selector", `{"url":"` + site.URL + `/a","includeTags":["p[["]}`, 400, "BAD_REQUEST"},
		{"a header of the transport", `{"url":"` + site.URL + `/a","headers":{"Host":"other.example"}}`, 400, "BAD_REQUEST"},
		{"an unknown action", `{"url":"` + site.URL + `/a","actions":[{"type":"teleport"}]}`, 400, "BAD_REQUEST"},
		{"actions without a browser", `{"url":"` + site.URL + `/a","actions":[{"type":"wait","milliseconds":10}]}`, 400, "BAD_REQUEST"},
		{"the pdf action", `{"url":"` + site.URL + `/a","actions":[{"type":"pdf"}]}`, 400, "UNSUPPORTED_FEATURE"},
		{"change tracking json mode", `{"url":"` + site.URL + `/a","formats":["markdown",{"type":"changeTracking","modes":["json"]}]}`, 400, "UNSUPPORTED_FEATURE"},
		{"summary without a model", `{"url":"` + site.URL + `/a","formats":["summary"]}`, 400, "UNSUPPORTED_FEATURE"},
		{"not a web url", `{"url":"ftp://example.com/x"}`, 400, "UNSUPPORTED_URL"},
		{"timeout", `{"url":"` + site.URL + `/slow","timeout":1000}`, 408, "SCRAPE_TIMEOUT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, r, u := tc.v2(t, tt.body)
			if status != tt.status || r.Success || r.Code != tt.code || r.Error == "" {
				t.Errorf("%d %+v, want %d %s", status, r, tt.status, tt.code)
			}
			if u.Units != 0 || u.Engine != "" {
				t.Errorf("a refusal carries usage %+v", u)
			}
		})
	}
	// A site's error page is a document with its status, as Firecrawl's.
	status, r, _ := tc.v2(t, `{"url":"`+site.URL+`/missing"}`)
	if status != 200 || r.Data.Metadata["statusCode"] != 404.0 || r.Data.Metadata["error"] == nil {
		t.Errorf("a 404 page: %d %+v", status, r)
	}
}

// A repeat within the scrape cache's window is a cache hit: free, not
// fetched, not converted again.
func TestV2ScrapeRepeatIsACacheHit(t *testing.T) {
	site := newV2Site(t)
	tc := newTestCell(t, nil)
	body := fmt.Sprintf(`{"url":%q,"formats":["markdown","links"]}`, site.URL+"/again")
	tc.v2(t, body)
	fetched := site.hits.Load()
	tc.now.Add(int64(time.Minute))
	status, r, u := tc.v2(t, body)
	if status != 200 || r.Data.Metadata["cacheState"] != "hit" || site.hits.Load() != fetched || !strings.Contains(*r.Data.Markdown, "copper kettle") || len(r.Data.Links) == 0 {
		t.Fatalf("repeat: %d %+v", status, r.Data)
	}
	if u.Cache != metering.CacheHit || u.Engine != metering.EngineCache {
		t.Errorf("usage of a repeat: %+v", u)
	}
}

// A wrong type is named by its JSON path, as the client sent it.
func TestV2ScrapeNamesTheFieldAtFault(t *testing.T) {
	tc := newTestCell(t, nil)
	status, r, _ := tc.v2(t, `{"url":"http://127.0.0.1:1/a","onlyMainContent":"yes"}`)
	if status != 400 || strings.Contains(r.Error, "ScrapeOptions") || !strings.Contains(r.Error, "onlyMainContent") {
		t.Errorf("%d %+v", status, r)
	}
}

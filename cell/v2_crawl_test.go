package cell

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/testwait"
)

// crawlSite is a small site for the crawl tests: /docs/ pages linking to
// each other, to a page outside /docs/, to one robots.txt disallows and
// to another host; a sitemap naming a page no link reaches; a chain of
// pages for depth. It counts the fetches of each path.
type crawlSite struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func page(title string, links ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<!DOCTYPE html><html lang="en"><head><title>%s</title></head><body><nav>`, title)
	for _, l := range links {
		fmt.Fprintf(&b, `<a href="%s">%s</a> `, l, l)
	}
	fmt.Fprintf(&b, `</nav><main><article><h1>%s</h1><p>This page is about %s, and it has a paragraph long enough for the extractor to see it as the main content of the page.</p></article></main></body></html>`, title, strings.ToLower(title))
	return b.String()
}

func newCrawlSite(t *testing.T) *crawlSite {
	s := &crawlSite{hits: map[string]int{}}
	pages := map[string]string{
		"/docs/index.html":          page("Index", "a.html", "/docs/b.html#part", "/docs/b.html?x=1", "/other/x.html", "private/secret.html", "http://elsewhere.invalid/p", "deep/1.html", "mailto:a@b.c"),
		"/docs/a.html":              page("Alpha", "index.html", "b.html"),
		"/docs/b.html":              page("Beta", "a.html"),
		"/docs/b.html?x=1":          page("Beta with a query", "a.html"),
		"/docs/c.html":              page("Gamma"),
		"/docs/deep/1.html":         page("Deep one", "2.html"),
		"/docs/deep/2.html":         page("Deep two", "3.html"),
		"/docs/deep/3.html":         page("Deep three"),
		"/docs/private/secret.html": page("Secret"),
		"/other/x.html":             page("Other"),
	}
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Path
		if r.URL.RawQuery != "" {
			key += "?" + r.URL.RawQuery
		}
		s.mu.Lock()
		s.hits[key]++
		s.mu.Unlock()
		switch r.URL.Path {
		case "/robots.txt":
			io.WriteString(w, "User-agent: *\nDisallow: /docs/private/\nSitemap: "+srv.URL+"/sitemap.xml\n")
			return
		case "/sitemap.xml":
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprintf(w, `<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>%[1]s/docs/c.html</loc></url><url><loc>%[1]s/docs/a.html</loc></url><url><loc>%[1]s/other/y.html</loc></url></urlset>`, srv.URL)
			return
		}
		body, ok := pages[key]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, body)
	}))
	s.Server = srv
	t.Cleanup(srv.Close)
	return s
}

func (s *crawlSite) fetched(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[key]
}

type crawlErrors struct {
	Errors []struct {
		ID    string `json:"id"`
		URL   string `json:"url"`
		Code  string `json:"code"`
		Error string `json:"error"`
	} `json:"errors"`
	RobotsBlocked []string `json:"robotsBlocked"`
}

func (tc *testCell) startCrawl(t *testing.T, body string) batchStarted {
	t.Helper()
	resp, b := tc.do(t, "POST", "/v2/crawl", body, "", nil)
	r := decode[batchStarted](t, b)
	if resp.StatusCode != 200 || !r.Success || r.ID == "" {
		t.Fatalf("start crawl: %d %s", resp.StatusCode, b)
	}
	if resp.Header.Get("Trawl-Usage") != "" {
		t.Errorf("a crawl's start is free (its pages are charged): usage %q", resp.Header.Get("Trawl-Usage"))
	}
	return r
}

func (tc *testCell) waitCrawl(t *testing.T, id string, cond func(batchStatus) bool) batchStatus {
	t.Helper()
	var s batchStatus
	if err := testwait.Poll(60*time.Second, func() bool {
		s = tc.batchStatus(t, "/v2/crawl/"+id)
		return cond(s)
	}); err != nil {
		t.Fatalf("crawl %s: %v; last %+v", id, err, s)
	}
	return s
}

func sources(s batchStatus) []string {
	var out []string
	for _, d := range s.Data {
		out = append(out, d.Metadata["sourceURL"].(string))
	}
	sort.Strings(out)
	return out
}

// collectCharges is the gate's collection of the cell's charge outbox:
// it lists the crawl charges and acknowledges them with a price each
// (refusing those refuse says), as gate/monitorcharges.go does.
func (tc *testCell) collectCharges(t *testing.T, price string, refuse func(id string) bool) []crawlCharge {
	t.Helper()
	asGate := map[string]string{testAccountHeader: ""}
	resp, b := tc.do(t, "GET", "/monitor-charges", "", "", asGate)
	if resp.StatusCode != 200 {
		t.Fatalf("charges: %d %s", resp.StatusCode, b)
	}
	var list struct {
		Charges []json.RawMessage `json:"charges"`
	}
	json.Unmarshal(b, &list)
	var out []crawlCharge
	ack := map[string]any{"ids": []string{}, "credits": map[string]string{}, "refused": []string{}}
	for _, raw := range list.Charges {
		var c crawlCharge
		json.Unmarshal(raw, &c)
		if !strings.HasPrefix(c.ID, crawlChargeID) {
			continue
		}
		out = append(out, c)
		ack["ids"] = append(ack["ids"].([]string), c.ID)
		if refuse != nil && refuse(c.ID) {
			ack["refused"] = append(ack["refused"].([]string), c.ID)
		} else {
			ack["credits"].(map[string]string)[c.ID] = price
		}
	}
	body, _ := json.Marshal(ack)
	if resp, b := tc.do(t, "POST", "/monitor-charges/ack", string(body), "", asGate); resp.StatusCode != 200 {
		t.Fatalf("ack: %d %s", resp.StatusCode, b)
	}
	return out
}

// A crawl follows the links of its pages within the start URL's
// directory and the site's sitemap, each URL once (fragments dropped,
// queries kept unless ignored), honours robots.txt, and charges each page
// it scraped through the outbox; its creditsUsed is what the gate
// acknowledged.
func TestV2Crawl(t *testing.T) {
	site := newCrawlSite(t)
	tc := newTestCell(t, nil)
	r := tc.startCrawl(t, `{"url": "`+site.URL+`/docs/index.html", "scrapeOptions": {"formats": ["markdown"]}, "origin": "js-sdk@4.42.0", "integration": "t"}`)
	if r.URL != tc.srv.URL+"/v2/crawl/"+r.ID {
		t.Errorf("status URL %q", r.URL)
	}
	s := tc.waitCrawl(t, r.ID, func(s batchStatus) bool { return s.Status == "completed" })
	want := []string{"/docs/a.html", "/docs/b.html", "/docs/b.html?x=1", "/docs/c.html", "/docs/deep/1.html", "/docs/deep/2.html", "/docs/deep/3.html", "/docs/index.html"}
	for i := range want {
		want[i] = site.URL + want[i]
	}
	if got := sources(s); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("crawled\n%v\nwant\n%v", got, want)
	}
	if s.Total != 9 || s.Completed != 8 || s.CreditsUsed != 0 {
		t.Errorf("status %+v", s)
	}
	for _, d := range s.Data {
		if d.Links != nil {
			t.Errorf("links shown though not asked for: %v", d.Links)
		}
		if d.Markdown == nil || !strings.Contains(*d.Markdown, "This page is about") {
			t.Errorf("document %v without its markdown", d.Metadata["sourceURL"])
		}
	}
	for _, k := range []string{"/docs/index.html", "/docs/a.html", "/docs/b.html"} {
		if n := site.fetched(k); n != 1 {
			t.Errorf("%s fetched %d times", k, n)
		}
	}
	for _, k := range []string{"/other/x.html", "/other/y.html", "/docs/private/secret.html"} {
		if n := site.fetched(k); n != 0 {
			t.Errorf("%s fetched (outside the crawl, or robots.txt disallows it)", k)
		}
	}
	_, b := tc.get(t, "/v2/crawl/"+r.ID+"/errors")
	errs := decode[crawlErrors](t, b)
	if len(errs.Errors) != 0 || len(errs.RobotsBlocked) != 1 || errs.RobotsBlocked[0] != site.URL+"/docs/private/secret.html" {
		t.Errorf("errors %s", b)
	}
	charges := tc.collectCharges(t, "1.000", nil)
	if len(charges) != 8 {
		t.Fatalf("%d page charges, want 8: %+v", len(charges), charges)
	}
	for _, c := range charges {
		if c.Account != testAccount || c.Crawl != r.ID || c.Usage.Kind != "crawl" || c.Usage.Engine == "" {
			t.Errorf("charge %+v", c)
		}
	}
	if again := tc.collectCharges(t, "1.000", nil); len(again) != 0 {
		t.Errorf("acknowledged charges listed again: %d", len(again))
	}
	s = tc.batchStatus(t, "/v2/crawl/"+r.ID)
	if s.CreditsUsed != 8 {
		t.Errorf("creditsUsed %v after the gate charged 8 pages", s.CreditsUsed)
	}
	// Another account sees no such crawl.
	if resp, b := tc.do(t, "GET", "/v2/crawl/"+r.ID, "", "acct_other", nil); resp.StatusCode != 404 || !strings.Contains(string(b), "NOT_FOUND") {
		t.Errorf("another account's GET: %d %s", resp.StatusCode, b)
	}
	// Nor is a crawl a batch, or a batch a crawl.
	if resp, _ := tc.get(t, "/v2/batch/scrape/"+r.ID); resp.StatusCode != 404 {
		t.Errorf("a crawl read as a batch: %d", resp.StatusCode)
	}
	// Past its retention the crawl is swept, its credits with it.
	tc.now.Add(int64(8 * 24 * time.Hour))
	tc.sweep()
	if _, err := tc.readCredits(r.ID); err == nil {
		t.Error("a swept crawl's credits are kept")
	}
	if resp, _ := tc.get(t, "/v2/crawl/"+r.ID); resp.StatusCode != 404 {
		t.Errorf("a swept crawl: %d", resp.StatusCode)
	}
}

// The crawl's options: limit, depth, include and exclude patterns,
// ignored queries, the sitemap modes, the entire domain.
func TestV2CrawlOptions(t *testing.T) {
	site := newCrawlSite(t)
	tc := newTestCell(t, nil)
	start := site.URL + "/docs/index.html"
	for _, c := range []struct {
		name, opts string
		want       []string
	}{
		{"limit", `"limit": 2, "sitemap": "skip"`, []string{"/docs/a.html", "/docs/index.html"}},
		{"depth 0", `"maxDiscoveryDepth": 0`, []string{"/docs/index.html"}},
		{"depth 1 without the sitemap", `"maxDiscoveryDepth": 1, "sitemap": "skip"`, []string{"/docs/a.html", "/docs/b.html", "/docs/b.html?x=1", "/docs/deep/1.html", "/docs/index.html"}},
		{"sitemap only", `"sitemap": "only"`, []string{"/docs/a.html", "/docs/c.html", "/docs/index.html"}},
		{"include", `"includePaths": ["^/docs/deep/"], "sitemap": "skip"`, []string{"/docs/deep/1.html", "/docs/deep/2.html", "/docs/deep/3.html", "/docs/index.html"}},
		{"exclude", `"excludePaths": ["deep", "b\\.html"], "sitemap": "skip"`, []string{"/docs/a.html", "/docs/index.html"}},
		{"ignore queries", `"ignoreQueryParameters": true, "sitemap": "skip", "excludePaths": ["deep"]`, []string{"/docs/a.html", "/docs/b.html", "/docs/index.html"}},
		{"entire domain", `"crawlEntireDomain": true, "excludePaths": ["deep"]`, []string{"/docs/a.html", "/docs/b.html", "/docs/b.html?x=1", "/docs/c.html", "/docs/index.html", "/other/x.html"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := tc.startCrawl(t, `{"url": "`+start+`", `+c.opts+`}`)
			s := tc.waitCrawl(t, r.ID, func(s batchStatus) bool { return s.Status == "completed" })
			var want []string
			for _, p := range c.want {
				want = append(want, site.URL+p)
			}
			// /other/y.html is in the sitemap but not on the site: a 404
			// document, still a page of the crawl.
			for _, d := range s.Data {
				if d.Markdown == nil {
					t.Errorf("%v: no markdown, Firecrawl's default format", d.Metadata["sourceURL"])
				}
			}
			got := sources(s)
			got = slicesDelete(got, site.URL+"/other/y.html")
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("crawled\n%v\nwant\n%v", got, want)
			}
		})
	}
}

func slicesDelete(s []string, v string) []string {
	var out []string
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

// Bad requests are Firecrawl's 400s, and what trawl cannot honour its
// UNSUPPORTED_FEATURE; nothing is recorded.
func TestV2CrawlRefusals(t *testing.T) {
	tc := newTestCell(t, nil)
	for _, c := range []struct{ body, code, path string }{
		{`{}`, "BAD_REQUEST", "url"},
		{`{"url": "ftp://a.example/"}`, "UNSUPPORTED_URL", ""},
		{`{"url": "https://a.example/", "limit": 0}`, "BAD_REQUEST", "limit"},
		{`{"url": "https://a.example/", "limit": "ten"}`, "BAD_REQUEST", "limit"},
		{`{"url": "https://a.example/", "includePaths": ["("]}`, "BAD_REQUEST", "includePaths"},
		{`{"url": "https://a.example/", "sitemap": "sometimes"}`, "BAD_REQUEST", "sitemap"},
		{`{"url": "https://a.example/", "delay": -1}`, "BAD_REQUEST", "delay"},
		{`{"url": "https://a.example/", "prompt": "only the blog"}`, "UNSUPPORTED_FEATURE", "prompt"},
		{`{"url": "https://a.example/", "ignoreRobotsTxt": true}`, "UNSUPPORTED_FEATURE", "ignoreRobotsTxt"},
		{`{"url": "https://a.example/", "scrapeOptions": {"formats": ["summary"]}}`, "UNSUPPORTED_FEATURE", "scrapeOptions.formats"},
		{`{"url": "https://a.example/", "scrapeOptions": {"headers": {"Cookie": "s=1"}}}`, "UNSUPPORTED_FEATURE", "scrapeOptions.headers"},
	} {
		resp, b := tc.do(t, "POST", "/v2/crawl", c.body, "", nil)
		r := decode[batchStarted](t, b)
		wantStatus := 400
		if resp.StatusCode != wantStatus || r.Success || r.Code != c.code {
			t.Errorf("%s: %d %s", c.body, resp.StatusCode, b)
			continue
		}
		if c.path != "" && (len(r.Details) == 0 || !strings.HasPrefix(strings.Join(r.Details[0].Path, "."), c.path)) {
			t.Errorf("%s: details %s", c.body, b)
		}
	}
	if n, _, _ := tc.jobs.Backlog(); n != 0 {
		t.Errorf("a refused crawl left %d jobs", n)
	}
}

// A cancelled crawl fetches nothing more; a crawl whose page the gate
// could not charge (no credit) stops, failed, with the reason.
func TestV2CrawlCancelAndNoCredit(t *testing.T) {
	site := newCrawlSite(t)
	tc := newTestCell(t, nil)
	r := tc.startCrawl(t, `{"url": "`+site.URL+`/docs/index.html", "delay": 0.2}`)
	tc.waitCrawl(t, r.ID, func(s batchStatus) bool { return s.Completed >= 1 })
	resp, b := tc.do(t, "DELETE", "/v2/crawl/"+r.ID, "", "", nil)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"status":"cancelled"`) {
		t.Fatalf("cancel: %d %s", resp.StatusCode, b)
	}
	s := tc.waitCrawl(t, r.ID, func(s batchStatus) bool { return s.Status == "cancelled" })
	n := s.Completed
	if s2 := tc.batchStatus(t, "/v2/crawl/"+r.ID); s2.Completed > n+1 {
		t.Errorf("pages scraped after the cancel: %d → %d", n, s2.Completed)
	}

	r = tc.startCrawl(t, `{"url": "`+site.URL+`/docs/index.html", "delay": 0.2}`)
	tc.waitCrawl(t, r.ID, func(s batchStatus) bool { return s.Completed >= 1 })
	tc.collectCharges(t, "0.000", func(id string) bool { return strings.Contains(id, r.ID) })
	s = tc.waitCrawl(t, r.ID, func(s batchStatus) bool { return s.Status == "failed" })
	if !strings.Contains(s.Error, "no credit") {
		t.Errorf("failed crawl: %+v", s)
	}
}

// A crawl's webhook gets crawl.started, a crawl.page per page (a page
// robots.txt refused is a failed page), then crawl.completed, signed as
// a batch's are; the active list does not show the webhook's secret.
func TestV2CrawlWebhook(t *testing.T) {
	site := newCrawlSite(t)
	tc := newTestCell(t, withHookSecrets)
	rc := newHookReceiver(t, func(int) int { return 200 })
	r := tc.startCrawl(t, `{"url": "`+site.URL+`/docs/index.html", "sitemap": "skip", "maxDiscoveryDepth": 1, "excludePaths": ["deep"],
		"webhook": {"url": "`+rc.URL+`/hook", "metadata": {"run": "7"}}}`)
	tc.waitCrawl(t, r.ID, func(s batchStatus) bool { return s.Status == "completed" })
	// index, a, b, b?x=1 and the refused private page: 5 page events.
	got := tc.waitHooks(t, rc, "started, 5 pages, completed", func(p []hookPost) bool { return len(p) >= 7 })
	types := rc.types()
	if len(got) != 7 || types[0] != "crawl.started" || types[6] != "crawl.completed" {
		t.Fatalf("deliveries %v", types)
	}
	failed := 0
	for _, p := range got {
		tc.checkSigned(t, p)
		if p.body.ID != r.ID || p.body.Metadata["run"] != "7" {
			t.Errorf("%s: id %q metadata %v", p.body.Type, p.body.ID, p.body.Metadata)
		}
		if p.body.Type == "crawl.page" && !p.body.Success {
			failed++
		}
	}
	if failed != 1 {
		t.Errorf("%d failed page events, want 1 (robots.txt)", failed)
	}
	_, b := tc.get(t, "/crawls/active")
	if strings.Contains(string(b), testHookSecret) {
		t.Errorf("the active list shows the webhook's secret: %s", b)
	}
}

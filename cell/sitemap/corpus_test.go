package sitemap

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/internal/testcorpus"
)

// requireCorpus skips t when the PostgreSQL documentation is not
// installed, unless TRAWL_REQUIRE_BROWSER is set (make test sets it and
// installs the corpus), like the other corpus and browser tests.
func requireCorpus(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(testcorpus.PostgresDocs); err != nil {
		if v := os.Getenv("TRAWL_REQUIRE_BROWSER"); v != "" && v != "0" {
			t.Fatalf("corpus required (TRAWL_REQUIRE_BROWSER is set): %v", err)
		}
		t.Skipf("corpus %s is not installed (make deps-test): %v", testcorpus.PostgresDocs, err)
	}
}

// httpFetcher is a plain loopback Fetcher.
func httpFetcher() Fetcher {
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	return func(ctx context.Context, u string) (int, string, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return 0, "", nil, err
		}
		res, err := client.Do(req)
		if err != nil {
			return 0, "", nil, err
		}
		defer res.Body.Close()
		body, err := io.ReadAll(io.LimitReader(res.Body, DefaultMaxBodyBytes+1))
		return res.StatusCode, res.Header.Get("Content-Type"), body, err
	}
}

// checkOnDisk fails t for a link that is not one of the corpus's files
// under srvURL.
func checkOnDisk(t *testing.T, srvURL string, links []Link) {
	t.Helper()
	for _, l := range links {
		u, err := url.Parse(l.URL)
		if err != nil || !strings.HasPrefix(l.URL, srvURL) || u.RawQuery != "" || u.Fragment != "" {
			t.Errorf("link %s is not a plain URL of %s", l.URL, srvURL)
			continue
		}
		p := u.Path
		if p == "" {
			p = "/index.html"
		}
		if _, err := os.Stat(filepath.Join(testcorpus.PostgresDocs, filepath.FromSlash(path.Clean(p)))); err != nil {
			t.Errorf("link %s is no file of the corpus: %v", l.URL, err)
		}
	}
}

// The PostgreSQL manual as it is installed: no robots.txt, no sitemap.
// Map reads the start page and the pages it links to.
func TestMapPostgresDocsLinks(t *testing.T) {
	requireCorpus(t)
	srv := testcorpus.Serve(t, testcorpus.PostgresDocs)
	home, err := os.ReadFile(filepath.Join(testcorpus.PostgresDocs, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	title := regexp.MustCompile(`<title>([^<]*)</title>`).FindSubmatch(home)
	if title == nil {
		t.Fatal("index.html has no title")
	}
	hrefs := map[string]bool{}
	for _, m := range regexp.MustCompile(`href="([^"#]*)`).FindAllSubmatch(home, -1) {
		hrefs[srv.URL+"/"+string(m[1])] = true
	}

	res, err := Map(context.Background(), httpFetcher(), NewRequest(srv.URL+"/index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Sitemaps != 0 || res.Pages != DefaultMaxPages {
		t.Errorf("sitemaps %d pages %d, want 0 and %d", res.Sitemaps, res.Pages, DefaultMaxPages)
	}
	if len(res.Links) < 100 {
		t.Fatalf("%d links", len(res.Links))
	}
	checkOnDisk(t, srv.URL, res.Links)
	if l := res.Links[0]; l.URL != srv.URL+"/index.html" || l.Title != string(title[1]) {
		t.Errorf("first link %+v, want index.html titled %q", l, title[1])
	}
	if l, _ := linkByURL(res.Links, srv.URL+"/sql-commands.html"); l.Title != "I. SQL Commands" {
		t.Errorf("sql-commands.html: %+v", l)
	}
	// The second level found pages the start page does not link to.
	beyond := 0
	for _, l := range res.Links {
		if !hrefs[l.URL] && l.URL != srv.URL+"/index.html" {
			beyond++
		}
	}
	if beyond == 0 {
		t.Error("no link beyond the start page's")
	}
	t.Logf("%d links (%d beyond index.html's) from %d pages", len(res.Links), beyond, res.Pages)
}

// The same manual with a robots.txt naming a sitemap index of two
// sitemaps, one XML and one gzipped text, listing every page.
func TestMapPostgresDocsSitemap(t *testing.T) {
	requireCorpus(t)
	names := testcorpus.Pages(t, testcorpus.PostgresDocs)
	mux := http.NewServeMux()
	mux.Handle("/", http.FileServer(http.Dir(testcorpus.PostgresDocs)))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	half := len(names) / 2
	var xmlMap, textMap strings.Builder
	xmlMap.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
	for _, n := range names[:half] {
		fmt.Fprintf(&xmlMap, "<url><loc>%s/%s</loc></url>\n", srv.URL, n)
	}
	xmlMap.WriteString("</urlset>")
	for _, n := range names[half:] {
		fmt.Fprintf(&textMap, "%s/%s\n", srv.URL, n)
	}
	serve := func(p, ctype string, body []byte) {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", ctype)
			w.Write(body)
		})
	}
	serve("/robots.txt", "text/plain", []byte("User-agent: *\nAllow: /\nSitemap: "+srv.URL+"/sitemap-index.xml\n"))
	serve("/sitemap-index.xml", "application/xml", []byte(`<sitemapindex><sitemap><loc>`+srv.URL+`/pages-1.xml</loc></sitemap><sitemap><loc>`+srv.URL+`/pages-2.txt.gz</loc></sitemap></sitemapindex>`))
	serve("/pages-1.xml", "application/xml", []byte(xmlMap.String()))
	serve("/pages-2.txt.gz", "application/gzip", gz([]byte(textMap.String())))

	want := make([]string, len(names))
	for i, n := range names {
		want[i] = srv.URL + "/" + n
	}

	req := NewRequest(srv.URL)
	req.Sitemap, req.Limit = SitemapOnly, MaxLimit
	res, err := Map(context.Background(), httpFetcher(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := urlsOf(res.Links); !slices.Equal(got, want) || res.Sitemaps != 3 || res.Pages != 0 {
		t.Errorf("only: %d links (want %d), %d sitemaps, %d pages", len(got), len(want), res.Sitemaps, res.Pages)
	}

	// Include: the start URL, then the sitemaps' pages, titled with the
	// start page's anchor text; one page fetched.
	res, err = Map(context.Background(), httpFetcher(), NewRequest(srv.URL+"/index.html"))
	if err != nil {
		t.Fatal(err)
	}
	got := urlsOf(res.Links)
	if len(got) != len(want) || got[0] != srv.URL+"/index.html" || res.Pages != 1 {
		t.Errorf("include: %d links (want %d), first %s, %d pages", len(got), len(want), got[0], res.Pages)
	}
	checkOnDisk(t, srv.URL, res.Links)
	if l, _ := linkByURL(res.Links, srv.URL+"/tutorial-start.html"); l.Title != "1. Getting Started" {
		t.Errorf("tutorial-start.html: %+v", l)
	}

	tests := []struct{ search, first string }{
		{"getting started", "/tutorial-start.html"},
		{"SQL commands", "/sql-commands.html"},
		{"create table", "/sql-createtable.html"},
	}
	for _, tc := range tests {
		req := NewRequest(srv.URL + "/index.html")
		req.Search, req.Limit = tc.search, 5
		res, err := Map(context.Background(), httpFetcher(), req)
		if err != nil {
			t.Fatal(err)
		}
		if got := urlsOf(res.Links); len(got) != 5 || got[0] != srv.URL+tc.first {
			t.Errorf("search %q: got %q, want %s first", tc.search, got, tc.first)
		}
	}
}

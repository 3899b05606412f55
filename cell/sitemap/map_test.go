package sitemap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

const a = "http://a.example.test"

// smallSite is a.example.test: robots.txt names a sitemap index (a plain
// sitemap, a gzipped one, a malformed one and a missing one) and a text
// sitemap; the home page links within the site, to a subdomain, to other
// sites and to things that are not pages.
func smallSite(t *testing.T) *site {
	s := newSite(t)
	s.text(a+"/robots.txt", "User-agent: *\nDisallow: /private\n\nSitemap: "+a+"/sitemap_index.xml\nSitemap: /urls.txt\n")
	s.xml(a+"/sitemap_index.xml", `<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap><loc>`+a+`/sitemap-pages.xml</loc><lastmod>2024-01-01</lastmod></sitemap>
  <sitemap><loc>`+a+`/sitemap-blog.xml.gz</loc></sitemap>
  <sitemap><loc>`+a+`/broken.xml</loc></sitemap>
  <sitemap><loc>`+a+`/missing.xml</loc></sitemap>
</sitemapindex>`)
	s.xml(a+"/sitemap-pages.xml", `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
  <url><loc>`+a+`/</loc></url>
  <url><loc> `+a+`/about </loc><image:image><image:loc>`+a+`/img/team.png</image:loc></image:image></url>
  <url><loc>`+a+`/docs/getting-started</loc></url>
  <url><loc>`+a+`/docs/api-reference?version=2&amp;lang=en</loc></url>
  <url><loc>`+a+`/docs/api-reference?version=3</loc></url>
  <url><loc>HTTP://B.A.Example.TEST:80/shop</loc></url>
  <url><loc>http://other.test/not-ours</loc></url>
  <url><loc>`+a+`/about#team</loc></url>
</urlset>`)
	s.set(a+"/sitemap-blog.xml.gz", "application/x-gzip", gz([]byte(`<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>`+a+`/blog/hello-world</loc></url>
  <url><loc>`+a+`/blog</loc></url>
  <url><loc>`+a+`/blog/sitemapRanking</loc></url>
</urlset>`)))
	// Cut off in the middle: what came before the fault is kept.
	s.xml(a+"/broken.xml", `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>`+a+`/from-broken</loc></url><url><loc>`+a+`/cut`)
	s.text(a+"/urls.txt", a+"/contact\nthis line is not a URL\n\n"+a+"/pricing\r\nftp://a.example.test/file\n")
	s.html(a+"/", `<!doctype html><html><head>
<title> Example  A </title>
<meta name="description" content="A small test site">
</head><body>
<nav><a href="about">About <b>us</b></a> <a href="/docs/getting-started">Getting started</a></nav>
<a href="`+a+`/team">Meet the people</a>
<a href="http://other.test/elsewhere">Elsewhere</a>
<a href="http://b.a.example.test/shop">Shop</a>
<a href="http://www.a.example.test/www-page">WWW</a>
<a href="http://c.example.test/sibling">Sibling</a>
<a href="#top">Top</a>
<a href="/faq#q1">FAQ</a>
<a href="mailto:someone@a.example.test">Mail</a>
<a href="javascript:void(0)">JS</a>
<a href="/search?q=tea">Tea</a>
<a href="/search?q=coffee">Coffee</a>
<a href="/guide.pdf">Guide</a>
<a href="http://a.example.test:8080/other-port">Other port</a>
<script>document.write('<a href="/from-script">x</a>')</script>
</body></html>`)
	s.html(a+"/about", `<html><head><title>About A</title><meta property="og:description" content="Our history"></head>
<body><a href="/about/history">History</a></body></html>`)
	s.html(a+"/team", `<html><head><title>Team</title></head><body><a href="/team/jo">Jo</a></body></html>`)
	return s
}

// The URLs of smallSite for each mode, with Firecrawl's defaults.
var (
	sitemapURLs = []string{
		a + "/contact", a + "/pricing", // urls.txt, read with the index
		a, a + "/about", a + "/docs/getting-started", a + "/docs/api-reference", "http://b.a.example.test/shop",
		a + "/blog/hello-world", a + "/blog", a + "/blog/sitemapRanking",
		a + "/from-broken",
	}
	pageURLs = []string{
		a + "/about", a + "/docs/getting-started", a + "/team", "http://b.a.example.test/shop",
		"http://www.a.example.test/www-page", "http://c.example.test/sibling",
		a + "/faq", a + "/search", a + "/guide.pdf",
	}
)

func dedup(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		for _, u := range l {
			if !slices.Contains(out, u) {
				out = append(out, u)
			}
		}
	}
	return out
}

func TestMapModes(t *testing.T) {
	s := smallSite(t)
	tests := []struct {
		mode      string
		want      []string
		sitemaps  int
		pages     int
		fetchHome bool
	}{
		{SitemapInclude, dedup([]string{a}, sitemapURLs, pageURLs), 5, 1, true},
		// No sitemap: the pages linked from home are read too (up to 9),
		// which finds /about/history and /team/jo.
		{SitemapSkip, dedup([]string{a}, pageURLs, []string{a + "/about/history", a + "/team/jo"}), 0, 3, true},
		// Only: home is not fetched, and the sitemaps' order is kept.
		{SitemapOnly, sitemapURLs, 5, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			req := NewRequest(a + "/")
			req.Sitemap = tc.mode
			res, err := Map(context.Background(), s.fetcher(), req)
			if err != nil {
				t.Fatal(err)
			}
			if got := urlsOf(res.Links); !slices.Equal(got, tc.want) {
				t.Errorf("links\n got %q\nwant %q", got, tc.want)
			}
			if res.Sitemaps != tc.sitemaps || res.Pages != tc.pages {
				t.Errorf("sitemaps %d pages %d, want %d and %d", res.Sitemaps, res.Pages, tc.sitemaps, tc.pages)
			}
			if res.Truncated {
				t.Error("truncated")
			}
		})
	}
}

func TestMapTitles(t *testing.T) {
	s := smallSite(t)
	res, err := Map(context.Background(), s.fetcher(), NewRequest(a))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Link{
		// The start page's own title and description.
		a: {URL: a, Title: "Example A", Description: "A small test site"},
		// Sitemap URLs take the anchor text of the home page's links.
		a + "/about":                   {URL: a + "/about", Title: "About us"},
		"http://b.a.example.test/shop": {URL: "http://b.a.example.test/shop", Title: "Shop"},
		a + "/team":                    {URL: a + "/team", Title: "Meet the people"},
		a + "/blog":                    {URL: a + "/blog"},
	}
	for u, w := range want {
		if l, ok := linkByURL(res.Links, u); !ok || l != w {
			t.Errorf("%s: got %+v (found %v), want %+v", u, l, ok, w)
		}
	}

	// Without sitemaps the linked pages are read: their own title and
	// og:description win over the anchor text.
	req := NewRequest(a)
	req.Sitemap = SitemapSkip
	res, err = Map(context.Background(), s.fetcher(), req)
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := linkByURL(res.Links, a+"/about"); l.Title != "About A" || l.Description != "Our history" {
		t.Errorf("about: %+v", l)
	}
	if l, _ := linkByURL(res.Links, a+"/about/history"); l.Title != "History" {
		t.Errorf("history: %+v", l)
	}
}

// The fetches Map makes: robots.txt, the sitemaps it names (not the
// well-known ones), the index's children, and home; nothing else, and
// no sitemap at all in mode skip.
func TestMapFetches(t *testing.T) {
	for _, mode := range []string{SitemapInclude, SitemapSkip, SitemapOnly} {
		t.Run(mode, func(t *testing.T) {
			s := smallSite(t)
			req := NewRequest(a)
			req.Sitemap = mode
			req.Bounds.MaxPages = 1
			if _, err := Map(context.Background(), s.fetcher(), req); err != nil {
				t.Fatal(err)
			}
			got := s.fetched()
			slices.Sort(got)
			var want []string
			if mode != SitemapSkip {
				want = append(want, a+"/robots.txt", a+"/sitemap_index.xml", a+"/urls.txt",
					a+"/sitemap-pages.xml", a+"/sitemap-blog.xml.gz", a+"/broken.xml", a+"/missing.xml")
			}
			if mode != SitemapOnly {
				want = append(want, a)
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("fetched\n got %q\nwant %q", got, want)
			}
		})
	}
}

func TestMapScope(t *testing.T) {
	s := smallSite(t)
	tests := []struct {
		name      string
		url       string
		subs      bool
		anyPath   bool
		mustHave  []string
		mustNotBe []string
	}{
		{
			name: "subdomains", url: a, subs: true,
			mustHave:  []string{"http://b.a.example.test/shop", "http://c.example.test/sibling", "http://www.a.example.test/www-page"},
			mustNotBe: []string{"http://other.test/elsewhere", "http://other.test/not-ours", "http://a.example.test:8080/other-port"},
		},
		{
			name: "host only", url: a, subs: false,
			// www.a.example.test is a.example.test, as Firecrawl has it.
			mustHave:  []string{"http://www.a.example.test/www-page", a + "/about"},
			mustNotBe: []string{"http://b.a.example.test/shop", "http://c.example.test/sibling", "http://other.test/elsewhere"},
		},
		{
			name: "path", url: a + "/docs/", subs: true,
			mustHave:  []string{a + "/docs/getting-started", a + "/docs/api-reference"},
			mustNotBe: []string{a, a + "/about", "http://b.a.example.test/shop"},
		},
		{
			name: "file in path", url: a + "/docs/index.html", subs: true,
			mustHave:  []string{a + "/docs/getting-started"},
			mustNotBe: []string{a + "/about"},
		},
		{
			name: "any path", url: a + "/docs/", subs: true, anyPath: true,
			mustHave: []string{a + "/docs/getting-started", a + "/about"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := NewRequest(tc.url)
			req.IncludeSubdomains = tc.subs
			req.AnyPath = tc.anyPath
			res, err := Map(context.Background(), s.fetcher(), req)
			if err != nil {
				t.Fatal(err)
			}
			got := urlsOf(res.Links)
			for _, u := range tc.mustHave {
				if !slices.Contains(got, u) {
					t.Errorf("%s missing from %q", u, got)
				}
			}
			for _, u := range tc.mustNotBe {
				if slices.Contains(got, u) {
					t.Errorf("%s is out of scope but in %q", u, got)
				}
			}
		})
	}
}

func TestMapQueryParameters(t *testing.T) {
	s := smallSite(t)
	for _, ignore := range []bool{true, false} {
		t.Run(fmt.Sprint("ignore=", ignore), func(t *testing.T) {
			req := NewRequest(a)
			req.IgnoreQueryParameters = ignore
			res, err := Map(context.Background(), s.fetcher(), req)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, u := range urlsOf(res.Links) {
				if strings.Contains(u, "/search") || strings.Contains(u, "/api-reference") {
					got = append(got, u)
				}
			}
			want := []string{a + "/docs/api-reference", a + "/search"}
			if !ignore {
				want = []string{
					a + "/docs/api-reference?version=2&lang=en", a + "/docs/api-reference?version=3",
					a + "/search?q=tea", a + "/search?q=coffee",
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}

func TestMapSearch(t *testing.T) {
	s := smallSite(t)
	tests := []struct {
		search string
		first  []string // the first links, in order
	}{
		// Fewer URL terms first among equals: the section before its posts.
		{"blog", []string{a + "/blog", a + "/blog/hello-world", a + "/blog/sitemapRanking"}},
		// Camel case splits: "sitemapRanking" is "sitemap ranking".
		{"ranking", []string{a + "/blog/sitemapRanking"}},
		// All terms matched beat one term; the query does not count when
		// IgnoreQueryParameters dropped it.
		{"API Reference", []string{a + "/docs/api-reference"}},
		{"getting started docs", []string{a + "/docs/getting-started", a + "/docs/api-reference"}},
		// A title match: the anchor text of /team.
		{"people", []string{a + "/team"}},
		// A description match: the start page's meta description.
		{"small", []string{a}},
		// A prefix match: "contact" is a prefix of "contacts".
		{"contacts", []string{a + "/contact"}},
		// The subdomain's label is a URL term.
		{"b", []string{"http://b.a.example.test/shop"}},
	}
	for _, tc := range tests {
		t.Run(tc.search, func(t *testing.T) {
			req := NewRequest(a)
			req.Search = tc.search
			res, err := Map(context.Background(), s.fetcher(), req)
			if err != nil {
				t.Fatal(err)
			}
			got := urlsOf(res.Links)
			if len(got) < len(tc.first) || !slices.Equal(got[:len(tc.first)], tc.first) {
				t.Fatalf("got %q, want it to start with %q", got, tc.first)
			}
			// Like Firecrawl, the links that match nothing are still there,
			// in discovery order.
			all := dedup([]string{a}, sitemapURLs, pageURLs)
			if len(got) != len(all) {
				t.Errorf("%d links, want all %d", len(got), len(all))
			}
			var rest []string
			for _, u := range all {
				if !slices.Contains(tc.first, u) {
					rest = append(rest, u)
				}
			}
			tail := got[len(got)-len(rest):]
			if tc.search == "blog" && !slices.Equal(tail, rest) {
				t.Errorf("non-matching links out of discovery order: %q", tail)
			}
		})
	}
}

func TestMapLimit(t *testing.T) {
	s := smallSite(t)
	all := dedup([]string{a}, sitemapURLs, pageURLs)
	for _, limit := range []int{1, 3, len(all), 100} {
		req := NewRequest(a)
		req.Limit = limit
		res, err := Map(context.Background(), s.fetcher(), req)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := urlsOf(res.Links), all[:min(limit, len(all))]; !slices.Equal(got, want) {
			t.Errorf("limit %d: got %q, want %q", limit, got, want)
		}
		if res.Truncated {
			t.Errorf("limit %d: truncated", limit)
		}
	}
	// With a search the cut comes after ranking.
	req := NewRequest(a)
	req.Limit, req.Search = 2, "blog hello"
	res, err := Map(context.Background(), s.fetcher(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := urlsOf(res.Links), []string{a + "/blog/hello-world", a + "/blog"}; !slices.Equal(got, want) {
		t.Errorf("search with limit: got %q, want %q", got, want)
	}
}

// Sitemaps that are not sitemaps, are missing or are cut off are skipped;
// robots.txt naming none sends Map to the well-known paths.
func TestMapBadSitemaps(t *testing.T) {
	const b = "http://bad.example.test"
	s := newSite(t)
	s.text(b+"/robots.txt", "Sitemap: "+b+"/soft404.xml\nSitemap: "+b+"/garbage.txt\nSitemap: "+b+"/wrong-root.xml\n"+
		"Sitemap: "+b+"/gone.xml\nSitemap: "+b+"/bad.gz\nSitemap: "+b+"/error.xml\nSitemap: not a url at all\n")
	s.html(b+"/soft404.xml", "<!doctype html><html><body><a href='/x'>Page not found</a></body></html>")
	s.text(b+"/garbage.txt", "\x00\x01 nothing here\n")
	s.xml(b+"/wrong-root.xml", `<?xml version="1.0"?><rss2><loc>`+b+`/nope</loc></rss2>`)
	s.set(b+"/bad.gz", "application/gzip", []byte("\x1f\x8bnot really gzip"))
	s.pages["bad.example.test/error.xml"] = resp{status: 500, body: []byte(`<urlset><url><loc>` + b + `/err</loc></url></urlset>`)}
	s.html(b+"/", `<a href="/one">One</a>`)

	res, err := Map(context.Background(), s.fetcher(), NewRequest(b))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := urlsOf(res.Links), []string{b, b + "/one"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if res.Sitemaps != 0 {
		t.Errorf("sitemaps %d, want 0", res.Sitemaps)
	}

	// No Sitemap line: /sitemap.xml and /sitemap_index.xml, here a text
	// sitemap served as XML's neighbour and a UTF-8 BOM'd urlset.
	const w = "http://wk.example.test"
	s.text(w+"/robots.txt", "User-agent: *\nAllow: /\n")
	s.xml(w+"/sitemap.xml", "\ufeff\n<urlset><url><loc>"+w+"/a</loc></url></urlset>")
	s.xml(w+"/sitemap_index.xml", `<sitemapindex><sitemap><loc>/nested.txt</loc></sitemap></sitemapindex>`)
	s.text(w+"/nested.txt", w+"/b\n")
	req := NewRequest(w)
	req.Sitemap = SitemapOnly
	res, err = Map(context.Background(), s.fetcher(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := urlsOf(res.Links), []string{w + "/a", w + "/b"}; !slices.Equal(got, want) {
		t.Errorf("well-known: got %q, want %q", got, want)
	}
}

// Index loops, deep nesting and too many sitemaps end within the bounds.
func TestMapIndexBounds(t *testing.T) {
	const h = "http://idx.example.test"
	s := newSite(t)
	s.text(h+"/robots.txt", "Sitemap: "+h+"/i0.xml\n")
	for i := range 10 {
		s.xml(fmt.Sprintf("%s/i%d.xml", h, i), fmt.Sprintf(`<sitemapindex>
<sitemap><loc>%[1]s/i%[2]d.xml</loc></sitemap>
<sitemap><loc>%[1]s/i0.xml</loc></sitemap>
<sitemap><loc>%[1]s/u%[3]d.xml</loc></sitemap>
</sitemapindex>`, h, i+1, i))
		s.xml(fmt.Sprintf("%s/u%d.xml", h, i), fmt.Sprintf(`<urlset><url><loc>%s/p%d</loc></url></urlset>`, h, i))
	}
	req := NewRequest(h)
	req.Sitemap = SitemapOnly
	req.Bounds.MaxDepth = 2
	res, err := Map(context.Background(), s.fetcher(), req)
	if err != nil {
		t.Fatal(err)
	}
	// i0 (depth 0) -> i1, u0 (1) -> i2, u1 (2); i2 is too deep.
	if got, want := urlsOf(res.Links), []string{h + "/p0", h + "/p1"}; !slices.Equal(got, want) || !res.Truncated {
		t.Errorf("depth: got %q truncated %v, want %q truncated", got, res.Truncated, want)
	}
	if n := len(s.fetched()); n != 6 { // robots, i0, i1, u0, i2, u1
		t.Errorf("%d fetches, want 6: %q", n, s.fetched())
	}

	req.Bounds = Bounds{MaxDepth: 100, MaxSitemaps: 5}
	res, err = Map(context.Background(), s.fetcher(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sitemaps != 5 || !res.Truncated {
		t.Errorf("count: %d sitemaps read, truncated %v; want 5, truncated", res.Sitemaps, res.Truncated)
	}
}

// A sitemap over the protocol's 50,000 URLs, a body over MaxBodyBytes and
// a gzip bomb are read only to their bounds.
func TestMapHugeSitemap(t *testing.T) {
	const h = "http://huge.example.test"
	s := newSite(t)
	var b strings.Builder
	b.WriteString(`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
	for i := range DefaultMaxSitemapURLs + 10000 {
		fmt.Fprintf(&b, "<url><loc>%s/p/%d</loc></url>\n", h, i)
	}
	b.WriteString("</urlset>")
	s.xml(h+"/sitemap.xml", b.String())

	req := NewRequest(h)
	req.Sitemap, req.Limit = SitemapOnly, MaxLimit
	res, err := Map(context.Background(), s.fetcher(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Links) != DefaultMaxSitemapURLs || !res.Truncated {
		t.Errorf("%d links, truncated %v; want %d, truncated", len(res.Links), res.Truncated, DefaultMaxSitemapURLs)
	}
	if last := res.Links[len(res.Links)-1].URL; last != fmt.Sprintf("%s/p/%d", h, DefaultMaxSitemapURLs-1) {
		t.Errorf("last link %s", last)
	}

	// Without a search Map stops at Limit, which is no truncation.
	req.Limit = 100
	res, err = Map(context.Background(), s.fetcher(), req)
	if err != nil || len(res.Links) != 100 || res.Truncated {
		t.Errorf("limit 100: %d links, truncated %v, err %v", len(res.Links), res.Truncated, err)
	}

	// MaxBodyBytes: 1,000 bytes hold a few entries only.
	req.Limit, req.Bounds.MaxBodyBytes = MaxLimit, 1000
	res, err = Map(context.Background(), s.fetcher(), req)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Links); n == 0 || n > 30 || !res.Truncated {
		t.Errorf("1000 bytes: %d links, truncated %v", n, res.Truncated)
	}

	// A gzip bomb: 4 MiB of white space in 4 KiB; read to the bound.
	const g = "http://bomb.example.test"
	bomb := []byte(`<urlset><url><loc>` + g + `/first</loc></url>` + strings.Repeat(" ", 4<<20) + `<url><loc>` + g + `/after</loc></url></urlset>`)
	s.set(g+"/sitemap.xml", "application/xml", gz(bomb))
	req = NewRequest(g)
	req.Sitemap = SitemapOnly
	req.Bounds.MaxBodyBytes = 256 << 10
	res, err = Map(context.Background(), s.fetcher(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := urlsOf(res.Links); !slices.Equal(got, []string{g + "/first"}) || !res.Truncated {
		t.Errorf("bomb: got %q, truncated %v", got, res.Truncated)
	}

	// MaxCandidates bounds what a search ranks.
	req = NewRequest(h)
	req.Sitemap, req.Search, req.Limit = SitemapOnly, "p", 10
	req.Bounds.MaxCandidates = 500
	res, err = Map(context.Background(), s.fetcher(), req)
	if err != nil || len(res.Links) != 10 || !res.Truncated {
		t.Errorf("candidates: %d links, truncated %v, err %v", len(res.Links), res.Truncated, err)
	}
}

func TestMapContext(t *testing.T) {
	const h = "http://slow.example.test"
	s := newSite(t)
	arrived := make(chan struct{})
	s.pages["slow.example.test/sitemap.xml"] = resp{block: arrived}
	s.html(h+"/", `<a href="/x">x</a>`)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-arrived
		cancel()
	}()
	_, err := Map(ctx, s.fetcher(), NewRequest(h))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}

	// A context done before the start fetches nothing.
	n := len(s.fetched())
	if _, err := Map(ctx, s.fetcher(), NewRequest(h)); !errors.Is(err, context.Canceled) {
		t.Errorf("done context: err %v", err)
	}
	if len(s.fetched()) != n {
		t.Errorf("fetched after cancel: %q", s.fetched()[n:])
	}
}

func TestMapNothingFound(t *testing.T) {
	s := newSite(t)
	s.down["down.example.test"] = true
	s.text("http://empty.example.test/robots.txt", "User-agent: *\n")
	tests := []struct {
		url, mode string
		err       error // nil: an empty result
	}{
		{"http://down.example.test", SitemapInclude, ErrNothingFound},
		{"http://down.example.test", SitemapOnly, ErrNothingFound},
		{"http://empty.example.test", SitemapInclude, ErrNothingFound}, // home is a 404
		{"http://empty.example.test", SitemapSkip, ErrNothingFound},
		{"http://empty.example.test", SitemapOnly, nil}, // answers, has no sitemap
		{"ftp://empty.example.test", SitemapInclude, ErrInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.url+" "+tc.mode, func(t *testing.T) {
			req := NewRequest(tc.url)
			req.Sitemap = tc.mode
			res, err := Map(context.Background(), s.fetcher(), req)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if tc.err == nil && len(res.Links) != 0 {
				t.Errorf("links %q", urlsOf(res.Links))
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		in   Request
		want Request // URL, Limit, Sitemap
		err  error
	}{
		{in: Request{URL: "example.com"}, want: Request{URL: "http://example.com", Limit: DefaultLimit, Sitemap: SitemapInclude}},
		{in: Request{URL: " https://example.com/x ", Limit: 7, Sitemap: SitemapOnly, Search: " a "},
			want: Request{URL: "https://example.com/x", Limit: 7, Sitemap: SitemapOnly, Search: "a"}},
		{in: Request{URL: "https://example.com", Limit: MaxLimit}, want: Request{URL: "https://example.com", Limit: MaxLimit, Sitemap: SitemapInclude}},
		{in: Request{URL: ""}, err: ErrInvalidRequest},
		{in: Request{URL: "mailto:a@example.com"}, err: ErrInvalidRequest},
		{in: Request{URL: "http://"}, err: ErrInvalidRequest},
		{in: Request{URL: "https://example.com", Limit: MaxLimit + 1}, err: ErrInvalidRequest},
		{in: Request{URL: "https://example.com", Limit: -1}, err: ErrInvalidRequest},
		{in: Request{URL: "https://example.com", Sitemap: "all"}, err: ErrInvalidRequest},
	}
	for _, tc := range tests {
		r := tc.in
		err := r.Normalize()
		if !errors.Is(err, tc.err) {
			t.Errorf("%+v: err %v, want %v", tc.in, err, tc.err)
			continue
		}
		if err != nil {
			continue
		}
		if r.URL != tc.want.URL || r.Limit != tc.want.Limit || r.Sitemap != tc.want.Sitemap || r.Search != tc.want.Search {
			t.Errorf("%+v: got %+v", tc.in, r)
		}
		if r.Bounds.MaxSitemapURLs != DefaultMaxSitemapURLs || r.Bounds.MaxBodyBytes != DefaultMaxBodyBytes {
			t.Errorf("%+v: bounds %+v", tc.in, r.Bounds)
		}
	}
	if r := NewRequest("https://example.com"); !r.IncludeSubdomains || !r.IgnoreQueryParameters || r.Limit != DefaultLimit {
		t.Errorf("NewRequest: %+v", r)
	}
}

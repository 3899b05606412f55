package cell

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/nettest"
)

// mapSite is a site on loopback under several names (the cell resolves
// them with a static DNS): site.test has a robots.txt naming its sitemap
// and a home page with links; docs.site.test is its subdomain; bare.test
// has pages but neither robots.txt nor sitemap; down.test answers 404 to
// everything; slow.test never answers. It counts the requests it gets.
type mapSite struct {
	*httptest.Server
	port string

	mu   sync.Mutex
	hits map[string]int // "host path" → requests
}

func newMapSite(t *testing.T) *mapSite {
	t.Helper()
	s := &mapSite{hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	_, s.port, _ = net.SplitHostPort(strings.TrimPrefix(s.URL, "http://"))
	return s
}

// url is the address of path on host.
func (s *mapSite) url(host, path string) string { return "http://" + host + ":" + s.port + path }

func (s *mapSite) serve(w http.ResponseWriter, r *http.Request) {
	host, _, _ := net.SplitHostPort(r.Host)
	s.mu.Lock()
	s.hits[host+" "+r.URL.Path]++
	s.mu.Unlock()
	page := func(html string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, html)
	}
	switch host + " " + r.URL.Path {
	case "site.test /robots.txt":
		fmt.Fprintf(w, "User-agent: *\nDisallow: /private\nSitemap: %s\n", s.url("site.test", "/sitemap.xml"))
	case "site.test /sitemap.xml":
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
		for _, u := range []string{
			s.url("site.test", "/docs/getting-started"),
			s.url("site.test", "/docs/api-reference"),
			s.url("site.test", "/blog/launch"),
			s.url("site.test", "/pricing?ref=nav"),
			s.url("docs.site.test", "/guide"),
			s.url("other.test", "/elsewhere"),
		} {
			fmt.Fprintf(w, "<url><loc>%s</loc></url>", strings.ReplaceAll(u, "&", "&amp;"))
		}
		fmt.Fprint(w, `</urlset>`)
	case "site.test /", "bare.test /":
		page(fmt.Sprintf(`<!DOCTYPE html><html><head><title>Tea Lab</title>
<meta name="description" content="Kettles, teapots and how to use them."></head><body>
<nav><a href="/about">About us</a> <a href="/blog">Our blog</a> <a href="%s">FAQ</a>
<a href="https://elsewhere.example/">a friend</a> <a href="/pricing?ref=footer#plans">Pricing</a></nav></body></html>`, s.url("docs.site.test", "/faq")))
	case "site.test /about", "site.test /blog", "bare.test /about", "bare.test /blog", "docs.site.test /faq", "docs.site.test /guide":
		page(fmt.Sprintf(`<html><head><title>Page %s</title></head><body><a href="/team">Team</a></body></html>`, r.URL.Path))
	case "slow.test /", "slow.test /robots.txt":
		<-r.Context().Done()
	default:
		http.NotFound(w, r)
	}
}

// got is how many requests host got for path, and for all paths ("").
func (s *mapSite) got(host, path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, v := range s.hits {
		h, p, _ := strings.Cut(k, " ")
		if h == host && (path == "" || p == path) {
			n += v
		}
	}
	return n
}

// total is every request the site got.
func (s *mapSite) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.hits {
		n += v
	}
	return n
}

// mapCell is a test cell that resolves the map site's names to loopback.
func mapCell(t *testing.T, allowPrivate bool) *testCell {
	t.Helper()
	lo := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	dns := map[string][]netip.Addr{}
	for _, h := range []string{"site.test", "docs.site.test", "other.test", "bare.test", "down.test", "slow.test", "private.test"} {
		dns[h] = lo
	}
	resolver := nettest.StaticDNS(t, dns)
	return newTestCell(t, func(c *Config) { c.AllowPrivateNetworks = allowPrivate; c.Resolver = resolver })
}

type v2MapLink struct {
	URL         string `json:"url"`
	Title       string `json:"title"`
	Description string `json:"description"`
}

type v2MapResp struct {
	Success bool        `json:"success"`
	Links   []v2MapLink `json:"links"`
	Error   string      `json:"error"`
	Code    string      `json:"code"`
	Details any         `json:"details"`
}

// v2Map posts body to /v2/map: the status, the answer, its raw body and
// its usage report (zero when there is none).
func (tc *testCell) v2Map(t *testing.T, body string) (int, v2MapResp, string, metering.Usage) {
	t.Helper()
	resp, b := tc.post(t, "/v2/map", body)
	r := decode[v2MapResp](t, b)
	var u metering.Usage
	if h := resp.Header.Get(metering.Header); h != "" {
		if err := json.Unmarshal([]byte(h), &u); err != nil {
			t.Fatalf("usage %q: %v", h, err)
		}
	}
	return resp.StatusCode, r, string(b), u
}

func urlsOf(links []v2MapLink) []string {
	out := make([]string, len(links))
	for i, l := range links {
		out[i] = l.URL
	}
	return out
}

// The Firecrawl defaults: sitemaps and the start page's links, subdomains
// included, queries dropped, the start URL first with its own title and
// description; billed as one map with every document it fetched counted.
func TestV2MapDefaults(t *testing.T) {
	site := newMapSite(t)
	tc := mapCell(t, true)
	home := site.url("site.test", "/")
	before := site.total()
	status, r, _, u := tc.v2Map(t, fmt.Sprintf(`{"url":%q,"origin":"js-sdk@4.42.0","integration":"test","threatProtection":{"enabled":false}}`, home))
	if status != 200 || !r.Success {
		t.Fatalf("map: %d %+v", status, r)
	}
	root := strings.TrimSuffix(home, "/") // Firecrawl writes the root without its slash
	want := []string{
		root,
		site.url("site.test", "/docs/getting-started"),
		site.url("site.test", "/docs/api-reference"),
		site.url("site.test", "/blog/launch"),
		site.url("site.test", "/pricing"),
		site.url("docs.site.test", "/guide"),
		site.url("site.test", "/about"),
		site.url("site.test", "/blog"),
		site.url("docs.site.test", "/faq"),
	}
	if got := urlsOf(r.Links); !slices.Equal(got, want) {
		t.Errorf("links:\n got %q\nwant %q", got, want)
	}
	if l := r.Links[0]; l.Title != "Tea Lab" || l.Description != "Kettles, teapots and how to use them." {
		t.Errorf("the start URL's own title and description: %+v", l)
	}
	if l := r.Links[7]; l.Title != "Our blog" {
		t.Errorf("a link's anchor text is its title: %+v", l)
	}
	// robots.txt, the sitemap and the home page: the sitemap gave URLs, so
	// no page beyond the start page was fetched.
	fetched := site.total() - before
	if fetched != 3 || site.got("site.test", "/about") != 0 {
		t.Errorf("the site got %d requests (%v), want 3", fetched, site.hits)
	}
	if u.Kind != metering.KindMap || u.Engine != metering.EngineHTTP || u.Cache != metering.CacheMiss || u.Units != fetched || u.Count != nil || u.Level != "" {
		t.Errorf("usage %+v, want kind map, engine http, cache miss, units %d", u, fetched)
	}
}

func TestV2MapOptions(t *testing.T) {
	site := newMapSite(t)
	tc := mapCell(t, true)
	home := site.url("site.test", "/")

	t.Run("search ranks matches first and keeps the rest", func(t *testing.T) {
		status, r, _, _ := tc.v2Map(t, fmt.Sprintf(`{"url":%q,"search":"blog"}`, home))
		if status != 200 {
			t.Fatalf("%d %+v", status, r)
		}
		got := urlsOf(r.Links)
		// The section's page before its child; then the others in
		// discovery order.
		if len(got) != 9 || got[0] != site.url("site.test", "/blog") || got[1] != site.url("site.test", "/blog/launch") ||
			got[2] != strings.TrimSuffix(home, "/") || got[3] != site.url("site.test", "/docs/getting-started") {
			t.Errorf("ranked %q", got)
		}
	})

	t.Run("limit", func(t *testing.T) {
		_, r, _, _ := tc.v2Map(t, fmt.Sprintf(`{"url":%q,"limit":2}`, home))
		if got := urlsOf(r.Links); !slices.Equal(got, []string{strings.TrimSuffix(home, "/"), site.url("site.test", "/docs/getting-started")}) {
			t.Errorf("limit 2: %q", got)
		}
	})

	t.Run("sitemap only does not fetch the start page", func(t *testing.T) {
		pages := site.got("site.test", "/")
		before := site.total()
		status, r, _, u := tc.v2Map(t, fmt.Sprintf(`{"url":%q,"sitemap":"only"}`, home))
		want := []string{
			site.url("site.test", "/docs/getting-started"), site.url("site.test", "/docs/api-reference"),
			site.url("site.test", "/blog/launch"), site.url("site.test", "/pricing"), site.url("docs.site.test", "/guide"),
		}
		if got := urlsOf(r.Links); status != 200 || !slices.Equal(got, want) {
			t.Errorf("only: %d %q", status, got)
		}
		if site.got("site.test", "/") != pages || u.Units != site.total()-before || u.Units != 2 {
			t.Errorf("only: the start page was fetched, or units %d ≠ the site's %d requests", u.Units, site.total()-before)
		}
	})

	t.Run("sitemap skip follows the links one level", func(t *testing.T) {
		robots := site.got("site.test", "/robots.txt")
		before := site.total()
		status, r, _, u := tc.v2Map(t, fmt.Sprintf(`{"url":%q,"sitemap":"skip"}`, home))
		got := urlsOf(r.Links)
		if status != 200 || slices.Contains(got, site.url("site.test", "/docs/api-reference")) || site.got("site.test", "/robots.txt") != robots {
			t.Fatalf("skip read the sitemap: %d %q", status, got)
		}
		for _, w := range []string{site.url("site.test", "/about"), site.url("site.test", "/pricing"), site.url("docs.site.test", "/faq"), site.url("site.test", "/team")} {
			if !slices.Contains(got, w) {
				t.Errorf("skip: %q lacks %s", got, w)
			}
		}
		// The linked pages were read, each for its own title.
		if i := slices.Index(got, site.url("site.test", "/about")); i < 0 || r.Links[i].Title != "Page /about" {
			t.Errorf("a page read for its links keeps its own title: %+v", r.Links)
		}
		if u.Units != site.total()-before || u.Units < 4 {
			t.Errorf("units %d, the site got %d requests", u.Units, site.total()-before)
		}
	})

	t.Run("includeSubdomains false and the query kept", func(t *testing.T) {
		_, r, _, _ := tc.v2Map(t, fmt.Sprintf(`{"url":%q,"includeSubdomains":false,"ignoreQueryParameters":false}`, home))
		got := urlsOf(r.Links)
		for _, l := range got {
			if strings.Contains(l, "docs.site.test") {
				t.Errorf("a subdomain's URL with includeSubdomains false: %q", got)
			}
		}
		if !slices.Contains(got, site.url("site.test", "/pricing?ref=nav")) || !slices.Contains(got, site.url("site.test", "/pricing?ref=footer")) {
			t.Errorf("ignoreQueryParameters false dropped a query: %q", got)
		}
	})

	t.Run("a path keeps the map under it", func(t *testing.T) {
		_, r, _, _ := tc.v2Map(t, fmt.Sprintf(`{"url":%q,"sitemap":"only"}`, site.url("site.test", "/docs")))
		if got := urlsOf(r.Links); !slices.Equal(got, []string{site.url("site.test", "/docs/getting-started"), site.url("site.test", "/docs/api-reference")}) {
			t.Errorf("under /docs: %q", got)
		}
		_, r, _, _ = tc.v2Map(t, fmt.Sprintf(`{"url":%q,"sitemap":"only","filterByPath":false}`, site.url("site.test", "/docs")))
		if len(r.Links) != 5 {
			t.Errorf("filterByPath false: %q", urlsOf(r.Links))
		}
	})

	t.Run("a site without a sitemap, sitemap only: an empty list, not null", func(t *testing.T) {
		status, _, raw, u := tc.v2Map(t, fmt.Sprintf(`{"url":%q,"sitemap":"only","location":{"country":"US"}}`, site.url("bare.test", "/")))
		if status != 200 || !strings.Contains(raw, `"links":[]`) || u.Kind != metering.KindMap {
			t.Errorf("%d %s %+v", status, raw, u)
		}
	})
}

// Firecrawl's error envelope, and nothing billed: a wrong type, a value
// out of range, an unsupported feature, a URL the cell may not fetch, a
// site that cannot be mapped, a timeout.
func TestV2MapErrors(t *testing.T) {
	site := newMapSite(t)
	tc := mapCell(t, true)
	home := site.url("site.test", "/")
	tests := []struct {
		name, body string
		status     int
		code       string
		path       string // details[0].path, joined by "."
	}{
		{"limit not a number", `{"url":%q,"limit":"ten"}`, 400, "BAD_REQUEST", "limit"},
		{"includeSubdomains not a boolean", `{"url":%q,"includeSubdomains":"yes"}`, 400, "BAD_REQUEST", "includeSubdomains"},
		{"search not a string", `{"url":%q,"search":["blog"]}`, 400, "BAD_REQUEST", "search"},
		{"timeout with a fraction", `{"url":%q,"timeout":1.5}`, 400, "BAD_REQUEST", "timeout"},
		{"limit 0", `{"url":%q,"limit":0}`, 400, "BAD_REQUEST", "limit"},
		{"limit over 100,000", `{"url":%q,"limit":100001}`, 400, "BAD_REQUEST", "limit"},
		{"unknown sitemap mode", `{"url":%q,"sitemap":"sometimes"}`, 400, "BAD_REQUEST", "sitemap"},
		{"timeout 0", `{"url":%q,"timeout":0}`, 400, "BAD_REQUEST", "timeout"},
		{"search too long", `{"url":%q,"search":"` + strings.Repeat("tea ", 200) + `"}`, 400, "BAD_REQUEST", "search"},
		{"not a country", `{"url":%q,"location":{"country":"Germany"}}`, 400, "BAD_REQUEST", "location.country"},
		{"location.languages", `{"url":%q,"location":{"country":"US","languages":["de"]}}`, 400, "UNSUPPORTED_FEATURE", "location.languages"},
		{"another country", `{"url":%q,"location":{"country":"DE"}}`, 400, "UNSUPPORTED_FEATURE", "location.country"},
		{"headers", `{"url":%q,"headers":{"Cookie":"a=1"}}`, 400, "UNSUPPORTED_FEATURE", "headers"},
		{"no url", `{"limit":10}`, 400, "BAD_REQUEST", "url"},
		{"not a web url", `{"url":"ftp://site.test/"}`, 400, "UNSUPPORTED_URL", ""},
		{"not json", `{"url":`, 400, "BAD_REQUEST", ""},
		{"nothing to map", `{"url":"` + site.url("down.test", "/") + `"}`, 502, "MAP_FAILED", ""},
		{"timeout", `{"url":"` + site.url("slow.test", "/") + `","timeout":300}`, 408, "MAP_TIMEOUT", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.body
			if strings.Contains(body, "%q") {
				body = fmt.Sprintf(body, home)
			}
			before := site.got("site.test", "")
			status, r, raw, u := tc.v2Map(t, body)
			if status != tt.status || r.Success || r.Code != tt.code || r.Error == "" {
				t.Errorf("%d %s, want %d %s", status, raw, tt.status, tt.code)
			}
			if tt.path != "" {
				d, _ := r.Details.([]any)
				var p []any
				if len(d) > 0 {
					p, _ = d[0].(map[string]any)["path"].([]any)
				}
				var parts []string
				for _, x := range p {
					parts = append(parts, fmt.Sprint(x))
				}
				if strings.Join(parts, ".") != tt.path {
					t.Errorf("details %v, want the path %s", r.Details, tt.path)
				}
			}
			if u.Kind != "" || u.Engine != "" {
				t.Errorf("a refusal carries usage %+v", u)
			}
			if status == 400 && site.got("site.test", "") != before {
				t.Errorf("a refused request fetched from the site")
			}
		})
	}
}

// A cell that guards private networks refuses a start URL that is, or
// resolves to, a private address before it fetches anything.
func TestV2MapGuarded(t *testing.T) {
	site := newMapSite(t)
	tc := mapCell(t, false)
	for _, u := range []string{site.url("private.test", "/"), site.URL + "/"} {
		status, r, raw, us := tc.v2Map(t, fmt.Sprintf(`{"url":%q}`, u))
		if status != 400 || r.Code != "UNSUPPORTED_URL" || us.Kind != "" {
			t.Errorf("%s: %d %s", u, status, raw)
		}
	}
	if n := site.total(); n != 0 {
		t.Errorf("the guarded cell sent the site %d requests", n)
	}
}

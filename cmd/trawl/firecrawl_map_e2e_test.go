package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/gate/billing"
)

// Firecrawl's JS SDK's map against `trawl dev`: a site on loopback with a
// robots.txt naming its sitemap and a home page with links; the SDK reads
// the links trawl's POST /v2/map answers, and the gate bills the call as
// one map.
func TestFirecrawlSDKMapAgainstDev(t *testing.T) {
	var site *httptest.Server
	site = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			fmt.Fprintf(w, "User-agent: *\nSitemap: %s/sitemap.xml\n", site.URL)
		case "/sitemap.xml":
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprintf(w, `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>%[1]s/green</loc></url>`+
				`<url><loc>%[1]s/black</loc></url><url><loc>%[1]s/blog/first-flush</loc></url></urlset>`, site.URL)
		case "/":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, `<!DOCTYPE html><html><head><title>Tea notes</title><meta name="description" content="Notes on tea."></head>
<body><a href="/shop">Shop</a> <a href="/blog">The blog</a> <a href="https://elsewhere.example/">elsewhere</a></body></html>`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer site.Close()
	dev := startMCPDev(t)

	res := firecrawlSDK(t, dev.base, e2eKey,
		fcCall{"map", []any{site.URL}},
		fcCall{"map", []any{site.URL, map[string]any{"search": "blog", "limit": 2, "timeout": 30000}}},
		fcCall{"map", []any{site.URL, map[string]any{"sitemap": "only", "includeSubdomains": false}}},
		fcCall{"map", []any{site.URL, map[string]any{"sitemap": "sometimes"}}},
	)
	if len(res) != 4 {
		t.Fatalf("results: %+v", res)
	}
	type link struct {
		URL         string `json:"url"`
		Title       string `json:"title"`
		Description string `json:"description"`
	}
	links := func(i int) []link {
		t.Helper()
		r := res[i]
		if r.Thrown != "" {
			t.Fatalf("call %d (%s) threw: %s (status %v)", i, r.Method, r.Thrown, deref(r.Status))
		}
		var v struct{ Links []link }
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("call %d: %v: %s", i, err, r.Value)
		}
		return v.Links
	}
	urls := func(ls []link) []string {
		out := make([]string, len(ls))
		for i, l := range ls {
			out[i] = l.URL
		}
		return out
	}

	all := links(0)
	want := []string{site.URL, site.URL + "/green", site.URL + "/black", site.URL + "/blog/first-flush", site.URL + "/shop", site.URL + "/blog"}
	if got := urls(all); !slices.Equal(got, want) {
		t.Errorf("map:\n got %q\nwant %q", got, want)
	}
	if len(all) > 0 && (all[0].Title != "Tea notes" || all[0].Description != "Notes on tea.") {
		t.Errorf("the start URL's title and description: %+v", all[0])
	}
	if got := urls(links(1)); !slices.Equal(got, []string{site.URL + "/blog", site.URL + "/blog/first-flush"}) {
		t.Errorf("search blog, limit 2: %q", got)
	}
	if got := urls(links(2)); !slices.Equal(got, want[1:4]) {
		t.Errorf("sitemap only: %q", got)
	}
	if r := res[3]; r.Thrown == "" || r.Status == nil || *r.Status != 400 || !strings.Contains(r.Thrown, "sitemap") {
		t.Errorf("a bad sitemap mode: want a thrown 400, got %+v", r)
	}

	// Over plain HTTP, the receipt: one map at the table's price.
	req, _ := http.NewRequest(http.MethodPost, dev.base+"/v2/map", strings.NewReader(`{"url":"`+site.URL+`"}`))
	req.Header.Set("Authorization", "Bearer "+e2eKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	price := billing.DefaultPrices().Calls[billing.KindMap].Base.String()
	if resp.StatusCode != 200 || resp.Header.Get("X-Svc-Cost") != price || resp.Header.Get("X-Svc-Receipt") == "" || resp.Header.Get("Trawl-Usage") != "" {
		t.Errorf("map over HTTP: %d cost %q receipt %q usage %q: %s", resp.StatusCode, resp.Header.Get("X-Svc-Cost"),
			resp.Header.Get("X-Svc-Receipt"), resp.Header.Get("Trawl-Usage"), b)
	}
}

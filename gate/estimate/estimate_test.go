package estimate

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/gate/billing"
)

// seenObserver has seen light.com at the light level only, mixed.com at
// every level, browser.com only with a browser, and 40 extract calls of
// 6,000 tokens in and 800 out.
func seenObserver(t *testing.T) *Observer {
	t.Helper()
	o := openObserver(t, memStore(t), 0)
	for i := range 12 {
		o.Observe("https://light.com/", billing.KindScrape, billing.LevelHTTP, 0, 0)
		o.Observe("https://browser.com/", billing.KindScrape, billing.LevelBrowser, 0, 0)
		o.Observe("https://mixed.com/", billing.KindScrape, billing.Levels[i%3], 0, 0)
	}
	for range 40 {
		o.Observe("", billing.KindExtract, "", 6000, 800)
	}
	return o
}

func urls(n int, format string) []string {
	u := make([]string, n)
	for i := range u {
		u[i] = fmt.Sprintf(format, i)
	}
	return u
}

type partWant struct {
	name     string
	min, max string
}

func TestComputeNumbers(t *testing.T) {
	obs := seenObserver(t)
	prices := billing.DefaultPrices()
	half := append(urls(25, "https://light.com/%d"), urls(25, "https://new%d.org/")...)
	for _, tc := range []struct {
		name     string
		req      Request
		min, max string
		parts    []partWant
	}{
		{"scrape unknown domain", Request{Endpoint: "scrape", URL: "https://unknown.net/a"}, "1.000", "10.000",
			[]partWant{{"fixed", "1.000", "1.000"}, {"effort", "0.000", "9.000"}}},
		{"scrape domain always light", Request{Endpoint: "scrape", URL: "https://www.light.com/a"}, "1.000", "1.000",
			[]partWant{{"fixed", "1.000", "1.000"}, {"effort", "0.000", "0.000"}}},
		{"scrape domain always browser", Request{Endpoint: "scrape", URL: "https://browser.com/"}, "5.000", "5.000",
			[]partWant{{"fixed", "1.000", "1.000"}, {"effort", "4.000", "4.000"}}},
		{"scrape domain mixed", Request{Endpoint: "scrape", URL: "https://mixed.com/"}, "1.000", "10.000",
			[]partWant{{"fixed", "1.000", "1.000"}, {"effort", "0.000", "9.000"}}},
		{"batch of 50 on one light domain", Request{Endpoint: "batch", URLs: urls(50, "https://light.com/%d")}, "50.000", "50.000",
			[]partWant{{"fixed", "50.000", "50.000"}, {"effort", "0.000", "0.000"}}},
		{"batch of 50, half unknown", Request{Endpoint: "/scrape/batch", URLs: half}, "50.000", "275.000",
			[]partWant{{"fixed", "50.000", "50.000"}, {"effort", "0.000", "225.000"}}},
		{"jobs of 10,000", Request{Endpoint: "jobs", URLs: urls(10_000, "https://s%d.example.com/")}, "10000.000", "10000.000",
			[]partWant{{"fixed", "10000.000", "10000.000"}}},
		{"extract with observed tokens", Request{Endpoint: "extract", URL: "https://light.com/p"}, "4.000", "4.000",
			[]partWant{{"fixed", "1.000", "1.000"}, {"effort", "0.000", "0.000"}, {"tokens", "3.000", "3.000"}}},
		{"extract of own content", Request{Endpoint: "extract", Content: "<p>hi</p>"}, "4.000", "4.000",
			[]partWant{{"fixed", "1.000", "1.000"}, {"tokens", "3.000", "3.000"}}},
		{"answer with the default band", Request{Endpoint: "answer"}, "4.500", "7.000",
			[]partWant{{"fixed", "2.000", "2.000"}, {"tokens", "2.500", "5.000"}}},
		{"search", Request{Endpoint: "search"}, "2.000", "2.000", []partWant{{"fixed", "2.000", "2.000"}}},
		{"map of a site seen with a browser", Request{Endpoint: "map", URL: "https://browser.com/docs"}, "2.000", "2.000", []partWant{{"fixed", "2.000", "2.000"}}},
		{"map by its Firecrawl route", Request{Endpoint: "/v2/map", URL: "https://unknown.net/"}, "2.000", "2.000", []partWant{{"fixed", "2.000", "2.000"}}},
		{"recipe of 3 units", Request{Endpoint: "recipe", Units: 3}, "3.000", "3.000", []partWant{{"fixed", "3.000", "3.000"}}},
		{"monitor every 1h", Request{Endpoint: "monitor", URL: "https://light.com/", Every: "1h"}, "720.000", "810.000",
			[]partWant{{"fixed", "720.000", "720.000"}, {"changes", "0.000", "90.000"}}},
		{"monitor every week", Request{Endpoint: "monitors", URL: "https://light.com/", Every: "1w"}, "5.000", "20.000",
			[]partWant{{"fixed", "5.000", "5.000"}, {"changes", "0.000", "15.000"}}},
		{"monitor default every", Request{Endpoint: "monitor", URL: "https://light.com/"}, "30.000", "120.000",
			[]partWant{{"fixed", "30.000", "30.000"}, {"changes", "0.000", "90.000"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Compute(prices, obs, &tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if e.Min.String() != tc.min || e.Max.String() != tc.max {
				t.Errorf("min..max = %s..%s, want %s..%s", e.Min, e.Max, tc.min, tc.max)
			}
			var got []partWant
			for _, p := range e.Parts {
				got = append(got, partWant{p.Name, p.Min.String(), p.Max.String()})
				if p.Exact != (p.Name == "fixed" || p.Min == p.Max && p.Name == "effort") {
					t.Errorf("part %s: exact %v", p.Name, p.Exact)
				}
				if p.Basis == "" {
					t.Errorf("part %s has no basis", p.Name)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.parts) {
				t.Errorf("parts %v, want %v", got, tc.parts)
			}
			if e.Parts[0].Name != "fixed" || !e.Parts[0].Exact {
				t.Error("the first part is not the exact fixed part")
			}
		})
	}
}

func TestComputeDefaultTokensAndNoObserver(t *testing.T) {
	// Nothing seen: every site unknown, the default token band.
	e, err := Compute(billing.DefaultPrices(), nil, &Request{Endpoint: "extract", URL: "https://light.com/"})
	if err != nil {
		t.Fatal(err)
	}
	// fetch 1.000 light .. 10.000 browser_proxy; tokens: 1,000..20,000 in
	// (1 to 4 blocks of 0.500), 100..2,000 out (1 block of 2.000).
	if e.Min.String() != "3.500" || e.Max.String() != "14.000" {
		t.Errorf("min..max = %s..%s, want 3.500..14.000", e.Min, e.Max)
	}
	tok := e.Parts[2]
	if tok.Tokens == nil || !tok.Tokens.Default || tok.Min.String() != "2.500" || tok.Max.String() != "4.000" {
		t.Errorf("tokens part %+v %+v", tok, tok.Tokens)
	}
}

// The numbers follow the price table, whatever it says.
func TestComputeFollowsPriceTable(t *testing.T) {
	p := billing.DefaultPrices()
	p.Effort[billing.LevelBrowserProxy] = 20_000 // ×20
	c := p.Calls[billing.KindScrape]
	c.Base = 2500
	p.Calls[billing.KindScrape] = c
	e, err := Compute(p, nil, &Request{Endpoint: "scrape", URL: "https://x.com/"})
	if err != nil {
		t.Fatal(err)
	}
	if e.Min.String() != "2.500" || e.Max.String() != "50.000" {
		t.Errorf("min..max = %s..%s, want 2.500..50.000", e.Min, e.Max)
	}
	if !strings.Contains(e.Parts[1].Basis, "browser_proxy ×20") {
		t.Errorf("basis: %s", e.Parts[1].Basis)
	}
}

func TestText(t *testing.T) {
	obs := seenObserver(t)
	prices := billing.DefaultPrices()
	for _, tc := range []struct {
		req  Request
		want []string
	}{
		{Request{Endpoint: "scrape", URL: "https://light.com/a"}, []string{
			"Scraping 1 page on light.com costs 1.000 credits at the light level.",
			"Seen on light.com: 12 of 12 pages at the light level.",
			"This assumes a live fetch: a cached page costs nothing, an archived one half.",
		}},
		{Request{Endpoint: "batch", URLs: []string{"https://unknown.net/1", "https://unknown.net/2", "https://unknown.net/3"}}, []string{
			"Scraping 3 pages on unknown.net costs 3.000 credits at the light level; up to 30.000 if pages need a browser through a proxy.",
			"Nothing seen yet on unknown.net, so it may need anything from the light level to a browser through a proxy.",
			"This assumes live fetches",
		}},
		{Request{Endpoint: "batch", URLs: []string{"https://mixed.com/", "https://light.com/", "https://browser.com/"}}, []string{
			"Scraping 3 pages on mixed.com, light.com and browser.com costs 7.000 credits at the light level; up to 16.000 if pages need a browser through a proxy.",
			"Seen on mixed.com: 4 of 12 pages at the light level, 4 with a browser, 4 with a browser through a proxy.",
			"Seen on browser.com: 12 of 12 pages with a browser.",
		}},
		{Request{Endpoint: "scrape", URL: "https://browser.com/"}, []string{
			"Scraping 1 page on browser.com costs 5.000 credits with a browser.",
		}},
		{Request{Endpoint: "jobs", URLs: urls(10_000, "https://s%d.example.com/")}, []string{
			"A job of 10,000 pages on 10,000 sites costs 10000.000 credits. Jobs are billed per URL at the light level, whatever a page needs.",
		}},
		{Request{Endpoint: "extract", URL: "https://mixed.com/"}, []string{
			"Extracting from 1 page on mixed.com costs 4.000 to 13.000 credits: 1.000 for the fetch at the light level (up to 10.000 if the page needs a browser through a proxy), and 3.000 for model tokens.",
			"as seen on 40 extract calls.",
			"Model tokens are never discounted by the cache.",
		}},
		{Request{Endpoint: "answer"}, []string{
			"An answer costs 4.500 to 7.000 credits: 2.000 for the search, and 2.500 to 5.000 for model tokens.",
			"assumed until more answer calls are seen.",
			"This assumes a live search",
		}},
		{Request{Endpoint: "monitor", URL: "https://light.com/", Every: "15m"}, []string{
			"Watching a page on light.com every 15 minutes costs 2880.000 credits over 30 days for 2,880 checks; each confirmed change that matched adds 3.000 (up to 90.000 more if it changes once a day).",
		}},
		{Request{Endpoint: "monitor", URL: "https://light.com/", Every: "1w"}, []string{
			"every week costs 5.000 credits over 30 days for 5 checks", "if it changes on every check).",
		}},
		{Request{Endpoint: "recipe"}, []string{"A recipe run of 1 unit costs 1.000 credits."}},
		{Request{Endpoint: "map", URL: "https://www.light.com/"}, []string{
			"Mapping light.com costs 2.000 credits. A map is always live and costs the same however many sitemaps and pages it reads.",
		}},
	} {
		e, err := Compute(prices, obs, &tc.req)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(e.Text, w) {
				t.Errorf("%s text:\n%s\nlacks %q", tc.req.Endpoint, e.Text, w)
			}
		}
		if strings.Contains(e.Text, "%!") || strings.Contains(e.Text, "  ") || !strings.HasSuffix(e.Text, ".") {
			t.Errorf("text is not clean: %q", e.Text)
		}
	}
}

func TestComputeBadInput(t *testing.T) {
	obs := seenObserver(t)
	for _, tc := range []struct {
		req  Request
		want string
	}{
		{Request{}, "endpoint is required: one of scrape, batch, jobs, extract, map, crawl, search, answer, recipe, monitor"},
		{Request{Endpoint: "spider"}, `unknown endpoint "spider": use one of scrape, batch, jobs, extract, map, crawl, search, answer, recipe, monitor`},
		{Request{Endpoint: "scrape"}, "url is required: the page to scrape"},
		{Request{Endpoint: "scrape", URLs: []string{"https://a.com/"}}, "scrape takes one url; use batch (up to 50 urls) or jobs (up to 10,000) for urls"},
		{Request{Endpoint: "batch"}, "urls is required: an array of 1 to 50 URLs"},
		{Request{Endpoint: "batch", URL: "https://a.com/"}, "batch takes urls, an array of 1 to 50 URLs"},
		{Request{Endpoint: "batch", URLs: []string{}}, "urls is required: an array of 1 to 50 URLs"},
		{Request{Endpoint: "batch", URLs: urls(51, "https://a.com/%d")}, "batch takes at most 50 urls (got 51); use jobs for up to 10,000"},
		{Request{Endpoint: "jobs", URLs: urls(10_001, "https://a.com/%d")}, "jobs take at most 10,000 urls (got 10,001)"},
		{Request{Endpoint: "scrape", URL: "not a url"}, "url: url must start with http:// or https://"},
		{Request{Endpoint: "scrape", URL: "https://"}, "url: url is not valid: missing host"},
		{Request{Endpoint: "scrape", URL: "ftp://a.com/"}, "url: url must start with http:// or https://"},
		{Request{Endpoint: "scrape", URL: "http://127.0.0.1/"}, "url: url host is not public: 127.0.0.1"},
		{Request{Endpoint: "batch", URLs: []string{"https://a.com/", "https://b.com/", "http://localhost/"}}, "urls[2]: url host is not public: localhost"},
		{Request{Endpoint: "extract"}, "url or content is required: the page to read, or your own text"},
		{Request{Endpoint: "monitor"}, "url is required: the page to watch"},
		{Request{Endpoint: "map"}, "url is required: the site to map"},
		{Request{Endpoint: "map", URL: "http://10.0.0.1/"}, "url: url host is not public: 10.0.0.1"},
		{Request{Endpoint: "monitor", URL: "https://a.com/", Every: "1m"}, "every must be at least 4m"},
		{Request{Endpoint: "monitor", URL: "https://a.com/", Every: "often"}, "every must be an interval like 4m, 15m, 1h, 6h, 1d or 1w"},
		{Request{Endpoint: "recipe", Units: -1}, "units must be a whole number from 1 to 100,000"},
	} {
		_, err := Compute(billing.DefaultPrices(), obs, &tc.req)
		bad, ok := errors.AsType[*BadInputError](err)
		if !ok || bad.Message != tc.want {
			t.Errorf("%+v:\n got %v\nwant %s", tc.req.Endpoint, err, tc.want)
		}
	}
}

// Every call kind of the price table is priced by some endpoint: its own,
// or a part of another's (a monitor's changes).
func TestEveryKindHasAnEstimate(t *testing.T) {
	priced := map[string]bool{billing.KindMonitorChange: true}
	for _, ep := range Endpoints {
		priced[endpointKind[ep]] = true
	}
	for _, k := range billing.Kinds {
		if !priced[k] {
			t.Errorf("kind %q: no endpoint of the estimate prices it", k)
		}
	}
	e, err := Compute(billing.DefaultPrices(), nil, &Request{Endpoint: "map", URL: "https://example.com/"})
	if err != nil || e.Kind != billing.KindMap || e.Count != 1 || e.Min != billing.DefaultPrices().Calls[billing.KindMap].Base {
		t.Errorf("map estimate %+v %v", e, err)
	}
}

func BenchmarkComputeBatch(b *testing.B) {
	o := newObserver(nil, MaxDomains)
	req := &Request{Endpoint: "batch", URLs: urls(50, "https://site%d.example.com/page")}
	p := billing.DefaultPrices()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compute(p, o, req); err != nil {
			b.Fatal(err)
		}
	}
}

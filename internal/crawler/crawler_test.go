package crawler

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// site: / links to /a and /private/x and another host; /a links to /b;
// /b links to /c (depth 3); robots.txt disallows /private/.
func site(t *testing.T) *httptest.Server {
	pages := map[string]string{
		"/":          `<a href="/a">page a</a> <a href="/private/x">secret</a> <a href="http://elsewhere.test/">away</a>`,
		"/a":         `<a href="/b">page b</a> <a href="/">home</a>`,
		"/b":         `<a href="/c">page c</a>`,
		"/c":         `<a href="/d">page d</a>`,
		"/d":         `end`,
		"/private/x": `secret`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n")
			return
		}
		if r.URL.Path == "/sitemap.xml" {
			fmt.Fprintf(w, `<urlset><url><loc>http://%s/b</loc></url></urlset>`, r.Host)
			return
		}
		p, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, p)
	}))
	t.Cleanup(srv.Close)
	return srv
}

var hrefRE = regexp.MustCompile(`<a href="([^"]+)">([^<]*)</a>`)

// fetcher reads pages directly (the product's path is a scrape through
// the gate: cmd/trawl) and records what it fetched.
type fetcher struct {
	mu   sync.Mutex
	got  []string
	base string
}

func (f *fetcher) fetch(ctx context.Context, u string) (*Page, error) {
	resp, err := http.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var b [4096]byte
	n, _ := resp.Body.Read(b[:])
	f.mu.Lock()
	f.got = append(f.got, u[len(f.base):])
	f.mu.Unlock()
	p := &Page{URL: u}
	for _, m := range hrefRE.FindAllStringSubmatch(string(b[:n]), -1) {
		h := m[1]
		if h[0] == '/' {
			h = f.base + h
		}
		p.Links = append(p.Links, Link{Href: h, Text: m[2]})
	}
	return p, nil
}

// crawlSite crawls srv from its root with depth and returns the paths
// fetched (sorted) and the run's stats.
func crawlSite(t *testing.T, srv *httptest.Server, depth int) ([]string, Stats) {
	t.Helper()
	f := &fetcher{base: srv.URL}
	c, err := Open(t.TempDir(), Config{Fetch: f.fetch, Delay: -1, MaxDepth: depth})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Seed(context.Background(), srv.URL+"/"); err != nil {
		t.Fatal(err)
	}
	st, err := c.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(f.got)
	return f.got, st
}

func TestCrawlHonoursRobotsHostAndDepth(t *testing.T) {
	got, st := crawlSite(t, site(t), 3)
	if want := []string{"/", "/a", "/b", "/c"}; !slices.Equal(got, want) {
		t.Errorf("fetched %q, want %q (robots, host and depth limits)", got, want)
	}
	if st.Fetched != 4 || st.Refused != 1 || st.Queued != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestFrontierSurvivesRestart(t *testing.T) {
	srv := site(t)
	dir := t.TempDir()
	f := &fetcher{base: srv.URL}
	c, err := Open(dir, Config{Fetch: f.fetch, Delay: -1, MaxPages: 2, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Seed(context.Background(), srv.URL+"/sitemap.xml", srv.URL+"/"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if len(f.got) != 2 {
		t.Fatalf("first run fetched %q", f.got)
	}
	c, err = Open(dir, Config{Fetch: f.fetch, Delay: -1, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := slices.Clone(f.got)
	slices.Sort(got)
	if want := []string{"/", "/a", "/b", "/c", "/d"}; !slices.Equal(got, want) {
		t.Errorf("fetched over two runs %q, want each once: %q", f.got, want)
	}
}

// Pages are revisited about as often as they change: a page seen changed
// comes back at half its interval, an unchanged one at double, within the
// policy's bounds; QueueDue queues each due page once (clock injected).
func TestRecrawlByChangeRate(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	fetches := map[string]int{}
	var down atomic.Bool
	fetch := func(ctx context.Context, u string) (*Page, error) {
		if down.Load() {
			return nil, fmt.Errorf("site down")
		}
		mu.Lock()
		defer mu.Unlock()
		fetches[u]++
		hash := "same"
		if strings.HasSuffix(u, "/news") {
			hash = fmt.Sprint("v", fetches[u]) // changes at every fetch
		}
		return &Page{URL: u, Hash: hash}, nil
	}
	get := func(ctx context.Context, u string) (int, []byte, error) { return 404, nil, nil }
	c, err := Open(t.TempDir(), Config{Fetch: fetch, Get: get, Delay: -1, Now: func() time.Time { return now },
		Revisit: Revisit{Initial: 24 * time.Hour, Min: 6 * time.Hour, Max: 96 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const news, doc = "http://site.test/news", "http://site.test/doc"
	if _, err := c.Seed(context.Background(), news, doc); err != nil {
		t.Fatal(err)
	}
	run := func() {
		t.Helper()
		if _, err := c.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	due := func(want int) {
		t.Helper()
		n, err := c.QueueDue(now)
		if err != nil || n != want {
			t.Fatalf("at %v: %d due (%v), want %d", now, n, err, want)
		}
	}
	interval := func(u string) time.Duration {
		t.Helper()
		r, err := c.Visits()
		if err != nil {
			t.Fatal(err)
		}
		return r[u].Interval
	}
	run()
	due(0)
	now = now.Add(24 * time.Hour)
	due(2)
	due(0) // queued once
	run()
	if a, b := interval(news), interval(doc); a != 12*time.Hour || b != 48*time.Hour {
		t.Fatalf("after a second visit: news every %v, doc every %v; want 12h and 48h", a, b)
	}
	now = now.Add(12 * time.Hour)
	due(1) // the news page only
	run()
	now = now.Add(6 * time.Hour)
	due(1)
	run()
	if a := interval(news); a != 6*time.Hour {
		t.Errorf("news every %v, want the 6h floor", a)
	}
	now = now.Add(30 * time.Hour)
	due(2)
	run()
	for range 3 {
		now = now.Add(96 * time.Hour)
		c.QueueDue(now)
		run()
	}
	if b := interval(doc); b != 96*time.Hour {
		t.Errorf("doc every %v, want the 96h ceiling", b)
	}
	r, _ := c.Visits()
	if r[news].Changes < 3 || r[doc].Changes != 0 || fetches[doc] != r[doc].Visits {
		t.Errorf("records %+v %+v, fetches %v", r[news], r[doc], fetches)
	}

	// A revisit that fails leaves the queue: the page is due again one
	// interval on, not queued for ever.
	down.Store(true)
	now = now.Add(96 * time.Hour)
	due(2)
	run()
	due(0)
	down.Store(false)
	now = now.Add(96 * time.Hour)
	due(2)
}

// The sitemaps a seed host's robots.txt names are read, and their pages
// queued, even when nothing links to them.
func TestRobotsSitemaps(t *testing.T) {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			fmt.Fprintf(w, "User-agent: *\nDisallow: /private/\nSitemap: %s/maps/pages.xml\n", srv.URL)
		case "/maps/pages.xml":
			fmt.Fprintf(w, `<urlset><url><loc>%[1]s/hidden</loc></url><url><loc>%[1]s/private/y</loc></url><url><loc>http://elsewhere.test/x</loc></url></urlset>`, srv.URL)
		case "/", "/hidden":
			fmt.Fprint(w, "no links")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	got, st := crawlSite(t, srv, 1)
	if want := []string{"/", "/hidden"}; !slices.Equal(got, want) {
		t.Errorf("fetched %q, want %q (the robots.txt sitemap's page on the host, not its disallowed one)", got, want)
	}
	if st.Refused != 1 {
		t.Errorf("stats %+v", st)
	}
}

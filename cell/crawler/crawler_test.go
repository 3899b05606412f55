package crawler

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sync"
	"testing"
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

func TestCrawlHonoursRobotsHostAndDepth(t *testing.T) {
	srv := site(t)
	f := &fetcher{base: srv.URL}
	c, err := Open(t.TempDir(), Config{Fetch: f.fetch, Delay: -1, MaxDepth: 3})
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
	if want := []string{"/", "/a", "/b", "/c"}; !slices.Equal(f.got, want) {
		t.Errorf("fetched %q, want %q (robots, host and depth limits)", f.got, want)
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

package firecrawl

import "testing"

func TestPathPrefix(t *testing.T) {
	for in, want := range map[string]string{
		"/":                "/",
		"/index.html":      "/",
		"/docs/":           "/docs/",
		"/docs/intro.html": "/docs/",
		"/docs":            "/docs",
		"/a/b/c.php":       "/a/b/",
	} {
		if got := pathPrefix(in); got != want {
			t.Errorf("pathPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestScopeFollow(t *testing.T) {
	sc, err := CrawlScope{Start: "https://docs.example.com/guide/index.html", Exclude: []string{`/old/`}}.Ready()
	if err != nil {
		t.Fatal(err)
	}
	for link, want := range map[string]bool{
		"https://docs.example.com/guide/a.html":     true,
		"https://docs.example.com/guide/old/a.html": false,
		"https://docs.example.com/other.html":       false,
		"https://api.example.com/guide/a.html":      false,
		"https://elsewhere.org/guide/a.html":        false,
	} {
		if got := sc.Follow(link); got != want {
			t.Errorf("Follow(%s) = %v", link, got)
		}
	}
	sc, _ = CrawlScope{Start: "https://docs.example.com/", Subdomains: true}.Ready()
	if !sc.Follow("https://api.example.com/x") || sc.Follow("https://example.org/x") {
		t.Error("subdomains")
	}
	if c, ok := sc.Canonical("https://docs.example.com/a?b=1#frag"); !ok || c != "https://docs.example.com/a?b=1" {
		t.Errorf("canonical %q", c)
	}
	if _, ok := sc.Canonical("mailto:x@y.z"); ok {
		t.Error("mailto canonical")
	}
}

package sitemap

import (
	"context"
	"net/url"
	"slices"
	"testing"
)

// testMapper is a mapper of http://s.example.test with Firecrawl's
// defaults, for the parsers.
func testMapper(t *testing.T) *mapper {
	t.Helper()
	req := NewRequest("http://s.example.test")
	if err := req.Normalize(); err != nil {
		t.Fatal(err)
	}
	start, _ := url.Parse(req.URL)
	return newMapper(nil, req, start)
}

func TestParseSitemap(t *testing.T) {
	const s = "http://s.example.test"
	latin1 := []byte(`<?xml version="1.0" encoding="ISO-8859-1"?><urlset><url><loc>` + s + "/caf\xe9</loc></url></urlset>")
	tests := []struct {
		name string
		body []byte
		kind docKind
		locs []string
		cut  bool
	}{
		{
			name: "urlset with extensions",
			body: []byte(`<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:image="http://www.google.com/schemas/sitemap-image/1.1" xmlns:xhtml="http://www.w3.org/1999/xhtml">
<url><loc>` + s + `/a</loc><xhtml:link rel="alternate" hreflang="de" href="` + s + `/de/a"/>
<image:image><image:loc>` + s + `/a.png</image:loc></image:image></url>
<url><loc><![CDATA[` + s + `/b?x=1&y=2]]></loc></url>
<url><loc>` + s + `/a#frag</loc></url>
<url><loc>http://elsewhere.test/c</loc></url>
<url><loc>javascript:alert(1)</loc></url>
<url><loc>/relative</loc></url>
</urlset>`),
			kind: kindURLs, locs: []string{s + "/a", s + "/b", s + "/relative"},
		},
		{
			name: "index keeps its entries as written",
			body: []byte(`<sitemapindex><sitemap><loc>` + s + `/1.xml</loc></sitemap><sitemap><loc> http://cdn.test/2.xml.gz </loc></sitemap></sitemapindex>`),
			kind: kindIndex, locs: []string{s + "/1.xml", "http://cdn.test/2.xml.gz"},
		},
		{
			name: "rss",
			body: []byte(`<rss version="2.0"><channel><link>` + s + `/</link><item><title>t</title><link>` + s + `/post</link></item></channel></rss>`),
			kind: kindURLs, locs: []string{s + "/post"},
		},
		{
			name: "atom",
			body: []byte(`<feed xmlns="http://www.w3.org/2005/Atom"><link href="` + s + `/feed"/><entry><link rel="edit" href="` + s + `/edit"/><link href="` + s + `/e1"/></entry><entry><link rel="alternate" href="` + s + `/e2"/></entry></feed>`),
			kind: kindURLs, locs: []string{s + "/e1", s + "/e2"},
		},
		{
			name: "declared latin-1, as the site wrote it",
			body: latin1,
			kind: kindURLs, locs: []string{s + "/caf%C3%A9"},
		},
		{
			// The Fetcher transcoded it already: not decoded twice.
			name: "declared latin-1, transcoded to UTF-8",
			body: []byte(`<?xml version="1.0" encoding="ISO-8859-1"?><urlset><url><loc>` + s + "/café</loc></url></urlset>"),
			kind: kindURLs, locs: []string{s + "/caf%C3%A9"},
		},
		{
			name: "gzipped latin-1",
			body: gz(latin1),
			kind: kindURLs, locs: []string{s + "/caf%C3%A9"},
		},
		{
			name: "text",
			body: []byte("\ufeff" + s + "/t1\n  " + s + "/t2  \r\n# comment\n" + s + "/t1\n"),
			kind: kindURLs, locs: []string{s + "/t1", s + "/t2"},
		},
		{
			name: "gzipped text",
			body: gz([]byte(s + "/z\n")),
			kind: kindURLs, locs: []string{s + "/z"},
		},
		{name: "html", body: []byte("<!DOCTYPE html>\n<html><body><a href='/x'>x</a></body></html>"), kind: kindNone},
		{name: "empty", body: nil, kind: kindNone},
		{name: "text without URLs", body: []byte("Not found\n"), kind: kindNone},
		{
			name: "unbalanced: read as far as it goes",
			body: []byte(`<urlset><url><loc>` + s + `/ok</loc></url></url></url><url><loc>` + s + `/after</loc></url>`),
			kind: kindURLs, locs: []string{s + "/ok", s + "/after"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := testMapper(t)
			base, _ := url.Parse(s + "/sitemap.xml")
			d := sitemapDoc{base: base, need: 100, seen: map[string]bool{}}
			m.parseSitemap(context.Background(), &d, tc.body)
			if d.kind != tc.kind || !slices.Equal(d.locs, tc.locs) || d.cut != tc.cut {
				t.Errorf("got kind %d %q cut %v (err %v), want kind %d %q cut %v", d.kind, d.locs, d.cut, d.err, tc.kind, tc.locs, tc.cut)
			}
		})
	}
}

func TestParsePage(t *testing.T) {
	page := "<html><head><base href=\"http://s.example.test/docs/\">" +
		"<title>Caf\xe9  <b>menu</b></title>" + // a title holds text only
		`<meta property="og:description" content="From OG">
<svg><title>icon</title><a href="/in-svg">svg</a></svg>
</head><body>
<a href="intro.html">  Intro
  duction </a>
<a href="/img"><img src="x.png" alt="A picture"></a>
<a href="/nested">outer <a href="/inner">inner</a>
<a name="anchor-only">no href</a>
<a href="  ../up.html#s ">Up</a>
<template><a href="/in-template">t</a></template>
</body></html>`
	p := &pageResult{status: 200}
	p.base, _ = url.Parse("http://s.example.test/docs/page.html")
	parsePage(p, []byte(page), "text/html; charset=windows-1252")
	if p.title != "Café <b>menu</b>" {
		t.Errorf("title %q", p.title)
	}
	if p.description != "From OG" {
		t.Errorf("description %q", p.description)
	}
	if p.base.String() != "http://s.example.test/docs/" {
		t.Errorf("base %s", p.base)
	}
	want := []anchor{
		{"intro.html", "Intro duction"},
		{"/img", "A picture"},
		{"/nested", "outer"},
		{"/inner", "inner"},
		{"  ../up.html#s ", "Up"},
	}
	if !slices.Equal(p.links, want) {
		t.Errorf("links\n got %q\nwant %q", p.links, want)
	}

	// A meta description wins over og:description, whatever the order.
	p = &pageResult{status: 200}
	p.base, _ = url.Parse("http://s.example.test/")
	parsePage(p, []byte(`<meta property="og:description" content="og"><meta name="Description" content=" The   real one ">`), "")
	if p.description != "The real one" {
		t.Errorf("description %q", p.description)
	}
}

func TestTerms(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"/docs/getting-started", []string{"docs", "getting", "started"}},
		{"/blog/sitemapRanking_v2.html", []string{"blog", "sitemap", "ranking", "v2", "html"}},
		{"HTMLParser getURL", []string{"html", "parser", "get", "url"}},
		{"Crème brûlée", []string{"crème", "brûlée"}},
		{"API  Reference!!", []string{"api", "reference"}},
		{"", nil},
	}
	for _, tc := range tests {
		if got := terms(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("terms(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestResolveNormalize(t *testing.T) {
	base, _ := url.Parse("https://s.example.test/a/b.html?q=1")
	tests := []struct {
		raw       string
		dropQuery bool
		want      string // "" when rejected
	}{
		{"c.html", true, "https://s.example.test/a/c.html"},
		{"HTTPS://S.Example.TEST:443/X#y", true, "https://s.example.test/X"},
		{"http://s.example.test:80/", true, "http://s.example.test"},
		{"http://s.example.test:8080/", true, "http://s.example.test:8080"},
		{"//cdn.example.test/x?a=1", false, "https://cdn.example.test/x?a=1"},
		{"?page=2", false, "https://s.example.test/a/b.html?page=2"},
		{"?page=2", true, "https://s.example.test/a/b.html"},
		{"#only", true, "https://s.example.test/a/b.html"},
		{"https://user:pw@s.example.test/p", true, "https://s.example.test/p"},
		{"/pa\nth\t/x", true, "https://s.example.test/path/x"},
		{"https://[::1]:443/v6", true, "https://[::1]/v6"},
		{"mailto:a@s.example.test", true, ""},
		{"javascript:void(0)", true, ""},
		{"tel:+1", true, ""},
		{"ftp://s.example.test/f", true, ""},
		{"http://", true, ""},
		{"http://%zz", true, ""},
	}
	for _, tc := range tests {
		u := resolve(base, tc.raw)
		got := ""
		if u != nil {
			normalize(u, tc.dropQuery)
			got = u.String()
		}
		if got != tc.want {
			t.Errorf("%q (dropQuery %v): got %q, want %q", tc.raw, tc.dropQuery, got, tc.want)
		}
	}
}

func TestScope(t *testing.T) {
	tests := []struct {
		start   string
		subs    bool
		anyPath bool
		in, out []string
	}{
		{
			start: "https://a.example.co.uk", subs: true,
			in:  []string{"https://a.example.co.uk/x", "http://b.example.co.uk/", "https://example.co.uk/", "https://www.a.example.co.uk/", "https://x.y.example.co.uk/"},
			out: []string{"https://co.uk/", "https://other.co.uk/", "https://a.example.co.uk:8443/", "https://example.com/"},
		},
		{
			start: "https://www.example.com", subs: false,
			in:  []string{"https://example.com/", "https://www.example.com/a"},
			out: []string{"https://blog.example.com/", "https://www.www.example.com/"},
		},
		{
			// github.io is a public suffix: other users' sites are other sites.
			start: "https://alice.github.io/", subs: true,
			in:  []string{"https://alice.github.io/p", "https://docs.alice.github.io/"},
			out: []string{"https://bob.github.io/", "https://github.io/"},
		},
		{
			start: "http://127.0.0.1:8080/", subs: true,
			in:  []string{"http://127.0.0.1:8080/x"},
			out: []string{"http://127.0.0.1:9090/x", "http://127.0.0.2:8080/", "http://0.1:8080/"},
		},
		{
			start: "https://example.com/docs", subs: true,
			in:  []string{"https://example.com/docs", "https://example.com/docs/a", "https://example.com/docs-old", "https://api.example.com/docs/x"},
			out: []string{"https://example.com/", "https://example.com/blog/docs"},
		},
		{
			start: "https://example.com/docs", subs: true, anyPath: true,
			in: []string{"https://example.com/", "https://example.com/blog/docs"},
		},
	}
	for _, tc := range tests {
		start, _ := url.Parse(tc.start)
		sc := newScope(start, tc.subs, tc.anyPath)
		check := func(raw string, want bool) {
			u := resolve(nil, raw)
			normalize(u, true)
			if got := sc.contains(u); got != want {
				t.Errorf("start %s (subdomains %v): %s in scope = %v, want %v", tc.start, tc.subs, raw, got, want)
			}
		}
		for _, u := range tc.in {
			check(u, true)
		}
		for _, u := range tc.out {
			check(u, false)
		}
	}
}

// FuzzParse: any document parses without panic, and what a sitemap gives
// is in scope, normalised and within the bounds.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`<urlset><url><loc>http://s.example.test/a</loc></url></urlset>`))
	f.Add([]byte(`<sitemapindex><sitemap><loc>/x.xml</loc></sitemap></sitemapindex>`))
	f.Add([]byte("http://s.example.test/a\nhttp://b.s.example.test/b?q=1#f\n"))
	f.Add(gz([]byte(`<rss><channel><item><link>http://s.example.test/p</link></item></channel></rss>`)))
	f.Add([]byte(`<html><base href="/d/"><a href="x">x<a href="http://s.example.test:80/y">`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m := testMapper(t)
		m.b.MaxSitemapURLs, m.b.MaxBodyBytes = 50, 1<<16
		base, _ := url.Parse("http://s.example.test/sitemap.xml")
		d := sitemapDoc{base: base, need: 100, seen: map[string]bool{}}
		m.parseSitemap(context.Background(), &d, body)
		if d.kind == kindURLs {
			for _, l := range d.locs {
				u := resolve(nil, l)
				if u == nil || !m.scope.contains(u) {
					t.Fatalf("%q out of scope", l)
				}
				if normalize(u, true); u.String() != l {
					t.Fatalf("%q is not normal: %q", l, u)
				}
			}
		}
		if d.entries > 50 || len(d.locs) > 100 {
			t.Fatalf("%d entries, %d locs", d.entries, len(d.locs))
		}
		p := &pageResult{status: 200, base: base}
		parsePage(p, body, "text/html")
		if len(p.links) > maxPageLinks {
			t.Fatalf("%d links", len(p.links))
		}
	})
}

package content

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/trawlhq/trawl/internal/golden"
)

var allParse = Options{Parse: ParseOptions{Links: true, Media: true, Metadata: true, Tables: true}}

type goldenCase struct {
	name    string // testdata/<name>.html
	url     string
	want    []string // substrings the Markdown must contain
	notWant []string // substrings it must not contain
}

var goldenCases = []goldenCase{
	{
		name: "docs_nav", url: "https://docs.example.com/server/configure.html",
		want: []string{
			"# Configuring the Widget Server",
			"## Where the file lives",
			"- **listen**: the address",
			"1. Write the file.",
			"```ini\nlisten = 127.0.0.1:8080",
			"`widget.conf`",
			"[the settings reference](https://docs.example.com/server/reference.html#settings)",
		},
		notWant: []string{"cookies", "Pricing", "Sign in", "In this section", "Upgrading between releases", "Previous", "All rights reserved", "Privacy"},
	},
	{
		// A news article: the precision pass and the headline rule.
		name: "news_article", url: "https://coastal.example/news/ferry-returns",
		want: []string{
			"The harbour ferry returned to service on Monday",
			"a departure every twenty minutes",
			"Passengers who bought a monthly card",
			`![The ferry at the quay](https://coastal.example/img/ferry.jpg "The ferry at the north quay on Monday morning. Photo: Lars Holm")`,
		},
		notWant: []string{
			"# Harbour ferry", "Maria Jensen", "Share on", "Related:", "morning briefing", "newsletter",
			"Tags", "More from News", "cycle lanes", "comments", "forever", "cookies", "All rights reserved",
		},
	},
	{
		name: "tables", url: "https://example.com/releases/",
		want: []string{
			"Supported releases\n\n| Release | Platforms | End of support |\n|---|---|---|\n| 4.2 | Linux, macOS | 2026-03-31 |",
			"| 4.0 (all platforms) |  | 2025-03-31 |",
			"| alpha | first |\n|---|---|\n| beta | second |",
			"| `now()` → `timestamp` | Current time. Stable within a transaction. |",
			"| `version()` | Server version. Example: `SELECT version();` |",
			"[math functions](https://example.com/docs/math)",
		},
		notWant: []string{"Home", "Copyright", "<br", "<table", "<td"},
	},
	{
		name: "code_sphinx", url: "https://docs.python.example/3/library/json.html",
		want: []string{
			"# `json` — JSON encoder and decoder\n",
			"```python\n>>> import json\n>>> json.dumps(['foo', {'bar': ('baz', None, 1.0, 2)}])\n'[\"foo\", {\"bar\": [\"baz\", null, 1.0, 2]}]'\n```",
			"```console\n$ echo",
			"```\nplain text block\n```",
			"## Basic Usage",
		},
		notWant: []string{"¶", "Navigation", "Previous topic", "Table of Contents", "Copyright", "General Index"},
	},
	{
		name: "code_docbook", url: "https://www.postgresql.example/docs/15/queries-with.html",
		want: []string{
			"## 7.8. `WITH` Queries (Common Table Expressions)",
			"```sql\nWITH regional_sales AS (",
			"```c\n#include <libpq-fe.h>",
			"```console\n$ psql -c 'SELECT 1'\n```",
			"### Note",
		},
		notWant: []string{"Prev", "Home", "Up", "Chapter 8. Data Types", "| "},
	},
	{
		name: "links_base", url: "https://example.net/notes/tidal-pools",
		want: []string{
			"![A green anemone, open](https://cdn.example.net/notes/2024/img/anemone.jpg)",
			"[last year's notes](https://cdn.example.net/notes/2023/pools.html#anemones)",
			"![Hermit crab](https://cdn.example.net/notes/2024/img/crab.jpg \"The hermit crab, photographed from above.\")",
			"[the editor](mailto:notes@example.net)",
			"[![Map of the pools](https://cdn.example.net/maps/pools-thumb.png)](https://cdn.example.net/maps/pools.png)",
			"This link does nothing.",
		},
		notWant: []string{"javascript:", "All notes", "About us", "data:image"},
	},
	{
		name: "links_nobase", url: "https://example.net/notes/tidal-pools",
		want: []string{
			"![A green anemone, open](https://example.net/notes/img/anemone.jpg)",
			"[last year's notes](https://example.net/2023/pools.html#anemones)",
		},
		notWant: []string{"javascript:", "cdn.example.net/notes/2024"},
	},
	{
		name: "metadata", url: "https://example.de/artikel/gezeiten?ref=feed",
		want:    []string{"Am Nordende des Strandes"},
		notWant: []string{"Erika", "schema.org"},
	},
	{
		name: "broken", url: "https://odd.example/a/b.html",
		want: []string{
			"Broken & odd markup",
			"[unquoted link](https://odd.example/a/relative/path.html)",
			"- one\n- two\n- three",
			"code with markup inside\n  and <escaped> text",
			"emoji 🐙",
		},
		notWant: []string{"injected", "svg title", "javascript"},
	},
}

// htmlTag matches an HTML tag outside code: Markdown for normal pages must
// have none.
var htmlTag = regexp.MustCompile(`</?[a-zA-Z][a-zA-Z0-9]*(\s[^>]*)?/?>`)

func stripCode(md string) string {
	var b strings.Builder
	fence := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "```") {
			fence = !fence
			continue
		}
		if !fence {
			b.WriteString(regexp.MustCompile("`[^`]*`").ReplaceAllString(line, ""))
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func TestProcessGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			page, err := os.ReadFile(filepath.Join("testdata", tc.name+".html"))
			if err != nil {
				t.Fatal(err)
			}
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			d, err := Process(page, u, allParse)
			if err != nil {
				t.Fatalf("Process: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(d.Markdown, w) {
					t.Errorf("Markdown lacks %q", w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(d.Markdown, w) {
					t.Errorf("Markdown contains %q", w)
				}
			}
			if m := htmlTag.FindString(stripCode(d.Markdown)); m != "" {
				t.Errorf("Markdown contains HTML %q", m)
			}
			meta, err := json.MarshalIndent(struct {
				Title  string  `json:"title"`
				Method string  `json:"method"`
				Parsed *Parsed `json:"parsed"`
			}{d.Title, d.Method, d.Parsed}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", "golden", tc.name+".md"), []byte(d.Markdown))
			golden.Check(t, filepath.Join("testdata", "golden", tc.name+".json"), append(meta, '\n'))
			if t.Failed() {
				t.Logf("Markdown:\n%s", d.Markdown)
			}
		})
	}
}

func TestParseData(t *testing.T) {
	page, err := os.ReadFile("testdata/links_base.html")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("https://example.net/notes/tidal-pools")
	d, err := Process(page, u, Options{Parse: ParseOptions{Links: true, Media: true}})
	if err != nil {
		t.Fatal(err)
	}
	if d.Parsed == nil || d.Parsed.Metadata != nil || d.Parsed.Tables != nil {
		t.Fatalf("Parsed = %+v, want links and media only", d.Parsed)
	}
	links := map[string]Link{}
	for _, l := range d.Parsed.Links {
		if _, dup := links[l.Href]; dup {
			t.Errorf("duplicate link %q", l.Href)
		}
		links[l.Href] = l
	}
	for _, tc := range []struct {
		href     string
		text     string
		internal bool
		present  bool
	}{
		{"https://cdn.example.net/", "Home", false, true}, // "/" resolves against <base>, another host
		{"https://example.net/", "Home", true, false},
		{"https://cdn.example.net/notes/2023/pools.html", "last year's notes", false, true}, // fragment removed
		{"mailto:notes@example.net", "the editor", false, true},
		{"https://data.example.org/pools.csv", "the open data portal", false, true},
		{"https://cdn.example.net/notes/feed.xml", "the feed", false, true},
		{"https://cdn.example.net/about", "About", false, true}, // first text wins
	} {
		l, ok := links[tc.href]
		if ok != tc.present {
			t.Errorf("link %q present = %v, want %v", tc.href, ok, tc.present)
			continue
		}
		if ok && (l.Text != tc.text || l.Internal != tc.internal) {
			t.Errorf("link %q = %+v, want text %q internal %v", tc.href, l, tc.text, tc.internal)
		}
	}
	for href := range links {
		if strings.HasPrefix(href, "javascript:") || strings.Contains(href, "#") {
			t.Errorf("link %q should have been dropped or stripped", href)
		}
	}
	wantMedia := []Media{
		{Kind: "image", Src: "https://cdn.example.net/notes/2024/img/anemone.jpg", Alt: "A green anemone, open"},
		{Kind: "image", Src: "https://cdn.example.net/notes/2024/img/crab.jpg", Alt: "Hermit crab"},
		{Kind: "image", Src: "https://cdn.example.net/notes/2024/img/pool.jpg", Alt: "The whole pool"},
		{Kind: "image", Src: "https://cdn.example.net/maps/pools-thumb.png", Alt: "Map of the pools"},
		{Kind: "video", Src: "https://cdn.example.net/notes/2024/video/waves.mp4", Title: "Waves over the shelf", Poster: "https://cdn.example.net/notes/2024/video/waves.jpg"},
		{Kind: "audio", Src: "https://cdn.example.net/notes/2024/audio/gulls.ogg"},
		{Kind: "audio", Src: "https://cdn.example.net/notes/2024/audio/gulls.mp3"},
	}
	if len(d.Parsed.Media) != len(wantMedia) {
		t.Fatalf("media = %+v, want %+v", d.Parsed.Media, wantMedia)
	}
	for i, m := range wantMedia {
		if d.Parsed.Media[i] != m {
			t.Errorf("media[%d] = %+v, want %+v", i, d.Parsed.Media[i], m)
		}
	}
}

func TestMetadata(t *testing.T) {
	page, err := os.ReadFile("testdata/metadata.html")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("https://example.de/artikel/gezeiten?ref=feed")
	d, err := Process(page, u, Options{Parse: ParseOptions{Metadata: true}})
	if err != nil {
		t.Fatal(err)
	}
	m := d.Parsed.Metadata
	if m.Title != "Die Gezeitenbecken" || d.Title != "Die Gezeitenbecken" {
		t.Errorf("title = %q / %q", m.Title, d.Title)
	}
	if m.Description != "Notizen vom Strand." || m.Language != "de-DE" || m.Canonical != "https://example.de/artikel/gezeiten" {
		t.Errorf("metadata = %+v", m)
	}
	if m.OpenGraph["og:image"] != "https://example.de/bild.jpg" || m.OpenGraph["og:site_name"] != "Beispiel" || len(m.OpenGraph) != 4 {
		t.Errorf("open graph = %v", m.OpenGraph)
	}
	if m.Twitter["twitter:card"] != "summary_large_image" || m.Twitter["twitter:site"] != "@beispiel" {
		t.Errorf("twitter = %v", m.Twitter)
	}
	if len(m.JSONLD) != 2 {
		t.Fatalf("json-ld = %s, want 2 valid blocks", m.JSONLD)
	}
	var art struct {
		Type   string `json:"@type"`
		Author struct{ Name string }
	}
	if err := json.Unmarshal(m.JSONLD[0], &art); err != nil || art.Type != "Article" || art.Author.Name != "Erika Muster" {
		t.Errorf("json-ld[0] = %s (%v)", m.JSONLD[0], err)
	}
	// <html lang> wins over the Content-Language pragma.
	d, _ = Process([]byte(`<html lang="fr"><meta http-equiv="Content-Language" content="de"><p>x`), u, Options{Parse: ParseOptions{Metadata: true}})
	if d.Parsed.Metadata.Language != "fr" {
		t.Errorf("language = %q, want fr", d.Parsed.Metadata.Language)
	}
}

func TestTables(t *testing.T) {
	page, err := os.ReadFile("testdata/tables.html")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Process(page, nil, Options{Parse: ParseOptions{Tables: true}})
	if err != nil {
		t.Fatal(err)
	}
	tabs := d.Parsed.Tables
	if len(tabs) != 3 { // the role=presentation table is layout
		t.Fatalf("tables = %d, want 3: %+v", len(tabs), tabs)
	}
	got, _ := json.Marshal(tabs[0])
	want := `{"caption":"Supported releases","header":["Release","Platforms","End of support"],"rows":[["4.2","Linux, macOS","2026-03-31"],["4.1","Linux","2025-09-30"],["4.0 (all platforms)","","2025-03-31"]]}`
	if string(got) != want {
		t.Errorf("table 0 = %s\nwant %s", got, want)
	}
	if tabs[1].Header != nil || len(tabs[1].Rows) != 3 {
		t.Errorf("table without th = %+v, want no header and 3 rows", tabs[1])
	}
	// rowspan: the spanned cell is empty, the row keeps two columns.
	if r := tabs[2].Rows[3]; len(r) != 2 || r[0] != "" || r[1] != "Also see math functions." {
		t.Errorf("rowspan row = %q", r)
	}
}

// A reference page's definition lists are its content: PostgreSQL's
// runtime-config-connection.html (testdata, from postgresql-doc-15) has
// its settings in DocBook variablelists under three sections, and
// Readability dropped the last two sections' lists, half the page.
func TestDefinitionListsKept(t *testing.T) {
	page, err := os.ReadFile("testdata/docbook_variablelist.html")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Process(page, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"listen_addresses", "authentication_timeout", "password_encryption", "ssl_crl_file", "ssl_prefer_server_ciphers"} {
		if !strings.Contains(d.Markdown, w) {
			t.Errorf("Markdown lacks the setting %q", w)
		}
	}
	if strings.Contains(d.Markdown, "Prev") && strings.Contains(d.Markdown, "20.2. File Locations") && strings.Index(d.Markdown, "20.2. File Locations") < strings.Index(d.Markdown, "listen_addresses") {
		t.Errorf("Markdown starts with the navigation header")
	}
}

func TestKeepBoilerplate(t *testing.T) {
	page, err := os.ReadFile("testdata/docs_nav.html")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Process(page, nil, Options{KeepBoilerplate: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"Pricing", "In this section", "Configuring the Widget Server", "All rights reserved"} {
		if !strings.Contains(d.Markdown, w) {
			t.Errorf("KeepBoilerplate Markdown lacks %q", w)
		}
	}
	if d.Parsed != nil {
		t.Errorf("Parsed = %+v, want nil without parse options", d.Parsed)
	}
}

func TestHash(t *testing.T) {
	if got, want := Hash(""), "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"; got != want {
		t.Errorf("Hash(\"\") = %q, want %q", got, want)
	}
	if got, want := Hash("abc"), "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Errorf("Hash(\"abc\") = %q, want %q", got, want)
	}
}

func TestParseOptionsAny(t *testing.T) {
	if (ParseOptions{}).Any() {
		t.Error("zero ParseOptions.Any() = true")
	}
	for _, p := range []ParseOptions{{Links: true}, {Media: true}, {Metadata: true}, {Tables: true}} {
		if !p.Any() {
			t.Errorf("%+v.Any() = false", p)
		}
	}
}

// TestProcessConcurrent runs Process from several goroutines (the shared
// Markdown converter must be safe; run with -race).
func TestProcessConcurrent(t *testing.T) {
	var pages [][]byte
	for _, tc := range goldenCases {
		p, err := os.ReadFile(filepath.Join("testdata", tc.name+".html"))
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, p)
	}
	u, _ := url.Parse("https://example.com/x")
	want := make([]string, len(pages))
	for i, p := range pages {
		d, err := Process(p, u, allParse)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = d.Markdown
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Go(func() {
			for i, p := range pages {
				d, err := Process(p, u, allParse)
				if err != nil || d.Markdown != want[i] {
					t.Errorf("page %d: concurrent result differs (err %v)", i, err)
				}
			}
		})
	}
	wg.Wait()
}

func ExampleProcess() {
	page := []byte(`<html><head><title>Hello</title></head><body>
<nav><a href="/">Home</a></nav>
<main><h1>Hello</h1><p>See <a href="docs/">the docs</a>.</p>
<pre class="language-go">fmt.Println("hi")</pre></main></body></html>`)
	u, _ := url.Parse("https://example.com/a/")
	d, _ := Process(page, u, Options{Parse: ParseOptions{Links: true}})
	fmt.Print(d.Markdown)
	fmt.Println(d.Parsed.Links[0].Href, d.Parsed.Links[0].Internal)
	// Output:
	// # Hello
	//
	// See [the docs](https://example.com/a/docs/).
	//
	// ```go
	// fmt.Println("hi")
	// ```
	// https://example.com/ true
}

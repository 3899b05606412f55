package content

import (
	"bytes"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	trafilatura "github.com/markusmobius/go-trafilatura"
	"golang.org/x/net/html"
)

// BenchmarkProcess runs the whole pipeline (parse, parse data, extraction,
// HTML, Markdown) over the fixtures.
func BenchmarkProcess(b *testing.B) {
	fixtures, _ := filepath.Glob("testdata/*.html")
	var pages [][]byte
	for _, p := range fixtures {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		pages = append(pages, data)
	}
	u, _ := url.Parse("https://example.com/docs/page.html")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := Process(pages[i%len(pages)], u, allParse); err != nil {
			b.Fatal(err)
		}
	}
}

// docsPages samples n pages of an installed Debian documentation package.
func docsPages(b *testing.B, root string, n int) [][]byte {
	var all []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(p) == ".html" {
			all = append(all, p)
		}
		return nil
	})
	if len(all) == 0 {
		b.Skipf("%s not installed", root)
	}
	var pages [][]byte
	for i := 0; i < n && i < len(all); i++ {
		data, err := os.ReadFile(all[i*len(all)/min(n, len(all))])
		if err != nil {
			b.Fatal(err)
		}
		pages = append(pages, data)
	}
	return pages
}

// BenchmarkProcessDocs runs Process (no parse data) over 100 pages of each
// installed Debian documentation package; ns/op is per page.
func BenchmarkProcessDocs(b *testing.B) {
	for _, c := range evalCorpora {
		b.Run(c.name, func(b *testing.B) {
			pages := docsPages(b, c.root, 100)
			u, _ := url.Parse("https://docs.example/" + c.name + "/page.html")
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := Process(pages[i%len(pages)], u, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkProcessPostgres runs Process over 100 PostgreSQL documentation
// pages (postgresql-doc-15); the sub-benchmarks time the extractors alone
// on the same pages, for comparison. ns/op is per page.
func BenchmarkProcessPostgres(b *testing.B) {
	pages := docsPages(b, "/usr/share/doc/postgresql-doc-15/html", 100)
	u, _ := url.Parse("https://www.postgresql.example/docs/15/page.html")
	b.Run("process", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := Process(pages[i%len(pages)], u, Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("process+parse", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := Process(pages[i%len(pages)], u, allParse); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, ex := range []struct {
		name string
		fn   extractor
	}{
		{"html.Parse only", func(*html.Node, *url.URL) (*html.Node, error) { return nil, nil }},
		{"readeck-readability", readabilityExtractor},
		{"trafilatura+fallback", trafilaturaExtractor(true, trafilatura.FavorRecall)},
	} {
		b.Run(ex.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				doc, err := html.Parse(bytes.NewReader(pages[i%len(pages)]))
				if err != nil {
					b.Fatal(err)
				}
				ex.fn(doc, u)
			}
		})
	}
}

package content

import (
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"
)

// FuzzProcess checks that no input makes Process panic or return invalid
// output. Seeds: testdata/fuzz/FuzzProcess plus the fixtures.
func FuzzProcess(f *testing.F) {
	fixtures, _ := filepath.Glob("testdata/*.html")
	for _, p := range fixtures {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "https://example.com/a/b.html")
	}
	f.Fuzz(func(t *testing.T, page []byte, rawURL string) {
		u, err := url.Parse(rawURL)
		if err != nil {
			u = nil
		}
		d, err := Process(page, u, allParse)
		if err != nil {
			return
		}
		if utf8.Valid(page) && !utf8.ValidString(d.Markdown) {
			t.Errorf("invalid UTF-8 Markdown from valid UTF-8 page")
		}
		_ = Hash(d.Markdown)
	})
}

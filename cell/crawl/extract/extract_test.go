package extract

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readFixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// decodeBlocks parses a basic or cosine output the way a client would.
func decodeBlocks(t *testing.T, out string) []block {
	t.Helper()
	var bs []block
	if err := json.Unmarshal([]byte(out), &bs); err != nil {
		t.Fatalf("output is not a JSON array of blocks: %v\n%s", err, out)
	}
	return bs
}

func TestNewBadParams(t *testing.T) {
	tests := []struct {
		name, typ, params, want string
	}{
		{"no type", "", `{}`, "extraction_config.type: is required"},
		{"unknown type", "regex", `{}`, `extraction_config.type: unknown type "regex"`},
		{"params not an object", "basic", `[1,2]`, "params: must be a JSON object"},
		{"params a string", "cosine", `"x"`, "params: must be a JSON object"},
		{"json_css without schema", "json_css", `{}`, "params.schema: is required"},
		{"llm without provider", "llm", `{}`, "params.provider: is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Config{}, tc.typ, json.RawMessage(tc.params))
			if err == nil {
				t.Fatal("New succeeded")
			}
			if !IsBadParams(err) {
				t.Errorf("IsBadParams(%v) = false", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestNewNames(t *testing.T) {
	for _, typ := range []string{"basic", "cosine"} {
		for _, params := range []string{"", "null", "{}", `{"unknown_option": true}`} {
			s, err := New(Config{}, typ, json.RawMessage(params))
			if err != nil {
				t.Fatalf("New(%q, %q): %v", typ, params, err)
			}
			if s.Name() != typ {
				t.Errorf("Name() = %q, want %q", s.Name(), typ)
			}
		}
	}
}

func TestBasic(t *testing.T) {
	tests := []struct {
		name string
		page Page
		want []string
	}{
		{
			name: "paragraphs and headings",
			page: Page{Markdown: "# Title\n\nFirst paragraph\nstill first.\n\n\n## Part\n### Sub\n\nSecond.\n\n- a\n- b\n"},
			want: []string{"# Title\n\nFirst paragraph\nstill first.", "## Part\n### Sub\n\nSecond.", "- a\n- b"},
		},
		{
			name: "fenced code keeps its blank lines",
			page: Page{Markdown: "Intro.\n\n```go\nfunc a() {}\n\nfunc b() {}\n```\n\nOutro."},
			want: []string{"Intro.", "```go\nfunc a() {}\n\nfunc b() {}\n```", "Outro."},
		},
		{
			name: "trailing heading stays",
			page: Page{Markdown: "Text.\r\n\r\n## End"},
			want: []string{"Text.", "## End"},
		},
		{name: "empty", page: Page{}, want: []string{}},
		{
			name: "markdown from html when empty",
			page: Page{URL: "http://127.0.0.1/a", HTML: "<html><body><main><h1>Hello</h1><p>One paragraph of text here.</p><p>Another one.</p></main></body></html>"},
			want: []string{"# Hello\n\nOne paragraph of text here.", "Another one."},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Config{}, "basic", nil)
			if err != nil {
				t.Fatal(err)
			}
			out, err := s.Extract(context.Background(), tc.page)
			if err != nil {
				t.Fatal(err)
			}
			bs := decodeBlocks(t, out)
			got := []string{}
			for i, b := range bs {
				if b.Index != i || b.Tags == nil || len(b.Tags) != 0 {
					t.Errorf("block %d: index %d, tags %#v", i, b.Index, b.Tags)
				}
				got = append(got, b.Content)
			}
			if strings.Join(got, "\x00") != strings.Join(tc.want, "\x00") {
				t.Errorf("blocks:\n%q\nwant:\n%q", got, tc.want)
			}
			if !strings.Contains(out, `"tags":[]`) && len(bs) > 0 {
				t.Errorf("tags must encode as []: %s", out)
			}
		})
	}
}

func TestBasicFixture(t *testing.T) {
	s, _ := New(Config{}, "basic", nil)
	out, err := s.Extract(context.Background(), Page{URL: "http://127.0.0.1/notes", HTML: readFixture(t, "article.html")})
	if err != nil {
		t.Fatal(err)
	}
	bs := decodeBlocks(t, out)
	if len(bs) != 10 {
		t.Fatalf("got %d blocks, want 10 (intro and nine paragraphs):\n%s", len(bs), out)
	}
	if !strings.HasPrefix(bs[4].Content, "## Under the night sky\n\nAfter dark") {
		t.Errorf("block 4 = %q", bs[4].Content)
	}
	if strings.Contains(out, "All rights reserved") {
		t.Error("footer boilerplate in the blocks")
	}
}

func ExampleNew() {
	s, err := New(Config{}, "json_css", json.RawMessage(`{"schema": {
		"name": "links", "baseSelector": "a",
		"fields": [{"name": "text", "type": "text"}, {"name": "href", "type": "attribute", "attribute": "href"}]}}`))
	if err != nil {
		panic(err)
	}
	out, _ := s.Extract(context.Background(), Page{HTML: `<p><a href="/a">First</a> and <a href="/b">second <b>link</b></a></p>`})
	os.Stdout.WriteString(out + "\n")
	// Output: [{"text":"First","href":"/a"},{"text":"second link","href":"/b"}]
}

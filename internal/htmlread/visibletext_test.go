package htmlread

import (
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// body parses a fragment and returns its <body>.
func body(t *testing.T, src string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader("<!DOCTYPE html><html><head><title>T</title><script>var h=1</script></head><body>" + src + "</body></html>"))
	if err != nil {
		t.Fatal(err)
	}
	return find(doc, "body")
}

// find is the first element named tag below n.
func find(n *html.Node, tag string) *html.Node {
	if n.Type == html.ElementNode && n.Data == tag {
		return n
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if f := find(c, tag); f != nil {
			return f
		}
	}
	return nil
}

func TestCollapse(t *testing.T) {
	for in, want := range map[string]string{
		"":                     "",
		"  a \t\n b  ":         "a b",
		"a\u00a0\u2003b":       "a b",
		"one":                  "one",
		" \n ":                 "",
		"x  y\r\nz":            "x y z",
		"caf\u00e9  \u00e0 la": "caf\u00e9 \u00e0 la",
	} {
		if got := Collapse(in); got != want {
			t.Errorf("Collapse(%q) = %q, want %q", in, got, want)
		}
		if got := strings.Join(strings.Fields(in), " "); got != Collapse(in) {
			t.Errorf("Collapse(%q) differs from Fields: %q", in, got)
		}
	}
}

func TestTextReaders(t *testing.T) {
	tests := []struct {
		name, src             string
		inner, field, visible string
	}{
		{"inline", `<p>a <b>b</b>  c</p>`, "a b c", "a b c", "a b c"},
		{"blocks", `<ul><li>a</li><li>b</li></ul><p>c</p>`, "abc", "a b c", "a\nb\nc"},
		{"br and cells", `<table><tr><td>x</td><td>y</td></tr></table>a<br>b`, "xyab", "x y a b", "x\ny\na\nb"},
		{"code is not text", `<p>a</p><script>var x</script><style>p{}</style><template><p>t</p></template><noscript>n</noscript>`, "a", "a", "a"},
		{"hidden only unseen for VisibleText", `<p>a</p><p hidden>h</p><span aria-hidden="true">i</span><svg><text>s</text></svg>`, "ahis", "a h is", "a"},
		{"options", `<select><option>one</option><option>two</option></select>`, "onetwo", "one two", "one\ntwo"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := body(t, tc.src)
			if got := InnerText(b); got != tc.inner {
				t.Errorf("InnerText = %q, want %q", got, tc.inner)
			}
			if got := FieldText(b); got != tc.field {
				t.Errorf("FieldText = %q, want %q", got, tc.field)
			}
			if got := VisibleText(b); got != tc.visible {
				t.Errorf("VisibleText = %q, want %q", got, tc.visible)
			}
		})
	}
}

// The head: InnerText and VisibleText leave it out, FieldText reads a
// <title> (a json_css field may select it).
func TestTextOfTheHead(t *testing.T) {
	doc, err := html.Parse(strings.NewReader(`<html><head><title>Page  title</title></head><body><p>x</p></body></html>`))
	if err != nil {
		t.Fatal(err)
	}
	if got := InnerText(doc); got != "x" {
		t.Errorf("InnerText = %q", got)
	}
	if got := VisibleText(doc); got != "x" {
		t.Errorf("VisibleText = %q", got)
	}
	title := find(doc, "title")
	if got := FieldText(title); got != "Page title" {
		t.Errorf("FieldText(title) = %q", got)
	}
	if !NotText(title) {
		t.Error("NotText(title) = false")
	}
}

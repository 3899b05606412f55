package textscore

import (
	"strings"
	"testing"
)

func TestTokenF1(t *testing.T) {
	for _, c := range []struct {
		got, want string
		f1        float64
	}{
		{"The Copper Kettle", "the copper kettle", 1},
		{"copper kettle", "the copper kettle", 0.8},
		{"", "x", 0},
		{"tea", "coffee", 0},
	} {
		if f := TokenF1(c.got, c.want); f < c.f1-1e-9 || f > c.f1+1e-9 {
			t.Errorf("TokenF1(%q, %q) = %v, want %v", c.got, c.want, f, c.f1)
		}
	}
	if n := NormName("  Meg  JAMES, "); n != "meg james" {
		t.Errorf("NormName = %q", n)
	}
}

func TestStripTagsKeepsTheEncoding(t *testing.T) {
	page := `<html><head><meta charset="iso-8859-1"><meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1"><meta name="author" content="Jane Doe"><meta property="og:title" content="T"><script type="application/ld+json">{"@type":"Article"}</script></head><body><p>x</p></body></html>`
	got := StripTags(page)
	for _, want := range []string{`charset="iso-8859-1"`, `http-equiv="Content-Type"`, "<p>x</p>"} {
		if !strings.Contains(got, want) {
			t.Errorf("StripTags lost %s: %s", want, got)
		}
	}
	for _, gone := range []string{"Jane Doe", "og:title", "ld+json"} {
		if strings.Contains(got, gone) {
			t.Errorf("StripTags kept %s: %s", gone, got)
		}
	}
}

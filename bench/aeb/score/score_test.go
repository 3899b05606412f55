package score

import (
	"math"
	"slices"
	"testing"
)

// The expected values were printed by the benchmark's evaluate.py
// (string_shingle_matching, metrics_from_tp_fp_fns, _tokenize) on the same
// strings.
func TestMatchAgreesWithEvaluatePy(t *testing.T) {
	cases := []struct {
		truth, pred string
		want        Score
	}{
		{"The quick brown fox jumps over the lazy dog", "The quick brown fox jumps over a lazy dog. Share this!", Score{3.0 / 11, 5.0 / 11, 3.0 / 11}},
		{"Zürich naïve café_au_lait 東京 ١٢٣", "zürich naïve café_au_lait 東京", Score{0, 1.0 / 3, 2.0 / 3}},
		{"one two", "one two", Score{1, 0, 0}},
		{"", "something", Score{0, 1, 0}},
		{"a b c d e", "", Score{0, 0, 1}},
	}
	var ss []Score
	for _, c := range cases {
		got := Match(c.truth, c.pred)
		if !near(got.tp, c.want.tp) || !near(got.fp, c.want.fp) || !near(got.fn, c.want.fn) {
			t.Errorf("Match(%q, %q) = %+v; want %+v", c.truth, c.pred, got, c.want)
		}
		ss = append(ss, got)
	}
	f1, p, r := Metrics(ss)
	if !near(f1, 0.358695652173913) || !near(p, 0.34375) || !near(r, 0.375) {
		t.Errorf("Metrics = %v, %v, %v; want 0.3587, 0.34375, 0.375", f1, p, r)
	}
	if got, want := Tokens("Zürich naïve café_au_lait 東京 ١٢٣"), []string{"Zürich", "naïve", "café_au_lait", "東京", "١٢٣"}; !slices.Equal(got, want) {
		t.Errorf("Tokens = %q; want %q", got, want)
	}
}

func TestMarkdownText(t *testing.T) {
	md := "# Title\n\nSee [the docs](https://example.com/a_b) and ![logo](x.png \"Logo\"), \\*not\\* AT&amp;T.\n\n| a | b |\n|---|---|\n| c | d |\n\n```go\nfmt.Println(1)\n```\n"
	got := Tokens(MarkdownText(md))
	want := []string{"Title", "See", "the", "docs", "and", "not", "AT", "T", "a", "b", "c", "d", "fmt", "Println", "1"}
	if !slices.Equal(got, want) {
		t.Errorf("tokens of MarkdownText = %q; want %q", got, want)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

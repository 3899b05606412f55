package search

import (
	"net/url"
	"testing"

	"github.com/trawlhq/trawl/internal/searchapi"
)

func TestMergeByScoreAcrossCells(t *testing.T) {
	a := &searchapi.Local{Results: []searchapi.Hit{{URL: "a1", Score: 3, Sim: 0xff}, {URL: "a2", Score: 1, Sim: 0xf0f0}}}
	b := &searchapi.Local{Results: []searchapi.Hit{{URL: "b1", Score: 2, Sim: 0xff00ff00}, {URL: "b-copy-of-a1", Score: 2.5, Sim: 0xfe}}}
	got := merge([]*searchapi.Local{a, b}, 10)
	var urls []string
	for _, h := range got {
		urls = append(urls, h.URL)
	}
	want := []string{"a1", "b1", "a2"} // b's copy of a1 collapsed into it
	if len(urls) != len(want) {
		t.Fatalf("%q, want %q", urls, want)
	}
	for i := range want {
		if urls[i] != want[i] {
			t.Fatalf("%q, want %q", urls, want)
		}
	}
	if got := merge([]*searchapi.Local{a, b}, 1); len(got) != 1 {
		t.Errorf("cut to n: %d", len(got))
	}
}

// Two cells index each page (cell/pages.go): a URL both answer is one
// result, at its better score, though its copies differ (one cell has a
// later version), and its passage is given once.
func TestMergeOneResultAURL(t *testing.T) {
	a := &searchapi.Local{Results: []searchapi.Hit{{URL: "p", Score: 1, Sim: 0xff}, {URL: "q", Score: 2, Sim: 0xff00ff00ff00}},
		Passages: []searchapi.Passage{{URL: "p", Text: "the answer", Score: 0.5}}}
	b := &searchapi.Local{Results: []searchapi.Hit{{URL: "p", Score: 3, Sim: 0xffff0000ffff}},
		Passages: []searchapi.Passage{{URL: "p", Text: "the answer", Score: 0.4}}}
	got := merge([]*searchapi.Local{a, b}, 10)
	if len(got) != 2 || got[0].URL != "p" || got[0].Score != 3 || got[1].URL != "q" {
		t.Fatalf("merged %+v, want p (score 3) then q", got)
	}
	if ps := passages([]*searchapi.Local{a, b}, got); len(ps) != 1 {
		t.Errorf("passages %+v, want the one", ps)
	}
}

func TestBestCorrectionIsTheMostAttested(t *testing.T) {
	ls := []*searchapi.Local{
		{Correction: &searchapi.Correction{Query: "cat", Freq: 3}},
		{},
		{Correction: &searchapi.Correction{Query: "car", Freq: 9}},
	}
	if c := bestCorrection(ls); c == nil || c.Query != "car" {
		t.Errorf("%+v", c)
	}
	if c := bestCorrection([]*searchapi.Local{{}}); c != nil {
		t.Errorf("%+v", c)
	}
}

func TestFlag(t *testing.T) {
	for _, c := range []struct {
		v    string
		want bool
		ok   bool
	}{{"", true, true}, {"0", false, true}, {"1", true, true}, {"yes", false, false}} {
		got, err := flag(url.Values{"deep": {c.v}}, "deep", true)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("%q: %v %v", c.v, got, err)
		}
	}
}

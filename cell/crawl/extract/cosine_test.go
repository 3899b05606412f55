package extract

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func runCosine(t *testing.T, params string, p Page) []block {
	t.Helper()
	s, err := New(Config{}, "cosine", json.RawMessage(params))
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Extract(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return decodeBlocks(t, out)
}

func articlePage(t *testing.T) Page {
	return Page{URL: "http://127.0.0.1/notes", HTML: readFixture(t, "article.html")}
}

// topic names the subject of a paragraph of testdata/article.html.
func topic(s string) string {
	switch {
	case strings.Contains(s, "risotto") || strings.Contains(s, "sauce") || strings.Contains(s, "apple cake"):
		return "cooking"
	case strings.Contains(s, "Jupiter") || strings.Contains(s, "Orion") || strings.Contains(s, "Saturn"):
		return "astronomy"
	case strings.Contains(s, "match") || strings.Contains(s, "coach"):
		return "football"
	}
	return "other"
}

func TestCosineFilter(t *testing.T) {
	tests := []struct {
		name      string
		params    string
		wantFirst []string // paragraphs expected in the first block, by a word of each
		wantN     int
	}{
		{
			// Default max_dist: every paragraph its own cluster, the
			// three astronomy ones ranked by similarity.
			name:      "defaults",
			params:    `{"semantic_filter": "planets and stars"}`,
			wantFirst: []string{"Saturn"},
			wantN:     3,
		},
		{
			name:      "one astronomy cluster",
			params:    `{"semantic_filter": "planets and stars", "max_dist": 0.97}`,
			wantFirst: []string{"Jupiter", "Orion", "Saturn"},
			wantN:     1,
		},
		{
			name:      "ward linkage",
			params:    `{"semantic_filter": "Planets, stars!", "max_dist": 0.97, "linkage_method": "ward"}`,
			wantFirst: []string{"Jupiter", "Saturn"},
			wantN:     2,
		},
		{
			name:      "top_k",
			params:    `{"semantic_filter": "planets and stars", "top_k": 2}`,
			wantFirst: []string{"Saturn"},
			wantN:     2,
		},
		{
			name:      "another topic",
			params:    `{"semantic_filter": "garlic sauce with basil", "max_dist": 0.97, "word_count_threshold": 5}`,
			wantFirst: []string{"sauce"},
			wantN:     1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bs := runCosine(t, tc.params, articlePage(t))
			if len(bs) != tc.wantN {
				t.Fatalf("got %d blocks, want %d: %+v", len(bs), tc.wantN, bs)
			}
			for i, b := range bs {
				if b.Index != i {
					t.Errorf("block %d has index %d", i, b.Index)
				}
				for _, para := range strings.Split(b.Content, "\n\n") {
					if strings.HasPrefix(para, "#") {
						continue
					}
					if topic(para) != topic(tc.wantFirst[0]) {
						t.Errorf("block %d holds an off-topic paragraph: %.60q", i, para)
					}
				}
			}
			first := bs[0].Content
			for _, w := range tc.wantFirst {
				if !strings.Contains(first, w) {
					t.Errorf("first block lacks the paragraph with %q: %q", w, first)
				}
			}
			if got := strings.Count(first, "\n\n") + 1 - strings.Count(first, "## "); got != len(tc.wantFirst) {
				t.Errorf("first block has %d paragraphs, want %d: %q", got, len(tc.wantFirst), first)
			}
		})
	}
}

func TestCosineAstronomyTags(t *testing.T) {
	bs := runCosine(t, `{"semantic_filter": "planets and stars", "max_dist": 0.97}`, articlePage(t))
	if len(bs) == 0 {
		t.Fatal("no blocks")
	}
	for _, w := range []string{"planets", "stars"} {
		if !slices.Contains(bs[0].Tags, w) {
			t.Errorf("tags %q lack %q", bs[0].Tags, w)
		}
	}
	if len(bs[0].Tags) != 5 {
		t.Errorf("got %d tags, want 5", len(bs[0].Tags))
	}
	// Paragraphs keep page order inside a cluster.
	c := bs[0].Content
	if !(strings.Index(c, "Jupiter") < strings.Index(c, "Orion") && strings.Index(c, "Orion") < strings.Index(c, "Saturn")) {
		t.Errorf("paragraphs out of page order: %q", c)
	}
}

func TestCosineWithoutFilter(t *testing.T) {
	params := `{"max_dist": 0.97, "top_k": 10}`
	bs := runCosine(t, params, articlePage(t))
	if len(bs) < 3 {
		t.Fatalf("got %d clusters, want at least 3", len(bs))
	}
	seen := map[string]int{}
	for _, b := range bs {
		topics := map[string]bool{}
		for _, para := range strings.Split(b.Content, "\n\n") {
			if !strings.HasPrefix(para, "#") && topic(para) != "other" {
				topics[topic(para)] = true
			}
		}
		for tp := range topics {
			seen[tp]++
		}
		if len(topics) > 1 {
			t.Errorf("cluster mixes topics %v: %q", topics, b.Content)
		}
	}
	if len(seen) != 3 {
		t.Errorf("topics seen: %v", seen)
	}
	// Ranked by word count.
	for i := 1; i < len(bs); i++ {
		if wordCount(plainText(bs[i].Content)) > wordCount(plainText(bs[i-1].Content)) {
			t.Errorf("cluster %d is longer than cluster %d", i, i-1)
		}
	}
	// Deterministic.
	for range 5 {
		again := runCosine(t, params, articlePage(t))
		if fmt.Sprint(again) != fmt.Sprint(bs) {
			t.Fatalf("output changed between runs:\n%v\n%v", bs, again)
		}
	}
}

func TestCosineEmpty(t *testing.T) {
	tests := []struct {
		name, params string
		page         Page
	}{
		{"filter matches nothing", `{"semantic_filter": "quantum chromodynamics"}`, articlePage(t)},
		{"stop words only", `{"semantic_filter": "the and of"}`, articlePage(t)},
		{"threshold above every paragraph", `{"word_count_threshold": 1000}`, articlePage(t)},
		{"similarity threshold too high", `{"semantic_filter": "planets and stars", "sim_threshold": 0.99}`, articlePage(t)},
		{"empty page", `{}`, Page{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := New(Config{}, "cosine", json.RawMessage(tc.params))
			out, err := s.Extract(context.Background(), tc.page)
			if err != nil {
				t.Fatal(err)
			}
			if out != "[]" {
				t.Errorf("got %s, want []", out)
			}
		})
	}
}

func TestCosineBadParams(t *testing.T) {
	tests := []struct{ params, want string }{
		{`{"semantic_filter": 3}`, "params.semantic_filter: must be a string"},
		{`{"word_count_threshold": "10"}`, "params.word_count_threshold: must be an integer"},
		{`{"word_count_threshold": 2.5}`, "params.word_count_threshold: must be an integer"},
		{`{"word_count_threshold": -1}`, "params.word_count_threshold: must be 0 or more"},
		{`{"max_dist": "far"}`, "params.max_dist: must be a number"},
		{`{"max_dist": -0.1}`, "params.max_dist: must be 0 or more"},
		{`{"top_k": 0}`, "params.top_k: must be 1 or more"},
		{`{"top_k": 1e12}`, "params.top_k: must be an integer"},
		{`{"linkage_method": "centroid"}`, `params.linkage_method: unknown linkage "centroid"`},
		{`{"sim_threshold": 2}`, "params.sim_threshold: must be between -1 and 1"},
	}
	for _, tc := range tests {
		t.Run(tc.params, func(t *testing.T) {
			_, err := New(Config{}, "cosine", json.RawMessage(tc.params))
			if err == nil || !IsBadParams(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want a bad-params error containing %q", err, tc.want)
			}
		})
	}
	// Integral floats from Python clients are integers.
	if _, err := New(Config{}, "cosine", json.RawMessage(`{"word_count_threshold": 10.0, "top_k": 3.0, "linkage_method": "ward"}`)); err != nil {
		t.Errorf("integral floats: %v", err)
	}
}

// syntheticPage has n paragraphs drawn from four vocabularies.
func syntheticPage(n int, seed uint64) Page {
	vocab := [][]string{
		strings.Fields("orbit comet planet star galaxy nebula telescope moon eclipse asteroid meteor"),
		strings.Fields("flour butter oven garlic basil simmer sauce bake roast knead dough"),
		strings.Fields("goal striker keeper referee league match corner penalty winger whistle"),
		strings.Fields("server kernel packet socket thread compiler cache latency router"),
	}
	r := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	for i := range n {
		v := vocab[i%len(vocab)]
		for range 12 + r.IntN(10) {
			b.WriteString(v[r.IntN(len(v))] + " ")
		}
		b.WriteString("\n\n")
	}
	return Page{Markdown: b.String()}
}

func TestCosineBlockCap(t *testing.T) {
	s, err := New(Config{}, "cosine", json.RawMessage(`{"semantic_filter": "planet star", "top_k": 1000, "max_dist": 0.9}`))
	if err != nil {
		t.Fatal(err)
	}
	cs := s.(cosineStrategy)
	cs.maxBlocks = 40
	out, err := cs.Extract(context.Background(), syntheticPage(400, 7))
	if err != nil {
		t.Fatal(err)
	}
	bs := decodeBlocks(t, out)
	total := 0
	for _, b := range bs {
		for _, para := range strings.Split(b.Content, "\n\n") {
			total++
			if !(strings.Contains(para, "planet") || strings.Contains(para, "star")) {
				t.Errorf("paragraph without a filter word: %q", para)
			}
		}
	}
	if total != 40 {
		t.Errorf("clustered %d paragraphs, want the cap of 40", total)
	}
}

func TestCosineCancelled(t *testing.T) {
	s, _ := New(Config{}, "cosine", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Extract(ctx, syntheticPage(50, 1)); err == nil {
		t.Error("Extract ignored a cancelled context")
	}
}

func TestStem(t *testing.T) {
	for w, want := range map[string]string{
		"planets": "planet", "planet": "planet", "stars": "star", "galaxies": "galaxy", "galaxy": "galaxy",
		"matches": "match", "boxes": "box", "classes": "class", "recipes": "recipe", "news": "new",
		"bus": "bus", "glass": "glass", "analysis": "analysis", "shoes": "shoe", "as": "as",
	} {
		if got := stem(w); got != want {
			t.Errorf("stem(%q) = %q, want %q", w, got, want)
		}
	}
}

func BenchmarkCosineMaxBlocks(b *testing.B) {
	p := syntheticPage(MaxCosineBlocks, 3)
	s, _ := New(Config{}, "cosine", json.RawMessage(`{"max_dist": 0.8}`))
	for b.Loop() {
		if _, err := s.Extract(context.Background(), p); err != nil {
			b.Fatal(err)
		}
	}
}

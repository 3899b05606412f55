package search

import (
	"sort"
	"strings"
)

// Passage is the best passage of one result, for answers.
type Passage struct {
	Title string  `json:"title"`
	URL   string  `json:"url"`
	Text  string  `json:"text"`
	Score float64 `json:"score"` // 0 to 1: how well it holds the query
	Rank  int     `json:"rank"`  // the result's place, from 0
}

// Passages are the best passages of the results hits, best first.
func Passages(hits []Hit) []Passage {
	var out []Passage
	for i, h := range hits {
		if h.passage.text == "" {
			continue
		}
		out = append(out, Passage{Title: h.Title, URL: h.URL, Text: h.passage.text, Score: h.passage.score, Rank: i})
	}
	SortPassages(out)
	return out
}

// SortPassages orders passages best first: by score, then by their
// result's place.
func SortPassages(ps []Passage) {
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].Score != ps[j].Score {
			return ps[i].Score > ps[j].Score
		}
		return ps[i].Rank < ps[j].Rank
	})
}

// Answer is a direct answer (docs/spec/hosted-api.md §2.4).
type Answer struct {
	// Kind is "generated" (written by the operator's model from the
	// passages) or "quoted" (the best passage, quoted as it is).
	Kind    string `json:"kind"`
	Text    string `json:"text"`
	Sources []Link `json:"sources"`
}

// Confident is the passage score an answer quoted without a model needs:
// every word of the question that carries meaning, close together.
const Confident = 0.85

// Quote is the answer made of the best passage, quoted and attributed,
// when it answers confidently (a passage of one of the top three
// results holding every meaningful word of the question close
// together); nil otherwise.
func Quote(ps []Passage) *Answer {
	for _, p := range ps {
		if p.Score < Confident {
			break
		}
		if p.Rank > 2 {
			continue
		}
		text := strings.TrimSpace(p.Text)
		return &Answer{Kind: "quoted", Text: "“" + text + "” — " + p.Title + " (" + p.URL + ")",
			Sources: []Link{{Title: p.Title, URL: p.URL}}}
	}
	return nil
}

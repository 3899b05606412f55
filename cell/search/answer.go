package search

import "github.com/trawlhq/trawl/internal/searchapi"

// Passages are the best passages of the results hits for the question
// q, best first.
func Passages(q string, hits []Hit) []searchapi.Passage {
	var out []searchapi.Passage
	for i, h := range hits {
		if h.passage.text == "" {
			continue
		}
		out = append(out, searchapi.Passage{Title: h.Title, URL: h.URL, Text: h.passage.text, Score: h.passage.score, Rank: i})
	}
	searchapi.SortPassages(out)
	return out
}

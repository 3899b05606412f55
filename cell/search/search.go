package search

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/blevesearch/bleve/v2"

	"github.com/trawlhq/trawl/internal/searchapi"
)

// ErrQuery is returned for an empty query.
var ErrQuery = errors.New("search: empty query")

// Hit is one ranked page of a cell's answer, with the indexed page and
// its best passage (for the rich block and answers).
type Hit struct {
	searchapi.Hit
	doc     *Doc
	passage passage
}

// Doc is the indexed page of h (for the rich block and answers).
func (h *Hit) Doc() *Doc { return h.doc }

// Results is a cell's answer to a query.
type Results struct {
	Hits []Hit `json:"results"`
	// Total is how many pages matched before collapsing and cutting.
	Total uint64 `json:"total"`
}

// Search ranks the pages that match q and returns the best n, with
// near-duplicates collapsed and a snippet each.
func (ix *Index) Search(ctx context.Context, q string, n int) (*Results, error) {
	q = strings.TrimSpace(q)
	if q == "" {
		return nil, ErrQuery
	}
	if n <= 0 {
		n = 10
	}
	b := ix.boosts
	// Candidates: more than asked, for collapsing and the second stage.
	cand := max(2*n, b.Candidates)
	req := bleve.NewSearchRequestOptions(firstStage(q, b), cand, 0, false)
	req.Fields = rankFields
	res, err := ix.b.SearchInContext(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	var defined map[string]bool
	if keys := defKeys(q); b.Defines > 0 && len(keys) > 0 {
		if defined, err = ix.definedBy(ctx, keys, 1000); err != nil {
			return nil, fmt.Errorf("search: %w", err)
		}
	}
	terms := searchapi.QueryTerms(q)
	hits := ix.secondStage(q, terms, b, res.Hits, defined)
	hits = searchapi.Collapse(hits)
	if len(hits) > n {
		hits = hits[:n]
	}
	addSnippets(hits, terms)
	return &Results{Hits: hits, Total: res.Total}, nil
}

// addSnippets gives each hit its best passage with the query's words
// marked, or the first words of its description and body when no
// passage matched.
func addSnippets(hits []Hit, terms []searchapi.Term) {
	for i := range hits {
		hits[i].Snippet = hits[i].passage.marked(terms)
		if hits[i].Snippet == "" {
			hits[i].Snippet = firstWords(hits[i].doc.Description+" "+hits[i].doc.Body, 30)
		}
	}
}

// rankFields are the stored fields a query's candidates are read with
// (the second stage and the hits); restFields the others, read for the
// hits the rich block looks at (complete).
var (
	rankFields = []string{"url", "title", "body", "type", "desc", "sim", "date"}
	restFields = []string{"url", "headings", "anchors", "lang", "jsonld"}
)

// complete reads the stored fields of docs that a query left out
// (restFields): their headings, anchor text, language and JSON-LD.
func (ix *Index) complete(ctx context.Context, docs []*Doc) error {
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.URL
	}
	hits, err := ix.byID(ctx, ids, restFields)
	if err != nil {
		return err
	}
	byURL := make(map[string]*Doc, len(hits))
	for _, h := range hits {
		byURL[h.ID] = docOf(h.Fields)
	}
	for _, d := range docs {
		if r := byURL[d.URL]; r != nil {
			d.Headings, d.Anchors, d.Lang, d.JSONLD = r.Headings, r.Anchors, r.Lang, r.JSONLD
		}
	}
	return nil
}

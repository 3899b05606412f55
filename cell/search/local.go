package search

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/trawlhq/trawl/internal/httpjson"
)

// MaxQuery is the longest query, in characters (docs/spec/hosted-api.md §8).
const MaxQuery = 512

// LocalPath is the cell route the gate asks each live cell of its region
// (gate/search merges the answers).
const LocalPath = "/search/local"

// Local is a cell's answer to the gate.
type Local struct {
	Results []Hit  `json:"results"`
	Total   uint64 `json:"total"`
	// Correction is this cell's spelling correction of the query (spell=1).
	Correction *Correction `json:"correction,omitempty"`
	// Rich holds what this cell's own top pages give the rich block
	// (rich=1): entity, follow-up questions, related queries.
	Rich *Rich `json:"rich,omitempty"`
	// Passages are the best passages of its results (passages=1), for
	// answers.
	Passages []Passage `json:"passages,omitempty"`
}

// Options of a local search.
type Options struct {
	N        int
	Rich     bool
	Spell    bool
	Passages bool
}

// CheckQuery refuses an empty query or one over MaxQuery characters.
func CheckQuery(q string) error {
	switch {
	case q == "":
		return errors.New("q is required")
	case utf8.RuneCountInString(q) > MaxQuery:
		return errors.New("q is longer than 512 characters")
	}
	return nil
}

// Local answers a query for the gate.
func (ix *Index) Local(ctx context.Context, q string, o Options) (*Local, error) {
	res, err := ix.Search(ctx, q, o.N)
	if err != nil {
		return nil, err
	}
	out := &Local{Results: res.Hits, Total: res.Total}
	if o.Spell {
		if out.Correction, err = ix.Correct(ctx, q); err != nil {
			return nil, err
		}
	}
	if o.Rich && len(res.Hits) > 0 {
		docs := make([]*Doc, 0, 5)
		for i := range res.Hits {
			if i < 5 {
				docs = append(docs, res.Hits[i].doc)
			}
		}
		if err := ix.complete(ctx, docs); err != nil {
			return nil, err
		}
		r := &Rich{Entity: EntityOf(res.Hits[0].doc, q), FollowUpQuestions: FollowUps(docs, q, 5), RelatedQueries: Related(docs, q, 5)}
		out.Rich = r
	}
	if o.Passages || o.Rich {
		out.Passages = Passages(res.Hits)
		if len(out.Passages) > 5 {
			out.Passages = out.Passages[:5]
		}
	}
	if out.Results == nil {
		out.Results = []Hit{}
	}
	return out, nil
}

// ServeLocal is the cell's GET /search/local: q, n (1 to 50, default 10),
// rich, spell, passages (0 or 1).
func (ix *Index) ServeLocal(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q := v.Get("q")
	if err := CheckQuery(q); err != nil {
		httpjson.Error(w, http.StatusBadRequest, "bad_input", err.Error())
		return
	}
	o := Options{N: 10, Rich: v.Get("rich") == "1", Spell: v.Get("spell") == "1", Passages: v.Get("passages") == "1"}
	if s := v.Get("n"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 50 {
			httpjson.Error(w, http.StatusBadRequest, "bad_input", "n must be 1 to 50")
			return
		}
		o.N = n
	}
	res, err := ix.Local(r.Context(), q, o)
	if errors.Is(err, ErrQuery) {
		httpjson.Error(w, http.StatusBadRequest, "bad_input", "q is required")
		return
	}
	if err != nil {
		httpjson.Error(w, http.StatusInternalServerError, "internal", "the search failed")
		return
	}
	httpjson.Write(w, http.StatusOK, res)
}

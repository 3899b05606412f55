package search

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/searchapi"
)

// Local answers a query for the gate.
func (ix *Index) Local(ctx context.Context, q string, o searchapi.Options) (*searchapi.Local, error) {
	res, err := ix.Search(ctx, q, o.N)
	if err != nil {
		return nil, err
	}
	out := &searchapi.Local{Results: make([]searchapi.Hit, len(res.Hits)), Total: res.Total}
	for i := range res.Hits {
		out.Results[i] = res.Hits[i].Hit
	}
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
		r := &searchapi.Rich{Entity: EntityOf(res.Hits[0].doc, q), FollowUpQuestions: FollowUps(docs, q, 5), RelatedQueries: Related(docs, q, 5)}
		out.Rich = r
	}
	if o.Passages || o.Rich {
		out.Passages = Passages(q, res.Hits)
		if len(out.Passages) > 5 {
			out.Passages = out.Passages[:5]
		}
	}
	return out, nil
}

// ServeLocal is the cell's GET /search/local: q, n (1 to 50, default 10),
// rich, spell, passages (0 or 1).
func (ix *Index) ServeLocal(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q := v.Get("q")
	if err := searchapi.CheckQuery(q); err != nil {
		httpjson.Error(w, http.StatusBadRequest, "bad_input", err.Error())
		return
	}
	o := searchapi.Options{N: 10, Rich: v.Get("rich") == "1", Spell: v.Get("spell") == "1", Passages: v.Get("passages") == "1"}
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

package search

import (
	"context"
	"strings"

	"github.com/blevesearch/bleve/v2"
	bsearch "github.com/blevesearch/bleve/v2/search"
)

// recountWords counts the words of every page indexed into the (empty)
// dictionary.
func (ix *Index) recountWords() error {
	err := scanAll(ix.b, []string{"title", "headings", "body"}, func(hits bsearch.DocumentMatchCollection) error {
		docs := make([]*Doc, 0, len(hits))
		for _, h := range hits {
			d := docOf(h.Fields)
			d.words = distinctWords(d.Title, strings.Join(d.Headings, "\n"), d.Body)
			docs = append(docs, d)
		}
		return ix.words.add(docs, ix.now())
	})
	if err != nil {
		return err
	}
	return ix.words.flush()
}

// scanAll calls each with every document of b, a page of hits at a time,
// in the order of their ids, with the stored fields named.
func scanAll(b bleve.Index, fields []string, each func(bsearch.DocumentMatchCollection) error) error {
	const page = 1000
	var after []string
	for {
		req := bleve.NewSearchRequestOptions(bleve.NewMatchAllQuery(), page, 0, false)
		req.Fields = fields
		req.SortBy([]string{"_id"})
		if after != nil {
			req.SetSearchAfter(after)
		}
		res, err := b.Search(req)
		if err != nil {
			return err
		}
		if err := each(res.Hits); err != nil {
			return err
		}
		if len(res.Hits) < page {
			return nil
		}
		after = []string{res.Hits[len(res.Hits)-1].ID}
	}
}

// loadStale reads the pages waiting for their anchor text that Close
// wrote down; after a close that did not happen (a crash) it finds them
// by comparing each page's indexed anchor text with the anchor text kept.
func (ix *Index) loadStale() error {
	raw, err := ix.b.GetInternal([]byte(staleKey))
	if err != nil {
		return err
	}
	if err := ix.b.DeleteInternal([]byte(staleKey)); err != nil {
		return err
	}
	if raw != nil {
		for u := range strings.SplitSeq(string(raw), "\n") {
			if u != "" {
				ix.stale[u] = true
			}
		}
		return nil
	}
	if ix.Count() == 0 {
		return nil
	}
	return ix.scanStale()
}

// scanStale marks stale every page whose indexed anchor text has fewer
// texts than the anchor text kept for it.
func (ix *Index) scanStale() error {
	return scanAll(ix.b, []string{"anchors"}, func(hits bsearch.DocumentMatchCollection) error {
		for _, h := range hits {
			kept, err := ix.AnchorText(h.ID)
			if err != nil {
				return err
			}
			have, _ := h.Fields["anchors"].(string)
			n := 0
			if have != "" {
				n = strings.Count(have, "\n") + 1
			}
			if len(kept) > n {
				ix.stale[h.ID] = true
			}
		}
		return nil
	})
}

// Stale is how many indexed pages wait for the anchor text that other
// pages' links gave them since (RefreshAnchors).
func (ix *Index) Stale() int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return len(ix.stale)
}

// RefreshAnchors indexes again, with the anchor text kept for them, up to
// max of the pages whose anchor text grew since they were indexed (every
// one for max <= 0), and returns how many it indexed.
func (ix *Index) RefreshAnchors(max int) (int, error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if len(ix.stale) == 0 {
		return 0, nil
	}
	// The pages are read back from the index: every batch prepared
	// before is committed first (none starts meanwhile: mu is held).
	ix.inflight.drain()
	urls := make([]string, 0, len(ix.stale))
	for u := range ix.stale {
		if max > 0 && len(urls) == max {
			break
		}
		urls = append(urls, u)
	}
	olds, err := ix.loadAll(urls)
	if err != nil {
		return 0, err
	}
	batch := ix.b.NewBatch()
	for _, old := range olds {
		if old.Anchors, err = ix.AnchorText(old.URL); err != nil {
			return 0, err
		}
		if err := batch.Index(old.URL, old.fields()); err != nil {
			return 0, err
		}
	}
	if err := ix.commit(batch); err != nil {
		return 0, err
	}
	for _, u := range urls {
		delete(ix.stale, u) // (one no longer indexed: nothing to do)
	}
	return len(olds), nil
}

// UpdateRanks computes the link-authority prior now (it is otherwise
// computed in the background at most every RankEvery).
func (ix *Index) UpdateRanks() { ix.graph.compute() }

// AnchorText is the text of the links to u that the index has seen.
func (ix *Index) AnchorText(u string) ([]string, error) { return ix.anchors.get(u) }

// loadAll reads indexed pages back from their stored fields (those of ids
// that are indexed).
func (ix *Index) loadAll(ids []string) ([]*Doc, error) {
	hits, err := ix.byID(context.Background(), ids, storedFields)
	if err != nil {
		return nil, err
	}
	out := make([]*Doc, 0, len(hits))
	for _, h := range hits {
		out = append(out, docOf(h.Fields))
	}
	return out, nil
}

package search

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/blevesearch/bleve/v2"

	"github.com/trawlhq/trawl/internal/store"
)

// Watermark is the latest fetch time of the pages indexed (and written:
// it is written with their batch); zero for an empty index.
func (ix *Index) Watermark() time.Time {
	raw, err := ix.b.GetInternal([]byte(watermarkKey))
	if err != nil || raw == nil {
		return time.Time{}
	}
	t, _ := time.Parse(time.RFC3339Nano, string(raw))
	return t
}

func latestFetch(docs []*Doc) time.Time {
	var w time.Time
	for _, d := range docs {
		if d.Fetched.After(w) {
			w = d.Fetched
		}
	}
	return w
}

// Add indexes docs (a page indexed again replaces its older version). The
// text of their links is kept as the anchor text of the pages they point
// to: a page of this batch, or one not indexed yet, is indexed with it; a
// page indexed already gets it at the next RefreshAnchors (indexing it
// again for each page that links to it would index a site's pages many
// times over while it is crawled).
func (ix *Index) Add(docs ...*Doc) error {
	b, err := ix.prepare(docs)
	if err != nil {
		return err
	}
	return b.commit()
}

// preparedBatch is a batch of Add between its two parts: prepare, under mu
// and in the order of the batches, and commit, which may run beside other
// batches' (each builds its segment on a core of its own). A page's
// versions are committed in the order their batches were prepared.
type preparedBatch struct {
	ix    *Index
	docs  []*Doc
	batch *bleve.Batch
	turn  *turn
}

func (p *preparedBatch) commit() error {
	ix := p.ix
	p.turn.wait()
	err := ix.commit(p.batch)
	// The batch holds every page's analysis (its terms and their
	// frequencies, the most memory a batch takes) until its segment is
	// built: once it is, the rest of the commit (the dictionary's counts,
	// the link graph) goes without it.
	p.batch = nil
	ix.inflight.finish(p.turn, latestFetch(p.docs), err == nil)
	if err != nil {
		return err
	}
	if err := ix.writeWatermark(); err != nil {
		return fmt.Errorf("search: the watermark: %w", err)
	}
	if err := ix.words.add(p.docs, ix.now()); err != nil {
		return fmt.Errorf("search: the did_you_mean dictionary: %w", err)
	}
	ix.graph.add(p.docs)
	ix.graph.maybeCompute()
	return nil
}

// prepare is Add's part under mu: the anchor text (kept, given to the
// pages of the batch, and the pages indexed already marked stale), and the
// batch, registered for its turn to commit.
func (ix *Index) prepare(docs []*Doc) (*preparedBatch, error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	batch := ix.b.NewBatch()
	inBatch := map[string]*Doc{}
	for _, d := range docs {
		inBatch[d.URL] = d
	}
	// Anchor text from these pages' links.
	newAnchors := map[string][]string{}
	for _, d := range docs {
		for _, l := range d.Links {
			t := strings.TrimSpace(l.Text)
			if t == "" || l.Href == d.URL || len(t) > 200 {
				continue
			}
			newAnchors[l.Href] = append(newAnchors[l.Href], t)
		}
	}
	var grown []string
	kept := ix.anchors.s.NewBatch()
	defer kept.Discard()
	for target, texts := range newAnchors {
		all, changed, err := ix.anchors.add(kept, target, texts)
		if err != nil {
			return nil, err
		}
		if d, ok := inBatch[target]; ok {
			d.Anchors = all
			continue
		}
		if changed {
			grown = append(grown, target)
		}
	}
	if len(grown) > 0 {
		// Only the pages indexed already wait for a refresh (not when
		// the links only repeat texts they have: navigation).
		// (A page of a batch still committing is as good as indexed:
		// it is indexed with the anchor text it had when prepared.)
		indexed, err := ix.indexedOf(grown)
		if err != nil {
			return nil, err
		}
		for _, u := range indexed {
			ix.stale[u] = true
		}
		for _, u := range ix.inflight.holding(grown) {
			ix.stale[u] = true
		}
	}
	for _, d := range docs {
		if _, ok := newAnchors[d.URL]; !ok {
			all, err := ix.anchors.get(d.URL)
			if err != nil {
				return nil, err
			}
			d.Anchors = all
		}
		delete(ix.stale, d.URL)
		if err := batch.Index(d.URL, d.fields()); err != nil {
			return nil, fmt.Errorf("index %q: %w", d.URL, err)
		}
	}
	// The anchor text is written first: a page indexed with it never
	// finds it missing after a crash (a batch lost in one is indexed again
	// from the archive, and its links find their texts kept).
	if kept.Len() > 0 {
		if err := kept.Commit(store.Sync); err != nil {
			return nil, fmt.Errorf("search: the anchor text: %w", err)
		}
	}
	urls := make([]string, len(docs))
	for i, d := range docs {
		urls[i] = d.URL
	}
	return &preparedBatch{ix: ix, docs: docs, batch: batch, turn: ix.inflight.enter(urls)}, nil
}

// writeWatermark writes the latest fetch time of the pages of the
// batches committed, once every batch prepared before them is committed
// too (commits.go): a crash that loses a batch not yet written loses the
// watermark written after it too, and the start catches up from the one
// before.
func (ix *Index) writeWatermark() error {
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	w := ix.inflight.watermark()
	if w.IsZero() || !w.After(ix.written) {
		return nil
	}
	if err := ix.b.SetInternal([]byte(watermarkKey), []byte(w.Format(time.RFC3339Nano))); err != nil {
		return err
	}
	ix.written = w
	return nil
}

// indexedOf are those of urls that are indexed.
func (ix *Index) indexedOf(urls []string) ([]string, error) {
	hits, err := ix.byID(context.Background(), urls, nil)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(hits))
	for _, h := range hits {
		out = append(out, h.ID)
	}
	return out, nil
}

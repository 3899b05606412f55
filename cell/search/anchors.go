package search

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	bsearch "github.com/blevesearch/bleve/v2/search"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trawlhq/trawl/internal/store"
)

// anchorStore keeps the anchor text of each page: the texts of the links to
// it that the index has seen (up to maxAnchors distinct ones), by the page's
// URL, whether the page is indexed yet or not. It is a Pebble store of its
// own beside the index (DIR.anchors).
//
// Not the index's internal store: scorch copies every internal value into
// each snapshot it writes, one put at a time in map order into a bbolt
// bucket, so with one value for every page linked to, each batch would
// write them all again, in a time that grows with the square of their
// number (docs/performance.md, "Search"). The index's internal store
// holds only a few keys.
type anchorStore struct {
	s *store.Store
}

// maxAnchors is the most distinct texts kept for a page.
const maxAnchors = 50

func anchorsPath(dir string) string { return strings.TrimSuffix(dir, "/") + ".anchors" }

// openAnchors opens the anchor text of the index in dir ("" in memory);
// fresh starts it empty (the pages' index is new). created reports a store
// that did not exist before.
func openAnchors(dir string, fresh bool) (a *anchorStore, created bool, err error) {
	opts := &store.Options{CacheBytes: 8 << 20, MemTableBytes: 4 << 20, Logger: slog.Default()}
	path := anchorsPath(dir)
	if dir == "" {
		opts.FS, path = vfs.NewMem(), "anchors"
	} else {
		if fresh {
			if err := os.RemoveAll(path); err != nil {
				return nil, false, err
			}
		}
		_, serr := os.Stat(path)
		created = errors.Is(serr, os.ErrNotExist)
	}
	s, err := store.Open(path, opts)
	if err != nil && dir != "" && !created {
		// Unreadable: made again from the pages' indexed anchor text.
		if rerr := os.RemoveAll(path); rerr != nil {
			return nil, false, fmt.Errorf("anchor text: %w (and could not remove it: %v)", err, rerr)
		}
		created = true
		s, err = store.Open(path, opts)
	}
	if err != nil {
		return nil, false, fmt.Errorf("anchor text: %w", err)
	}
	return &anchorStore{s: s}, created, nil
}

// get is the anchor text kept for u.
func (a *anchorStore) get(u string) ([]string, error) {
	raw, err := a.s.Get([]byte(u))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var all []string
	err = json.Unmarshal(raw, &all)
	return all, err
}

// add adds texts to target's anchor text, in b, and returns all of it and
// whether it grew.
func (a *anchorStore) add(b *store.Batch, target string, texts []string) ([]string, bool, error) {
	all, err := a.get(target)
	if err != nil {
		return nil, false, err
	}
	seen := make(map[string]bool, len(all)+len(texts))
	for _, t := range all {
		seen[strings.ToLower(t)] = true
	}
	changed := false
	for _, t := range texts {
		if k := strings.ToLower(t); !seen[k] && len(all) < maxAnchors {
			seen[k] = true
			all = append(all, t)
			changed = true
		}
	}
	if changed {
		out, _ := json.Marshal(all)
		b.Set([]byte(target), out)
	}
	return all, changed, nil
}

func (a *anchorStore) close() error { return a.s.Close() }

// recoverAnchors fills an empty anchor store from the anchor text of the
// pages indexed (a lost store beside a kept index). The texts of links to
// pages not indexed yet are lost with it; they come back as the pages that
// link to them are indexed again.
func (ix *Index) recoverAnchors() error {
	return scanAll(ix.b, []string{"anchors"}, func(hits bsearch.DocumentMatchCollection) error {
		b := ix.anchors.s.NewBatch()
		for _, h := range hits {
			if have, _ := h.Fields["anchors"].(string); have != "" {
				out, _ := json.Marshal(strings.Split(have, "\n"))
				b.Set([]byte(h.ID), out)
			}
		}
		return b.Commit(store.Sync)
	})
}

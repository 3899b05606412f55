package search

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	bsearch "github.com/blevesearch/bleve/v2/search"
)

// Config configures an Index.
type Config struct {
	// Boosts; zero: DefaultBoosts.
	Boosts *Boosts
	// Now is the clock of freshness (default time.Now).
	Now func() time.Time
}

// Index is a cell's search index. It is safe for concurrent use.
type Index struct {
	b      bleve.Index
	boosts Boosts
	graph  *graph
	now    func() time.Time

	mu sync.Mutex // serialises the anchor bookkeeping of Add and RefreshAnchors
	// inflight orders the batches Add commits at once (commits.go).
	inflight commits
	// wmu serialises writing the watermark; written is the one last
	// written (under wmu).
	wmu     sync.Mutex
	written time.Time
	// stale are the indexed pages whose anchor text grew since they were
	// indexed (under mu): RefreshAnchors indexes them again, each once
	// however many pages linked to it meanwhile.
	stale map[string]bool

	// unpersisted are the batches searchable but not yet written (the
	// batches return before the write); Close waits for them.
	pmu         sync.Mutex
	unpersisted map[uint64]bool
	seq         uint64
	inMemory    bool

	// words is the did_you_mean dictionary (words.go).
	words *wordCounts
	// anchors is the anchor text kept for each page (anchors.go).
	anchors *anchorStore
}

// scorchConfig: a batch returns once its segment is searchable, without
// waiting for it to be written (the persister writes it within moments).
// A crash can lose the last batches' pages from the index, never from the
// archive: the cell checks the index against the archive when it starts
// (Cell.rebuildSearch).
var scorchConfig = map[string]any{"unsafe_batch": true}

// scorchOptions is a copy of scorchConfig for one index: bleve writes the
// index's path into the map it is given (NewUsing), and with a shared map
// the next index opened with it would open the store of the one created
// before it (TestIndexesOpenTheirOwnStores).
func scorchOptions() map[string]any { return maps.Clone(scorchConfig) }

// Open opens the index in dir, creating it when absent; dir "" is an
// index in memory (tests).
func Open(dir string, cfg Config) (*Index, error) {
	ix := &Index{boosts: DefaultBoosts, unpersisted: map[uint64]bool{}, now: cfg.Now, graph: newGraph(graphPath(dir)), stale: map[string]bool{}}
	if cfg.Boosts != nil {
		ix.boosts = *cfg.Boosts
	}
	if ix.now == nil {
		ix.now = time.Now
	}
	ix.inMemory = dir == ""
	b, fresh, err := openPages(dir)
	if err != nil {
		return nil, err
	}
	ix.b = b
	ix.written = ix.Watermark()
	anchors, anchorsCreated, err := openAnchors(dir, fresh)
	if err != nil {
		ix.b.Close()
		return nil, fmt.Errorf("search index %q: %w", dir, err)
	}
	ix.anchors = anchors
	fail := func(err error) (*Index, error) {
		ix.b.Close()
		ix.anchors.close()
		return nil, fmt.Errorf("search index %q: %w", dir, err)
	}
	if anchorsCreated && !fresh && ix.Count() > 0 {
		if err := ix.recoverAnchors(); err != nil {
			return fail(fmt.Errorf("the anchor text: %w", err))
		}
	}
	if !ix.inMemory {
		if err := os.WriteFile(formatPath(dir), []byte(Format+"\n"), 0o644); err != nil {
			return fail(err)
		}
		if err := ix.loadStale(); err != nil {
			return fail(err)
		}
	}
	words, created, err := openWords(dir, fresh)
	if err != nil {
		return fail(err)
	}
	ix.words = words
	if created && !fresh && ix.Count() > 0 {
		// The dictionary was lost and the pages were not: counted again
		// from their stored text.
		if err := ix.recountWords(); err != nil {
			ix.Close()
			return nil, fmt.Errorf("search index %q: the did_you_mean dictionary: %w", dir, err)
		}
	}
	return ix, nil
}

// openPages opens the bleve index of the pages in dir ("": in memory),
// and reports whether it is new (fresh: the dictionary and the anchor
// text start anew too). An index of another Format is dropped, and one
// that does not open is set aside: the cell rebuilds either from its
// archive.
func openPages(dir string) (b bleve.Index, fresh bool, err error) {
	fresh = true
	if dir == "" {
		b, err = bleve.NewMemOnly(indexMapping())
	} else {
		if _, statErr := os.Stat(filepath.Join(dir, "index_meta.json")); statErr == nil && !currentFormat(dir) {
			// An index of an older mapping lacks fields the ranking
			// reads: it is dropped and the cell rebuilds it from its
			// archive, as it does an empty one (docs/search.md).
			if err := os.RemoveAll(dir); err != nil {
				return nil, false, fmt.Errorf("drop the search index of an older format %q: %w", dir, err)
			}
		}
		if _, statErr := os.Stat(filepath.Join(dir, "index_meta.json")); statErr == nil {
			b, err = bleve.OpenUsing(dir, scorchOptions())
			fresh = err != nil
			if err != nil {
				// An index that does not open is set aside and started
				// again: the cell rebuilds it from its archive.
				aside := fmt.Sprintf("%s.broken-%d", dir, time.Now().UnixNano())
				if rerr := os.Rename(dir, aside); rerr != nil {
					return nil, false, fmt.Errorf("open search index %q: %w (and could not set it aside: %v)", dir, err, rerr)
				}
				b, err = newIndex(dir)
			}
		} else {
			if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
				return nil, false, err
			}
			b, err = newIndex(dir)
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("open search index %q: %w", dir, err)
	}
	return b, fresh, nil
}

// Format names the index's mapping; a change of indexMapping (a field
// added, an analyzer changed) takes a new one, and an index on disk of
// another format is rebuilt from the archive when the cell opens it.
const Format = "7" // 3: the idents and defs fields; 4: url, type, lang and date stored only, words without term vectors, the stem cache; 5: the one-pass analyzers, the words in a dictionary of their own (words.go); 6: the anchor text in a store of its own (anchors.go); 7: a page's code comments no longer headings, words no longer glued at brackets, a definition's name without what follows it, a line that is a link no definition, defs stored

func formatPath(dir string) string { return filepath.Clean(dir) + ".format" }

// currentFormat reports whether the index in dir was made with Format.
func currentFormat(dir string) bool {
	b, err := os.ReadFile(formatPath(dir))
	return err == nil && strings.TrimSpace(string(b)) == Format
}

func newIndex(dir string) (bleve.Index, error) {
	return bleve.NewUsing(dir, indexMapping(), scorch.Name, scorch.Name, scorchOptions())
}

// Close writes what is not written yet (waiting up to 30 s) and closes
// the index.
func (ix *Index) Close() error {
	ix.inflight.drain()
	ix.graph.mu.Lock()
	dirty := ix.graph.dirty
	ix.graph.mu.Unlock()
	if dirty {
		ix.graph.compute()
	}
	ix.Written(30 * time.Second)
	if !ix.inMemory {
		ix.mu.Lock()
		list := slices.Sorted(maps.Keys(ix.stale))
		ix.mu.Unlock()
		// Present (even empty) means closed: no scan at the next Open.
		if err := ix.b.SetInternal([]byte(staleKey), []byte(strings.Join(list, "\n"))); err != nil {
			ix.b.Close()
			ix.words.close()
			ix.anchors.close()
			return err
		}
	}
	err := ix.words.close()
	if cerr := ix.b.Close(); err == nil {
		err = cerr
	}
	if cerr := ix.anchors.close(); err == nil {
		err = cerr
	}
	return err
}

// Written waits up to timeout for every batch added to be written to
// disk, and reports whether they are.
func (ix *Index) Written(timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(5 * time.Millisecond) {
		ix.pmu.Lock()
		n := len(ix.unpersisted)
		ix.pmu.Unlock()
		if n == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// commit applies a batch: searchable when it returns, written soon after
// (Close waits for it).
func (ix *Index) commit(b *bleve.Batch) error {
	if ix.inMemory {
		return ix.b.Batch(b)
	}
	ix.pmu.Lock()
	ix.seq++
	seq := ix.seq
	ix.unpersisted[seq] = true
	ix.pmu.Unlock()
	done := func() {
		ix.pmu.Lock()
		delete(ix.unpersisted, seq)
		ix.pmu.Unlock()
	}
	b.SetPersistedCallback(func(error) { done() })
	err := ix.b.Batch(b)
	if err != nil {
		done()
	}
	return err
}

// Count is the number of pages indexed.
func (ix *Index) Count() uint64 {
	n, _ := ix.b.DocCount()
	return n
}

const (
	watermarkKey = "watermark"
	// staleKey holds, between a Close and the next Open, the pages
	// waiting for their anchor text (one URL a line).
	staleKey = "anchor-stale"
)

// byID are the indexed pages of ids (those that are indexed), with the
// stored fields named.
func (ix *Index) byID(ctx context.Context, ids, fields []string) (bsearch.DocumentMatchCollection, error) {
	req := bleve.NewSearchRequestOptions(bleve.NewDocIDQuery(ids), len(ids), 0, false)
	req.Fields = fields
	res, err := ix.b.SearchInContext(ctx, req)
	if err != nil {
		return nil, err
	}
	return res.Hits, nil
}

// Stats are counters of the index's store since it was opened.
type Stats struct {
	// Batches are the batches applied; Segments the segments at the
	// index's root now.
	Batches, Segments uint64
	// MergedSegments are the segments merged into larger ones, MergeTime
	// the time the merges took, MergedBytes what they wrote.
	MergedSegments uint64
	MergeTime      time.Duration
	MergedBytes    uint64
	// Settled: every batch applied is merged as the merge policy wants
	// and written (no merge or write under way).
	Settled bool
}

// Stats reads the index's counters.
func (ix *Index) Stats() Stats {
	st, _ := ix.b.StatsMap()["index"].(map[string]any)
	n := func(k string) uint64 { v, _ := st[k].(uint64); return v }
	return Stats{
		Batches:        n("TotBatches"),
		Segments:       n("TotFileSegmentsAtRoot") + n("TotMemorySegmentsAtRoot"),
		MergedSegments: n("TotFileMergeSegments"),
		MergeTime:      time.Duration(n("TotFileMergeZapTime")),
		MergedBytes:    n("TotFileMergeWrittenBytes"),
		Settled:        n("CurRootEpoch") == n("LastMergedEpoch") && n("CurRootEpoch") == n("LastPersistedEpoch"),
	}
}

package search

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	bsearch "github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	index "github.com/blevesearch/bleve_index_api"

	"github.com/trawlhq/trawl/internal/searchapi"
	"github.com/trawlhq/trawl/internal/store"
)

// Boosts weigh each field's BM25 score in a page's score. They were tuned
// on one corpus and evaluated on another (docs/search.md).
type Boosts struct {
	Title    float64
	Headings float64
	URL      float64
	Anchors  float64
	Body     float64
	// Phrase is the bonus of the query's words as a phrase, in the title
	// and in the body.
	Phrase float64
	// Passage weighs the best passage's proximity score in the second
	// stage (candidates re-ranked).
	Passage float64
	// ExactTitle is added when the title is the query, or starts with it.
	ExactTitle float64
	// Candidates is how many pages of the first stage the second stage
	// re-ranks (at least twice the results asked for).
	Candidates int
	// Ident weighs a match of an identifier of the query (a name joined
	// by _ or ., such as pg_trigger_depth or os.path.join) as the page
	// writes it, whole.
	Ident float64
	// Def weighs a query that is, whole, the name a line of the page
	// defines (a definition term, an API entry: "username",
	// "os.getcwd()", "create_user(username, …)"), or a heading.
	Def float64
	// Authority weighs the link-authority prior (PageRank over the
	// archived link graph, in [0,1]) in the second stage.
	Authority float64
	// Fresh weighs recency (1 for a page dated now, halving every 30
	// days) for the queries that ask for it ("latest", "news", this
	// year…).
	Fresh float64
}

// DefaultBoosts are the tuned boosts (docs/search.md, "Tuning").
var DefaultBoosts = Boosts{Title: 1, Headings: 3, URL: 3, Anchors: 5, Body: 1, Phrase: 1, Passage: 16, ExactTitle: 2, Candidates: 80, Ident: 5, Def: 5, Authority: 0.5, Fresh: 2}

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

// ErrQuery is returned for an empty query.
var ErrQuery = errors.New("search: empty query")

// Analyzers (analyzer.go). Words are runs of letters and numbers: an
// identifier (os.path.join, parse_qsl) is its parts, as a reader searches
// them.
const (
	textAnalyzer  = enAnalyzer   // lower-cased, English stop words out, Porter stems
	identAnalyzer = listAnalyzer // identifiers, lower-cased before: split at white space only
)

// scorchConfig: a batch returns once its segment is searchable, without
// waiting for it to be written (the persister writes it within moments).
// A crash can lose the last batches' pages from the index, never from the
// archive: the cell checks the index against the archive when it starts
// (Cell.rebuildSearch).
var scorchConfig = map[string]any{"unsafe_batch": true}

// scorchOptions is a copy of scorchConfig for one index: bleve writes the
// index's path into the map it is given (NewUsing), and a shared map made
// the next index opened with it open the store of the one created before
// it (found when the did_you_mean dictionary became a second index; a
// process with two cells, one index new and one not, had it too).
func scorchOptions() map[string]any { return maps.Clone(scorchConfig) }

func indexMapping() mapping.IndexMapping {
	im := bleve.NewIndexMapping()
	im.ScoringModel = index.BM25Scoring
	im.DefaultAnalyzer = textAnalyzer
	im.StoreDynamic = false
	im.IndexDynamic = false
	im.DocValuesDynamic = false

	text := func(store bool) *mapping.FieldMapping {
		f := bleve.NewTextFieldMapping()
		f.Analyzer = textAnalyzer
		f.Store = store
		f.IncludeInAll = false
		f.IncludeTermVectors = false
		f.DocValues = false
		return f
	}
	keyword := func(store, idx bool) *mapping.FieldMapping {
		f := bleve.NewKeywordFieldMapping()
		f.Store, f.Index, f.IncludeInAll, f.DocValues = store, idx, false, false
		return f
	}

	dm := bleve.NewDocumentStaticMapping()
	// url, type, lang and date are read back, never searched: stored
	// only (the URL is the document's id, which is indexed).
	dm.AddFieldMappingsAt("url", keyword(true, false))
	dm.AddFieldMappingsAt("urlwords", text(false))
	idents := bleve.NewTextFieldMapping()
	idents.Analyzer = identAnalyzer
	idents.Store, idents.IncludeInAll, idents.DocValues, idents.IncludeTermVectors = false, false, false, false
	dm.AddFieldMappingsAt("idents", idents)
	dm.AddFieldMappingsAt("defs", idents)
	dm.AddFieldMappingsAt("title", text(true))
	dm.AddFieldMappingsAt("headings", text(true))
	dm.AddFieldMappingsAt("body", text(true))
	dm.AddFieldMappingsAt("anchors", text(true))
	dm.AddFieldMappingsAt("type", keyword(true, false))
	dm.AddFieldMappingsAt("lang", keyword(true, false))
	dm.AddFieldMappingsAt("desc", keyword(true, false))
	dm.AddFieldMappingsAt("jsonld", keyword(true, false))
	dm.AddFieldMappingsAt("sim", keyword(true, false))
	date := bleve.NewDateTimeFieldMapping()
	date.Index, date.IncludeInAll, date.DocValues, date.IncludeTermVectors = false, false, false, false
	dm.AddFieldMappingsAt("date", date)
	im.DefaultMapping = dm
	return im
}

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
	var err error
	fresh := true // a new index of pages: the dictionary starts anew too
	switch {
	case dir == "":
		ix.inMemory = true
		ix.b, err = bleve.NewMemOnly(indexMapping())
	default:
		if _, statErr := os.Stat(filepath.Join(dir, "index_meta.json")); statErr == nil && !currentFormat(dir) {
			// An index of an older mapping lacks fields the ranking
			// reads: it is dropped and the cell rebuilds it from its
			// archive, as it does an empty one (docs/search.md).
			if err := os.RemoveAll(dir); err != nil {
				return nil, fmt.Errorf("drop the search index of an older format %q: %w", dir, err)
			}
		}
		if _, statErr := os.Stat(filepath.Join(dir, "index_meta.json")); statErr == nil {
			ix.b, err = bleve.OpenUsing(dir, scorchOptions())
			fresh = err != nil
			if err != nil {
				// An index that does not open is set aside and started
				// again: the cell rebuilds it from its archive.
				aside := fmt.Sprintf("%s.broken-%d", dir, time.Now().UnixNano())
				if rerr := os.Rename(dir, aside); rerr != nil {
					return nil, fmt.Errorf("open search index %q: %w (and could not set it aside: %v)", dir, err, rerr)
				}
				ix.b, err = newIndex(dir)
			}
		} else {
			if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
				return nil, err
			}
			ix.b, err = newIndex(dir)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open search index %q: %w", dir, err)
	}
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

// Format names the index's mapping; a change of indexMapping (a field
// added, an analyzer changed) takes a new one, and an index on disk of
// another format is rebuilt from the archive when the cell opens it.
const Format = "6" // 3: the idents and defs fields; 4: url, type, lang and date stored only, words without term vectors, the stem cache; 5: the one-pass analyzers, the words in a dictionary of their own (words.go); 6: the anchor text in a store of its own (anchors.go)

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

// SetBoosts replaces the boosts (the evaluation's tuning).
func (ix *Index) SetBoosts(b Boosts) { ix.boosts = b }

// Boosts returns the boosts in use.
func (ix *Index) Boosts() Boosts { return ix.boosts }

const (
	watermarkKey = "watermark"
	// staleKey holds, between a Close and the next Open, the pages
	// waiting for their anchor text (one URL a line).
	staleKey = "anchor-stale"
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

// Prepare computes what the index reads of d but its anchor text (the
// identifiers, definitions, distinct words and simhash of its text), so
// that Add, which indexes one batch at a time, does not: the Indexer's
// workers prepare each document as they convert it. d must not change
// afterwards.
func (d *Doc) Prepare() {
	if d.prepared != nil && d.prepared["url"] == d.URL {
		return // (a copy of a prepared Doc given another URL is prepared again)
	}
	heads := strings.Join(d.Headings, "\n")
	d.words = distinctWords(d.Title, heads, d.Body)
	d.prepared = map[string]any{
		"url":      d.URL,
		"urlwords": urlWords(d.URL),
		"idents":   strings.Join(identifiers(d.Title, heads, d.Body), " "),
		"defs":     strings.Join(definitions(d), " "),
		"title":    d.Title,
		"headings": heads,
		"body":     d.Body,
		"type":     d.Type,
		"lang":     d.Lang,
		"desc":     d.Description,
		"jsonld":   d.JSONLD,
		"sim":      strconv.FormatUint(simhash(d.Body), 16),
		"date":     d.Date,
	}
}

// fields is d as the index mapping reads it.
func (d *Doc) fields() map[string]any {
	d.Prepare()
	f := maps.Clone(d.prepared)
	f["anchors"] = strings.Join(d.Anchors, "\n")
	return f
}

var storedFields = []string{"url", "title", "headings", "body", "anchors", "type", "lang", "desc", "jsonld", "sim", "date"}

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

func docOf(f map[string]any) *Doc {
	s := func(k string) string { v, _ := f[k].(string); return v }
	d := &Doc{URL: s("url"), Title: s("title"), Body: s("body"), Type: s("type"), Lang: s("lang"), Description: s("desc"), JSONLD: s("jsonld")}
	if h := s("headings"); h != "" {
		d.Headings = strings.Split(h, "\n")
	}
	if a := s("anchors"); a != "" {
		d.Anchors = strings.Split(a, "\n")
	}
	if t, err := time.Parse(time.RFC3339, s("date")); err == nil {
		d.Date = t
	}
	return d
}

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
	field := func(f string, boost float64) query.Query {
		m := bleve.NewMatchQuery(q)
		m.SetField(f)
		m.SetBoost(boost)
		return m
	}
	qs := []query.Query{
		field("title", b.Title), field("headings", b.Headings), field("urlwords", b.URL),
		field("anchors", b.Anchors), field("body", b.Body),
	}
	if b.Ident > 0 {
		for _, id := range identifiers(q) {
			tq := bleve.NewTermQuery(id)
			tq.SetField("idents")
			tq.SetBoost(b.Ident)
			qs = append(qs, tq)
		}
	}
	if b.Def > 0 {
		if k := defKey(q); k != "" {
			tq := bleve.NewTermQuery(k)
			tq.SetField("defs")
			tq.SetBoost(b.Def)
			qs = append(qs, tq)
		}
	}
	if len(strings.Fields(q)) > 1 && b.Phrase > 0 {
		for _, f := range []string{"title", "body"} {
			p := bleve.NewMatchPhraseQuery(q)
			p.SetField(f)
			p.SetBoost(b.Phrase)
			qs = append(qs, p)
		}
	}
	// Candidates: more than asked, for collapsing and the second stage.
	cand := max(2*n, b.Candidates)
	req := bleve.NewSearchRequestOptions(bleve.NewDisjunctionQuery(qs...), cand, 0, false)
	req.Fields = rankFields
	res, err := ix.b.SearchInContext(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	terms := searchapi.QueryTerms(q)
	nq := normalize(q)
	hits := make([]Hit, 0, len(res.Hits))
	top := 0.0
	if len(res.Hits) > 0 {
		top = res.Hits[0].Score
	}
	m := newMatcher(terms)
	fresh, now := asksFresh(q, ix.now()), ix.now()
	for _, h := range res.Hits {
		d := docOf(h.Fields)
		sim, _ := strconv.ParseUint(fmt.Sprint(h.Fields["sim"]), 16, 64)
		p := m.bestPassage(d.Body)
		score := h.Score
		if top > 0 {
			// The second stage in units of the best first-stage score, so
			// the boosts keep their meaning across corpora.
			score += top * b.Passage * p.score
			if nt := normalize(d.Title); nt != "" && (nt == nq || strings.HasPrefix(nt, nq+" ")) {
				score += top * b.ExactTitle / 4
			}
			if b.Authority > 0 {
				score += top * b.Authority * ix.graph.prior(d.URL)
			}
			if fresh && b.Fresh > 0 && !d.Date.IsZero() {
				age := now.Sub(d.Date).Hours() / 24
				score += top * b.Fresh * math.Exp2(-max(age, 0)/30)
			}
		}
		hits = append(hits, Hit{Hit: searchapi.Hit{Title: d.Title, URL: d.URL, Type: d.Type, Date: d.Date, Sim: sim, Score: score}, doc: d, passage: p})
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].Score > hits[j].Score })
	hits = searchapi.Collapse(hits)
	if len(hits) > n {
		hits = hits[:n]
	}
	for i := range hits {
		hits[i].Snippet = hits[i].passage.marked(terms)
		if hits[i].Snippet == "" {
			hits[i].Snippet = firstWords(hits[i].doc.Description+" "+hits[i].doc.Body, 30)
		}
	}
	return &Results{Hits: hits, Total: res.Total}, nil
}

// normalize is s lower-cased with its words joined by single spaces.
func normalize(s string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !isWord(r) && r != '.' && r != '_' }), " ")
}

// distinctWords is each word of texts once, lower-cased (a word with no
// upper case is a slice of its text): the words a page gives the
// did_you_mean dictionary (words.go).
func distinctWords(texts ...string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range texts {
		searchapi.EachWord(t, func(start, end int) {
			lw := strings.ToLower(t[start:end]) // as it is when it has no upper case
			if !seen[lw] {
				seen[lw] = true
				out = append(out, lw)
			}
		})
	}
	return out
}

// freshWords are the words by which a query asks for recent pages.
var freshWords = map[string]bool{"latest": true, "newest": true, "recent": true, "recently": true, "news": true,
	"today": true, "yesterday": true, "current": true, "currently": true, "new": true, "breaking": true, "update": true, "updates": true}

// asksFresh reports whether q asks for recent pages: a word of freshWords,
// or this year or last.
func asksFresh(q string, now time.Time) bool {
	for _, w := range searchapi.Words(q) {
		lw := strings.ToLower(w.Text)
		if freshWords[lw] {
			return true
		}
		if y, err := strconv.Atoi(lw); err == nil && (y == now.Year() || y == now.Year()-1) {
			return true
		}
	}
	return false
}

// identifiers are the distinct names of texts joined by _ or . (lower-
// cased: pg_trigger_depth, os.path.join), and the dotted ones' tails
// (path.join).
func identifiers(texts ...string) []string { return identifiersBy(eachNameToken, texts...) }

// identifiersBy is identifiers over the runs tokens finds in each text.
func identifiersBy(tokens func(string, func(string)), texts ...string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	for _, t := range texts {
		tokens(t, func(tok string) {
			tok = strings.Trim(tok, "._")
			if !strings.ContainsAny(tok, "._") || strings.Contains(tok, "..") || len(tok) > 80 {
				return
			}
			tok = strings.ToLower(tok)
			add(tok)
			for i := strings.IndexByte(tok, '.'); i >= 0; {
				tail := tok[i+1:]
				if !strings.ContainsAny(tail, "._") {
					break
				}
				add(tail)
				j := strings.IndexByte(tail, '.')
				if j < 0 {
					break
				}
				i += j + 1
			}
		})
	}
	return out
}

// eachNameToken calls f with each run of letters, numbers, _ and . of s
// that holds a _ or a . (the runs identifiers looks at), without
// allocating. Not eachRun: it sees whether a run is joined as it scans,
// and calls f for those alone (on eachRun, a call and a second scan for
// every word made identifiers 40% slower).
func eachNameToken(s string, f func(string)) {
	start, joined := -1, false
	for i := 0; i < len(s); {
		c := s[i]
		var in bool
		n := 1
		if c < utf8.RuneSelf {
			in = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.'
		} else {
			var r rune
			r, n = utf8.DecodeRuneInString(s[i:])
			in = unicode.IsLetter(r) || unicode.IsNumber(r)
		}
		switch {
		case in && start < 0:
			start, joined = i, false
		case !in && start >= 0:
			if joined {
				f(s[start:i])
			}
			start = -1
		}
		if c == '_' || c == '.' {
			joined = true
		}
		i += n
	}
	if start >= 0 && joined {
		f(s[start:])
	}
}

// defPrefixes are the words before the name an API entry defines.
var defPrefixes = []string{"class ", "exception ", "function ", "method ", "attribute ", "property ", "data ", "classmethod ",
	"staticmethod ", "abstractmethod ", "async ", "coroutine ", "decorator ", "awaitable ", "func ", "type ", "const ", "var ", "macro ", "struct "}

// definitions are the keys (defKey) of the names a page's lines define:
// a short line that is a name, or starts with a name and "(" (an API
// entry), and its headings; a dotted name also by its last part.
func definitions(d *Doc) []string {
	seen := map[string]bool{}
	var out []string
	add := func(line string) {
		k := defKey(line)
		if k == "" || seen[k] {
			return
		}
		seen[k] = true
		out = append(out, k)
		if i := strings.LastIndexByte(k, '.'); i > 0 && i+1 < len(k) && !strings.Contains(k, "+") {
			if tail := k[i+1:]; !seen[tail] {
				seen[tail] = true
				out = append(out, tail)
			}
		}
	}
	for _, h := range d.Headings {
		add(h)
	}
	for line := range strings.SplitSeq(d.Body, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || len(line) > 400 {
			continue
		}
		if i := strings.IndexByte(line, '('); i > 0 {
			line = line[:i]
		} else if len(line) > 60 || strings.HasSuffix(line, ".") || strings.HasSuffix(line, ":") {
			continue
		}
		if i := strings.Index(line, " = "); i > 0 {
			line = line[:i]
		}
		lower := strings.ToLower(line)
		for _, p := range defPrefixes {
			if strings.HasPrefix(lower, p) {
				line = line[len(p):]
				break
			}
		}
		if n := len(strings.Fields(line)); n > 0 && n <= 4 {
			add(line)
		}
	}
	return out
}

// defKey is a name as the defs field holds it: lower-cased, its words
// (runs of letters, digits, _ and .) joined by "+"; "" when it has none
// or more than 4.
func defKey(s string) string {
	ws := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r) && r != '_' && r != '.'
	})
	for i := range ws {
		ws[i] = strings.Trim(ws[i], ".")
	}
	ws = slices.DeleteFunc(ws, func(w string) bool { return w == "" })
	if len(ws) == 0 || len(ws) > 4 {
		return ""
	}
	return strings.Join(ws, "+")
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

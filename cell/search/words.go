package search

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/index/scorch"
	bsearch "github.com/blevesearch/bleve/v2/search"
	index "github.com/blevesearch/bleve_index_api"
)

// wordCounts is the dictionary of did_you_mean: every word of the pages
// indexed (title, headings, body; lower-cased) with how many pages hold
// it. It is a small bleve index of its own beside the pages' (DIR.words),
// for bleve's fuzzy term dictionary, and it holds a group of documents a
// write of counts (countsGroup), not a document a page: a word's count is
// the sum of its term frequencies. As a field of every page the words
// would be about half the postings the index builds and merges (more
// than the stemmed body): docs/search.md, "did_you_mean", and the figures
// in docs/performance.md, "Search".
//
// A count is of pages indexed, so a page indexed again (fetched again)
// counts again; the anchor-text refresh does not count. Counts wait in
// memory until BatchSize pages or wordsFlushAge have them, or a
// correction or Close asks; a crash loses the counts waiting (pages
// stay searchable; their words are counted at the next rebuild).
type wordCounts struct {
	b bleve.Index

	mu      sync.Mutex
	pending map[string]uint32
	pages   int
	since   time.Time // when the oldest pending page was counted
	groups  []countsGroup
	last    int64 // the last group's number
	mem     bool  // in memory (nothing to wait for at Close)

	unwritten atomic.Int64 // batches applied, not yet on disk
}

// countsGroup is the documents one write made (the counts of some
// pages, in documents of at most wordsPerDoc words: ids "<seq>.<k>").
// Documents of page size, not one of every word of a batch: zap sizes the
// buffer of a new segment from the bytes a document of the segment built
// before it took (in a pool shared by every index of the process), and
// after a document of megabytes it reserved gigabytes for the next batch
// of pages.
type countsGroup struct {
	seq    int64
	pages  int
	shards int
}

func (g countsGroup) id(k int) string { return strconv.FormatInt(g.seq, 10) + "." + strconv.Itoa(k) }

// wordsPerDoc is the most words a document of the dictionary holds (about
// the size of a page's document).
const wordsPerDoc = 2000

const (
	// wordsFlushAge: counts older than this are written at the next batch.
	wordsFlushAge = 10 * time.Second
	// wordsMaxGroups: past it, the wordsMergeGroups groups of fewest
	// pages are merged into one (a word's count reads one posting a
	// group).
	wordsMaxGroups   = 32
	wordsMergeGroups = 16
)

func wordsPath(dir string) string { return strings.TrimSuffix(dir, "/") + ".words" }

// openWords opens the dictionary of the index in dir ("" in memory); fresh
// starts it empty (the pages' index is new).
func openWords(dir string, fresh bool) (*wordCounts, bool, error) {
	w := &wordCounts{pending: map[string]uint32{}}
	im := bleve.NewIndexMapping()
	im.DefaultMapping = bleve.NewDocumentDisabledMapping() // documents are built here, not mapped
	var err error
	created := true
	switch {
	case dir == "":
		w.mem = true
		w.b, err = bleve.NewMemOnly(im)
	default:
		path := wordsPath(dir)
		if fresh {
			if err := os.RemoveAll(path); err != nil {
				return nil, false, err
			}
		}
		if _, serr := os.Stat(path); serr == nil {
			if w.b, err = bleve.OpenUsing(path, scorchOptions()); err == nil {
				created = false
				break
			}
			// Unreadable: made again from the pages' stored text.
			if err := os.RemoveAll(path); err != nil {
				return nil, false, err
			}
		}
		w.b, err = bleve.NewUsing(path, im, scorch.Name, scorch.Name, scorchOptions())
	}
	if err != nil {
		return nil, false, fmt.Errorf("did_you_mean dictionary: %w", err)
	}
	if err := w.load(); err != nil {
		w.b.Close()
		return nil, false, err
	}
	return w, created, nil
}

// load lists the dictionary's groups.
func (w *wordCounts) load() error {
	byseq := map[int64]*countsGroup{}
	err := scanAll(w.b, nil, func(hits bsearch.DocumentMatchCollection) error {
		for _, h := range hits {
			seqs, _, _ := strings.Cut(h.ID, ".")
			seq, err := strconv.ParseInt(seqs, 10, 64)
			if err != nil {
				return fmt.Errorf("did_you_mean dictionary: document %q", h.ID)
			}
			g := byseq[seq]
			if g == nil {
				doc, err := w.b.Document(h.ID)
				if err != nil || doc == nil {
					return fmt.Errorf("did_you_mean dictionary: document %s: %v", h.ID, err)
				}
				_, pages := decodeCounts(storedCounts(doc))
				g = &countsGroup{seq: seq, pages: pages}
				byseq[seq] = g
			}
			g.shards++
			w.last = max(w.last, seq)
		}
		return nil
	})
	for _, g := range byseq {
		w.groups = append(w.groups, *g)
	}
	return err
}

// add counts the words of docs (Prepare made each page's distinct
// words), and writes the counts when they are due.
func (w *wordCounts) add(docs []*Doc, now time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pages == 0 {
		w.since = now
	}
	for _, d := range docs {
		for _, word := range d.words {
			if n, ok := w.pending[word]; ok {
				w.pending[word] = n + 1
			} else {
				w.pending[strings.Clone(word)] = 1 // (word may be a slice of the page's text)
			}
		}
		w.pages++
	}
	if w.pages >= BatchSize || now.Sub(w.since) >= wordsFlushAge {
		return w.flushLocked()
	}
	return nil
}

// flush writes the counts waiting.
func (w *wordCounts) flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushLocked()
}

// flushDue writes the counts waiting if they are due (the indexer's idle
// tick).
func (w *wordCounts) flushDue(now time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pages > 0 && now.Sub(w.since) >= wordsFlushAge {
		return w.flushLocked()
	}
	return nil
}

func (w *wordCounts) flushLocked() error {
	if w.pages == 0 {
		return nil
	}
	b := w.b.NewBatch()
	if err := w.put(b, w.pending, w.pages); err != nil {
		return err
	}
	if err := w.commit(b); err != nil {
		return err
	}
	w.pending, w.pages = map[string]uint32{}, 0
	if len(w.groups) > wordsMaxGroups {
		return w.mergeLocked()
	}
	return nil
}

// commit applies b; close waits for it to be on disk (scorch's Close does
// not wait for a batch made with unsafe_batch).
func (w *wordCounts) commit(b *bleve.Batch) error {
	if w.mem {
		return w.b.Batch(b)
	}
	w.unwritten.Add(1)
	b.SetPersistedCallback(func(error) { w.unwritten.Add(-1) })
	err := w.b.Batch(b)
	if err != nil {
		w.unwritten.Add(-1)
	}
	return err
}

// put adds to b a group of documents of counts (of pages pages).
func (w *wordCounts) put(b *bleve.Batch, counts map[string]uint32, pages int) error {
	w.last = max(w.last+1, time.Now().UnixNano())
	g := countsGroup{seq: w.last, pages: pages}
	words := slices.Sorted(maps.Keys(counts))
	for len(words) > 0 || g.shards == 0 {
		part := words[:min(len(words), wordsPerDoc)]
		words = words[len(part):]
		sub := make(map[string]uint32, len(part))
		freqs := make(index.TokenFrequencies, len(part))
		n := 0
		for _, word := range part {
			c := counts[word]
			sub[word] = c
			tf := &index.TokenFreq{Term: []byte(word)}
			tf.SetFrequency(int(c))
			freqs[word] = tf
			n += int(c)
		}
		doc := document.NewDocument(g.id(g.shards))
		doc.AddField(&countsField{freqs: freqs, n: n})
		doc.AddField(document.NewTextFieldWithIndexingOptions("counts", nil, encodeCounts(sub, pages), index.StoreField))
		if err := b.IndexAdvanced(doc); err != nil {
			return err
		}
		g.shards++
	}
	w.groups = append(w.groups, g)
	return nil
}

// mergeLocked merges the wordsMergeGroups groups of fewest pages into
// one (their stored counts, summed): the cost is of the small groups, and
// the large ones are merged only once there are many of them.
func (w *wordCounts) mergeLocked() error {
	slices.SortStableFunc(w.groups, func(a, b countsGroup) int { return a.pages - b.pages })
	merge := w.groups[:wordsMergeGroups]
	sum, pages := map[string]uint32{}, 0
	b := w.b.NewBatch()
	for _, g := range merge {
		for k := range g.shards {
			doc, err := w.b.Document(g.id(k))
			if err != nil || doc == nil {
				return fmt.Errorf("did_you_mean dictionary: document %s: %v", g.id(k), err)
			}
			counts, _ := decodeCounts(storedCounts(doc))
			for word, c := range counts {
				sum[word] += c
			}
			b.Delete(g.id(k))
		}
		pages += g.pages
	}
	w.groups = slices.Clone(w.groups[wordsMergeGroups:])
	if err := w.put(b, sum, pages); err != nil {
		return err
	}
	return w.commit(b)
}

// count is how many pages indexed hold word (written counts: a
// correction flushes first).
func (w *wordCounts) count(ctx context.Context, r index.IndexReader, word string) (uint64, error) {
	tfr, err := r.TermFieldReader(ctx, []byte(word), "words", true, false, false)
	if err != nil {
		return 0, err
	}
	defer tfr.Close()
	var n uint64
	var tfd index.TermFieldDoc
	for {
		d, err := tfr.Next(tfd.Reset())
		if err != nil {
			return 0, err
		}
		if d == nil {
			return n, nil
		}
		n += d.Freq
	}
}

func (w *wordCounts) close() error {
	err := w.flush()
	for deadline := time.Now().Add(30 * time.Second); w.unwritten.Load() > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			err = errors.Join(err, fmt.Errorf("did_you_mean dictionary: not written in 30 s"))
			break
		}
	}
	if cerr := w.b.Close(); err == nil {
		err = cerr
	}
	return err
}

// encodeCounts is a document's counts as stored: the number of pages,
// then each word (length, bytes) and its count, as uvarints.
func encodeCounts(counts map[string]uint32, pages int) []byte {
	size := binary.MaxVarintLen64
	for word := range counts {
		size += len(word) + 2*binary.MaxVarintLen32
	}
	b := binary.AppendUvarint(make([]byte, 0, size), uint64(pages))
	for word, c := range counts {
		b = binary.AppendUvarint(b, uint64(len(word)))
		b = append(b, word...)
		b = binary.AppendUvarint(b, uint64(c))
	}
	return b
}

func decodeCounts(b []byte) (map[string]uint32, int) {
	pages, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, 0
	}
	b = b[n:]
	counts := map[string]uint32{}
	for len(b) > 0 {
		l, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < l {
			break
		}
		word := string(b[n : n+int(l)])
		b = b[n+int(l):]
		c, n := binary.Uvarint(b)
		if n <= 0 {
			break
		}
		b = b[n:]
		counts[word] = uint32(c)
	}
	return counts, int(pages)
}

func storedCounts(doc index.Document) []byte {
	var raw []byte
	doc.VisitFields(func(f index.Field) {
		if f.Name() == "counts" {
			raw = f.Value()
		}
	})
	return raw
}

// countsField is the words field of a dictionary document: its terms and
// their counts as given, not analysed from a text.
type countsField struct {
	freqs index.TokenFrequencies
	n     int
}

func (f *countsField) Name() string                                     { return "words" }
func (f *countsField) ArrayPositions() []uint64                         { return nil }
func (f *countsField) Options() index.FieldIndexingOptions              { return index.IndexField }
func (f *countsField) Analyze()                                         {}
func (f *countsField) Value() []byte                                    { return nil }
func (f *countsField) NumPlainTextBytes() uint64                        { return 0 }
func (f *countsField) Size() int                                        { return f.freqs.Size() }
func (f *countsField) EncodedFieldType() byte                           { return 't' }
func (f *countsField) AnalyzedLength() int                              { return f.n }
func (f *countsField) AnalyzedTokenFrequencies() index.TokenFrequencies { return f.freqs }

var _ document.Field = (*countsField)(nil)

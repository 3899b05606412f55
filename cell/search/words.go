package search

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/index/scorch"
	index "github.com/blevesearch/bleve_index_api"
)

// wordCounts is the dictionary of did_you_mean: every word of the pages
// indexed (title, headings, body; lower-cased) with how many pages hold
// it. It is a small bleve index of its own beside the pages' (DIR.words),
// for bleve's fuzzy term dictionary, and it holds one document a batch of
// pages, not one a page: a word's count is its term frequency in each
// batch's document, summed. As a field of every page the words were half
// the postings the index built and merged (more than the stemmed body),
// and half of that CPU went with them (docs/search.md, "Indexing").
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
	docs    []countsDoc
	last    int64 // the last document's id, as a number
	mem     bool  // in memory (nothing to wait for at Close)
}

// countsDoc is one document of the dictionary: its id and how many pages
// its counts are of.
type countsDoc struct {
	id    string
	pages int
}

const (
	// wordsFlushAge: counts older than this are written at the next batch.
	wordsFlushAge = 10 * time.Second
	// wordsMaxDocs: past it, the wordsMergeDocs documents of fewest pages
	// are merged into one (a word's count reads one posting a document).
	wordsMaxDocs   = 32
	wordsMergeDocs = 16
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

// load lists the dictionary's documents.
func (w *wordCounts) load() error {
	req := bleve.NewSearchRequestOptions(bleve.NewMatchAllQuery(), 10000, 0, false)
	res, err := w.b.Search(req)
	if err != nil {
		return err
	}
	for _, h := range res.Hits {
		doc, err := w.b.Document(h.ID)
		if err != nil || doc == nil {
			return fmt.Errorf("did_you_mean dictionary: document %s: %v", h.ID, err)
		}
		_, pages := decodeCounts(storedCounts(doc))
		w.docs = append(w.docs, countsDoc{h.ID, pages})
		if n, _ := strconv.ParseInt(h.ID, 10, 64); n > w.last {
			w.last = n
		}
	}
	return nil
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

func (w *wordCounts) flushLocked() error { return w.write(false) }

// write writes the counts waiting; written, it waits for the batch to be
// on disk (Close: scorch's Close does not wait for a batch made with
// unsafe_batch).
func (w *wordCounts) write(written bool) error {
	if w.pages == 0 {
		return nil
	}
	b := w.b.NewBatch()
	if err := w.put(b, w.pending, w.pages); err != nil {
		return err
	}
	done := make(chan error, 1)
	if written {
		b.SetPersistedCallback(func(err error) { done <- err })
	}
	if err := w.b.Batch(b); err != nil {
		return err
	}
	if written {
		select {
		case err := <-done:
			if err != nil {
				return err
			}
		case <-time.After(30 * time.Second):
			return fmt.Errorf("did_you_mean dictionary: not written in 30 s")
		}
	}
	w.pending, w.pages = map[string]uint32{}, 0
	if len(w.docs) > wordsMaxDocs {
		return w.mergeLocked()
	}
	return nil
}

// put adds to b a document of counts (of pages pages).
func (w *wordCounts) put(b *bleve.Batch, counts map[string]uint32, pages int) error {
	w.last = max(w.last+1, time.Now().UnixNano())
	id := strconv.FormatInt(w.last, 10)
	freqs := make(index.TokenFrequencies, len(counts))
	n := 0
	for word, c := range counts {
		tf := &index.TokenFreq{Term: []byte(word)}
		tf.SetFrequency(int(c))
		freqs[word] = tf
		n += int(c)
	}
	doc := document.NewDocument(id)
	doc.AddField(&countsField{freqs: freqs, n: n})
	doc.AddField(document.NewTextFieldWithIndexingOptions("counts", nil, encodeCounts(counts, pages), index.StoreField))
	if err := b.IndexAdvanced(doc); err != nil {
		return err
	}
	w.docs = append(w.docs, countsDoc{id, pages})
	return nil
}

// mergeLocked merges the wordsMergeDocs documents of fewest pages into
// one (their stored counts, summed): the cost is of the small documents,
// and the large ones are merged only once there are many of them.
func (w *wordCounts) mergeLocked() error {
	slices.SortStableFunc(w.docs, func(a, b countsDoc) int { return a.pages - b.pages })
	merge := w.docs[:wordsMergeDocs]
	sum, pages := map[string]uint32{}, 0
	for _, cd := range merge {
		doc, err := w.b.Document(cd.id)
		if err != nil || doc == nil {
			return fmt.Errorf("did_you_mean dictionary: document %s: %v", cd.id, err)
		}
		counts, n := decodeCounts(storedCounts(doc))
		for word, c := range counts {
			sum[word] += c
		}
		pages += n
	}
	b := w.b.NewBatch()
	for _, cd := range merge {
		b.Delete(cd.id)
	}
	w.docs = slices.Clone(w.docs[wordsMergeDocs:])
	if err := w.put(b, sum, pages); err != nil {
		return err
	}
	return w.b.Batch(b)
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
	w.mu.Lock()
	err := w.write(!w.mem)
	w.mu.Unlock()
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

package search

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// wordCount is how many pages the dictionary says hold w (the counts
// waiting written first, as Correct does).
func wordCount(t *testing.T, ix *Index, w string) uint64 {
	t.Helper()
	if err := ix.words.flush(); err != nil {
		t.Fatal(err)
	}
	adv, err := ix.words.b.Advanced()
	if err != nil {
		t.Fatal(err)
	}
	r, err := adv.Reader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n, err := ix.words.count(context.Background(), r, w)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The did_you_mean dictionary counts pages a word is in, across batches,
// merges of its documents, a restart, and its own loss (counted again
// from the pages' stored text); a new index of pages starts it anew.
func TestWordCounts(t *testing.T) {
	dir := t.TempDir() + "/idx"
	ix, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	const batches = wordsMaxGroups + 9
	for i := range batches {
		d := md(fmt.Sprintf("http://d/%d", i), "Photosynthesis", fmt.Sprintf("# Photosynthesis\n\nChlorophyll absorbs light. Page%d only.", i))
		if err := ix.Add(d); err != nil {
			t.Fatal(err)
		}
		if err := ix.words.flush(); err != nil { // a document each
			t.Fatal(err)
		}
	}
	if n := len(ix.words.groups); n > wordsMaxGroups {
		t.Errorf("%d groups in the dictionary, want at most %d (merged)", n, wordsMaxGroups)
	}
	for w, want := range map[string]uint64{"chlorophyll": batches, "photosynthesis": batches, "page7": 1, "absent": 0} {
		if got := wordCount(t, ix, w); got != want {
			t.Errorf("%s: %d pages, want %d", w, got, want)
		}
	}
	c, err := ix.Correct(context.Background(), "chlorophyl")
	if err != nil || c == nil || c.Query != "chlorophyll" {
		t.Fatalf("correction: %+v %v", c, err)
	}

	// Counts waiting are written at Close, and read again at Open.
	if err := ix.Add(md("http://d/late", "Late", "# Late\n\nChlorophyll again.")); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if ix, err = Open(dir, Config{}); err != nil {
		t.Fatal(err)
	}
	if got := wordCount(t, ix, "chlorophyll"); got != batches+1 {
		t.Errorf("after a restart: %d pages, want %d", got, batches+1)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}

	// The dictionary lost, the pages not: counted again from them.
	if err := os.RemoveAll(wordsPath(dir)); err != nil {
		t.Fatal(err)
	}
	if ix, err = Open(dir, Config{}); err != nil {
		t.Fatal(err)
	}
	if got := wordCount(t, ix, "chlorophyll"); got != batches+1 {
		t.Errorf("recounted: %d pages, want %d", got, batches+1)
	}
	if got := wordCount(t, ix, "page3"); got != 1 {
		t.Errorf("recounted page3: %d pages, want 1", got)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}

	// The pages' index of an older format is dropped: the dictionary too.
	if err := os.WriteFile(formatPath(dir), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ix, err = Open(dir, Config{}); err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if n := ix.Count(); n != 0 {
		t.Fatalf("%d pages after the format change", n)
	}
	if got := wordCount(t, ix, "chlorophyll"); got != 0 {
		t.Errorf("a new index's dictionary: %d pages, want 0", got)
	}
}

// Counts wait until they are due: BatchSize pages, or wordsFlushAge on
// the index's clock (the indexer's idle tick asks).
func TestWordCountsFlushWhenDue(t *testing.T) {
	now := t0
	ix, err := Open("", Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.Add(md("http://d/a", "A", "# A\n\nmitochondria")); err != nil {
		t.Fatal(err)
	}
	if len(ix.words.groups) != 0 || ix.words.pages != 1 {
		t.Fatalf("written at once: %d documents, %d pages waiting", len(ix.words.groups), ix.words.pages)
	}
	now = now.Add(wordsFlushAge - time.Second)
	if err := ix.words.flushDue(now); err != nil || len(ix.words.groups) != 0 {
		t.Fatalf("written before due: %v, %d documents", err, len(ix.words.groups))
	}
	now = now.Add(time.Second)
	if err := ix.words.flushDue(now); err != nil || len(ix.words.groups) != 1 || ix.words.pages != 0 {
		t.Fatalf("not written when due: %v, %d documents, %d pages waiting", err, len(ix.words.groups), ix.words.pages)
	}
	docs := make([]*Doc, BatchSize)
	for i := range docs {
		docs[i] = md(fmt.Sprintf("http://d/b%d", i), "B", "# B\n\nribosome")
	}
	if err := ix.Add(docs...); err != nil {
		t.Fatal(err)
	}
	if len(ix.words.groups) != 2 || ix.words.pages != 0 {
		t.Fatalf("a full batch not written: %d documents, %d pages waiting", len(ix.words.groups), ix.words.pages)
	}
	if got := wordCount(t, ix, "ribosome"); got != BatchSize {
		t.Errorf("ribosome: %d, want %d", got, BatchSize)
	}
}

// Each index opens its own store: bleve writes an index's path into the
// options map it is given, and with one map shared, an index opened
// after another was created opened that other's store (and waited
// forever on its lock).
func TestIndexesOpenTheirOwnStores(t *testing.T) {
	base := t.TempDir()
	b, err := Open(base+"/b", Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Add(md("http://d/b", "Bravo", "# Bravo\n\nbravo page")); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	a, err := Open(base+"/a", Config{}) // created: bleve writes a's path
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Add(md("http://d/a", "Alpha", "# Alpha\n\nalpha page")); err != nil {
		t.Fatal(err)
	}
	opened := make(chan *Index, 1)
	go func() {
		ix, err := Open(base+"/b", Config{})
		if err != nil {
			t.Error(err)
		}
		opened <- ix
	}()
	select {
	case b = <-opened:
	case <-time.After(20 * time.Second):
		t.Fatal("opening b waits (on a's lock)")
	}
	if b == nil {
		return
	}
	defer b.Close()
	for q, want := range map[string]int{"bravo": 1, "alpha": 0} {
		res, err := b.Search(context.Background(), q, 10)
		if err != nil || len(res.Hits) != want {
			t.Errorf("b, %q: %+v %v, want %d hits", q, res, err, want)
		}
	}
}

// A group's words are spread over documents of at most wordsPerDoc words
// (a document of megabytes made zap reserve gigabytes for the next
// segment); counts, merges and a reopen read every document of a group.
func TestWordCountsShards(t *testing.T) {
	dir := t.TempDir() + "/idx"
	ix, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	var body strings.Builder
	n := 2*wordsPerDoc + 500
	for i := range n {
		fmt.Fprintf(&body, "lexeme%05d ", i)
	}
	if err := ix.Add(md("http://d/big", "Big", "# Big\n\n"+body.String())); err != nil {
		t.Fatal(err)
	}
	if err := ix.words.flush(); err != nil {
		t.Fatal(err)
	}
	if g := ix.words.groups; len(g) != 1 || g[0].shards != 3 {
		t.Fatalf("groups %+v, want one of 3 documents", g)
	}
	for i := range wordsMergeGroups {
		if err := ix.Add(md(fmt.Sprintf("http://d/s%d", i), "Small", "# Small\n\nlexeme00007")); err != nil {
			t.Fatal(err)
		}
		if err := ix.words.flush(); err != nil {
			t.Fatal(err)
		}
	}
	ix.words.mu.Lock()
	err = ix.words.mergeLocked()
	ix.words.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		for w, want := range map[string]uint64{"lexeme00007": wordsMergeGroups + 1, fmt.Sprintf("lexeme%05d", n-1): 1, "lexeme02001": 1, "small": wordsMergeGroups} {
			if got := wordCount(t, ix, w); got != want {
				t.Errorf("%s: %s: %d, want %d", when, w, got, want)
			}
		}
	}
	check("merged")
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if ix, err = Open(dir, Config{}); err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	shards := 0
	for _, g := range ix.words.groups {
		shards += g.shards
	}
	if len(ix.words.groups) != 2 || shards != 4 {
		t.Errorf("after a reopen: groups %+v", ix.words.groups)
	}
	check("reopened")
}

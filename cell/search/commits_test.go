package search

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/testwait"
)

// A batch waits for the batches before it that hold one of its pages,
// and for no other.
func TestCommitsWaitForTheSamePage(t *testing.T) {
	var c commits
	a := c.enter([]string{"x", "y"})
	b := c.enter([]string{"y", "z"})
	d := c.enter([]string{"w", "w"}) // a page twice in one batch
	if len(a.after) != 0 || len(b.after) != 1 || b.after[0] != a || len(d.after) != 0 {
		t.Fatalf("after: a %v b %v d %v", a.after, b.after, d.after)
	}
	d.wait() // does not wait for a
	waited := make(chan struct{})
	go func() { b.wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("b committed before a, which holds y")
	case <-time.After(20 * time.Millisecond):
	}
	c.finish(a, t0, true)
	<-waited
	if got := c.holding([]string{"x", "y", "z", "w"}); strings.Join(got, ",") != "y,z,w" {
		t.Errorf("holding %v", got)
	}
	c.finish(b, t0, true)
	c.finish(d, t0, true)
	c.drain()
	if got := c.holding([]string{"x", "y", "z", "w"}); len(got) != 0 {
		t.Errorf("holding after all finished: %v", got)
	}
}

// The watermark counts a batch once every batch prepared before it is
// committed, and stops at a batch that failed.
func TestCommitsWatermark(t *testing.T) {
	var c commits
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	a, b, d := c.enter([]string{"a"}), c.enter([]string{"b"}), c.enter([]string{"d"})
	c.finish(b, at(12), true)
	if w := c.watermark(); !w.IsZero() {
		t.Fatalf("watermark %v with the first batch committing", w)
	}
	c.finish(a, at(10), true)
	if w := c.watermark(); !w.Equal(at(12)) {
		t.Fatalf("watermark %v, want the second batch's", w)
	}
	c.finish(d, at(11), true)
	if w := c.watermark(); !w.Equal(at(12)) {
		t.Fatalf("watermark %v went back", w)
	}
	e, f := c.enter([]string{"e"}), c.enter([]string{"f"})
	c.finish(e, at(20), false)
	c.finish(f, at(30), true)
	if w := c.watermark(); !w.Equal(at(12)) {
		t.Fatalf("watermark %v past a failed batch", w)
	}
}

// Through an Indexer committing several batches at once, a page's last
// version is the one indexed, and the watermark is the latest fetch.
func TestIndexerKeepsTheLastVersion(t *testing.T) {
	ix, err := Open(t.TempDir(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	x := NewIndexer(ix, IndexerConfig{Batch: 1, Workers: 1, Commits: 4, Flush: time.Millisecond})
	ctx := context.Background()
	const versions = 40
	n := 0
	for v := range versions {
		for _, u := range []string{"http://d/same", fmt.Sprintf("http://d/other%d", v)} {
			p := Page{URL: u, ContentType: "text/plain", Body: []byte(fmt.Sprintf("version%d of %s", v, u)), Fetched: t0.Add(time.Duration(n) * time.Second)}
			if err := x.Put(ctx, p); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	if err := testwait.Poll(20*time.Second, func() bool { return x.Indexed() >= uint64(n) }); err != nil {
		t.Fatalf("%v: indexed %d of %d", err, x.Indexed(), n)
	}
	x.Close()
	docs, err := ix.loadAll([]string{"http://d/same"})
	if err != nil || len(docs) != 1 {
		t.Fatalf("load: %v %v", docs, err)
	}
	if want := fmt.Sprintf("version%d", versions-1); !strings.Contains(docs[0].Body, want) {
		t.Errorf("indexed %q, want %s", docs[0].Body, want)
	}
	if w, want := ix.Watermark(), t0.Add(time.Duration(n-1)*time.Second); !w.Equal(want) {
		t.Errorf("watermark %v, want %v", w, want)
	}
}

// A batch is cut at BatchBytes of text as well as at Batch pages: the
// memory a batch's analysis takes follows its text, not its page count,
// and a page larger than the budget is a batch of its own.
func TestIndexerCutsBatchesAtBatchBytes(t *testing.T) {
	ix, err := Open(t.TempDir(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	page := func(name string, words int) Page {
		return Page{URL: "http://d/" + name, ContentType: "text/plain", Body: []byte(strings.Repeat(name+" words ", words)), Fetched: t0}
	}
	size := DocOf(page("p0", 100)).textSize()
	// Flush is long: only a full batch is cut before Close.
	x := NewIndexer(ix, IndexerConfig{BatchBytes: 3 * size, Workers: 1, Flush: time.Hour})
	var pages []Page
	for i := range 10 {
		pages = append(pages, page(fmt.Sprintf("p%d", i), 100))
		if i == 2 {
			pages = append(pages, page("big", 1000))
		}
	}
	for _, p := range pages {
		if err := x.Put(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	x.Close()
	// p0-p2, big, p3-p5, p6-p8, and p9 at Close.
	if got := ix.inflight.next; got != 5 {
		t.Errorf("%d batches, want 5", got)
	}
	if got := ix.Count(); got != uint64(len(pages)) {
		t.Errorf("%d pages indexed, want %d", got, len(pages))
	}
}

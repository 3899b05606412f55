package search

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/content"
	"github.com/trawlhq/trawl/internal/testwait"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func testIndex(t *testing.T, docs ...*Doc) *Index {
	t.Helper()
	ix, err := Open("", Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	if err := ix.Add(docs...); err != nil {
		t.Fatal(err)
	}
	return ix
}

func md(u, title, body string) *Doc { return FromMarkdown(u, title, body, t0) }

func TestSearchRanksTitleAndMarksPassage(t *testing.T) {
	ix := testIndex(t,
		md("http://d/a", "Cooking pasta", "# Cooking pasta\n\nBoil water. Add salt. The pasta cooks in ten minutes.\n\nUnrelated words about gardens and trees and sunlight for a long while."),
		md("http://d/b", "Gardening", "# Gardening\n\nTrees need water and sunlight. Some people eat pasta in the garden once."),
		md("http://d/c", "Astronomy", "# Stars\n\nThe night sky has stars."),
	)
	res, err := ix.Search(context.Background(), "pasta cooking", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) != 2 {
		t.Fatalf("hits: %+v", res.Hits)
	}
	if res.Hits[0].URL != "http://d/a" {
		t.Errorf("first: %s", res.Hits[0].URL)
	}
	if s := res.Hits[0].Snippet; !strings.Contains(s, "<b>pasta</b> <b>cooks</b>") && !strings.Contains(s, "<b>Cooking</b> <b>pasta</b>") {
		t.Errorf("snippet not the best passage, marked: %q", s)
	}
	if strings.Contains(res.Hits[0].Snippet, "gardens") {
		t.Errorf("snippet holds an unrelated passage: %q", res.Hits[0].Snippet)
	}
}

func TestSearchNoResultAndEmpty(t *testing.T) {
	ix := testIndex(t, md("http://d/a", "A", "alpha beta"))
	res, err := ix.Search(context.Background(), "zeta", 10)
	if err != nil || len(res.Hits) != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	if _, err := ix.Search(context.Background(), "  ", 10); err != ErrQuery {
		t.Fatalf("empty query: %v", err)
	}
}

func TestNearDuplicatesCollapse(t *testing.T) {
	body := "# Install\n\nTo install the widget run the installer and follow the steps on the screen until it says done. Then restart the computer and open the widget from the menu."
	ix := testIndex(t,
		md("http://d/install", "Install the widget", body),
		md("http://mirror/install", "Install the widget", body+" Mirror."),
		md("http://d/other", "Other widget page", "# Other\n\nThe widget can also be removed with the remover."),
	)
	res, err := ix.Search(context.Background(), "install widget", 10)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, h := range res.Hits {
		if strings.HasSuffix(h.URL, "/install") {
			n++
		}
	}
	if n != 1 || len(res.Hits) != 2 {
		t.Fatalf("want the copies collapsed to one: %+v", res.Hits)
	}
}

func TestAnchorTextFindsPage(t *testing.T) {
	target := md("http://d/x", "Page X", "# Page X\n\nNothing about the topic here.")
	ix := testIndex(t, target)
	src := md("http://d/src", "Links", "# Links\n\nsee there")
	src.Links = []content.Link{{Href: "http://d/x", Text: "zeppelin manual"}}
	if err := ix.Add(src); err != nil {
		t.Fatal(err)
	}
	// Indexed already: x gets its anchor text at the refresh.
	if n := ix.Stale(); n != 1 {
		t.Fatalf("stale %d, want 1", n)
	}
	if n, err := ix.RefreshAnchors(0); err != nil || n != 1 {
		t.Fatalf("refresh: %d %v", n, err)
	}
	res, err := ix.Search(context.Background(), "zeppelin", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) == 0 || res.Hits[0].URL != "http://d/x" {
		t.Fatalf("anchor text: %+v", res.Hits)
	}
	// A link repeating a text the page has makes nothing stale.
	src2 := md("http://d/src2", "More links", "# More\n\nagain")
	src2.Links = []content.Link{{Href: "http://d/x", Text: "Zeppelin manual"}}
	if err := ix.Add(src2); err != nil {
		t.Fatal(err)
	}
	if n := ix.Stale(); n != 0 {
		t.Fatalf("stale %d after a repeated text", n)
	}
}

// The pages waiting for their anchor text are not forgotten by a restart:
// a clean Close writes them down, and after a crash Open finds them by
// comparing each page's indexed anchor text with the text kept.
func TestStaleAnchorsSurviveRestart(t *testing.T) {
	for _, crash := range []bool{false, true} {
		dir := t.TempDir() + "/idx"
		ix, err := Open(dir, Config{})
		if err != nil {
			t.Fatal(err)
		}
		y := md("http://d/y", "Page Y", "# Page Y\n\nplain")
		if err := ix.Add(md("http://d/x", "Page X", "# Page X\n\nplain"), y); err != nil {
			t.Fatal(err)
		}
		src := md("http://d/src", "Links", "# Links\n\nsee")
		src.Links = []content.Link{{Href: "http://d/x", Text: "zeppelin manual"}, {Href: "http://d/y", Text: "airship guide"}}
		if err := ix.Add(src); err != nil {
			t.Fatal(err)
		}
		if n := ix.Stale(); n != 2 {
			t.Fatalf("stale %d, want 2", n)
		}
		if crash {
			ix.Written(10 * time.Second)
			ix.b.Close() // no Close: the list is not written (nor the dictionary counts waiting)
			ix.words.b.Close()
			ix.anchors.close()
		} else if err := ix.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("reopen crash=%v", crash)
		ix, err = Open(dir, Config{})
		if err != nil {
			t.Fatal(err)
		}
		if n := ix.Stale(); n != 2 {
			t.Fatalf("crash=%v: stale %d after reopening, want 2", crash, n)
		}
		if n, err := ix.RefreshAnchors(1); err != nil || n != 1 || ix.Stale() != 1 {
			t.Fatalf("crash=%v: refresh of 1: %d %v, %d left", crash, n, err, ix.Stale())
		}
		ix.RefreshAnchors(0)
		for _, q := range []string{"zeppelin", "airship"} {
			res, err := ix.Search(context.Background(), q, 10)
			if err != nil || len(res.Hits) == 0 {
				t.Fatalf("crash=%v: %s: %+v %v", crash, q, res, err)
			}
		}
		ix.Close()
	}
}

// The anchor text is kept in a store of its own beside the index
// (anchors.go): it survives a reopen, and a store lost beside a kept index
// is made again from the pages' indexed anchor text.
func TestAnchorsKeptBesideTheIndex(t *testing.T) {
	dir := t.TempDir() + "/idx"
	ix, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	src := md("http://d/src", "Links", "# Links\n\nsee")
	src.Links = []content.Link{{Href: "http://d/x", Text: "zeppelin manual"}, {Href: "http://d/later", Text: "airship guide"}}
	if err := ix.Add(src, md("http://d/x", "Page X", "# Page X\n\nplain")); err != nil {
		t.Fatal(err)
	}
	// The index's internal store holds no anchor text.
	if raw, _ := ix.b.GetInternal([]byte("anchor:http://d/x")); raw != nil {
		t.Fatalf("anchor text in the index's internal store: %s", raw)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"http://d/x": {"zeppelin manual"}, "http://d/later": {"airship guide"}}
	check := func(what string, want map[string][]string) {
		t.Helper()
		ix, err := Open(dir, Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer ix.Close()
		for u, w := range want {
			if got, err := ix.AnchorText(u); err != nil || !slices.Equal(got, w) {
				t.Fatalf("%s: anchor text of %s: %q %v, want %q", what, u, got, err, w)
			}
		}
		if res, err := ix.Search(context.Background(), "zeppelin", 10); err != nil || len(res.Hits) == 0 || res.Hits[0].URL != "http://d/x" {
			t.Fatalf("%s: search by anchor text: %+v %v", what, res, err)
		}
	}
	check("reopened", want)
	if err := os.RemoveAll(anchorsPath(dir)); err != nil {
		t.Fatal(err)
	}
	// Made again from what the pages were indexed with: the text of a link
	// to a page not indexed is lost with the store.
	check("lost", map[string][]string{"http://d/x": {"zeppelin manual"}, "http://d/later": nil})
}

func TestOpenOnDiskSurvivesReopen(t *testing.T) {
	dir := t.TempDir() + "/idx"
	ix, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Add(md("http://d/a", "Alpha", "alpha words")); err != nil {
		t.Fatal(err)
	}
	ix.Close()
	ix, err = Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if ix.Count() != 1 {
		t.Fatalf("count after reopen: %d", ix.Count())
	}
}

// An index on disk made with another mapping (no format file, or an older
// one: an upgrade) is dropped when opened, so the cell rebuilds it from its
// archive with every field the ranking reads.
func TestIndexOfAnotherFormatIsDropped(t *testing.T) {
	dir := t.TempDir() + "/idx"
	for _, old := range []string{"", "2"} {
		ix, err := Open(dir, Config{})
		if err != nil {
			t.Fatal(err)
		}
		if err := ix.Add(md("http://d/a", "Alpha", "alpha words")); err != nil {
			t.Fatal(err)
		}
		ix.Close()
		if old == "" {
			os.Remove(formatPath(dir))
		} else if err := os.WriteFile(formatPath(dir), []byte(old+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		ix, err = Open(dir, Config{})
		if err != nil {
			t.Fatal(err)
		}
		if n := ix.Count(); n != 0 || !currentFormat(dir) {
			t.Errorf("format %q: %d docs after opening (want 0, to be rebuilt), current format %v", old, n, currentFormat(dir))
		}
		ix.Close()
	}
}

func TestFromHTML(t *testing.T) {
	page := `<html lang="en"><head><title>Widget news</title>
<script type="application/ld+json">{"@context":"https://schema.org","@type":"NewsArticle","headline":"Widget","datePublished":"2025-05-01"}</script></head>
<body><article><h1>Widget news</h1><p>The widget shipped today with many new features for everyone.</p><h2>Details</h2><p>It has a <a href="/specs">specification sheet</a> too, long enough to be content.</p></article></body></html>`
	d, err := FromHTML([]byte(page), "http://d/news", t0)
	if err != nil {
		t.Fatal(err)
	}
	if d.Title != "Widget news" || d.Type != "NewsArticle" || d.Lang != "en" || d.Date.Year() != 2025 {
		t.Errorf("doc: %+v", d)
	}
	// The article's headline is its title (the content pipeline keeps an
	// article's h1 out of the Markdown); the sections are headings.
	if !slices.Contains(d.Headings, "Details") {
		t.Errorf("headings: %q", d.Headings)
	}
	if !strings.Contains(d.Body, "specification sheet too") && !strings.Contains(d.Body, "specification sheet") {
		t.Errorf("body: %q", d.Body)
	}
	found := false
	for _, l := range d.Links {
		found = found || (l.Href == "http://d/specs" && l.Text == "specification sheet")
	}
	if !found {
		t.Errorf("links: %+v", d.Links)
	}
}

func TestBrokenIndexIsSetAsideAndStartedAgain(t *testing.T) {
	dir := t.TempDir() + "/idx"
	ix, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ix.Close()
	if err := os.WriteFile(dir+"/index_meta.json", []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	ix, err = Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if ix.Count() != 0 {
		t.Fatalf("count %d", ix.Count())
	}
	if m, _ := filepath.Glob(dir + ".broken-*"); len(m) != 1 {
		t.Fatalf("set aside: %q", m)
	}
}

func TestSimhashIsFNVOfShingles(t *testing.T) {
	// The hash of each 3-word shingle is FNV-1a of the words joined by
	// spaces (an index's stored hashes stay comparable with new ones); a
	// bit is set when more than half the shingles' hashes have it. The
	// long text passes the counters' flush (255 shingles) twice.
	var long []string
	for i := range 700 {
		long = append(long, fmt.Sprintf("w%d", i%97))
	}
	for _, text := range []string{"Alpha beta gamma delta", "one", strings.Join(long, " ")} {
		ws := strings.Fields(strings.ToLower(text))
		var shingles []string
		for i := 0; i == 0 || i+3 <= len(ws); i++ {
			shingles = append(shingles, strings.Join(ws[i:min(i+3, len(ws))], " "))
		}
		var v [64]int
		for _, sh := range shingles {
			h := fnv.New64a()
			h.Write([]byte(sh))
			x := h.Sum64()
			for b := 0; b < 64; b++ {
				if x&(1<<b) != 0 {
					v[b]++
				} else {
					v[b]--
				}
			}
		}
		var want uint64
		for b := 0; b < 64; b++ {
			if v[b] > 0 {
				want |= 1 << b
			}
		}
		if got := simhash(text); got != want {
			t.Fatalf("%.30q: simhash %x, want %x", text, got, want)
		}
	}
}

func TestIdentifiers(t *testing.T) {
	got := identifiers("Call os.path.join() or pg_trigger_depth, not a sentence. And __init__ too.")
	// __init__ is trimmed to "init": not a name joined by _ or .
	if !slices.Equal(got, []string{"os.path.join", "path.join", "pg_trigger_depth"}) {
		t.Fatalf("identifiers: %q", got)
	}
}

func TestDefinitions(t *testing.T) {
	d := md("http://d/os", "os", "# os — Miscellaneous interfaces\nos.getcwd()\nReturn a string representing the current working directory.\nclass validators.ASCIIUsernameValidator\ncreate_user ( username , email=None )\nusername\nThis sentence is long and ends with a full stop, so it defines nothing at all.")
	got := definitions(d)
	for _, want := range []string{"os.getcwd", "getcwd", "validators.asciiusernamevalidator", "asciiusernamevalidator", "create_user", "username"} {
		if !slices.Contains(got, want) {
			t.Errorf("definitions %q lack %q", got, want)
		}
	}
	if slices.ContainsFunc(got, func(k string) bool { return strings.Contains(k, "sentence") }) {
		t.Errorf("a sentence taken as a definition: %q", got)
	}
	// A query that is a defined name finds the page that defines it.
	ix := testIndex(t, d, md("http://d/other", "Other", "The getcwd function is mentioned here, and getcwd again, getcwd."))
	res, err := ix.Search(context.Background(), "getcwd", 10)
	if err != nil || len(res.Hits) == 0 || res.Hits[0].URL != "http://d/os" {
		t.Fatalf("getcwd: %+v %v", res, err)
	}
}

// A full queue drops pages; once it has room again the indexer hands
// the earliest dropped fetch time to Dropped (the cell indexes from its
// archive from there).
func TestIndexerReportsDroppedPages(t *testing.T) {
	ix := testIndex(t)
	got := make(chan time.Time, 4)
	x := NewIndexer(ix, IndexerConfig{Queue: 1, Batch: 1, Workers: 1, Flush: time.Millisecond, Dropped: func(since time.Time) { got <- since }})
	defer x.Close()
	page := func(i int) Page {
		return Page{URL: "http://d/p" + strconv.Itoa(i), ContentType: "text/plain", Body: []byte("words of page " + strconv.Itoa(i)), Fetched: t0.Add(time.Duration(i) * time.Second)}
	}
	for i := 0; x.Dropped() == 0; i++ {
		if i > 100000 {
			t.Fatal("the queue of one never filled")
		}
		x.Enqueue(page(i + 10))
	}
	select {
	case since := <-got:
		if since.Before(t0.Add(10*time.Second)) || since.After(t0.Add(time.Duration(10+x.Dropped()+100000)*time.Second)) {
			t.Errorf("since %v", since)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Dropped was not called")
	}
}

// Put waits for room instead of dropping; senders racing Close neither
// panic nor hang, and Put after Close says so.
func TestIndexerPutWaitsAndCloseRacesSenders(t *testing.T) {
	ix := testIndex(t)
	x := NewIndexer(ix, IndexerConfig{Queue: 1, Batch: 4, Workers: 1, Flush: time.Millisecond})
	ctx := context.Background()
	const n = 200
	for i := range n {
		p := Page{URL: "http://d/p" + strconv.Itoa(i), ContentType: "text/plain", Body: []byte("words of page " + strconv.Itoa(i)), Fetched: t0}
		if err := x.Put(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := testwait.Poll(10*time.Second, func() bool { return x.Indexed() >= n }); err != nil {
		t.Fatalf("%v: indexed %d of %d", err, x.Indexed(), n)
	}
	if x.Dropped() != 0 {
		t.Fatalf("Put dropped %d", x.Dropped())
	}
	var wg sync.WaitGroup
	var sent atomic.Int64
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				p := Page{URL: fmt.Sprintf("http://d/g%d-%d", g, i), ContentType: "text/plain", Body: []byte("more words"), Fetched: t0}
				if g%2 == 0 {
					x.Enqueue(p)
				} else if err := x.Put(ctx, p); err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Error(err)
					}
				}
				sent.Add(1)
				if i > 50 && x.closed() {
					return
				}
			}
		}()
	}
	for sent.Load() < 100 { // the senders are running when Close comes
		runtime.Gosched()
	}
	x.Close()
	wg.Wait()
	if err := x.Put(ctx, Page{URL: "http://d/late", Body: []byte("x")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Put after Close: %v", err)
	}
}

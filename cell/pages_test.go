package cell

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/cell/search"
	"github.com/trawlhq/trawl/internal/jsnode/jsnodetest"
	"github.com/trawlhq/trawl/internal/members"
	"github.com/trawlhq/trawl/internal/searchapi"
	"github.com/trawlhq/trawl/internal/store"
)

// found reports whether c's index answers q with url first.
func found(t *testing.T, c *Cell, q, url string) bool {
	t.Helper()
	l, err := c.SearchIndex().Local(context.Background(), q, searchapi.Options{N: 3})
	return err == nil && len(l.Results) > 0 && l.Results[0].URL == url
}

// startSeed starts the region's gate member the cells join through.
func startSeed(t *testing.T) *members.Cluster {
	t.Helper()
	seed, err := members.Start(members.Config{
		Meta: members.Meta{Role: members.RoleGate, Region: "eu", Name: "g1"},
		Keys: testKeys.All(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seed.Close() })
	return seed
}

// pageAbout is a page whose main content talks about word.
func pageAbout(word string) []byte {
	return fmt.Appendf(nil, `<!doctype html><html><head><title>The %[1]s page</title></head><body><main><h1>About %[1]s</h1>
<p>This page is the one that talks about %[1]s at length, in a paragraph long enough to be the main content of it.</p></main></body></html>`, word)
}

// A page a clustered cell archives is indexed by another cell of its
// region too (cell/pages.go): kept in that cell's store before it is
// acked, and searchable there; each cell's pages go to the other.
func TestPageCopiesIndexedOnAnotherCell(t *testing.T) {
	seed := startSeed(t)
	c1 := startClusteredCell(t, seed, "c1")
	c2 := startClusteredCell(t, seed, "c2")
	jsnodetest.WaitFor(t, 90*time.Second, "both cells sharing, each the other's peer for page copies", func() (bool, string) {
		ok := true
		var views []string
		for _, c := range []*Cell{c1, c2} {
			h := c.JetStreamHealth()
			views = append(views, fmt.Sprintf("%s %+v pages=%v", c.Name(), h, c.pages.Load() != nil))
			ok = ok && h.Ready && h.ClusterSize == 2 && c.pages.Load() != nil
		}
		return ok, fmt.Sprint(views)
	})
	if !c1.freshDisk || !c2.freshDisk {
		t.Fatal("new cells should start with freshDisk set")
	}

	page := pageAbout
	archive := func(c *Cell, url, word string) {
		c.archived(url, "text/html; charset=utf-8", page(word), nil, time.Now())
	}
	u1, u2 := "https://one.example/kestrel", "https://two.example/pangolin"
	// The peers list comes from gossip: wait until each sees the other.
	jsnodetest.WaitFor(t, 30*time.Second, "each cell sees the other as a peer", func() (bool, string) {
		pc1, pc2 := c1.pages.Load(), c2.pages.Load()
		return len(pc1.peers()) == 1 && len(pc2.peers()) == 1, fmt.Sprint(pc1.peers(), pc2.peers())
	})
	archive(c1, u1, "kestrel")
	archive(c2, u2, "pangolin")
	jsnodetest.WaitFor(t, 30*time.Second, "each page searchable on both cells", func() (bool, string) {
		ok := found(t, c1, "kestrel", u1) && found(t, c2, "kestrel", u1) && found(t, c2, "pangolin", u2) && found(t, c1, "pangolin", u2)
		return ok, fmt.Sprintf("c1 %+v c2 %+v", c1.PageCopies(), c2.PageCopies())
	})
	for _, c := range []struct {
		cell *Cell
		url  string
	}{{c2, u1}, {c1, u2}} {
		if _, err := c.cell.store.Get(pageCopyKey(c.url)); err != nil {
			t.Errorf("%s has no copy of %s in its store: %v", c.cell.Name(), c.url, err)
		}
		if s := c.cell.PageCopies(); s.Sent != 1 || s.Indexed != 1 || s.Dropped != 0 {
			t.Errorf("%s page copies %+v, want 1 sent, 1 indexed", c.cell.Name(), s)
		}
	}

	// The copy is in the rebuild's reach: an index rebuilt from c2's
	// store (a lost index, or the catch-up after a crash) holds c1's page.
	ix, err := search.Open(t.TempDir()+"/rebuilt", search.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if n, err := c2.RebuildSearchInto(context.Background(), ix); err != nil || n != 1 {
		// (its own page was handed to the index directly, not archived
		// by a scrape)
		t.Fatalf("rebuilt %d pages from c2's store (%v), want c1's copy", n, err)
	}
	if l, err := ix.Local(context.Background(), "kestrel", searchapi.Options{N: 3}); err != nil || len(l.Results) == 0 || l.Results[0].URL != u1 {
		t.Errorf("the rebuilt index does not find c1's page: %+v %v", l, err)
	}
}

// copyTo spreads a site's pages evenly over the peers and keeps each
// page's choice while the peers do not change.
func TestCopyToSpreads(t *testing.T) {
	peers := []string{"c1", "c3"}
	count := map[string]int{}
	for i := range 3000 {
		u := fmt.Sprintf("http://127.0.0.1:41234/w/%d", i)
		to := copyTo(u, peers)
		if to != copyTo(u, []string{"c3", "c1"}) {
			t.Fatalf("%s: the choice depends on the peers' order", u)
		}
		count[to]++
	}
	for _, p := range peers {
		if count[p] < 1300 {
			t.Errorf("%s took %d of 3000 pages, want about half: %v", p, count[p], count)
		}
	}
	if copyTo("x", nil) != "" {
		t.Error("no peer: a copy went somewhere")
	}
}

// A cell gone for longer than recopyAfter leaves no page indexed on one
// cell only: the others copy again the pages it held copies of, and its
// own pages they hold (pages.go, recopy), so every page of the region is
// on the two cells left.
func TestGoneCellsPagesCopiedAgain(t *testing.T) {
	peersOf := func(name string) []string {
		return slices.DeleteFunc([]string{"c1", "c2", "c3"}, func(c string) bool { return c == name })
	}
	// Put back after the cells' own cleanups, which wait for their
	// goroutines (a deferred write raced with them: CI, -race).
	was := recopyAfter
	t.Cleanup(func() { recopyAfter = was })
	recopyAfter = time.Second
	seed := startSeed(t)
	c1 := startClusteredCell(t, seed, "c1")
	c2 := startClusteredCell(t, seed, "c2")
	c3, stop3 := startStoppableCell(t, seed, "c3")
	cells := []*Cell{c1, c2, c3}
	jsnodetest.WaitFor(t, 120*time.Second, "three cells sharing pages, each with two peers", func() (bool, string) {
		ok := true
		var views []string
		for _, c := range cells {
			h := c.JetStreamHealth()
			pc := c.pages.Load()
			views = append(views, fmt.Sprintf("%s %+v pages=%v", c.Name(), h, pc != nil))
			ok = ok && h.Ready && h.ClusterSize == 3 && pc != nil && len(pc.peers()) == 2
		}
		return ok, fmt.Sprint(views)
	})
	type pg struct {
		url, word string
		origin    *Cell
	}
	var pages []pg
	for i, c := range cells {
		for j := range 8 {
			w := fmt.Sprintf("zq%dx%d", i, j)
			p := pg{url: fmt.Sprintf("https://site%d.example/%s", i, w), word: w, origin: c}
			pages = append(pages, p)
			c.archived(p.url, "text/html; charset=utf-8", pageAbout(w), nil, time.Now())
		}
	}
	on := func(p pg, among []*Cell) int {
		n := 0
		for _, c := range among {
			if found(t, c, p.word, p.url) {
				n++
			}
		}
		return n
	}
	jsnodetest.WaitFor(t, 30*time.Second, "every page on two cells", func() (bool, string) {
		for _, p := range pages {
			if on(p, cells) < 2 {
				return false, p.url
			}
		}
		return true, ""
	})
	held := 0 // pages of c1 and c2 whose copy c3 held
	for _, p := range pages {
		if p.origin != c3 && copyTo(p.url, peersOf(p.origin.Name())) == "c3" {
			held++
		}
	}
	gone := time.Now()
	stop3()
	jsnodetest.WaitFor(t, 60*time.Second, "every page of the region on c1 and c2", func() (bool, string) {
		var missing []string
		for _, p := range pages {
			if on(p, []*Cell{c1, c2}) < 2 {
				missing = append(missing, p.url)
			}
		}
		return len(missing) == 0, fmt.Sprintf("%d missing; c1 %+v c2 %+v", len(missing), c1.PageCopies(), c2.PageCopies())
	})
	r1, r2 := c1.PageCopies().Recopied, c2.PageCopies().Recopied
	// c3's 8 own pages, each held by c1 or c2, and the c1/c2 pages it
	// held; more if gossip lost sight of c1 or c2 for a second meanwhile
	// (a loaded machine: recopyAfter is 1 s here, 2 minutes in a cell).
	if r1+r2 < uint64(8+held) {
		t.Errorf("recopied %d + %d, want at least %d (c3's 8 pages and the %d it held)", r1, r2, 8+held, held)
	}
	t.Logf("c3 gone: %d pages copied again (c3's 8, and %d of the others' it held), every page on the two cells left %v after it went",
		r1+r2, held, time.Since(gone).Round(100*time.Millisecond))
}

// Pages archived while no other cell could take their copy (a region of
// one) are owed (owed.go), and so are pages of the archive that were
// never offered (as those archived before sharing began, or queued when
// a process died), when fetched after the owed time: once a second cell
// is there, the archive's pages from the owed time on are sent, and each
// is searchable on the second cell.
func TestOwedCopiesSentWhenAPeerComes(t *testing.T) {
	wasEvery, wasRetry := owedEvery, owedRetry
	t.Cleanup(func() { owedEvery, owedRetry = wasEvery, wasRetry })
	owedEvery, owedRetry = 200*time.Millisecond, time.Second
	seed := startSeed(t)
	c1 := startClusteredCell(t, seed, "c1")
	jsnodetest.WaitFor(t, 60*time.Second, "c1 sharing pages", func() (bool, string) {
		return c1.pages.Load() != nil, fmt.Sprintf("%+v", c1.JetStreamHealth())
	})
	type pg struct{ url, word string }
	var pages []pg
	offered := 0
	for i := range 6 {
		w := fmt.Sprintf("zqowed%d", i)
		p := pg{url: "https://owed.example/" + w, word: w}
		pages = append(pages, p)
		body := pageAbout(w)
		ap := &scrape.ArchivedPage{URL: p.url, Status: 200, ContentType: "text/html; charset=utf-8", FetchedAt: time.Now().UTC(), Body: body}
		if err := c1.store.Set(scrape.ArchiveKey(p.url), scrape.EncodeArchived(ap), store.Sync); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 { // the others are in the archive only
			c1.archived(p.url, ap.ContentType, body, nil, ap.FetchedAt)
			offered++
		}
	}
	// Each offer found no other cell, and nothing was sent. (Alone counts
	// attempts: on a loaded machine the owed catch-up from the archive or
	// a retry may count a page again before the offers were all seen.)
	jsnodetest.WaitFor(t, 10*time.Second, "the offered pages' copies owed, with no other cell", func() (bool, string) {
		s := c1.PageCopies()
		return s.Alone >= uint64(offered) && s.Sent == 0, fmt.Sprintf("%+v", s)
	})
	came := time.Now()
	c2 := startClusteredCell(t, seed, "c2")
	jsnodetest.WaitFor(t, 120*time.Second, "every page of c1 searchable on c2", func() (bool, string) {
		var missing []string
		for _, p := range pages {
			if !found(t, c2, p.word, p.url) {
				missing = append(missing, p.url)
			}
		}
		return len(missing) == 0, fmt.Sprintf("missing %v; c1 %+v c2 %+v", missing, c1.PageCopies(), c2.PageCopies())
	})
	if s := c1.PageCopies(); s.CaughtUp < uint64(len(pages)) {
		t.Errorf("c1 page copies %+v, want all %d caught up", s, len(pages))
	}
	t.Logf("c1's %d pages (%d offered with no peer, %d in its archive only) on c2 %v after c2 started",
		len(pages), offered, len(pages)-offered, time.Since(came).Round(100*time.Millisecond))
}

package cell

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"time"

	"github.com/trawlhq/trawl/cell/content"
	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/cell/search"
)

// openSearch opens the cell's search index (DataDir/search) and its
// indexer, which the scrape service tells of every page it archives.
func (c *Cell) openSearch() error {
	ix, err := search.Open(filepath.Join(c.cfg.DataDir, "search"), search.Config{})
	if err != nil {
		return err
	}
	c.index = ix
	c.indexer = search.NewIndexer(ix, search.IndexerConfig{Logger: c.cfg.Logger})
	return nil
}

// archived is scrape.Config.Archived: a page for the index. Pages from
// private addresses are indexed only by a cell that may fetch them
// (development and tests); others never reach the archive.
// The scrape's own conversion of the page comes with it: the indexer does
// not convert it again.
func (c *Cell) archived(u, contentType string, body []byte, doc *content.Document, fetched time.Time) {
	if c.indexer == nil || (!c.cfg.AllowPrivateNetworks && privateHost(u)) {
		return
	}
	c.indexer.Enqueue(search.Page{URL: u, ContentType: contentType, Body: body, Content: doc, Fetched: fetched})
}

func privateHost(u string) bool {
	p, err := url.Parse(u)
	if err != nil {
		return true
	}
	a, err := netip.ParseAddr(p.Hostname())
	return err == nil && (a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsUnspecified())
}

// rebuildSearch indexes the archive when the index is empty and the
// archive is not (a new index, or one lost with its disk): a cell's pages
// are searchable again without refetching them.
//
// A non-empty index is caught up instead: the pages archived after its
// watermark (the latest fetch time of the pages it has written) are
// indexed again. A batch is searchable before it is written, so a cell
// that crashed may have lost its last batches from the index; they are
// still in the archive, and come back here.
func (c *Cell) rebuildSearch(ctx context.Context) {
	defer close(c.rebuilt)
	var since time.Time
	what := "rebuilt"
	if c.index.Count() > 0 {
		since, what = c.index.Watermark(), "caught up"
		if since.IsZero() {
			return // an index from before watermarks: nothing to compare
		}
	}
	start := time.Now()
	n, err := c.rebuildInto(ctx, c.index, since)
	if err != nil && ctx.Err() == nil {
		c.cfg.Logger.Warn("search: rebuilding the index from the archive failed", "err", err)
	}
	if n > 0 {
		c.cfg.Logger.Info("search: index "+what+" from the archive", "pages", n, "took", time.Since(start).Round(time.Millisecond))
	}
}

// rebuildInto indexes into ix the archived pages fetched after since.
func (c *Cell) rebuildInto(ctx context.Context, ix *search.Index, since time.Time) (int, error) {
	return ix.Rebuild(ctx, func(yield func(search.Page) bool) error {
		return c.scrape.ScanArchive(func(p *scrape.ArchivedPage) bool {
			if p.Private || !c.cfg.AllowPrivateNetworks && privateHost(p.URL) || !p.FetchedAt.After(since) {
				return true
			}
			return yield(search.Page{URL: p.URL, ContentType: p.ContentType, Body: p.Body, Fetched: p.FetchedAt})
		})
	})
}

// RebuildSearchInto indexes the cell's whole archive into ix (a fresh
// index: the indexing benchmark of gate/gatetest, TestSearchSpeed).
func (c *Cell) RebuildSearchInto(ctx context.Context, ix *search.Index) (int, error) {
	return c.rebuildInto(ctx, ix, time.Time{})
}

// SearchIndex is the cell's search index.
func (c *Cell) SearchIndex() *search.Index { return c.index }

func (c *Cell) handleSearchLocal(w http.ResponseWriter, r *http.Request) {
	c.index.ServeLocal(w, r)
}

// closeSearch stops the rebuild and the indexer and closes the index.
func (c *Cell) closeSearch() error {
	if c.index == nil {
		return nil
	}
	c.stopRebuild()
	<-c.rebuilt
	c.indexer.Close()
	return c.index.Close()
}

// Indexed is how many pages the cell has indexed since it started.
func (c *Cell) Indexed() uint64 { return c.indexer.Indexed() }

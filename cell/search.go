package cell

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"time"

	"github.com/trawlhq/trawl/cell/content"
	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/cell/search"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/searchapi"
	"github.com/trawlhq/trawl/internal/store"
)

// openSearch opens the cell's search index (DataDir/search) and its
// indexer, which the scrape service tells of every page it archives.
func (c *Cell) openSearch() error {
	ix, err := search.Open(filepath.Join(c.cfg.DataDir, "search"), search.Config{})
	if err != nil {
		return err
	}
	c.index = ix
	c.dropCtx, c.dropCancel = context.WithCancel(context.Background())
	c.indexer = search.NewIndexer(ix, search.IndexerConfig{Logger: c.cfg.Logger, Dropped: c.indexDropped})
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
	if pc := c.pages.Load(); pc != nil {
		pc.offer(&scrape.ArchivedPage{URL: u, ContentType: contentType, FetchedAt: fetched.UTC(), Body: body})
	}
}

// indexable reports whether an archived page is indexed (and copied to
// another cell): not a private page, nor one from a private address
// unless the cell may fetch those.
func (c *Cell) indexable(p *scrape.ArchivedPage) bool {
	return !p.Private && (c.cfg.AllowPrivateNetworks || !privateHost(p.URL))
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

// rebuildInto indexes into ix the archived pages fetched after since,
// and the copies of other cells' pages received after it (pages.go).
func (c *Cell) rebuildInto(ctx context.Context, ix *search.Index, since time.Time) (int, error) {
	return ix.Rebuild(ctx, func(yield func(search.Page) bool) error {
		more := true
		each := func(p *scrape.ArchivedPage) bool {
			if !c.indexable(p) || !p.FetchedAt.After(since) {
				return true
			}
			// The body is valid during the call only; the rebuild
			// converts it on another goroutine.
			more = yield(search.Page{URL: p.URL, ContentType: p.ContentType, Body: bytes.Clone(p.Body), Fetched: p.FetchedAt})
			return more
		}
		if err := c.scrape.ScanArchive(each); err != nil || !more {
			return err
		}
		return scrape.ScanArchived(c.store, []byte(store.PrefixPageCopy), each)
	})
}

// indexDropped indexes from the archive the pages fetched since the
// earliest one the indexer's full queue dropped (and any after it: a page
// indexed again is replaced).
func (c *Cell) indexDropped(since time.Time) {
	<-c.rebuilt // after the start's own rebuild or catch-up
	n, err := c.rebuildInto(c.dropCtx, c.index, since.Add(-time.Nanosecond))
	if err != nil && c.dropCtx.Err() == nil {
		c.cfg.Logger.Warn("search: indexing the pages a full queue dropped failed", "err", err)
	}
	c.dropped.Add(uint64(n))
}

// RebuildSearchInto indexes the cell's whole archive into ix (a fresh
// index: the indexing benchmark of regiontest, TestSearchSpeed).
func (c *Cell) RebuildSearchInto(ctx context.Context, ix *search.Index) (int, error) {
	return c.rebuildInto(ctx, ix, time.Time{})
}

// DroppedPages is how many pages the index queue dropped (then indexed
// from the archive).
func (c *Cell) DroppedPages() uint64 { return c.indexer.Dropped() }

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
	c.dropCancel()
	c.indexer.WaitRecovered()
	return c.index.Close()
}

// Indexed is how many pages the cell has indexed since it started (pages
// a full queue dropped count when they are indexed from the archive).
func (c *Cell) Indexed() uint64 { return c.indexer.Indexed() + c.dropped.Load() }

// handleSearchGenerate is POST /search/generate: the operator's model
// (--llm-provider, as /extract's) writes an answer from the passages the
// gate sends; the tokens are in the signed usage report, which the gate
// bills with the answer. 501 when the cell has no model.
func (c *Cell) handleSearchGenerate(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Model == nil || c.cfg.Model.Client == nil {
		httpjson.Error(w, http.StatusNotImplemented, "no_model", "this cell has no language model (--llm-provider)")
		return
	}
	var req searchapi.GenerateRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		httpjson.Error(w, http.StatusBadRequest, "bad_input", "the body must be {\"q\": …, \"passages\": […]}")
		return
	}
	if err := searchapi.CheckQuery(req.Q); err != nil || len(req.Passages) == 0 || len(req.Passages) > searchapi.MaxGeneratePassages {
		httpjson.Error(w, http.StatusBadRequest, "bad_input", fmt.Sprintf("q (1 to %d characters) and 1 to %d passages are required", searchapi.MaxQuery, searchapi.MaxGeneratePassages))
		return
	}
	g, err := search.Generate(r.Context(), c.cfg.Model.Client, req.Q, req.Passages)
	u := metering.Usage{Kind: metering.KindAnswer, Engine: "model", Cache: metering.CacheMiss, InTokens: g.InTokens, OutTokens: g.OutTokens, Boxes: []string{"model"}}
	w.Header().Set(metering.Header, u.String())
	if err != nil {
		c.cfg.Logger.Warn("search: the model did not answer", "err", err)
		httpjson.Error(w, http.StatusBadGateway, "model_failed", "the language model did not answer")
		return
	}
	httpjson.Write(w, http.StatusOK, g)
}

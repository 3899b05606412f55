package cell

import (
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/cell/search"
	"github.com/trawlhq/trawl/internal/jsnode"
	"github.com/trawlhq/trawl/internal/store"
)

// Page copies (issue 33, docs/search.md "A dead cell"): each page a
// clustered cell archives for the index is also indexed by one other
// cell of its region, so a query finds it while either of the two is
// alive. The archiving cell sends the page's archive record (compressed)
// on TRAWL_PAGES to the cell the page's URL picks among the region's
// other ready, undrained cells (rendezvous hashing: the same URL goes to
// the same cell while the region does not change); that cell keeps it
// under PrefixPageCopy, with the time it came as its fetch time, and
// indexes it like a page of its own. The gate already asks every live
// cell and keeps one hit a URL.
//
// Kept on the receiver's disk before the ack, the copy is in the index
// watermark's reach: a receiver that crashes before its batch was written
// indexes it again from its store at start, as it does its own archive.
// A receiver back on an empty disk replays its consumer from the start,
// and the copies of its own pages the others hold (OwnPagesFilter), from
// the stream, which keeps the last version of each page and pair for
// 30 days or 1 GiB.

// A cell gone for longer than recopyAfter (dead, or down for long: a
// restart is shorter) leaves pages indexed on one cell only: the pages
// of this cell it held copies of, and its own pages whose copies this
// cell holds. Each cell then copies those again to the cell the page's
// URL now picks (recopy), from the stream, which has them: the region is
// back to two copies a page without the gone cell. A cell that comes
// back keeps what it had (a third copy; the gate keeps one hit a URL).
// Cells gone before this process began sharing are not looked for.

// recopyAfter is how long a cell may be gone before its share of the
// page copies is made again elsewhere (a var: tests shorten it).
var recopyAfter = 2 * time.Minute

// maxPageCopy is the largest compressed record sent: the rest of a
// message (1 MiB at most) is its subject and headers. A larger page is
// indexed by its own cell only (counted).
const maxPageCopy = 1<<20 - 8<<10

// pageCopyQueue is how many pages wait to be sent; beyond it a page is
// indexed by its own cell only (counted).
const pageCopyQueue = 4096

// PageCopyStats is the page copies' part of the cell's /health.
type PageCopyStats struct {
	// Sent: pages sent to the cell that indexes them too; Alone: pages
	// archived while no other cell could take a copy; Dropped: pages the
	// full queue, a failed send or their size kept from being sent.
	Sent    uint64 `json:"sent"`
	Alone   uint64 `json:"alone"`
	Dropped uint64 `json:"dropped"`
	// Indexed: copies of other cells' pages this cell indexed (Replayed
	// of them read again after an empty disk); Skipped: copies of pages
	// this cell may not index (private addresses).
	Indexed  uint64 `json:"indexed"`
	Replayed uint64 `json:"replayed"`
	Skipped  uint64 `json:"skipped"`
	// Recopied: copies this cell made again because the cell that held
	// one, or the page's own cell, was gone for longer than 2 minutes.
	Recopied uint64 `json:"recopied"`
	// CaughtUp: copies of this cell's pages queued again from its archive
	// because they were owed (not sent when archived, owed.go).
	CaughtUp uint64 `json:"caught_up"`
}

type pageCopies struct {
	c     *Cell
	js    jetstream.JetStream
	peers func() []string // the region's other cells that may take a copy
	live  func() []string // the region's other live cells, drained or not
	out   chan *scrape.ArchivedPage
	// since is when this process began sharing pages: a copy sent after
	// it is of a page its store has.
	since time.Time

	// The copies still owed (owed.go): pages queued or being sent, and
	// the earliest fetch time of a page whose copy was not sent.
	mu       sync.Mutex
	pending  map[*scrape.ArchivedPage]struct{}
	owedFrom time.Time
	scanning time.Time     // a catch-up's from while it queues pages
	owedSent atomic.Uint64 // copies sent by a catch-up

	sent, alone, dropped, indexed, replayed, skipped, recopied atomic.Uint64
	warned                                                     atomic.Int64 // unix s of the last send warning
}

// PageCopies reports the page copies (zero for a cell that does not share).
func (c *Cell) PageCopies() PageCopyStats {
	pc := c.pages.Load()
	if pc == nil {
		return PageCopyStats{}
	}
	return PageCopyStats{Sent: pc.sent.Load(), Alone: pc.alone.Load(), Dropped: pc.dropped.Load(),
		Indexed: pc.indexed.Load(), Replayed: pc.replayed.Load(), Skipped: pc.skipped.Load(), Recopied: pc.recopied.Load(),
		CaughtUp: pc.owedSent.Load()}
}

// sharePages starts sending this cell's pages to the region and indexing
// the copies the others send it, until ctx ends. fresh: the cell started
// on a store without pages (a new cell, or one whose disk was lost).
func (c *Cell) sharePages(ctx context.Context, js jetstream.JetStream, peers, live func() []string, fresh bool) error {
	pc := &pageCopies{c: c, js: js, peers: peers, live: live, out: make(chan *scrape.ArchivedPage, pageCopyQueue),
		since: time.Now(), pending: map[*scrape.ArchivedPage]struct{}{}}
	cfg := jsnode.PagesConsumer(c.cfg.Name)
	if fresh {
		// What the consumer acked went into a disk that is gone.
		if err := js.DeleteConsumer(ctx, jsnode.StreamPages, cfg.Durable); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return err
		}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, jsnode.StreamPages, cfg)
	if err != nil {
		return err
	}
	c.pages.Store(pc)
	// In the node's wait group: the cell's Close waits for them (they
	// write to the store and the index) before it closes either.
	for range 2 {
		c.js.wg.Go(func() { pc.send(ctx) })
	}
	c.js.wg.Go(func() {
		if fresh {
			pc.replayOwn(ctx)
		}
		pc.receive(ctx, cons)
	})
	c.js.wg.Go(func() { pc.watchGone(ctx) })
	c.js.wg.Go(func() { pc.keepOwed(ctx) })
	return nil
}

// watchGone follows the region's other cells and copies again the pages
// whose second copy a cell gone for recopyAfter took with it.
func (pc *pageCopies) watchGone(ctx context.Context) {
	seen := map[string]time.Time{} // cells live since this began, when last seen
	done := map[string]bool{}      // gone cells whose pages were copied again
	t := time.NewTicker(min(5*time.Second, recopyAfter/2))
	defer t.Stop()
	for {
		now := time.Now()
		for _, name := range pc.live() {
			seen[name] = now
			delete(done, name)
		}
		for name, at := range seen {
			if done[name] || now.Sub(at) < recopyAfter {
				continue
			}
			if err := pc.recopy(ctx, name); err != nil {
				if ctx.Err() == nil {
					pc.c.cfg.Logger.Warn("search: the pages a gone cell held were not copied again; trying again", "gone", name, "err", err)
				}
				continue
			}
			done[name] = true
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// recopy sends again the copies whose other copy was on gone: this
// cell's pages gone held, and gone's pages this cell holds, each to the
// cell its URL picks now, under its own cell's name.
func (pc *pageCopies) recopy(ctx context.Context, gone string) error {
	me, start := pc.c.cfg.Name, time.Now()
	var n uint64
	for _, pair := range [][2]string{{gone, me}, {me, gone}} {
		holder, origin := pair[0], pair[1]
		err := jsnode.Scan(ctx, pc.js, jsnode.StreamPages, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{jsnode.SubjectPages + holder + "." + origin + ".*"},
			DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
		}, func(msg jetstream.Msg) error {
			rec, err := s2.Decode(nil, msg.Data())
			var p *scrape.ArchivedPage
			if err == nil {
				p, err = scrape.ParseArchived(rec)
			}
			if err != nil {
				return nil // unreadable: index dropped it too
			}
			to := copyTo(p.URL, slices.DeleteFunc(pc.peers(), func(c string) bool { return c == gone }))
			if to == "" {
				return nil // no other cell: indexed here alone, as a new page would be
			}
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if _, err := jsnode.PublishData(pctx, pc.js, jsnode.PageSubject(to, origin, p.URL), msg.Data()); err != nil {
				return err
			}
			n++
			return nil
		})
		if err != nil {
			return err
		}
	}
	pc.recopied.Add(n)
	pc.c.cfg.Logger.Info("search: pages whose other copy was on a gone cell copied again", "gone", gone, "pages", n, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// offer queues an archived page for its copy; it never blocks. A page
// the full queue refuses is owed (owed.go).
func (pc *pageCopies) offer(p *scrape.ArchivedPage) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	select {
	case pc.out <- p:
		pc.pending[p] = struct{}{}
	default:
		pc.dropped.Add(1)
		pc.oweLocked(p.FetchedAt)
	}
}

// copyTo is the cell of peers that indexes the page at url beside its
// own: the highest hash of the URL and the cell's name.
func copyTo(url string, peers []string) string {
	var best string
	var top uint64
	for _, p := range peers {
		h := fnv.New64a()
		h.Write([]byte(p))
		h.Write([]byte{0})
		h.Write([]byte(url))
		if v := mix64(h.Sum64()); best == "" || v > top {
			best, top = p, v
		}
	}
	return best
}

// mix64 spreads FNV's last bytes over all the bits (MurmurHash3's
// finaliser): FNV alone ranks peers by the URL's last characters, and
// URLs that differ there went to one cell far more than to the other.
func mix64(v uint64) uint64 {
	v ^= v >> 33
	v *= 0xff51afd7ed558ccd
	v ^= v >> 33
	v *= 0xc4ceb33fe1b3d2b5
	v ^= v >> 33
	return v
}

func (pc *pageCopies) send(ctx context.Context) {
	for {
		var p *scrape.ArchivedPage
		select {
		case <-ctx.Done():
			return
		case p = <-pc.out:
		}
		pc.done(p, pc.sendOne(ctx, p))
	}
}

// sendOne sends p's copy to the cell its URL picks; false when a copy is
// still owed (no other cell to take it, or the send failed).
func (pc *pageCopies) sendOne(ctx context.Context, p *scrape.ArchivedPage) bool {
	to := copyTo(p.URL, pc.peers())
	if to == "" {
		pc.alone.Add(1)
		return false
	}
	data := s2.Encode(nil, scrape.EncodeArchived(p))
	if len(data) > maxPageCopy {
		pc.dropped.Add(1)
		return true // never sent: nothing owed
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := jsnode.PublishData(pctx, pc.js, jsnode.PageSubject(to, pc.c.cfg.Name, p.URL), data)
	cancel()
	if err != nil {
		pc.dropped.Add(1)
		if now := time.Now().Unix(); ctx.Err() == nil && pc.warned.Swap(now) < now-10 {
			pc.c.cfg.Logger.Warn("search: a page's copy was not sent; it is sent again later", "to", to, "err", err)
		}
		return false
	}
	pc.sent.Add(1)
	return true
}

// receive indexes the copies sent to this cell, a batch at a time: kept
// in the store (synced), queued for the index, then acked.
func (pc *pageCopies) receive(ctx context.Context, cons jetstream.Consumer) {
	for ctx.Err() == nil {
		msgs, err := jsnode.Batch(cons, 64, 2*time.Second)
		if err != nil && ctx.Err() == nil {
			pc.c.cfg.Logger.Warn("search: reading page copies", "err", err)
			if len(msgs) == 0 {
				jsnode.Pause(ctx, time.Second)
			}
		}
		if len(msgs) == 0 {
			continue
		}
		if err := pc.index(ctx, msgs, &pc.indexed); err != nil {
			if ctx.Err() == nil {
				pc.c.cfg.Logger.Warn("search: indexing page copies", "err", err)
				jsnode.Pause(ctx, time.Second)
			}
			continue // not acked: delivered again
		}
		for _, m := range msgs {
			m.Ack()
		}
	}
}

// replayOwn indexes the copies other cells hold of this cell's pages (a
// cell back on an empty disk), to the end of the stream as it is now.
func (pc *pageCopies) replayOwn(ctx context.Context) {
	start := time.Now()
	var batch []jetstream.Msg // one synced write a batch, not a page
	errNow := errors.New("sent by this process")
	err := jsnode.Scan(ctx, pc.js, jsnode.StreamPages, jetstream.OrderedConsumerConfig{FilterSubjects: []string{jsnode.OwnPagesFilter(pc.c.cfg.Name)}}, func(msg jetstream.Msg) error {
		if md, err := msg.Metadata(); err == nil && !md.Timestamp.Before(pc.since) {
			// Sent since this process began (the replay is for the pages
			// of before the disk was lost); the rest are later still.
			return errNow
		}
		if batch = append(batch, msg); len(batch) < 64 {
			return nil
		}
		err := pc.index(ctx, batch, &pc.replayed)
		batch = batch[:0]
		return err
	})
	if errors.Is(err, errNow) {
		err = nil
	}
	if err == nil && len(batch) > 0 {
		err = pc.index(ctx, batch, &pc.replayed)
	}
	if err != nil {
		pc.c.cfg.Logger.Warn("search: replaying this cell's pages", "err", err)
		return
	}
	pc.c.cfg.Logger.Info("search: this cell's pages read again from the region", "pages", pc.replayed.Load(), "took", time.Since(start).Round(time.Millisecond))
}

// index keeps msgs' pages in the store, synced, and queues them for the
// index; count counts them.
func (pc *pageCopies) index(ctx context.Context, msgs []jetstream.Msg, count *atomic.Uint64) error {
	c := pc.c
	now := c.cfg.Now().UTC()
	b := c.store.NewBatch()
	var pages []search.Page
	for _, m := range msgs {
		rec, err := s2.Decode(nil, m.Data())
		var p *scrape.ArchivedPage
		if err == nil {
			p, err = scrape.ParseArchived(rec)
		}
		if err != nil {
			c.cfg.Logger.Warn("search: a page copy could not be read; dropped", "subject", m.Subject(), "err", err)
			continue
		}
		if p.Private || !c.cfg.AllowPrivateNetworks && privateHost(p.URL) {
			pc.skipped.Add(1)
			continue
		}
		p.FetchedAt = now // the index's watermark counts in this cell's time
		b.Set(pageCopyKey(p.URL), scrape.EncodeArchived(p))
		pages = append(pages, search.Page{URL: p.URL, ContentType: p.ContentType, Body: p.Body, Fetched: now})
	}
	if b.Len() > 0 {
		if err := b.Commit(store.Sync); err != nil {
			return err
		}
	} else {
		b.Discard()
	}
	for _, p := range pages {
		if err := c.indexer.Put(ctx, p); err != nil {
			return err
		}
		count.Add(1)
	}
	return nil
}

func pageCopyKey(u string) []byte { return append([]byte(store.PrefixPageCopy), u...) }

// hasPages reports whether the store holds an archived page or a copy
// (an error reads as yes: a disk is not taken for lost on a failed read).
func hasPages(st *store.Store) bool {
	for _, prefix := range []string{store.PrefixArchive, store.PrefixPageCopy} {
		if has, err := st.HasPrefix([]byte(prefix)); has || err != nil {
			return true
		}
	}
	return false
}

package cell

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/internal/store"
)

// Copies owed (pages.go). A page's copy is not always sent when the page
// is archived: the queue may be full, the send fail, no other cell be
// there to take it, or the process end (a crash, a kill) with the page
// queued; and a page archived before this process began sharing was
// never offered. So the cell keeps in its store the fetch time from
// which its pages may still owe their copy: every owedEvery, the
// earliest of the pages queued or being sent, the earliest one not sent,
// and owedMargin ago. At start, and after a copy was not sent while
// another cell could have taken it (at most every owedRetry), it sends
// the archive's pages fetched from then on. A copy sent twice replaces
// itself, on the stream and in the receiver's index.

var (
	// owedEvery is how often the owed time is written (a var: tests
	// shorten it), owedRetry how often a catch-up may run after the
	// first.
	owedEvery = 10 * time.Second
	owedRetry = time.Minute
)

// owedMargin bounds how long after its fetch time a page is offered
// (archived and converted): a page fetched earlier than owedMargin ago
// that is neither queued nor owed was sent.
const owedMargin = 5 * time.Minute

var owedKey = []byte(store.PrefixPageCopyOwed + "from")

// oweLocked records that the copy of a page fetched at at is owed; pc.mu
// is held.
func (pc *pageCopies) oweLocked(at time.Time) {
	if pc.owedFrom.IsZero() || at.Before(pc.owedFrom) {
		pc.owedFrom = at
	}
}

// done ends p's turn in the queue: sent, or its copy owed.
func (pc *pageCopies) done(p *scrape.ArchivedPage, sent bool) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	delete(pc.pending, p)
	if !sent {
		pc.oweLocked(p.FetchedAt)
	}
}

// owedSince is the fetch time from which pages may owe their copy at now.
func (pc *pageCopies) owedSince(now time.Time) time.Time {
	from := now.Add(-owedMargin)
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for _, t := range []time.Time{pc.owedFrom, pc.scanning} {
		if !t.IsZero() && t.Before(from) {
			from = t
		}
	}
	for p := range pc.pending {
		if p.FetchedAt.Before(from) {
			from = p.FetchedAt
		}
	}
	return from
}

// keepOwed sends the copies owed when the cell starts, writes the owed
// time every owedEvery (and when ctx ends), and sends the copies owed
// again after one was not sent while a peer could take it.
func (pc *pageCopies) keepOwed(ctx context.Context) {
	from, err := pc.readOwed()
	if err != nil {
		pc.c.cfg.Logger.Warn("search: the time from which page copies are owed is unreadable; sending every page's", "err", err)
	}
	pc.catchUp(ctx, from)
	last := time.Now()
	t := time.NewTicker(owedEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			pc.writeOwed(pc.owedSince(time.Now()))
			return
		case <-t.C:
		}
		pc.writeOwed(pc.owedSince(time.Now()))
		pc.mu.Lock()
		from := pc.owedFrom
		due := !from.IsZero() && time.Since(last) >= owedRetry && len(pc.peers()) > 0
		if due {
			pc.owedFrom = time.Time{}
		}
		pc.mu.Unlock()
		if due {
			pc.catchUp(ctx, from)
			last = time.Now()
		}
	}
}

// catchUp queues the copies of the archive's pages fetched from from on
// (zero: every page), waiting for room in the queue.
func (pc *pageCopies) catchUp(ctx context.Context, from time.Time) {
	pc.mu.Lock()
	pc.scanning = from
	if from.IsZero() {
		pc.scanning = time.Unix(0, 1) // every page: the owed time is the earliest
	}
	pc.mu.Unlock()
	defer func() {
		pc.mu.Lock()
		pc.scanning = time.Time{}
		pc.mu.Unlock()
	}()
	start := time.Now()
	n := 0
	err := pc.c.scrape.ScanArchive(func(p *scrape.ArchivedPage) bool {
		if p.FetchedAt.Before(from) || !pc.c.indexable(p) {
			return true
		}
		cp := *p
		cp.Body = bytes.Clone(p.Body) // valid during the call only
		pc.mu.Lock()
		pc.pending[&cp] = struct{}{}
		pc.mu.Unlock()
		select {
		case pc.out <- &cp:
			n++
			return true
		case <-ctx.Done():
			pc.done(&cp, false)
			return false
		}
	})
	pc.owedSent.Add(uint64(n))
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		if from.IsZero() {
			from = time.Unix(0, 1)
		}
		pc.mu.Lock()
		pc.oweLocked(from)
		pc.mu.Unlock()
		if !errors.Is(err, context.Canceled) {
			pc.c.cfg.Logger.Warn("search: the page copies owed were not all queued", "queued", n, "err", err)
		}
		return
	}
	if n > 0 {
		pc.c.cfg.Logger.Info("search: page copies owed queued", "pages", n, "fetched_from", from, "took", time.Since(start).Round(time.Millisecond))
	}
}

// readOwed is the owed time the store has; zero when it has none (a
// store from before it, or a new one: every page is sent).
func (pc *pageCopies) readOwed() (time.Time, error) {
	raw, err := pc.c.store.Get(owedKey)
	if errors.Is(err, store.ErrNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	return time.Parse(time.RFC3339Nano, string(raw))
}

func (pc *pageCopies) writeOwed(from time.Time) {
	// Not synced: a write lost with a crash leaves an earlier time, and
	// more copies sent again.
	if err := pc.c.store.Set(owedKey, []byte(from.UTC().Format(time.RFC3339Nano)), store.NoSync); err != nil {
		pc.c.cfg.Logger.Warn("search: the time from which page copies are owed not written", "err", err)
	}
}

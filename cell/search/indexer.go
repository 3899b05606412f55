package search

import (
	"context"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trawlhq/trawl/cell/content"
)

// Page is an archived page to index: as fetched.
type Page struct {
	URL         string
	ContentType string
	Body        []byte
	Fetched     time.Time
	// Content is the page's main content already converted (with links
	// and metadata), when the scrape that fetched it converted it; nil:
	// the indexer converts Body.
	Content *content.Document
}

// IndexerConfig configures an Indexer.
type IndexerConfig struct {
	// Flush is the longest a page waits in the queue (default DefaultFlush); Batch
	// the most pages indexed at once (default BatchSize); Queue the pages that
	// may wait (default 4096: beyond it Enqueue drops the page, which the
	// next rebuild finds in the archive).
	Flush time.Duration
	Batch int
	Queue int
	// BatchBytes is the most text a batch holds (default DefaultBatchBytes):
	// a batch is cut at Batch pages or BatchBytes, whichever comes first.
	BatchBytes int
	// Workers turn pages into documents in parallel (default one a core).
	Workers int
	// Commits is how many batches are committed at once (default
	// DefaultCommits): each builds its segment on a core of its own.
	Commits int
	// RefreshEvery is how often, while pages keep coming, up to Batch
	// pages whose anchor text grew are indexed again (default 10 s); when
	// no page is waiting they are, Batch every Flush.
	RefreshEvery time.Duration
	// Dropped, when set, is called (in a goroutine of its own, one at a
	// time) once the queue has room again after it dropped pages, with
	// the earliest fetch time of the pages it dropped: the cell indexes
	// them from its archive.
	Dropped func(since time.Time)
	Logger  *slog.Logger
}

// BatchSize is how many pages the Indexer and Rebuild index at once. Each
// batch is a segment of the index, and segments are merged in the
// background: larger batches cost less CPU a page (fewer, larger segments
// to build and merge) and more memory at the peak (a batch's analysis is
// held until its segment is built). The Indexer's batches are bounded by
// their text too (DefaultBatchBytes). docs/performance.md, "Search".
const BatchSize = 1024

// DefaultFlush is the longest a page waits for its batch. Each batch is a
// segment of the index, and pages that come one by one (a job's, a
// crawl's: tens a second) make a batch of what came meanwhile: a shorter
// wait makes the index build a small segment every wait and merge it into
// its larger ones over and over (docs/performance.md, "Search"). A page
// is still searchable well within the 10 s the service promises.
const DefaultFlush = 3 * time.Second

// DefaultCommits is how many batches an Indexer commits at once. With one,
// the goroutine building a batch's segment is the live path's limit: it
// uses one core at most, and beside a job it gets a small share of the
// machine. Two cost a second batch's analysis held at the peak
// (docs/performance.md, "Search").
const DefaultCommits = 2

// DefaultBatchBytes is the most text (title, headings, body) a batch of
// the Indexer holds. A batch's analysis (each field's terms and their
// frequencies) and its segment being built are most of the memory the
// indexer takes, many times the batch's text, and DefaultCommits batches
// are built at once; the collector lets the heap grow to twice what it
// found live. Bounding the text rather than the pages bounds that memory
// whatever the pages' size: about 400 documentation pages, where BatchSize
// pages of them were twice the peak (docs/performance.md, "Search").
const DefaultBatchBytes = 4 << 20

// prepared is how many documents the converting workers may have ready
// ahead of the batch being gathered, so that the next batch is being
// prepared while one is built into its segment. With DefaultCommits
// batches at once the batcher waits less, and a quarter of a batch ahead
// is faster than a whole one for the same peak (docs/performance.md,
// "Search").
const prepared = BatchSize / 4

// Indexer indexes archived pages in the background, in batches: a page is
// searchable within Flush plus the time of its batch of being enqueued.
type Indexer struct {
	ix    *Index
	cfg   IndexerConfig
	in    chan Page
	docs  chan *Doc
	stop  chan struct{}
	smu   sync.RWMutex // senders hold it read, Close to close in
	wg    sync.WaitGroup
	bwg   sync.WaitGroup
	once  sync.Once
	added atomic.Uint64
	drops atomic.Uint64

	dmu       sync.Mutex
	dropSince time.Time // earliest fetch time dropped, not yet recovered
	recover   atomic.Bool
}

// NewIndexer starts an indexer into ix; Close stops it after indexing
// what it holds.
func NewIndexer(ix *Index, cfg IndexerConfig) *Indexer {
	if cfg.Flush <= 0 {
		cfg.Flush = DefaultFlush
	}
	if cfg.Batch <= 0 {
		cfg.Batch = BatchSize
	}
	if cfg.Commits <= 0 {
		cfg.Commits = DefaultCommits
	}
	if cfg.BatchBytes <= 0 {
		cfg.BatchBytes = DefaultBatchBytes
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 4096
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	if cfg.RefreshEvery <= 0 {
		cfg.RefreshEvery = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	x := &Indexer{ix: ix, cfg: cfg, in: make(chan Page, cfg.Queue), docs: make(chan *Doc, min(cfg.Batch, prepared)), stop: make(chan struct{})}
	for range cfg.Workers {
		x.wg.Add(1)
		go x.convert()
	}
	x.bwg.Add(1)
	go x.batcher()
	return x
}

// Enqueue queues a page; it never blocks (a full queue drops the page).
// A page with its conversion (Content) is queued without its body.
func (x *Indexer) Enqueue(p Page) {
	x.smu.RLock()
	defer x.smu.RUnlock()
	select {
	case <-x.stop:
		return
	default:
	}
	select {
	case x.in <- lean(p):
	default:
		x.drops.Add(1)
		x.dmu.Lock()
		if x.dropSince.IsZero() || p.Fetched.Before(x.dropSince) {
			x.dropSince = p.Fetched
		}
		x.dmu.Unlock()
	}
}

// ErrClosed is Put's error once the indexer is closed.
var ErrClosed = errors.New("search: indexer closed")

// Put queues a page, waiting while the queue is full (Enqueue drops it).
func (x *Indexer) Put(ctx context.Context, p Page) error {
	x.smu.RLock()
	defer x.smu.RUnlock()
	select {
	case <-x.stop:
		return ErrClosed
	default:
	}
	select {
	case x.in <- lean(p):
		return nil
	case <-x.stop:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lean drops the body of a page that comes with its conversion: the
// queue holds what the index needs.
func lean(p Page) Page {
	if p.Content != nil && p.Content.Parsed != nil {
		p.Body = nil
	}
	return p
}

func (x *Indexer) closed() bool {
	select {
	case <-x.stop:
		return true
	default:
		return false
	}
}

// WaitRecovered waits for a Dropped call in progress to return.
func (x *Indexer) WaitRecovered() {
	for x.recover.Load() {
		time.Sleep(5 * time.Millisecond)
	}
}

// Dropped is how many pages a full queue dropped.
func (x *Indexer) Dropped() uint64 { return x.drops.Load() }

// maybeRecover hands the dropped pages' time to cfg.Dropped once the
// queue is at most a quarter full.
func (x *Indexer) maybeRecover() {
	if x.cfg.Dropped == nil || len(x.in) > cap(x.in)/4 {
		return
	}
	x.dmu.Lock()
	since := x.dropSince
	if since.IsZero() || !x.recover.CompareAndSwap(false, true) {
		x.dmu.Unlock()
		return
	}
	x.dropSince = time.Time{}
	x.dmu.Unlock()
	go func() {
		defer x.recover.Store(false)
		x.cfg.Dropped(since)
	}()
}

// Indexed is how many pages the indexer has indexed.
func (x *Indexer) Indexed() uint64 { return x.added.Load() }

// Close indexes what is queued and stops.
func (x *Indexer) Close() {
	x.once.Do(func() {
		close(x.stop)
		x.smu.Lock() // no Enqueue or Put is sending
		close(x.in)
		x.smu.Unlock()
		x.wg.Wait()
		close(x.docs)
		x.bwg.Wait()
	})
}

func (x *Indexer) convert() {
	defer x.wg.Done()
	for p := range x.in {
		if d := DocOf(p); d != nil {
			d.Prepare()
			x.docs <- d
		}
	}
}

// DocOf is the document of an archived page; nil for a page with nothing
// to index (not HTML or text, an error status).
func DocOf(p Page) *Doc {
	if p.Content != nil && p.Content.Parsed != nil {
		return FromContent(p.Content, p.URL, p.Fetched)
	}
	if p.Body == nil {
		return nil
	}
	mt, _, _ := mime.ParseMediaType(p.ContentType)
	if mt == "" {
		mt, _, _ = mime.ParseMediaType(http.DetectContentType(p.Body))
	}
	switch mt {
	case "text/html", "application/xhtml+xml":
		d, err := FromHTML(p.Body, p.URL, p.Fetched)
		if err != nil {
			return nil
		}
		return d
	case "text/plain", "text/markdown":
		return FromMarkdown(p.URL, "", string(p.Body), p.Fetched)
	}
	return nil
}

// textSize is the text of d that its analysis is made of (the anchor
// text, given when its batch is prepared, aside).
func (d *Doc) textSize() int {
	n := len(d.Title) + len(d.Body)
	for _, h := range d.Headings {
		n += len(h) + 1
	}
	return n
}

func (x *Indexer) batcher() {
	defer x.bwg.Done()
	var batch []*Doc
	size := 0 // batch's text
	add := func(d *Doc) {
		batch = append(batch, d)
		size += d.textSize()
	}
	full := func() bool { return len(batch) >= x.cfg.Batch || size >= x.cfg.BatchBytes }
	commits := make(chan struct{}, x.cfg.Commits)
	defer func() { // the batches committing
		for range x.cfg.Commits {
			commits <- struct{}{}
		}
	}()
	t := time.NewTimer(x.cfg.Flush)
	defer t.Stop()
	lastRefresh := time.Now()
	refresh := func() {
		lastRefresh = time.Now()
		if _, err := x.ix.RefreshAnchors(x.cfg.Batch); err != nil {
			x.cfg.Logger.Warn("search: indexing pages again with their anchor text failed", "err", err)
		}
	}
	flush := func() {
		if len(batch) == 0 {
			// Idle: stale anchor text, the did_you_mean counts due, and
			// the pages a full queue dropped after the last batch.
			refresh()
			if err := x.ix.words.flushDue(x.ix.now()); err != nil {
				x.cfg.Logger.Warn("search: writing the did_you_mean dictionary failed", "err", err)
			}
			x.maybeRecover()
			return
		}
		// Up to Commits batches commit at once, prepared here in order;
		// the next is gathered meanwhile.
		commits <- struct{}{}
		p, err := x.ix.prepare(batch)
		if err != nil {
			<-commits
			x.cfg.Logger.Warn("search: indexing a batch failed", "pages", len(batch), "err", err)
		} else {
			go func() {
				defer func() { <-commits }()
				if err := p.commit(); err != nil {
					x.cfg.Logger.Warn("search: indexing a batch failed", "pages", len(p.docs), "err", err)
				} else {
					x.added.Add(uint64(len(p.docs)))
				}
			}()
		}
		batch, size = nil, 0
		x.maybeRecover()
		if time.Since(lastRefresh) >= x.cfg.RefreshEvery {
			refresh()
		}
	}
	// A batch is due Flush after its first page came, or when it is full;
	// with no page, the timer is the idle tick. Not a tick every Flush
	// whatever came: a tick that fell while the last batch was indexed
	// would cut the next one after a few pages, winning the race with the
	// pages waiting.
	for {
		select {
		case d, ok := <-x.docs:
			if !ok {
				if len(batch) > 0 {
					flush()
				}
				return
			}
			if len(batch) == 0 {
				t.Reset(x.cfg.Flush)
			}
			add(d)
			if full() {
				flush()
				t.Reset(x.cfg.Flush)
			}
		case <-t.C:
			// Due: with what is already waiting, up to a batch.
			closed := false
		take:
			for len(batch) > 0 && !full() {
				select {
				case d, ok := <-x.docs:
					if !ok {
						closed = true
						break take
					}
					add(d)
				default:
					break take
				}
			}
			flush()
			if closed {
				return
			}
			t.Reset(x.cfg.Flush)
		}
	}
}

// Rebuild indexes every page pages yields (the archive), for a cell whose
// index was lost or is new; it returns how many it indexed. Pages are
// turned into documents on every core, and indexed in batches of BatchSize; at
// the end the pages that others link to are indexed again, once, with
// their anchor text. A page's Body must stay valid after yield returns.
func (ix *Index) Rebuild(ctx context.Context, pages func(yield func(Page) bool) error) (int, error) {
	in := make(chan Page, 64)
	docs := make(chan *Doc, BatchSize) // a whole batch ahead of the one committing
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range in {
				if d := DocOf(p); d != nil {
					d.Prepare()
					docs <- d
				}
			}
		}()
	}
	go func() { wg.Wait(); close(docs) }()
	n := 0
	var addErr error
	added := make(chan struct{})
	go func() {
		defer close(added)
		// One batch at a time: a rebuild is bound by making the pages'
		// main content again, not by the commits (docs/performance.md,
		// "Search"), and each batch committing holds its analysis.
		batch := make([]*Doc, 0, BatchSize)
		add := func() {
			if err := ix.Add(batch...); err != nil {
				addErr = err
			} else {
				n += len(batch)
			}
			batch = batch[:0]
		}
		for d := range docs {
			if batch = append(batch, d); len(batch) >= BatchSize {
				add()
			}
		}
		if len(batch) > 0 {
			add()
		}
	}()
	err := pages(func(p Page) bool {
		select {
		case in <- p:
			return true
		case <-ctx.Done():
			return false
		}
	})
	close(in)
	<-added
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = addErr
	}
	if err == nil {
		// The anchor text the pages gave each other, each page once.
		_, err = ix.RefreshAnchors(0)
	}
	return n, err
}

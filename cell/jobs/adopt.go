package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/trawlhq/trawl/internal/jsnode"
)

// Feeding a dead owner's jobs (issue 33: a region loses a cell without
// losing accepted work, even a cell that does not come back).
//
// The owner of a shared job feeds its URLs to the region's queue a
// window at a time (send), so while it is down only the URLs it had
// queued are fetched. The region's coordinator (the cell holding the
// lease, cell/coord) therefore feeds, every adoptEvery, the jobs of
// every owner membership does not list as live: it reads the job's
// record and URLs from the log (mirror.go), follows its outcomes there,
// and queues the URLs without one, a window (ShareConfig.Window) at a
// time, as the owner's own items (the outcome goes to the owner's
// subject, where the owner's results consumer finds it when it is back,
// and from which any cell answers for the job meanwhile: logread.go).
// A URL's first item has the id the owner gives it (<job>/<seq>/0), so
// one the owner queued in the last 10 minutes is a duplicate the stream
// drops; a URL queued twice anyway is fetched twice and recorded once
// (the owner keeps the first outcome). The coordinator stops feeding a
// job once it has an outcome for every URL, or its owner is live again
// (its dispatcher then queues what is left), or the lease is lost.
//
// A growing job (a site crawl) is fed the URLs it had found (.urls and
// .grow), and grown: the links of its pages' outcomes (in the outcome's
// header) that it has not seen are added, within its depth and limit,
// as the owner's growLocked would in the same order, and written to the
// log as the owner's .grow.<seq> chunks (the first chunk at a seq wins:
// an owner back that grew it first stops the coordinator's growth, and
// an owner whose chunk is refused takes the log's in and grows again);
// the owner back takes the URLs added in before it records outcomes
// (absorbGrowthLocked). Not fed: a held job or retry, a cancelled or failed one. A cancel,
// a retry and a hold's release are taken through the log (logread.go): a
// job or retry released there is fed.

// adoptEvery is how often the coordinator looks for jobs to feed; it
// tops up the jobs it feeds every feedEvery.
const (
	adoptEvery = 2 * time.Second
	feedEvery  = 200 * time.Millisecond
)

// adopted is a dead owner's job the coordinator feeds.
type adopted struct {
	id, owner string
	mt        meta
	urls      []string
	depths    []int // a growing job's: each URL's depth (its submitted ones 0)
	done      map[uint64]bool
	marked    map[uint64]bool      // pending again after a released retry
	sent      map[uint64]time.Time // queued by this cell, and when
	resent    map[uint64]int
	it        jetstream.MessagesContext // the job's outcomes as they come (ordered, headers only)
	// Of a growing job: every URL it has, and the links of outcomes not
	// yet grown from, with the depth of their page.
	seen  map[string]bool
	links []pageLinks
	// stopped: the owner grew it at a seq the coordinator meant to (it
	// is back): the owner grows it from here.
	stopped bool
	close   func()    // stops it and deletes its consumer
	since   time.Time // when it was made
}

// pageLinks are a page's links and its depth.
type pageLinks struct {
	depth int
	links []string
}

// adoptFresh is how long an adopted job's outcomes consumer is used: a
// consumer whose stream leader died with its cell may stop delivering
// without an error, so a new one reads the outcomes again (the items a
// new adoption queues again carry the same ids: duplicates dropped).
const adoptFresh = 30 * time.Second

// adopt runs while the manager shares: every adoptEvery, on the
// coordinator only, it feeds the jobs of owners that are not live.
func (m *Manager) adopt(s *sharing) {
	defer m.wg.Done()
	feeding := map[string]*adopted{}
	finished := map[string]uint64{} // job → its record's sequence when it was finished
	var ix metaIndex
	t := time.NewTicker(feedEvery)
	defer t.Stop()
	var scanned time.Time
	defer func() {
		for _, a := range feeding {
			a.close()
		}
		s.fed.Store(nil)
	}()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		s.adoptTicks.Add(1)
		if !s.cfg.Coordinating() {
			for id, a := range feeding {
				a.close() // another cell feeds them now
				delete(feeding, id)
			}
			ix = metaIndex{} // read whole when it coordinates again
			s.fed.Store(nil)
			continue
		}
		scan := time.Since(scanned) >= adoptEvery
		if scan {
			scanned = time.Now()
		}
		if err := m.adoptRound(s, &ix, feeding, finished, scan); err != nil && m.ctx.Err() == nil {
			m.cfg.Logger.Warn("jobs: feeding the jobs of cells that are down", "err", err)
		}
		if scan {
			// Running's list, at each scan: a job finished since is
			// still in it for a moment, and Running leaves out a job
			// whose status has ended.
			fed := make(map[string]string, len(feeding))
			for id, a := range feeding {
				fed[id] = a.mt.Account
			}
			s.fed.Store(&fed)
		}
	}
}

// adoptRound tops up the jobs being fed; with scan, it first reads the
// log's job records for jobs to start or stop feeding.
func (m *Manager) adoptRound(s *sharing, ix *metaIndex, feeding map[string]*adopted, finished map[string]uint64, scan bool) error {
	// Short deadlines: a round cut while a stream's leader moves (its
	// cell died: the case this is for) is begun again with fresh
	// consumers 200 ms later rather than waiting on the old ones.
	if scan {
		sctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
		err := m.adoptScan(sctx, s, ix, feeding, finished)
		cancel()
		if err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
	defer cancel()
	for id, a := range feeding {
		if err := m.feedAdopted(ctx, s, a); err != nil {
			// Read again from the log at the next scan.
			a.close()
			delete(feeding, id)
			return err
		}
		if a.withOutcome() == len(a.urls) && len(a.links) == 0 {
			finished[id] = ix.jobs[id].rev
			a.close()
			delete(feeding, id)
			m.cfg.Logger.Info("jobs: every URL of a down cell's job has its outcome", "job", id, "owner", a.owner)
		}
	}
	return nil
}

// The coordinator's index of the job records in the log (metaIndex):
// read whole when it begins and every adoptRebuild (which also forgets
// the jobs swept from the log), and in between only the records written
// since (from the stream sequence after the last one read), so a scan
// every adoptEvery costs the records that changed, not every job kept.
const adoptRebuild = time.Minute

type metaIndex struct {
	jobs  map[string]indexedJob
	last  uint64 // the stream sequence of the last record read
	built time.Time
	// marks is, per owner that is not live, the stream sequence its
	// jobs' marks are to be read from (the ones before it were taken:
	// marks.go); forgotten when the owner is live again.
	marks map[string]uint64
}

// indexedJob is what the index keeps of a job's record: enough to tell
// whether it is to be fed.
type indexedJob struct {
	owner string
	rev   uint64 // the record's stream sequence
	grow  bool
	idle  bool // held, a retry held, cancelled or failed: nothing to feed
}

// refresh reads the records written since the last read, or all of them
// when the index is due for a rebuild.
func (ix *metaIndex) refresh(ctx context.Context, s *sharing) (read int, err error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{jsnode.SubjectJobLog + "*.*.meta"}, DeliverPolicy: jetstream.DeliverAllPolicy}
	jobs := ix.jobs
	rebuild := jobs == nil || time.Since(ix.built) >= adoptRebuild
	if rebuild {
		jobs = map[string]indexedJob{}
	} else {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, ix.last+1
	}
	last := ix.last
	err = jsnode.Scan(ctx, s.js, jsnode.StreamJobLog, cfg, func(msg jetstream.Msg) error {
		read++
		if md, err := msg.Metadata(); err == nil {
			last = max(last, md.Sequence.Stream)
		}
		parts := strings.Split(msg.Subject(), ".")
		var rev uint64
		if md, err := msg.Metadata(); err == nil {
			rev = md.Sequence.Stream
		}
		var mt meta
		if len(parts) != 5 || json.Unmarshal(msg.Data(), &mt) != nil || mt.ID == "" {
			return nil
		}
		jobs[mt.ID] = indexedJob{owner: parts[2], rev: rev, grow: mt.Grow != nil,
			// A job kept on its owner (a crawl with a delay) waits for it:
			// fed from here it would not keep its delay.
			idle: mt.Hold != "" || mt.RetryHold != "" || !mt.CancelledAt.IsZero() || mt.Failure != "" || mt.Local}
		return nil
	})
	if err != nil {
		return read, err // the index as it was: read again next time
	}
	ix.jobs, ix.last = jobs, last
	if rebuild {
		ix.built = time.Now()
	}
	return read, nil
}

// adoptScan starts feeding the jobs of owners that are not live, and
// stops feeding those whose owner is back (or that changed).
func (m *Manager) adoptScan(ctx context.Context, s *sharing, ix *metaIndex, feeding map[string]*adopted, finished map[string]uint64) error {
	candidates := map[string]bool{}
	read, down := 0, 0
	defer func() {
		m.cfg.Logger.Debug("jobs: coordinator's scan", "records", len(ix.jobs), "read", read, "down", down, "feeding", len(candidates), "err", ctx.Err())
	}()
	var err error
	if read, err = ix.refresh(ctx, s); err != nil {
		return err
	}
	for id := range finished {
		if _, ok := ix.jobs[id]; !ok {
			delete(finished, id) // swept from the log
		}
	}
	for id, e := range ix.jobs {
		if rev, ok := finished[id]; ok && rev != e.rev {
			// Its record changed since every URL had its outcome (a
			// retry released while its owner is down): fed again.
			delete(finished, id)
		}
		if _, ok := finished[id]; ok {
			if e.grow && s.cfg.Live(e.owner) {
				// Its owner is back and may grow it: fed again if it
				// goes down again.
				delete(finished, id)
			}
			continue
		}
		if e.owner == s.cfg.Cell || s.cfg.Live(e.owner) {
			continue
		}
		down++
		if e.idle {
			continue
		}
		candidates[id] = true
		refresh := false
		if a := feeding[id]; a != nil && time.Since(a.since) > adoptFresh {
			a.close()
			delete(feeding, id)
			refresh = true
		}
		if feeding[id] != nil {
			continue
		}
		a, err := m.adoptIndexed(ctx, s, id, e.owner)
		if err != nil {
			m.cfg.Logger.Warn("jobs: a down cell's job not fed this round", "job", id, "owner", e.owner, "err", err)
			continue
		}
		feeding[id] = a
		level := slog.LevelInfo
		if refresh {
			level = slog.LevelDebug
		}
		m.cfg.Logger.Log(ctx, level, "jobs: feeding the job of a cell that is down", "job", id, "owner", e.owner,
			"urls", len(a.urls), "with_outcome", a.withOutcome())
	}
	for id, a := range feeding {
		if !candidates[id] {
			a.close() // its owner is back, or it changed
			delete(feeding, id)
		}
	}
	m.takeDownMarks(ctx, s, ix)
	return nil
}

// takeDownMarks hands the pending marks of the jobs of owners that are
// not live to Config.TakeMark: read whole when an owner is first seen
// down, then only the marks written since.
func (m *Manager) takeDownMarks(ctx context.Context, s *sharing, ix *metaIndex) {
	if m.cfg.TakeMark == nil {
		return
	}
	down := map[string]bool{}
	for _, e := range ix.jobs {
		if e.owner != s.cfg.Cell && !s.cfg.Live(e.owner) {
			down[e.owner] = true
		}
	}
	if ix.marks == nil {
		ix.marks = map[string]uint64{}
	}
	for owner := range ix.marks {
		if !down[owner] {
			delete(ix.marks, owner) // live again: its own sender goes on
		}
	}
	for owner := range down {
		next, taken, err := m.takeMarks(ctx, s, owner, ix.marks[owner])
		if next > ix.marks[owner] {
			ix.marks[owner] = next
		}
		if taken > 0 {
			m.cfg.Logger.Info("jobs: acting on a down cell's pending marks (its webhook deliveries)", "owner", owner, "marks", taken)
		}
		if err != nil && ctx.Err() == nil {
			m.cfg.Logger.Warn("jobs: a down cell's marks not all taken this round", "owner", owner, "err", err)
		}
	}
}

// adoptIndexed reads job id's record from the log, then the job to feed.
func (m *Manager) adoptIndexed(ctx context.Context, s *sharing, id, owner string) (*adopted, error) {
	msg, err := jsnode.LastMsg(ctx, s.js, jsnode.StreamJobLog, jsnode.JobSubject(owner, id)+".meta")
	if err != nil {
		return nil, err
	}
	var mt meta
	if err := json.Unmarshal(msg.Data, &mt); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	return m.adoptJob(ctx, s, owner, mt)
}

// adoptJob reads a job to feed from the log.
func (m *Manager) adoptJob(ctx context.Context, s *sharing, owner string, mt meta) (*adopted, error) {
	prefix := jsnode.JobSubject(owner, mt.ID)
	urls, err := logURLs(ctx, s, prefix)
	if err != nil {
		return nil, err
	}
	// A growing job (a site crawl): the URLs its pages added, at their
	// depth. Only its owner grows it: the coordinator feeds the URLs it
	// had found, and the links of their pages wait for the owner.
	var depths []int
	if mt.Grow != nil {
		grown, err := logGrowth(ctx, s, prefix, uint64(len(urls)))
		if err != nil {
			return nil, err
		}
		depths = make([]int, len(urls), len(urls)+len(grown))
		for _, g := range grown {
			urls = append(urls, g.URL)
			depths = append(depths, g.Depth)
		}
	}
	c, closeC, err := jsnode.Ordered(m.ctx, s.js, jsnode.StreamJobLog, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{prefix + ".res.*"}, DeliverPolicy: jetstream.DeliverAllPolicy, HeadersOnly: true})
	if err != nil {
		return nil, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		closeC()
		return nil, err
	}
	it, err := c.Messages(jetstream.PullMaxMessages(256))
	if err != nil {
		closeC()
		return nil, err
	}
	a := &adopted{id: mt.ID, owner: owner, mt: mt, urls: urls, depths: depths, it: it, since: time.Now(),
		close: func() { it.Stop(); closeC() },
		done:  map[uint64]bool{}, marked: map[uint64]bool{}, sent: map[uint64]time.Time{}, resent: map[uint64]int{}}
	if mt.Grow != nil {
		a.seen = make(map[string]bool, len(urls))
		for _, u := range urls {
			a.seen[u] = true
		}
	}
	// Every outcome the log has now, before anything is queued: a URL
	// with one must not be fetched again.
	for n := info.NumPending; n > 0; n-- {
		nctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		msg, err := it.Next(jetstream.NextContext(nctx))
		cancel()
		if err != nil {
			a.close()
			return nil, fmt.Errorf("its outcomes, %d left: %w", n, err)
		}
		a.take(msg)
	}
	return a, nil
}

// take records an outcome message.
func (a *adopted) take(msg jetstream.Msg) {
	subj := msg.Subject()
	seq, err := strconv.ParseUint(subj[strings.LastIndexByte(subj, '.')+1:], 10, 64)
	if err != nil {
		return
	}
	pending := msg.Headers().Get(headerPending) != ""
	a.done[seq], a.marked[seq] = !pending, pending
	if a.seen == nil || pending || seq >= uint64(len(a.urls)) {
		return
	}
	if out, ok := outcomeOf(msg); ok && out.Error == nil && len(out.Links) > 0 {
		a.links = append(a.links, pageLinks{depth: a.depths[seq], links: out.Links})
	}
}

// growAdopted adds, as the owner would (both by newLinks), the links of
// the outcomes taken since the last call, and writes them to the log as
// the owner's next chunk.
func (m *Manager) growAdopted(ctx context.Context, s *sharing, a *adopted) error {
	g := a.mt.Grow
	if a.seen == nil || a.stopped || len(a.links) == 0 {
		return nil
	}
	added, _ := newLinks(g, len(a.urls), a.links, func(u string) (bool, error) { return a.seen[u], nil })
	if len(added) > 0 {
		for i := 0; i < len(added); i += chunkURLs {
			chunk := added[i:min(i+chunkURLs, len(added))]
			err := s.putGrowthOf(ctx, a.owner, a.id, uint64(len(a.urls)), chunk)
			if errors.Is(err, errGrowthTaken) {
				a.stopped = true
				m.cfg.Logger.Info("jobs: a down cell's crawl was grown by its owner; the coordinator stops growing it", "job", a.id)
				return nil
			}
			if err != nil {
				return err // the links are kept: grown at the next round
			}
			for _, gu := range chunk {
				a.urls = append(a.urls, gu.URL)
				a.depths = append(a.depths, gu.Depth)
				a.seen[gu.URL] = true
			}
		}
		s.adoptGrown.Add(int64(len(added)))
	}
	a.links = a.links[:0]
	return nil
}

// read takes in the outcomes that came since the last read.
func (a *adopted) read(ctx context.Context) error {
	for {
		// Whatever the subscription holds now; a short wait is "no more".
		nctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		msg, err := a.it.Next(jetstream.NextContext(nctx))
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				return nil
			}
			return err
		}
		a.take(msg)
	}
}

func (a *adopted) withOutcome() int {
	n := 0
	for _, d := range a.done {
		if d {
			n++
		}
	}
	return n
}

// feedAdopted queues a's URLs without an outcome, up to the window.
func (m *Manager) feedAdopted(ctx context.Context, s *sharing, a *adopted) error {
	if err := a.read(ctx); err != nil {
		return err
	}
	if err := m.growAdopted(ctx, s, a); err != nil {
		return err
	}
	now := time.Now()
	inflight := 0
	for seq, at := range a.sent {
		if !a.done[seq] && now.Sub(at) < s.cfg.Republish {
			inflight++
		}
	}
	for i := range a.urls {
		seq := uint64(i)
		if inflight >= s.cfg.Window {
			break
		}
		if a.done[seq] {
			continue
		}
		if at, ok := a.sent[seq]; ok {
			if now.Sub(at) < s.cfg.Republish {
				continue
			}
			a.resent[seq]++
		}
		// The owner's first id for a URL that waits (0), so that its own
		// item is a duplicate; another for a released retry, or a URL
		// queued again after Republish.
		gen := 3000 * a.resent[seq]
		if a.marked[seq] {
			gen += 2000
		}
		it := jobItem{Job: a.id, Owner: a.owner, Account: a.mt.Account, Seq: seq, Gen: gen, URL: a.urls[i],
			Options: a.mt.Options, Shape: a.mt.Shape}
		if a.depths != nil {
			it.Depth = a.depths[i]
		}
		if err := s.publish(ctx, it); err != nil {
			return err
		}
		a.sent[seq] = now
		s.adoptedURLs.Add(1)
		inflight++
	}
	return nil
}

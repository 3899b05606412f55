package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/jsnode"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

// Sharing a region's job URLs among its cells (docs/jetstream-design.md,
// "Built so far": work sharing before replicated job state).
//
// The cell that accepted a job owns it, as before: its Pebble holds the
// job, its dispatcher walks the pending URLs and its complete records
// each outcome. What changes once Share is called is who fetches: the
// dispatcher publishes each URL it admits as a work item on the region's
// TRAWL_WORK stream (the "job" consumer, one durable pulled by every
// cell), any cell's puller fetches it and publishes the outcome to the
// owner's subject on TRAWL_RESULTS, and the owner's results consumer
// hands it to complete. complete takes the first outcome of a URL and
// drops any later one, so a URL fetched twice (its cell died before the
// ack, and JetStream delivered it again) is recorded and charged once.
//
// What a dead cell costs: a puller's unacked item is delivered again
// AckWait (15 s) after its last heartbeat; a dead owner's items are
// still fetched by the others and their outcomes wait in its results
// consumer until it is back. Replicated job state, so that another cell
// answers for a dead owner, is the next step of the design.

// ShareConfig configures Share.
type ShareConfig struct {
	// Cell is this cell's name: the subject its results come back on.
	Cell string
	// Window bounds this cell's URLs in the queue without an outcome
	// (default 8 × Config.Concurrency): enough for every cell's pullers
	// in a region of a few cells, few enough that a job submitted later
	// to another cell is not queued behind a whole 10,000-URL job.
	Window int
	// Republish is how long a URL may stay in the queue without an
	// outcome before it is published again (default 10 min): a work item
	// that used up its deliveries (each time its cell died) is not
	// delivered again, and the URL must not stay pending for ever.
	Republish time.Duration
	// Live reports whether a cell of the region is live (membership);
	// Coordinating whether this cell holds the region's coordinator
	// lease. With both set, the coordinator feeds the jobs of owners
	// that are not live (adopt.go).
	Live         func(cell string) bool
	Coordinating func() bool
	// Place reports whether the region's gates would place a job id
	// that names no cell on this cell now (members.Rendezvous over the
	// region's ready cells); nil: new ids name this cell (Extra.Placed).
	Place func(id string) bool
}

// Work item and outcome on the wire.
type jobItem struct {
	Job     string          `json:"job"`
	Owner   string          `json:"owner"`
	Account string          `json:"account"`
	Seq     uint64          `json:"seq"`
	Gen     int             `json:"gen"`
	URL     string          `json:"url"`
	Depth   int             `json:"depth,omitempty"`
	Options scrape.Options  `json:"options"`
	Shape   json.RawMessage `json:"shape,omitempty"`
}

type jobOutcome struct {
	Job      string          `json:"job"`
	Seq      uint64          `json:"seq"`
	Gen      int             `json:"gen"`
	URL      string          `json:"url"`
	Blob     string          `json:"blob,omitempty"` // the line, in the object store when too large for a message
	Links    []string        `json:"links,omitempty"`
	Usage    *metering.Usage `json:"usage,omitempty"`
	Error    *outcomeError   `json:"error,omitempty"`
	Attempts int             `json:"attempts"`
	Cell     string          `json:"cell"` // who fetched it
}

type outcomeError struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// An outcome travels as a message whose data is the URL's line, as it
// is, and whose header headerOutcome is the rest (jobOutcome, JSON): the
// line, often most of the bytes, is neither re-encoded nor scanned again.
const headerOutcome = "Trawl-Outcome"

type outKey struct {
	job string
	seq uint64
}

type outItem struct {
	item jobItem
	at   time.Time
}

// sharing is a Manager's share of the region's work.
type sharing struct {
	cfg   ShareConfig
	js    jetstream.JetStream
	work  jetstream.Consumer
	res   jetstream.Consumer
	blobs jetstream.ObjectStore

	mu    sync.Mutex
	out   map[outKey]outItem // published, no outcome yet
	slots chan struct{}      // one per item in out

	fetched, applied, duplicates, redelivered atomic.Int64
	// cutOff counts the URLs this cell failed at their JobMaxDeliver-th
	// delivery.
	cutOff atomic.Int64
	// fed is the account of each job of a down owner the coordinator
	// feeds now (nil on a cell that does not coordinate): Running adds
	// them, so that a region's running jobs miss none while their owner
	// is down.
	fed atomic.Pointer[map[string]string]
	// adoptedURLs is the URLs of down owners' jobs this cell queued as
	// the region's coordinator (adopt.go).
	adoptedURLs atomic.Int64
	adoptTicks  atomic.Int64 // the adopt loop's turns (tests wait on them)
	// adoptGrown is the URLs this cell added to down cells' crawls as
	// the coordinator (adopt.go).
	adoptGrown atomic.Int64
	// fetching is the items this cell's pullers hold now; backlog the
	// region's job URLs waiting for a puller and lag this cell's
	// outcomes waiting to be recorded (refreshed every 2 s by watch).
	fetching, backlog, lag atomic.Int64
	// restore is what the last restore did (nil until it ran).
	restore atomic.Pointer[RestoreStats]
	// views: what logStatus read of other cells' jobs (logView);
	// owners: the owners of region ids found in the log (owner).
	viewsMu sync.Mutex
	views   map[string]*logView
	owners  map[string]string
}

// Share makes the manager publish its jobs' URLs to the region's work
// queue and fetch the region's queued URLs with Config.Concurrency
// pullers (Start must have been called). The streams and the "job"
// consumer must exist (jsnode.Ensure); Share creates this cell's results
// consumer. It runs until Close.
func (m *Manager) Share(ctx context.Context, js jetstream.JetStream, cfg ShareConfig) error {
	if m.ctx == nil {
		return errors.New("jobs: Share before Start")
	}
	if cfg.Cell == "" {
		cfg.Cell = m.cfg.Cell
	}
	if cfg.Window <= 0 {
		cfg.Window = 8 * m.cfg.Concurrency
	}
	if cfg.Republish <= 0 {
		cfg.Republish = 10 * time.Minute
	}
	work, err := js.Consumer(ctx, jsnode.StreamWork, jsnode.ConsumerJob)
	if err != nil {
		return fmt.Errorf("jobs: the job consumer: %w", err)
	}
	res, err := js.CreateOrUpdateConsumer(ctx, jsnode.StreamJobLog, jsnode.ResultsConsumer(cfg.Cell))
	if err != nil {
		return fmt.Errorf("jobs: this cell's results consumer: %w", err)
	}
	blobs, err := js.ObjectStore(ctx, jsnode.BucketBlobs)
	if err != nil {
		return fmt.Errorf("jobs: the blob store: %w", err)
	}
	s := &sharing{cfg: cfg, js: js, work: work, res: res, blobs: blobs,
		out: map[outKey]outItem{}, slots: make(chan struct{}, cfg.Window)}
	if !m.share.CompareAndSwap(nil, s) {
		return errors.New("jobs: already sharing")
	}
	close(m.shared)
	for range m.cfg.Concurrency {
		m.wg.Add(1)
		go m.pull(s)
	}
	m.wg.Add(3)
	go m.recover(s)
	go m.republish(s)
	go m.watch(s)
	if cfg.Live != nil && cfg.Coordinating != nil {
		m.wg.Add(1)
		go m.adopt(s)
	}
	m.cfg.Logger.Info("jobs: sharing URLs with the region's cells", "cell", cfg.Cell, "window", cfg.Window)
	return nil
}

// recover makes this cell's jobs and the region's log agree (restore),
// retrying until it has, then records outcomes (collect): an outcome of
// a job not restored yet would find no job to record it in.
func (m *Manager) recover(s *sharing) {
	var before RestoreStats // what attempts that failed had restored
	// Retried every few seconds at most: outcomes wait for it (a CI run
	// under load had a crawl's owner back, restoring after failures at
	// 1, 2, 4, 8 and 16 s, still not recording after 60 s).
	for wait := time.Second; m.ctx.Err() == nil; wait = min(2*wait, 5*time.Second) {
		st, err := m.restore(m.ctx, s)
		st.Jobs, st.Outcomes = st.Jobs+before.Jobs, st.Outcomes+before.Outcomes
		before = st
		if err == nil {
			s.restore.Store(&st)
			m.restored.Store(true)
			if st.Jobs > 0 || st.Mirrored > 0 {
				m.cfg.Logger.Info("jobs: this cell's jobs and the region's log agree", "restored", st.Jobs, "outcomes", st.Outcomes,
					"written", st.Mirrored, "took", st.Took.Round(time.Millisecond))
			}
			m.collect(s)
			return
		}
		if m.ctx.Err() != nil {
			break
		}
		m.cfg.Logger.Warn("jobs: restore from the region's log; retrying", "err", err, "in", wait)
		select {
		case <-time.After(wait):
		case <-m.ctx.Done():
		}
	}
	m.wg.Done()
}

// mayRestore reports whether a job id this cell does not know may be one
// it has yet to restore from the region's log.
func (m *Manager) mayRestore() bool {
	return m.cfg.AwaitShare > 0 && !m.restored.Load() && !m.started.IsZero() && time.Since(m.started) < m.cfg.AwaitShare
}

// SetDrained stops (true) or resumes this cell's pulling of the region's
// queued URLs; what its pullers hold finishes.
func (m *Manager) SetDrained(on bool) {
	m.drainMu.Lock()
	defer m.drainMu.Unlock()
	if m.drained.Swap(on) == on {
		return
	}
	m.cfg.Logger.Info("jobs: drained: taking no URLs from the region's queue", "drained", on)
	if on && m.pullStop != nil {
		m.pullStop() // the pulls waiting for an item end now
	}
}

// pullContext is the context a puller waits for an item under: m.ctx,
// ended too when the cell is drained.
func (m *Manager) pullContext() context.Context {
	m.drainMu.Lock()
	defer m.drainMu.Unlock()
	if m.drained.Load() {
		ctx, cancel := context.WithCancel(m.ctx)
		cancel()
		return ctx
	}
	if m.pullCtx == nil || m.pullCtx.Err() != nil {
		m.pullCtx, m.pullStop = context.WithCancel(m.ctx)
	}
	return m.pullCtx
}

// Shared reports whether the manager shares its work (Share ran).
func (m *Manager) Shared() bool { return m.share.Load() != nil }

// ShareStats are the counters of the shared path.
type ShareStats struct {
	Shared      bool  `json:"shared"`
	Queued      int   `json:"queued"`      // this cell's URLs in the queue without an outcome
	Fetched     int64 `json:"fetched"`     // URLs this cell fetched for any cell
	Applied     int64 `json:"applied"`     // outcomes of this cell's URLs recorded
	Duplicates  int64 `json:"duplicates"`  // outcomes dropped: the URL had one already
	Redelivered int64 `json:"redelivered"` // items this cell took that an earlier delivery did not finish
	CutOff      int64 `json:"cut_off"`     // of those, URLs it failed at their jsnode.JobMaxDeliver-th delivery
	Fetching    int64 `json:"fetching"`    // items this cell's pullers hold now
	Backlog     int64 `json:"backlog"`     // the region's job URLs waiting for a puller
	Lag         int64 `json:"lag"`         // outcomes of this cell's URLs not recorded yet
	Drained     bool  `json:"drained"`     // an operator drained the cell: it pulls nothing
	Adopted     int64 `json:"adopted"`     // URLs of down cells' jobs this cell queued as the coordinator
	Grown       int64 `json:"grown"`       // URLs this cell added to down cells' crawls as the coordinator
	// Restored is what the cell restored from the region's job log when
	// it began sharing (mirror.go); nil until that is done.
	Restored *RestoreStats `json:"restored,omitempty"`
}

// ShareStats reports the shared path's counters.
func (m *Manager) ShareStats() ShareStats {
	s := m.share.Load()
	if s == nil {
		return ShareStats{}
	}
	s.mu.Lock()
	q := len(s.out)
	s.mu.Unlock()
	return ShareStats{Shared: true, Queued: q, Fetched: s.fetched.Load(), Applied: s.applied.Load(),
		Duplicates: s.duplicates.Load(), Redelivered: s.redelivered.Load(), CutOff: s.cutOff.Load(),
		Fetching: s.fetching.Load(), Backlog: s.backlog.Load(), Lag: s.lag.Load(), Restored: s.restore.Load(),
		Drained: m.drained.Load(), Adopted: s.adoptedURLs.Load(), Grown: s.adoptGrown.Load()}
}

// send hands an admitted URL to a local worker, or, when sharing, to the
// region's queue; false when the manager is closing (the URL stays
// pending).
func (m *Manager) send(t task) bool {
	t.job.mu.Lock()
	local := t.job.meta.Local
	t.job.mu.Unlock()
	var s *sharing
	if !local {
		s = m.awaitShare()
	}
	if s == nil {
		select {
		case m.work <- t:
			return true
		case <-m.ctx.Done():
			return false
		}
	}
	it, err := m.itemOf(t, s.cfg.Cell)
	if err != nil {
		m.cfg.Logger.Error("job URL record unreadable; the URL stays pending", "job", it.Job, "err", err)
		m.unadmit(t)
		return true
	}
	select {
	case s.slots <- struct{}{}:
	case <-m.ctx.Done():
		return false
	}
	s.mu.Lock()
	s.out[outKey{it.Job, it.Seq}] = outItem{item: it, at: time.Now()}
	s.mu.Unlock()
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		err := s.publish(m.ctx, it)
		if err == nil {
			return true
		}
		if m.ctx.Err() != nil {
			return false
		}
		// The queue refused it (full, or no quorum for a moment): the
		// URL waits here, in flight, and is offered again.
		m.cfg.Logger.Warn("jobs: work queue refused a URL; retrying", "job", it.Job, "err", err, "in", wait)
		select {
		case <-time.After(wait):
		case <-m.ctx.Done():
			return false
		}
	}
}

// awaitShare is the manager's sharing, waiting for Share while
// Config.AwaitShare allows; nil to run locally.
func (m *Manager) awaitShare() *sharing {
	if s := m.share.Load(); s != nil || m.cfg.AwaitShare <= 0 {
		return s
	}
	wait := time.Until(m.started.Add(m.cfg.AwaitShare))
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-m.shared:
	case <-t.C:
	case <-m.ctx.Done():
	}
	return m.share.Load()
}

// unadmit takes a URL that was not sent off its job's in-flight set.
func (m *Manager) unadmit(t task) {
	t.job.mu.Lock()
	delete(t.job.inflight, t.seq)
	t.job.mu.Unlock()
}

// itemOf is the work item of t: the job's options travel with it, so the
// cell that takes it needs nothing of the job's owner.
func (m *Manager) itemOf(t task, owner string) (jobItem, error) {
	j := t.job
	j.mu.Lock()
	it := jobItem{Job: j.meta.ID, Owner: owner, Account: j.meta.Account, Seq: t.seq, URL: t.url,
		Options: j.meta.Options, Shape: j.meta.Shape}
	j.mu.Unlock()
	rec, err := m.record(it.Job, t.seq)
	if err != nil {
		return it, err
	}
	// A URL's generation is the attempts recorded for it: the same while
	// it waits (a restarted owner publishing it again is a duplicate the
	// stream drops), one more after a retry's release.
	it.Gen, it.Depth = rec.Attempts, rec.Depth
	return it, nil
}

func (s *sharing) publish(ctx context.Context, it jobItem) error {
	data, err := json.Marshal(it)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = jsnode.PublishData(ctx, s.js, jsnode.SubjectWorkJob+jsnode.Token(it.Job), data,
		jetstream.WithMsgID(fmt.Sprintf("%s/%d/%d", it.Job, it.Seq, it.Gen)))
	return err
}

// pull is one puller: it takes the region's queued URLs one at a time
// (never a prefetched batch, which would age toward AckWait unworked and
// be stranded with a dead cell), fetches each with heartbeats, publishes
// the outcome to the owner and acks.
func (m *Manager) pull(s *sharing) {
	defer m.wg.Done()
	for m.ctx.Err() == nil {
		if m.drained.Load() {
			// Drained by an operator: no new work from the region; its
			// own URLs still go to the queue, for the other cells.
			select {
			case <-time.After(time.Second):
			case <-m.ctx.Done():
			}
			continue
		}
		msg, err := jsnode.Next(m.pullContext(), s.work, 10*time.Second)
		if err != nil {
			if m.ctx.Err() == nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.Canceled) {
				m.cfg.Logger.Debug("jobs: pull", "err", err)
				select {
				case <-time.After(time.Second):
				case <-m.ctx.Done():
				}
			}
			continue
		}
		m.work1(s, msg)
	}
}

// work1 runs one pulled item.
func (m *Manager) work1(s *sharing, msg jetstream.Msg) {
	var it jobItem
	if err := json.Unmarshal(msg.Data(), &it); err != nil || it.Job == "" || it.Owner == "" {
		m.cfg.Logger.Error("jobs: unreadable work item dropped", "err", err)
		msg.Term()
		return
	}
	delivered := uint64(1)
	if md, err := msg.Metadata(); err == nil {
		delivered = md.NumDelivered
	}
	if delivered > 1 {
		s.redelivered.Add(1)
	}
	var line []byte
	var made Produced
	var serr *httpjson.HTTPError
	var attempts int
	if delivered >= jsnode.JobMaxDeliver {
		line, serr = failedLine(it.URL, &httpjson.HTTPError{Status: http.StatusServiceUnavailable, Code: "cut_off",
			Message: fmt.Sprintf("the URL's fetch was cut off %d times (the cells fetching it stopped); not fetched again", delivered-1)})
		s.cutOff.Add(1)
	} else {
		s.fetching.Add(1)
		stop := jsnode.Heartbeat(m.ctx, msg)
		line, made, serr, attempts = m.fetch(Target{Job: it.Job, Account: it.Account, URL: it.URL, Depth: it.Depth}, it.Options, it.Shape)
		stop()
		s.fetching.Add(-1)
		if m.ctx.Err() != nil {
			// Closing: another cell takes it now rather than after AckWait.
			msg.Nak()
			return
		}
	}
	out := jobOutcome{Job: it.Job, Seq: it.Seq, Gen: it.Gen, URL: it.URL, Links: made.Links, Usage: made.Usage,
		Attempts: attempts, Cell: m.cfg.Cell}
	if serr != nil {
		out.Error = &outcomeError{Status: serr.Status, Code: serr.Code, Message: serr.Message}
	}
	// The outcome is sent again until it is stored (the log between
	// leaders after a cell's death refuses it for some seconds), the
	// item kept meanwhile: a Nak would fetch the page again and use up
	// one of the item's deliveries (jsnode.JobMaxDeliver).
	hb := jsnode.Heartbeat(m.ctx, msg)
	var err error
	for try := 1; ; try++ {
		if err = s.send(m.ctx, it, &out, line); err == nil || m.ctx.Err() != nil || try == sendTries {
			break
		}
		jsnode.Pause(m.ctx, time.Second)
	}
	hb()
	if err != nil {
		m.cfg.Logger.Warn("jobs: outcome not sent; the item goes back to the queue", "job", it.Job, "url", urlpolicy.Redact(it.URL), "err", err)
		msg.NakWithDelay(time.Second)
		return
	}
	s.fetched.Add(1)
	ctx, cancel := context.WithTimeout(m.ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := msg.DoubleAck(ctx); err != nil {
		// Delivered again later: the owner keeps the first outcome.
		m.cfg.Logger.Debug("jobs: ack", "err", err)
		return
	}
	ackLatency.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(attribute.String("trawl.cell", m.cfg.Cell)))
}

// sendTries is how many times a puller sends an outcome (each within
// 10 s) before it hands its item back.
const sendTries = 6

// send publishes an outcome to its owner, the line in the object store
// when it is too large for a message.
func (s *sharing) send(ctx context.Context, it jobItem, out *jobOutcome, line []byte) error {
	id := fmt.Sprintf("%s/%d/%d/%s", it.Job, it.Seq, it.Gen, out.Cell)
	msg := nats.NewMsg(jsnode.ResultSubject(it.Owner, it.Job, it.Seq))
	var err error
	msg.Data, err = jsnode.Offload(ctx, s.blobs, id, line, func(blob string) []byte {
		out.Blob = blob
		return nil // the outcome's header names it
	})
	if err != nil {
		return err
	}
	head, err := json.Marshal(out)
	if err != nil {
		return err
	}
	msg.Header.Set(headerOutcome, string(head))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = jsnode.Publish(ctx, s.js, msg, jetstream.WithMsgID(id))
	return err
}

// fetch runs a URL as a job does: up to Config.Attempts times while the
// site does not answer.
func (m *Manager) fetch(target Target, opts scrape.Options, shape json.RawMessage) (line []byte, made Produced, serr *httpjson.HTTPError, attempts int) {
	for attempts < m.cfg.Attempts {
		attempts++
		if len(shape) > 0 {
			line, made, serr = runShaped(m.ctx, m.cfg.Shaped, target, shape, m.cfg.Busy)
		} else {
			line, serr, _ = runOne(m.ctx, m.scrape, target.URL, opts, m.cfg.Busy)
		}
		if m.ctx.Err() != nil {
			return
		}
		if serr == nil || serr.Status != http.StatusBadGateway {
			return // success or a permanent error
		}
	}
	return
}

// collect records the outcomes of this cell's URLs, whoever fetched them.
//
// An outcome is acked only once its record is on disk: complete writes
// NoSync (a URL's record, line and pending key in one batch), and an
// outcome acked but lost with the WAL buffer in a kill -9 would leave
// its URL pending with its work item gone from the queue (a restarted
// owner publishing it again is a duplicate the stream drops). So
// outcomes are pulled in batches, applied as they arrive, and acked
// after one fsync of the store's WAL per batch.
func (m *Manager) collect(s *sharing) {
	defer m.wg.Done()
	var done []jetstream.Msg
	for m.ctx.Err() == nil {
		batch, err := s.res.Fetch(256, jetstream.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			if m.ctx.Err() == nil {
				m.cfg.Logger.Debug("jobs: results pull", "err", err)
				jsnode.Pause(m.ctx, time.Second)
			}
			continue
		}
		done = done[:0]
		got := 0
		for msg := range batch.Messages() { // each applied as it comes
			got++
			if msg.Headers().Get(headerPending) != "" {
				done = append(done, msg) // the log's mark of a retry (mirror.go)
				continue
			}
			if ok, err := m.applyRequest(msg.Headers()); ok {
				if err != nil {
					if m.ctx.Err() == nil {
						m.cfg.Logger.Error("jobs: a request taken for this cell not applied; offered again", "err", err)
					}
					msg.NakWithDelay(time.Second)
					continue
				}
				done = append(done, msg)
				continue
			}
			_, err := m.applyOutcome(s, msg)
			if err != nil {
				if m.ctx.Err() == nil {
					m.cfg.Logger.Error("jobs: outcome not recorded; offered again", "err", err)
				}
				msg.NakWithDelay(time.Second)
				continue
			}
			done = append(done, msg)
		}
		if got == 0 && jsnode.Failed(batch) {
			jsnode.Pause(m.ctx, time.Second) // a consumer without a leader answers at once
		}
		if len(done) == 0 {
			continue
		}
		if err := m.st.SyncWAL(); err != nil {
			// Not acked: delivered again after AckWait, and dropped as
			// repeats if the records did reach the disk.
			m.cfg.Logger.Error("jobs: outcomes not synced; not acked", "err", err)
			continue
		}
		for _, msg := range done {
			msg.Ack()
		}
	}
}

// applyOutcome records one outcome through complete (the first outcome
// of a URL wins) and frees its place in the window; it returns the
// outcome's blob, for the caller to delete once the record is durable.
func (m *Manager) applyOutcome(s *sharing, msg jetstream.Msg) (string, error) {
	var out jobOutcome
	line := msg.Data()
	var logSeq uint64
	if md, err := msg.Metadata(); err == nil {
		logSeq = md.Sequence.Stream
	}
	if err := json.Unmarshal([]byte(msg.Headers().Get(headerOutcome)), &out); err != nil || out.Job == "" {
		m.cfg.Logger.Error("jobs: unreadable outcome dropped", "err", err)
		return "", nil
	}
	if out.Blob != "" {
		b, err := jsnode.Unload(m.ctx, s.blobs, out.Blob)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			// Recorded (and synced) before and its blob deleted: a repeat.
			s.done(out.Job, out.Seq)
			s.duplicates.Add(1)
			return "", nil
		}
		if err != nil {
			return "", err
		}
		line = b
	}
	m.mu.Lock()
	j := m.jobs[out.Job]
	m.mu.Unlock()
	if j != nil {
		var serr *httpjson.HTTPError
		if out.Error != nil {
			serr = &httpjson.HTTPError{Status: out.Error.Status, Code: out.Error.Code, Message: out.Error.Message}
		}
		recorded, err := m.completeShared(task{job: j, seq: out.Seq, url: out.URL, logSeq: logSeq}, line, Produced{Links: out.Links, Usage: out.Usage}, serr, out.Attempts)
		if err != nil {
			return "", err
		}
		if recorded {
			s.applied.Add(1)
		} else {
			s.duplicates.Add(1)
		}
	}
	s.done(out.Job, out.Seq)
	return out.Blob, nil
}

// completeShared is complete for an outcome from the queue; it reports
// whether the outcome was recorded (false: the URL had one already).
func (m *Manager) completeShared(t task, line []byte, made Produced, serr *httpjson.HTTPError, attempts int) (bool, error) {
	var recorded bool
	err := m.completeWith(t, line, made, serr, attempts, func() { recorded = true })
	return recorded, err
}

// done frees a URL's place in the window once it has an outcome.
func (s *sharing) done(job string, seq uint64) {
	s.mu.Lock()
	_, ok := s.out[outKey{job, seq}]
	delete(s.out, outKey{job, seq})
	s.mu.Unlock()
	if ok {
		<-s.slots
	}
}

// ackLatency is how long the server took to confirm an item's ack.
var ackLatency, _ = otel.Meter("github.com/trawlhq/trawl/cell/jobs").Float64Histogram("trawl.cell.jobs.share.ack_latency",
	metric.WithUnit("s"), metric.WithDescription("time for JetStream to confirm the ack of a job URL's work item"))

// watch refreshes the backlog and lag figures from the consumers.
func (m *Manager) watch(s *sharing) {
	defer m.wg.Done()
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(m.ctx, 2*time.Second)
		if ci, err := s.work.Info(ctx); err == nil {
			s.backlog.Store(int64(ci.NumPending))
		}
		if ci, err := s.res.Info(ctx); err == nil {
			s.lag.Store(int64(ci.NumPending) + int64(ci.NumAckPending))
		}
		cancel()
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// republish offers again the URLs that have waited too long for an
// outcome, under a new generation (a new message id).
func (m *Manager) republish(s *sharing) {
	defer m.wg.Done()
	t := time.NewTicker(min(s.cfg.Republish/4, 30*time.Second))
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		var stale []jobItem
		s.mu.Lock()
		for k, o := range s.out {
			if time.Since(o.at) >= s.cfg.Republish {
				o.item.Gen += 1000 // beyond any retry's generation
				o.at = time.Now()
				s.out[k] = o
				stale = append(stale, o.item)
			}
		}
		s.mu.Unlock()
		for _, it := range stale {
			m.cfg.Logger.Warn("jobs: a queued URL had no outcome in time; published again", "job", it.Job, "seq", strconv.FormatUint(it.Seq, 10))
			if err := s.publish(m.ctx, it); err != nil && m.ctx.Err() == nil {
				m.cfg.Logger.Warn("jobs: republish", "job", it.Job, "err", err)
			}
		}
	}
}

package jobs

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/jsnode"
	"github.com/trawlhq/trawl/internal/store"
)

// The job log: a shared job's replicated copy (docs/jetstream-design.md
// §10, "A cell that lost its disk").
//
// A cell that shares its jobs keeps, in the region's TRAWL_JOBLOG stream
// (replicated like the work queue, kept for --job-retention and an hour),
// under trawl.job.<owner>.<job>:
//
//   - .urls.<n>: the submitted URLs, in chunks, written before the
//     submission is answered;
//   - .meta: the job's record (holds, releases, cancellation, retries,
//     what it was charged), written again at each change, the last kept;
//   - .res.<seq>: the outcome of URL seq, written by the cell that fetched
//     it; the owner's results consumer reads it from there, and the
//     message stays (the last outcome of a URL is kept: a released
//     retry's replaces the failure it retried).
//
// A cell whose data directory was lost comes back under the same name
// with an empty store: before it records outcomes again, it reads its
// jobs' records from the log, writes each job's URLs as pending, applies
// every outcome the log has, and goes on with what is still pending
// (restore). Nothing is charged again: a job is charged at submission,
// and its record says so. A growing job (a site crawl) also has
//
//   - .grow.<seq>: URLs its pages added, from URL seq on, each with its
//     depth, written before the write that records them (growLocked):
//     a restored crawl has every URL it had found, at the same seq, so
//     a page's charge (named by its seq) is not charged twice.
//
// A job kept on its owner (Extra.Local: a crawl with a delay) is in the
// log too: its owner fetches its URLs (its clock keeps the delay) and
// publishes each outcome to its own results rather than record it at
// once, so a lost disk loses none of it; the coordinator does not feed
// it while the owner is down (it would not keep the delay).

// headerPending marks a .res.<seq> message that puts its URL back to
// pending (a released retry), replacing the failure it retries.
const headerPending = "Trawl-Pending"

// chunkURLs and chunkBytes bound a chunk of a job's URLs (a message is
// at most 1 MiB).
const (
	chunkURLs  = 1000
	chunkBytes = 512 << 10
)

// errMirror answers a submission the region's log could not store.
var errMirror = &httpjson.HTTPError{Status: http.StatusServiceUnavailable, Code: "try_again",
	Message: "the region could not store the job; try again", RetryAfter: 5 * time.Second}

// ErrRestoring answers a call about a job this cell cannot answer for
// yet: one it may still be restoring from the region's log (it came back
// without its data), or another cell's while its own sharing starts.
var ErrRestoring = &httpjson.HTTPError{Status: http.StatusServiceUnavailable, Code: "try_again",
	Message: "this cell is not ready to answer for this job yet; try again", RetryAfter: 5 * time.Second}

// mirrored reports the sharing jobs go into the log with, or nil (not
// sharing).
func (m *Manager) mirrored() *sharing {
	return m.share.Load()
}

// putJob writes a new job's URLs, then its record, to the log.
func (s *sharing) putJob(ctx context.Context, mt meta, urls []string) error {
	n, size := 0, 0
	var chunk []string
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		b, _ := json.Marshal(chunk)
		if err := s.logPublish(ctx, jsnode.JobSubject(s.cfg.Cell, mt.ID)+".urls."+strconv.Itoa(n), b, nil); err != nil {
			return err
		}
		n, size, chunk = n+1, 0, chunk[:0]
		return nil
	}
	for _, u := range urls {
		if len(chunk) == chunkURLs || (size+len(u) > chunkBytes && len(chunk) > 0) {
			if err := flush(); err != nil {
				return err
			}
		}
		chunk = append(chunk, u)
		size += len(u) + 3
	}
	if err := flush(); err != nil {
		return err
	}
	return s.putMeta(ctx, mt)
}

// putGrowth writes to the log the URLs a growing job's page added, from
// seq on. The subject is the first seq's: were an earlier write for it
// refused after all stored, the next growth starts at the same seq (the
// job's store did not take it) and replaces it.
func (s *sharing) putGrowth(ctx context.Context, id string, seq uint64, urls []grownURL) error {
	return s.putGrowthOf(ctx, s.cfg.Cell, id, seq, urls)
}

// errGrowthTaken refuses a growth chunk at a seq the log has one at
// already: another writer's (the coordinator's, while the owner was
// down; or the owner's, back) or an earlier try of this one whose store
// write did not follow. The writer absorbs the log's chunks
// (absorbGrowthLocked) and grows again from there.
var errGrowthTaken = errors.New("jobs: the log has URLs at that seq already")

// putGrowthOf is putGrowth of a job owned by owner: the first chunk at a
// seq is the one kept (the subject must be empty: errGrowthTaken).
func (s *sharing) putGrowthOf(ctx context.Context, owner, id string, seq uint64, urls []grownURL) error {
	b, err := json.Marshal(urls)
	if err != nil {
		return err
	}
	had, err := s.publishFirst(ctx, jsnode.JobSubject(owner, id)+".grow."+strconv.FormatUint(seq, 10), b)
	if err == nil && had != nil {
		return errGrowthTaken
	}
	return err
}

// publishFirst writes data to subject of the job log unless the subject
// has a message; it returns that message's data then (nil: data is the
// subject's message now).
func (s *sharing) publishFirst(ctx context.Context, subject string, data []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, perr := jsnode.PublishData(ctx, s.js, subject, data, jetstream.WithExpectLastSequencePerSubject(0))
	if perr == nil {
		return nil, nil
	}
	// Refused because the subject has a message (or not stored at all:
	// then there is none to read either).
	msg, err := jsnode.LastMsg(ctx, s.js, jsnode.StreamJobLog, subject)
	if err != nil {
		return nil, fmt.Errorf("%w (and reading the subject: %v)", perr, err)
	}
	return msg.Data, nil
}

// logGrowth reads a growing job's added URLs from the log: the URLs from
// seq first on, in order; an error if a seq is missing.
func logGrowth(ctx context.Context, s *sharing, prefix string, first uint64) ([]grownURL, error) {
	chunks, err := logChunks[grownURL](ctx, s, prefix+".grow.*")
	if err != nil {
		return nil, err
	}
	for seq := range chunks {
		if seq < first {
			delete(chunks, seq) // the caller has them
		}
	}
	var out []grownURL
	for next := first; len(chunks) > 0; {
		c, ok := chunks[next]
		if !ok {
			return nil, fmt.Errorf("the log has no URLs from seq %d on, and %d later chunks", next, len(chunks))
		}
		delete(chunks, next)
		out = append(out, c...)
		next += uint64(len(c))
	}
	return out, nil
}

// putMeta writes a job's record to the log.
func (s *sharing) putMeta(ctx context.Context, mt meta) error {
	b, _ := json.Marshal(mt)
	return s.logPublish(ctx, jsnode.JobSubject(s.cfg.Cell, mt.ID)+".meta", b, nil)
}

func (s *sharing) logPublish(ctx context.Context, subject string, data []byte, h nats.Header) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msg := &nats.Msg{Subject: subject, Data: data, Header: h}
	_, err := jsnode.Publish(ctx, s.js, msg)
	return err
}

// mirrorMetaLocked writes j's record to the log after a change; j.mu is
// held. The change is durable in the store already: a record the log
// missed is written again when the cell next starts sharing.
func (m *Manager) mirrorMetaLocked(j *job) {
	s := m.mirrored()
	if s == nil {
		return
	}
	if err := s.putMeta(m.ctx, j.meta); err != nil && m.ctx.Err() == nil {
		m.cfg.Logger.Warn("jobs: job record not written to the region's log (written again at the next start)", "job", j.meta.ID, "err", err)
	}
}

// mirrorPendingLocked records in the log that URLs seqs of j are pending
// again (a released retry); j.mu is held.
func (m *Manager) mirrorPendingLocked(j *job, seqs []uint64) {
	if s := m.mirrored(); s != nil {
		s.markPending(s.cfg.Cell, j.meta.ID, seqs, m.cfg.Logger)
	}
}

// markPending records in the log that URLs seqs of job, owned by owner,
// are pending again: each one's outcome is replaced by a mark.
func (s *sharing) markPending(owner, job string, seqs []uint64, log *slog.Logger) {
	if len(seqs) == 0 {
		return
	}
	h := nats.Header{}
	h.Set(headerPending, "1")
	for _, seq := range seqs {
		msg := &nats.Msg{Subject: jsnode.ResultSubject(owner, job, seq), Header: h}
		if _, err := s.js.PublishMsgAsync(msg); err != nil {
			log.Warn("jobs: retried URL not marked pending in the region's log", "job", job, "err", err)
			return
		}
	}
	select {
	case <-s.js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		log.Warn("jobs: retried URLs not confirmed pending in the region's log", "job", job)
	}
}

// forget removes a swept job from the log.
func (s *sharing) forget(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := s.js.Stream(ctx, jsnode.StreamJobLog)
	if err != nil {
		return err
	}
	return st.Purge(ctx, jetstream.WithPurgeSubject(jsnode.JobSubject(s.cfg.Cell, id)+".>"))
}

// scanLog calls fn with every message of the job log on subject filter,
// in order, until the last one there was when it started.
func scanLog(ctx context.Context, js jetstream.JetStream, filter string, fn func(jetstream.Msg) error) error {
	return jsnode.Scan(ctx, js, jsnode.StreamJobLog, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverAllPolicy}, fn)
}

// RestoreStats say what the last restore did.
type RestoreStats struct {
	// Jobs restored from the log, and their outcomes applied.
	Jobs     int `json:"jobs"`
	Outcomes int `json:"outcomes"`
	// Mirrored is the jobs of the store the log did not have.
	Mirrored int `json:"written"`
	// Took is how long it took.
	Took time.Duration `json:"-"`
	// Seconds is Took in seconds.
	Seconds float64 `json:"seconds"`
}

// restore makes the log and the store agree on this cell's jobs, before
// the cell records outcomes: a job the log has and the store does not
// (the data directory was lost) is restored; a job the store has is
// written to the log (its record again, and its URLs if the log lacks
// it: it was submitted before sharing began).
func (m *Manager) restore(ctx context.Context, s *sharing) (RestoreStats, error) {
	start := time.Now()
	var st RestoreStats
	var lost []meta
	logged := map[string]meta{}
	now := m.cfg.Now()
	err := scanLog(ctx, s.js, jsnode.JobSubject(s.cfg.Cell, "*")+".meta", func(msg jetstream.Msg) error {
		var mt meta
		if err := json.Unmarshal(msg.Data(), &mt); err != nil || mt.ID == "" {
			m.cfg.Logger.Error("jobs: unreadable job record in the region's log", "subject", msg.Subject(), "err", err)
			return nil
		}
		logged[mt.ID] = mt
		m.mu.Lock()
		// A job being submitted now is in the log before the store:
		// not lost.
		have := m.jobs[mt.ID] != nil || m.creating[mt.ID]
		m.mu.Unlock()
		expired := mt.CreatedAt.Before(now.Add(-m.cfg.Retention)) || (mt.Hold != "" && now.After(mt.HeldUntil))
		if !have && !expired {
			lost = append(lost, mt)
		}
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("jobs: read this cell's jobs from the log: %w", err)
	}
	for _, mt := range lost {
		n, err := m.restoreJob(ctx, s, mt)
		if err != nil {
			return st, fmt.Errorf("jobs: restore job %s: %w", mt.ID, err)
		}
		st.Jobs++
		st.Outcomes += n
	}
	m.mu.Lock()
	var local []*job
	for _, j := range m.jobs {
		local = append(local, j)
	}
	m.mu.Unlock()
	sort.Slice(local, func(a, b int) bool { return local[a].meta.ID < local[b].meta.ID })
	for _, j := range local {
		j.mu.Lock()
		mt := j.meta
		j.mu.Unlock()
		if mt.Grow != nil && logged[mt.ID].ID != "" {
			// URLs the coordinator added while this cell was down
			// (adopt.go), before any outcome of theirs is recorded.
			j.mu.Lock()
			err := m.absorbGrowthLocked(ctx, s, j)
			j.mu.Unlock()
			if err != nil {
				return st, fmt.Errorf("jobs: crawl %s's growth from the log: %w", mt.ID, err)
			}
		}
		if lm, ok := logged[mt.ID]; ok {
			if takenForOwner(lm, mt) {
				continue // the request is in its results, applied next; then the record is written
			}
			err = s.putMeta(ctx, mt)
		} else {
			err = m.mirrorJob(ctx, s, mt)
			st.Mirrored++
		}
		if err != nil {
			return st, fmt.Errorf("jobs: write job %s to the log: %w", mt.ID, err)
		}
	}
	st.Took = time.Since(start)
	st.Seconds = st.Took.Seconds()
	return st, nil
}

// absorbGrowthLocked adds to growing job j the URLs the log has from its
// total on (written by the coordinator while this cell was down, or by
// an earlier try of a write whose store part did not follow), pending;
// j.mu is held.
func (m *Manager) absorbGrowthLocked(ctx context.Context, s *sharing, j *job) error {
	total := uint64(j.total())
	grown, err := logGrowth(ctx, s, jsnode.JobSubject(s.cfg.Cell, j.meta.ID), total)
	if err != nil || len(grown) == 0 {
		return err
	}
	b := m.st.NewBatch()
	putGrown(b, j.meta.ID, total, grown)
	if err := b.Commit(store.Sync); err != nil {
		return err
	}
	j.pending += len(grown)
	j.meta.Total += len(grown)
	m.cfg.Logger.Info("jobs: a crawl's URLs added in the region's log taken in", "job", j.meta.ID, "urls", len(grown), "from", total)
	if !j.isCancelled() && j.meta.Hold == "" {
		m.startDispatchLocked(j)
	}
	return nil
}

// takenForOwner reports whether the log's record lm of a job is ahead of
// the owner's mt by a request another cell took while the owner was down
// (logCancel, logRelease): writing mt over it would hide the request's
// effect from the region until the owner applies it.
func takenForOwner(lm, mt meta) bool {
	return (!lm.CancelledAt.IsZero() && mt.CancelledAt.IsZero()) ||
		(mt.Hold != "" && lm.Hold == "" && lm.Released == mt.Hold) ||
		(lm.RetryHold != "" && lm.RetryHold != mt.RetryHold) ||
		(lm.RetryReleased != "" && lm.RetryReleased != mt.RetryReleased)
}

// mirrorJob writes a job of the store the log does not have (submitted
// before sharing began): its URLs and record; a growing job's submitted
// URLs (its first ones, at depth 0) as its URLs and the rest as growth.
func (m *Manager) mirrorJob(ctx context.Context, s *sharing, mt meta) error {
	var urls []string
	var grown []grownURL
	err := m.st.Scan(jobKey(mt.ID, 'u'), nil, func(_, v []byte) (bool, error) {
		var r urlRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return false, err
		}
		if mt.Grow != nil && (r.Depth > 0 || len(grown) > 0) {
			grown = append(grown, grownURL{URL: r.URL, Depth: r.Depth})
		} else {
			urls = append(urls, r.URL)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	for i := 0; i < len(grown); i += chunkURLs {
		err := s.putGrowth(ctx, mt.ID, uint64(len(urls)+i), grown[i:min(i+chunkURLs, len(grown))])
		if err != nil && !errors.Is(err, errGrowthTaken) { // taken: by an earlier try of this write
			return err
		}
	}
	return s.putJob(ctx, mt, urls)
}

// restoreJob writes job mt from the log into the store, every URL
// pending, applies the outcomes the log has, and starts what is left; it
// returns how many outcomes it applied.
func (m *Manager) restoreJob(ctx context.Context, s *sharing, mt meta) (int, error) {
	prefix := jsnode.JobSubject(s.cfg.Cell, mt.ID)
	urls, err := logURLs(ctx, s, prefix)
	if err != nil {
		return 0, err
	}
	var grown []grownURL
	if mt.Grow != nil && len(urls) > 0 {
		// A crawl's record in the log may predate its last URLs: its
		// total is what it had found.
		if grown, err = logGrowth(ctx, s, prefix, uint64(len(urls))); err != nil {
			return 0, err
		}
		mt.Total = len(urls) + len(grown)
	}
	if len(urls)+len(grown) != mt.Total || len(urls) == 0 {
		return 0, fmt.Errorf("the log has %d of its %d URLs", len(urls), mt.Total)
	}
	// Its idempotency key (the record names it): a repeat of the
	// submission returns this job, as before the loss, unless a new job
	// took the key meanwhile (then this one does not hold it: deleting
	// it must not drop the other's).
	var idem []byte
	if strings.HasPrefix(mt.IdemKey, store.PrefixJobKey) {
		if _, err := m.st.Get([]byte(mt.IdemKey)); errors.Is(err, store.ErrNotFound) {
			idem = append(append([]byte(mt.ID), 0), fingerprint(urls, mt.Options)...)
		}
	}
	if idem == nil {
		mt.IdemKey = ""
	}
	j := newJob(mt)
	j.pending = mt.Total
	j.restoring = true
	b := m.st.NewBatch()
	putNewJob(b, mt, urls)
	putGrown(b, mt.ID, uint64(len(urls)), grown)
	if idem != nil {
		b.Set([]byte(mt.IdemKey), idem)
	}
	if err := b.Commit(store.Sync); err != nil {
		return 0, err
	}
	m.mu.Lock()
	m.jobs[mt.ID] = j
	m.mu.Unlock()
	undo := func() {
		// Taken out again, so that the next attempt restores it whole.
		m.mu.Lock()
		delete(m.jobs, mt.ID)
		m.mu.Unlock()
		m.st.Delete([]byte(store.PrefixJobIndex+mt.ID), store.Sync)
		m.st.DeletePrefix([]byte(store.PrefixJob+mt.ID+"/"), store.Sync)
	}
	applied := 0
	err = scanLog(ctx, s.js, prefix+".res.*", func(msg jetstream.Msg) error {
		if _, ok := outcomeOf(msg); !ok {
			return nil // a mark; a cancel request is in the record too
		}
		if _, err := m.applyOutcome(s, msg); err != nil {
			return err
		}
		applied++
		return nil
	})
	if err == nil {
		err = m.st.SyncWAL()
	}
	if err != nil {
		undo() // nothing else knows the job yet: no dispatcher, no collect
		return applied, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.restoring = false
	if j.pending > 0 && j.isCancelled() {
		if _, err := m.cancelPendingLocked(j, j.meta, nil); err != nil {
			return applied, err
		}
	}
	m.cfg.Logger.Info("jobs: job restored from the region's log", "job", mt.ID, "urls", len(urls), "outcomes", applied, "pending", j.pending)
	if j.pending > 0 && j.meta.Hold == "" {
		m.startDispatchLocked(j)
	}
	return applied, nil
}

// seqOf is the URL sequence number a key of jobKey ends with.
func seqOf(k []byte) uint64 { return binary.BigEndian.Uint64(k[len(k)-8:]) }

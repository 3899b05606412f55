package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/trawlhq/trawl/internal/jsnode"
)

// Marks: what an observer did about a job's events, kept in the region's
// log beside the job (docs/jetstream-design.md §5, "Job webhooks").
//
// An observer whose effect must happen once per event (a webhook
// delivery) but runs after the write that records the event cannot keep
// its state in the cell's store alone: a cell that lost its data
// directory records the job's events again from the log (Event.Restored)
// and cannot tell which of them were delivered. So it marks each event
// in the log, under trawl.job.<owner>.<job>.mark.<event key>, before the
// write that records the event: the first mark of an event wins (a
// publish that expects the subject empty), and a later one gets it back,
// so an event recorded again reuses its delivery's id; the observer
// rewrites the mark done once its effect happened, and an event whose
// mark is done is not acted on again.
//
// A mark may carry what acting on the event needs (Payload: a webhook
// delivery, signed body and all; a large one in the blob store). While the owner is down, the region's
// coordinator hands each pending mark with a payload to Config.TakeMark
// (a cell acting for the owner: its own sender sends the delivery and
// marks it done), so a delivery does not wait for a dead cell. Either
// sender checks the mark before each attempt (ReadMark): one done by
// the other is dropped unsent, so the owner back does not repeat what
// the coordinator sent; both may send one in flight at the same moment
// (the same id twice: webhooks are at least once).

// Mark is an observer's record of one event of a job in the region's
// log.
type Mark struct {
	// ID is what the observer named its effect (a delivery's id).
	ID string `json:"id"`
	// Done: the effect happened (a delivery sent or given up).
	Done bool `json:"done,omitempty"`
	// Payload is what another cell needs to act on the event for the
	// owner (opaque to the manager); nil when too large to keep here.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Blob names the payload in TRAWL_BLOBS when it is larger than
	// MaxMarkPayload (the coordinator reads it back before TakeMark).
	Blob string `json:"blob,omitempty"`
}

// MaxMarkPayload bounds a mark's payload in the mark's message: a larger
// one goes to the blob store (Mark.Blob).
const MaxMarkPayload = 256 << 10

// eventKey names event e of a page whose outcome is message logSeq of
// the log (0: none) within its job (Event.Key).
func eventKey(kind string, seq, logSeq uint64) string {
	switch kind {
	case EventStarted:
		return "started"
	case EventPage:
		if logSeq > 0 {
			return "page." + strconv.FormatUint(logSeq, 10)
		}
		return "page.u" + strconv.FormatUint(seq, 10)
	}
	return "end" // completed, cancelled, failed: a job ends once
}

// markSubject is the subject of the mark of event key of job, owned by
// cell.
func markSubject(cell, job, key string) string {
	return jsnode.JobSubject(cell, job) + ".mark." + key
}

// errNotLogged answers a mark of a job that is not in the log.
var errNotLogged = errors.New("jobs: the job is not in the region's log")

// ClaimMark records mk as the mark of event key of job (Event.Key; a job
// of this cell in the region's log: Event.Logged) unless the event has
// one already, and returns the mark the event has: mk, or the earlier
// one. It may be called from an Observer's Stage: it takes no lock of
// the manager.
func (m *Manager) ClaimMark(job, key string, mk Mark) (Mark, error) {
	s := m.share.Load()
	if s == nil {
		return Mark{}, errNotLogged
	}
	if len(mk.Payload) > MaxMarkPayload {
		// An earlier mark of the event, if any, keeps its own blob: this
		// one then stays unnamed until the blob store's retention.
		name := "mark/" + s.cfg.Cell + "/" + jsnode.Token(job) + "/" + key
		if err := jsnode.PutBlob(m.ctx, s.blobs, name, mk.Payload); err != nil {
			m.cfg.Logger.Warn("jobs: a mark's payload not kept (its effect waits for this cell if it goes down)", "job", job, "mark", key, "err", err)
		} else {
			mk.Blob = name
		}
		mk.Payload = nil
	}
	b, _ := json.Marshal(mk)
	raw, err := s.publishFirst(m.ctx, markSubject(s.cfg.Cell, job, key), b)
	if err != nil {
		return Mark{}, fmt.Errorf("jobs: mark %s of %s: %w", key, job, err)
	}
	if raw == nil {
		return mk, nil
	}
	var had Mark
	if err := json.Unmarshal(raw, &had); err != nil || had.ID == "" {
		return Mark{}, fmt.Errorf("jobs: mark %s of %s unreadable: %v", key, job, err)
	}
	return had, nil
}

// ReadMark is the mark of event key of job (the zero Mark: none).
func (m *Manager) ReadMark(job, key string) (Mark, error) {
	s := m.share.Load()
	if s == nil {
		return Mark{}, errNotLogged
	}
	ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
	defer cancel()
	owner, err := m.ownerOf(ctx, s, job)
	if err != nil {
		return Mark{}, err
	}
	return readMark(ctx, s, markSubject(owner, job, key))
}

func readMark(ctx context.Context, s *sharing, subject string) (Mark, error) {
	msg, err := jsnode.LastMsg(ctx, s.js, jsnode.StreamJobLog, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Mark{}, nil
	}
	if err != nil {
		return Mark{}, err
	}
	var mk Mark
	if err := json.Unmarshal(msg.Data, &mk); err != nil {
		return Mark{}, fmt.Errorf("jobs: mark %s unreadable: %w", subject, err)
	}
	return mk, nil
}

// FinishMark records that the effect named id of event key of job
// happened, on the owner or on a cell acting for it. A mark not
// rewritten (the log unavailable) means the effect may happen again
// (after a lost disk, or by the owner back), with the same id.
func (m *Manager) FinishMark(job, key, id string) error {
	s := m.share.Load()
	if s == nil {
		return errNotLogged
	}
	b, _ := json.Marshal(Mark{ID: id, Done: true})
	owner, err := m.ownerOf(m.ctx, s, job)
	if err != nil {
		return err
	}
	return s.logPublish(m.ctx, markSubject(owner, job, key), b, nil)
}

// ownerOf is the cell that owns job: this one if it has it, else the one
// its id names or the log says (sharing.owner).
func (m *Manager) ownerOf(ctx context.Context, s *sharing, job string) (string, error) {
	if m.Exists(job) {
		return m.cfg.Cell, nil
	}
	return s.owner(ctx, job)
}

// takeMarks hands the pending marks with a payload of owner's jobs (a
// cell that is not live) to Config.TakeMark, from stream sequence from
// on; it returns the sequence to read from next time (after the last
// mark handed, or read and not pending).
func (m *Manager) takeMarks(ctx context.Context, s *sharing, owner string, from uint64) (uint64, int, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{jsnode.JobSubject(owner, "*") + ".mark.>"},
		DeliverPolicy: jetstream.DeliverAllPolicy}
	if from > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	next, taken := from, 0
	err := jsnode.Scan(ctx, s.js, jsnode.StreamJobLog, cfg, func(msg jetstream.Msg) error {
		md, err := msg.Metadata()
		if err != nil {
			return err
		}
		parts := strings.SplitN(msg.Subject(), ".", 6) // trawl.job.<owner>.<job>.mark.<key>
		var mk Mark
		if len(parts) == 6 && json.Unmarshal(msg.Data(), &mk) == nil && !mk.Done && (len(mk.Payload) > 0 || mk.Blob != "") {
			if mk.Blob != "" {
				if mk.Payload, err = jsnode.Unload(ctx, s.blobs, mk.Blob); err != nil {
					return err
				}
			}
			if err := m.cfg.TakeMark(jsnode.Untoken(parts[3]), parts[5], mk); err != nil {
				return err
			}
			taken++
		}
		next = md.Sequence.Stream + 1
		return nil
	})
	return next, taken, err
}

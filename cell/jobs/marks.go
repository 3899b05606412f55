package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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

// Mark is an observer's record of one event of a job in the region's
// log.
type Mark struct {
	// ID is what the observer named its effect (a delivery's id).
	ID string `json:"id"`
	// Done: the effect happened (a delivery sent or given up).
	Done bool `json:"done,omitempty"`
}

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

// ClaimMark records id as the mark of event key of job (Event.Key; a job
// of this cell in the region's log: Event.Logged) unless the event has
// one already, and returns the mark the event has: id's, or the earlier
// one. It may be called from an Observer's Stage: it takes no lock of
// the manager.
func (m *Manager) ClaimMark(job, key, id string) (Mark, error) {
	s := m.share.Load()
	if s == nil {
		return Mark{}, errNotLogged
	}
	subject := markSubject(s.cfg.Cell, job, key)
	mk := Mark{ID: id}
	b, _ := json.Marshal(mk)
	ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
	defer cancel()
	_, perr := s.js.Publish(ctx, subject, b, jetstream.WithExpectLastSequencePerSubject(0))
	if perr == nil {
		return mk, nil
	}
	// Refused because the event has a mark (or not stored at all: then
	// there is none to read either).
	st, err := s.js.Stream(ctx, jsnode.StreamJobLog)
	if err != nil {
		return Mark{}, fmt.Errorf("jobs: mark %s of %s: %w (and %v)", key, job, perr, err)
	}
	msg, err := st.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		return Mark{}, fmt.Errorf("jobs: mark %s of %s: %w (and %v)", key, job, perr, err)
	}
	var had Mark
	if err := json.Unmarshal(msg.Data, &had); err != nil || had.ID == "" {
		return Mark{}, fmt.Errorf("jobs: mark %s of %s unreadable: %v", key, job, err)
	}
	return had, nil
}

// FinishMark records that the effect named id of event key of job
// happened. A mark not rewritten (the log unavailable) means the effect
// may happen again after a lost disk, with the same id.
func (m *Manager) FinishMark(job, key, id string) error {
	s := m.share.Load()
	if s == nil {
		return errNotLogged
	}
	b, _ := json.Marshal(Mark{ID: id, Done: true})
	return s.logPublish(m.ctx, markSubject(s.cfg.Cell, job, key), b, nil)
}

package jobs

import (
	"encoding/json"
	"time"

	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/store"
)

// Event kinds (Observer). A job with a shape is started once (its hold
// released), has one event per URL with an outcome, and ends once:
// completed when its last URL has an outcome, or cancelled or stopped
// (Cancel, Stop). Nothing follows its end: a URL in flight when it was
// cancelled keeps its result but has no event.
const (
	EventStarted   = "started"
	EventPage      = "page"
	EventCompleted = "completed"
	EventCancelled = "cancelled"
	EventFailed    = "failed"
)

// Event is what happened to a job with a shape.
type Event struct {
	Kind    string
	Job     string
	Account string
	Shape   json.RawMessage
	At      time.Time

	// Of a page: the URL, its place in the job, its line (nil for a
	// failure) and what producing it cost, or its error.
	URL   string
	Seq   uint64
	Line  []byte
	Usage *metering.Usage
	Err   *httpjson.HTTPError

	// Failure is why a failed job was stopped (Stop).
	Failure string

	// Restored: the event is recorded again, from the region's log, by an
	// owner that lost its data directory (mirror.go). It may have had its
	// consequences before the loss: an observer whose effect repeats (a
	// webhook delivery) skips it; one whose effect is named by the event
	// (a page's charge, which the gate charges once by its id) stages it
	// again, since the earlier one may have been lost with the disk.
	Restored bool

	// Key names the event within its job, the same each time the event
	// is recorded: "started", "end" (completed, cancelled or failed), and
	// a page's "page.<n>", n the sequence of its outcome's message in the
	// region's log (a released retry's outcome is another message).
	// Logged: the job is in the region's log, where an observer may keep
	// what it did about the event (ClaimMark). Of a job not in the log, a
	// page's key is "page.u<seq>" and names the URL, not its outcome.
	Key    string
	Logged bool
}

// Observer is told of a job's events inside the write that records
// them: Stage adds what the event owes (a charge, a webhook delivery) to
// that write, so the event and its consequences are committed together
// or not at all; Committed is called once the write is durable, to wake
// whoever sends or streams them. Both run under the job's lock: they
// must not call the Manager.
type Observer interface {
	Stage(b *store.Batch, e *Event) error
	Committed(e *Event)
}

// stage hands e to the observer when the job has a shape; it returns the
// event to pass to committed (nil when there is none).
// logSeq is the sequence of a page's outcome in the region's log (0:
// none).
func (m *Manager) stage(b *store.Batch, j *job, e Event, logSeq uint64) (*Event, error) {
	if m.cfg.Events == nil || len(j.meta.Shape) == 0 {
		return nil, nil
	}
	e.Job, e.Account, e.Shape, e.At = j.meta.ID, j.meta.Account, j.meta.Shape, m.cfg.Now().UTC()
	e.Restored = j.restoring
	e.Key = eventKey(e.Kind, e.Seq, logSeq)
	e.Logged = m.mirrored() != nil
	if err := m.cfg.Events.Stage(b, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

func (m *Manager) committed(es ...*Event) {
	for _, e := range es {
		if e != nil {
			m.cfg.Events.Committed(e)
		}
	}
}

// Observers tells each of its observers of every event, in order; the
// first that fails to stage an event fails its write.
type Observers []Observer

func (os Observers) Stage(b *store.Batch, e *Event) error {
	for _, o := range os {
		if err := o.Stage(b, e); err != nil {
			return err
		}
	}
	return nil
}

func (os Observers) Committed(e *Event) {
	for _, o := range os {
		o.Committed(e)
	}
}

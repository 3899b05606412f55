package crawl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/trawlhq/trawl/internal/jsnode"
)

// Sharing a region's crawl tasks among its cells (issue 33;
// docs/crawl-server.md, "Tasks shared across a region's cells").
//
// A crawl server beside a clustered cell, once Share is called, keeps
// accepting tasks as before (the task is stored, its id answered, GET
// /task/{id} and /crawl_sync read it here), but it no longer queues them
// locally: each is a work item on the region's TRAWL_WORK stream (the
// task-hi consumer for priority ≥ 5, task for the others), and every
// sharing crawl server runs MaxConcurrentTasks pullers, high priority
// first. The cell that runs a task heartbeats it (InProgress) while its
// pages are crawled, then publishes its outcome to the owner's subject in
// the job log (trawl.task.<owner>.<id>; a large one through the
// TRAWL_BLOBS object store) and acks. The owner's results consumer
// stores the outcome, wakes its /crawl_sync and sends its webhook; the
// first outcome of a task wins (a task redelivered after its cell died
// runs again, and its second outcome is dropped). A task delivered
// TaskMaxDeliver times (its cells kept dying) fails, with that reason.
// Streams (/crawl/stream) and the synchronous routes stay local.

// taskItem is a task on the work queue: all a cell needs to run it.
type taskItem struct {
	Owner string `json:"owner"`
	Task  *Task  `json:"task"`
}

// taskOutcome is what the cell that ran a task sends its owner.
type taskOutcome struct {
	ID        string    `json:"task_id"`
	Failure   string    `json:"failure,omitempty"`
	Results   []*Result `json:"results,omitempty"`
	StartedAt Number    `json:"started_at"`
	Cell      string    `json:"cell"`
	Blob      string    `json:"blob,omitempty"` // the outcome, in the object store when too large for a message
}

// ErrClosed is Share's answer once the server is closed.
var ErrClosed = errors.New("crawl: the server is closed")

// ShareStats count the shared path's work.
type ShareStats struct {
	Shared bool `json:"shared"`
	// Ran is the tasks this server ran for any cell; Applied the outcomes
	// of its own tasks stored; Duplicates those dropped (the task had
	// one); Redelivered the tasks it took that an earlier delivery did not
	// finish; Running the tasks it runs now.
	Ran         int64 `json:"ran"`
	Applied     int64 `json:"applied"`
	Duplicates  int64 `json:"duplicates"`
	Redelivered int64 `json:"redelivered"`
	Running     int64 `json:"running"`
}

type taskSharing struct {
	cell   string
	js     jetstream.JetStream
	hi, lo jetstream.Consumer
	res    jetstream.Consumer
	blobs  jetstream.ObjectStore
	wg     sync.WaitGroup

	ran, applied, duplicates, redelivered, running atomic.Int64
}

// Share makes the server queue its tasks on the region's work queue and
// run the region's tasks (docs above). The streams and the task
// consumers must exist (jsnode.Ensure). It returns once sharing runs;
// Close ends it.
func (s *Server) Share(ctx context.Context, js jetstream.JetStream, cell string) error {
	if s.life.Err() != nil {
		return ErrClosed
	}
	hi, err := js.Consumer(ctx, jsnode.StreamWork, jsnode.ConsumerTaskHi)
	if err != nil {
		return fmt.Errorf("crawl: the task-hi consumer: %w", err)
	}
	lo, err := js.Consumer(ctx, jsnode.StreamWork, jsnode.ConsumerTaskLo)
	if err != nil {
		return fmt.Errorf("crawl: the task consumer: %w", err)
	}
	res, err := js.CreateOrUpdateConsumer(ctx, jsnode.StreamJobLog, jsnode.TaskResultsConsumer(cell))
	if err != nil {
		return fmt.Errorf("crawl: this cell's task results consumer: %w", err)
	}
	blobs, err := js.ObjectStore(ctx, jsnode.BucketBlobs)
	if err != nil {
		return fmt.Errorf("crawl: the blob store: %w", err)
	}
	sh := &taskSharing{cell: cell, js: js, hi: hi, lo: lo, res: res, blobs: blobs}
	if !s.share.CompareAndSwap(nil, sh) {
		return errors.New("crawl: already sharing")
	}
	close(s.shared)
	// The tasks accepted before a restart and not finished: queued on
	// the region (a task still in the queue is a duplicate the stream
	// drops; one whose outcome waits in this cell's consumer is stored
	// as it arrives).
	var unfinished []*Task
	if err := s.tasks.each(func(t *Task) error {
		if s.cfg.AwaitShare <= 0 {
			return nil // resumed here at the start already
		}
		if t.Status == StatusPending || t.Status == StatusProcessing {
			unfinished = append(unfinished, t)
		}
		return nil
	}); err != nil {
		s.log.Error("crawl: read unfinished tasks", "err", err)
	}
	for _, t := range unfinished {
		err := s.recordTask(sh, t)
		if err == nil {
			err = s.publishTask(sh, t)
		}
		if err != nil {
			s.log.Error("crawl: unfinished task not queued on the region; it runs here", "task_id", t.ID, "err", err)
			s.sched.push(&queued{priority: t.Priority, seq: t.Seq, taskID: t.ID}, true)
		}
	}
	if len(unfinished) > 0 {
		s.log.Info("crawl: unfinished tasks queued on the region", "tasks", len(unfinished))
	}
	if s.restoring.Load() {
		// Before any outcome is collected: one of a task not restored
		// yet would be dropped as unknown.
		if err := s.restoreTasks(ctx, sh); err != nil {
			s.log.Error("crawl: tasks not restored from the region's log", "err", err)
		}
		s.restoring.Store(false)
	}
	for range s.cfg.MaxConcurrentTasks {
		s.bg.Go(func() { s.pullTasks(sh) })
	}
	s.bg.Go(func() { s.collectTasks(sh) })
	s.log.Info("crawl: tasks shared with the region's cells", "cell", cell, "runners", s.cfg.MaxConcurrentTasks)
	return nil
}

// SetPaused makes the runners take no task from the region while paused
// says so (the cell's drain); the tasks they hold finish.
func (s *Server) SetPaused(paused func() bool) { s.paused.Store(&paused) }

// ShareStats reports the shared path's counters (zero when not sharing).
func (s *Server) ShareStats() ShareStats {
	sh := s.share.Load()
	if sh == nil {
		return ShareStats{}
	}
	return ShareStats{Shared: true, Ran: sh.ran.Load(), Applied: sh.applied.Load(), Duplicates: sh.duplicates.Load(),
		Redelivered: sh.redelivered.Load(), Running: sh.running.Load()}
}

// publishTask queues a stored task on the region's work queue.
func (s *Server) publishTask(sh *taskSharing, t *Task) error {
	data, err := json.Marshal(taskItem{Owner: sh.cell, Task: t})
	if err != nil {
		return err
	}
	subject := jsnode.SubjectTaskLo
	if t.Priority >= 5 {
		subject = jsnode.SubjectTaskHi
	}
	ctx, cancel := context.WithTimeout(s.life, 10*time.Second)
	defer cancel()
	_, err = jsnode.PublishData(ctx, sh.js, subject, data, jetstream.WithMsgID("task/"+t.ID))
	return err
}

// pullTasks is one runner: it takes the region's queued tasks one at a
// time, high priority first.
func (s *Server) pullTasks(sh *taskSharing) {
	for s.life.Err() == nil {
		if p := s.paused.Load(); p != nil && (*p)() {
			select { // drained by an operator: no new tasks from the region
			case <-time.After(time.Second):
			case <-s.life.Done():
			}
			continue
		}
		msg, err := jsnode.Next(s.life, sh.hi, 200*time.Millisecond)
		if errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) {
			msg, err = jsnode.Next(s.life, sh.lo, 2*time.Second)
		}
		if err != nil {
			if s.life.Err() == nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
				s.log.Debug("crawl: task pull", "err", err)
				select {
				case <-time.After(time.Second):
				case <-s.life.Done():
				}
			}
			continue
		}
		s.runShared(sh, msg)
	}
}

// runShared runs one pulled task and sends its outcome to its owner.
func (s *Server) runShared(sh *taskSharing, msg jetstream.Msg) {
	var it taskItem
	if err := json.Unmarshal(msg.Data(), &it); err != nil || it.Task == nil || it.Owner == "" {
		s.log.Error("crawl: unreadable task item dropped", "err", err)
		msg.Term()
		return
	}
	t := it.Task
	out := taskOutcome{ID: t.ID, Cell: sh.cell, StartedAt: unixSeconds(s.cfg.Now())}
	delivered := uint64(1)
	if md, err := msg.Metadata(); err == nil {
		delivered = md.NumDelivered
	}
	if delivered > 1 {
		sh.redelivered.Add(1)
	}
	if delivered >= jsnode.TaskMaxDeliver {
		out.Failure = fmt.Sprintf("the task was cut off %d times (the cells running it stopped); not run again", delivered-1)
	} else {
		sh.running.Add(1)
		stop := jsnode.Heartbeat(s.life, msg)
		results, failure, cut := s.execute(t)
		stop()
		sh.running.Add(-1)
		if cut {
			msg.Nak() // closing: another cell runs it now
			return
		}
		out.Results, out.Failure = results, failure
		sh.ran.Add(1)
	}
	if err := s.sendOutcome(sh, it.Owner, &out, delivered); err != nil {
		s.log.Warn("crawl: task outcome not sent; the task goes back to the queue", "task_id", t.ID, "err", err)
		msg.NakWithDelay(time.Second)
		return
	}
	ctx, cancel := context.WithTimeout(s.life, 5*time.Second)
	defer cancel()
	if err := msg.DoubleAck(ctx); err != nil {
		s.log.Debug("crawl: task ack", "err", err) // delivered again: the owner keeps the first outcome
	}
}

// sendOutcome publishes a task's outcome to its owner.
func (s *Server) sendOutcome(sh *taskSharing, owner string, out *taskOutcome, gen uint64) error {
	data, err := json.Marshal(out)
	if err != nil {
		return err
	}
	id := fmt.Sprintf("task/%s/%s/%d", out.ID, sh.cell, gen)
	data, err = jsnode.Offload(s.life, sh.blobs, id, data, func(blob string) []byte {
		b, _ := json.Marshal(taskOutcome{ID: out.ID, Cell: out.Cell, Blob: blob})
		return b
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(s.life, 10*time.Second)
	defer cancel()
	_, err = jsnode.PublishData(ctx, sh.js, jsnode.TaskResultSubject(owner, out.ID), data, jetstream.WithMsgID(id))
	return err
}

// collectTasks stores the outcomes of this server's tasks, whoever ran
// them; an outcome is acked once stored (putFinished syncs).
func (s *Server) collectTasks(sh *taskSharing) {
	jsnode.Collect(s.life, sh.res, func(data []byte) error { return s.applyOutcome(sh, data) }, func(err error) {
		s.log.Error("crawl: task outcome not stored; offered again", "err", err)
	})
}

// readOutcome reads a task's outcome message (from the object store when
// it is there); nil for one that cannot be read (logged), an error when
// the object store did not answer.
func (s *Server) readOutcome(sh *taskSharing, data []byte) (*taskOutcome, error) {
	var out taskOutcome
	if err := json.Unmarshal(data, &out); err != nil || out.ID == "" {
		s.log.Error("crawl: unreadable task outcome dropped", "err", err)
		return nil, nil
	}
	if out.Blob != "" {
		b, err := jsnode.Unload(s.life, sh.blobs, out.Blob)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &out); err != nil {
			s.log.Error("crawl: unreadable task outcome dropped", "blob", out.Blob, "err", err)
			return nil, nil
		}
	}
	return &out, nil
}

func (s *Server) applyOutcome(sh *taskSharing, data []byte) error {
	out, err := s.readOutcome(sh, data)
	if out == nil {
		return err
	}
	s.finishMu.Lock()
	defer s.finishMu.Unlock()
	t, err := s.tasks.get(out.ID)
	if err != nil {
		s.log.Warn("crawl: outcome of an unknown task dropped (expired?)", "task_id", out.ID, "err", err)
		return nil
	}
	if t.Status == StatusCompleted || t.Status == StatusFailed {
		sh.duplicates.Add(1)
		return nil
	}
	if t.StartedAt == 0 {
		t.StartedAt = out.StartedAt
	}
	s.finishTask(t, out.Results, out.Failure)
	sh.applied.Add(1)
	s.log.Debug("crawl: task outcome stored", "task_id", t.ID, "ran_on", out.Cell)
	return nil
}

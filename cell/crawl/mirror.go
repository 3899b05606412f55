package crawl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/trawlhq/trawl/internal/jsnode"
	"github.com/trawlhq/trawl/internal/store"
)

// A shared task's record in the region's log (issue 33: a cell's data
// directory lost while it is down loses no accepted task).
//
// Before a shared task is answered, the task as accepted is in the job
// log (jsnode.TaskRecordSubject: trawl.task.<owner>.<id>.rec) beside the
// subject its outcome comes back on (trawl.task.<owner>.<id>). A crawl
// server beside a clustered cell that starts without any task (a new
// cell, or its disk lost) restores, when it begins sharing and before it
// collects any outcome, every task of its cell the log has that it does
// not: finished from its outcome in the log (results, or why it failed;
// not past its ttl), else pending — its work item is still in the
// region's queue or with a cell running it, and the outcome comes back as
// any other. Until then an unknown id answers 503 try_again, not 404.
// What is not restored: a finished task's webhook is not sent again (it
// was, or it was due, when the disk was lost: the webhook queue was on
// it), and a /crawl_sync caller waiting on the lost cell was already cut.

// ErrRestoring: the id may be a task the server is restoring.
var ErrRestoring = errors.New("crawl: this server is restoring its tasks from the region's log; repeat the request in a few seconds")

// recordTask writes t as accepted to the region's log.
func (s *Server) recordTask(sh *taskSharing, t *Task) error {
	data, err := json.Marshal(t)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(s.life, 10*time.Second)
	defer cancel()
	_, err = jsnode.PublishData(ctx, sh.js, jsnode.TaskRecordSubject(sh.cell, t.ID), data, jetstream.WithMsgID("taskrec/"+t.ID))
	return err
}

// restoreTasks stores the cell's tasks the log has and the store does not.
func (s *Server) restoreTasks(ctx context.Context, sh *taskSharing) error {
	start := time.Now()
	stream, err := sh.js.Stream(ctx, jsnode.StreamJobLog)
	if err != nil {
		return err
	}
	var restored, finished int
	err = jsnode.Scan(ctx, sh.js, jsnode.StreamJobLog, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{jsnode.TaskRecordSubject(sh.cell, "*")},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	}, func(msg jetstream.Msg) error {
		done, ok, err := s.restoreTask(ctx, sh, stream, msg.Data())
		if ok {
			restored++
		}
		if done {
			finished++
		}
		return err
	})
	if err != nil {
		return err
	}
	if restored > 0 {
		s.log.Info("crawl: tasks restored from the region's log", "tasks", restored, "finished", finished, "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// restoreTask stores one recorded task unless the store has it: ok when
// it did, done when its outcome was in the log.
func (s *Server) restoreTask(ctx context.Context, sh *taskSharing, stream jetstream.Stream, data []byte) (done, ok bool, err error) {
	var t Task
	if err := json.Unmarshal(data, &t); err != nil || t.ID == "" {
		s.log.Error("crawl: unreadable task record skipped", "err", err)
		return false, false, nil
	}
	if _, err := s.tasks.get(t.ID); err == nil {
		return false, false, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return false, false, err
	}
	raw, err := jsnode.LastMsgOf(ctx, stream, jsnode.TaskResultSubject(sh.cell, t.ID))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		t.Status = StatusPending
		return false, true, s.tasks.put(&t)
	case err != nil:
		return false, false, err
	}
	out, err := s.readOutcome(sh, raw.Data)
	if err != nil {
		return false, false, err
	}
	if out == nil {
		return false, false, nil
	}
	if out.Failure != "" {
		t.Status, t.Error = StatusFailed, out.Failure
	} else {
		t.Status, t.Results = StatusCompleted, out.Results
	}
	t.StartedAt = out.StartedAt
	t.FinishedAt = unixSeconds(raw.Time)
	t.ExpiresAt = t.FinishedAt + Number(t.TTL)
	if t.ExpiresAt <= unixSeconds(s.cfg.Now()) {
		return false, false, nil // past its ttl: gone, as it would be
	}
	return true, true, s.tasks.putFinished(&t)
}

// unknownTask answers a task id the store does not have.
func (s *Server) unknownTask(id string) (status int, code, message string) {
	if s.restoring.Load() {
		return http.StatusServiceUnavailable, "try_again", ErrRestoring.Error()
	}
	return http.StatusNotFound, "not_found", fmt.Sprintf("no task %q (unknown, or expired after its ttl)", strings.TrimSpace(id))
}

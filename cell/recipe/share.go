package recipe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/jobid"
	"github.com/trawlhq/trawl/internal/jsnode"
	"github.com/trawlhq/trawl/internal/store"
)

// Background runs as work items of the region's queue (issue 33;
// docs/jetstream-design.md §6, docs/recipes.md "Background runs in a
// region").
//
// Once a clustered cell calls Share, a run: job submission is recorded
// here as before (the owner answers GET /recipes/jobs/{id} and makes the
// charge) and also in the region's job log (RecipeRecordSubject: account,
// recipe, version, time; never inputs), and the run is queued on
// trawl.work.recipe with the request's body sealed by the region's keys
// (a session is a credential: it is never written readable, here or on
// another cell's disk). Every sharing cell pulls runs, heartbeats one
// while it runs, publishes its outcome to the owner's subject in the log
// (the first outcome of a run wins) and acks. The owner's results
// consumer records the outcome and its charge; a down owner's run is read
// by any cell from the log. A run delivered RecipeMaxDeliver times (its
// cells kept dying) fails with that reason, nothing charged.

// sealPurpose names what the region's keys seal for a queued run.
const sealPurpose = "recipe run inputs"

// Sealer seals and opens what a cell puts in the region's queue
// (regionauth.Keys).
type Sealer interface {
	Seal(purpose string, plain []byte) ([]byte, error)
	Open(purpose string, sealed []byte) ([]byte, error)
}

// runItem is a background run on the region's queue.
type runItem struct {
	Job     string `json:"job"`
	Owner   string `json:"owner"` // the cell that accepted it
	Recipe  string `json:"recipe"`
	Version int    `json:"version"`
	Inputs  []byte `json:"inputs"` // the request's body, sealed
}

// runRecord is a queued run's record in the log.
type runRecord struct {
	Job     string    `json:"job"`
	Account string    `json:"account"`
	Recipe  string    `json:"recipe"`
	Version int       `json:"version"`
	Created time.Time `json:"created"`
}

// ErrRestoring answers for a run of this cell it cannot answer for yet:
// it has not read the region's log since it started (its disk may have
// been lost).
var ErrRestoring = &httpjson.HTTPError{Status: http.StatusServiceUnavailable, Code: "try_again",
	Message: "this cell is not ready to answer for this job yet; try again", RetryAfter: 5 * time.Second}

// ShareStats count the shared path's work (GET /health recipe_share).
type ShareStats struct {
	Shared bool `json:"shared"`
	// Queued is the runs this cell accepted and queued; Ran the queued
	// runs it ran for any cell; Applied the outcomes of its own runs
	// recorded; Duplicates those dropped (the run had one); Redelivered
	// the runs it took that an earlier delivery did not finish; Running
	// the runs it runs now; Idle its runners waiting for a run (none once
	// drained); Restored the runs it took back from the log after its
	// store was lost.
	Queued      int64 `json:"queued"`
	Ran         int64 `json:"ran"`
	Applied     int64 `json:"applied"`
	Duplicates  int64 `json:"duplicates"`
	Redelivered int64 `json:"redelivered"`
	Running     int64 `json:"running"`
	Idle        int64 `json:"idle"`
	Restored    int64 `json:"restored"`
}

type runSharing struct {
	cell   string
	js     jetstream.JetStream
	log    jetstream.Stream
	queue  jetstream.Stream // TRAWL_WORK
	work   jetstream.Consumer
	res    jetstream.Consumer
	blobs  jetstream.ObjectStore
	seal   Sealer
	paused func() bool
	wg     sync.WaitGroup

	queued, ran, applied, duplicates, redelivered, running, restored, idle atomic.Int64
}

// ShareConfig is how a cell shares its runs.
type ShareConfig struct {
	Cell string
	Seal Sealer
	// Runners is how many queued runs the cell runs at once (default 2).
	Runners int
	// Paused: take no new run while it says so (the cell's drain).
	Paused func() bool
}

// Share queues the service's background runs on the region and runs the
// region's (docs above). The streams and the recipe consumer must exist
// (jsnode.Ensure). It returns once sharing runs; Close ends it.
func (s *Service) Share(ctx context.Context, js jetstream.JetStream, cfg ShareConfig) error {
	if s.jobsCtx.Err() != nil {
		return errors.New("recipe: the service is closed")
	}
	if s.cfg.Store == nil || cfg.Seal == nil || cfg.Cell == "" {
		return errors.New("recipe: sharing needs a store, a sealer and the cell's name")
	}
	if cfg.Runners <= 0 {
		cfg.Runners = 2
	}
	work, err := js.Consumer(ctx, jsnode.StreamWork, jsnode.ConsumerRecipe)
	if err != nil {
		return fmt.Errorf("recipe: the run consumer: %w", err)
	}
	res, err := js.CreateOrUpdateConsumer(ctx, jsnode.StreamJobLog, jsnode.RecipeResultsConsumer(cfg.Cell))
	if err != nil {
		return fmt.Errorf("recipe: this cell's run results consumer: %w", err)
	}
	log, err := js.Stream(ctx, jsnode.StreamJobLog)
	if err != nil {
		return fmt.Errorf("recipe: the job log: %w", err)
	}
	queue, err := js.Stream(ctx, jsnode.StreamWork)
	if err != nil {
		return fmt.Errorf("recipe: the work queue: %w", err)
	}
	blobs, err := js.ObjectStore(ctx, jsnode.BucketBlobs)
	if err != nil {
		return fmt.Errorf("recipe: the blob store: %w", err)
	}
	sh := &runSharing{cell: cfg.Cell, js: js, log: log, queue: queue, work: work, res: res, blobs: blobs, seal: cfg.Seal, paused: cfg.Paused}
	// Before any outcome is collected: one of a run not restored yet
	// would be dropped as unknown.
	if err := s.restoreRuns(ctx, sh); err != nil {
		return fmt.Errorf("recipe: restore this cell's runs from the log: %w", err)
	}
	if !s.share.CompareAndSwap(nil, sh) {
		return errors.New("recipe: already sharing")
	}
	for range cfg.Runners {
		s.jobsWG.Go(func() { s.pullRuns(sh) })
	}
	s.jobsWG.Go(func() { s.collectRuns(sh) })
	s.jobsWG.Go(func() {
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-s.jobsCtx.Done():
				return
			case <-t.C:
			}
			if _, err := s.SweepLost(s.jobsCtx); err != nil && s.jobsCtx.Err() == nil {
				s.cfg.Logger.Warn("recipe: lost runs not looked for", "err", err)
			}
		}
	})
	s.cfg.Logger.Info("recipe: background runs shared with the region", "cell", cfg.Cell, "runners", cfg.Runners)
	return nil
}

// Shared reports whether the service's background runs are shared with
// the region (Share): any cell can then read them from the log.
func (s *Service) Shared() bool { return s.share.Load() != nil }

// ShareStats reports the shared path's counters (zero when not sharing).
func (s *Service) ShareStats() ShareStats {
	sh := s.share.Load()
	if sh == nil {
		return ShareStats{}
	}
	return ShareStats{Shared: true, Queued: sh.queued.Load(), Ran: sh.ran.Load(), Applied: sh.applied.Load(),
		Duplicates: sh.duplicates.Load(), Redelivered: sh.redelivered.Load(), Running: sh.running.Load(), Idle: sh.idle.Load(), Restored: sh.restored.Load()}
}

// queueRun records a run in the log and queues it, sealed; both on a
// quorum before the caller is answered.
func (s *Service) queueRun(sh *runSharing, rec *jobRecord, body map[string]json.RawMessage) error {
	plain, err := json.Marshal(body)
	if err != nil {
		return err
	}
	sealed, err := sh.seal.Seal(sealPurpose, plain)
	if err != nil {
		return err
	}
	recData, _ := json.Marshal(runRecord{Job: rec.ID, Account: rec.Owner, Recipe: rec.Recipe, Version: rec.Version, Created: rec.Created})
	item, _ := json.Marshal(runItem{Job: rec.ID, Owner: sh.cell, Recipe: rec.Recipe, Version: rec.Version, Inputs: sealed})
	ctx, cancel := context.WithTimeout(s.jobsCtx, 10*time.Second)
	defer cancel()
	if _, err := jsnode.PublishData(ctx, sh.js, jsnode.RecipeRecordSubject(sh.cell, rec.ID), recData, jetstream.WithMsgID("recipe/"+rec.ID+"/rec")); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	if _, err := jsnode.PublishData(ctx, sh.js, jsnode.SubjectRecipe+jsnode.Token(rec.ID), item, jetstream.WithMsgID("recipe/"+rec.ID)); err != nil {
		return fmt.Errorf("queue: %w", err)
	}
	sh.queued.Add(1)
	return nil
}

// pullRuns is one runner: it takes the region's queued runs one at a
// time.
func (s *Service) pullRuns(sh *runSharing) {
	ctx := s.jobsCtx
	for ctx.Err() == nil {
		if sh.paused != nil && sh.paused() {
			select { // drained by an operator: no new runs from the region
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
			continue
		}
		// A short wait: a drained cell stops taking runs within it (a run
		// it took meanwhile is one it was running at the drain: it ends).
		sh.idle.Add(1)
		msg, err := jsnode.Next(ctx, sh.work, time.Second)
		sh.idle.Add(-1)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
				s.cfg.Logger.Debug("recipe: run pull", "err", err)
				select {
				case <-time.After(time.Second):
				case <-ctx.Done():
				}
			}
			continue
		}
		s.runQueued(sh, msg)
	}
}

// runQueued runs one pulled run and sends its outcome to its owner.
func (s *Service) runQueued(sh *runSharing, msg jetstream.Msg) {
	ctx := s.jobsCtx
	var it runItem
	if err := json.Unmarshal(msg.Data(), &it); err != nil || it.Job == "" || it.Owner == "" {
		s.cfg.Logger.Error("recipe: unreadable queued run dropped", "err", err)
		msg.Term()
		return
	}
	delivered := uint64(1)
	if md, err := msg.Metadata(); err == nil {
		delivered = md.NumDelivered
	}
	if delivered > 1 {
		sh.redelivered.Add(1)
	}
	var out *runOutcome
	fail := func(status int, code, message string) {
		out = &runOutcome{Status: JobFailed, Finished: s.cfg.Now().UTC(), Meta: &Meta{Warnings: []string{}},
			Error: &JobError{Code: code, Message: message, Status: status}}
	}
	plain, err := sh.seal.Open(sealPurpose, it.Inputs)
	var body map[string]json.RawMessage
	if err == nil {
		err = json.Unmarshal(plain, &body)
	}
	rc, known := s.Get(it.Recipe)
	var vals Values
	var bypass bool
	if err == nil && known && rc.Version == it.Version {
		vals, bypass, err = rc.Check(body) // checked by the owner already, against the same version
	}
	switch {
	case delivered >= jsnode.RecipeMaxDeliver:
		fail(http.StatusGatewayTimeout, CodeTimeout, fmt.Sprintf("the run was cut off %d times (the cells running it stopped or did not have its recipe); nothing was charged, submit it again", delivered-1))
	case err != nil:
		s.cfg.Logger.Error("recipe: a queued run's inputs do not open or check here", "job", it.Job, "err", err)
		fail(http.StatusInternalServerError, "internal", "the run's inputs could not be read on the cell that took it; nothing was charged, submit it again")
	case !known || rc.Version != it.Version:
		// This cell's catalog has not caught up with the owner's (a
		// recipe added or replaced a moment ago): another cell, or this
		// one after its next reload, takes it.
		msg.NakWithDelay(2 * time.Second)
		return
	default:
		sh.running.Add(1)
		stop := jsnode.Heartbeat(ctx, msg)
		res, rerr := s.Run(ctx, rc, vals, bypass)
		stop()
		sh.running.Add(-1)
		if ctx.Err() != nil {
			// Closing: another cell runs it. After a moment, so that it
			// does not go to this cell's own pulls, which the server
			// keeps for up to their second and delivers into the void.
			msg.NakWithDelay(2 * time.Second)
			return
		}
		out = outcomeOf(rc, res, rerr, s.cfg.Now().UTC())
		sh.ran.Add(1)
	}
	out.Job, out.Cell = it.Job, sh.cell
	if err := s.sendOutcome(sh, it.Owner, out, delivered); err != nil {
		s.cfg.Logger.Warn("recipe: run outcome not sent; the run goes back to the queue", "job", it.Job, "err", err)
		msg.NakWithDelay(time.Second)
		return
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := msg.DoubleAck(actx); err != nil {
		s.cfg.Logger.Debug("recipe: run ack", "err", err) // delivered again: the owner keeps the first outcome
	}
}

// sendOutcome publishes a run's outcome to its owner, unless the run has
// one already (the first wins: a run delivered again after its cell died
// may have finished there).
func (s *Service) sendOutcome(sh *runSharing, owner string, out *runOutcome, gen uint64) error {
	data, err := json.Marshal(out)
	if err != nil {
		return err
	}
	id := fmt.Sprintf("recipe/%s/%s/%d", out.Job, sh.cell, gen)
	data, err = jsnode.Offload(s.jobsCtx, sh.blobs, id, data, func(blob string) []byte {
		b, _ := json.Marshal(runOutcome{Job: out.Job, Cell: out.Cell, Blob: blob})
		return b
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(s.jobsCtx, 10*time.Second)
	defer cancel()
	_, err = jsnode.PublishData(ctx, sh.js, jsnode.RecipeResultSubject(owner, out.Job), data, jetstream.WithMsgID(id),
		jetstream.WithExpectLastSequencePerSubject(0))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		return nil // the run has its outcome
	}
	return err
}

// collectRuns records the outcomes of this cell's runs, whoever ran them;
// an outcome is acked once recorded.
func (s *Service) collectRuns(sh *runSharing) {
	jsnode.Collect(s.jobsCtx, sh.res, func(data []byte) error { return s.collect(sh, data) }, func(err error) {
		s.cfg.Logger.Error("recipe: run outcome not recorded; offered again", "err", err)
	})
}

// readOutcome reads an outcome message (from the object store when it is
// there); nil for one that cannot be read (logged), an error when the
// object store did not answer.
func (s *Service) readOutcome(ctx context.Context, sh *runSharing, data []byte) (*runOutcome, error) {
	var out runOutcome
	if err := json.Unmarshal(data, &out); err != nil || out.Job == "" {
		s.cfg.Logger.Error("recipe: unreadable run outcome dropped", "err", err)
		return nil, nil
	}
	if out.Blob != "" {
		b, err := jsnode.Unload(ctx, sh.blobs, out.Blob)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &out); err != nil {
			s.cfg.Logger.Error("recipe: unreadable run outcome dropped", "blob", out.Blob, "err", err)
			return nil, nil
		}
	}
	return &out, nil
}

// collect records one outcome on its job.
func (s *Service) collect(sh *runSharing, data []byte) error {
	out, err := s.readOutcome(s.jobsCtx, sh, data)
	if out == nil {
		return err
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	rec, err := s.jobRecord(out.Job)
	if errors.Is(err, store.ErrNotFound) {
		s.cfg.Logger.Warn("recipe: outcome of an unknown run dropped (expired?)", "job", out.Job)
		return nil
	} else if err != nil {
		return err
	}
	if rec.Status != JobRunning {
		sh.duplicates.Add(1)
		return nil
	}
	if err := s.applyOutcome(rec, out); err != nil {
		return err
	}
	sh.applied.Add(1)
	return nil
}

// jobRecord reads job id's record.
func (s *Service) jobRecord(id string) (*jobRecord, error) {
	v, _, err := s.cfg.Store.GetLive(nil, jobKey(id), s.cfg.Now())
	if err != nil {
		return nil, err
	}
	var rec jobRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// restoreRuns takes back, from the log, the runs this cell accepted that
// its store does not have (it was lost while the cell was down): each as
// running, with its outcome if the log has one.
func (s *Service) restoreRuns(ctx context.Context, sh *runSharing) error {
	var recs []runRecord
	err := jsnode.Scan(ctx, sh.js, jsnode.StreamJobLog, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{jsnode.RecipeRecordSubject(sh.cell, "*")},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	}, func(msg jetstream.Msg) error {
		var r runRecord
		if json.Unmarshal(msg.Data(), &r) == nil && r.Job != "" {
			recs = append(recs, r)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range recs {
		if _, err := s.jobRecord(r.Job); err == nil {
			continue
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if s.cfg.Now().After(r.Created.Add(JobRetention)) {
			continue
		}
		rec := &jobRecord{Job: Job{ID: r.Job, Recipe: r.Recipe, Version: r.Version, Status: JobRunning, Created: r.Created}, Owner: r.Account, Shared: true}
		out, err := s.logOutcome(ctx, sh, sh.cell, r.Job)
		if err != nil {
			return err
		}
		if out != nil {
			err = s.applyOutcome(rec, out)
		} else {
			err = s.saveJob(rec, store.Sync)
		}
		if err != nil {
			return err
		}
		sh.restored.Add(1)
	}
	if len(recs) > 0 {
		s.cfg.Logger.Info("recipe: runs read from the region's log", "runs", len(recs), "restored", sh.restored.Load())
	}
	return nil
}

// logOutcome is the outcome of owner's run job in the log; nil if it has
// none yet.
func (s *Service) logOutcome(ctx context.Context, sh *runSharing, owner, job string) (*runOutcome, error) {
	msg, err := jsnode.LastMsgOf(ctx, sh.log, jsnode.RecipeResultSubject(owner, job))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	out, err := s.readOutcome(ctx, sh, msg.Data)
	if out == nil && err == nil {
		err = errors.New("an unreadable outcome")
	}
	return out, err
}

// logJob is account's job id of another cell, read from the region's
// log: the gate asks this cell while the job's owner is down.
//
// A placed id (one that names no cell) is looked up by its record under
// any owner: a wildcard direct get of trawl.recipe.*.<job>.rec.
func (s *Service) logJob(ctx context.Context, sh *runSharing, account, id string) (*Job, error) {
	_, owner, _ := jobid.Parse(id)
	subject := jsnode.RecipeRecordSubject(owner, id)
	if owner == "" {
		subject = jsnode.RecipeRecordSubject("*", id)
	}
	msg, err := jsnode.LastMsgOf(ctx, sh.log, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, ErrNoJob
	} else if err != nil {
		return nil, err
	}
	if owner == "" {
		if owner = jsnode.SubjectOwner(jsnode.SubjectRecipeRun, msg.Subject); owner == "" {
			return nil, fmt.Errorf("recipe run %s: a record on %q", id, msg.Subject)
		}
	}
	var r runRecord
	if err := json.Unmarshal(msg.Data, &r); err != nil || r.Account != account {
		return nil, ErrNoJob
	}
	job := &Job{ID: id, Recipe: r.Recipe, Version: r.Version, Status: JobRunning, Created: r.Created}
	out, err := s.logOutcome(ctx, sh, owner, id)
	if err != nil {
		return nil, err
	}
	if out != nil {
		at := out.Finished
		job.Finished, job.Status, job.Meta, job.Units, job.Error, job.Rows = &at, out.Status, out.Meta, out.Units, out.Error, out.Rows
	}
	return job, nil
}

// lostAfter is how long after its acceptance a shared run still running
// is looked for in the queue (SweepLost).
const lostAfter = time.Minute

// SweepLost fails this cell's shared runs that are neither in the
// region's queue (waiting or running: an item leaves it when acked) nor
// have an outcome, a minute or more after they were accepted: the cell
// died between recording one and queueing it. An outcome found is
// recorded (its message would be too). It returns how many it failed;
// the cell calls it every 30 s.
func (s *Service) SweepLost(ctx context.Context) (int, error) {
	sh := s.share.Load()
	if sh == nil {
		return 0, nil
	}
	var recs []jobRecord
	cutoff := s.cfg.Now().Add(-lostAfter)
	err := s.cfg.Store.Scan(prefixJob, nil, func(k, v []byte) (bool, error) {
		var rec jobRecord
		if len(v) >= 8 && json.Unmarshal(v[8:], &rec) == nil && rec.Status == JobRunning && rec.Shared && rec.Created.Before(cutoff) {
			recs = append(recs, rec)
		}
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	failed := 0
	for _, rec := range recs {
		// The queue first: a run's outcome is published before its item
		// is acked, so an item gone means its outcome, if any, is there.
		_, err := jsnode.LastMsgOf(ctx, sh.queue, jsnode.SubjectRecipe+jsnode.Token(rec.ID))
		if err == nil {
			continue
		} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return failed, err
		}
		out, err := s.logOutcome(ctx, sh, sh.cell, rec.ID)
		if err != nil {
			return failed, err
		}
		if out == nil {
			out = &runOutcome{Job: rec.ID, Status: JobFailed, Finished: s.cfg.Now().UTC(), Meta: &Meta{Warnings: []string{}},
				Error: jobError(httpjson.Errorf(http.StatusServiceUnavailable, "unavailable", "the run was lost before it was queued (its cell stopped); nothing was charged, submit it again"))}
			failed++
			s.cfg.Logger.Warn("recipe: a shared run neither queued nor finished is failed", "job", rec.ID)
		}
		data, _ := json.Marshal(out)
		if err := s.collect(sh, data); err != nil {
			return failed, err
		}
	}
	return failed, nil
}

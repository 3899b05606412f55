package recipe

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/jobid"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/store"
)

// Recipes declared run: job run in the background (docs/recipes.md): the
// call answers 202 with a job reference at once; GET /recipes/jobs/{id}
// says its status and, once done, has the rows. The run's units are
// charged when it ends, as a background charge the gate collects (the
// monitors' outbox, GET /monitor-charges). A job record holds no input.
// On a standalone cell a job cut by a restart is failed, never run again
// with inputs from disk, so a session is never written. A clustered
// cell queues the run on its region (share.go), its inputs sealed with
// the region's keys, and any cell runs it.

// Job states.
const (
	JobRunning = "running"
	JobDone    = "done"
	JobFailed  = "failed"
)

// JobRetention is how long a job's record and rows are kept.
const JobRetention = 7 * 24 * time.Hour

var (
	prefixJob    = []byte(store.PrefixRecipeJob)
	prefixCharge = []byte(store.PrefixRecipeCharge)
)

// Job is a background run.
type Job struct {
	ID       string          `json:"job_id"`
	Account  string          `json:"-"`
	Recipe   string          `json:"recipe"`
	Version  int             `json:"version"`
	Status   string          `json:"status"`
	Created  time.Time       `json:"created"`
	Finished *time.Time      `json:"finished"`
	Rows     json.RawMessage `json:"rows"`
	Meta     *Meta           `json:"meta"`
	Units    int             `json:"units"`
	Error    *JobError       `json:"error"`
}

// JobError is a failed job's §7 error as its record keeps it.
type JobError struct {
	Code    string `json:"error"`
	Message string `json:"message"`
	Status  int    `json:"status"`
}

// jobError is e as a job's record keeps it.
func jobError(e *httpjson.HTTPError) *JobError {
	b := e.Body()
	return &JobError{Code: b.Error, Message: b.Message, Status: e.Status}
}

// jobRecord is a Job as stored (with its owner).
type jobRecord struct {
	Job
	Owner string `json:"owner"`
	// Shared: the run was queued on the region (share.go); its outcome
	// comes back from whichever cell ran it, even after a restart.
	Shared bool `json:"shared,omitempty"`
}

// Charge is a finished job's charge, for the gate to collect (the shape
// of the monitors' charges).
type Charge struct {
	ID      string         `json:"id"`
	Account string         `json:"account"`
	Monitor string         `json:"monitor"`
	URL     string         `json:"url"`
	At      time.Time      `json:"at"`
	Usage   metering.Usage `json:"usage"`
}

// ErrNoJob is a job id this account does not own.
var ErrNoJob = &httpjson.HTTPError{Status: http.StatusNotFound, Code: "not_found", Message: "no such recipe job"}

func jobKey(id string) []byte { return append(append([]byte(nil), prefixJob...), id...) }

// Submit starts a background run of rc under id for account. body is
// the request's body (Prepare made rc, vals and bypass of it): a cell
// that shares its runs with its region (Share) queues it, sealed, for
// whichever cell takes it; otherwise the run starts here.
func (s *Service) Submit(account, id string, rc *Recipe, body map[string]json.RawMessage, vals Values, bypass bool) (*Job, error) {
	if s.cfg.Store == nil {
		return nil, errors.New("recipe jobs need a store")
	}
	now := s.cfg.Now().UTC()
	rec := &jobRecord{Job: Job{ID: id, Recipe: rc.Name, Version: rc.Version, Status: JobRunning, Created: now}, Owner: account}
	sh := s.share.Load()
	rec.Shared = sh != nil
	if err := s.saveJob(rec, store.Sync); err != nil {
		return nil, err
	}
	job := rec.Job // the caller's copy: the run below writes rec when it ends
	if sh != nil {
		err := s.queueRun(sh, rec, body)
		if err == nil {
			return &job, nil
		}
		s.cfg.Logger.Warn("recipe job not queued on the region; it runs here", "job", id, "err", err)
		rec.Shared = false
		if err := s.saveJob(rec, store.Sync); err != nil {
			return nil, err
		}
	}
	s.jobsWG.Add(1)
	go func() {
		defer s.jobsWG.Done()
		res, err := s.Run(s.jobsCtx, rc, vals, bypass)
		if s.jobsCtx.Err() != nil {
			return // the cell is closing: the job is failed at the next start
		}
		if err := s.applyOutcome(rec, outcomeOf(rc, res, err, s.cfg.Now().UTC())); err != nil {
			s.cfg.Logger.Error("recipe job not recorded", "job", rec.ID, "err", err)
		}
	}()
	return &job, nil
}

func (s *Service) saveJob(rec *jobRecord, d store.Durability) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return s.cfg.Store.SetExpiring(jobKey(rec.ID), b, rec.Created.Add(JobRetention), d)
}

// runOutcome is how a run ended, wherever it ran: what its job's record
// keeps, and the charge, if any, its owner makes.
type runOutcome struct {
	Job      string          `json:"job"`
	Status   string          `json:"status"`
	Finished time.Time       `json:"finished"`
	Rows     json.RawMessage `json:"rows,omitempty"`
	Meta     *Meta           `json:"meta"`
	Units    int             `json:"units"`
	Error    *JobError       `json:"error,omitempty"`
	// Charge is the run's usage to charge; nil: nothing (a cached
	// result, a run that fetched and asked nothing).
	Charge *metering.Usage `json:"charge,omitempty"`
	Cell   string          `json:"cell,omitempty"` // the cell that ran it
	Blob   string          `json:"blob,omitempty"` // the outcome, in the object store when too large for a message
}

// outcomeOf is the outcome of a run of rc that ended at at.
func outcomeOf(rc *Recipe, res *Result, err error, at time.Time) *runOutcome {
	meta := res.Meta
	out := &runOutcome{Finished: at, Meta: &meta, Units: res.Units}
	if meta.FromCache {
		out.Units = 0
	}
	if err != nil {
		out.Status = JobFailed
		out.Error = jobError(RunError(err))
	} else {
		out.Status = JobDone
		out.Rows = res.rowsJSON()
	}
	if !meta.FromCache && (res.Units > 0 || res.InTokens+res.OutTokens > 0) {
		u := res.Usage(Box(rc.Kind))
		u.Lines = nil // the charge's line; the job's record lists the pages
		out.Charge = &u
	}
	return out
}

// applyOutcome records a run's outcome on its job and its charge, in one
// synced batch.
func (s *Service) applyOutcome(rec *jobRecord, out *runOutcome) error {
	at := out.Finished
	rec.Finished, rec.Status, rec.Meta, rec.Units, rec.Error, rec.Rows = &at, out.Status, out.Meta, out.Units, out.Error, out.Rows
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	batch := s.cfg.Store.NewBatch()
	defer batch.Discard()
	batch.SetExpiring(jobKey(rec.ID), b, rec.Created.Add(JobRetention))
	if out.Charge != nil {
		c := Charge{ID: "rj-" + rec.ID, Account: rec.Owner, URL: "", At: at, Usage: *out.Charge}
		cb, _ := json.Marshal(c)
		batch.Set(append(append([]byte(nil), prefixCharge...), c.ID...), cb)
	}
	return batch.Commit(store.Sync)
}

// Job returns account's job id. A job of another cell is read from the
// region's log (the gate asks this cell while its owner is down).
func (s *Service) Job(ctx context.Context, account, id string) (*Job, error) {
	if s.cfg.Store == nil {
		return nil, ErrNoJob
	}
	sh := s.share.Load()
	_, owner, ok := jobid.Parse(id)
	if ok && s.cfg.Cell != "" && owner != "" && owner != s.cfg.Cell {
		switch {
		case sh != nil:
			return s.logJob(ctx, sh, account, id)
		case s.cfg.AwaitShare:
			return nil, ErrRestoring
		}
		return nil, ErrNoJob
	}
	rec, err := s.jobRecord(id)
	if errors.Is(err, store.ErrNotFound) {
		switch {
		case sh == nil && s.cfg.AwaitShare:
			return nil, ErrRestoring // the log may have it: a store lost while the cell was down
		case sh != nil && ok && owner == "":
			// A placed id (jobid.NewPlaced) of another cell: the gate
			// sends it here once the region's cells changed.
			return s.logJob(ctx, sh, account, id)
		}
		return nil, ErrNoJob
	} else if err != nil {
		return nil, err
	}
	if rec.Owner != account {
		return nil, ErrNoJob
	}
	return &rec.Job, nil
}

// failInterrupted marks the jobs a previous run of the cell left running
// here as failed: their inputs were never written, so they cannot resume.
// A shared job's run is the region's queue's: it comes back.
func (s *Service) failInterrupted() {
	if s.cfg.Store == nil {
		return
	}
	var recs []jobRecord
	s.cfg.Store.Scan(prefixJob, nil, func(k, v []byte) (bool, error) {
		if len(v) < 8 {
			return true, nil
		}
		var rec jobRecord
		if json.Unmarshal(v[8:], &rec) == nil && rec.Status == JobRunning && !rec.Shared {
			recs = append(recs, rec)
		}
		return true, nil
	})
	for _, rec := range recs {
		at := s.cfg.Now().UTC()
		rec.Status, rec.Finished = JobFailed, &at
		rec.Error = jobError(httpjson.Errorf(http.StatusGatewayTimeout, CodeTimeout, "the cell restarted during the run; nothing was charged, submit it again"))
		if err := s.saveJob(&rec, store.Sync); err != nil {
			s.cfg.Logger.Warn("recipe job not failed", "job", rec.ID, "err", err)
		}
	}
}

// Charges are the finished jobs' charges waiting for the gate.
func (s *Service) Charges(limit int) ([]Charge, error) {
	out := []Charge{}
	if s.cfg.Store == nil {
		return out, nil
	}
	err := s.cfg.Store.Scan(prefixCharge, nil, func(k, v []byte) (bool, error) {
		var c Charge
		if err := json.Unmarshal(v, &c); err != nil {
			return false, err
		}
		out = append(out, c)
		return len(out) < limit, nil
	})
	return out, err
}

// AckCharges forgets the charges the gate has charged.
func (s *Service) AckCharges(ids []string) (int, error) {
	if s.cfg.Store == nil {
		return 0, nil
	}
	b := s.cfg.Store.NewBatch()
	defer b.Discard()
	n := 0
	for _, id := range ids {
		k := append(append([]byte(nil), prefixCharge...), id...)
		if _, err := s.cfg.Store.Get(k); err == nil {
			b.Delete(k)
			n++
		}
	}
	return n, b.Commit(store.Sync)
}

// Close stops the background jobs and waits for them.
func (s *Service) Close() {
	s.jobsStop()
	s.jobsWG.Wait()
}

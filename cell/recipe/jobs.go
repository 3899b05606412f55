package recipe

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/store"
)

// Recipes declared run: job run in the background (docs/recipes.md): the
// call answers 202 with a job reference at once; GET /recipes/jobs/{id}
// says its status and, once done, has the rows. The run's units are
// charged when it ends, as a background charge the gate collects (the
// monitors' outbox, GET /monitor-charges). A job record holds no input:
// a job cut by a restart is failed, never run again with inputs from
// disk, so a session is never written.

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

// Submit starts a background run of rc under id for account.
func (s *Service) Submit(account, id string, rc *Recipe, vals Values, bypass bool) (*Job, error) {
	if s.cfg.Store == nil {
		return nil, errors.New("recipe jobs need a store")
	}
	now := s.cfg.Now().UTC()
	rec := &jobRecord{Job: Job{ID: id, Recipe: rc.Name, Version: rc.Version, Status: JobRunning, Created: now}, Owner: account}
	if err := s.saveJob(rec, store.Sync); err != nil {
		return nil, err
	}
	job := rec.Job // the caller's copy: the run below writes rec when it ends
	s.jobsWG.Add(1)
	go func() {
		defer s.jobsWG.Done()
		res, err := s.Run(s.jobsCtx, rc, vals, bypass)
		if s.jobsCtx.Err() != nil {
			return // the cell is closing: the job is failed at the next start
		}
		s.finishJob(rec, rc, res, err)
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

// finishJob records the result and the charge, in one batch.
func (s *Service) finishJob(rec *jobRecord, rc *Recipe, res *Result, err error) {
	at := s.cfg.Now().UTC()
	rec.Finished = &at
	meta := res.Meta
	rec.Meta = &meta
	rec.Units = res.Units
	if meta.FromCache {
		rec.Units = 0
	}
	if err != nil {
		rec.Status = JobFailed
		rec.Error = jobError(RunError(err))
	} else {
		rec.Status = JobDone
		rec.Rows = res.rowsJSON()
	}
	b, merr := json.Marshal(rec)
	if merr != nil {
		s.cfg.Logger.Error("recipe job not recorded", "job", rec.ID, "err", merr)
		return
	}
	batch := s.cfg.Store.NewBatch()
	defer batch.Discard()
	batch.SetExpiring(jobKey(rec.ID), b, rec.Created.Add(JobRetention))
	if !meta.FromCache && (res.Units > 0 || res.InTokens+res.OutTokens > 0) {
		c := Charge{ID: "rj-" + rec.ID, Account: rec.Owner, URL: "", At: at, Usage: res.Usage(Box(rc.Kind))}
		c.Usage.Lines = nil // the charge's line; the job's record lists the pages
		cb, _ := json.Marshal(c)
		batch.Set(append(append([]byte(nil), prefixCharge...), c.ID...), cb)
	}
	if err := batch.Commit(store.Sync); err != nil {
		s.cfg.Logger.Error("recipe job not recorded", "job", rec.ID, "err", err)
	}
}

// Job returns account's job id.
func (s *Service) Job(account, id string) (*Job, error) {
	if s.cfg.Store == nil {
		return nil, ErrNoJob
	}
	v, _, err := s.cfg.Store.GetLive(nil, jobKey(id), s.cfg.Now())
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNoJob
	} else if err != nil {
		return nil, err
	}
	var rec jobRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return nil, err
	}
	if rec.Owner != account {
		return nil, ErrNoJob
	}
	return &rec.Job, nil
}

// failInterrupted marks the jobs a previous run of the cell left running
// as failed: their inputs were never written, so they cannot resume.
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
		if json.Unmarshal(v[8:], &rec) == nil && rec.Status == JobRunning {
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

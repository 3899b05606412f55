package crawl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/webhook"
)

// readBody reads a request body of at most maxRequestBytes; false means
// the answer (413 or 400) was written.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body is over %d bytes", maxRequestBytes))
		} else {
			writeError(w, http.StatusBadRequest, "bad_input", "request body could not be read")
		}
		return nil, false
	}
	return body, true
}

// readPlan reads and validates a crawl request body.
func (s *Server) readPlan(w http.ResponseWriter, r *http.Request) (*Request, *plan, []byte, bool) {
	body, ok := readBody(w, r)
	if !ok {
		return nil, nil, nil, false
	}
	return s.planOf(w, body)
}

// planOf validates a task-API body; false means the 400 was written.
func (s *Server) planOf(w http.ResponseWriter, body []byte) (*Request, *plan, []byte, bool) {
	req, err := decodeRequest(body)
	var p *plan
	if err == nil {
		p, err = s.compile(req)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_input", err.Error())
		return nil, nil, nil, false
	}
	return req, p, body, true
}

func (s *Server) handleCrawl(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	if bodyShape(body) == "c4a" {
		s.c4aCrawl(w, r, body, false)
		return
	}
	_, p, body, ok := s.planOf(w, body)
	if !ok {
		return
	}
	t, ok := s.submit(w, p, body, nil)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"task_id": t.ID, "status": t.Status})
}

// submit stores a task and queues it; false means the answer (503 or
// 500) was written and nothing is stored. done, when not nil, is closed
// when the task finishes.
func (s *Server) submit(w http.ResponseWriter, p *plan, body []byte, done chan struct{}) (*Task, bool) {
	return s.submitAs(w, p, body, done, "")
}

// submitAPI stores and queues a task of another API (apiC4A).
func (s *Server) submitAPI(w http.ResponseWriter, p *plan, body []byte, api string) (*Task, bool) {
	return s.submitAs(w, p, body, nil, api)
}

func (s *Server) submitAs(w http.ResponseWriter, p *plan, body []byte, done chan struct{}, api string) (*Task, bool) {
	if !s.sched.reserve() {
		refused.Add(context.Background(), 1) // cell/crawl/metrics.go
		writeError(w, http.StatusServiceUnavailable, "no_slots", ErrNoSlots.Error())
		return nil, false
	}
	t := &Task{ID: newTaskID(), Status: StatusPending, Priority: p.priority, TTL: int64(p.ttl / time.Second),
		CreatedAt: unixSeconds(s.cfg.Now()), Request: json.RawMessage(body), Seq: s.sched.nextSeq(), URLList: p.urlList, API: api}
	for _, u := range p.urls {
		t.URLs = append(t.URLs, u.String())
	}
	if done != nil {
		s.waiters.Store(t.ID, done)
	}
	if err := s.tasks.put(t); err != nil {
		s.sched.unreserve()
		s.waiters.Delete(t.ID)
		s.log.Error("crawl: task not stored", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "the task could not be stored; nothing was queued")
		return nil, false
	}
	if sh := s.share.Load(); sh != nil {
		// The region runs it (share.go): answered once the queue holds
		// it on a quorum.
		s.sched.unreserve()
		err := s.recordTask(sh, t)
		if err == nil {
			err = s.publishTask(sh, t)
		}
		if err != nil {
			s.log.Warn("crawl: the region's queue refused a task", "task_id", t.ID, "err", err)
			t.Status, t.Error = StatusFailed, "the region's task queue did not take it"
			s.tasks.putFinished(t)
			s.waiters.Delete(t.ID)
			refused.Add(context.Background(), 1)
			writeError(w, http.StatusServiceUnavailable, "no_slots", ErrNoSlots.Error())
			return nil, false
		}
		return t, true
	}
	if err := s.sched.pushReserved(&queued{priority: t.Priority, seq: t.Seq, taskID: t.ID}); err != nil {
		// Shutting down: the task is stored and runs at the next start.
		s.log.Info("crawl: task stored while shutting down; it runs at the next start", "task_id", t.ID)
	}
	return t, true
}

// notifyFinished wakes a /crawl_sync waiting for the task.
func (s *Server) notifyFinished(id string) {
	if ch, ok := s.waiters.LoadAndDelete(id); ok {
		close(ch.(chan struct{}))
	}
}

// DefaultSyncWait is how long POST /crawl_sync waits for its task, as
// Crawl4AI v0.4 did (60 one-second polls), before answering 408.
const DefaultSyncWait = 60 * time.Second

// handleCrawlSync is Crawl4AI v0.4's /crawl_sync: the task is queued like
// any other and the answer waits for it, at most Config.SyncWait: 200
// {"status":"completed","result"|"results"}, 500 when the task failed, 408
// when it is still running (it goes on; GET /task/{task_id} finds it).
func (s *Server) handleCrawlSync(w http.ResponseWriter, r *http.Request) {
	_, p, body, ok := s.readPlan(w, r)
	if !ok {
		return
	}
	done := make(chan struct{})
	t, ok := s.submit(w, p, body, done)
	if !ok {
		return
	}
	timer := time.NewTimer(s.cfg.SyncWait)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		s.waiters.Delete(t.ID)
		msg := fmt.Sprintf("Task timed out: task %s did not finish within %s; it goes on, and GET /task/%s answers it", t.ID, s.cfg.SyncWait, t.ID)
		writeJSON(w, http.StatusRequestTimeout, map[string]any{"error": "timeout", "message": msg, "detail": "Task timed out", "task_id": t.ID})
		return
	case <-r.Context().Done():
		s.waiters.Delete(t.ID)
		return
	}
	got, err := s.tasks.get(t.ID)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "the finished task could not be read")
		return
	}
	if got.Status == StatusFailed {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": "task_failed", "message": got.Error, "detail": got.Error, "task_id": t.ID})
		return
	}
	out := map[string]any{"task_id": got.ID, "status": got.Status}
	putResults(out, got.URLList, got.Results)
	writeJSON(w, http.StatusOK, out)
}

// handleCrawlDirect is Crawl4AI v0.4's /crawl_direct: the crawl runs at
// once, outside the task queue and its limits (the pool's page slots still
// bound it), and the answer is {"result"|"results"}. Nothing is stored.
func (s *Server) handleCrawlDirect(w http.ResponseWriter, r *http.Request) {
	_, p, _, ok := s.readPlan(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), deadlineFor(p))
	defer cancel()
	stop := context.AfterFunc(s.life, cancel)
	defer stop()
	results := s.crawlAll(ctx, p, "", nil)
	if r.Context().Err() != nil {
		return // the client went away
	}
	if s.life.Err() != nil {
		writeError(w, http.StatusServiceUnavailable, "shutting_down", "the server is shutting down")
		return
	}
	out := map[string]any{}
	putResults(out, p.urlList, results)
	writeJSON(w, http.StatusOK, out)
}

// putResults sets result (one URL) and results (a list of URLs, even of
// one: Crawl4AI v0.4 answered results for any list) in an answer.
func putResults(out map[string]any, list bool, results []*Result) {
	if len(results) == 1 {
		out["result"] = results[0]
	}
	if list || len(results) != 1 {
		out["results"] = results
	}
}

// runTask runs a stored task on a worker.
func (s *Server) runTask(id string) {
	t, err := s.tasks.get(id)
	if err != nil {
		s.log.Warn("crawl: queued task not found", "task_id", id, "err", err)
		return
	}
	if t.Status != StatusPending && t.Status != StatusProcessing {
		return
	}
	t.Status = StatusProcessing
	t.StartedAt = unixSeconds(s.cfg.Now())
	if err := s.tasks.put(t); err != nil {
		s.log.Error("crawl: task not updated", "task_id", id, "err", err)
		return
	}
	results, failure, cut := s.execute(t)
	if cut {
		return // the task stays processing and runs again after the restart
	}
	s.finishMu.Lock()
	defer s.finishMu.Unlock()
	if cur, err := s.tasks.get(id); err == nil && (cur.Status == StatusCompleted || cur.Status == StatusFailed) {
		return // another cell's outcome came first (share.go)
	}
	s.finishTask(t, results, failure)
}

// finishTask stores a task's outcome (its results, or why it failed),
// wakes a /crawl_sync waiting for it and sends its webhook.
func (s *Server) finishTask(t *Task, results []*Result, failure string) {
	if failure != "" {
		t.Status, t.Error = StatusFailed, failure
	} else {
		t.Status, t.Results = StatusCompleted, results
	}
	t.FinishedAt = unixSeconds(s.cfg.Now())
	t.ExpiresAt = t.FinishedAt + Number(t.TTL)
	if err := s.tasks.putFinished(t); err != nil {
		s.log.Error("crawl: task result not stored", "task_id", t.ID, "err", err)
	}
	s.notifyFinished(t.ID)
	p, _ := s.planOfTask(t)
	s.deliverWebhook(t, p)
}

// planOfTask compiles a stored task's request.
func (s *Server) planOfTask(t *Task) (*plan, *c4aPlan) {
	if t.API == apiC4A {
		cp, err := s.compileC4A(t.Request)
		if err != nil {
			return nil, nil
		}
		return cp.p, cp
	}
	req, err := decodeRequest(t.Request)
	if err != nil {
		return nil, nil
	}
	p, err := s.compile(req)
	if err != nil {
		return nil, nil
	}
	return p, nil
}

// execute runs task t's request here and returns its results, or why it
// failed; cut is true when the server shut down meanwhile (nothing is
// decided: the task runs again).
func (s *Server) execute(t *Task) (results []*Result, failure string, cut bool) {
	var p *plan
	var cp *c4aPlan
	var err error
	if t.API == apiC4A {
		if cp, err = s.compileC4A(t.Request); err == nil {
			p = cp.p
		}
	} else {
		var req *Request
		if req, err = decodeRequest(t.Request); err == nil {
			p, err = s.compile(req)
		}
	}
	if err != nil {
		return nil, "the stored request is no longer valid: " + err.Error(), false
	}
	first := ""
	if len(t.URLs) > 0 {
		first = t.URLs[0]
		if len(t.URLs) > 1 {
			first += fmt.Sprintf(" (+%d)", len(t.URLs)-1)
		}
	}
	a := s.mon.begin("/crawl (task)", first, t.ID)
	if cp != nil {
		ctx, cancel := context.WithTimeout(s.life, c4aDeadline(cp))
		defer cancel()
		results = s.c4aRun(ctx, cp, t.ID, nil)
	} else {
		ctx, cancel := context.WithTimeout(s.life, deadlineFor(p))
		defer cancel()
		results = s.crawlAll(ctx, p, t.ID, nil)
	}
	if s.life.Err() != nil {
		s.mon.finish(a, false, 0, "server shut down; the task resumes at the next start")
		return nil, "", true
	}
	okAll := true
	for _, r := range results {
		okAll = okAll && r.Success
	}
	s.mon.finish(a, okAll, 0, "")
	return results, "", false
}

// taskView is GET /task/{task_id}: the task, with result (one URL) or
// results (several).
type taskView struct {
	*Task
	// Request shadows the stored request, which is not answered back.
	Request json.RawMessage `json:"request,omitempty"`
	Result  *Result         `json:"result,omitempty"`
	Results []*Result       `json:"results,omitempty"`
	// URLList shadows the stored flag, which is not answered.
	URLList bool `json:"url_list,omitempty"`
}

func (s *Server) handleTask(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("task_id")
	t, err := s.tasks.get(id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && t.ExpiresAt > 0 && t.ExpiresAt <= unixSeconds(s.cfg.Now())) {
		status, code, msg := s.unknownTask(id)
		writeError(w, status, code, msg)
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "the task could not be read")
		return
	}
	v := taskView{Task: t}
	if t.Status == StatusCompleted {
		if len(t.Results) == 1 {
			v.Result = t.Results[0]
		}
		if t.URLList || len(t.Results) != 1 {
			v.Results = t.Results
		}
	}
	t.Results = nil
	writeJSON(w, http.StatusOK, v)
}

// handleStream runs a crawl in a slot of the task workers and writes one
// NDJSON line per URL as it completes, then {"status":"completed"}.
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request) {
	a := s.mon.begin("/crawl/stream", "", "")
	sw := &statusWriter{ResponseWriter: w}
	ok, msg := s.stream(sw, r)
	s.mon.finish(a, ok, sw.status, msg)
}

func (s *Server) stream(w *statusWriter, r *http.Request) (bool, string) {
	body, ok := readBody(w, r)
	if !ok {
		return true, ""
	}
	if bodyShape(body) == "c4a" {
		return s.c4aCrawl(w, r, body, true)
	}
	_, p, _, ok := s.planOf(w, body)
	if !ok {
		return true, ""
	}
	done := make(chan struct{})
	var okAll = true
	q := &queued{priority: p.priority, run: func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(r.Context(), deadlineFor(p))
		defer cancel()
		stop := context.AfterFunc(s.life, cancel)
		defer stop()
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		w.Flush()
		enc := json.NewEncoder(w)
		s.crawlAll(ctx, p, "", func(res *Result) {
			okAll = okAll && res.Success
			enc.Encode(res)
			w.Flush()
		})
		status := StatusCompleted
		if ctx.Err() != nil {
			status = StatusFailed
		}
		enc.Encode(map[string]string{"status": status})
		w.Flush()
	}}
	if err := s.sched.push(q, false); err != nil {
		refused.Add(context.Background(), 1) // cell/crawl/metrics.go
		writeError(w, http.StatusServiceUnavailable, "no_slots", err.Error())
		return false, err.Error()
	}
	select {
	case <-done:
	case <-r.Context().Done():
		if s.sched.remove(q) {
			return false, "client went away while the stream was queued"
		}
		<-done
	}
	return okAll, ""
}

// deliverWebhook hands a finished task's notice to the webhook sender
// when its request asked for one: {task_id, task_type, status, timestamp,
// urls, error?, data?}, data being {result|results} when
// webhook_data_in_payload is set.
func (s *Server) deliverWebhook(t *Task, p *plan) {
	if p == nil || p.webhook == nil {
		return
	}
	wc := p.webhook
	body := map[string]any{"task_id": t.ID, "task_type": "crawl", "status": t.Status,
		"timestamp": s.cfg.Now().UTC().Format(time.RFC3339Nano), "urls": t.URLs}
	if t.Error != "" {
		body["error"] = t.Error
	}
	if wc.DataInPayload && t.Status == StatusCompleted {
		data := map[string]any{}
		putResults(data, t.URLList, t.Results)
		if t.API == apiC4A { // Crawl4AI's payload: the job's result
			if cp, err := s.compileC4A(t.Request); err == nil {
				res := make([]*c4aResult, len(t.Results))
				for i, x := range t.Results {
					res[i] = cp.toC4A(x)
				}
				data = c4aAnswer(res, time.Duration((float64(t.FinishedAt)-float64(t.StartedAt))*float64(time.Second)), 0, 0)
			}
		}
		body["data"] = data
	}
	b, err := json.Marshal(body)
	if err != nil {
		s.log.Error("crawl: webhook body", "task_id", t.ID, "err", err)
		return
	}
	id, err := s.hooks.Send(webhook.Delivery{URL: strings.TrimSpace(wc.URL), Event: "crawl." + t.Status, Secret: wc.Secret, Header: wc.Headers, Body: b})
	if err != nil {
		s.log.Warn("crawl: webhook not sent", "task_id", t.ID, "err", err)
		return
	}
	s.log.Info("crawl: webhook queued", "task_id", t.ID, "delivery", id)
}

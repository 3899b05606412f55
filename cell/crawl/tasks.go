package crawl

import (
	"bytes"
	"container/heap"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/trawlhq/trawl/internal/store"
)

// Task states. A task is pending from submission until a worker takes it,
// processing while its pages are crawled, then completed (whatever each
// page's own success) or failed (the task could not run at all).
const (
	StatusPending    = "pending"
	StatusProcessing = "processing"
	StatusCompleted  = "completed"
	StatusFailed     = "failed"
)

// ErrNoSlots is the answer when the queue is full (docs/spec/crawl-server.md §7: "No available
// slots").
var ErrNoSlots = errors.New("No available slots")

var taskPrefix = []byte(store.PrefixCrawlTask)

// Task is a crawl task as stored and as answered by GET /task/{task_id}.
type Task struct {
	ID         string          `json:"task_id"`
	Status     string          `json:"status"`
	Priority   int             `json:"priority"`
	TTL        int64           `json:"ttl"` // seconds after completion the task is kept
	URLs       []string        `json:"urls"`
	CreatedAt  Number          `json:"created_at"`
	StartedAt  Number          `json:"started_at,omitempty"`
	FinishedAt Number          `json:"finished_at,omitempty"`
	ExpiresAt  Number          `json:"expires_at,omitempty"`
	Error      string          `json:"error,omitempty"`
	Request    json.RawMessage `json:"request,omitempty"`
	Results    []*Result       `json:"results,omitempty"`
	// Seq orders tasks of equal priority: first submitted, first run.
	Seq uint64 `json:"seq"`
	// URLList records that urls came as a JSON array (which is answered
	// with results even for one URL).
	URLList bool `json:"url_list,omitempty"`
	// API is the API the task was submitted through: "" (the task API's
	// POST /crawl) or apiC4A (Crawl4AI 0.5+'s POST /crawl/job), whose
	// request is compiled and answered in that API's shapes.
	API string `json:"api,omitempty"`
}

// apiC4A marks a task of POST /crawl/job.
const apiC4A = "c4a"

func taskKey(id string) []byte { return append(append([]byte{}, taskPrefix...), id...) }

// newTaskID is a random UUID (version 4), the form Crawl4AI clients know.
func newTaskID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// taskStore keeps tasks in Pebble. Accepted tasks and their completion are
// written with Sync: a task the server answered with a task_id survives a
// crash.
type taskStore struct{ st *store.Store }

func (s taskStore) put(t *Task) error {
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return s.st.Set(taskKey(t.ID), b, store.Sync)
}

func (s taskStore) get(id string) (*Task, error) {
	b, err := s.st.Get(taskKey(id))
	if err != nil {
		return nil, err
	}
	var t Task
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	return &t, nil
}

// each calls fn for every stored task.
func (s taskStore) each(fn func(*Task) error) error {
	return s.st.Scan(taskPrefix, nil, func(k, v []byte) (bool, error) {
		var t Task
		if err := json.Unmarshal(v, &t); err != nil {
			return false, fmt.Errorf("task %s: %w", k[len(taskPrefix):], err)
		}
		return true, fn(&t)
	})
}

// empty reports whether no task is stored (an error reads as not empty:
// a store is not taken for lost on a failed read).
func (s taskStore) empty() bool {
	has, err := s.st.HasPrefix(taskPrefix)
	return !has && err == nil
}

// expiryPrefix indexes finished tasks by expiry:
// crawlexp/<expiry in Unix ms, 20 digits>/<task id>, so the sweep reads
// only what has expired, not every task and its results.
var expiryPrefix = []byte(store.PrefixCrawlExpiry)

func expiryKey(t *Task) []byte {
	ms := int64(t.ExpiresAt * 1000)
	return fmt.Appendf(append([]byte{}, expiryPrefix...), "%020d/%s", max(ms, 0), t.ID)
}

// putFinished stores a finished task and its expiry entry in one synced
// batch.
func (s taskStore) putFinished(t *Task) error {
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	batch := s.st.NewBatch()
	defer batch.Discard()
	batch.Set(taskKey(t.ID), b)
	batch.Set(expiryKey(t), nil)
	return batch.Commit(store.Sync)
}

// sweep deletes finished tasks past their expiry.
func (s taskStore) sweep(now time.Time) (int, error) {
	cut := fmt.Appendf(append([]byte{}, expiryPrefix...), "%020d/", max(now.UnixMilli(), 0))
	b := s.st.NewBatch()
	defer b.Discard()
	n := 0
	err := s.st.Scan(expiryPrefix, nil, func(k, _ []byte) (bool, error) {
		if bytes.Compare(k, cut) >= 0 {
			return false, nil
		}
		id := k[len(expiryPrefix)+21:]
		b.Delete(append([]byte{}, k...))
		b.Delete(taskKey(string(id)))
		n++
		return n < 10000, nil
	})
	if err != nil || n == 0 {
		return 0, err
	}
	return n, b.Commit(store.NoSync)
}

// queued is a unit of work waiting for a worker: a stored task, or a
// stream (run is set and nothing is stored).
type queued struct {
	priority int
	seq      uint64
	taskID   string
	run      func() // a stream's work; the worker calls it
	index    int
}

type taskHeap []*queued

func (h taskHeap) Len() int { return len(h) }
func (h taskHeap) Less(i, j int) bool {
	if h[i].priority != h[j].priority {
		return h[i].priority > h[j].priority // 10 runs before 1
	}
	return h[i].seq < h[j].seq
}
func (h taskHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *taskHeap) Push(x any)   { q := x.(*queued); q.index = len(*h); *h = append(*h, q) }
func (h *taskHeap) Pop() any {
	old := *h
	q := old[len(old)-1]
	*h = old[:len(old)-1]
	return q
}

// scheduler hands queued work to at most `workers` goroutines at once,
// highest priority first, and refuses work past `limit` waiting items.
type scheduler struct {
	mu    sync.Mutex
	cond  *sync.Cond
	h     taskHeap
	limit int
	// reserved counts places taken by submissions not yet pushed.
	reserved int
	running  int
	seq      uint64
	closed   bool
	wg       sync.WaitGroup
}

func newScheduler(workers, limit int, runTask func(id string)) *scheduler {
	s := &scheduler{limit: limit}
	s.cond = sync.NewCond(&s.mu)
	for range workers {
		s.wg.Go(func() {
			for {
				s.mu.Lock()
				for len(s.h) == 0 && !s.closed {
					s.cond.Wait()
				}
				if s.closed {
					s.mu.Unlock()
					return
				}
				q := heap.Pop(&s.h).(*queued)
				s.running++
				s.mu.Unlock()
				if q.run != nil {
					q.run()
				} else {
					runTask(q.taskID)
				}
				s.mu.Lock()
				s.running--
				s.mu.Unlock()
			}
		})
	}
	return s
}

// nextSeq reserves a sequence number, for a task about to be stored.
func (s *scheduler) nextSeq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return s.seq
}

// reserve takes one of the queue's places for an item about to be
// stored and pushed (pushReserved), or reports false when the queue is
// full: the check and the taking are one step, so concurrent submitters
// cannot overshoot the limit between them.
func (s *scheduler) reserve() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || len(s.h)+s.reserved >= s.limit {
		return false
	}
	s.reserved++
	return true
}

// unreserve gives back a place taken by reserve and not used.
func (s *scheduler) unreserve() {
	s.mu.Lock()
	s.reserved--
	s.mu.Unlock()
}

// pushReserved queues an item in the place reserve took for it.
func (s *scheduler) pushReserved(q *queued) error {
	s.mu.Lock()
	s.reserved--
	s.mu.Unlock()
	return s.push(q, true)
}

// push queues an item; force skips the limit (resumed tasks were accepted
// before the restart).
func (s *scheduler) push(q *queued, force bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrNoSlots
	}
	if !force && len(s.h) >= s.limit {
		return ErrNoSlots
	}
	if q.seq == 0 {
		s.seq++
		q.seq = s.seq
	} else if q.seq > s.seq {
		s.seq = q.seq
	}
	heap.Push(&s.h, q)
	s.cond.Signal()
	return nil
}

// remove takes a still-queued stream out (its client went away).
func (s *scheduler) remove(q *queued) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q.index < 0 || q.index >= len(s.h) || s.h[q.index] != q {
		return false
	}
	heap.Remove(&s.h, q.index)
	q.index = -1
	return true
}

func (s *scheduler) counts() (queued, running int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.h), s.running
}

// close stops the workers after the items they are running; queued items
// stay in the store and run after the next start.
func (s *scheduler) close() {
	s.mu.Lock()
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
	s.wg.Wait()
}

package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/internal/jobid"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/testwait"
)

// marker is an observer that marks each event of a job in the log as a
// webhook sender does (cell/fchook): before the write, and done for
// every other event once committed.
type marker struct {
	mgr atomic.Pointer[Manager]

	mu     sync.Mutex
	n      int
	first  map[string]string // event key → the id its first stage claimed
	seen   map[string]Mark   // event key → the mark the last stage got
	keys   map[string]map[string]bool
	staged []string // keys staged as new (their mark not done)
	again  int      // events recorded again whose mark was done
	pend   int      // events recorded again whose mark was pending
}

func (mk *marker) Stage(_ *store.Batch, e *Event) error {
	if !e.Logged {
		return nil
	}
	mk.mu.Lock()
	mk.n++
	id := fmt.Sprintf("d%d", mk.n)
	mk.mu.Unlock()
	got, err := mk.mgr.Load().ClaimMark(e.Job, e.Key, Mark{ID: id})
	if err != nil {
		return err
	}
	mk.mu.Lock()
	defer mk.mu.Unlock()
	if _, ok := mk.first[e.Key]; !ok {
		mk.first[e.Key] = id
	}
	mk.seen[e.Key] = got
	if e.URL != "" {
		if mk.keys[e.URL] == nil {
			mk.keys[e.URL] = map[string]bool{}
		}
		mk.keys[e.URL][e.Key] = true
	}
	switch {
	case got.Done:
		mk.again++
	case got.ID != id:
		mk.pend++
	default:
		mk.staged = append(mk.staged, e.Key)
	}
	return nil
}

func (mk *marker) Committed(e *Event) {
	mk.mu.Lock()
	got, ok := mk.seen[e.Key]
	finish := ok && !got.Done && len(mk.staged)%2 == 0
	mk.mu.Unlock()
	if finish {
		if err := mk.mgr.Load().FinishMark(e.Job, e.Key, got.ID); err != nil {
			panic(err)
		}
	}
}

// An observer's marks follow a job's events through a lost disk: each
// event has one key whether recorded before the loss or again from the
// log, its first mark wins, and a done mark stays done.
func TestMarksFollowEventsThroughRestore(t *testing.T) {
	r := newShareRig(t)
	r.crawlSite(20 * time.Millisecond)
	mk := &marker{first: map[string]string{}, seen: map[string]Mark{}, keys: map[string]map[string]bool{}}
	r.events = mk
	share := func(cell string) *Manager {
		m := r.unshared(cell, 2, 0, 0, 0)
		if cell == "c1" {
			mk.mgr.Store(m)
		}
		if err := m.Share(context.Background(), r.js, ShareConfig{}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	a := share("c1")
	share("c2")
	const n = 80
	urls := make([]string, n)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://site.example/%d", 1000+i)
	}
	id, err := a.SubmitWith("acct", urls, scrape.Options{}, Extra{Shape: json.RawMessage(`{"kind":"t"}`)})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 30*time.Second, "a third of the job", func() bool {
		st, err := a.Status(id, "acct", false)
		return err == nil && st.Done >= n/3
	})
	a.Close() // its store is gone with it: the next c1 opens an empty one
	mk.mu.Lock()
	before := len(mk.first)
	mk.mu.Unlock()

	a2 := share("c1")
	waitDone(t, a2, id, n)
	mk.mu.Lock()
	defer mk.mu.Unlock()
	for _, u := range urls {
		if len(mk.keys[u]) != 1 {
			t.Errorf("%s: page events under keys %v, want one", u, mk.keys[u])
		}
	}
	for key, got := range mk.seen {
		if got.ID != mk.first[key] {
			t.Errorf("event %s: its mark is %+v, not its first id %s", key, got, mk.first[key])
		}
	}
	_, started := mk.first["started"]
	if _, ended := mk.first["end"]; !started || !ended || len(mk.first) != n+2 {
		t.Errorf("%d events marked (started %v, end %v), want the start, %d pages and the end", len(mk.first), started, ended, n)
	}
	if mk.again == 0 || mk.pend == 0 {
		t.Errorf("recorded again: %d done, %d pending; want some of each", mk.again, mk.pend)
	}
	t.Logf("%d events marked before the loss; recorded again: %d done, %d pending; %d marked in all", before, mk.again, mk.pend, len(mk.staged))
}

// A mark whose payload is over MaxMarkPayload keeps it in the blob store,
// and the coordinator hands it whole to TakeMark: a large delivery (a
// page's document) does not wait for its owner.
func TestLargeMarkPayload(t *testing.T) {
	r := newShareRig(t)
	m := r.manager("c1", 2, 0, 10)
	s := m.share.Load()
	job := jobid.New("eu", "c1")
	big, _ := json.Marshal(map[string]string{"markdown": strings.Repeat("a long page. ", MaxMarkPayload/8)})
	small := json.RawMessage(`{"markdown":"short"}`)
	for key, p := range map[string]json.RawMessage{"page.1": big, "page.2": small} {
		got, err := m.ClaimMark(job, key, Mark{ID: "d-" + key, Payload: p})
		if err != nil || got.ID != "d-"+key {
			t.Fatalf("claim %s: %+v %v", key, got, err)
		}
	}
	if mk, err := m.ReadMark(job, "page.1"); err != nil || mk.Blob == "" || len(mk.Payload) != 0 {
		t.Fatalf("the large mark: blob %q, %d payload bytes in the message, %v", mk.Blob, len(mk.Payload), err)
	}
	took := map[string]json.RawMessage{}
	m.cfg.TakeMark = func(j, key string, mk Mark) error {
		if j != job {
			t.Errorf("mark of job %s", j)
		}
		took[key] = mk.Payload
		return nil
	}
	if _, n, err := m.takeMarks(context.Background(), s, "c1", 0); err != nil || n != 2 {
		t.Fatalf("takeMarks: %d, %v", n, err)
	}
	if !bytes.Equal(took["page.1"], big) || !bytes.Equal(took["page.2"], small) {
		t.Errorf("payloads taken: %d and %q bytes, want %d and %q", len(took["page.1"]), took["page.2"], len(big), small)
	}
}

// hookish marks every event as a webhook sender does (cell/fchook): a
// claim with the delivery as payload before the event's write, and once
// sent a read of the mark (webhook.Config.Settled) and its rewrite done.
type hookish struct {
	mgr     atomic.Pointer[Manager]
	payload json.RawMessage
	n       atomic.Int64
}

func (h *hookish) Stage(_ *store.Batch, e *Event) error {
	if !e.Logged {
		return nil
	}
	_, err := h.mgr.Load().ClaimMark(e.Job, e.Key, Mark{ID: fmt.Sprintf("d%d", h.n.Add(1)), Payload: h.payload})
	return err
}

func (h *hookish) Committed(e *Event) {
	if !e.Logged {
		return
	}
	m := h.mgr.Load()
	if mk, err := m.ReadMark(e.Job, e.Key); err == nil && !mk.Done {
		m.FinishMark(e.Job, e.Key, mk.ID)
	}
}

// BenchmarkJobMarks: a shared job's pages/s with every event marked in
// the log as a job with a webhook's are (marks.go), beside the same job
// without; one cell on one node, pages answered at once (the marks' cost
// alone, not a site's).
func BenchmarkJobMarks(b *testing.B) {
	const urls = 200
	page := json.RawMessage(`{"markdown":"` + strings.Repeat("x", 2048) + `"}`)
	for _, marked := range []bool{false, true} {
		name := "plain"
		if marked {
			name = "marked"
		}
		b.Run(name, func(b *testing.B) {
			r := newShareRig(b)
			r.shaped = func(string) ShapedFunc {
				return func(context.Context, Target, json.RawMessage) (Produced, error) { return Produced{Result: page}, nil }
			}
			h := &hookish{payload: page}
			if marked {
				r.events = h
			}
			m := r.manager("c1", 8, 0, 0)
			h.mgr.Store(m)
			b.ResetTimer()
			for i := range b.N {
				u := make([]string, urls)
				for k := range u {
					u[k] = fmt.Sprintf("http://site.example/%d/%d", i, k)
				}
				id, err := m.SubmitWith("acct", u, scrape.Options{}, Extra{Shape: json.RawMessage(`{"kind":"t"}`)})
				if err != nil {
					b.Fatal(err)
				}
				if err := testwait.Poll(60*time.Second, func() bool {
					st, err := m.Status(id, "acct", false)
					return err == nil && st.Status == StatusDone
				}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(urls*b.N)/b.Elapsed().Seconds(), "pages/s")
			if marked && h.n.Load() < int64(urls*b.N) {
				b.Fatalf("%d events marked for %d pages", h.n.Load(), urls*b.N)
			}
		})
	}
}

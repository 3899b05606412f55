package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/testwait"
)

// tree is a site where page n links to 2n+1 and 2n+2 (and back to 0).
func treeLinks(u string) []string {
	n, _ := strconv.Atoi(u[strings.LastIndexByte(u, '/')+1:])
	return []string{fmt.Sprintf("http://site.example/%d", 2*n+1), fmt.Sprintf("http://site.example/%d", 2*n+2), "http://site.example/0"}
}

// recorder is an Observer that keeps the events and writes one key per
// page event, in the page's own write.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) Stage(b *store.Batch, e *Event) error {
	if e.Kind == EventPage {
		b.Set([]byte("test-charge/"+e.Job+"/"+strconv.FormatUint(e.Seq, 10)), nil)
	}
	return nil
}

func (r *recorder) Committed(e *Event) {
	r.mu.Lock()
	r.events = append(r.events, *e)
	r.mu.Unlock()
}

func (r *recorder) kinds() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, e := range r.events {
		out[e.Kind]++
	}
	return out
}

// A growing job adds the links of its pages, each URL once, within its
// limit and depth, in the write that records the page: a manager closed
// mid-way and opened again on the same store loses no URL and fetches
// none twice. Its observer has one started, a page per URL and one
// completed event.
func TestGrowingJob(t *testing.T) {
	st := memStore(t)
	never := func(context.Context, string, scrape.Options) (*scrape.Outcome, error) {
		return nil, scrape.BadInput("no")
	}
	var mu sync.Mutex
	fetched := map[string]int{}
	depths := map[string]int{}
	gate := make(chan struct{})
	var once sync.Once
	shaped := func(ctx context.Context, tg Target, _ json.RawMessage) (Produced, error) {
		mu.Lock()
		fetched[tg.URL]++
		depths[tg.URL] = tg.Depth
		n := len(fetched)
		mu.Unlock()
		if n == 10 {
			once.Do(func() { close(gate) })
		}
		if n >= 10 {
			// Held until the manager closes: these stay pending.
			<-ctx.Done()
			return Produced{}, ctx.Err()
		}
		return Produced{Result: json.RawMessage(`{}`), Links: treeLinks(tg.URL), Usage: &metering.Usage{Kind: "crawl"}}, nil
	}
	rec := &recorder{}
	cfg := Config{Region: "eu", Cell: "c1", Concurrency: 4, Shaped: shaped, Events: rec, Now: time.Now}
	m, err := NewManager(st, never, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	id, err := m.SubmitWith("acct", []string{"http://site.example/0"}, scrape.Options{}, Extra{Shape: json.RawMessage(`{"kind":"t"}`), Grow: &Growth{Limit: 40, MaxDepth: 4}})
	if err != nil {
		t.Fatal(err)
	}
	<-gate
	m.Close()

	// Reopened: the rest runs, nothing done is fetched again.
	mu.Lock()
	before := map[string]int{}
	for u, n := range fetched {
		before[u] = n
	}
	mu.Unlock()
	shaped2 := func(ctx context.Context, tg Target, raw json.RawMessage) (Produced, error) {
		mu.Lock()
		fetched[tg.URL]++
		depths[tg.URL] = tg.Depth
		mu.Unlock()
		return Produced{Result: json.RawMessage(`{}`), Links: treeLinks(tg.URL), Usage: &metering.Usage{Kind: "crawl"}}, nil
	}
	cfg.Shaped = shaped2
	m2, err := NewManager(st, never, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m2.Start()
	defer m2.Close()
	var s *Status
	if err := testwait.Poll(30*time.Second, func() bool {
		s, _ = m2.Status(id, "acct", false)
		return s.Status == StatusDone
	}); err != nil {
		t.Fatalf("not done: %+v", s)
	}
	// Depth 4 of a binary tree: 1+2+4+8+16 = 31 pages, under the limit.
	if s.Total != 31 || s.Done != 31 {
		t.Fatalf("status %+v", s)
	}
	mu.Lock()
	for u, n := range fetched {
		want := 1
		if before[u] > 0 && n > 1 {
			// Held at the close: cut, so fetched again once.
			want = 2
			if before[u] != 1 {
				t.Errorf("%s fetched %d times before the close", u, before[u])
			}
		}
		if n != want {
			t.Errorf("%s fetched %d times", u, n)
		}
		k, _ := strconv.Atoi(u[strings.LastIndexByte(u, '/')+1:])
		if d := depths[u]; k >= 31 || (k >= 15 && d != 4) {
			t.Errorf("%s at depth %d", u, d)
		}
	}
	mu.Unlock()
	if k := rec.kinds(); k[EventStarted] != 1 || k[EventCompleted] != 1 || k[EventPage] != 31 {
		t.Errorf("events %v", k)
	}
	n := 0
	st.Scan([]byte("test-charge/"+id+"/"), nil, func(_, _ []byte) (bool, error) { n++; return true, nil })
	if n != 31 {
		t.Errorf("%d page writes staged, want 31", n)
	}

	// The limit cuts the growth.
	id2, err := m2.SubmitWith("acct", []string{"http://site.example/0"}, scrape.Options{}, Extra{Shape: json.RawMessage(`{"kind":"t"}`), Grow: &Growth{Limit: 5, MaxDepth: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if err := testwait.Poll(30*time.Second, func() bool {
		s, _ = m2.Status(id2, "acct", false)
		return s.Status == StatusDone
	}); err != nil || s.Total != 5 {
		t.Fatalf("limited: %+v", s)
	}
	if _, err := m2.SubmitWith("acct", urlsN(3), scrape.Options{}, Extra{Shape: json.RawMessage(`{}`), Grow: &Growth{Limit: 2}}); err == nil {
		t.Error("a growing job with a limit under its URLs was accepted")
	}
}

// TestNewLinks: how a growing job chooses the links it adds, the same on
// its owner and on the coordinator feeding it.
func TestNewLinks(t *testing.T) {
	g := &Growth{MaxDepth: 2, Limit: 6}
	seen := func(u string) (bool, error) { return u == "a", nil }
	pages := []pageLinks{
		{depth: 0, links: []string{"a", "b", "b", "c"}}, // a seen, b once
		{depth: 2, links: []string{"d"}},                // too deep
		{depth: 1, links: []string{"c", "e", "f", "g"}}, // c chosen above; g over the limit
	}
	got, err := newLinks(g, 2, pages, seen)
	if err != nil {
		t.Fatal(err)
	}
	want := []grownURL{{"b", 1}, {"c", 1}, {"e", 2}, {"f", 2}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("newLinks = %v, want %v", got, want)
	}
	if got, _ := newLinks(g, 6, pages, seen); len(got) != 0 {
		t.Errorf("a job at its limit grew by %v", got)
	}
	if _, err := newLinks(g, 0, pages, func(string) (bool, error) { return false, errors.New("disk gone") }); err == nil {
		t.Error("newLinks hid its store's error")
	}
}

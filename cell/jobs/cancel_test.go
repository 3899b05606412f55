package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/testwait"
)

func memStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open("db", &store.Options{FS: vfs.NewMem(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// gatedScrape is a scrape function whose fetches wait until the test
// opens the gate (or the manager stops), counting each URL it starts.
type gatedScrape struct {
	mu      sync.Mutex
	started map[string]int
	open    chan struct{}
}

func newGatedScrape() *gatedScrape {
	return &gatedScrape{started: map[string]int{}, open: make(chan struct{})}
}

func (g *gatedScrape) fn(ctx context.Context, u string, _ scrape.Options) (*scrape.Outcome, error) {
	g.mu.Lock()
	g.started[u]++
	g.mu.Unlock()
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return nil, scrape.BadInput("a permanent error: enough for these tests")
}

func (g *gatedScrape) count() (urls, fetches int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, n := range g.started {
		urls++
		fetches += n
	}
	return urls, fetches
}

func pendingKeys(t *testing.T, st *store.Store, id string) int {
	t.Helper()
	n := 0
	if err := st.Scan(jobKey(id, 'p'), nil, func(_, _ []byte) (bool, error) { n++; return true, nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func urlsN(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("http://site.example/%d", i))
	}
	return out
}

// Cancel stops what has not started, lets what is in flight finish, is
// durable, and leaves nothing to retry.
func TestCancelStopsPendingURLs(t *testing.T) {
	st := memStore(t)
	g := newGatedScrape()
	cfg := Config{Region: "eu", Cell: "c1", Concurrency: 2}
	m, err := NewManager(st, g.fn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	id, err := m.Submit("acct", urlsN(10), scrape.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := testwait.Poll(10*time.Second, func() bool { n, _ := g.count(); return n == 2 }); err != nil {
		t.Fatal("two URLs never started")
	}
	if err := m.Cancel(id, "acct_b"); !errors.Is(err, ErrNoJob) {
		t.Fatalf("cancel by another account: %v", err)
	}
	if err := m.Cancel(id, "acct"); err != nil {
		t.Fatal(err)
	}
	// The two fetching stay pending until they finish; a third the
	// dispatcher had handed on may be too, but is cancelled unfetched.
	s, _ := m.Status(id, "acct", false)
	if s.Status != StatusCancelled || s.Pending < 2 || s.Pending > 3 || s.Cancelled+s.Pending != 10 {
		t.Fatalf("after cancel: %+v", s)
	}
	if err := m.Cancel(id, "acct"); err != nil {
		t.Fatalf("a second cancel: %v", err)
	}
	close(g.open) // the two in flight finish
	s = waitJob(t, m, id, "acct", func(s *Status) bool { return s.Pending == 0 })
	if s.Status != StatusCancelled || s.Error != 2 || s.Cancelled != 8 {
		t.Fatalf("after the in-flight URLs finished: %+v", s)
	}
	if n, f := g.count(); n != 2 || f != 2 {
		t.Fatalf("%d URLs fetched %d times after a cancel, want the 2 in flight once", n, f)
	}
	if n, tok, err := m.HoldRetry(id, "acct", func(string) bool { return true }); n != 0 || tok != "" || err != nil {
		t.Fatalf("retry of a cancelled job: %d %q %v", n, tok, err)
	}
	full, _ := m.Status(id, "acct", true)
	states := map[string]int{}
	for _, u := range full.URLs {
		states[u.State]++
	}
	if states["cancelled"] != 8 || states["error"] != 2 {
		t.Fatalf("URL states %v", states)
	}
	m.Close()

	// A restart keeps the cancel: nothing is pending, nothing fetched.
	m2, err := NewManager(st, g.fn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m2.Start()
	defer m2.Close()
	if s, _ := m2.Status(id, "acct", false); s.Status != StatusCancelled || s.Cancelled != 8 || s.Pending != 0 || s.Error != 2 {
		t.Fatalf("after a restart: %+v", s)
	}
	if jobs, urls, _ := m2.Backlog(); jobs != 0 || urls != 0 || pendingKeys(t, st, id) != 0 {
		t.Fatalf("backlog after a restart: %d jobs, %d URLs, %d queued", jobs, urls, pendingKeys(t, st, id))
	}
}

// URLs in flight when a job is cancelled and the cell stops before they
// finish are not fetched again by the next start.
func TestCancelSurvivesAStopMidFlight(t *testing.T) {
	st := memStore(t)
	g := newGatedScrape()
	cfg := Config{Region: "eu", Cell: "c1", Concurrency: 3}
	m, err := NewManager(st, g.fn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	id, err := m.Submit("acct", urlsN(7), scrape.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := testwait.Poll(10*time.Second, func() bool { n, _ := g.count(); return n == 3 }); err != nil {
		t.Fatal("three URLs never started")
	}
	if err := m.Cancel(id, "acct"); err != nil {
		t.Fatal(err)
	}
	m.Close() // the three in flight are cut: still pending in the store
	if n := pendingKeys(t, st, id); n < 3 {
		t.Fatalf("%d URLs queued after the stop, want the 3 cut (and one handed on)", n)
	}
	_, before := g.count()

	m2, err := NewManager(st, g.fn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m2.Start()
	defer m2.Close()
	s, _ := m2.Status(id, "acct", false)
	if s.Status != StatusCancelled || s.Pending != 0 || s.Cancelled != 7 {
		t.Fatalf("after the restart: %+v", s)
	}
	if _, after := g.count(); after != before || pendingKeys(t, st, id) != 0 {
		t.Fatalf("fetched %d more after the restart, %d queued", after-before, pendingKeys(t, st, id))
	}
}

// A held job cancelled before its release runs nothing when released, and
// still shows its charge; a held retry released into a cancelled job is
// cancelled, not fetched.
func TestCancelHeldJobAndRetry(t *testing.T) {
	st := memStore(t)
	var scraped atomic.Int64
	var failing atomic.Bool
	failing.Store(true)
	fn := func(_ context.Context, u string, _ scrape.Options) (*scrape.Outcome, error) {
		scraped.Add(1)
		if failing.Load() {
			return nil, &httpjson.HTTPError{Status: 403, Code: "blocked", Message: "blocked"}
		}
		return nil, scrape.BadInput("permanent")
	}
	m, err := NewManager(st, fn, Config{Region: "eu", Cell: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	defer m.Close()

	id, token, err := m.HoldWith("acct", urlsN(3), scrape.Options{}, Extra{Units: 3})
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := m.Status(id, "acct", false); s.Charged != 0 {
		t.Fatalf("a held job shows a charge: %+v", s)
	}
	if err := m.Cancel(id, "acct"); err != nil {
		t.Fatal(err)
	}
	if err := m.Release(id, "acct", token); err != nil {
		t.Fatal(err)
	}
	s, _ := m.Status(id, "acct", false)
	if s.Status != StatusCancelled || s.Cancelled != 3 || s.Pending != 0 || s.Charged != 3 || scraped.Load() != 0 {
		t.Fatalf("cancelled, then released: %+v, %d scraped", s, scraped.Load())
	}

	id, token, err = m.HoldWith("acct", urlsN(2), scrape.Options{}, Extra{Units: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Release(id, "acct", token); err != nil {
		t.Fatal(err)
	}
	waitJob(t, m, id, "acct", func(s *Status) bool { return s.Status == StatusDone && s.Error == 2 })
	n, rt, err := m.HoldRetry(id, "acct", func(string) bool { return true })
	if err != nil || n != 2 {
		t.Fatalf("hold retry: %d %v", n, err)
	}
	before := scraped.Load()
	if err := m.Cancel(id, "acct"); err != nil {
		t.Fatal(err)
	}
	if err := m.Release(id, "acct", rt); err != nil {
		t.Fatal(err)
	}
	if err := m.Release(id, "acct", rt); err != nil {
		t.Fatalf("a repeated release: %v", err)
	}
	s, _ = m.Status(id, "acct", false)
	if s.Status != StatusCancelled || s.Cancelled != 2 || s.Error != 0 || s.Pending != 0 || s.Charged != 4 || scraped.Load() != before {
		t.Fatalf("a retry released into a cancelled job: %+v, %d scraped", s, scraped.Load()-before)
	}
}

// A job with a shape runs Config.Shaped for its URLs: its lines carry
// what it produced, its failures have no line (offsets count results) and
// are read with Failures; its own concurrency bounds its fetches.
func TestShapedJob(t *testing.T) {
	st := memStore(t)
	never := func(context.Context, string, scrape.Options) (*scrape.Outcome, error) {
		t.Error("the scrape function ran for a shaped job")
		return nil, scrape.BadInput("no")
	}
	var mu sync.Mutex
	var inFlight, most int
	var shapes []string
	shaped := func(ctx context.Context, tg Target, shape json.RawMessage) (Produced, error) {
		u := tg.URL
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		shapes = append(shapes, string(shape))
		mu.Unlock()
		defer func() { mu.Lock(); inFlight--; mu.Unlock() }()
		time.Sleep(5 * time.Millisecond)
		if strings.HasSuffix(u, "/3") || strings.HasSuffix(u, "/7") {
			return Produced{}, &httpjson.HTTPError{Status: 422, Code: "unsupported_content", Message: "not HTML"}
		}
		return Produced{Result: json.RawMessage(fmt.Sprintf(`{"markdown":%q}`, "page "+u))}, nil
	}
	if _, err := NewManager(st, never, Config{Region: "eu", Cell: "c1"}); err != nil {
		t.Fatal(err)
	}
	m0, _ := NewManager(st, never, Config{Region: "eu", Cell: "c1"})
	if _, _, err := m0.HoldWith("acct", urlsN(1), scrape.Options{}, Extra{Shape: json.RawMessage(`{}`)}); err == nil {
		t.Fatal("a shaped job without Config.Shaped was accepted")
	}

	clock := &holdClock{now: time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)}
	m, err := NewManager(st, never, Config{Region: "eu", Cell: "c1", Concurrency: 8, Shaped: shaped, Retention: 48 * time.Hour, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	defer m.Close()
	shape := `{"kind":"test","formats":["markdown"]}`
	id, token, err := m.HoldWith("acct", urlsN(10), scrape.Options{}, Extra{Shape: json.RawMessage(shape), Units: 10, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Release(id, "acct", token); err != nil {
		t.Fatal(err)
	}
	s := waitJob(t, m, id, "acct", func(s *Status) bool { return s.Status == StatusDone })
	if s.Done != 8 || s.Error != 2 || s.Charged != 10 || string(s.Shape) != shape || !s.ExpiresAt.Equal(s.CreatedAt.Add(48*time.Hour)) {
		t.Fatalf("status %+v", s)
	}
	mu.Lock()
	if most > 2 || len(shapes) != 10 || shapes[0] != shape {
		t.Errorf("%d at once (job's bound 2), %d calls, shape %q", most, len(shapes), shapes[0])
	}
	mu.Unlock()
	var lines []Line
	err = m.ScanResults(id, "acct", 0, func(l []byte) bool {
		var v Line
		if err := json.Unmarshal(l, &v); err != nil {
			t.Fatalf("line %s: %v", l, err)
		}
		lines = append(lines, v)
		return true
	})
	if err != nil || len(lines) != 8 {
		t.Fatalf("%d lines, %v; want the 8 results", len(lines), err)
	}
	for _, l := range lines {
		if !l.OK || string(l.Result) != fmt.Sprintf(`{"markdown":%q}`, "page "+l.URL) {
			t.Errorf("line %+v", l)
		}
	}
	n := 0
	m.ScanResults(id, "acct", 6, func([]byte) bool { n++; return true })
	if n != 2 {
		t.Errorf("from offset 6: %d lines, want 2", n)
	}
	fs, err := m.Failures(id, "acct")
	if err != nil || len(fs) != 2 || fs[0].Index != 3 || fs[1].URL != "http://site.example/7" ||
		fs[0].Error != "unsupported_content" || fs[0].Status != 422 || !fs[0].At.Equal(clock.Now()) {
		t.Fatalf("failures %+v %v", fs, err)
	}
	if _, err := m.Failures(id, "acct_b"); !errors.Is(err, ErrNoJob) {
		t.Fatalf("failures by another account: %v", err)
	}
	if err := m.ScanResults(id, "acct_b", 0, func([]byte) bool { return true }); !errors.Is(err, ErrNoJob) {
		t.Fatalf("results by another account: %v", err)
	}
}

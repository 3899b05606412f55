package jobs

import (
	"context"
	"errors"
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

func TestIDsNameTheOwner(t *testing.T) {
	st, err := store.Open("db", &store.Options{FS: vfs.NewMem(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	never := func(context.Context, string, scrape.Options) (*scrape.Outcome, error) {
		return nil, scrape.BadInput("not scraped in this test")
	}
	for _, c := range []struct{ region, cell string }{{"", "c1"}, {"eu", ""}, {"EU", "c1"}, {"eu", "c.1"}} {
		if _, err := NewManager(st, never, Config{Region: c.region, Cell: c.cell}); err == nil {
			t.Errorf("region %q cell %q: accepted", c.region, c.cell)
		}
	}
	m, err := NewManager(st, never, Config{Region: "sin", Cell: "c2"})
	if err != nil {
		t.Fatal(err)
	}
	id, err := m.Submit("acct_1", []string{"http://a.example/"}, scrape.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if region, cell, ok := ParseJobID(id); !ok || region != "sin" || cell != "c2" {
		t.Fatalf("ParseJobID(%q) = %q, %q, %v; want sin, c2, true", id, region, cell, ok)
	}
}

// A job belongs to the account that submitted it: any other account (or
// a call with none) is told there is no such job, the answer an id that
// does not exist gets.
func TestJobsBelongToTheirAccount(t *testing.T) {
	st, err := store.Open("db", &store.Options{FS: vfs.NewMem(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fail := func(context.Context, string, scrape.Options) (*scrape.Outcome, error) {
		return nil, scrape.BadInput("not scraped in this test")
	}
	m, err := NewManager(st, fail, Config{Region: "eu", Cell: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Submit("", []string{"http://a.example/"}, scrape.Options{}); err == nil {
		t.Fatal("a job without an owner was accepted")
	}
	id, err := m.Submit("acct_a", []string{"http://a.example/"}, scrape.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"acct_b", "", "acct_a "} {
		if _, err := m.Status(id, who, true); !errors.Is(err, ErrNoJob) {
			t.Errorf("status by %q: %v, want ErrNoJob", who, err)
		}
		if _, err := m.Results(id, who, 0, io.Discard); !errors.Is(err, ErrNoJob) {
			t.Errorf("results by %q: %v, want ErrNoJob", who, err)
		}
		if _, _, err := m.HoldRetry(id, who, func(string) bool { return true }); !errors.Is(err, ErrNoJob) {
			t.Errorf("retry by %q: %v, want ErrNoJob", who, err)
		}
		if err := m.Release(id, who, "x"); !errors.Is(err, ErrNoJob) {
			t.Errorf("release by %q: %v, want ErrNoJob", who, err)
		}
	}
	if s, err := m.Status(id, "acct_a", true); err != nil || s.Total != 1 {
		t.Fatalf("status by the owner: %+v, %v", s, err)
	}
}

// holdClock is a clock the test moves.
type holdClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *holdClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *holdClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// waitJob polls the job's status until cond holds.
func waitJob(t *testing.T, m *Manager, id, account string, cond func(*Status) bool) *Status {
	t.Helper()
	var s *Status
	err := testwait.Poll(10*time.Second, func() bool {
		var err error
		if s, err = m.Status(id, account, false); err != nil {
			t.Fatal(err)
		}
		return cond(s)
	})
	if err != nil {
		t.Fatalf("job %s: %v: %+v", id, err, s)
	}
	return s
}

// Issue 12, items 5 and 6: a held job runs nothing until it is released,
// and a hold that is never released expires with nothing run; a retry is
// held the same way and holds only the URLs that can be fetched.
func TestHeldJobsAndRetries(t *testing.T) {
	st, err := store.Open("db", &store.Options{FS: vfs.NewMem(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var scraped atomic.Int64
	var failing atomic.Bool
	failing.Store(true)
	fn := func(_ context.Context, u string, _ scrape.Options) (*scrape.Outcome, error) {
		scraped.Add(1)
		if failing.Load() || strings.Contains(u, "bad") {
			return nil, &httpjson.HTTPError{Status: 403, Code: "blocked", Message: "blocked"}
		}
		return nil, scrape.BadInput("ok enough: a permanent error")
	}
	clock := &holdClock{now: time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)}
	m, err := NewManager(st, fn, Config{Region: "eu", Cell: "c1", HoldTTL: time.Minute, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	defer m.Close()

	// A held job: pending, nothing scraped, until released.
	id, token, err := m.Hold("acct", []string{"http://a.example/", "http://bad.example/"}, scrape.Options{})
	if err != nil || token == "" {
		t.Fatal(token, err)
	}
	if s, _ := m.Status(id, "acct", false); s.Status != StatusPending || s.Pending != 2 {
		t.Fatalf("held job: %+v", s)
	}
	if n, tok, err := m.HoldRetry(id, "acct", func(string) bool { return true }); n != 0 || tok != "" || err != nil {
		t.Fatalf("retry of a held job: %d %q %v", n, tok, err)
	}
	if err := m.Release(id, "acct", "wrong"); !errors.Is(err, ErrNoHold) {
		t.Fatalf("release with a wrong token: %v", err)
	}
	if scraped.Load() != 0 {
		t.Fatalf("a held job scraped %d URLs", scraped.Load())
	}
	if err := m.Release(id, "acct", token); err != nil {
		t.Fatal(err)
	}
	if err := m.Release(id, "acct", token); err != nil {
		t.Fatalf("a repeated release: %v", err)
	}
	waitJob(t, m, id, "acct", func(s *Status) bool { return s.Status == StatusDone && s.Error == 2 })

	// A retry holds the fetchable failed URLs only, one retry at a time.
	fetchable := func(u string) bool { return !strings.Contains(u, "bad") }
	n, rt, err := m.HoldRetry(id, "acct", fetchable)
	if err != nil || n != 1 || rt == "" {
		t.Fatalf("hold retry: %d %q %v", n, rt, err)
	}
	if _, _, err := m.HoldRetry(id, "acct", fetchable); !errors.Is(err, ErrRetryHeld) {
		t.Fatalf("a second held retry: %v", err)
	}
	before := scraped.Load()
	if s, _ := m.Status(id, "acct", false); s.Status != StatusDone || s.Error != 2 || scraped.Load() != before {
		t.Fatalf("a held retry changed the job: %+v", s)
	}
	// Dropped (its charge refused): undone at once.
	if err := m.Drop(id, "acct", rt); err != nil {
		t.Fatal(err)
	}
	if err := m.Release(id, "acct", rt); !errors.Is(err, ErrNoHold) {
		t.Fatalf("release of a dropped retry: %v", err)
	}
	if n, rt, err = m.HoldRetry(id, "acct", fetchable); err != nil || n != 1 {
		t.Fatalf("hold retry after a drop: %d %v", n, err)
	}
	// Expired: undone, and a new retry may be held.
	clock.add(2 * time.Minute)
	if err := m.Release(id, "acct", rt); !errors.Is(err, ErrNoHold) {
		t.Fatalf("release of an expired retry: %v", err)
	}
	n, rt, err = m.HoldRetry(id, "acct", fetchable)
	if err != nil || n != 1 {
		t.Fatalf("hold retry after expiry: %d %v", n, err)
	}
	failing.Store(false)
	if err := m.Release(id, "acct", rt); err != nil {
		t.Fatal(err)
	}
	waitJob(t, m, id, "acct", func(s *Status) bool { return s.Status == StatusDone })
	if got := scraped.Load() - before; got != 1 {
		t.Fatalf("the retry scraped %d URLs, want 1 (the unfetchable one is not retried)", got)
	}

	// A held job never released: deleted by the sweep, nothing scraped.
	before = scraped.Load()
	id2, _, err := m.Hold("acct", []string{"http://c.example/"}, scrape.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clock.add(2 * time.Minute)
	if n, err := m.Sweep(); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if _, err := m.Status(id2, "acct", false); !errors.Is(err, ErrNoJob) {
		t.Fatalf("an expired held job: %v", err)
	}
	if scraped.Load() != before {
		t.Fatal("an expired held job was scraped")
	}
}

// A held job survives a restart held: the new manager does not start it.
func TestHeldJobStaysHeldAcrossRestart(t *testing.T) {
	fs := vfs.NewMem()
	st, err := store.Open("db", &store.Options{FS: fs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var scraped atomic.Int64
	fn := func(context.Context, string, scrape.Options) (*scrape.Outcome, error) {
		scraped.Add(1)
		return nil, scrape.BadInput("x")
	}
	m, err := NewManager(st, fn, Config{Region: "eu", Cell: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	id, token, err := m.Hold("acct", []string{"http://a.example/"}, scrape.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m2, err := NewManager(st, fn, Config{Region: "eu", Cell: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	m2.Start()
	defer m2.Close()
	if s, _ := m2.Status(id, "acct", false); s.Status != StatusPending || scraped.Load() != 0 {
		t.Fatalf("after a restart: %+v, %d scraped", s, scraped.Load())
	}
	if err := m2.Release(id, "acct", token); err != nil {
		t.Fatal(err)
	}
	waitJob(t, m2, id, "acct", func(s *Status) bool { return s.Status == StatusDone })
}

package jobs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/internal/store"
)

// An idempotency key stands for one job of its account while the job is
// kept: a repeat is the same job with nothing to charge, the key with
// other URLs is refused, another account's same key is its own job; a
// dropped (uncharged) job frees its key, and so does the job's deletion;
// the key survives a restart.
func TestIdempotencyKeys(t *testing.T) {
	fs := vfs.NewMem()
	open := func() *store.Store {
		st, err := store.Open("db", &store.Options{FS: fs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	clock := &holdClock{now: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}
	fn := func(context.Context, string, scrape.Options) (*scrape.Outcome, error) {
		return nil, scrape.BadInput("not scraped in this test")
	}
	cfg := Config{Region: "eu", Cell: "c1", Now: clock.Now, HoldTTL: time.Minute, Retention: time.Hour}
	st := open()
	m, err := NewManager(st, fn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	urls := []string{"http://a.example/1", "http://a.example/2"}
	id, tok, existed, err := m.HoldKeyed("acct_a", "k1", urls, scrape.Options{})
	if err != nil || existed || tok == "" {
		t.Fatalf("first: %s %q %v %v", id, tok, existed, err)
	}
	if id2, tok2, existed, err := m.HoldKeyed("acct_a", "k1", urls, scrape.Options{}); err != nil || !existed || id2 != id || tok2 != "" {
		t.Fatalf("repeat while held: %s %q %v %v", id2, tok2, existed, err)
	}
	if _, _, _, err := m.HoldKeyed("acct_a", "k1", urls[:1], scrape.Options{}); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("other URLs: %v", err)
	}
	if _, _, _, err := m.HoldKeyed("acct_a", "k1", urls, scrape.Options{Format: "md"}); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("other options: %v", err)
	}
	if idB, _, existed, err := m.HoldKeyed("acct_b", "k1", urls, scrape.Options{}); err != nil || existed || idB == id {
		t.Fatalf("another account's key: %s %v %v", idB, existed, err)
	}
	for _, bad := range []string{"", "has space", string(make([]byte, 101))} {
		if _, _, _, err := m.HoldKeyed("acct_a", bad, urls, scrape.Options{}); err == nil {
			t.Errorf("key %q accepted", bad)
		}
	}
	if err := m.Release(id, "acct_a", tok); err != nil {
		t.Fatal(err)
	}

	// A dropped submission frees its key.
	dropped, dtok, _, err := m.HoldKeyed("acct_a", "k2", urls, scrape.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Drop(dropped, "acct_a", dtok); err != nil {
		t.Fatal(err)
	}
	clock.add(time.Second)
	if again, _, existed, err := m.HoldKeyed("acct_a", "k2", urls, scrape.Options{}); err != nil || existed || again == dropped {
		t.Fatalf("after a drop: %s %v %v (dropped %s)", again, existed, err, dropped)
	}

	// The key survives a restart.
	m.Close()
	st.Close()
	st = open()
	defer st.Close()
	m, err = NewManager(st, fn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if id2, _, existed, err := m.HoldKeyed("acct_a", "k1", urls, scrape.Options{}); err != nil || !existed || id2 != id {
		t.Fatalf("repeat after a restart: %s %v %v", id2, existed, err)
	}

	// Deleted with its job after retention: the key is new again.
	clock.add(2 * time.Hour)
	deadline := time.Now().Add(10 * time.Second)
	for {
		// (a job with a URL in flight is deleted at a later sweep)
		if _, err := m.Sweep(); err != nil {
			t.Fatal(err)
		}
		_, err := st.Get(append([]byte(store.PrefixJobKey+"acct_a\x00"), "k1"...))
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the key outlived its job: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if id3, _, existed, err := m.HoldKeyed("acct_a", "k1", urls, scrape.Options{}); err != nil || existed || id3 == id {
		t.Fatalf("after the job's deletion: %s %v %v", id3, existed, err)
	}
}

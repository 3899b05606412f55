package monstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/store"
)

func openLocal(t *testing.T, live *[]string, mu *sync.Mutex) *Local {
	t.Helper()
	st, err := store.Open("", &store.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return NewLocal(st, LocalConfig{Live: func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(*live) }})
}

func putRecord(t *testing.T, s Store, id string, next time.Time) {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"id": id, "next_at": next})
	b := &Batch{}
	b.Set(RecordKey(id), raw)
	if err := s.Apply(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

// Each due monitor goes to exactly one live cell; a claimed monitor is not
// handed out again while its cell lives; a dead cell's claims go to the
// live ones; a restarted cell's old claims are void; a result written
// against a claim that was taken over is refused.
func TestClaims(t *testing.T) {
	var mu sync.Mutex
	live := []string{"c1", "c2", "c3"}
	l := openLocal(t, &live, &mu)
	ctx := context.Background()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for i := range 60 {
		putRecord(t, l, fmt.Sprintf("mon_eu.%020d", i), now)
	}
	putRecord(t, l, "mon_eu.later", now.Add(time.Hour))
	claim := func(cell, inst string) []Claimed {
		c, err := l.Claim(ctx, ClaimRequest{Cell: cell, Instance: inst, Now: now, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	owner := map[string]string{}
	for _, cell := range []string{"c1", "c2", "c3"} {
		for _, c := range claim(cell, "i1") {
			if o, ok := owner[c.ID]; ok {
				t.Fatalf("%s claimed by %s and %s", c.ID, o, cell)
			}
			owner[c.ID] = cell
		}
	}
	if len(owner) != 60 {
		t.Fatalf("%d of 60 due monitors claimed", len(owner))
	}
	if len(claim("c1", "i1"))+len(claim("c2", "i1"))+len(claim("c3", "i1")) != 0 {
		t.Fatal("claimed monitors handed out again")
	}
	// c3 dies: its monitors go to c1 and c2.
	mu.Lock()
	live = []string{"c1", "c2"}
	mu.Unlock()
	var c3s []string
	for id, o := range owner {
		if o == "c3" {
			c3s = append(c3s, id)
		}
	}
	taken := append(claim("c1", "i1"), claim("c2", "i1")...)
	if len(taken) != len(c3s) || len(c3s) == 0 {
		t.Fatalf("%d taken over, c3 had %d", len(taken), len(c3s))
	}
	// c3's result, written against its claim, is refused.
	for _, id := range c3s[:1] {
		b := &Batch{}
		b.Require(RecordKey(id), []byte(`{"stale":true}`))
		b.Set(RecordKey(id), []byte(`{"id":"`+id+`"}`))
		if err := l.Apply(ctx, b); !errors.Is(err, ErrConflict) {
			t.Fatalf("stale write: %v", err)
		}
	}
	// c1 restarts (another instance): its old claims are void to it.
	again := claim("c1", "i2")
	n1 := 0
	for _, c := range taken {
		var v claimView
		json.Unmarshal(c.Record, &v)
		if v.Claim.Cell == "c1" {
			n1++
		}
	}
	for _, o := range owner {
		if o == "c1" {
			n1++
		}
	}
	if len(again) != n1 {
		t.Fatalf("restarted c1 reclaimed %d, held %d", len(again), n1)
	}
	// A cell not (yet) in the membership takes nothing.
	if c := claim("c9", "i1"); len(c) != 0 {
		t.Fatalf("a stranger claimed %d", len(c))
	}
}

// Conditions: a batch is written only while what it read is unchanged,
// and "absent" holds only for a missing key.
func TestConditionalBatch(t *testing.T) {
	var mu sync.Mutex
	live := []string{"c1"}
	l := openLocal(t, &live, &mu)
	ctx := context.Background()
	b := &Batch{}
	b.Require([]byte("mon/x"), nil)
	b.Set([]byte("mon/x"), []byte("1"))
	if err := l.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := l.Apply(ctx, b); !errors.Is(err, ErrConflict) {
		t.Fatalf("second create: %v", err)
	}
	b = &Batch{}
	b.Require([]byte("mon/x"), []byte("1"))
	b.Set([]byte("mon/x"), []byte("2"))
	b.Set([]byte("mon/y"), []byte("2"))
	if err := l.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := l.Apply(ctx, b); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale update: %v", err)
	}
	if v, _ := l.Get(ctx, []byte("mon/y")); string(v) != "2" {
		t.Fatalf("y = %q", v)
	}
}

// Through the server: a signed client reads, scans (in pages), writes and
// claims; a request signed with other keys is refused.
func TestClientServer(t *testing.T) {
	var mu sync.Mutex
	live := []string{"c1"}
	l := openLocal(t, &live, &mu)
	keys, _ := regionauth.ParseKeys(regionauth.NewKey())
	srv := httptest.NewServer(NewServer(l, regionauth.NewVerifier(keys, nil), nil))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	c := &Client{Gate: regionauth.Gate{Keys: keys, Addr: func() string { return addr }}}
	ctx := context.Background()
	now := time.Now()
	for i := range 1100 {
		putRecord(t, c, fmt.Sprintf("mon_eu.%020d", i), now)
	}
	n := 0
	if err := c.Scan(ctx, []byte(RecordPrefix), nil, func(k, v []byte) (bool, error) { n++; return true, nil }); err != nil || n != 1100 {
		t.Fatalf("scan: %d %v", n, err)
	}
	if _, err := c.Get(ctx, []byte("mon/none")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	got, err := c.Claim(ctx, ClaimRequest{Cell: "c1", Instance: "i", Now: now, Max: 10, Lease: time.Minute})
	if err != nil || len(got) != 10 {
		t.Fatalf("claim: %d %v", len(got), err)
	}
	b := &Batch{}
	b.Require(RecordKey(got[0].ID), []byte("old"))
	if err := c.Apply(ctx, b); !errors.Is(err, ErrConflict) {
		t.Fatalf("conflict through the server: %v", err)
	}
	// Only the monitors' keys: the gate's store holds its journal too.
	if _, err := c.Get(ctx, []byte("H/journal")); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("read outside the monitor store: %v", err)
	}
	outside := &Batch{}
	outside.Set([]byte("U/line"), []byte("x"))
	if err := c.Apply(ctx, outside); err == nil {
		t.Fatal("wrote outside the monitor store")
	}
	if err := c.Scan(ctx, []byte("L/"), nil, func(_, _ []byte) (bool, error) { return true, nil }); err == nil {
		t.Fatal("scanned outside the monitor store")
	}
	other, _ := regionauth.ParseKeys(regionauth.NewKey())
	stranger := &Client{Gate: regionauth.Gate{Keys: other, Addr: func() string { return addr }}}
	if _, err := stranger.Get(ctx, RecordKey(got[0].ID)); err == nil {
		t.Fatal("a stranger read the store")
	}
}

// BenchmarkClaimPass is one scheduler pass of a cell over a region of
// 1,000 monitors, none due (the common case: every cell asks once a
// second): in the process, and through the gate's server with a signed
// request (the baseline and the real path, in the same run).
func BenchmarkClaimPass(b *testing.B) {
	var mu sync.Mutex
	live := []string{"c1", "c2"}
	st, err := store.Open("", &store.Options{FS: vfs.NewMem()})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	l := NewLocal(st, LocalConfig{Live: func() []string { mu.Lock(); defer mu.Unlock(); return live }})
	now := time.Now()
	for i := range 1000 {
		raw, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("mon_eu.%020d", i), "next_at": now.Add(time.Hour),
			"url": "https://shop.example/item/" + fmt.Sprint(i), "watch": "the price drops below 48", "every_ns": 3600e9})
		bt := &Batch{}
		bt.Set(RecordKey(fmt.Sprintf("mon_eu.%020d", i)), raw)
		l.Apply(context.Background(), bt)
	}
	keys, _ := regionauth.ParseKeys(regionauth.NewKey())
	srv := httptest.NewServer(NewServer(l, regionauth.NewVerifier(keys, nil), nil))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	req := ClaimRequest{Cell: "c1", Instance: "i", Now: now, Max: 32, Lease: time.Minute}
	for _, s := range []struct {
		name string
		st   Store
	}{{"local", l}, {"server", &Client{Gate: regionauth.Gate{Keys: keys, Addr: func() string { return addr }}}}} {
		b.Run(s.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.st.Claim(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Slots: a limit refusal is a *LimitError, a ledger that cannot count is
// ErrUnavailable (503 through the server, ErrNoGate at the client); either
// way nothing is written, and a create refused after its slot gives the
// place back.
func TestSlots(t *testing.T) {
	st, err := store.Open("", &store.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var mode string
	var ops []string
	l := NewLocal(st, LocalConfig{Slots: func(_ context.Context, s *Slot) error {
		ops = append(ops, s.Op)
		switch mode {
		case "limit":
			return &LimitError{Message: "at most 100 monitors per account"}
		case "down":
			return errors.New("no leader")
		}
		return nil
	}})
	keys, _ := regionauth.ParseKeys(regionauth.NewKey())
	srv := httptest.NewServer(NewServer(l, regionauth.NewVerifier(keys, nil), nil))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	c := &Client{Gate: regionauth.Gate{Keys: keys, Addr: func() string { return addr }}}
	ctx := context.Background()
	newBatch := func() *Batch {
		b := &Batch{Slot: &Slot{Op: "add", Monitor: "m1"}}
		b.Require([]byte("mon/u/x"), nil)
		b.Set([]byte("mon/u/x"), []byte("m1"))
		return b
	}
	mode = "limit"
	var le *LimitError
	if err := c.Apply(ctx, newBatch()); !errors.As(err, &le) || le.Message != "at most 100 monitors per account" {
		t.Fatalf("limit: %v", err)
	}
	mode = "down"
	if err := c.Apply(ctx, newBatch()); !errors.Is(err, ErrNoGate) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("ledger down: %v", err)
	}
	if _, err := l.Get(ctx, []byte("mon/u/x")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused batch wrote: %v", err)
	}
	mode, ops = "", nil
	if err := c.Apply(ctx, newBatch()); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, newBatch()); !errors.Is(err, ErrConflict) {
		t.Fatalf("second create: %v", err)
	}
	if !slices.Equal(ops, []string{"add", "add", "remove"}) {
		t.Fatalf("slot ops %v", ops)
	}
}

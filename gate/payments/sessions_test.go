package payments

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/store"
)

// Issue 12, item 13: checkout sessions kept in the gate's Pebble survive a
// restart (MemStore's were lost); both stores keep SessionStore's contract.
func TestSessionStores(t *testing.T) {
	ctx := context.Background()
	open := func(t *testing.T, dir string) *store.Store {
		st, err := store.Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	at := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		mk   func(t *testing.T) SessionStore
	}{
		{"mem", func(*testing.T) SessionStore { return NewMemStore() }},
		{"pebble", func(t *testing.T) SessionStore {
			st := open(t, t.TempDir())
			t.Cleanup(func() { st.Close() })
			return NewStoreSessions(st)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.mk(t)
			first := Session{ID: "cs_1", AccountID: "acct_1", IdempotencyKey: "k", USD: 10, Credits: 10_000, Created: at}
			if got, created, err := s.Create(ctx, first); err != nil || !created || got != first {
				t.Fatalf("create: %+v %v %v", got, created, err)
			}
			again := first
			again.ID = "cs_2"
			if got, created, err := s.Create(ctx, again); err != nil || created || got != first {
				t.Fatalf("same key: %+v %v %v", got, created, err)
			}
			if _, _, err := s.Create(ctx, Session{ID: "cs_1", AccountID: "acct_2", IdempotencyKey: "k"}); err == nil {
				t.Fatal("a second session with the same id")
			}
			if _, err := s.Get(ctx, "cs_nope"); !errors.Is(err, ErrNoSession) {
				t.Fatalf("unknown id: %v", err)
			}
			paid, err := s.MarkPaid(ctx, "cs_1", "pay_1", at.Add(time.Minute))
			if err != nil || paid.PaymentID != "pay_1" || !paid.PaidAt.Equal(at.Add(time.Minute)) {
				t.Fatalf("mark paid: %+v %v", paid, err)
			}
			if again, err := s.MarkPaid(ctx, "cs_1", "pay_2", at.Add(time.Hour)); err != nil || again.PaymentID != "pay_1" {
				t.Fatalf("the first payment stands: %+v %v", again, err)
			}
			if _, err := s.MarkPaid(ctx, "cs_nope", "p", at); !errors.Is(err, ErrNoSession) {
				t.Fatalf("mark unknown: %v", err)
			}
		})
	}

	t.Run("restart", func(t *testing.T) {
		dir := t.TempDir()
		st := open(t, dir)
		l, err := NewLocal(LocalConfig{Store: NewStoreSessions(st), Now: func() time.Time { return at }})
		if err != nil {
			t.Fatal(err)
		}
		co, err := l.StartCheckout(ctx, testCharge(), "", "")
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		st = open(t, dir)
		defer st.Close()
		l, _ = NewLocal(LocalConfig{Store: NewStoreSessions(st), Now: func() time.Time { return at.Add(time.Hour) }})
		if again, err := l.StartCheckout(ctx, testCharge(), "", ""); err != nil || *again != *co {
			t.Fatalf("the same checkout after a restart: %+v %v, first %+v", again, err, co)
		}
		if _, err := l.confirm(ctx, co.SessionID); err != nil {
			t.Fatalf("confirm after a restart: %v", err)
		}
		if p, ok, err := l.CompleteCheckout(ctx, co.SessionID); err != nil || !ok || p.PaymentID != "local_"+co.SessionID {
			t.Fatalf("complete: %+v %v %v", p, ok, err)
		}
	})
}

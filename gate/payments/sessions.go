package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/trawlhq/trawl/internal/store"
)

// StoreSessions is a SessionStore in the gate's Pebble store: a checkout
// started before a restart can still be confirmed after it. Sessions live
// in the store of the gate that started them (the checkout URL names that
// gate). Layout, under store.PrefixPayments:
//
//	P/s/<session id>            the Session, JSON
//	P/k/<account> 0x00 <key>    the session id of an account's idempotency key
type StoreSessions struct {
	st *store.Store
	mu sync.Mutex // Create's check and write are one step
}

// NewStoreSessions keeps sessions in st.
func NewStoreSessions(st *store.Store) *StoreSessions { return &StoreSessions{st: st} }

func keySession(id string) []byte { return []byte(store.PrefixPayments + "s/" + id) }
func keySessionKey(acct, key string) []byte {
	return []byte(store.PrefixPayments + "k/" + acct + "\x00" + key)
}

// Create implements SessionStore.
func (s *StoreSessions) Create(ctx context.Context, sess Session) (Session, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, err := s.st.Get(keySessionKey(sess.AccountID, sess.IdempotencyKey))
	switch {
	case err == nil:
		stored, err := s.Get(ctx, string(id))
		return stored, false, err
	case !errors.Is(err, store.ErrNotFound):
		return Session{}, false, err
	}
	if _, err := s.st.Get(keySession(sess.ID)); err == nil {
		return Session{}, false, fmt.Errorf("session id %s exists", sess.ID)
	} else if !errors.Is(err, store.ErrNotFound) {
		return Session{}, false, err
	}
	v, err := json.Marshal(sess)
	if err != nil {
		return Session{}, false, err
	}
	b := s.st.NewBatch()
	b.Set(keySession(sess.ID), v)
	b.Set(keySessionKey(sess.AccountID, sess.IdempotencyKey), []byte(sess.ID))
	if err := b.Commit(store.Sync); err != nil {
		return Session{}, false, err
	}
	return sess, true, nil
}

// Get implements SessionStore.
func (s *StoreSessions) Get(_ context.Context, id string) (Session, error) {
	v, err := s.st.Get(keySession(id))
	if errors.Is(err, store.ErrNotFound) {
		return Session{}, fmt.Errorf("%w: %q", ErrNoSession, id)
	}
	if err != nil {
		return Session{}, err
	}
	var sess Session
	if err := json.Unmarshal(v, &sess); err != nil {
		return Session{}, fmt.Errorf("session %s: %w", id, err)
	}
	return sess, nil
}

// MarkPaid implements SessionStore.
func (s *StoreSessions) MarkPaid(ctx context.Context, id, paymentID string, at time.Time) (Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, err := s.Get(ctx, id)
	if err != nil || !sess.PaidAt.IsZero() {
		return sess, err
	}
	sess.PaidAt, sess.PaymentID = at, paymentID
	v, err := json.Marshal(sess)
	if err != nil {
		return Session{}, err
	}
	return sess, s.st.Set(keySession(id), v, store.Sync)
}

var _ SessionStore = (*StoreSessions)(nil)

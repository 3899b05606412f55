package payments

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"
)

// CheckoutPath is where Local's checkout pages live: a session's URL is
// LocalConfig.BaseURL + CheckoutPath + session id, and Local.Handler serves
// that path.
const CheckoutPath = "/v1/billing/checkout/"

// DefaultSessionTTL is how long a Local checkout can be confirmed, as long
// as a Stripe Checkout Session stays open.
const DefaultSessionTTL = 24 * time.Hour

// LocalConfig configures the Local provider. The zero value is a
// self-hosted setup with no saved cards, sessions in memory, and checkout
// URLs relative to the server.
type LocalConfig struct {
	// Instant makes ChargeSaved succeed at once, as if every account had a
	// card that always pays (development). Without it ChargeSaved returns
	// ErrNoSavedCard and top-ups go through checkout.
	Instant bool
	// DeclineSaved makes ChargeSaved return ErrCardDeclined, to exercise
	// the 402 path. It wins over Instant.
	DeclineSaved bool
	// BaseURL is put before CheckoutPath in checkout URLs, e.g.
	// "https://trawl.example.com"; empty gives a path.
	BaseURL string
	// ConfirmToken, when set, must be typed into the checkout page to
	// confirm a payment: the operator confirms once the money has arrived
	// by other means. When empty, anyone holding a session URL can confirm
	// it, which suits a single-user or development server only.
	ConfirmToken string
	// SessionTTL is how long a session can be confirmed; 0 means
	// DefaultSessionTTL.
	SessionTTL time.Duration
	// Store keeps sessions; nil means a new MemStore.
	Store SessionStore
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives the checkout page's store failures; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Session is a checkout of the Local provider, as kept by a SessionStore.
type Session struct {
	ID             string    `json:"id"`
	AccountID      string    `json:"account_id"`
	IdempotencyKey string    `json:"idempotency_key"`
	USD            int       `json:"usd"`
	Credits        int64     `json:"credits"`
	SuccessURL     string    `json:"success_url,omitempty"`
	CancelURL      string    `json:"cancel_url,omitempty"`
	Created        time.Time `json:"created"`
	// PaidAt is zero while the session is open.
	PaidAt    time.Time `json:"paid_at,omitzero"`
	PaymentID string    `json:"payment_id,omitempty"`
}

// SessionStore keeps Local's checkout sessions; the ledger may implement it
// to persist them. Implementations are safe for concurrent use.
type SessionStore interface {
	// Create stores s unless a session with the same AccountID and
	// IdempotencyKey exists; then it stores nothing and returns that one
	// and false.
	Create(ctx context.Context, s Session) (stored Session, created bool, err error)
	// Get returns the session with that id, or ErrNoSession.
	Get(ctx context.Context, id string) (Session, error)
	// MarkPaid records the payment of an open session and returns it; a
	// session already paid is returned unchanged (the first payment
	// stands). ErrNoSession if there is no such session.
	MarkPaid(ctx context.Context, id, paymentID string, at time.Time) (Session, error)
}

// Local is the embedded Provider for self-hosting and development. Its
// checkout is a page served by Handler where an operator confirms the
// payment; ChargeSaved follows LocalConfig.Instant and DeclineSaved.
type Local struct {
	cfg   LocalConfig
	base  string // BaseURL + CheckoutPath
	store SessionStore
	now   func() time.Time
	log   *slog.Logger
}

// NewLocal returns the Local provider.
func NewLocal(cfg LocalConfig) (*Local, error) {
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base != "" {
		u, err := url.Parse(base)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" {
			return nil, fmt.Errorf("local payments: base url %q is not scheme://host[:port]", cfg.BaseURL)
		}
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	l := &Local{cfg: cfg, base: base + CheckoutPath, store: cfg.Store, now: cfg.Now}
	if l.store == nil {
		l.store = NewMemStore()
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.log = cfg.Logger; l.log == nil {
		l.log = slog.Default()
	}
	return l, nil
}

// Name implements Provider.
func (l *Local) Name() string { return "local" }

// ChargeSaved implements Provider. In Instant mode the payment id is
// derived from the account and idempotency key, so a retry reports the same
// payment.
func (l *Local) ChargeSaved(ctx context.Context, c Charge) (*Paid, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	switch {
	case l.cfg.DeclineSaved:
		return nil, fmt.Errorf("%w: declined by configuration (local payments)", ErrCardDeclined)
	case !l.cfg.Instant:
		return nil, fmt.Errorf("%w: local payments keep no cards, use checkout", ErrNoSavedCard)
	}
	sum := sha256.Sum256([]byte("charge\x00" + c.AccountID + "\x00" + c.IdempotencyKey))
	return &Paid{
		PaymentID: "local_ch_" + hex.EncodeToString(sum[:16]),
		USD:       c.USD,
		AccountID: c.AccountID,
		Credits:   c.Credits,
	}, nil
}

// StartCheckout implements Provider: it records an open session and
// returns its page's URL.
func (l *Local) StartCheckout(ctx context.Context, c Charge, successURL, cancelURL string) (*Checkout, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	s, created, err := l.store.Create(ctx, Session{
		ID:             "cs_local_" + rand.Text(),
		AccountID:      c.AccountID,
		IdempotencyKey: c.IdempotencyKey,
		USD:            c.USD,
		Credits:        c.Credits,
		SuccessURL:     successURL,
		CancelURL:      cancelURL,
		Created:        l.now(),
	})
	if err != nil {
		return nil, fmt.Errorf("local payments: store session: %w", err)
	}
	if !created && (s.USD != c.USD || s.Credits != c.Credits) {
		return nil, fmt.Errorf("%w: session %s is for $%d", ErrKeyReused, s.ID, s.USD)
	}
	return &Checkout{SessionID: s.ID, URL: l.base + s.ID}, nil
}

// CompleteCheckout implements Provider.
func (l *Local) CompleteCheckout(ctx context.Context, sessionID string) (*Paid, bool, error) {
	s, err := l.store.Get(ctx, sessionID)
	if err != nil {
		return nil, false, err
	}
	if s.PaidAt.IsZero() {
		return nil, false, nil
	}
	return l.paid(s), true, nil
}

func (l *Local) paid(s Session) *Paid {
	return &Paid{
		PaymentID:  s.PaymentID,
		InvoiceURL: l.base + s.ID, // the page shows the paid session
		USD:        s.USD,
		AccountID:  s.AccountID,
		Credits:    s.Credits,
	}
}

// confirm marks an open, unexpired session paid.
func (l *Local) confirm(ctx context.Context, id string) (Session, error) {
	s, err := l.store.Get(ctx, id)
	if err != nil || !s.PaidAt.IsZero() {
		return s, err
	}
	if l.expired(s) {
		return s, errExpired
	}
	return l.store.MarkPaid(ctx, id, "local_"+id, l.now())
}

var errExpired = errors.New("checkout session expired")

func (l *Local) expired(s Session) bool {
	return s.PaidAt.IsZero() && !l.now().Before(s.Created.Add(l.cfg.SessionTTL))
}

// MemStore is a SessionStore in memory: sessions are lost with the process.
type MemStore struct {
	mu    sync.Mutex
	byID  map[string]Session
	byKey map[string]string // account \x00 key → id
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{byID: map[string]Session{}, byKey: map[string]string{}}
}

// Create implements SessionStore.
func (m *MemStore) Create(_ context.Context, s Session) (Session, bool, error) {
	k := s.AccountID + "\x00" + s.IdempotencyKey
	m.mu.Lock()
	defer m.mu.Unlock()
	if id, ok := m.byKey[k]; ok {
		return m.byID[id], false, nil
	}
	if _, ok := m.byID[s.ID]; ok {
		return Session{}, false, fmt.Errorf("session id %s exists", s.ID)
	}
	m.byID[s.ID] = s
	m.byKey[k] = s.ID
	return s, true, nil
}

// Get implements SessionStore.
func (m *MemStore) Get(_ context.Context, id string) (Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.byID[id]
	if !ok {
		return Session{}, fmt.Errorf("%w: %q", ErrNoSession, id)
	}
	return s, nil
}

// MarkPaid implements SessionStore.
func (m *MemStore) MarkPaid(_ context.Context, id, paymentID string, at time.Time) (Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.byID[id]
	if !ok {
		return Session{}, fmt.Errorf("%w: %q", ErrNoSession, id)
	}
	if s.PaidAt.IsZero() {
		s.PaidAt, s.PaymentID = at, paymentID
		m.byID[id] = s
	}
	return s, nil
}

var (
	_ Provider     = (*Local)(nil)
	_ SessionStore = (*MemStore)(nil)
)

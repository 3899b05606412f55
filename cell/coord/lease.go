// Package coord is the region's coordinator: one cell at a time holds a
// lease in the TRAWL_LEASE JetStream bucket and, while it holds it, feeds
// jobs, schedules monitor checks and sweeps (docs/jetstream-design.md §5).
// This file is the lease; what the coordinator does is built on Acting.
package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/trawlhq/trawl/internal/jsnode"
)

// Defaults of Config (§5): the bucket's TTL is 6 s, so a holder that
// renews every 2 s keeps the key with two renewals to spare; it acts only
// while its last renewal was sent less than 4 s ago, so a holder cut off
// from the quorum stops 2 s before anyone else can take the key. Others
// try every 250 ms (the design said 1 s): a takeover then comes at most
// 6.25 s after the holder's last renewal, inside the 7 s the failover
// test asks, for four refused writes a second per waiting cell.
const (
	DefaultRenew = 2 * time.Second
	DefaultRetry = 250 * time.Millisecond
	DefaultValid = 4 * time.Second
)

// Clock is the time a Lease reads; tests pass a fake one.
type Clock interface {
	Now() time.Time
	// After is time.After.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Config configures a Lease. KV, Cell and Instance are required.
type Config struct {
	// KV is the lease bucket (jsnode.BucketLease), whose TTL expires a
	// holder that stopped renewing.
	KV jetstream.KeyValue
	// Cell and Instance name the holder (the instance tells a cell
	// restarted on a new data directory from its old self).
	Cell, Instance string
	// Renew is how often the holder renews; Retry how often a non-holder
	// tries to take the lease; Valid how long after a renewal was sent
	// the holder may still act. Zero means the defaults.
	Renew, Retry, Valid time.Duration
	// Clock is the time the lease reads; nil is the real one.
	Clock Clock
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Holder is the lease's value, what /operator/v1/cells shows.
type Holder struct {
	Cell     string    `json:"cell"`
	Instance string    `json:"instance"`
	Since    time.Time `json:"since"`
}

// Lease takes and keeps the coordinator's lease. Its methods are safe for
// concurrent use.
type Lease struct {
	cfg Config

	mu      sync.Mutex
	rev     uint64    // the key's revision our last write made; 0: not held
	fence   uint64    // the revision of the Create that took it: the fencing token
	renewed time.Time // when the last successful write was sent
	since   time.Time
	// standby: the cell gives the lease up and does not take it (an
	// operator drained it: SetStandby).
	standby atomic.Bool
	wake    chan struct{}
}

// New returns a lease that Run takes and keeps.
func New(cfg Config) (*Lease, error) {
	if cfg.KV == nil || cfg.Cell == "" || cfg.Instance == "" {
		return nil, errors.New("coord: a lease needs its bucket, cell and instance")
	}
	if cfg.Renew <= 0 {
		cfg.Renew = DefaultRenew
	}
	if cfg.Retry <= 0 {
		cfg.Retry = DefaultRetry
	}
	if cfg.Valid <= 0 {
		cfg.Valid = DefaultValid
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Lease{cfg: cfg, wake: make(chan struct{}, 1)}, nil
}

// SetStandby makes the lease given up at once and not taken again (on),
// or taken again when free (off): a drained cell hands the coordinator's
// work to another before its maintenance.
func (l *Lease) SetStandby(on bool) {
	if l.standby.Swap(on) == on {
		return
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Acting reports whether this cell holds the lease and may act as the
// coordinator now, and the fencing token to put in what it writes (the
// revision of the write that took the lease). It turns false as soon as
// the last successful renewal was sent Valid ago, whatever the bucket
// says: a holder that cannot reach the quorum stops before the key
// expires for the others.
func (l *Lease) Acting() (fence uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rev == 0 || l.cfg.Clock.Now().Sub(l.renewed) >= l.cfg.Valid {
		return 0, false
	}
	return l.fence, true
}

// Run takes the lease when it is free and keeps it, until ctx ends; then
// it gives the lease up (deletes the key if it still holds it) so that
// another cell need not wait for the TTL. It returns ctx's error.
func (l *Lease) Run(ctx context.Context) error {
	defer l.release()
	for {
		// A failed renewal is retried as soon as a take would be.
		wait := l.cfg.Retry
		if l.standby.Load() {
			if l.held() {
				l.release()
				l.cfg.Logger.Info("coord: gave the coordinator lease up (standby)")
			}
		} else if l.held() {
			if l.renew(ctx) {
				wait = l.cfg.Renew
			}
		} else if l.take(ctx) {
			wait = l.cfg.Renew
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.cfg.Clock.After(wait):
		case <-l.wake:
		}
	}
}

func (l *Lease) held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev != 0
}

// op bounds one bucket operation: shorter than a renewal period, so a
// slow quorum cannot stack renewals.
func (l *Lease) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.cfg.Renew/2)
}

// take tries to create the key; it succeeds only if nobody holds it.
func (l *Lease) take(ctx context.Context) bool {
	now := l.cfg.Clock.Now()
	val, err := json.Marshal(Holder{Cell: l.cfg.Cell, Instance: l.cfg.Instance, Since: now.UTC()})
	if err != nil {
		return false
	}
	octx, cancel := l.op(ctx)
	defer cancel()
	rev, err := l.cfg.KV.Create(octx, jsnode.LeaseCoordinator, val)
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) && ctx.Err() == nil {
			l.cfg.Logger.Debug("coord: take lease", "err", err)
		}
		return false
	}
	l.mu.Lock()
	l.rev, l.fence, l.renewed, l.since = rev, rev, now, now
	l.mu.Unlock()
	l.cfg.Logger.Info("coord: this cell is the coordinator", "fence", rev)
	return true
}

// renew updates the key if it is still at our revision, and reports
// whether it did. A refusal means
// the key expired and someone else (or nobody yet) has it: the lease is
// lost. Another error (no quorum, a timeout) keeps trying until Acting
// has turned false and the key has surely expired.
func (l *Lease) renew(ctx context.Context) bool {
	l.mu.Lock()
	rev, since := l.rev, l.since
	l.mu.Unlock()
	now := l.cfg.Clock.Now()
	val, err := json.Marshal(Holder{Cell: l.cfg.Cell, Instance: l.cfg.Instance, Since: since.UTC()})
	if err != nil {
		return false
	}
	octx, cancel := l.op(ctx)
	defer cancel()
	next, err := l.cfg.KV.Update(octx, jsnode.LeaseCoordinator, val, rev)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		l.rev, l.renewed = next, now
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	// A replicated bucket reports the conflict as 10164, not 10071;
	// ErrKeyRevisionMismatch is either.
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		l.cfg.Logger.Warn("coord: lost the coordinator lease", "fence", l.fence)
		l.rev, l.fence = 0, 0
		return false
	}
	if now.Sub(l.renewed) >= 2*l.cfg.Valid {
		// Long past the TTL: whoever holds the key now, it is not us.
		l.cfg.Logger.Warn("coord: lease not renewed", "err", err)
		l.rev, l.fence = 0, 0
	}
	return false
}

// release deletes the key if it is still ours.
func (l *Lease) release() {
	l.mu.Lock()
	rev := l.rev
	l.rev, l.fence = 0, 0
	l.mu.Unlock()
	if rev == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.Renew/2)
	defer cancel()
	if err := l.cfg.KV.Delete(ctx, jsnode.LeaseCoordinator, jetstream.LastRevision(rev)); err != nil {
		l.cfg.Logger.Debug("coord: release lease", "err", err)
	}
}

// Current reads who holds the lease; jetstream.ErrKeyNotFound if nobody.
func Current(ctx context.Context, kv jetstream.KeyValue) (Holder, uint64, error) {
	e, err := kv.Get(ctx, jsnode.LeaseCoordinator)
	if err != nil {
		return Holder{}, 0, err
	}
	var h Holder
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		return Holder{}, 0, fmt.Errorf("coord: lease value: %w", err)
	}
	return h, e.Revision(), nil
}

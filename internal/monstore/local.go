package monstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trawlhq/trawl/internal/store"
)

// LocalConfig configures a Local store.
type LocalConfig struct {
	// Live returns the names of the region's live cells; nil: only the
	// cell that asks (a store of one cell).
	Live func() []string
	// Slots takes and gives back places under the account-wide limits
	// (the ledger, at the gate); nil: no account-wide limits.
	Slots func(ctx context.Context, s *Slot) error
	// OnHook is called after a batch that wrote a delivery (the sender
	// is kicked).
	OnHook func()
}

// Local is the store in this process, over a Pebble store. It is safe
// for concurrent use: batches and claims are applied one at a time.
type Local struct {
	st       *store.Store
	cfg      LocalConfig
	mu       sync.Mutex
	mailWake chan struct{}
}

// NewLocal returns the monitor store kept in st.
func NewLocal(st *store.Store, cfg LocalConfig) *Local {
	return &Local{st: st, cfg: cfg, mailWake: make(chan struct{}, 1)}
}

// Get implements Store.
func (l *Local) Get(_ context.Context, key []byte) ([]byte, error) { return l.st.Get(key) }

// Scan implements Store.
func (l *Local) Scan(_ context.Context, prefix, start []byte, fn func(k, v []byte) (bool, error)) error {
	return l.st.Scan(prefix, start, fn)
}

// Apply implements Store.
func (l *Local) Apply(ctx context.Context, b *Batch) error {
	if b.Slot != nil && l.cfg.Slots != nil {
		// The slot first (a Raft commit): a new monitor whose batch is
		// then refused gives its place back.
		if err := l.cfg.Slots(ctx, b.Slot); err != nil {
			var le *LimitError
			if errors.As(err, &le) {
				return err
			}
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	err := l.apply(b)
	if err != nil && b.Slot != nil && l.cfg.Slots != nil && b.Slot.Op == "add" {
		undo := *b.Slot
		undo.Op = "remove"
		if uerr := l.cfg.Slots(context.WithoutCancel(ctx), &undo); uerr != nil {
			err = errors.Join(err, fmt.Errorf("give back the slot: %w", uerr))
		}
	}
	return err
}

func (l *Local) apply(b *Batch) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range b.Conds {
		v, err := l.st.Get(c.Key)
		switch {
		case errors.Is(err, store.ErrNotFound):
			if c.Hash != "" {
				return ErrConflict
			}
		case err != nil:
			return err
		case c.Hash == "" || Hash(v) != c.Hash:
			return ErrConflict
		}
	}
	pb := l.st.NewBatch()
	defer pb.Discard()
	hook, mail := false, false
	for _, o := range b.Ops {
		switch o.Op {
		case "set":
			pb.Set(o.Key, o.Value)
			hook = hook || bytes.HasPrefix(o.Key, []byte(HookPrefix))
			mail = mail || bytes.HasPrefix(o.Key, []byte(MailPrefix))
		case "del":
			pb.Delete(o.Key)
		case "delrange":
			if err := pb.DeleteRange(o.Key, o.End); err != nil {
				return err
			}
		default:
			return fmt.Errorf("monstore: unknown op %q", o.Op)
		}
	}
	if err := pb.Commit(store.Durability(b.Sync)); err != nil {
		return err
	}
	if hook && l.cfg.OnHook != nil {
		l.cfg.OnHook()
	}
	if mail {
		select {
		case l.mailWake <- struct{}{}:
		default:
		}
	}
	return nil
}

// Claim implements Store: the due, unclaimed monitors that rendezvous
// hashing over the live cells gives to req.Cell, at most req.Max, claimed
// for req.Lease.
func (l *Local) Claim(_ context.Context, req ClaimRequest) ([]Claimed, error) {
	live := []string{req.Cell}
	if l.cfg.Live != nil {
		live = l.cfg.Live()
	}
	if !containsStr(live, req.Cell) {
		return nil, nil // not (yet) a live member: it takes nothing
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Claimed
	pb := l.st.NewBatch()
	defer pb.Discard()
	err := l.st.Scan([]byte(RecordPrefix), nil, func(k, v []byte) (bool, error) {
		var cv claimView
		if err := json.Unmarshal(v, &cv); err != nil {
			return false, fmt.Errorf("monstore: record %s: %w", k, err)
		}
		if cv.Paused || cv.NextAt.After(req.Now) || cv.Claim.Valid(req.Now, live, &req) ||
			(!req.All && Owner(cv.ID, live) != req.Cell) {
			return true, nil
		}
		var rec map[string]json.RawMessage
		if err := json.Unmarshal(v, &rec); err != nil {
			return false, err
		}
		c, _ := json.Marshal(Claim{Cell: req.Cell, Instance: req.Instance, Until: req.Now.Add(req.Lease)})
		rec["claim"] = c
		nv, err := json.Marshal(rec)
		if err != nil {
			return false, err
		}
		pb.Set(k, nv)
		out = append(out, Claimed{ID: cv.ID, Record: nv})
		return req.Max <= 0 || len(out) < req.Max, nil
	})
	if err != nil || len(out) == 0 {
		return nil, err
	}
	// Not synced: a claim lost in a crash of the store is claimed again;
	// a result is accepted only against the claim as written.
	return out, pb.Commit(store.NoSync)
}

func containsStr(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// RecordDelivery writes a finished webhook delivery's final state on its
// event (the sender's OnFinish): id is the delivery's
// (mh_<monitor>_<event>). A delivery whose monitor was deleted is ignored.
func (l *Local) RecordDelivery(id string, delivered bool, attempts, code int, at time.Time) {
	rest, ok := strings.CutPrefix(id, "mh_")
	i := strings.LastIndexByte(rest, '_')
	if !ok || i < 0 {
		return
	}
	n, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if err != nil {
		return
	}
	status := "delivered"
	if !delivered {
		status = "failed"
	}
	l.recordState(rest[:i], n, "webhook", map[string]any{"status": status, "attempts": attempts,
		"at": at.UTC().Format(time.RFC3339), "code": code})
}

// recordState writes one channel's final state (webhook, email) into an
// event's delivery; the delivery is done when every channel it has is.
func (l *Local) recordState(monitor string, event int64, channel string, state map[string]any) {
	key := EventKey(monitor, event)
	for range 5 {
		raw, err := l.st.Get(key)
		if err != nil {
			return
		}
		var e map[string]json.RawMessage
		if json.Unmarshal(raw, &e) != nil {
			return
		}
		var d map[string]json.RawMessage
		json.Unmarshal(e["delivery"], &d)
		if d == nil {
			d = map[string]json.RawMessage{}
		}
		d[channel], _ = json.Marshal(state)
		done := true
		for _, ch := range []string{"webhook", "email"} {
			var st struct{ Status string }
			if v, ok := d[ch]; ok && string(v) != "null" && json.Unmarshal(v, &st) == nil &&
				st.Status != "delivered" && st.Status != "failed" {
				done = false
			}
		}
		d["done"], _ = json.Marshal(done)
		e["delivery"], _ = json.Marshal(d)
		nv, _ := json.Marshal(e)
		b := &Batch{Sync: true}
		b.Require(key, raw)
		b.Set(key, nv)
		if err := l.apply(b); !errors.Is(err, ErrConflict) {
			return
		}
	}
}

// Lag is how far the most overdue running monitor is past its due time at
// now (its check not yet done, whether claimed or waiting for a live
// cell); 0 when none is due. The gate's check-lag gauge
// (docs/operations.md, "Metrics").
func (l *Local) Lag(now time.Time) (time.Duration, error) {
	var lag time.Duration
	err := l.st.Scan([]byte(RecordPrefix), nil, func(k, v []byte) (bool, error) {
		var cv claimView
		if err := json.Unmarshal(v, &cv); err != nil {
			return false, fmt.Errorf("monstore: record %s: %w", k, err)
		}
		if !cv.Paused && !cv.NextAt.IsZero() && now.Sub(cv.NextAt) > lag {
			lag = now.Sub(cv.NextAt)
		}
		return true, nil
	})
	return lag, err
}

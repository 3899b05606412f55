package ledgertest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/trawlhq/trawl/ledger"
)

// ErrUnreachable is what Direct answers while it is down or failing.
var ErrUnreachable = errors.New("ledgertest: leader unreachable")

// ErrCutOff is what Direct answers, once the caller gives up, while it is
// cut off.
var ErrCutOff = errors.New("ledgertest: cut off from the leader")

// ErrReplyLost is what Direct answers for a command it applied and whose
// reply it was told to lose.
var ErrReplyLost = errors.New("ledgertest: reply lost")

// Direct is a ledger.Submitter that applies commands to one State in order:
// the ledger without replication, for tests of what sits on top of it (the
// holds client, billing, sign-up). Its faults: down (every submit fails at
// once), cut off (every submit waits for its context, as a partition is
// silence rather than a refusal), the next n submits failing before they
// reach the state, and the next n replies lost after the command was
// applied. Safe for concurrent use.
type Direct struct {
	mu    sync.Mutex
	state *ledger.State
	index uint64
	lose  int      // replies still to lose
	types []string // command types whose replies are lost; nil: all

	down     atomic.Bool
	cutOff   atomic.Bool
	failNext atomic.Int32
	submits  atomic.Int32
}

// NewDirect applies commands to s, from index 1.
func NewDirect(s *ledger.State) *Direct { return &Direct{state: s} }

// State is the state Direct applies to.
func (d *Direct) State() *ledger.State { return d.state }

// Index is the index of the last command applied.
func (d *Direct) Index() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.index
}

// Submits counts the calls to Submit.
func (d *Direct) Submits() int { return int(d.submits.Load()) }

// SetDown makes every submit fail at once with ErrUnreachable, or stops it.
func (d *Direct) SetDown(down bool) { d.down.Store(down) }

// SetCutOff makes every submit wait for its context to end and fail with
// ErrCutOff, or stops it.
func (d *Direct) SetCutOff(cut bool) { d.cutOff.Store(cut) }

// FailNext makes the next n submits fail with ErrUnreachable before they
// reach the state.
func (d *Direct) FailNext(n int) { d.failNext.Store(int32(n)) }

// LoseReplies applies the next n commands of the given types (none: any
// type) and then fails them with ErrReplyLost, as when the answer is lost
// on its way back.
func (d *Direct) LoseReplies(n int, types ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lose, d.types = n, types
}

// Submit applies cmd at the next index, unless a fault says otherwise.
func (d *Direct) Submit(ctx context.Context, cmd *ledger.Command) (*ledger.Result, error) {
	d.submits.Add(1)
	if d.cutOff.Load() {
		<-ctx.Done()
		return nil, ErrCutOff
	}
	if d.down.Load() || takeOne(&d.failNext) {
		return nil, ErrUnreachable
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.index++
	res, err := d.state.Apply(cmd, d.index)
	if err != nil {
		return nil, err
	}
	if d.lose > 0 && (d.types == nil || slices.Contains(d.types, cmd.Type)) {
		d.lose--
		return nil, ErrReplyLost
	}
	return res, nil
}

func takeOne(n *atomic.Int32) bool {
	for {
		v := n.Load()
		if v <= 0 {
			return false
		}
		if n.CompareAndSwap(v, v-1) {
			return true
		}
	}
}

var _ ledger.Submitter = (*Direct)(nil)

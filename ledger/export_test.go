package ledger

// What the external tests (package ledger_test, which use ledgertest and so
// cannot be part of this package) need to see inside.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/trawlhq/trawl/internal/store"
)

// ReleaseIdle runs one pass of the idle-hold release loop.
func (c *HoldsClient) ReleaseIdle(ctx context.Context) { c.releaseIdle(ctx) }

// HeldView is what a HoldsClient went by for an account (Held as of Index) and
// what its journal records for a restart (Recorded as of RecordedIndex).
type HeldView struct {
	Account              string
	Held, Recorded       MC
	Index, RecordedIndex uint64
	Err                  error // reading the record
}

// HeldViews compares, once c has stopped, each account's hold balance c
// went by with the one its journal keeps for a restart, by account.
func (c *HoldsClient) HeldViews() []HeldView {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []HeldView
	for _, a := range slices.Sorted(maps.Keys(c.accts)) {
		h := c.accts[a]
		h.mu.Lock()
		v := HeldView{Account: a, Held: h.held, Index: h.heldIdx}
		h.mu.Unlock()
		var rec heldRecord
		if _, err := getJSON(c.cfg.Store, keyHeld(a), &rec); err != nil {
			v.Err = fmt.Errorf("read held record of %s: %w", a, err)
		}
		v.Recorded, v.RecordedIndex = rec.Held, rec.Index
		out = append(out, v)
	}
	return out
}

// JournalHead reads up to n of the oldest durable charges in c's journal,
// as c would send them, and the journal's epoch.
func (c *HoldsClient) JournalHead(n int) (string, []Charge, error) {
	durable := c.durable.Load()
	var charges []Charge
	err := c.cfg.Store.Scan(prefixCharges, nil, func(k, v []byte) (bool, error) {
		seq := journalIndexOf(k)
		if seq > durable {
			return false, nil
		}
		var ch Charge
		if err := decodeCharge(v, &ch); err != nil {
			return false, err
		}
		ch.Seq = seq
		charges = append(charges, ch)
		return len(charges) < n, nil
	})
	return c.epoch, charges, err
}

// CommandResult is the stored result of command id, if it was applied.
func (s *State) CommandResult(id string) (*Result, bool, error) {
	var res Result
	ok, err := getJSON(s.st, keyCommand(id), &res)
	return &res, ok, err
}

// CommandResults calls fn with every stored command result, by id.
func (s *State) CommandResults(fn func(id string, res *Result) error) error {
	prefix := keyCommand("")
	return s.st.Scan(prefix, nil, func(k, v []byte) (bool, error) {
		var res Result
		if err := json.Unmarshal(v, &res); err != nil {
			return false, err
		}
		return true, fn(string(k[len(prefix):]), &res)
	})
}

// JournalRaw writes a charge into a region's journal at seq as the client
// would, bypassing Charge's checks: a journal written by an older version
// or a buggy caller.
func JournalRaw(st *store.Store, seq uint64, ch Charge) error {
	return st.Set(keyCharge(seq), encodeCharge(ch.Account, ch.Receipt, ch.Amount, ch.Time), store.Sync)
}

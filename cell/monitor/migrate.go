package monitor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/trawlhq/trawl/internal/monstore"
	"github.com/trawlhq/trawl/internal/store"
)

// Before monitors lived in the region's store, each lived in the store of
// the cell that created it (ids mon_<region>.<cell>.<hex>), its record
// under mon/m/<id>. A cell that now uses the region's store moves such
// monitors there at start (Run retries until the gate answers): each with
// its versions, timeline, waiting charges and pending deliveries, in one
// batch that also takes its place under the account-wide limits; then it
// deletes its own copy. A monitor already in the region's store (a move
// cut short) is only deleted here.

var oldRecords = []byte(store.PrefixMonitor + "m/")

// migrate moves the monitors of the cell's own store st into the region's
// store; it returns how many it moved.
func (s *Service) migrate(ctx context.Context, st *store.Store) (int, error) {
	type old struct {
		key, raw []byte
	}
	var olds []old
	if err := st.Scan(oldRecords, nil, func(k, v []byte) (bool, error) {
		olds = append(olds, old{bytes.Clone(k), bytes.Clone(v)})
		return true, nil
	}); err != nil || len(olds) == 0 {
		return 0, err
	}
	n := 0
	for _, o := range olds {
		moved, err := s.migrateOne(ctx, st, o.key, o.raw)
		if err != nil {
			return n, err
		}
		if moved {
			n++
		}
	}
	if n > 0 {
		s.log.Info("monitor: moved this cell's monitors into the region's store", "monitors", n)
	}
	return n, nil
}

func (s *Service) migrateOne(ctx context.Context, st *store.Store, key, raw []byte) (bool, error) {
	var m Monitor
	if err := json.Unmarshal(raw, &m); err != nil {
		return false, fmt.Errorf("old monitor %s: %w", key, err)
	}
	m.Claim = nil
	mine := func(prefix []byte, keep func(k, v []byte) bool) ([][2][]byte, error) {
		var out [][2][]byte
		err := st.Scan(prefix, nil, func(k, v []byte) (bool, error) {
			if keep == nil || keep(k, v) {
				out = append(out, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
			}
			return true, nil
		})
		return out, err
	}
	var kvs [][2][]byte
	for _, p := range [][]byte{[]byte(monstore.VersionPrefix + m.ID + "/"), eventPrefix(m.ID), []byte(monstore.HookPrefix + "mh_" + m.ID + "_")} {
		got, err := mine(p, nil)
		if err != nil {
			return false, err
		}
		kvs = append(kvs, got...)
	}
	charges, err := mine(chargePrefix, func(_, v []byte) bool {
		var c Charge
		return json.Unmarshal(v, &c) == nil && c.Monitor == m.ID
	})
	if err != nil {
		return false, err
	}
	kvs = append(kvs, charges...)

	moved := false
	if _, err := s.st.Get(ctx, recordKey(m.ID)); errors.Is(err, monstore.ErrNotFound) {
		rec, err := json.Marshal(&m)
		if err != nil {
			return false, err
		}
		b := &monstore.Batch{Sync: true, Slot: s.slot("add", &m)}
		b.Require(recordKey(m.ID), nil)
		b.Set(recordKey(m.ID), rec)
		b.Set(accountKey(m.Account, m.ID), m.accountEntry())
		b.Set(hostKey(m.Host, m.ID), nil)
		same := sameKey(m.Account, m.URL, m.Watch)
		if _, err := s.st.Get(ctx, same); errors.Is(err, monstore.ErrNotFound) {
			b.Set(same, []byte(m.ID))
		}
		for _, kv := range kvs {
			b.Set(kv[0], kv[1])
		}
		var le *monstore.LimitError
		switch err := s.st.Apply(ctx, b); {
		case errors.As(err, &le):
			// Over the account-wide limits now: moved all the same (it
			// existed before them); the ledger counts it at its next
			// change.
			b.Slot = nil
			if err := s.st.Apply(ctx, b); err != nil && !errors.Is(err, monstore.ErrConflict) {
				return false, err
			}
		case err != nil && !errors.Is(err, monstore.ErrConflict):
			return false, err
		}
		moved = true
	} else if err != nil {
		return false, err
	}
	lb := st.NewBatch()
	defer lb.Discard()
	lb.Delete(key)
	for _, kv := range kvs {
		lb.Delete(kv[0])
	}
	return moved, lb.Commit(store.Sync)
}

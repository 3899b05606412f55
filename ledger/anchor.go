package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/trawlhq/trawl/internal/store"
)

// Anchor is where a replica's journal resumes after a snapshot restore
// that skipped entries it did not have: the journal's head at the snapshot
// (Entries, LastHash) and every balance there. The entries after it chain
// from LastHash and, added to Balances, give the stored balances; the
// entries up to it are the same on every replica (their last hash is
// LastHash) and can be fetched from one that has them (Backfill).
type Anchor struct {
	Entries  uint64        `json:"entries"`
	LastHash string        `json:"last_hash"`
	Balances map[string]MC `json:"balances_mc"`
}

// Anchor returns this replica's anchor, nil when its journal is whole from
// the first entry.
func (s *State) Anchor() (*Anchor, error) { return readAnchor(s.st) }

func readAnchor(r reader) (*Anchor, error) {
	var a Anchor
	ok, err := getJSON(r, keyAnchor, &a)
	if err != nil || !ok {
		return nil, err
	}
	return &a, nil
}

// anchorAt records, in b, where the journal resumes after a restore to
// meta m: nothing when the local journal already reaches m's head (and had
// no gap before), an anchor at the head otherwise. Local entries past the
// head (none in practice: Raft sends a snapshot only to a replica behind
// it) are dropped.
func (s *State) anchorAt(b *store.Batch, m Meta) error {
	if err := b.DeleteRange(keyJournal(m.Entries+1), store.PrefixEnd(prefixJournal())); err != nil {
		return err
	}
	if m.Entries == 0 {
		b.Delete(keyAnchor)
		return nil
	}
	var e Entry
	ok, err := getJSON(s.st, keyJournal(m.Entries), &e)
	if err != nil {
		return err
	}
	if ok && e.Hash == m.LastHash {
		return nil // this replica's journal reaches the head; an older anchor stays
	}
	bals := map[string]MC{}
	err = s.st.Scan(prefixBalances(), nil, func(k, v []byte) (bool, error) {
		bals[string(k[len(prefixBalances()):])] = decodeBal(v)
		return true, nil
	})
	if err != nil {
		return err
	}
	// An older anchor is replaced: the audit resumes from the newest gap.
	a := &Anchor{Entries: m.Entries, LastHash: m.LastHash, Balances: bals}
	ab, _ := json.Marshal(a)
	b.Set(keyAnchor, ab)
	return nil
}

// ErrBackfill is returned by Backfill for entries that do not fit the
// anchor.
var ErrBackfill = errors.New("ledger: backfill does not match the anchor")

// Backfill writes journal entries this replica skipped when it restored a
// snapshot (1 to the anchor's Entries), fetched from any replica or from an
// auditor's copy; next returns them in order and io.EOF after the last.
// They are verified as they come — a chain from the genesis hash — and at
// the end against the anchor: its hash and its balances. Only then does the
// anchor go and the journal is whole again; entries that do not fit are
// removed and ErrBackfill returned.
//
// Applies go on meanwhile: they write entries after the anchor, Backfill
// those before it. Only the end holds the apply lock, to drop the anchor if
// no restore replaced it in the meantime.
func (s *State) Backfill(next func() (*Entry, error)) error {
	a, err := readAnchor(s.st)
	if err != nil || a == nil {
		return err
	}
	aud := NewAuditor()
	undo := func(cause error) error {
		b := s.st.NewBatch()
		b.DeleteRange(keyJournal(1), keyJournal(a.Entries+1))
		if err := b.Commit(store.Sync); err != nil {
			return err
		}
		return cause
	}
	b := s.st.NewBatch()
	for aud.n < a.Entries {
		e, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Discard()
			return undo(err)
		}
		aud.Add(e)
		if len(aud.violations) > 0 {
			b.Discard()
			return undo(fmt.Errorf("%w: %v", ErrBackfill, aud.violations))
		}
		eb, _ := json.Marshal(e)
		b.Set(keyJournal(e.Index), eb)
		if b.Len() >= 4096 {
			if err := b.Commit(store.NoSync); err != nil {
				return undo(err)
			}
			b = s.st.NewBatch()
		}
	}
	rep := aud.Report(a.Balances)
	if aud.n != a.Entries || !rep.OK() || rep.LastHash != a.LastHash {
		b.Discard()
		return undo(fmt.Errorf("%w: %d entries ending %s, anchor %d ending %s: %v", ErrBackfill, aud.n, rep.LastHash, a.Entries, a.LastHash, rep.Violations))
	}
	if err := b.Commit(store.NoSync); err != nil {
		return undo(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now, err := readAnchor(s.st)
	if err != nil {
		return err
	}
	if now == nil || now.Entries != a.Entries || now.LastHash != a.LastHash {
		// A restore moved the anchor meanwhile: what was written is a true
		// prefix of the journal and stays; the next backfill goes on.
		return fmt.Errorf("ledger: the anchor moved during the backfill")
	}
	return s.st.Delete(keyAnchor, store.Sync)
}

// migrateJournal moves journal entries kept in the replicated state by
// earlier versions (L/j/) to the replica's own journal (L/~/j/), in place.
// Every replica does it for itself; the replicated state then no longer
// holds entries, so old and moved replicas hash the same.
func migrateJournal(st *store.Store) (int, error) {
	n := 0
	for {
		b := st.NewBatch()
		err := st.Scan(prefixOldJournal, nil, func(k, v []byte) (bool, error) {
			b.Set(keyJournal(journalIndexOf(k)), v)
			b.Delete(k)
			return b.Len() < 8192, nil
		})
		if err != nil {
			b.Discard()
			return n, err
		}
		if b.Len() == 0 {
			b.Discard()
			return n, nil
		}
		n += b.Len() / 2
		if err := b.Commit(store.Sync); err != nil {
			return n, err
		}
	}
}

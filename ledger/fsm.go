package ledger

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/trawlhq/trawl/internal/store"
)

// State is a replica of the ledger's state, kept in its own Pebble store and
// changed only by applying commands in Raft order.
type State struct {
	st *store.Store

	mu   sync.Mutex // serialises applies (raft calls Apply from one goroutine; tests may not)
	meta Meta
	// halfRestored: a restore began and has not finished (guarded by mu).
	halfRestored bool
	// onReduced hears of holds a command took credit back from (guarded by
	// mu; see OnHoldsReduced).
	onReduced func(index uint64, holds []HoldBalance)
	// RestoreBatch is how many keys a restore writes per batch (default
	// 4096); tests make it small to crash between batches.
	RestoreBatch int
}

// ErrHalfRestored is returned by Apply on a state whose last restore did
// not finish: only a restore (of Raft's last snapshot, at start) may follow.
var ErrHalfRestored = errors.New("ledger: state is half restored; restore the last snapshot before applying")

// OpenState opens the state kept in st. A state whose last restore did not
// finish opens with HalfRestored set: it must be restored again before it
// is used (OpenNode has Raft restore its last snapshot).
func OpenState(st *store.Store) (*State, error) {
	s := &State{st: st}
	if _, err := st.Get(keyRestoring); err == nil {
		s.halfRestored = true
		return s, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if _, err := migrateJournal(st); err != nil {
		return nil, fmt.Errorf("ledger: move the journal out of the replicated state: %w", err)
	}
	if err := buildIndexes(st); err != nil {
		return nil, fmt.Errorf("ledger: index keys and e-mail addresses: %w", err)
	}
	m, err := readMeta(st)
	if err != nil {
		return nil, err
	}
	s.meta = m
	return s, nil
}

// HalfRestored reports that a restore began and did not finish: what the
// store holds is part of a snapshot, not a state.
func (s *State) HalfRestored() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.halfRestored
}

func (s *State) restoreBatch() int {
	if s.RestoreBatch > 0 {
		return s.RestoreBatch
	}
	return 4096
}

// Meta returns the applied index, journal length and last hash.
func (s *State) Meta() Meta {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.meta
}

// Apply applies one command at a raft index. Entries at or below the applied
// index were applied before (a restart replays the log from the last
// snapshot): their stored result is returned.
func (s *State) Apply(cmd *Command, index uint64) (*Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.halfRestored {
		return nil, ErrHalfRestored
	}
	if index != 0 && index <= s.meta.AppliedIndex {
		var prev Result
		if ok, err := getJSON(s.st, keyCommand(cmd.ID), &prev); err != nil || !ok {
			return &Result{Index: index, Duplicate: true}, err
		}
		prev.Duplicate = true
		return &prev, nil
	}
	b := s.st.NewBatch()
	meta := s.meta
	res, err := apply(s.st, b, &meta, cmd, index)
	if err != nil {
		b.Discard()
		return nil, err
	}
	if res.Error != "" || res.Duplicate {
		b.Discard()
		b = s.st.NewBatch()
		meta = s.meta
		if err := rollOnly(s.st, b, &meta, cmd); err != nil {
			b.Discard()
			return nil, err
		}
	}
	if index != 0 {
		meta.AppliedIndex = index
	}
	if !res.Duplicate {
		rb, _ := json.Marshal(res)
		b.Set(keyCommand(cmd.ID), rb)
		b.Set(keyTimed(prefixCommandTimes, cmd.Time, cmd.ID), nil)
	}
	mb, _ := json.Marshal(&meta)
	b.Set(keyMeta, mb)
	// NoSync: the raft log is the durable record; what a crash loses here
	// is replayed from it. Snapshot syncs before raft may drop log entries.
	if err := b.Commit(store.NoSync); err != nil {
		return nil, err
	}
	s.meta = meta
	if len(res.Reduced) > 0 && !res.Duplicate && res.Error == "" && s.onReduced != nil {
		s.onReduced(index, res.Reduced)
	}
	return res, nil
}

// OnHoldsReduced sets fn to hear, as each command is applied on this
// replica, of holds the command took credit back from (a lowered spend
// cap): the index it was applied at and each hold's balance after. The
// region's holds client listens (HoldsClient.HoldsReduced) so its next call
// respects the new cap without waiting for a result of its own. fn runs in
// the apply path: it must be quick and must not call back into the State.
func (s *State) OnHoldsReduced(fn func(index uint64, holds []HoldBalance)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onReduced = fn
}

// fsm is the raft.FSM face of State, kept off the public type.
type fsm State

// Apply implements raft.FSM. It returns *Result or error.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	var cmd Command
	if err := json.Unmarshal(l.Data, &cmd); err != nil {
		// A command that does not decode is refused, deterministically.
		return &Result{Index: l.Index, Error: ErrCodeInvalid, Message: "command does not decode: " + err.Error()}
	}
	res, err := (*State)(f).Apply(&cmd, l.Index)
	if err != nil {
		// The store failed: continuing would diverge from the other replicas.
		panic(fmt.Sprintf("ledger: apply index %d: %v", l.Index, err))
	}
	return res
}

// Snapshot implements raft.FSM: a Pebble snapshot (no copy); Persist does the
// I/O. The store is synced first, so state up to the snapshot index survives
// a machine crash before raft drops the log behind it.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.halfRestored {
		return nil, ErrHalfRestored
	}
	mb, _ := json.Marshal(&f.meta)
	if err := f.st.Set(keyMeta, mb, store.Sync); err != nil {
		return nil, err
	}
	return &fsmSnapshot{snap: f.st.NewSnapshot()}, nil
}

// Restore implements raft.FSM: the snapshot replaces all state.
//
// It is crash-atomic. The old state goes in one synced batch that also
// writes the restoring marker (L/restoring); the snapshot's keys follow in
// NoSync batches; one synced batch removes the marker. Pebble's WAL is
// ordered, so the last sync makes every batch before it durable. A crash
// anywhere in between leaves either the old state whole (the first batch
// never became durable) or the marker: OpenState reports it
// (State.HalfRestored) and the node has Raft restore its last snapshot
// before it starts (OpenNode), instead of replaying the log on part of a
// state.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	s := (*State)(f)
	b := f.st.NewBatch()
	// The replicated state goes; what the replica keeps for itself (its
	// journal, under L/~/) stays.
	if err := b.DeleteRange(prefixState, prefixLocal); err != nil {
		b.Discard()
		return err
	}
	b.Set(keyRestoring, []byte("1"))
	if err := b.Commit(store.Sync); err != nil {
		return fmt.Errorf("restore: start: %w", err)
	}
	// From here the state on disk is half a state: memory says so too, so
	// nothing applies on it if this restore fails.
	f.halfRestored = true
	f.meta = Meta{}
	r := bufio.NewReaderSize(rc, 1<<20)
	b = f.st.NewBatch()
	for {
		k, err := readChunk(r)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Discard()
			return fmt.Errorf("restore: %w", err)
		}
		v, err := readChunk(r)
		if err != nil {
			b.Discard()
			return fmt.Errorf("restore: %w", err)
		}
		if bytes.Equal(k, keyRestoring) || bytes.HasPrefix(k, prefixLocal) {
			continue
		}
		if bytes.HasPrefix(k, prefixOldJournal) {
			// A snapshot from before the journal left the replicated
			// state: its entries become this replica's journal.
			k = keyJournal(journalIndexOf(k))
		}
		b.Set(k, v)
		if b.Len() >= s.restoreBatch() {
			if err := b.Commit(store.NoSync); err != nil {
				return fmt.Errorf("restore: %w", err)
			}
			b = f.st.NewBatch()
		}
	}
	if err := b.Commit(store.NoSync); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	// Where the journal resumes: a snapshot carries the journal's head, not
	// its entries. When this replica lacks entries up to the head, an
	// anchor records the head's hash and the balances there; the audit
	// verifies what follows from it until Backfill fetches the rest.
	m, err := readMeta(f.st)
	if err != nil {
		return err
	}
	b = f.st.NewBatch()
	if err := s.anchorAt(b, m); err != nil {
		b.Discard()
		return err
	}
	b.Delete(keyRestoring)
	if err := b.Commit(store.Sync); err != nil {
		return fmt.Errorf("restore: finish: %w", err)
	}
	f.meta = m
	f.halfRestored = false
	// A snapshot of a state written before the indexes has none.
	return buildIndexes(f.st)
}

// buildIndexes writes the key and e-mail indexes of a state written before
// they existed, once (keyIndexed marks it). Every replica derives the same
// keys from the same state, so replicas stay equal.
func buildIndexes(st *store.Store) error {
	if _, err := st.Get(keyIndexed); err == nil {
		return nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	b := st.NewBatch()
	err := st.Scan(prefixKeys(), nil, func(_, v []byte) (bool, error) {
		var k Key
		if err := json.Unmarshal(v, &k); err != nil {
			return false, err
		}
		b.Set(keyAcctKey(k.Account, k.ID), []byte(k.Hash))
		return true, nil
	})
	if err == nil {
		err = st.Scan(prefixAccounts(), nil, func(_, v []byte) (bool, error) {
			var a Account
			if err := json.Unmarshal(v, &a); err != nil {
				return false, err
			}
			if a.Email != "" {
				b.Set(keyEmail(a.Email, a.ID), nil)
			}
			return true, nil
		})
	}
	if err != nil {
		b.Discard()
		return err
	}
	b.Set(keyIndexed, []byte("1"))
	return b.Commit(store.Sync)
}

type fsmSnapshot struct {
	snap *store.Snapshot
}

// Persist writes every state key and value, length-prefixed.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	w := bufio.NewWriterSize(sink, 1<<20)
	err := s.snap.Scan(prefixState, nil, func(k, v []byte) (bool, error) {
		if bytes.HasPrefix(k, prefixLocal) {
			return false, nil // the replica's own keys sort last
		}
		if bytes.Equal(k, keyRestoring) {
			return true, nil
		}
		if err := writeChunk(w, k); err != nil {
			return false, err
		}
		return true, writeChunk(w, v)
	})
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() { s.snap.Close() }

func writeChunk(w io.Writer, b []byte) error {
	var n [binary.MaxVarintLen64]byte
	if _, err := w.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

func readChunk(r *bufio.Reader) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, io.ErrUnexpectedEOF
	}
	return b, nil
}

var (
	_ raft.FSM         = (*fsm)(nil)
	_ raft.FSMSnapshot = (*fsmSnapshot)(nil)
)

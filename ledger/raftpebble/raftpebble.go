// Package raftpebble implements hashicorp/raft's LogStore and StableStore on
// top of a Pebble database, so a raft node keeps its log, current term and
// vote in one durable, crash-safe store.
//
// Store does not implement raft.MonotonicLogStore, on purpose. That
// interface is for stores that cannot hold a gap between consecutive
// indexes (raft-wal's segment files); it makes raft delete the whole log
// after restoring a snapshot instead of leaving a gap behind the snapshot
// index. Log keys here are sparse big-endian indexes and the cached bounds
// are found by seeking, so gaps are harmless, and raft's non-monotonic path
// (the one raft-boltdb and raft-mdb use) is the better-trodden one.
package raftpebble

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
)

// ErrKeyNotFound is returned by Get and GetUint64 for a key that was never
// set. Its text is exactly "not found" because raft compares err.Error()
// against that string (NewRaft, HasExistingState, requestVote) to tell a
// fresh node from a broken store.
var ErrKeyNotFound = errors.New("not found")

// ErrClosed is returned by methods called after Close.
var ErrClosed = errors.New("raftpebble: store closed")

// formatVersion is written under metaFormatKey by the first Open; a store
// written by an incompatible future version is refused rather than misread.
const formatVersion = 1

// Key space. One prefix byte per kind of record; log keys are the prefix
// followed by the big-endian index, so Pebble's bytewise order is index
// order and a range of indexes is a contiguous key range.
const (
	prefixMeta   byte = 0x00
	prefixLog    byte = 0x01
	prefixStable byte = 0x02
)

var (
	metaFormatKey = []byte{prefixMeta, 'f', 'o', 'r', 'm', 'a', 't'}
	logLower      = []byte{prefixLog}
	logUpper      = []byte{prefixLog + 1}
)

const logKeyLen = 9

// Options configures Open. The zero value (or a nil *Options) is valid.
type Options struct {
	// FS is the filesystem Pebble writes to. Nil means the operating
	// system's filesystem (vfs.Default); tests pass vfs.NewMem().
	FS vfs.FS

	// Logger receives Pebble's own messages: its informational chatter
	// (WAL recovery, "Found N WALs") at Debug, errors at Error. Nil means
	// slog.Default().
	Logger *slog.Logger

	// NoSync commits writes without waiting for fsync. A crash can then
	// lose acknowledged log entries or votes (each batch is still all or
	// nothing), which breaks raft's safety. Only for tests and benchmarks.
	NoSync bool
}

// Store is a raft.LogStore and raft.StableStore backed by Pebble.
//
// All methods are safe for concurrent use, except Close, which must not run
// concurrently with any other method (raft must be shut down first).
// Slices passed in are copied; slices returned (GetLog's Data and
// Extensions, Get's value) are owned by the caller.
type Store struct {
	db    *pebble.DB
	write *pebble.WriteOptions

	// mu serialises log mutations so that the cached bounds always describe
	// the committed keys. Readers never take it.
	mu    sync.Mutex
	empty bool // guarded by mu; needed because index 0 is a valid key

	// first and last cache the lowest and highest stored log index (0 and 0
	// when empty) so FirstIndex and LastIndex never touch Pebble. They are
	// published after the batch that changes them is committed.
	first atomic.Uint64
	last  atomic.Uint64

	closed atomic.Bool

	pointDeleteMax int // pointDeleteMax, except in tests
}

// Open opens (creating if needed) the store in dir.
func Open(dir string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	popts := &pebble.Options{
		FS:     o.FS,
		Logger: pebbleLogger{l: o.Logger},
	}
	db, err := pebble.Open(dir, popts)
	if err != nil {
		return nil, fmt.Errorf("raftpebble: open %q: %w", dir, err)
	}
	s := &Store{db: db, write: pebble.Sync, pointDeleteMax: pointDeleteMax}
	if o.NoSync {
		s.write = pebble.NoSync
	}
	if err := s.checkFormat(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("raftpebble: open %q: %w", dir, err)
	}
	if err := s.loadBounds(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("raftpebble: open %q: %w", dir, err)
	}
	return s, nil
}

func (s *Store) checkFormat() error {
	v, closer, err := s.db.Get(metaFormatKey)
	if errors.Is(err, pebble.ErrNotFound) {
		// Written with Sync regardless of NoSync: it happens once.
		return s.db.Set(metaFormatKey, []byte{formatVersion}, pebble.Sync)
	}
	if err != nil {
		return fmt.Errorf("read format version: %w", err)
	}
	defer closer.Close()
	if len(v) != 1 || v[0] != formatVersion {
		return fmt.Errorf("unsupported format version %x (want %d)", v, formatVersion)
	}
	return nil
}

// loadBounds reads the first and last log keys into the cache.
func (s *Store) loadBounds() error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: logLower, UpperBound: logUpper})
	if err != nil {
		return fmt.Errorf("load log bounds: %w", err)
	}
	var first, last uint64
	empty := !it.First()
	if !empty {
		first, err = decodeLogKey(it.Key())
		if err == nil && it.Last() {
			last, err = decodeLogKey(it.Key())
		}
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("load log bounds: %w", err)
	}
	s.setBounds(empty, first, last)
	return nil
}

// setBounds publishes new bounds. Caller holds mu (or is Open).
func (s *Store) setBounds(empty bool, first, last uint64) {
	s.empty = empty
	if empty {
		first, last = 0, 0
	}
	s.first.Store(first)
	s.last.Store(last)
}

// Close closes the underlying database. Writes already acknowledged are
// durable (unless NoSync). Calling Close twice returns ErrClosed.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("raftpebble: close: %w", err)
	}
	return nil
}

// FirstIndex returns the lowest stored log index, 0 when the log is empty.
func (s *Store) FirstIndex() (uint64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	return s.first.Load(), nil
}

// LastIndex returns the highest stored log index, 0 when the log is empty.
func (s *Store) LastIndex() (uint64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	return s.last.Load(), nil
}

// GetLog reads the entry at index into log, replacing all its fields. It
// returns raft.ErrLogNotFound if there is no such entry.
func (s *Store) GetLog(index uint64, log *raft.Log) error {
	if s.closed.Load() {
		return ErrClosed
	}
	var k [logKeyLen]byte
	v, closer, err := s.db.Get(logKey(&k, index))
	if errors.Is(err, pebble.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return fmt.Errorf("raftpebble: get log %d: %w", index, err)
	}
	err = decodeLog(v, index, log)
	closer.Close()
	if err != nil {
		return fmt.Errorf("raftpebble: get log %d: %w", index, err)
	}
	return nil
}

// StoreLog stores one entry; see StoreLogs.
func (s *Store) StoreLog(log *raft.Log) error {
	return s.StoreLogs([]*raft.Log{log})
}

// StoreLogs stores entries in one atomic batch, fsynced unless NoSync: after
// a crash either all of them are present or none. An existing entry at the
// same index is overwritten. Gaps are allowed.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	if s.closed.Load() {
		return ErrClosed
	}
	size := 0
	for _, l := range logs {
		size += 16 + logKeyLen + encodedLogLen(l)
	}
	b := s.db.NewBatchWithSize(size)
	defer b.Close()

	lo, hi := uint64(math.MaxUint64), uint64(0)
	for _, l := range logs {
		op := b.SetDeferred(logKeyLen, encodedLogLen(l))
		logKey((*[logKeyLen]byte)(op.Key), l.Index)
		encodeLog(op.Value, l)
		if err := op.Finish(); err != nil {
			return fmt.Errorf("raftpebble: store logs: %w", err)
		}
		lo, hi = min(lo, l.Index), max(hi, l.Index)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if err := b.Commit(s.write); err != nil {
		return fmt.Errorf("raftpebble: store logs %d-%d: %w", lo, hi, err)
	}
	if !s.empty {
		lo, hi = min(lo, s.first.Load()), max(hi, s.last.Load())
	}
	s.setBounds(false, lo, hi)
	return nil
}

// pointDeleteMax is the widest range of indexes DeleteRange removes with
// point deletions; wider ranges get one range tombstone. Every range
// tombstone in the memtable makes later reads and iterators re-fragment all
// of them, so the small, frequent deletions (a conflicting suffix, a short
// compaction) stay point deletes, and only raft's large compactions pay for
// a tombstone. Point-deleting an index that is absent (a gap) is harmless.
const pointDeleteMax = 64

// DeleteRange deletes the entries with min <= index <= max in one atomic
// batch, fsynced unless NoSync. Raft calls it from the front for compaction
// after a snapshot and from the back to drop a conflicting suffix;
// FirstIndex and LastIndex afterwards name entries that exist, even when
// the log has gaps.
func (s *Store) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	if s.closed.Load() {
		return ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.empty {
		return nil
	}
	first, last := s.first.Load(), s.last.Load()
	if max < first || min > last {
		return nil
	}
	if err := s.deleteRange(min, max, first, last); err != nil {
		return fmt.Errorf("raftpebble: delete range %d-%d: %w", min, max, err)
	}
	return nil
}

// deleteRange does DeleteRange's work under mu; first and last are the
// current bounds and [lo, hi] overlaps them.
func (s *Store) deleteRange(lo, hi, first, last uint64) error {
	// Nothing lies outside [first, last], so clamp to it.
	lo, hi = max(lo, first), min(hi, last)
	b := s.db.NewBatch()
	defer b.Close()
	var k [logKeyLen]byte
	if hi-lo < uint64(s.pointDeleteMax) {
		for i := lo; ; i++ {
			if err := b.Delete(logKey(&k, i), nil); err != nil {
				return err
			}
			if i == hi {
				break
			}
		}
	} else {
		var e [logKeyLen]byte
		end := logUpper
		if hi < math.MaxUint64 {
			end = logKey(&e, hi+1)
		}
		if err := b.DeleteRange(logKey(&k, lo), end, nil); err != nil {
			return err
		}
	}

	// The new bounds are found before committing: entries outside
	// [lo, hi] are not affected, and no other writer runs under mu.
	empty := lo == first && hi == last
	newFirst, newLast := first, last
	var err error
	switch {
	case empty:
	case lo == first:
		newFirst, err = s.seekLog(hi+1, true)
	case hi == last:
		newLast, err = s.seekLog(lo, false)
	}
	if err != nil {
		return err
	}

	// The bounds move before the entries go: a reader that sees the old
	// bounds still finds every entry in them until the commit, and one
	// that sees the new ones never asks for a deleted entry. (Published
	// after the commit, a reader could read the old first, find an entry
	// inside it gone, and take the log for broken.)
	wasEmpty := s.empty
	s.setBounds(empty, newFirst, newLast)
	if err := b.Commit(s.write); err != nil {
		s.setBounds(wasEmpty, first, last)
		return err
	}
	return nil
}

// seekLog returns the first stored index >= from (forward) or the last one
// < from (backward). DeleteRange only asks for an entry its cached bounds
// say exists.
func (s *Store) seekLog(from uint64, forward bool) (idx uint64, err error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: logLower, UpperBound: logUpper})
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	var k [logKeyLen]byte
	var ok bool
	if forward {
		ok = it.SeekGE(logKey(&k, from))
	} else {
		ok = it.SeekLT(logKey(&k, from))
	}
	if !ok {
		if err := it.Error(); err != nil {
			return 0, err
		}
		return 0, errors.New("cached log bounds out of date")
	}
	return decodeLogKey(it.Key())
}

// Set stores val under key, fsynced unless NoSync.
func (s *Store) Set(key, val []byte) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.db.Set(stableKey(key), val, s.write); err != nil {
		return fmt.Errorf("raftpebble: set %q: %w", key, err)
	}
	return nil
}

// Get returns a copy of the value stored under key, or ErrKeyNotFound.
func (s *Store) Get(key []byte) ([]byte, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	v, closer, err := s.db.Get(stableKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrKeyNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("raftpebble: get %q: %w", key, err)
	}
	out := bytes.Clone(v)
	if out == nil {
		out = []byte{}
	}
	closer.Close()
	return out, nil
}

// SetUint64 stores val under key as 8 big-endian bytes; Get of the same
// key returns those bytes.
func (s *Store) SetUint64(key []byte, val uint64) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], val)
	return s.Set(key, b[:])
}

// GetUint64 returns the value stored by SetUint64, or 0 and ErrKeyNotFound.
func (s *Store) GetUint64(key []byte) (uint64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	v, closer, err := s.db.Get(stableKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, ErrKeyNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("raftpebble: get %q: %w", key, err)
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("raftpebble: get %q: value is %d bytes, not a uint64", key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func logKey(k *[logKeyLen]byte, index uint64) []byte {
	k[0] = prefixLog
	binary.BigEndian.PutUint64(k[1:], index)
	return k[:]
}

func decodeLogKey(k []byte) (uint64, error) {
	if len(k) != logKeyLen || k[0] != prefixLog {
		return 0, fmt.Errorf("malformed log key %x", k)
	}
	return binary.BigEndian.Uint64(k[1:]), nil
}

func stableKey(key []byte) []byte {
	k := make([]byte, 1+len(key))
	k[0] = prefixStable
	copy(k[1:], key)
	return k
}

var (
	_ raft.LogStore    = (*Store)(nil)
	_ raft.StableStore = (*Store)(nil)
)

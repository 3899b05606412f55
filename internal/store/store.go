// Package store is trawl's persistent key/value store (the cell's, the gate's and the ledger's): Pebble behind a
// small API of point reads and writes, atomic batches, prefix scans and
// expiring entries.
//
// Every service keeps its data under its own key prefix (keys.go lists them
// all, with their owners); the store itself knows nothing about what the values
// mean.
package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrNotFound is returned by Get when the key does not exist (or, for
// GetLive, when the entry has expired).
var ErrNotFound = errors.New("store: not found")

// Durability of a write. Sync waits for the write-ahead log to reach stable
// storage; NoSync returns once the write is in the memtable and the WAL buffer
// (it survives a process crash only if a later synced write, or the OS, flushes
// it). Callers choose on purpose: an accepted job is Sync, a cache entry NoSync.
type Durability bool

const (
	Sync   Durability = true
	NoSync Durability = false
)

func (d Durability) opts() *pebble.WriteOptions {
	if d {
		return pebble.Sync
	}
	return pebble.NoSync
}

// Options configure Open. The zero value is valid: the OS filesystem, a 64 MiB
// block cache and logging through slog.Default.
type Options struct {
	// FS overrides the filesystem, e.g. vfs.NewMem() in tests.
	FS vfs.FS
	// CacheBytes is the size of Pebble's block cache. Default 64 MiB.
	CacheBytes int64
	// MemTableBytes is the size of one memtable. Default 32 MiB.
	MemTableBytes uint64
	// Logger receives Pebble's own log lines (at debug level for info lines).
	Logger *slog.Logger
}

// Store is safe for concurrent use.
type Store struct {
	db *pebble.DB
}

// Open opens (creating if needed) the store in dir.
func Open(dir string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = 64 << 20
	}
	if o.MemTableBytes == 0 {
		o.MemTableBytes = 32 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	cache := pebble.NewCache(o.CacheBytes)
	defer cache.Unref()
	po := &pebble.Options{
		FS:     o.FS,
		Cache:  cache,
		Logger: pebbleLogger{o.Logger.With("component", "pebble")},
		// Pages are large values written once and often dropped again (cache
		// entries expire): a larger memtable lets more of them die before a
		// flush, and fewer flushes mean fewer L0 compactions
		// (docs/performance.md, "Where the job's CPU goes").
		MemTableSize: o.MemTableBytes,
	}
	// Bloom filters make lookups of absent keys cheap (is this receipt
	// charged? is this URL cached?): without them each one reads a block
	// of every level's tables.
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("open store %q: %w", dir, err)
	}
	return &Store{db: db}, nil
}

// Close flushes and closes the store. Outstanding iterators must be closed
// first.
func (s *Store) Close() error { return s.db.Close() }

// Get returns a copy of the value stored under key, or ErrNotFound.
func (s *Store) Get(key []byte) ([]byte, error) { return get(s.db, key) }

type getter interface {
	Get(key []byte) ([]byte, io.Closer, error)
}

func get(src getter, key []byte) ([]byte, error) {
	v, closer, err := src.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store get: %w", err)
	}
	out := bytes.Clone(v)
	closer.Close()
	return out, nil
}

// Set writes one key.
func (s *Store) Set(key, value []byte, d Durability) error {
	return s.db.Set(key, value, d.opts())
}

// Delete removes one key; deleting a missing key is not an error.
func (s *Store) Delete(key []byte, d Durability) error {
	return s.db.Delete(key, d.opts())
}

// Batch collects writes that are applied atomically by Commit. A Batch is not
// safe for concurrent use; it copies keys and values on Set, so callers may
// reuse their buffers.
type Batch struct {
	b      *pebble.Batch
	closed bool
}

// SyncWAL makes every write committed so far durable, NoSync ones
// included: one fsync of the write-ahead log for a run of NoSync writes
// that must be on disk before something else happens (an ack to a queue).
func (s *Store) SyncWAL() error { return s.db.LogData(nil, pebble.Sync) }

// NewBatch starts a batch of writes applied atomically by Commit.
func (s *Store) NewBatch() *Batch { return &Batch{b: s.db.NewBatch()} }

func (b *Batch) Set(key, value []byte) { _ = b.b.Set(key, value, nil) }
func (b *Batch) Delete(key []byte)     { _ = b.b.Delete(key, nil) }

// DeleteRange removes every key in [start, end), as one range deletion in
// the batch: writes added after it in the same batch survive it.
func (b *Batch) DeleteRange(start, end []byte) error {
	return b.b.DeleteRange(start, end, nil)
}

// Len is the number of operations in the batch.
func (b *Batch) Len() int { return int(b.b.Count()) }

// Commit applies the batch atomically and releases it.
func (b *Batch) Commit(d Durability) error {
	defer b.Discard()
	if err := b.b.Commit(d.opts()); err != nil {
		return fmt.Errorf("store commit: %w", err)
	}
	return nil
}

// Discard releases an uncommitted batch; after Commit it does nothing, so
// `defer b.Discard()` is safe on every path. (Pebble pools its batches:
// closing one twice would hand it to two users.)
func (b *Batch) Discard() {
	if !b.closed {
		b.closed = true
		b.b.Close()
	}
}

// HasPrefix reports whether any key begins with prefix.
func (s *Store) HasPrefix(prefix []byte) (bool, error) {
	found := false
	err := s.Scan(prefix, nil, func(_, _ []byte) (bool, error) {
		found = true
		return false, nil
	})
	return found, err
}

// Scan calls fn for every key with the given prefix, in key order, starting at
// the first key >= start (start may be nil, meaning the prefix itself). The
// key and value passed to fn are valid only during the call. fn returns false
// to stop. Scan reads a consistent snapshot of the store.
func (s *Store) Scan(prefix, start []byte, fn func(key, value []byte) (bool, error)) error {
	return scan(s.db, prefix, start, fn)
}

type iterSource interface {
	NewIter(*pebble.IterOptions) (*pebble.Iterator, error)
}

func scan(src iterSource, prefix, start []byte, fn func(key, value []byte) (bool, error)) error {
	lower := prefix
	if start != nil && bytes.Compare(start, prefix) > 0 {
		lower = start
	}
	it, err := src.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: PrefixEnd(prefix)})
	if err != nil {
		return fmt.Errorf("store scan: %w", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return fmt.Errorf("store scan: %w", err)
		}
		more, err := fn(it.Key(), v)
		if err != nil || !more {
			it.Close()
			return err
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return fmt.Errorf("store scan: %w", err)
	}
	return it.Close()
}

// Snapshot is a consistent, read-only view of the store at one moment;
// writes after it are invisible to it. It pins old data until Close, so keep
// it short-lived. Safe for concurrent use.
type Snapshot struct {
	snap *pebble.Snapshot
}

// NewSnapshot takes a snapshot (cheap: no data is copied).
func (s *Store) NewSnapshot() *Snapshot { return &Snapshot{snap: s.db.NewSnapshot()} }

// Scan is Store.Scan on the snapshot.
func (s *Snapshot) Scan(prefix, start []byte, fn func(key, value []byte) (bool, error)) error {
	return scan(s.snap, prefix, start, fn)
}

// Get reads one key as of the snapshot (a copy, or ErrNotFound).
func (s *Snapshot) Get(key []byte) ([]byte, error) { return get(s.snap, key) }

// Close releases the snapshot.
func (s *Snapshot) Close() error { return s.snap.Close() }

// PrefixEnd returns the smallest key greater than every key with the prefix,
// or nil when there is none (a prefix of 0xff bytes).
func PrefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

// DeletePrefix removes every key with the prefix in one atomic range
// deletion.
func (s *Store) DeletePrefix(prefix []byte, d Durability) error {
	end := PrefixEnd(prefix)
	if end == nil {
		return fmt.Errorf("store: cannot delete prefix %q", prefix)
	}
	if err := s.db.DeleteRange(prefix, end, d.opts()); err != nil {
		return fmt.Errorf("store delete prefix: %w", err)
	}
	return nil
}

// Expiring entries: the value is stored behind an 8-byte big-endian expiry
// time (unix nanoseconds). Reads compare against the caller's clock, so tests
// drive expiry with a fake one.

// SetExpiring writes value under key, valid until expires.
func (s *Store) SetExpiring(key, value []byte, expires time.Time, d Durability) error {
	return s.db.Set(key, expiringValue(value, expires), d.opts())
}

// SetExpiring adds an expiring entry to the batch.
func (b *Batch) SetExpiring(key, value []byte, expires time.Time) {
	b.Set(key, expiringValue(value, expires))
}

func expiringValue(value []byte, expires time.Time) []byte {
	buf := make([]byte, 8+len(value))
	binary.BigEndian.PutUint64(buf, uint64(expires.UnixNano()))
	copy(buf[8:], value)
	return buf
}

// GetLive appends to dst the value of an expiring entry that is still
// valid at now and returns it with the entry's expiry, or ErrNotFound. A
// caller with a reusable dst reads without allocating.
func (s *Store) GetLive(dst, key []byte, now time.Time) ([]byte, time.Time, error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return dst, time.Time{}, ErrNotFound
	}
	if err != nil {
		return dst, time.Time{}, fmt.Errorf("store get: %w", err)
	}
	defer closer.Close()
	if len(v) < 8 {
		return dst, time.Time{}, fmt.Errorf("store: expiring entry %q is corrupt", key)
	}
	exp := expiry(v)
	if !now.Before(exp) {
		return dst, time.Time{}, ErrNotFound
	}
	return append(dst, v[8:]...), exp, nil
}

// expiry reads the expiry time in front of an expiring value.
func expiry(v []byte) time.Time { return time.Unix(0, int64(binary.BigEndian.Uint64(v))) }

// SweepExpired deletes expiring entries under prefix whose time has passed,
// in batches, and returns how many it removed.
func (s *Store) SweepExpired(prefix []byte, now time.Time) (int, error) {
	removed := 0
	b := s.NewBatch()
	err := s.Scan(prefix, nil, func(k, v []byte) (bool, error) {
		if len(v) >= 8 && !now.Before(expiry(v)) {
			b.Delete(k)
			removed++
			if b.Len() >= 1000 {
				if err := b.Commit(NoSync); err != nil {
					return false, err
				}
				b = s.NewBatch()
			}
		}
		return true, nil
	})
	if err != nil {
		b.Discard()
		return removed, err
	}
	return removed, b.Commit(NoSync)
}

// Metrics is a short summary for health endpoints.
type Metrics struct {
	DiskBytes uint64
}

// Metrics reports the store's size on disk.
func (s *Store) Metrics() Metrics {
	m := s.db.Metrics()
	return Metrics{DiskBytes: m.DiskSpaceUsage()}
}

// pebbleLogger sends Pebble's log lines to slog. Fatalf keeps Pebble's
// contract (it must not return).
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Fatalf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...))
	panic(fmt.Sprintf(format, args...))
}

var _ io.Closer = (*Store)(nil)

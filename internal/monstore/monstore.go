// Package monstore is the region's monitor store: the one place a region's
// monitors live (records, versions, timelines, charges and pending webhook
// deliveries), so that no cell's disk holds anything a monitor needs
// (docs/monitors.md, "Where a monitor lives").
//
// The store is the region gate's Pebble store. Cells reach it through
// Client, with requests signed with the region's keys (internal/regionauth)
// like every request between a region's members; Server answers them at
// the gate. Local is the same store in one process: the gate's side of the
// protocol, and a cell's own store when it runs without a gate (unit
// tests).
//
// Writes are conditional batches (Batch): every write names the values it
// was computed from (Cond), and is refused with ErrConflict when one of
// them changed meanwhile, so two cells — or a check and a PATCH — never
// overwrite each other's work. Checks are handed out by Claim: a due
// monitor is claimed by the live cell that rendezvous hashing over the
// region's live cells picks, and stays claimed until that cell writes the
// check's result, dies (it leaves the gate's membership) or the lease runs
// out. A claim is a write of the record, so the result of a check is
// accepted only from the cell that holds the claim: a check is recorded
// once per interval.
package monstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/trawlhq/trawl/internal/store"
)

// Key layout under store.PrefixMonitor (records, indexes, versions,
// events, charges) and store.PrefixMonitorHook (deliveries).
const (
	// RecordPrefix is followed by the monitor's id: its record (JSON).
	RecordPrefix = store.PrefixMonitor + "r/"
	// AccountPrefix + account + "/" + id: an account's monitors.
	AccountPrefix = store.PrefixMonitor + "a/"
	// HostPrefix + host + "/" + id: the region's monitors of a host.
	HostPrefix = store.PrefixMonitor + "h/"
	// SamePrefix + account + "/" + hash(url, watch): the monitor with that
	// url and watch (create answers it rather than a second one).
	SamePrefix = store.PrefixMonitor + "u/"
	// VersionPrefix + id + "/" + version: a version's Markdown.
	VersionPrefix = store.PrefixMonitor + "v/"
	// EventPrefix + id + "/" + %016d: a timeline event (JSON).
	EventPrefix = store.PrefixMonitor + "e/"
	// ChargePrefix + %020d time + "/" + id: a charge for the gate.
	ChargePrefix = store.PrefixMonitor + "c/"
	// TrackPrefix is Firecrawl's change tracking: the last snapshot of a
	// page per account and tag (cell/v2_change.go), kept here so every
	// cell of the region compares with the same one.
	TrackPrefix = store.PrefixMonitor + "t/"
	// HookPrefix + delivery id: a pending webhook delivery
	// (internal/webhook's Delivery as JSON).
	HookPrefix = store.PrefixMonitorHook
)

// RecordKey is the key of monitor id's record.
func RecordKey(id string) []byte { return []byte(RecordPrefix + id) }

// EventKey is the key of event n of monitor id.
func EventKey(id string, n int64) []byte { return fmt.Appendf([]byte(EventPrefix+id+"/"), "%016d", n) }

// Errors.
var (
	// ErrConflict: a condition of the batch no longer holds; nothing was
	// written. The caller reads again and retries.
	ErrConflict = errors.New("monstore: the record changed meanwhile")
	// ErrUnavailable: the account-wide limits could not be counted (the
	// ledger has no leader within the timeout); nothing was written.
	ErrUnavailable = errors.New("monstore: the monitor limits cannot be counted right now")
	// ErrNotFound is store.ErrNotFound.
	ErrNotFound = store.ErrNotFound
)

// LimitError is a slot the account-wide limits refused; Message is the
// spec's text (hosted-api §7).
type LimitError struct{ Message string }

func (e *LimitError) Error() string { return e.Message }

// Op is one write of a batch.
type Op struct {
	// Op is "set", "del" or "delrange" (Key to End).
	Op    string `json:"op"`
	Key   []byte `json:"key"`
	Value []byte `json:"value,omitempty"`
	End   []byte `json:"end,omitempty"`
}

// Cond is a condition of a batch: Key holds a value whose Hash is this
// one, or, with Hash "", is absent.
type Cond struct {
	Key  []byte `json:"key"`
	Hash string `json:"hash,omitempty"`
}

// Slot is a change of the account-wide monitor limits that must be
// accepted before a batch is written (a create, a change of `every` or
// paused, a delete): the ledger's monitor_slot command at the gate.
type Slot struct {
	Op      string `json:"op"` // add, set, remove (ledger.MonitorAdd, …)
	Monitor string `json:"monitor"`
	Account string `json:"account,omitempty"`
	Host    string `json:"host,omitempty"`
	Fast    bool   `json:"fast,omitempty"`
	// Limits are the operator's (--monitor-limits), as the cell has them.
	Limits Limits `json:"limits"`
}

// Limits are the account-wide monitor limits of hosted-api §8.
type Limits struct {
	Account int `json:"account"`
	Fast    int `json:"fast"`
	Host    int `json:"host"`
}

// Batch is an atomic, conditional write. Not safe for concurrent use.
type Batch struct {
	Conds []Cond `json:"conds,omitempty"`
	Ops   []Op   `json:"ops"`
	// Slot, when set, is taken at the gate before the batch is written,
	// and given back if the batch is refused.
	Slot *Slot `json:"slot,omitempty"`
	// Sync: written to disk before Apply returns (otherwise it may be
	// lost in a crash of the store's process, never half-written).
	Sync bool `json:"sync,omitempty"`
}

// Set writes key.
func (b *Batch) Set(key, value []byte) {
	b.Ops = append(b.Ops, Op{Op: "set", Key: slices.Clone(key), Value: slices.Clone(value)})
}

// Delete removes key.
func (b *Batch) Delete(key []byte) { b.Ops = append(b.Ops, Op{Op: "del", Key: slices.Clone(key)}) }

// DeleteRange removes [start, end).
func (b *Batch) DeleteRange(start, end []byte) {
	b.Ops = append(b.Ops, Op{Op: "delrange", Key: slices.Clone(start), End: slices.Clone(end)})
}

// DeletePrefix removes every key under prefix.
func (b *Batch) DeletePrefix(prefix []byte) { b.DeleteRange(prefix, store.PrefixEnd(prefix)) }

// Require makes the batch conditional on key holding value (nil: absent).
func (b *Batch) Require(key, value []byte) {
	c := Cond{Key: slices.Clone(key)}
	if value != nil {
		c.Hash = Hash(value)
	}
	b.Conds = append(b.Conds, c)
}

// Len is the number of writes.
func (b *Batch) Len() int { return len(b.Ops) }

// Hash is the hash a Cond compares.
func Hash(v []byte) string {
	s := sha256.Sum256(v)
	return hex.EncodeToString(s[:16])
}

// Claim is a cell's hold on a monitor's check.
type Claim struct {
	Cell string `json:"cell"`
	// Instance is the claiming process (a cell restarted under the same
	// name is another instance: its predecessor's claims are void).
	Instance string    `json:"instance"`
	Until    time.Time `json:"until"`
}

// ClaimRequest asks for due checks.
type ClaimRequest struct {
	Cell     string        `json:"cell"`
	Instance string        `json:"instance"`
	Now      time.Time     `json:"now"`
	Max      int           `json:"max"`
	Lease    time.Duration `json:"lease"`
	// All claims every due check, not only the caller's share: the
	// region's scheduler (the cell holding the coordinator lease) claims
	// them all and queues each as a work item any cell runs
	// (cell/monitor, "Checks as work items").
	All bool `json:"all,omitempty"`
}

// Claimed is a monitor whose check the caller now holds: its record as
// written with the claim (a write of the result requires it).
type Claimed struct {
	ID     string          `json:"id"`
	Record json.RawMessage `json:"record"`
}

// Store is the region's monitor store, local or at the gate.
type Store interface {
	// Get returns key's value or ErrNotFound.
	Get(ctx context.Context, key []byte) ([]byte, error)
	// Scan calls fn for each key under prefix from start, in order,
	// until fn returns false.
	Scan(ctx context.Context, prefix, start []byte, fn func(k, v []byte) (bool, error)) error
	// Apply writes b atomically: ErrConflict when a condition fails, a
	// *LimitError when its slot is refused.
	Apply(ctx context.Context, b *Batch) error
	// Claim hands out due checks to a cell.
	Claim(ctx context.Context, req ClaimRequest) ([]Claimed, error)
}

// claimView is what Claim reads of a record.
type claimView struct {
	ID     string    `json:"id"`
	Paused bool      `json:"paused"`
	NextAt time.Time `json:"next_at"`
	Claim  *Claim    `json:"claim"`
}

// Owner is the cell of live that rendezvous hashing picks for id ("" when
// live is empty).
func Owner(id string, live []string) string {
	var best string
	var top uint64
	for _, c := range live {
		h := fnv.New64a()
		h.Write([]byte(id))
		h.Write([]byte{0})
		h.Write([]byte(c))
		if v := h.Sum64(); best == "" || v > top {
			best, top = c, v
		}
	}
	return best
}

// Valid reports whether claim c still holds at now, given the live cells
// and the asking cell's instance.
func (c *Claim) Valid(now time.Time, live []string, req *ClaimRequest) bool {
	if c == nil || !c.Until.After(now) || !slices.Contains(live, c.Cell) {
		return false
	}
	return !(c.Cell == req.Cell && c.Instance != req.Instance)
}

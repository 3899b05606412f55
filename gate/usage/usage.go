// Package usage keeps a region's usage history: one Line per receipt line
// (docs/spec/hosted-api.md §2.8) the gate's meter charged, stored in the region's own store
// under the prefix U/, and the route GET /v1/billing/usage that pages
// through an account's lines.
//
// History stays in the region where the credit was spent; the gate forwards
// ?region=… to the gate of that region.
//
// Durability: lines are written NoSync. The money is made durable elsewhere
// (the holds journal is synced before a charge is acknowledged), so a crash
// may lose the last unflushed lines of history but never a charge. A
// sequence number is never handed out twice and never goes back, crash or
// not (see nextSeq): a lost line leaves a gap.
package usage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/ledger"
)

// Retention is how long lines are kept by default: callers run
// Prune(now.Add(-Retention)) once a day.
const Retention = 400 * 24 * time.Hour

// Limits of List and of the route.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Keys. U/a/<account>/<seq, 8 bytes big-endian> holds a line; U/hw holds the
// sequence ceiling (every seq handed out is below it).
var (
	prefixLines = []byte(store.PrefixUsage + "a/")
	keyHW       = []byte(store.PrefixUsage + "hw")
)

// seqBlock is how many sequence numbers one write of U/hw reserves. A
// restart skips what was reserved and not used: a gap, never a reuse.
const seqBlock = 1 << 14

// Line is one receipt line of the usage history (docs/spec/hosted-api.md §2.8). The JSON form is
// the line of GET /v1/billing/usage.
type Line struct {
	// Seq is assigned by Record: strictly increasing across the store, so
	// an account's lines are in the order they were recorded. Pages are
	// asked for by the last seq seen.
	Seq uint64 `json:"seq"`
	// Receipt is the receipt id ("r_eu_…"); a call with several inner lines
	// has one receipt per line.
	Receipt string `json:"receipt"`
	// At is when the line was charged, UTC, to the millisecond (Record
	// sets it to now when zero).
	At time.Time `json:"at"`
	// Region is where the credit was spent.
	Region string `json:"region"`
	// Account owns the line; it is the key, never sent back.
	Account string `json:"-"`
	// Call is the billing kind (billing.KindScrape, KindBatch, …).
	Call string `json:"call"`
	// URL is the page, for calls that fetched one.
	URL string `json:"url,omitempty"`
	// Step names the model step of an extract or answer line.
	Step string `json:"step,omitempty"`
	// Engine did the work: cache, http, browser, …
	Engine string `json:"engine,omitempty"`
	// Level is the effort level: light, browser, browser_proxy.
	Level string `json:"level,omitempty"`
	// Cache is hit, miss or archive.
	Cache string `json:"cache,omitempty"`
	// Count is how many URLs or units the line covers.
	Count int `json:"count"`
	// LLMTokens is present when a language model ran.
	LLMTokens Tokens `json:"llm_tokens,omitzero"`
	// Units is the credit charged, "1.000".
	Units billing.Amount `json:"units"`
	// Status is the HTTP status of the call.
	Status int `json:"status"`
	// Boxes name the components that did the work (docs/spec/hosted-api.md §2.8 boxes).
	Boxes []string `json:"boxes,omitempty"`
	// RemainingBefore is what the account's monthly spend cap left before
	// this line was charged; nil without a cap.
	RemainingBefore *billing.Amount `json:"remaining_before,omitempty"`
}

// Object is the usage object of docs/spec/hosted-api.md §2.8 that a billed answer (and each
// line of a batch) carries: the gate builds it from the line it recorded
// for that receipt, so the two always agree.
type Object struct {
	// Receipt is the line's receipt id; "" when nothing was billable (a
	// job with no URL it could fetch) and no line was recorded.
	Receipt string `json:"receipt,omitempty"`
	// Units is the credit charged.
	Units billing.Amount `json:"units"`
	// LLMTokens is present when a language model ran.
	LLMTokens Tokens `json:"llm_tokens,omitzero"`
	// Boxes name the components used.
	Boxes []string `json:"boxes"`
	// RemainingBefore is present on accounts with a monthly cap.
	RemainingBefore *billing.Amount `json:"remaining_before,omitempty"`
	Cache           string          `json:"cache,omitempty"`
	Engine          string          `json:"engine,omitempty"`
	Level           string          `json:"level,omitempty"`
	// Count is how many URLs or units the line covers.
	Count int `json:"count"`
	// TotalTokens is the model tokens, in and out, of a call whose kind
	// prices them (extract, answer): 0 when no model ran.
	TotalTokens *int `json:"total_tokens,omitempty"`
	// Lines are the inner calls of a call that makes several (a page
	// fetch, model calls), in order, from the cell's report; the call's
	// units cover them all (one receipt).
	Lines []Inner `json:"lines,omitempty"`
}

// Inner is one inner call of a usage object (docs/spec/hosted-api.md
// §2.8 lines): a page fetch (call scrape, with url) or a model call
// (call extract, with step).
type Inner struct {
	Call      string `json:"call"`
	URL       string `json:"url,omitempty"`
	Step      string `json:"step,omitempty"`
	Engine    string `json:"engine,omitempty"`
	Level     string `json:"level,omitempty"`
	Cache     string `json:"cache,omitempty"`
	LLMTokens Tokens `json:"llm_tokens,omitzero"`
}

// Object returns the usage object of l.
func (l *Line) Object() Object {
	boxes := l.Boxes
	if boxes == nil {
		boxes = []string{}
	}
	o := Object{Receipt: l.Receipt, Units: l.Units, LLMTokens: l.LLMTokens, Boxes: boxes,
		RemainingBefore: l.RemainingBefore, Cache: l.Cache, Engine: l.Engine, Level: l.Level, Count: l.Count}
	if l.Call == billing.KindExtract || l.Call == billing.KindAnswer {
		n := l.LLMTokens.In + l.LLMTokens.Out
		o.TotalTokens = &n
	}
	return o
}

// Tokens counts a line's model tokens.
type Tokens struct {
	In  int `json:"in"`
	Out int `json:"out"`
}

// Log is the usage history in a store. It is safe for concurrent use.
type Log struct {
	st *store.Store
	// last is the last seq handed out; ceil is the persisted ceiling.
	last  atomic.Uint64
	ceil  atomic.Uint64
	mu    sync.Mutex // serializes reservations of seq blocks
	block uint64
	bufs  sync.Pool
	now   func() time.Time
}

// Open returns the usage history kept in st, recovering the sequence
// counter from the ceiling stored under U/hw. It touches no key outside U/.
func Open(st *store.Store) (*Log, error) {
	g := &Log{st: st, block: seqBlock, now: time.Now}
	g.bufs.New = func() any { b := make([]byte, 0, 256); return &b }
	v, err := st.Get(keyHW)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("open usage log: %w", err)
	case len(v) != 8:
		return nil, fmt.Errorf("open usage log: %s is %d bytes, want 8", keyHW, len(v))
	default:
		c := binary.BigEndian.Uint64(v)
		if c == 0 {
			break
		}
		g.ceil.Store(c)
		// Everything below the ceiling may have been handed out before
		// the restart; the next seq is the ceiling itself.
		g.last.Store(c - 1)
	}
	return g, nil
}

// nextSeq hands out a seq; the first is 1, so after=0 lists everything.
//
// Seqs come from an atomic counter below a ceiling kept in U/hw and
// written Sync, so after a crash Open starts above every seq handed out
// before it: lines lost in the crash leave a gap, and a client following
// with next_after never sees seqs go back. The ceiling is raised by a block
// at a time, by the Record that reaches the middle of the current block
// (one fsync per block/2 lines, the others carry on below the ceiling), so
// no Record waits on the lock unless half a block is used up during one
// fsync.
func (g *Log) nextSeq() (uint64, error) {
	s := g.last.Add(1)
	c := g.ceil.Load()
	if s < c {
		if s == c-g.block/2 {
			if err := g.reserve(c); err != nil {
				return 0, err
			}
		}
		return s, nil
	}
	if err := g.reserve(s); err != nil {
		return 0, err
	}
	return s, nil
}

// reserve raises the ceiling to need+block unless it is above need already.
func (g *Log) reserve(need uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ceil.Load() > need {
		return nil
	}
	if need > math.MaxUint64-g.block {
		return errors.New("usage: sequence numbers exhausted")
	}
	c := need + g.block
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], c)
	if err := g.st.Set(keyHW, v[:], store.Sync); err != nil {
		return fmt.Errorf("reserve usage seqs: %w", err)
	}
	g.ceil.Store(c)
	return nil
}

// ErrBadAccount is returned by Record for an empty account or one with a
// slash (it would break the key's prefix).
var ErrBadAccount = errors.New("usage: account must be non-empty and have no slash")

// Record stores l, setting its Seq and, when zero, its At; At is kept in
// UTC to the millisecond. The write is NoSync (see the package comment);
// once every 8,192 lines Record also writes the seq ceiling with Sync (one
// fsync, see nextSeq). Record copies what it needs: l may be reused after
// it returns.
func (g *Log) Record(l *Line) error {
	if l.Account == "" || strings.IndexByte(l.Account, '/') >= 0 {
		return ErrBadAccount
	}
	seq, err := g.nextSeq()
	if err != nil {
		return fmt.Errorf("record usage line %s: %w", l.Receipt, err)
	}
	if l.At.IsZero() {
		l.At = g.now()
	}
	l.At = l.At.UTC().Truncate(time.Millisecond)
	l.Seq = seq

	bp := g.bufs.Get().(*[]byte)
	buf := appendKey((*bp)[:0], l.Account, seq)
	n := len(buf)
	buf = appendValue(buf, l)
	err = g.st.Set(buf[:n], buf[n:], store.NoSync) // the store copies
	if cap(buf) <= 64<<10 {
		*bp = buf
		g.bufs.Put(bp)
	}
	if err != nil {
		return fmt.Errorf("record usage line %s: %w", l.Receipt, err)
	}
	return nil
}

func accountPrefix(dst []byte, account string) []byte {
	dst = append(dst, prefixLines...)
	dst = append(dst, account...)
	return append(dst, '/')
}

func appendKey(dst []byte, account string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(accountPrefix(dst, account), seq)
}

// List returns the account's lines with a seq above after, oldest first, at
// most limit of them (limit ≤ 0 is DefaultLimit). next is the seq of the
// last line returned, the after of the following page; after itself when
// there is none.
func (g *Log) List(account string, after uint64, limit int) ([]Line, uint64, error) {
	if account == "" || strings.IndexByte(account, '/') >= 0 {
		return nil, after, ErrBadAccount
	}
	if limit <= 0 {
		limit = DefaultLimit
	}
	if after == math.MaxUint64 {
		return nil, after, nil
	}
	prefix := accountPrefix(nil, account)
	start := binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), after+1)
	var lines []Line
	next := after
	err := g.st.Scan(prefix, start, func(k, v []byte) (bool, error) {
		if len(k) != len(prefix)+8 {
			return true, nil // not a line of ours; cannot happen with checked accounts
		}
		l := Line{Account: account, Seq: binary.BigEndian.Uint64(k[len(prefix):])}
		if err := decodeValue(v, &l); err != nil {
			return false, fmt.Errorf("line %d: %w", l.Seq, err)
		}
		lines = append(lines, l)
		next = l.Seq
		return len(lines) < limit, nil
	})
	if err != nil {
		return nil, after, fmt.Errorf("list usage of %s: %w", account, err)
	}
	return lines, next, nil
}

// Prune deletes every line charged before the horizon (usually
// now.Add(-Retention)) and returns how many it deleted. It reads only the
// time of each line, and deletes NoSync in batches of 1,000.
func (g *Log) Prune(before time.Time) (int, error) {
	cut := before.UnixMilli()
	removed := 0
	b := g.st.NewBatch()
	err := g.st.Scan(prefixLines, nil, func(k, v []byte) (bool, error) {
		at, err := decodeAt(v)
		if err != nil {
			return false, fmt.Errorf("key %q: %w", k, err)
		}
		if at >= cut {
			return true, nil
		}
		b.Delete(k)
		removed++
		if b.Len() >= 1000 {
			if err := b.Commit(store.NoSync); err != nil {
				return false, err
			}
			b = g.st.NewBatch()
		}
		return true, nil
	})
	if err != nil {
		b.Discard()
		return removed, fmt.Errorf("prune usage: %w", err)
	}
	if err := b.Commit(store.NoSync); err != nil {
		return removed, fmt.Errorf("prune usage: %w", err)
	}
	return removed, nil
}

// Values: a version byte, the time (unix ms, varint), then the strings
// receipt, region, call, url, step, engine, level, cache (each a uvarint
// length and the bytes), then count, tokens in, tokens out (uvarints),
// units (varint, millicredits), status (uvarint). The account and seq are
// in the key. Version 2 adds the boxes (a uvarint count, then each string)
// and remaining_before (a byte 0 or 1, then the varint millicredits).
const (
	valueV1 = 1
	valueV2 = 2
)

func appendValue(dst []byte, l *Line) []byte {
	dst = append(dst, valueV2)
	dst = binary.AppendVarint(dst, l.At.UnixMilli())
	for _, s := range [...]string{l.Receipt, l.Region, l.Call, l.URL, l.Step, l.Engine, l.Level, l.Cache} {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	dst = binary.AppendUvarint(dst, uint64(max(l.Count, 0)))
	dst = binary.AppendUvarint(dst, uint64(max(l.LLMTokens.In, 0)))
	dst = binary.AppendUvarint(dst, uint64(max(l.LLMTokens.Out, 0)))
	dst = binary.AppendVarint(dst, int64(l.Units))
	dst = binary.AppendUvarint(dst, uint64(max(l.Status, 0)))
	dst = binary.AppendUvarint(dst, uint64(len(l.Boxes)))
	for _, b := range l.Boxes {
		dst = binary.AppendUvarint(dst, uint64(len(b)))
		dst = append(dst, b...)
	}
	if l.RemainingBefore == nil {
		return append(dst, 0)
	}
	return binary.AppendVarint(append(dst, 1), int64(*l.RemainingBefore))
}

var errCorrupt = errors.New("corrupt usage line")

func decodeAt(v []byte) (int64, error) {
	if len(v) < 2 || (v[0] != valueV1 && v[0] != valueV2) {
		return 0, errCorrupt
	}
	at, n := binary.Varint(v[1:])
	if n <= 0 {
		return 0, errCorrupt
	}
	return at, nil
}

type reader struct {
	b   []byte
	bad bool
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) str() string {
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) int() int {
	v := r.uvarint()
	if v > math.MaxInt32 {
		r.bad = true
	}
	return int(v)
}

func decodeValue(v []byte, l *Line) error {
	if len(v) == 0 || (v[0] != valueV1 && v[0] != valueV2) {
		return errCorrupt
	}
	r := reader{b: v[1:]}
	l.At = time.UnixMilli(r.varint()).UTC()
	l.Receipt, l.Region, l.Call, l.URL = r.str(), r.str(), r.str(), r.str()
	l.Step, l.Engine, l.Level, l.Cache = r.str(), r.str(), r.str(), r.str()
	l.Count = r.int()
	l.LLMTokens.In, l.LLMTokens.Out = r.int(), r.int()
	l.Units = billing.Amount(ledger.MC(r.varint()))
	l.Status = r.int()
	if v[0] == valueV2 {
		n := r.int()
		if n > len(r.b) {
			return errCorrupt
		}
		for range n {
			l.Boxes = append(l.Boxes, r.str())
		}
		if len(r.b) == 0 {
			return errCorrupt
		}
		has := r.b[0]
		r.b = r.b[1:]
		if has == 1 {
			a := billing.Amount(ledger.MC(r.varint()))
			l.RemainingBefore = &a
		}
	}
	if r.bad || len(r.b) != 0 {
		return errCorrupt
	}
	return nil
}

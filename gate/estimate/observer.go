package estimate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/store"
)

// MaxDomains bounds how many domains an Observer remembers. When a shard
// is full, a new domain evicts the one with the fewest observations of a
// few sampled at random (a one-off site goes before a busy one).
const MaxDomains = 100_000

// Counts are halved when a domain reaches decayAt observations (or a call
// kind decayTokensAt), so what a site needed lately outweighs what it
// needed long ago, and a level not seen for a while drops out of the band.
const (
	decayAt       = 1000
	decayTokensAt = 1 << 20
)

const shardCount = 64

// Store keys: E/d/<domain> holds a domain's level counts, E/t/<kind> a call
// kind's token histograms.
var (
	prefixDomains = []byte(store.PrefixEstimate + "d/")
	prefixTokens  = []byte(store.PrefixEstimate + "t/")
)

// LevelCounts are how many live fetches of a domain were seen at each
// effort level.
type LevelCounts struct {
	Light        uint64 `json:"light"`
	Browser      uint64 `json:"browser"`
	BrowserProxy uint64 `json:"browser_proxy"`
}

// Total is the number of fetches counted.
func (c LevelCounts) Total() uint64 { return c.Light + c.Browser + c.BrowserProxy }

// levels are the counts in the order of billing.Levels.
func (c LevelCounts) levels() [3]uint64 { return [3]uint64{c.Light, c.Browser, c.BrowserProxy} }

// Observer remembers what cells were seen doing: per domain, how many
// fetches needed each effort level, and per call kind, how many model
// tokens a call used. Estimates are bands drawn from it. It is safe for
// concurrent use; Observe is the hot path (a map update under one of 64
// shard locks, no I/O).
type Observer struct {
	st      *store.Store
	seed    maphash.Seed
	shards  [shardCount]shard
	perCap  int // domains per shard
	tokens  map[string]*tokenStat
	rewrite atomic.Bool // flush rewrites everything (a failed flush, evictions overflowed)

	flushMu sync.Mutex // one flush at a time
	closed  bool       // under flushMu
	stop    context.CancelFunc
	done    chan struct{}
	once    sync.Once
	log     *slog.Logger
}

type shard struct {
	mu      sync.Mutex
	m       map[string]*domainStat
	evicted []string // evicted since the last flush: their keys go
	_       [32]byte // keep shards' locks on separate cache lines
}

type domainStat struct {
	n     [3]uint64
	dirty bool
}

type tokenStat struct {
	mu      sync.Mutex
	in, out hist
	dirty   bool
}

// Open returns an Observer with what st holds under E/ (it touches no
// other prefix) and, when every is positive, writes what changed back every
// interval (NoSync; a failed write is logged to slog.Default and retried
// at the next one). Close stops that and writes the rest.
func Open(st *store.Store, every time.Duration) (*Observer, error) {
	o := newObserver(st, MaxDomains)
	if err := o.load(); err != nil {
		return nil, err
	}
	o.start(every)
	return o, nil
}

func newObserver(st *store.Store, maxDomains int) *Observer {
	o := &Observer{
		st:     st,
		seed:   maphash.MakeSeed(),
		perCap: max(maxDomains/shardCount, 1),
		tokens: make(map[string]*tokenStat, len(billing.Kinds)),
		log:    slog.Default(),
	}
	for i := range o.shards {
		o.shards[i].m = make(map[string]*domainStat)
	}
	for _, k := range billing.Kinds {
		o.tokens[k] = &tokenStat{}
	}
	return o
}

func (o *Observer) start(every time.Duration) {
	if every <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	o.stop, o.done = cancel, make(chan struct{})
	go func() {
		defer close(o.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := o.flush(store.NoSync); err != nil {
					o.log.Warn("estimate: write observations (retried next time)", "err", err)
				}
			}
		}
	}()
}

// levelIndex maps an effort level to its place in billing.Levels; -1 for
// one the Observer does not count.
func levelIndex(level string) int {
	switch level {
	case billing.LevelLight, billing.LevelHTTP, "":
		return 0
	case billing.LevelBrowser:
		return 1
	case billing.LevelBrowserProxy:
		return 2
	}
	return -1
}

// Observe records one billed line: the level its page needed (counted
// under Domain(rawURL); "" and "http" are light, an unknown level is not
// counted) and its model tokens (counted per kind when either is above
// 0). Call it for live work only: a cache or archive hit says nothing
// about what the site needs, nor does a map (it reads the site over plain
// HTTP whatever its pages need, so its level is not counted). It copies
// rawURL's host only when the domain is new.
func (o *Observer) Observe(rawURL, kind, level string, inTokens, outTokens int) {
	if li := levelIndex(level); li >= 0 && rawURL != "" && kind != billing.KindMap {
		if d := Domain(rawURL); d != "" {
			o.observeLevel(d, li)
		}
	}
	if inTokens > 0 || outTokens > 0 {
		if ts := o.tokens[kind]; ts != nil {
			ts.mu.Lock()
			ts.in.add(max(inTokens, 0))
			ts.out.add(max(outTokens, 0))
			if ts.in.n >= decayTokensAt {
				ts.in.halve()
				ts.out.halve()
			}
			ts.dirty = true
			ts.mu.Unlock()
		}
	}
}

func (o *Observer) shard(domain string) *shard {
	return &o.shards[maphash.String(o.seed, domain)%shardCount]
}

func (o *Observer) observeLevel(domain string, li int) {
	s := o.shard(domain)
	s.mu.Lock()
	d := s.m[domain]
	if d == nil {
		d = &domainStat{}
		s.insert(strings.Clone(domain), d, o.perCap, o)
	}
	d.n[li]++
	if d.n[0]+d.n[1]+d.n[2] >= decayAt {
		for i := range d.n {
			d.n[i] /= 2
		}
	}
	d.dirty = true
	s.mu.Unlock()
}

// evictSample is how many domains an eviction compares.
const evictSample = 5

// insert adds d under domain, evicting first when the shard is full.
// Called with s.mu held.
func (s *shard) insert(domain string, d *domainStat, perCap int, o *Observer) {
	if len(s.m) >= perCap {
		var victim string
		least := ^uint64(0)
		i := 0
		for k, v := range s.m { // map order is random: a random sample
			if t := v.n[0] + v.n[1] + v.n[2]; t < least {
				victim, least = k, t
			}
			if i++; i == evictSample {
				break
			}
		}
		delete(s.m, victim)
		if len(s.evicted) < perCap {
			s.evicted = append(s.evicted, victim)
		} else {
			// A flood of new domains: forget the list and rewrite all.
			s.evicted = nil
			o.rewrite.Store(true)
		}
	}
	s.m[domain] = d
}

// Levels returns what was seen of domain (a Domain result). It is safe on
// a nil Observer (nothing seen).
func (o *Observer) Levels(domain string) LevelCounts {
	if o == nil || domain == "" {
		return LevelCounts{}
	}
	s := o.shard(domain)
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.m[domain]
	if d == nil {
		return LevelCounts{}
	}
	return LevelCounts{Light: d.n[0], Browser: d.n[1], BrowserProxy: d.n[2]}
}

// TokenBand is the spread of model tokens seen per call of a kind: the
// 5th to the 95th percentile, widened to the edges of the histogram's
// buckets (each an eighth of a power of two at most).
type TokenBand struct {
	// Calls is how many calls were seen (after decay).
	Calls  uint64 `json:"calls_seen"`
	InMin  int    `json:"in_min"`
	InMax  int    `json:"in_max"`
	OutMin int    `json:"out_min"`
	OutMax int    `json:"out_max"`
}

// Tokens returns the band of kind; Calls is 0 when nothing was seen. It
// is safe on a nil Observer.
func (o *Observer) Tokens(kind string) TokenBand {
	if o == nil {
		return TokenBand{}
	}
	ts := o.tokens[kind]
	if ts == nil {
		return TokenBand{}
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.in.n == 0 {
		return TokenBand{}
	}
	return TokenBand{
		Calls:  ts.in.n,
		InMin:  ts.in.lower(0.05),
		InMax:  ts.in.upper(0.95),
		OutMin: ts.out.lower(0.05),
		OutMax: ts.out.upper(0.95),
	}
}

// Flush writes what changed since the last flush (NoSync: observations
// are a guide, not money).
func (o *Observer) Flush() error { return o.flush(store.NoSync) }

// Close stops the periodic flush and writes everything that changed
// (Sync). The store must still be open; Observe after Close is kept in
// memory only. Close is idempotent.
func (o *Observer) Close() error {
	var err error
	o.once.Do(func() {
		if o.stop != nil {
			o.stop()
			<-o.done
		}
		err = o.flush(store.Sync)
		o.flushMu.Lock()
		o.closed = true
		o.flushMu.Unlock()
	})
	return err
}

// ErrClosed is returned by Flush after Close.
var ErrClosed = errors.New("estimate: observer closed")

type pending struct {
	domain string
	n      [3]uint64
}

func (o *Observer) flush(d store.Durability) error {
	o.flushMu.Lock()
	defer o.flushMu.Unlock()
	if o.closed {
		return ErrClosed
	}
	all := o.rewrite.Swap(false)
	// Copy under each shard's lock, write with none held.
	var dirty []pending
	var gone []string
	for i := range o.shards {
		s := &o.shards[i]
		s.mu.Lock()
		for k, v := range s.m {
			if v.dirty || all {
				dirty = append(dirty, pending{k, v.n})
				v.dirty = false
			}
		}
		if !all {
			gone = append(gone, s.evicted...)
		}
		s.evicted = nil
		s.mu.Unlock()
	}
	var toks []tokPending
	for k, ts := range o.tokens {
		ts.mu.Lock()
		if ts.dirty || all {
			toks = append(toks, tokPending{k, encodeTokens(&ts.in, &ts.out)})
			ts.dirty = false
		}
		ts.mu.Unlock()
	}
	if err := o.write(all, dirty, gone, toks, d); err != nil {
		o.rewrite.Store(true) // what was taken is written next time
		return fmt.Errorf("write observations: %w", err)
	}
	return nil
}

type tokPending struct {
	kind string
	val  []byte
}

// write commits a flush in batches of up to 10,000 keys; the last batch
// carries the token histograms and has the flush's durability.
func (o *Observer) write(all bool, dirty []pending, gone []string, toks []tokPending, d store.Durability) error {
	if all {
		if err := o.st.DeletePrefix(prefixDomains, store.NoSync); err != nil {
			return err
		}
	}
	if len(dirty) == 0 && len(gone) == 0 && len(toks) == 0 && d == store.NoSync {
		return nil
	}
	b := o.st.NewBatch()
	var key, val []byte
	for _, g := range gone {
		key = append(append(key[:0], prefixDomains...), g...)
		b.Delete(key)
	}
	for _, p := range dirty {
		key = append(append(key[:0], prefixDomains...), p.domain...)
		val = val[:0]
		for _, n := range p.n {
			val = binary.AppendUvarint(val, n)
		}
		b.Set(key, val) // the batch copies
		if b.Len() >= 10_000 {
			if err := b.Commit(store.NoSync); err != nil {
				return err
			}
			b = o.st.NewBatch()
		}
	}
	for _, t := range toks {
		key = append(append(key[:0], prefixTokens...), t.kind...)
		b.Set(key, t.val)
	}
	return b.Commit(d)
}

func (o *Observer) load() error {
	err := o.st.Scan(prefixDomains, nil, func(k, v []byte) (bool, error) {
		var d domainStat
		for i := range d.n {
			n, m := binary.Uvarint(v)
			if m <= 0 {
				return false, fmt.Errorf("corrupt entry %q", k)
			}
			d.n[i], v = n, v[m:]
		}
		domain := string(k[len(prefixDomains):])
		s := o.shard(domain)
		s.insert(domain, &d, o.perCap, o) // no lock needed: not shared yet
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("load observations: %w", err)
	}
	err = o.st.Scan(prefixTokens, nil, func(k, v []byte) (bool, error) {
		ts := o.tokens[string(k[len(prefixTokens):])]
		if ts == nil {
			return true, nil // a kind no longer priced
		}
		if err := decodeTokens(v, &ts.in, &ts.out); err != nil {
			return false, fmt.Errorf("entry %q: %w", k, err)
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("load observations: %w", err)
	}
	return nil
}

// Domain is the key observations are kept under: the URL's host in lower
// case without port, trailing dot or a leading "www."; "" when rawURL has
// no scheme and host. It allocates only for a host with upper-case
// letters.
func Domain(rawURL string) string {
	i := strings.Index(rawURL, "://")
	if i <= 0 {
		return ""
	}
	s := rawURL[i+3:]
	if j := strings.IndexAny(s, "/?#"); j >= 0 {
		s = s[:j]
	}
	if j := strings.LastIndexByte(s, '@'); j >= 0 {
		s = s[j+1:]
	}
	if strings.HasPrefix(s, "[") {
		if j := strings.IndexByte(s, ']'); j >= 0 {
			s = s[:j+1]
		}
	} else if j := strings.LastIndexByte(s, ':'); j >= 0 {
		s = s[:j]
	}
	s = strings.TrimSuffix(s, ".")
	if len(s) > 253 {
		return ""
	}
	s = strings.ToLower(s) // returns s itself when already lower case
	if t := strings.TrimPrefix(s, "www."); t != "" {
		s = t
	}
	return s
}

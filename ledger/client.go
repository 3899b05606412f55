package ledger

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/trawlhq/trawl/cell/store"
)

// Submitter applies a command to the replicated ledger: through Raft on the
// leader, forwarded to it from a follower. *Node implements it.
type Submitter interface {
	Submit(ctx context.Context, cmd *Command) (*Result, error)
}

// Errors of Charge. Both are 402s at the gate (spec section 7).
var (
	ErrNoCredit = errors.New("no_credit")
	ErrSpendCap = errors.New("spend_cap")
)

// ClientConfig configures a region's holds client.
type ClientConfig struct {
	Region string
	// Store is the region's own journal of charges (its own Pebble).
	Store  *store.Store
	Ledger Submitter
	// SettleEvery and SettleMax: charges are settled every SettleEvery or as
	// soon as SettleMax are waiting. Defaults 1 s and 1,000.
	SettleEvery time.Duration
	SettleMax   int
	// MinHold is the smallest hold taken (default 10 credits); MaxHold the
	// largest (default 1,000 credits). Between them a hold covers
	// HoldHorizon of the account's recent spend rate (default 30 s).
	MinHold, MaxHold MC
	HoldHorizon      time.Duration
	// IdleRelease: a hold unused this long is released (default 5 min).
	IdleRelease time.Duration
	// SubmitTimeout bounds a synchronous hold request when a hold runs
	// dry (default 2 s). A region cut off from the leader answers 402 after
	// it rather than overspending.
	SubmitTimeout time.Duration
	Now           func() time.Time
	Logger        *slog.Logger
}

// Client spends credit from regional holds: a charge is a local, durable
// write; holds are refilled and charges settled through Raft in the
// background. No request waits on another region while its hold lasts.
type Client struct {
	cfg   ClientConfig
	epoch string // names this journal: (epoch, seq) identifies a charge
	seq   atomic.Uint64
	mu    sync.Mutex
	accts map[string]*holdState
	hold  singleflight.Group

	writes    chan *journalWrite // to the group committer
	durable   atomic.Uint64      // charges up to this sequence are synced
	bg        sync.WaitGroup     // background refills
	closeOnce sync.Once
	waiting   atomic.Int64  // charges not yet sent in a settle
	kick      chan struct{} // settle now
	settleM   sync.Mutex    // one settle at a time
	cursor    []byte        // settled charges are below this key (guarded by settleM)
	stop      chan struct{}
	done      chan struct{}
}

type holdState struct {
	mu       sync.Mutex
	held     MC     // hold balance as of the latest ledger result
	heldIdx  uint64 // raft index of that result
	pending  MC     // charged here, not yet settled
	reserved MC     // being released
	reason   string // why the last hold came back short
	rate     float64
	last     time.Time
}

func (h *holdState) available() MC { return h.held - h.pending - h.reserved }

// setHeld records a hold balance from a ledger result, ignoring results
// older than one already seen (results of concurrent commands may arrive in
// any order; the raft index orders them).
func (h *holdState) setHeld(v MC, idx uint64) {
	if idx >= h.heldIdx {
		h.held, h.heldIdx = v, idx
	}
}

// Local journal layout (the region's own store, "H/" prefix):
//
//	H/c/<seq>    a charge not yet settled (seq 8 bytes big-endian)
//	H/h/<acct>   the account's hold balance and raft index from the latest result
var (
	prefixCharges = []byte("H/c/")
	keyEpoch      = []byte("H/epoch")
)

func keyCharge(seq uint64) []byte { return binary.BigEndian.AppendUint64([]byte("H/c/"), seq) }
func keyHeld(acct string) []byte  { return []byte("H/h/" + acct) }

type heldRecord struct {
	Held  MC     `json:"held_mc"`
	Index uint64 `json:"index"`
}

// NewClient loads the region's journal: charges not yet settled are settled
// by the background loop (Start).
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.SettleEvery <= 0 {
		cfg.SettleEvery = time.Second
	}
	if cfg.SettleMax <= 0 {
		cfg.SettleMax = 1000
	}
	if cfg.MinHold <= 0 {
		cfg.MinHold = Credits(10)
	}
	if cfg.MaxHold <= 0 {
		cfg.MaxHold = Credits(1000)
	}
	if cfg.HoldHorizon <= 0 {
		cfg.HoldHorizon = 30 * time.Second
	}
	if cfg.IdleRelease <= 0 {
		cfg.IdleRelease = 5 * time.Minute
	}
	if cfg.SubmitTimeout <= 0 {
		cfg.SubmitTimeout = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Client{cfg: cfg, accts: map[string]*holdState{}, kick: make(chan struct{}, 1), writes: make(chan *journalWrite, 4096)}
	// The epoch is created with the journal and kept with it; a journal
	// started afresh gets a new one, so its sequence numbers never collide
	// with an old journal's at the ledger.
	if e, err := cfg.Store.Get(keyEpoch); err == nil {
		c.epoch = string(e)
	} else if errors.Is(err, store.ErrNotFound) {
		b := make([]byte, 12)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		c.epoch = hex.EncodeToString(b)
		if err := cfg.Store.Set(keyEpoch, []byte(c.epoch), store.Sync); err != nil {
			return nil, err
		}
	} else {
		return nil, err
	}
	err := cfg.Store.Scan([]byte("H/h/"), nil, func(k, v []byte) (bool, error) {
		var r heldRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return false, err
		}
		c.state(string(k[len("H/h/"):])).setHeld(r.Held, r.Index)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	var last uint64
	err = cfg.Store.Scan(prefixCharges, nil, func(k, v []byte) (bool, error) {
		var ch Charge
		if err := json.Unmarshal(v, &ch); err != nil {
			return false, err
		}
		c.state(ch.Account).pending += ch.Amount
		c.waiting.Add(1)
		last = binary.BigEndian.Uint64(k[len(k)-8:])
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	c.seq.Store(last)
	c.durable.Store(last)
	synced := make(chan []*journalWrite, 64)
	go c.commitLoop(c.writes, synced)
	go c.syncLoop(synced)
	return c, nil
}

func (c *Client) state(acct string) *holdState {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.accts[acct]
	if h == nil {
		h = &holdState{}
		c.accts[acct] = h
	}
	return h
}

// Charge spends amount for one call, identified by receipt. It returns once
// the charge is durable in the region's journal; the ledger sees it at the
// next settle. ErrNoCredit or ErrSpendCap when the account cannot pay.
func (c *Client) Charge(ctx context.Context, acct, receipt string, amount MC) error {
	if amount < 0 {
		return fmt.Errorf("ledger: negative charge %s", amount)
	}
	h := c.state(acct)
	for {
		h.mu.Lock()
		if h.available() >= amount {
			h.pending += amount
			now := c.cfg.Now()
			h.observe(amount, now)
			low := h.available() < c.target(h)/2
			h.mu.Unlock()
			if err := c.journal(acct, receipt, amount, now); err != nil {
				h.mu.Lock()
				h.pending -= amount
				h.mu.Unlock()
				return err
			}
			if low {
				c.bg.Add(1)
				go c.refill(acct, h) // grow the hold before it runs dry
			}
			return nil
		}
		h.mu.Unlock()
		// The hold cannot cover this charge: ask the ledger now. Keep going
		// while the ledger grants more; refuse when it grants nothing.
		sctx, cancel := context.WithTimeout(ctx, c.cfg.SubmitTimeout)
		granted, err := c.refillSync(sctx, acct, h, amount)
		cancel()
		if err != nil {
			c.cfg.Logger.Warn("hold refill failed; refusing with the hold as it is", "account", acct, "region", c.cfg.Region, "err", err)
		}
		if granted > 0 {
			continue
		}
		h.mu.Lock()
		short := h.available() < amount
		reason := h.reason
		h.mu.Unlock()
		if !short {
			continue // another charge's refill made room meanwhile
		}
		if reason == ReasonSpendCap {
			return ErrSpendCap
		}
		return ErrNoCredit
	}
}

// observe updates the spend-rate estimate (credits per second, decaying).
func (h *holdState) observe(amount MC, now time.Time) {
	if !h.last.IsZero() {
		dt := now.Sub(h.last).Seconds()
		decay := 1.0
		if dt > 0 {
			decay = 1 / (1 + dt)
		}
		h.rate = h.rate*decay + float64(amount)*(1-decay)/max(dt, 1e-3)
	}
	h.last = now
}

// target is the hold size the account's spend rate calls for.
func (c *Client) target(h *holdState) MC {
	t := MC(h.rate * c.cfg.HoldHorizon.Seconds())
	return min(max(t, c.cfg.MinHold), c.cfg.MaxHold)
}

// journalWrite is one charge waiting for the group committer.
type journalWrite struct {
	val  []byte
	seq  uint64
	done chan error
}

var writePool = sync.Pool{New: func() any { return &journalWrite{done: make(chan error, 1)} }}

func (c *Client) journal(acct, receipt string, amount MC, now time.Time) error {
	w := writePool.Get().(*journalWrite)
	w.val, _ = json.Marshal(Charge{Account: acct, Receipt: receipt, Amount: amount, Time: now.UTC()})
	c.writes <- w
	err := <-w.done
	writePool.Put(w)
	if err != nil {
		return fmt.Errorf("journal charge: %w", err)
	}
	if c.waiting.Add(1) >= int64(c.cfg.SettleMax) {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// commitLoop is the group committer. It writes every charge that arrived
// meanwhile in one batch, in sequence order, without waiting for the disk,
// and hands the group to syncLoop; while that group's sync is under way the
// next group is already being written.
func (c *Client) commitLoop(writes <-chan *journalWrite, synced chan<- []*journalWrite) {
	defer close(synced)
	for w := range writes {
		group := []*journalWrite{w}
	drain:
		for len(group) < 8192 {
			select {
			case w, ok := <-writes:
				if !ok {
					break drain
				}
				group = append(group, w)
			default:
				break drain
			}
		}
		b := c.cfg.Store.NewBatch()
		for _, w := range group {
			w.seq = c.seq.Add(1)
			b.Set(keyCharge(w.seq), w.val)
		}
		if err := b.Commit(store.NoSync); err != nil {
			for _, w := range group {
				w.done <- err
			}
			continue
		}
		synced <- group
	}
}

// syncLoop makes groups durable: one WAL sync covers every group written
// before it. Only then are the callers answered and the charges visible to
// settlement (durable marks the highest synced sequence).
func (c *Client) syncLoop(groups <-chan []*journalWrite) {
	for g := range groups {
		all := [][]*journalWrite{g}
	drain:
		for {
			select {
			case g, ok := <-groups:
				if !ok {
					break drain
				}
				all = append(all, g)
			default:
				break drain
			}
		}
		err := c.cfg.Store.SyncWAL()
		if err == nil {
			last := all[len(all)-1]
			c.durable.Store(last[len(last)-1].seq)
		}
		for _, g := range all {
			for _, w := range g {
				w.done <- err
			}
		}
	}
}

func (c *Client) refill(acct string, h *holdState) {
	defer c.bg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.SubmitTimeout)
	defer cancel()
	if _, err := c.refillSync(ctx, acct, h, 0); err != nil {
		c.cfg.Logger.Debug("background hold refill failed", "account", acct, "err", err)
	}
}

// refillSync asks the ledger for enough hold to reach the target (and to
// cover need) and returns what it granted. Concurrent callers for one
// account share one request.
func (c *Client) refillSync(ctx context.Context, acct string, h *holdState, need MC) (MC, error) {
	v, err, _ := c.hold.Do(acct, func() (any, error) {
		h.mu.Lock()
		want := max(c.target(h), need) - h.available()
		h.mu.Unlock()
		if want <= 0 {
			return MC(0), nil
		}
		now := c.cfg.Now()
		res, err := c.cfg.Ledger.Submit(ctx, &Command{
			ID:   fmt.Sprintf("hold/%s/%s/%d", c.cfg.Region, acct, now.UnixNano()),
			Type: CmdHold, Time: now,
			Hold: &HoldRequest{Account: acct, Region: c.cfg.Region, Want: want},
		})
		if err != nil {
			return MC(0), err
		}
		if res.Error != "" {
			return MC(0), fmt.Errorf("hold refused: %s: %s", res.Error, res.Message)
		}
		h.mu.Lock()
		h.setHeld(res.Holds[acct], res.Index)
		h.reason = res.Reason
		rec := heldRecord{Held: h.held, Index: h.heldIdx}
		h.mu.Unlock()
		b, _ := json.Marshal(rec)
		return res.Granted, c.cfg.Store.Set(keyHeld(acct), b, store.Sync)
	})
	granted, _ := v.(MC)
	return granted, err
}

// Start runs the settle loop until Close.
func (c *Client) Start() {
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(c.done)
		t := time.NewTicker(c.cfg.SettleEvery)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
			case <-c.kick:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if _, err := c.Settle(ctx); err != nil {
				c.cfg.Logger.Warn("settle failed; the charges stay journaled and are retried", "region", c.cfg.Region, "err", err)
			}
			c.releaseIdle(ctx)
			cancel()
		}
	}()
}

// Close stops the loops; call it after the last Charge has returned.
// Unsettled charges stay in the journal.
func (c *Client) Close() {
	if c.stop != nil {
		close(c.stop)
		<-c.done
		c.stop = nil
	}
	c.bg.Wait()
	c.closeOnce.Do(func() { close(c.writes) })
}

// Pending is the number of journaled charges not yet settled.
func (c *Client) Pending() int64 { return c.waiting.Load() }

// Settle sends journaled charges to the ledger, up to 5,000 at a time, until
// none is left, and returns how many it settled.
func (c *Client) Settle(ctx context.Context) (int, error) {
	c.settleM.Lock()
	defer c.settleM.Unlock()
	total := 0
	for {
		n, err := c.settleBatch(ctx, 5000)
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
}

func (c *Client) settleBatch(ctx context.Context, max int) (int, error) {
	var charges []Charge
	var keys [][]byte
	// Start past what was settled: the deleted keys before it are tombstones
	// an iterator would otherwise step over on every settle.
	durable := c.durable.Load()
	err := c.cfg.Store.Scan(prefixCharges, c.cursor, func(k, v []byte) (bool, error) {
		if binary.BigEndian.Uint64(k[len(k)-8:]) > durable {
			return false, nil // written, not yet synced: the next settle takes it
		}
		var ch Charge
		if err := json.Unmarshal(v, &ch); err != nil {
			return false, err
		}
		ch.Seq = binary.BigEndian.Uint64(k[len(k)-8:])
		charges = append(charges, ch)
		keys = append(keys, append([]byte(nil), k...))
		return len(charges) < max, nil
	})
	if err != nil || len(charges) == 0 {
		return 0, err
	}
	first, last := binary.BigEndian.Uint64(keys[0][4:]), binary.BigEndian.Uint64(keys[len(keys)-1][4:])
	// The id names the batch: a retry of the same batch is the same command.
	res, err := c.cfg.Ledger.Submit(ctx, &Command{
		ID:   fmt.Sprintf("settle/%s/%d-%d", c.cfg.Region, first, last),
		Type: CmdSettle, Time: c.cfg.Now(),
		Settle: &Settle{Region: c.cfg.Region, Epoch: c.epoch, Charges: charges},
	})
	if err != nil {
		return 0, err
	}
	if res.Error != "" {
		return 0, fmt.Errorf("settle refused: %s: %s", res.Error, res.Message)
	}
	if res.Shortfall > 0 {
		c.cfg.Logger.Error("settle shortfall: charges exceeded a hold", "region", c.cfg.Region, "shortfall", res.Shortfall.String())
	}
	spent := map[string]MC{}
	for _, ch := range charges {
		spent[ch.Account] += ch.Amount
	}
	accts := make([]string, 0, len(spent))
	for a := range spent {
		accts = append(accts, a)
	}
	sort.Strings(accts)
	// Journal first (charges gone, holds as the ledger now has them), then
	// memory, so a failed write leaves both as they were and the batch is
	// simply sent again (the ledger skips its receipts).
	b := c.cfg.Store.NewBatch()
	for _, k := range keys {
		b.Delete(k)
	}
	for _, a := range accts {
		h := c.state(a)
		h.mu.Lock()
		rec := heldRecord{Held: h.held, Index: h.heldIdx}
		if v, ok := res.Holds[a]; ok && res.Index >= h.heldIdx {
			rec = heldRecord{Held: v, Index: res.Index}
		}
		h.mu.Unlock()
		rb, _ := json.Marshal(rec)
		b.Set(keyHeld(a), rb)
	}
	if err := b.Commit(store.Sync); err != nil {
		return 0, err
	}
	for _, a := range accts {
		h := c.state(a)
		h.mu.Lock()
		if v, ok := res.Holds[a]; ok {
			h.setHeld(v, res.Index)
		}
		h.pending -= spent[a]
		h.mu.Unlock()
	}
	c.waiting.Add(-int64(len(charges)))
	c.cursor = append(keys[len(keys)-1], 0)
	return len(charges), nil
}

// releaseIdle gives back holds unused for IdleRelease.
func (c *Client) releaseIdle(ctx context.Context) {
	now := c.cfg.Now()
	c.mu.Lock()
	var idle []string
	for a, h := range c.accts {
		h.mu.Lock()
		if h.pending == 0 && h.reserved == 0 && h.held > 0 && now.Sub(h.last) >= c.cfg.IdleRelease {
			idle = append(idle, a)
		}
		h.mu.Unlock()
	}
	c.mu.Unlock()
	sort.Strings(idle)
	for _, a := range idle {
		if err := c.Release(ctx, a); err != nil {
			c.cfg.Logger.Debug("release failed", "account", a, "err", err)
		}
	}
}

// Release returns the account's whole hold in this region to its buckets.
func (c *Client) Release(ctx context.Context, acct string) error {
	h := c.state(acct)
	h.mu.Lock()
	amount := h.available()
	if amount <= 0 {
		h.mu.Unlock()
		return nil
	}
	h.reserved += amount
	h.mu.Unlock()
	now := c.cfg.Now()
	res, err := c.cfg.Ledger.Submit(ctx, &Command{
		ID:   fmt.Sprintf("release/%s/%s/%d", c.cfg.Region, acct, now.UnixNano()),
		Type: CmdRelease, Time: now,
		Release: &Release{Account: acct, Region: c.cfg.Region, Amount: amount},
	})
	h.mu.Lock()
	h.reserved -= amount
	if err == nil && res.Error == "" {
		h.setHeld(res.Holds[acct], res.Index)
	}
	rec, _ := json.Marshal(heldRecord{Held: h.held, Index: h.heldIdx})
	h.mu.Unlock()
	if err != nil {
		return err
	}
	if res.Error != "" {
		return fmt.Errorf("release refused: %s: %s", res.Error, res.Message)
	}
	return c.cfg.Store.Set(keyHeld(acct), rec, store.Sync)
}

// Available is what the account can still spend from this region's hold.
func (c *Client) Available(acct string) MC {
	h := c.state(acct)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.available()
}

// Unsettled is what the account has spent here that the ledger has not seen.
func (c *Client) Unsettled(acct string) MC {
	h := c.state(acct)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pending
}

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

	"github.com/trawlhq/trawl/internal/store"
)

// Submitter applies a command to the replicated ledger: through Raft on the
// leader, forwarded to it from a follower. *Node implements it.
type Submitter interface {
	Submit(ctx context.Context, cmd *Command) (*Result, error)
}

// Errors of Charge. ErrNoCredit and ErrSpendCap are 402s at the gate
// (docs/spec/hosted-api.md §7). ErrUnreachable: the hold could not cover
// the call and the ledger did not answer a request for more (a region cut
// off, a ledger without a leader): the account may well have credit, so
// the gate answers 503 with Retry-After, not 402.
var (
	ErrNoCredit    = errors.New("no_credit")
	ErrSpendCap    = errors.New("spend_cap")
	ErrUnreachable = errors.New("ledger_unreachable")
)

// errHoldRefused is a hold the ledger answered with a refusal.
var errHoldRefused = errors.New("hold refused")

// HoldsConfig configures a region's holds client.
type HoldsConfig struct {
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

// HoldsClient spends credit from regional holds: a charge is a local, durable
// write; holds are refilled and charges settled through Raft in the
// background. No request waits on another region while its hold lasts.
type HoldsClient struct {
	cfg   HoldsConfig
	epoch string // names this journal: (epoch, seq) identifies a charge
	seq   atomic.Uint64
	mu    sync.Mutex
	accts map[string]*holdState
	hold  singleflight.Group

	durable atomic.Uint64 // every charge up to this sequence is written
	wmMu    sync.Mutex
	early   map[uint64]bool // written above the watermark
	bg      sync.WaitGroup  // background refills
	waiting atomic.Int64    // charges not yet sent in a settle
	kick    chan struct{}   // settle now
	settleM sync.Mutex      // one settle at a time
	cursor  []byte          // settled charges are below this key (guarded by settleM)
	stop    chan struct{}
	done    chan struct{}

	parked   atomic.Int64 // charges parked since start
	parkedMC atomic.Int64
}

type holdState struct {
	mu      sync.Mutex
	held    MC     // hold balance as of the latest ledger result
	heldIdx uint64 // raft index of that result
	pending MC     // charged here, not yet settled
	// The part of pending in the settle batch being sent, and the batch's
	// last journal sequence: once the ledger's mark for this journal
	// reaches it, a replica's balance already has it (UnsettledAt).
	inflight   MC
	inflightTo uint64
	reserved   MC     // being released
	relID      string // a release sent and not answered yet (journaled)
	relAmt     MC
	relGen     uint64     // releases answered: a refill that overlapped one looks again
	recMu      sync.Mutex // orders writes of this account's held record
	reason     string     // why the last hold came back short
	rate       float64
	last       time.Time
	// touched is the last charge or grant: a hold is idle (released)
	// IdleRelease after it, not at once after a grant no call has used
	// yet (the grant of an Ensure, before the call's charge).
	touched time.Time
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

// Local journal layout (the region's own store, store.PrefixHolds):
//
//	H/c/<seq>    a charge not yet settled (seq 8 bytes big-endian)
//	H/h/<acct>   the account's hold balance and raft index from the latest result
//	H/p/<seq>    a charge the ledger could not take (parkedRecord), for an operator
var (
	prefixCharges = []byte(store.PrefixHolds + "c/")
	keyEpoch      = []byte(store.PrefixHolds + "epoch")
)

func keyCharge(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(store.PrefixHolds+"c/"), seq)
}
func keyHeld(acct string) []byte { return []byte(store.PrefixHolds + "h/" + acct) }
func keyParked(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(store.PrefixHolds+"p/"), seq)
}
func keyRel(acct string) []byte { return []byte(store.PrefixHolds + "r/" + acct) }

var keySeqHW = []byte(store.PrefixHolds + "seqhw")

type relRecord struct {
	ID     string `json:"id"`
	Amount MC     `json:"amount_mc"`
}

type heldRecord struct {
	Held  MC     `json:"held_mc"`
	Index uint64 `json:"index"`
}

// NewHoldsClient loads the region's journal: charges not yet settled are settled
// by the background loop (Start).
func NewHoldsClient(cfg HoldsConfig) (*HoldsClient, error) {
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
	c := &HoldsClient{cfg: cfg, accts: map[string]*holdState{}, kick: make(chan struct{}, 1), early: map[uint64]bool{}}
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
	err := cfg.Store.Scan([]byte(store.PrefixHolds+"h/"), nil, func(k, v []byte) (bool, error) {
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
	err = cfg.Store.Scan([]byte(store.PrefixHolds+"r/"), nil, func(k, v []byte) (bool, error) {
		var r relRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return false, err
		}
		h := c.state(string(k[len("H/r/"):]))
		h.relID, h.relAmt = r.ID, r.Amount
		h.reserved += r.Amount
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	var last uint64
	if b, err := cfg.Store.Get(keySeqHW); err == nil {
		last = binary.BigEndian.Uint64(b)
	}
	err = cfg.Store.Scan(prefixCharges, nil, func(k, v []byte) (bool, error) {
		var ch Charge
		if err := decodeCharge(v, &ch); err != nil {
			return false, err
		}
		c.state(ch.Account).pending += ch.Amount
		c.waiting.Add(1)
		last = max(last, binary.BigEndian.Uint64(k[len(k)-8:]))
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	c.seq.Store(last)
	c.durable.Store(last)
	return c, nil
}

func (c *HoldsClient) state(acct string) *holdState {
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
func (c *HoldsClient) Charge(ctx context.Context, acct, receipt string, amount MC) error {
	if amount < 0 {
		return fmt.Errorf("ledger: negative charge %s", amount)
	}
	if receipt == "" || acct == "" {
		return errors.New("ledger: a charge needs an account and a receipt")
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
		if err := c.grow(ctx, acct, h, amount); err != nil {
			return err
		}
	}
}

// Ensure returns nil when this region's hold can cover amount for the
// account, asking the ledger for more when it cannot; ErrNoCredit or
// ErrSpendCap otherwise. Nothing is spent: the gate calls it before
// forwarding a request, so a refusal comes before the work.
func (c *HoldsClient) Ensure(ctx context.Context, acct string, amount MC) error {
	h := c.state(acct)
	for {
		h.mu.Lock()
		ok := h.available() >= amount
		h.mu.Unlock()
		if ok {
			return nil
		}
		if err := c.grow(ctx, acct, h, amount); err != nil {
			return err
		}
	}
}

// grow asks the ledger for enough hold to cover amount. It returns nil when
// the caller should look again (the ledger granted more, or another call
// made room meanwhile), and the refusal when the hold stays short.
func (c *HoldsClient) grow(ctx context.Context, acct string, h *holdState, amount MC) error {
	h.mu.Lock()
	gen := h.relGen
	h.mu.Unlock()
	sctx, cancel := context.WithTimeout(ctx, c.cfg.SubmitTimeout)
	granted, err := c.refillSync(sctx, acct, h, amount)
	cancel()
	if err != nil {
		c.cfg.Logger.Warn("hold refill failed; refusing with the hold as it is", "account", acct, "region", c.cfg.Region, "err", err)
	}
	if granted > 0 {
		return nil
	}
	h.mu.Lock()
	short := h.available() < amount
	reason := h.reason
	releasing := h.relID != ""
	released := h.relGen != gen
	h.mu.Unlock()
	if !short {
		return nil
	}
	if released && (err == nil || errors.Is(err, errHoldRefused)) {
		// A release was answered while the ledger weighed this refill:
		// it may have refused for credit the release has since given
		// back to the buckets. Look again.
		return nil
	}
	if releasing && (err == nil || errors.Is(err, errHoldRefused)) && c.waitRelease(ctx, h) {
		// An idle release was on its way: the ledger still counted the
		// hold it gives back (so it refused more), this region no longer
		// did. Once it is answered, look again.
		return nil
	}
	if err != nil && !errors.Is(err, errHoldRefused) {
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	if reason == ReasonSpendCap {
		return ErrSpendCap
	}
	return ErrNoCredit
}

// waitRelease waits, up to SubmitTimeout, for the account's release in
// flight to be answered, and reports whether it was.
func (c *HoldsClient) waitRelease(ctx context.Context, h *holdState) bool {
	deadline := time.Now().Add(c.cfg.SubmitTimeout)
	for {
		h.mu.Lock()
		done := h.relID == ""
		h.mu.Unlock()
		if done {
			return true
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// HoldsReduced takes the hold balances the ledger lowered without this
// client asking (a lowered spend cap, applied at index) and keeps those of
// its own region, so the next charge sees the smaller hold and asks the
// ledger, which answers with the new cap. Wire it to the region's replica
// with State.OnHoldsReduced.
func (c *HoldsClient) HoldsReduced(index uint64, holds []HoldBalance) {
	for _, hb := range holds {
		if hb.Region != c.cfg.Region {
			continue
		}
		h := c.state(hb.Account)
		h.mu.Lock()
		h.setHeld(hb.Balance, index)
		h.mu.Unlock()
		if err := c.saveHeld(hb.Account, h); err != nil {
			c.cfg.Logger.Warn("keep the reduced hold", "account", hb.Account, "err", err)
		}
		// Settle now: charges the ledger has not seen were made against the
		// old hold; once settled, the ledger fits the other regions' holds
		// to them and the cap is exact.
		select {
		case c.kick <- struct{}{}:
		default:
		}
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
	h.last, h.touched = now, now
}

// target is the hold size the account's spend rate calls for.
func (c *HoldsClient) target(h *holdState) MC {
	t := MC(h.rate * c.cfg.HoldHorizon.Seconds())
	return min(max(t, c.cfg.MinHold), c.cfg.MaxHold)
}

// journal writes one charge, synced. Concurrent writes share syncs through
// Pebble's commit pipeline, not a committer of our own, which was slower
// (docs/performance.md, "Ledger: charges through regional holds").
// Sequence numbers are taken before the write, so
// writes may finish out of order; settlement reads only up to the durable
// watermark, below which every write has finished.
func (c *HoldsClient) journal(acct, receipt string, amount MC, now time.Time) error {
	val := encodeCharge(acct, receipt, amount, now)
	seq := c.seq.Add(1)
	err := c.cfg.Store.Set(keyCharge(seq), val, store.Sync)
	c.finished(seq) // also on failure: the key is absent, the watermark moves on
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

// finished records that the write of seq is over and advances the durable
// watermark across every contiguous finished sequence.
func (c *HoldsClient) finished(seq uint64) {
	c.wmMu.Lock()
	defer c.wmMu.Unlock()
	if seq != c.durable.Load()+1 {
		c.early[seq] = true
		return
	}
	wm := seq
	for c.early[wm+1] {
		delete(c.early, wm+1)
		wm++
	}
	c.durable.Store(wm)
}

func (c *HoldsClient) refill(acct string, h *holdState) {
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
func (c *HoldsClient) refillSync(ctx context.Context, acct string, h *holdState, need MC) (MC, error) {
	v, err, _ := c.hold.Do(acct, func() (any, error) {
		h.mu.Lock()
		want := max(c.target(h), need) - h.available()
		h.mu.Unlock()
		if want <= 0 {
			return MC(0), nil
		}
		now := c.cfg.Now()
		res, err := c.cfg.Ledger.Submit(ctx, &Command{
			// Unique whatever the clock says (a stopped test clock, a
			// coarse one): the ledger answers a repeated command id with
			// its first result.
			ID:   fmt.Sprintf("hold/%s/%s/%d/%s", c.cfg.Region, acct, now.UnixNano(), rand.Text()[:10]),
			Type: CmdHold, Time: now,
			Hold: &HoldRequest{Account: acct, Region: c.cfg.Region, Want: want},
		})
		if err != nil {
			return MC(0), err
		}
		if res.Error != "" {
			return MC(0), fmt.Errorf("%w: %s: %s", errHoldRefused, res.Error, res.Message)
		}
		h.mu.Lock()
		h.setHeld(res.Holds[acct], res.Index)
		h.reason = res.Reason
		if res.Granted > 0 {
			h.touched = now
		}
		h.mu.Unlock()
		return res.Granted, c.saveHeld(acct, h)
	})
	granted, _ := v.(MC)
	return granted, err
}

// Start runs the settle loop until Close.
func (c *HoldsClient) Start() {
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
func (c *HoldsClient) Close() {
	if c.stop != nil {
		close(c.stop)
		<-c.done
		c.stop = nil
	}
	c.bg.Wait()
}

// parkedRecord is a parked charge as the client keeps it.
type parkedRecord struct {
	ParkedCharge
	Epoch string    `json:"epoch"`
	At    time.Time `json:"parked_at"`
}

// HoldsMetrics are a client's counters, for export and alerts.
type HoldsMetrics struct {
	// Pending is the number of journaled charges not yet settled.
	Pending int64
	// ParkedCharges and ParkedMC count the charges the ledger could not
	// take since the client started (each also logged at error level with
	// alert=ledger_charge_parked). Any rise needs an operator: the calls
	// were served and not billed.
	ParkedCharges int64
	ParkedMC      MC
}

// Metrics returns the client's counters.
func (c *HoldsClient) Metrics() HoldsMetrics {
	return HoldsMetrics{Pending: c.waiting.Load(), ParkedCharges: c.parked.Load(), ParkedMC: MC(c.parkedMC.Load())}
}

// Parked lists the charges the ledger could not take, oldest first, as
// kept in the region's journal.
func (c *HoldsClient) Parked() ([]ParkedCharge, error) {
	var out []ParkedCharge
	err := c.cfg.Store.Scan([]byte(store.PrefixHolds+"p/"), nil, func(_, v []byte) (bool, error) {
		var r parkedRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return false, err
		}
		out = append(out, r.ParkedCharge)
		return true, nil
	})
	return out, err
}

// Pending is the number of journaled charges not yet settled.
func (c *HoldsClient) Pending() int64 { return c.waiting.Load() }

// Settle sends journaled charges to the ledger, up to 5,000 at a time, until
// none is left, and returns how many it settled.
func (c *HoldsClient) Settle(ctx context.Context) (int, error) {
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

func (c *HoldsClient) settleBatch(ctx context.Context, max int) (int, error) {
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
		if err := decodeCharge(v, &ch); err != nil {
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
	spent := map[string]MC{}
	for _, ch := range charges {
		spent[ch.Account] += ch.Amount
	}
	// Before the batch is sent: a replica may apply it before Submit
	// returns. A failed send leaves these set; the resend (the same
	// charges first) sets them again.
	for a, amt := range spent {
		h := c.state(a)
		h.mu.Lock()
		h.inflight, h.inflightTo = amt, last
		h.mu.Unlock()
	}
	// The id names the batch: a retry of the same batch is the same command.
	res, err := c.cfg.Ledger.Submit(ctx, &Command{
		ID:   fmt.Sprintf("settle/%s/%s/%d-%d", c.cfg.Region, c.epoch, first, last),
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
	parked := map[uint64]ParkedCharge{}
	for _, p := range res.Parked {
		parked[p.Seq] = p
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
	for i, k := range keys {
		b.Delete(k)
		if p, ok := parked[charges[i].Seq]; ok {
			// Parked, not lost: kept beside the journal for an operator.
			pb, _ := json.Marshal(parkedRecord{ParkedCharge: p, Epoch: c.epoch, At: c.cfg.Now().UTC()})
			b.Set(keyParked(charges[i].Seq), pb)
		}
	}
	b.Set(keySeqHW, binary.BigEndian.AppendUint64(nil, last))
	for _, a := range accts {
		h := c.state(a)
		h.recMu.Lock()
		defer h.recMu.Unlock()
		h.mu.Lock()
		if v, ok := res.Holds[a]; ok {
			h.setHeld(v, res.Index)
		}
		rec := heldRecord{Held: h.held, Index: h.heldIdx}
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
		h.pending -= spent[a]
		h.inflight, h.inflightTo = 0, 0
		h.mu.Unlock()
	}
	c.waiting.Add(-int64(len(charges)))
	c.cursor = append(keys[len(keys)-1], 0)
	for _, p := range res.Parked {
		c.parked.Add(1)
		c.parkedMC.Add(int64(p.Amount))
		// One line per parked charge, with what an operator needs: the
		// charge was not billed; HoldsClient.Parked lists what is kept.
		c.cfg.Logger.Error("ledger refused a charge; parked it and settled the rest of the batch",
			"alert", "ledger_charge_parked", "region", c.cfg.Region, "epoch", c.epoch, "seq", p.Seq,
			"account", p.Account, "receipt", p.Receipt, "amount", p.Amount.String(),
			"code", p.Error, "reason", p.Message,
			"action", "the call was not billed; fix the cause (unknown account, missing receipt) and bill it by hand, or drop it")
	}
	return len(charges), nil
}

// releaseIdle gives back holds unused for IdleRelease.
func (c *HoldsClient) releaseIdle(ctx context.Context) {
	now := c.cfg.Now()
	c.mu.Lock()
	var idle []string
	for a, h := range c.accts {
		h.mu.Lock()
		if h.relID != "" || (h.pending == 0 && h.reserved == 0 && h.held > 0 && now.Sub(h.touched) >= c.cfg.IdleRelease) {
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
func (c *HoldsClient) Release(ctx context.Context, acct string) error {
	h := c.state(acct)
	h.mu.Lock()
	id, amount := h.relID, h.relAmt
	fresh := id == ""
	if fresh {
		amount = h.available()
		if amount <= 0 {
			h.mu.Unlock()
			return nil
		}
		id = fmt.Sprintf("release/%s/%s/%d/%s", c.cfg.Region, acct, c.cfg.Now().UnixNano(), rand.Text()[:10])
		h.reserved += amount
		h.relID, h.relAmt = id, amount
	}
	h.mu.Unlock()
	if fresh {
		// Journal the release before sending it: until the ledger answers,
		// the credit is neither spendable here nor forgotten.
		rb, _ := json.Marshal(relRecord{ID: id, Amount: amount})
		if err := c.cfg.Store.Set(keyRel(acct), rb, store.Sync); err != nil {
			h.mu.Lock()
			h.reserved -= amount
			h.relID, h.relAmt = "", 0
			h.mu.Unlock()
			return err
		}
	}
	res, err := c.cfg.Ledger.Submit(ctx, &Command{
		ID: id, Type: CmdRelease, Time: c.cfg.Now(),
		Release: &Release{Account: acct, Region: c.cfg.Region, Amount: amount},
	})
	if err != nil {
		return err // still reserved; sent again by the next releaseIdle
	}
	h.recMu.Lock()
	defer h.recMu.Unlock()
	h.mu.Lock()
	if res.Error == "" {
		h.setHeld(res.Holds[acct], res.Index)
	}
	h.reserved -= amount
	h.relID, h.relAmt = "", 0
	h.relGen++
	rec, _ := json.Marshal(heldRecord{Held: h.held, Index: h.heldIdx})
	h.mu.Unlock()
	b := c.cfg.Store.NewBatch()
	b.Delete(keyRel(acct))
	b.Set(keyHeld(acct), rec)
	if err := b.Commit(store.Sync); err != nil {
		return err
	}
	if res.Error != "" {
		return fmt.Errorf("release refused: %s: %s", res.Error, res.Message)
	}
	return nil
}

// saveHeld writes the account's hold balance as the client knows it now;
// writes are ordered, so the record never goes back to an older result.
func (c *HoldsClient) saveHeld(acct string, h *holdState) error {
	h.recMu.Lock()
	defer h.recMu.Unlock()
	h.mu.Lock()
	rec := heldRecord{Held: h.held, Index: h.heldIdx}
	h.mu.Unlock()
	b, _ := json.Marshal(rec)
	return c.cfg.Store.Set(keyHeld(acct), b, store.Sync)
}

// Available is what the account can still spend from this region's hold.
func (c *HoldsClient) Available(acct string) MC {
	h := c.state(acct)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.available()
}

// Unsettled is what the account has spent here that the ledger has not seen.
func (c *HoldsClient) Unsettled(acct string) MC {
	h := c.state(acct)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pending
}

// Journal names this region's journal as the ledger's settle marks know
// it: State.BalanceView(acct, now, region, epoch) reads its mark.
func (c *HoldsClient) Journal() (region, epoch string) { return c.cfg.Region, c.epoch }

// UnsettledAt is what acct was charged here and a replica whose settle
// mark for this journal is mark does not yet have: Unsettled less a batch
// the replica has already applied and this client has not yet heard back
// on. Balance = view.Balance.Total - UnsettledAt(acct, view.Mark), with
// the view read from one snapshot, counts every charge exactly once.
func (c *HoldsClient) UnsettledAt(acct string, mark uint64) MC {
	h := c.state(acct)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.inflightTo > 0 && h.inflightTo <= mark {
		return h.pending - h.inflight
	}
	return h.pending
}

// A journaled charge is binary (it is written and read once per call, on
// the hot path): amount and time as 8 bytes each, then the account and the
// receipt, each behind a uvarint length.
func encodeCharge(acct, receipt string, amount MC, now time.Time) []byte {
	b := make([]byte, 0, 16+2*binary.MaxVarintLen16+len(acct)+len(receipt))
	b = binary.BigEndian.AppendUint64(b, uint64(amount))
	b = binary.BigEndian.AppendUint64(b, uint64(now.UnixNano()))
	b = binary.AppendUvarint(b, uint64(len(acct)))
	b = append(b, acct...)
	b = binary.AppendUvarint(b, uint64(len(receipt)))
	return append(b, receipt...)
}

var errBadCharge = errors.New("ledger: journaled charge does not decode")

func decodeCharge(b []byte, ch *Charge) error {
	if len(b) < 16 {
		return errBadCharge
	}
	ch.Amount = MC(binary.BigEndian.Uint64(b))
	ch.Time = time.Unix(0, int64(binary.BigEndian.Uint64(b[8:]))).UTC()
	b = b[16:]
	for _, dst := range []*string{&ch.Account, &ch.Receipt} {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return errBadCharge
		}
		*dst = string(b[k : k+int(n)])
		b = b[k+int(n):]
	}
	return nil
}

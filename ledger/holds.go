package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/trawlhq/trawl/internal/store"
)

// spendable is the credit in the account's buckets that can be held now.
func (t *tx) spendable(a *Account) (map[string]MC, MC, error) {
	parts := map[string]MC{}
	var total MC
	for _, bk := range SpendOrder {
		if bk == BucketPass && !t.cmd.Time.Before(a.PassExpires) {
			continue // lapsed (or none)
		}
		v, err := t.bal(BucketAccount(a.ID, bk))
		if err != nil {
			return nil, 0, err
		}
		if v > 0 {
			parts[bk] = v
			total += v
		}
	}
	return parts, total, nil
}

// heldTotal sums the account's holds in every region (stored, and new in
// this command).
func (t *tx) heldTotal(acct string) (MC, error) {
	var total MC
	seen := map[string]bool{}
	err := t.r.Scan(prefixHolds(acct), nil, func(k, _ []byte) (bool, error) {
		seen[string(k[len(prefixHolds(acct)):])] = true
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	for k := range t.holds {
		if a, r, _ := strings.Cut(k, "/"); a == acct {
			seen[r] = true
		}
	}
	for _, r := range slices.Sorted(maps.Keys(seen)) {
		v, err := t.bal(HoldAccount(acct, r))
		if err != nil {
			return 0, err
		}
		total += v
	}
	return total, nil
}

// CapLeft is what the spend cap still allows: the cap minus this month's
// spend minus what is already held (held credit may be spent any moment).
func capLeft(a *Account, held MC) (MC, bool) {
	if a.SpendCapMC <= 0 {
		return 0, false
	}
	left := a.SpendCapMC - a.MonthSpent - held
	if left < 0 {
		left = 0
	}
	return left, true
}

// readHold returns the hold for changing: changes are written at flush.
func (t *tx) readHold(acct, region string) (*Hold, error) {
	if h, ok := t.holds[acct+"/"+region]; ok {
		return h, nil
	}
	h := &Hold{Parts: map[string]MC{}}
	if _, err := getJSON(t.r, keyHold(acct, region), h); err != nil {
		return nil, err
	}
	if h.Parts == nil {
		h.Parts = map[string]MC{}
	}
	t.holds[acct+"/"+region] = h
	return h, nil
}

func (t *tx) hold(h *HoldRequest, res *Result) error {
	if h == nil || h.Region == "" || h.Want <= 0 {
		return refuse(ErrCodeInvalid, "hold needs region and a positive want")
	}
	a, err := t.account(h.Account)
	if err != nil {
		return err
	}
	parts, avail, err := t.spendable(a)
	if err != nil {
		return err
	}
	want := h.Want
	if want > avail {
		want = avail
		res.Reason = ReasonNoCredit
	}
	held, err := t.heldTotal(a.ID)
	if err != nil {
		return err
	}
	if left, capped := capLeft(a, held); capped && want > left {
		want = left
		res.Reason = ReasonSpendCap
	}
	hold, err := t.readHold(a.ID, h.Region)
	if err != nil {
		return err
	}
	remaining := want
	for _, bk := range SpendOrder {
		take := min(parts[bk], remaining)
		if take <= 0 {
			continue
		}
		if err := t.transfer(BucketAccount(a.ID, bk), HoldAccount(a.ID, h.Region), take, KindHold, ""); err != nil {
			return err
		}
		hold.Parts[bk] += take
		remaining -= take
	}
	res.Granted = want
	if want == h.Want {
		res.Reason = ""
	}
	bal, err := t.bal(HoldAccount(a.ID, h.Region))
	if err != nil {
		return err
	}
	res.Holds = map[string]MC{a.ID: bal}
	return nil
}

// settle applies a region's charges: each consumes the account's hold
// in the region (and the buckets, through the hold, when the hold is
// short) and goes to revenue; a repeat is counted, not charged again; a
// charge the ledger cannot take is parked. res.Holds reports the hold of
// every account the charges touched or repeated.
func (t *tx) settle(s *Settle, res *Result) error {
	if s == nil || s.Region == "" {
		return refuse(ErrCodeInvalid, "settle needs a region")
	}
	res.Holds = map[string]MC{}
	st := &settlement{t: t, s: s, res: res, touched: map[string]*Account{}, dupAccts: map[string]bool{}, toppedUp: map[string]bool{}}
	var err error
	if st.mark, err = t.settledMark(s); err != nil {
		return err
	}
	for _, c := range s.Charges {
		if err := st.apply(c); err != nil {
			return err
		}
	}
	if s.Epoch != "" {
		t.b.Set(keyMark(s.Region, s.Epoch), binary.BigEndian.AppendUint64(nil, st.mark))
	}
	if err := st.settleAccounts(); err != nil {
		return err
	}
	return st.reportRepeated()
}

// settlement is one Settle being applied.
type settlement struct {
	t   *tx
	s   *Settle
	res *Result
	// touched are the accounts charged, by id; dupAccts those with
	// repeats (their holds are reported too); toppedUp those charged
	// past their hold, from their buckets.
	touched  map[string]*Account
	dupAccts map[string]bool
	toppedUp map[string]bool
	// mark is the highest sequence settled for the epoch.
	mark uint64
}

// settledMark is the highest sequence settled for s's epoch (0 without
// an epoch, or before its first settle).
func (t *tx) settledMark(s *Settle) (uint64, error) {
	if s.Epoch == "" {
		return 0, nil
	}
	b, err := t.r.Get(keyMark(s.Region, s.Epoch))
	if err == nil {
		return binary.BigEndian.Uint64(b), nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return 0, err
	}
	return 0, nil
}

// apply settles one charge: a repeat is counted, a charge the ledger
// cannot take parked, any other charged.
func (st *settlement) apply(c Charge) error {
	s := st.s
	repeat, err := st.isRepeat(c)
	if err != nil {
		return err
	}
	if repeat {
		st.res.Duplicates++
		st.dupAccts[c.Account] = true
		return nil
	}
	if s.Epoch != "" && c.Seq > 0 {
		st.mark = c.Seq // a parked charge is passed too: a resend is a repeat
	}
	a, err := st.chargedAccount(c)
	if err != nil || a == nil {
		return err
	}
	if s.Epoch == "" || c.Seq == 0 {
		// Without a mark, the receipt itself is remembered (until a
		// compact drops it); with one, the mark is the whole record.
		t := st.t
		t.receipts[c.Receipt] = true
		t.b.Set(keyReceipt(c.Receipt), fmt.Appendf(nil, "%d", t.meta.Entries+1))
		t.b.Set(keyTimed(prefixReceiptTimes, t.cmd.Time, c.Receipt), nil)
	}
	return st.charge(a, c)
}

// isRepeat reports whether c was settled before: by its sequence under
// the epoch's mark, or else by its receipt.
func (st *settlement) isRepeat(c Charge) (bool, error) {
	if st.s.Epoch != "" && c.Seq > 0 {
		return c.Seq <= st.mark, nil
	}
	if st.t.receipts[c.Receipt] {
		return true, nil
	}
	if c.Receipt == "" {
		return false, nil
	}
	return st.t.exists(keyReceipt(c.Receipt))
}

// chargedAccount is the account c charges, or nil when c is parked.
//
// A charge the ledger cannot take is parked, not the batch refused: one
// bad charge must not hold up every other charge of the region (the
// client retries a refused batch as it is, forever). The client keeps
// parked charges for an operator.
func (st *settlement) chargedAccount(c Charge) (*Account, error) {
	if c.Receipt == "" || c.Amount < 0 {
		st.res.Parked = append(st.res.Parked, ParkedCharge{Charge: c, Error: ErrCodeInvalid, Message: "a charge needs a receipt and a non-negative amount"})
		return nil, nil
	}
	if a := st.touched[c.Account]; a != nil {
		return a, nil
	}
	a, err := st.t.account(c.Account)
	if err != nil {
		var ref *refusal
		if errors.As(err, &ref) {
			st.res.Parked = append(st.res.Parked, ParkedCharge{Charge: c, Error: ref.code, Message: ref.msg})
			return nil, nil
		}
		return nil, err
	}
	st.touched[c.Account] = a
	return a, nil
}

// charge moves c's amount from a's hold in the region to revenue, the
// hold's parts consumed in spend order (the hold account is one ledger
// account, the parts say which grant the credit came from); a short hold
// is topped up from the buckets first (topUp), and what they cannot cover
// is a shortfall.
func (st *settlement) charge(a *Account, c Charge) error {
	t, s := st.t, st.s
	hold, err := t.readHold(a.ID, s.Region)
	if err != nil {
		return err
	}
	remaining := c.Amount
	for _, bk := range SpendOrder {
		take := min(hold.Parts[bk], remaining)
		hold.Parts[bk] -= take
		remaining -= take
	}
	if remaining > 0 {
		if remaining, err = st.topUp(a, remaining); err != nil {
			return err
		}
	}
	charged := c.Amount - remaining
	if remaining > 0 {
		st.res.Shortfall += remaining
	}
	if err := t.transfer(HoldAccount(a.ID, s.Region), SysRevenue, charged, KindCharge, c.Receipt); err != nil {
		return err
	}
	a.MonthSpent += charged
	st.res.Settled++
	return nil
}

// topUp moves up to remaining from a's buckets into its hold in the
// region, in spend order, and returns what they could not cover.
//
// The hold is short: the ledger took part of it back (a lowered spend
// cap) after the region had spent it, or the region spent while cut off
// past what it held. The call was served: its credit comes from the
// account's buckets, through the hold, so the journal keeps one charge
// per receipt.
func (st *settlement) topUp(a *Account, remaining MC) (MC, error) {
	t := st.t
	parts, _, err := t.spendable(a)
	if err != nil {
		return 0, err
	}
	for _, bk := range SpendOrder {
		take := min(parts[bk], remaining)
		if take <= 0 {
			continue
		}
		if err := t.transfer(BucketAccount(a.ID, bk), HoldAccount(a.ID, st.s.Region), take, KindHold, ""); err != nil {
			return 0, err
		}
		remaining -= take
		st.toppedUp[a.ID] = true
	}
	return remaining, nil
}

// settleAccounts follows up every account charged, in the order of their
// ids: the cap fitted again for one topped up, a recharge marked due for
// one that fell under its threshold, and its hold reported.
func (st *settlement) settleAccounts() error {
	t, s, res := st.t, st.s, st.res
	ids := make([]string, 0, len(st.touched))
	for id := range st.touched {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		a := st.touched[id]
		if st.toppedUp[id] {
			// Spend from the buckets is spend the cap did not see coming:
			// the other regions' holds shrink to fit it.
			if err := t.fitCap(a, res); err != nil {
				return err
			}
		}
		if err := t.markRechargeDue(a); err != nil {
			return err
		}
		bal, err := t.bal(HoldAccount(id, s.Region))
		if err != nil {
			return err
		}
		res.Holds[id] = bal
	}
	return nil
}

// markRechargeDue marks a's recharge due when it is on, not due yet,
// not used up this month, and what a can spend and holds fell under its
// threshold.
func (t *tx) markRechargeDue(a *Account) error {
	if !a.Recharge.On || a.RechargeDue || a.RechargesThisMonth >= a.Recharge.MaxPerMonth {
		return nil
	}
	_, avail, err := t.spendable(a)
	if err != nil {
		return err
	}
	held, err := t.heldTotal(a.ID)
	if err != nil {
		return err
	}
	if avail+held < a.Recharge.UnderCredits {
		a.RechargeDue = true
	}
	return nil
}

// reportRepeated reports the hold of every account with a repeat that no
// charge touched.
func (st *settlement) reportRepeated() error {
	for _, id := range slices.Sorted(maps.Keys(st.dupAccts)) {
		if _, ok := st.res.Holds[id]; ok {
			continue
		}
		bal, err := st.t.bal(HoldAccount(id, st.s.Region))
		if err != nil {
			return err
		}
		st.res.Holds[id] = bal
	}
	return nil
}

func (t *tx) release(r *Release, res *Result) error {
	if r == nil || r.Region == "" || r.Amount < 0 {
		return refuse(ErrCodeInvalid, "release needs a region and a non-negative amount")
	}
	a, err := t.account(r.Account)
	if err != nil {
		return err
	}
	after, err := t.giveBack(a.ID, r.Region, r.Amount)
	if err != nil {
		return err
	}
	res.Holds = map[string]MC{a.ID: after}
	return nil
}

// giveBack moves up to amount (all of it when 0) from the account's hold in
// region back to its buckets and returns the hold's balance after. It gives
// back the credit that would be spent last first, so the hold keeps what the
// spend order wants used soonest.
func (t *tx) giveBack(acct, region string, amount MC) (MC, error) {
	hold, err := t.readHold(acct, region)
	if err != nil {
		return 0, err
	}
	bal, err := t.bal(HoldAccount(acct, region))
	if err != nil {
		return 0, err
	}
	if amount == 0 || amount > bal {
		amount = bal
	}
	for i := len(SpendOrder) - 1; i >= 0 && amount > 0; i-- {
		bk := SpendOrder[i]
		give := min(hold.Parts[bk], amount)
		if give <= 0 {
			continue
		}
		if err := t.transfer(HoldAccount(acct, region), BucketAccount(acct, bk), give, KindRelease, ""); err != nil {
			return 0, err
		}
		hold.Parts[bk] -= give
		amount -= give
	}
	return t.bal(HoldAccount(acct, region))
}

// fitCap gives back what the account's holds hold beyond its spend cap, so
// a lowered cap holds from the next call in every region, not from when
// each region's hold next grows. The largest holds give first (ties in
// region order). Each changed hold is reported in res.Reduced; the holds
// client of that region learns it from its replica (State.OnHoldsReduced).
func (t *tx) fitCap(a *Account, res *Result) error {
	if a.SpendCapMC <= 0 {
		return nil
	}
	held, err := t.heldTotal(a.ID)
	if err != nil {
		return err
	}
	excess := a.MonthSpent + held - a.SpendCapMC
	if excess <= 0 {
		return nil
	}
	type regionHold struct {
		region string
		bal    MC
	}
	var hs []regionHold
	err = t.r.Scan(prefixHolds(a.ID), nil, func(k, _ []byte) (bool, error) {
		hs = append(hs, regionHold{region: string(k[len(prefixHolds(a.ID)):])})
		return true, nil
	})
	if err != nil {
		return err
	}
	for i := range hs {
		if hs[i].bal, err = t.bal(HoldAccount(a.ID, hs[i].region)); err != nil {
			return err
		}
	}
	sort.SliceStable(hs, func(i, j int) bool {
		if hs[i].bal != hs[j].bal {
			return hs[i].bal > hs[j].bal
		}
		return hs[i].region < hs[j].region
	})
	for _, h := range hs {
		if excess <= 0 {
			break
		}
		give := min(h.bal, excess)
		if give <= 0 {
			continue
		}
		after, err := t.giveBack(a.ID, h.region, give)
		if err != nil {
			return err
		}
		excess -= give
		res.Reduced = append(res.Reduced, HoldBalance{Account: a.ID, Region: h.region, Balance: after})
	}
	return nil
}

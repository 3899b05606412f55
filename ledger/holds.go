package ledger

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/trawlhq/trawl/internal/store"
)

// Command is one change to the ledger, replicated through Raft. Everything
// Apply needs travels inside it — the time, the ids, the amounts — so every
// replica computes the same state. ID makes it idempotent: a command applied
// once is never applied again, its stored Result is returned instead.
type Command struct {
	ID   string    `json:"id"`
	Type string    `json:"type"`
	Time time.Time `json:"time"`

	CreateAccount *CreateAccount `json:"create_account,omitempty"`
	AddKey        *Key           `json:"add_key,omitempty"`
	RevokeKey     *RevokeKey     `json:"revoke_key,omitempty"`
	Grant         *Grant         `json:"grant,omitempty"`
	Hold          *HoldRequest   `json:"hold,omitempty"`
	Settle        *Settle        `json:"settle,omitempty"`
	Release       *Release       `json:"release,omitempty"`
	Settings      *Settings      `json:"settings,omitempty"`
	ResetMonth    *ResetMonth    `json:"reset_month,omitempty"`
	Topup         *Topup         `json:"topup,omitempty"`
	ExpirePass    *ExpirePass    `json:"expire_pass,omitempty"`
	RechargeDone  *RechargeDone  `json:"recharge_done,omitempty"`
	SetPeer       *Peer          `json:"set_peer,omitempty"`
}

// Command types.
const (
	CmdCreateAccount = "create_account"
	CmdAddKey        = "add_key"
	CmdRevokeKey     = "revoke_key"
	CmdGrant         = "grant"
	CmdHold          = "hold"
	CmdSettle        = "settle"
	CmdRelease       = "release"
	CmdSettings      = "settings"
	CmdResetMonth    = "reset_month"
	CmdTopup         = "topup"
	CmdExpirePass    = "expire_pass"
	CmdRechargeDone  = "recharge_done"
	CmdSetPeer       = "set_peer"
)

type CreateAccount struct {
	Account string `json:"account"`
	Email   string `json:"email,omitempty"`
	Plan    string `json:"plan"`
}

type RevokeKey struct {
	KeyID string `json:"key_id"`
}

// Grant gives free credit into a bucket (sign-up, monthly, pass).
type Grant struct {
	Account string `json:"account"`
	Bucket  string `json:"bucket"`
	Amount  MC     `json:"amount_mc"`
	// PassExpires is required for the pass bucket.
	PassExpires time.Time `json:"pass_expires,omitzero"`
}

// HoldRequest moves up to Want from the account's buckets into the region's
// hold, never more than the balance or the spend cap left.
type HoldRequest struct {
	Account string `json:"account"`
	Region  string `json:"region"`
	Want    MC     `json:"want_mc"`
}

// Settle charges what a region spent from its holds. Each charge is applied
// at most once per receipt id, however often it is sent.
//
// A holds client also sends its journal's Epoch and each charge's Seq: its
// charges are settled in sequence order, so a charge at or below the
// highest sequence already settled for that epoch is a repeat, found without
// a lookup per receipt. Charges without them are checked by receipt.
type Settle struct {
	Region  string   `json:"region"`
	Epoch   string   `json:"epoch,omitempty"`
	Charges []Charge `json:"charges"`
}

// Charge is one metered call.
type Charge struct {
	Account string    `json:"account"`
	Receipt string    `json:"receipt"`
	Amount  MC        `json:"amount_mc"`
	Time    time.Time `json:"time"`
	Seq     uint64    `json:"seq,omitempty"` // position in the region's journal
}

// Release returns held credit to the account's buckets (Amount 0: all).
type Release struct {
	Account string `json:"account"`
	Region  string `json:"region"`
	Amount  MC     `json:"amount_mc"`
}

// Settings changes the spend cap and auto-recharge; nil fields stay.
type Settings struct {
	Account    string    `json:"account"`
	SpendCapMC *MC       `json:"spend_cap_mc,omitempty"`
	Recharge   *Recharge `json:"recharge,omitempty"`
}

// ResetMonth starts a calendar month: each account's unspent monthly credit
// lapses, the plan's monthly credit is granted, month counters restart. Sent
// by the leader's billing loop on the 1st (not a timer inside Apply).
type ResetMonth struct {
	Month   string        `json:"month"` // "2026-12"
	Credits map[string]MC `json:"credits"`
}

// Topup credits a paid pack. PaymentID makes it idempotent.
type Topup struct {
	Account   string `json:"account"`
	PaymentID string `json:"payment_id"`
	USD       int    `json:"usd"`
	Credits   MC     `json:"credits_mc"`
	Recharge  bool   `json:"recharge,omitempty"` // an auto-recharge
}

// ExpirePass lapses the pass bucket once its time has come.
type ExpirePass struct {
	Account string `json:"account"`
}

// RechargeDone clears an auto-recharge that was due (paid or not).
type RechargeDone struct {
	Account string `json:"account"`
}

// Result is what Apply returns (and stores under the command's id).
type Result struct {
	Index     uint64 `json:"index"`
	Duplicate bool   `json:"duplicate,omitempty"`
	// Error is a refusal: nothing but the command's result was written.
	Error   string `json:"error,omitempty"`
	Message string `json:"message,omitempty"`

	Granted MC     `json:"granted_mc,omitempty"` // hold: moved into the hold
	Reason  string `json:"reason,omitempty"`     // hold short of Want: no_credit or spend_cap
	// Holds are the hold balances after a hold, settle or release, per
	// account, for the region of the command.
	Holds      map[string]MC `json:"holds,omitempty"`
	Settled    int           `json:"settled,omitempty"`
	Duplicates int           `json:"duplicates,omitempty"`
	// Shortfall is charged credit a hold could not cover. The holds client
	// never lets it happen; audit reports it.
	Shortfall MC `json:"shortfall_mc,omitempty"`
}

// Refusal codes.
const (
	ErrCodeNoAccount = "no_such_account"
	ErrCodeExists    = "exists"
	ErrCodeInvalid   = "invalid"
	ErrCodeNoKey     = "no_such_key"
)

// Hold shortfall reasons (spec section 7).
const (
	ReasonNoCredit = "no_credit"
	ReasonSpendCap = "spend_cap"
)

type refusal struct{ code, msg string }

func (r *refusal) Error() string { return r.code + ": " + r.msg }

func refuse(code, format string, args ...any) error {
	return &refusal{code: code, msg: fmt.Sprintf(format, args...)}
}

// tx applies one command: it reads the committed state (r), keeps what it
// changes in write-back caches so reads see its own writes without an
// indexed batch, and writes everything to b at flush.
type tx struct {
	r    reader
	b    *store.Batch
	meta *Meta
	cmd  *Command
	n    int // entries written by this command

	bals     map[string]MC
	accts    map[string]*Account
	holds    map[string]*Hold // by acct + "/" + region
	receipts map[string]bool  // charged by this command
}

func (t *tx) bal(acct string) (MC, error) {
	if v, ok := t.bals[acct]; ok {
		return v, nil
	}
	v, err := balance(t.r, acct)
	if err != nil {
		return 0, err
	}
	t.bals[acct] = v
	return v, nil
}

func (t *tx) exists(key []byte) (bool, error) {
	_, err := t.r.Get(key)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// flush writes the cached balances, accounts and holds to the batch, in
// key order.
func (t *tx) flush() {
	for _, k := range slices.Sorted(maps.Keys(t.bals)) {
		t.b.Set(keyBal(k), encodeBal(t.bals[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(t.accts)) {
		t.putJSON(keyAccount(k), t.accts[k])
	}
	for _, k := range slices.Sorted(maps.Keys(t.holds)) {
		t.putJSON([]byte(store.PrefixLedger+"hold/"+k), t.holds[k])
	}
}

// apply runs cmd against the state in r at raft index, writing to b and
// updating meta. It is deterministic: it reads only the batch and the
// command. On a refusal (Result.Error set) the caller must discard b and
// keep its own copy of meta: a refused command changes nothing.
func apply(r reader, b *store.Batch, meta *Meta, cmd *Command, index uint64) (*Result, error) {
	var prev Result
	if ok, err := getJSON(r, keyCommand(cmd.ID), &prev); err != nil {
		return nil, err
	} else if ok {
		prev.Duplicate = true
		return &prev, nil
	}
	t := &tx{r: r, b: b, meta: meta, cmd: cmd, bals: map[string]MC{}, accts: map[string]*Account{},
		holds: map[string]*Hold{}, receipts: map[string]bool{}}
	res := &Result{Index: index}
	var err error
	switch cmd.Type {
	case CmdCreateAccount:
		err = t.createAccount(cmd.CreateAccount)
	case CmdAddKey:
		err = t.addKey(cmd.AddKey)
	case CmdRevokeKey:
		err = t.revokeKey(cmd.RevokeKey)
	case CmdGrant:
		err = t.grant(cmd.Grant)
	case CmdHold:
		err = t.hold(cmd.Hold, res)
	case CmdSettle:
		err = t.settle(cmd.Settle, res)
	case CmdRelease:
		err = t.release(cmd.Release, res)
	case CmdSettings:
		err = t.settings(cmd.Settings)
	case CmdResetMonth:
		err = t.resetMonth(cmd.ResetMonth)
	case CmdTopup:
		err = t.topup(cmd.Topup)
	case CmdExpirePass:
		err = t.expirePass(cmd.ExpirePass)
	case CmdRechargeDone:
		err = t.rechargeDone(cmd.RechargeDone)
	case CmdSetPeer:
		err = t.setPeer(cmd.SetPeer)
	default:
		err = refuse(ErrCodeInvalid, "unknown command type %q", cmd.Type)
	}
	var ref *refusal
	if errors.As(err, &ref) {
		return &Result{Index: index, Error: ref.code, Message: ref.msg}, nil
	}
	if err == nil {
		t.flush()
	}
	return res, err
}

func (t *tx) putJSON(key []byte, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("ledger: encode %s: %v", key, err)) // our own types always encode
	}
	t.b.Set(key, b)
}

// transfer moves amount from debit to credit and journals it.
func (t *tx) transfer(debit, credit string, amount MC, kind, receipt string) error {
	if amount <= 0 {
		return nil
	}
	db, err := t.bal(debit)
	if err != nil {
		return err
	}
	cb, err := t.bal(credit)
	if err != nil {
		return err
	}
	t.bals[debit], t.bals[credit] = db-amount, cb+amount
	t.meta.Entries++
	t.n++
	e := Entry{
		Index:    t.meta.Entries,
		ID:       fmt.Sprintf("%s/%d", t.cmd.ID, t.n),
		Debit:    debit,
		Credit:   credit,
		Amount:   amount,
		Kind:     kind,
		Receipt:  receipt,
		Time:     t.cmd.Time.UTC(),
		PrevHash: t.meta.LastHash,
	}
	if e.PrevHash == "" {
		e.PrevHash = GenesisHash
	}
	e.Hash = e.ComputeHash()
	t.meta.LastHash = e.Hash
	t.putJSON(keyJournal(e.Index), &e)
	return nil
}

// account returns the account for changing: changes are written at flush.
func (t *tx) account(id string) (*Account, error) {
	if a, ok := t.accts[id]; ok {
		return a, nil
	}
	var a Account
	ok, err := getJSON(t.r, keyAccount(id), &a)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, refuse(ErrCodeNoAccount, "no account %q", id)
	}
	t.accts[id] = &a
	return &a, nil
}

func (t *tx) createAccount(c *CreateAccount) error {
	if c == nil || c.Account == "" {
		return refuse(ErrCodeInvalid, "create_account needs an account id")
	}
	if c.Plan != PlanFree && c.Plan != PlanSupporter {
		return refuse(ErrCodeInvalid, "plan must be free or supporter")
	}
	if ok, err := t.exists(keyAccount(c.Account)); err != nil {
		return err
	} else if ok {
		return refuse(ErrCodeExists, "account %q exists", c.Account)
	}
	t.accts[c.Account] = (&Account{
		ID: c.Account, Email: c.Email, Plan: c.Plan, CreatedAt: t.cmd.Time.UTC(),
		Month: t.cmd.Time.UTC().Format("2006-01"),
	})
	return nil
}

func (t *tx) addKey(k *Key) error {
	if k == nil || k.ID == "" || len(k.Hash) != 64 || k.Account == "" {
		return refuse(ErrCodeInvalid, "add_key needs id, account and a sha-256 hash")
	}
	if k.Role != RoleUser && k.Role != RoleAuditor {
		return refuse(ErrCodeInvalid, "role must be user or auditor")
	}
	if _, err := t.account(k.Account); err != nil {
		return err
	}
	if ok, err := t.exists(keyKeyID(k.ID)); err != nil {
		return err
	} else if ok {
		return refuse(ErrCodeExists, "key %q exists", k.ID)
	}
	kk := *k
	kk.CreatedAt = t.cmd.Time.UTC()
	t.putJSON(keyKey(k.Hash), &kk)
	t.b.Set(keyKeyID(k.ID), []byte(k.Hash))
	return nil
}

func (t *tx) revokeKey(r *RevokeKey) error {
	if r == nil {
		return refuse(ErrCodeInvalid, "revoke_key needs key_id")
	}
	h, err := t.r.Get(keyKeyID(r.KeyID))
	if errors.Is(err, store.ErrNotFound) {
		return refuse(ErrCodeNoKey, "no key %q", r.KeyID)
	} else if err != nil {
		return err
	}
	var k Key
	if _, err := getJSON(t.r, keyKey(string(h)), &k); err != nil {
		return err
	}
	k.Revoked = true
	t.putJSON(keyKey(k.Hash), &k)
	return nil
}

func (t *tx) grant(g *Grant) error {
	if g == nil || g.Amount <= 0 {
		return refuse(ErrCodeInvalid, "grant needs a positive amount")
	}
	a, err := t.account(g.Account)
	if err != nil {
		return err
	}
	switch g.Bucket {
	case BucketSignup, BucketMonthly:
	case BucketPass:
		if g.PassExpires.IsZero() {
			return refuse(ErrCodeInvalid, "a pass grant needs pass_expires")
		}
		a.PassExpires = g.PassExpires.UTC()
	default:
		return refuse(ErrCodeInvalid, "grants go to the signup, monthly or pass bucket, not %q", g.Bucket)
	}
	return t.transfer(SysGrants, BucketAccount(a.ID, g.Bucket), g.Amount, KindGrant, t.cmd.ID)
}

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

func (t *tx) settle(s *Settle, res *Result) error {
	if s == nil || s.Region == "" {
		return refuse(ErrCodeInvalid, "settle needs a region")
	}
	res.Holds = map[string]MC{}
	touched := map[string]*Account{}
	dupAccts := map[string]bool{} // accounts with repeats: their holds are reported too
	var mark uint64               // highest sequence settled for the epoch
	if s.Epoch != "" {
		if b, err := t.r.Get(keyMark(s.Region, s.Epoch)); err == nil {
			mark = binary.BigEndian.Uint64(b)
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	for _, c := range s.Charges {
		if c.Receipt == "" || c.Amount < 0 {
			return refuse(ErrCodeInvalid, "every charge needs a receipt and a non-negative amount")
		}
		if s.Epoch != "" && c.Seq > 0 {
			if c.Seq <= mark {
				res.Duplicates++
				dupAccts[c.Account] = true
				continue
			}
			mark = c.Seq
			// Recorded (not looked up): a resend by receipt finds it.
			t.b.Set(keyReceipt(c.Receipt), fmt.Appendf(nil, "%d", t.meta.Entries+1))
		} else {
			if t.receipts[c.Receipt] {
				res.Duplicates++
				dupAccts[c.Account] = true
				continue
			}
			if ok, err := t.exists(keyReceipt(c.Receipt)); err != nil {
				return err
			} else if ok {
				res.Duplicates++
				dupAccts[c.Account] = true
				continue
			}
			t.receipts[c.Receipt] = true
			t.b.Set(keyReceipt(c.Receipt), fmt.Appendf(nil, "%d", t.meta.Entries+1))
		}
		a := touched[c.Account]
		if a == nil {
			var err error
			if a, err = t.account(c.Account); err != nil {
				return err
			}
			touched[c.Account] = a
		}
		hold, err := t.readHold(a.ID, s.Region)
		if err != nil {
			return err
		}
		// Consume the hold's parts in spend order; the hold account is one
		// ledger account, the parts say which grant the credit came from.
		remaining := c.Amount
		for _, bk := range SpendOrder {
			take := min(hold.Parts[bk], remaining)
			hold.Parts[bk] -= take
			remaining -= take
		}
		charged := c.Amount - remaining
		if remaining > 0 {
			res.Shortfall += remaining
		}
		if err := t.transfer(HoldAccount(a.ID, s.Region), SysRevenue, charged, KindCharge, c.Receipt); err != nil {
			return err
		}
		a.MonthSpent += charged
		res.Settled++
	}
	if s.Epoch != "" {
		t.b.Set(keyMark(s.Region, s.Epoch), binary.BigEndian.AppendUint64(nil, mark))
	}
	ids := make([]string, 0, len(touched))
	for id := range touched {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		a := touched[id]
		if a.Recharge.On && !a.RechargeDue && a.RechargesThisMonth < a.Recharge.MaxPerMonth {
			_, avail, err := t.spendable(a)
			if err != nil {
				return err
			}
			held, err := t.heldTotal(id)
			if err != nil {
				return err
			}
			if avail+held < a.Recharge.UnderCredits {
				a.RechargeDue = true
			}
		}
		bal, err := t.bal(HoldAccount(id, s.Region))
		if err != nil {
			return err
		}
		res.Holds[id] = bal
	}
	for _, id := range slices.Sorted(maps.Keys(dupAccts)) {
		if _, ok := res.Holds[id]; ok {
			continue
		}
		bal, err := t.bal(HoldAccount(id, s.Region))
		if err != nil {
			return err
		}
		res.Holds[id] = bal
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
	hold, err := t.readHold(a.ID, r.Region)
	if err != nil {
		return err
	}
	bal, err := t.bal(HoldAccount(a.ID, r.Region))
	if err != nil {
		return err
	}
	amount := r.Amount
	if amount == 0 || amount > bal {
		amount = bal
	}
	// Give back the credit that would be spent last first, so the hold keeps
	// what the spend order wants used soonest.
	for i := len(SpendOrder) - 1; i >= 0 && amount > 0; i-- {
		bk := SpendOrder[i]
		give := min(hold.Parts[bk], amount)
		if give <= 0 {
			continue
		}
		if err := t.transfer(HoldAccount(a.ID, r.Region), BucketAccount(a.ID, bk), give, KindRelease, ""); err != nil {
			return err
		}
		hold.Parts[bk] -= give
		amount -= give
	}
	after, err := t.bal(HoldAccount(a.ID, r.Region))
	if err != nil {
		return err
	}
	res.Holds = map[string]MC{a.ID: after}
	return nil
}

func (t *tx) settings(s *Settings) error {
	if s == nil {
		return refuse(ErrCodeInvalid, "settings needs a body")
	}
	a, err := t.account(s.Account)
	if err != nil {
		return err
	}
	if s.SpendCapMC != nil {
		if *s.SpendCapMC < 0 {
			return refuse(ErrCodeInvalid, "spend_cap_mc must be 0 (no cap) or positive")
		}
		a.SpendCapMC = *s.SpendCapMC
	}
	if s.Recharge != nil {
		r := *s.Recharge
		if r.On && (r.UnderCredits <= 0 || r.PackUSD <= 0 || r.MaxPerMonth <= 0) {
			return refuse(ErrCodeInvalid, "auto-recharge needs under_credits, pack_usd and max_per_month")
		}
		a.Recharge = r
	}
	return nil
}

func (t *tx) resetMonth(r *ResetMonth) error {
	if r == nil || len(r.Month) != 7 || !strings.Contains(r.Month, "-") {
		return refuse(ErrCodeInvalid, "reset_month needs a month like 2026-12")
	}
	if r.Month <= t.meta.Month {
		return refuse(ErrCodeExists, "month %s already started", r.Month)
	}
	var ids []string
	err := t.r.Scan(prefixAccounts(), nil, func(k, _ []byte) (bool, error) {
		ids = append(ids, string(k[len(prefixAccounts()):]))
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, id := range ids { // key order: deterministic
		a, err := t.account(id)
		if err != nil {
			return err
		}
		left, err := t.bal(BucketAccount(id, BucketMonthly))
		if err != nil {
			return err
		}
		if err := t.transfer(BucketAccount(id, BucketMonthly), SysExpired, left, KindExpire, ""); err != nil {
			return err
		}
		if err := t.transfer(SysGrants, BucketAccount(id, BucketMonthly), r.Credits[a.Plan], KindGrant, t.cmd.ID); err != nil {
			return err
		}
		a.Month, a.MonthSpent, a.RechargesThisMonth = r.Month, 0, 0
	}
	t.meta.Month = r.Month
	return nil
}

func (t *tx) topup(p *Topup) error {
	if p == nil || p.PaymentID == "" || p.Credits <= 0 {
		return refuse(ErrCodeInvalid, "topup needs a payment id and credits")
	}
	if ok, err := t.exists(keyPayment(p.PaymentID)); err != nil {
		return err
	} else if ok {
		return nil // this payment was credited already
	}
	a, err := t.account(p.Account)
	if err != nil {
		return err
	}
	if err := t.transfer(SysPayments, BucketAccount(a.ID, BucketPack), p.Credits, KindTopup, p.PaymentID); err != nil {
		return err
	}
	t.b.Set(keyPayment(p.PaymentID), fmt.Appendf(nil, "%d", t.meta.Entries))
	a.Plan = PlanSupporter
	if p.Recharge {
		a.RechargesThisMonth++
		a.RechargeDue = false
	}
	return nil
}

func (t *tx) expirePass(e *ExpirePass) error {
	if e == nil {
		return refuse(ErrCodeInvalid, "expire_pass needs an account")
	}
	a, err := t.account(e.Account)
	if err != nil {
		return err
	}
	if a.PassExpires.IsZero() || t.cmd.Time.Before(a.PassExpires) {
		return refuse(ErrCodeInvalid, "the pass of %q has not expired", a.ID)
	}
	left, err := t.bal(BucketAccount(a.ID, BucketPass))
	if err != nil {
		return err
	}
	return t.transfer(BucketAccount(a.ID, BucketPass), SysExpired, left, KindExpire, "")
}

func (t *tx) rechargeDone(r *RechargeDone) error {
	if r == nil {
		return refuse(ErrCodeInvalid, "recharge_done needs an account")
	}
	a, err := t.account(r.Account)
	if err != nil {
		return err
	}
	a.RechargeDue = false
	return nil
}

// setPeer records a voter's addresses, so every node can forward to it when
// it leads.
func (t *tx) setPeer(p *Peer) error {
	if p == nil || p.ID == "" || p.RaftAddr == "" || p.APIAddr == "" {
		return refuse(ErrCodeInvalid, "set_peer needs id, raft and api")
	}
	t.putJSON(keyPeer(p.ID), p)
	return nil
}

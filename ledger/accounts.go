package ledger

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/trawlhq/trawl/internal/store"
)

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
	if c.Email != "" {
		t.b.Set(keyEmail(c.Email, c.Account), nil)
	}
	return nil
}

func (t *tx) addKey(k *Key) error {
	if k == nil || k.ID == "" || len(k.Hash) != 64 || k.Account == "" {
		return refuse(ErrCodeInvalid, "add_key needs id, account and a sha-256 hash")
	}
	if k.Role != RoleUser && k.Role != RoleAuditor && k.Role != RoleOperator {
		return refuse(ErrCodeInvalid, "role must be user, auditor or operator")
	}
	if _, err := t.account(k.Account); err != nil {
		return err
	}
	if len(k.Name) > 64 {
		return refuse(ErrCodeInvalid, "a key's name is at most 64 bytes")
	}
	if ok, err := t.exists(keyKeyID(k.ID)); err != nil {
		return err
	} else if ok {
		return refuse(ErrCodeExists, "key %q exists", k.ID)
	}
	if k.MaxActive > 0 {
		n := 0
		err := t.r.Scan(prefixAcctKeys(k.Account), nil, func(_, hash []byte) (bool, error) {
			var have Key
			if ok, err := getJSON(t.r, keyKey(string(hash)), &have); err != nil || !ok {
				return false, err
			}
			if !have.Revoked && (have.ExpiresAt.IsZero() || t.cmd.Time.Before(have.ExpiresAt)) {
				n++
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		if n >= k.MaxActive {
			return refuse(ErrCodeKeyLimit, "the account has %d active keys; its plan allows %d", n, k.MaxActive)
		}
	}
	kk := *k
	kk.CreatedAt = t.cmd.Time.UTC()
	kk.MaxActive = 0
	t.putJSON(keyKey(k.Hash), &kk)
	t.b.Set(keyKeyID(k.ID), []byte(k.Hash))
	t.b.Set(keyAcctKey(k.Account, k.ID), []byte(k.Hash))
	return nil
}

func (t *tx) setCustomer(c *SetCustomer) error {
	if c == nil || c.CustomerID == "" || len(c.CustomerID) > 255 {
		return refuse(ErrCodeInvalid, "set_customer needs an account and a customer id of at most 255 bytes")
	}
	a, err := t.account(c.Account)
	if err != nil {
		return err
	}
	a.ProviderCustomerID = c.CustomerID
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

func (t *tx) settings(s *Settings, res *Result) error {
	if s == nil {
		return refuse(ErrCodeInvalid, "settings needs a body")
	}
	a, err := t.account(s.Account)
	if err != nil {
		return err
	}
	if v := s.WebhookSecret; v != nil && !validWebhookSecret(*v) {
		return refuse(ErrCodeInvalid, "webhook_secret must be %d to %d printable ASCII characters", MinWebhookSecret, MaxWebhookSecret)
	}
	if s.SpendCapMC != nil {
		if *s.SpendCapMC < 0 {
			return refuse(ErrCodeInvalid, "spend_cap_mc must be 0 (no cap) or positive")
		}
		a.SpendCapMC = *s.SpendCapMC
		if err := t.fitCap(a, res); err != nil {
			return err
		}
	}
	if s.Recharge != nil {
		r := *s.Recharge
		if r.On && (r.UnderCredits <= 0 || r.PackUSD <= 0 || r.MaxPerMonth <= 0) {
			return refuse(ErrCodeInvalid, "auto-recharge needs under_credits, pack_usd and max_per_month")
		}
		a.Recharge = r
	}
	if v := s.WebhookSecret; v != nil {
		if !s.WebhookSecretIfUnset || a.WebhookSecret == "" {
			a.WebhookSecret = *v
		}
	}
	return nil
}

func validWebhookSecret(v string) bool {
	return len(v) >= MinWebhookSecret && len(v) <= MaxWebhookSecret &&
		!strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r > '~' })
}

func (t *tx) resetMonth(r *ResetMonth) error {
	if r == nil || len(r.Month) != 7 || !strings.Contains(r.Month, "-") {
		return refuse(ErrCodeInvalid, "reset_month needs a month like 2026-12")
	}
	if r.Credits != nil {
		if err := t.setPlans(&Plans{Monthly: r.Credits}); err != nil {
			return err
		}
	}
	if r.Month <= t.meta.Month {
		return nil // started already (by this command's time, or before)
	}
	return t.startMonth(r.Month)
}

func (t *tx) setPlans(p *Plans) error {
	if p == nil {
		return refuse(ErrCodeInvalid, "set_plans needs the plans")
	}
	for plan, v := range p.Monthly {
		if v < 0 {
			return refuse(ErrCodeInvalid, "the monthly credit of %s is negative", plan)
		}
	}
	cp := &Plans{Monthly: maps.Clone(p.Monthly)}
	t.plans = cp
	t.putJSON(keyPlans, cp)
	return nil
}

// rollMonth starts the month of the command's time when it is later than
// the ledger's month. A ledger without a month (new, or from before months
// turned here) takes the command's month and changes nothing else: spend
// already counted stays counted. Commands without a time never turn it.
func (t *tx) rollMonth() error {
	if t.cmd.Time.IsZero() {
		return nil
	}
	m := t.cmd.Time.UTC().Format("2006-01")
	if t.meta.Month == "" {
		t.meta.Month = m
		return nil
	}
	if m <= t.meta.Month {
		return nil
	}
	return t.startMonth(m)
}

// startMonth starts month m: each account's unspent monthly credit lapses,
// its plan's monthly credit is granted, its month counters restart. Accounts
// in key order: deterministic.
func (t *tx) startMonth(m string) error {
	plans := t.plans
	if plans == nil {
		plans = &Plans{}
		if _, err := getJSON(t.r, keyPlans, plans); err != nil {
			return err
		}
	}
	var ids []string
	err := t.r.Scan(prefixAccounts(), nil, func(k, _ []byte) (bool, error) {
		ids = append(ids, string(k[len(prefixAccounts()):]))
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(t.accts)) { // created by this command
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
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
		if err := t.transfer(SysGrants, BucketAccount(id, BucketMonthly), plans.Monthly[a.Plan], KindGrant, "month/"+m); err != nil {
			return err
		}
		a.Month, a.MonthSpent, a.RechargesThisMonth = m, 0, 0
	}
	t.meta.Month = m
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
	if p.CustomerID != "" && len(p.CustomerID) <= 255 {
		a.ProviderCustomerID = p.CustomerID
	}
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

// compact drops the records kept only to answer repeats from before
// c.Before: stored command results and the receipts of settles without an
// epoch. Before is in the command, so every replica drops the same keys. A
// command repeated after its result is gone applies again: the sender
// picks Before well past any retry (the billing loop keeps 7 days). Settles
// from a holds client are deduplicated by their marks, which stay.
func (t *tx) compact(c *Compact, res *Result) error {
	if c == nil || c.Before.IsZero() {
		return refuse(ErrCodeInvalid, "compact needs before")
	}
	n := 0
	for _, idx := range []struct {
		prefix string
		key    func(string) []byte
	}{{prefixCommandTimes, keyCommand}, {prefixReceiptTimes, keyReceipt}} {
		end := keyTimed(idx.prefix, c.Before, "")
		err := t.r.Scan([]byte(idx.prefix), nil, func(k, _ []byte) (bool, error) {
			if string(k) >= string(end) {
				return false, nil
			}
			t.b.Delete(k)
			t.b.Delete(idx.key(string(k[len(idx.prefix)+8:])))
			n++
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	res.Compacted = n
	return nil
}

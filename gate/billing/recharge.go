package billing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/trawlhq/trawl/gate/payments"
	"github.com/trawlhq/trawl/ledger"
)

// RechargeReport is what one RunRecharges pass did.
type RechargeReport struct {
	Due     int // accounts found with RechargeDue
	Paid    int // charged and credited
	Refused int // card declined or missing: cleared with RechargeDone
	Skipped int // recharge off, monthly limit reached or pack gone: cleared
	// Errors are accounts left due for the next pass (provider or ledger
	// unreachable).
	Errors []error
}

// RunRecharges makes one pass over the accounts whose settle left them
// RechargeDue: it charges the saved card for the account's pack with the
// idempotency key recharge/<account>/<month>/<n> (n: this month's
// recharge number) and submits Topup{Recharge: true}, or RechargeDone when
// the card does not pay, recharge is off, the month's limit is reached or
// the pack no longer exists. An account whose charge or credit fails for
// any other reason stays due and is retried by the next pass with the same
// key, so it is never charged twice for one recharge.
//
// Run it on the leader only (the ledger's billing loop); two regions running
// it at once would still make one payment per key.
//
// The ledger has no index of due accounts yet, so this scans the journal for
// accounts that ever held credit (only a settle of held credit makes an
// account due): O(journal) per pass.
func RunRecharges(ctx context.Context, cfg Config) (*RechargeReport, error) {
	cfg = cfg.withDefaults()
	var due []*ledger.Account
	err := cfg.State.Accounts(func(a *ledger.Account) (bool, error) {
		if a.RechargeDue {
			due = append(due, a)
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("recharges: list accounts: %w", err)
	}
	rep := &RechargeReport{}
	for _, a := range due {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		rep.Due++
		if err := recharge(ctx, cfg, a, rep); err != nil {
			cfg.Logger.Warn("billing: recharge left due", "account", a.ID, "err", err)
			rep.Errors = append(rep.Errors, fmt.Errorf("account %s: %w", a.ID, err))
		}
	}
	return rep, nil
}

func recharge(ctx context.Context, cfg Config, a *ledger.Account, rep *RechargeReport) error {
	n := a.RechargesThisMonth + 1
	pack, packOK := cfg.CurrentPrices().Pack(a.Recharge.PackUSD)
	switch {
	case !a.Recharge.On, a.RechargesThisMonth >= a.Recharge.MaxPerMonth:
		rep.Skipped++
		return rechargeDone(ctx, cfg, a, n, "off or monthly limit reached")
	case !packOK:
		rep.Skipped++
		return rechargeDone(ctx, cfg, a, n, fmt.Sprintf("pack $%d is not in the price table", a.Recharge.PackUSD))
	case cfg.Provider == nil:
		rep.Skipped++
		return rechargeDone(ctx, cfg, a, n, "no payment provider")
	}
	paid, err := cfg.Provider.ChargeSaved(ctx, payments.Charge{
		AccountID:      a.ID,
		USD:            pack.USD,
		Credits:        int64(pack.Credits),
		IdempotencyKey: RechargeKey(a.ID, a.Month, n),
		Customer:       payments.Customer{AccountID: a.ID, Email: a.Email, ProviderCustomerID: a.ProviderCustomerID},
	})
	switch {
	case errors.Is(err, payments.ErrCardDeclined), errors.Is(err, payments.ErrNoSavedCard),
		errors.Is(err, payments.ErrKeyReused), errors.Is(err, payments.ErrInvalidCharge):
		rep.Refused++
		return rechargeDone(ctx, cfg, a, n, err.Error())
	case err != nil:
		return fmt.Errorf("charge saved card: %w", err)
	}
	if err := credit(ctx, cfg, paid, true); err != nil {
		return fmt.Errorf("credit payment %s: %w", paid.PaymentID, err)
	}
	rep.Paid++
	cfg.Logger.Info("billing: auto-recharge paid", "account", a.ID, "usd", paid.USD, "payment", paid.PaymentID, "n", n)
	return nil
}

// RechargeKey is the idempotency key of an account's n-th auto-recharge in
// month ("2026-11"), hashed when it would be too long for the provider.
func RechargeKey(acct, month string, n int) string {
	k := fmt.Sprintf("recharge/%s/%s/%d", acct, month, n)
	if len(k) <= payments.MaxKeyLen {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return "recharge/h/" + hex.EncodeToString(sum[:])
}

func rechargeDone(ctx context.Context, cfg Config, a *ledger.Account, n int, why string) error {
	cfg.Logger.Info("billing: auto-recharge not paid", "account", a.ID, "n", n, "why", why)
	// A fresh id each time: a later settle may make the account due again
	// for the same n, and that must be clearable too.
	id := fmt.Sprintf("recharge_done/%s/%s/%d/%d", a.ID, a.Month, n, cfg.Now().UnixNano())
	res, err := submit(ctx, cfg, &ledger.Command{ID: id, Type: ledger.CmdRechargeDone, Time: cfg.Now(), RechargeDone: &ledger.RechargeDone{Account: a.ID}})
	if err != nil {
		return fmt.Errorf("recharge_done: %w", err)
	}
	if res.Error != "" {
		return fmt.Errorf("recharge_done refused: %s: %s", res.Error, res.Message)
	}
	return nil
}

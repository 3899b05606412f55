package billing

import (
	"context"
	"fmt"
	"time"

	"github.com/trawlhq/trawl/ledger"
)

// MaintainReport says what one maintenance pass did.
type MaintainReport struct {
	MonthStarted string // "2026-12" when this pass sent reset_month
	PassesLapsed int
	Recharges    *RechargeReport
}

// Maintain is the leader's billing pass, run on a timer by the process that
// hosts the voter (the time-driven part of billing lives here, never inside
// Apply): it starts the calendar month (reset_month on the 1st: the unspent
// monthly credit lapses, the plan's monthly credit is granted), lapses 7-day
// passes whose time has come, and runs due auto-recharges. Every command has
// a fixed id, so a pass repeated by a new leader changes nothing twice.
func Maintain(ctx context.Context, cfg Config) (*MaintainReport, error) {
	cfg = cfg.withDefaults()
	now := cfg.Now().UTC()
	rep := &MaintainReport{}
	month := now.Format("2006-01")
	if cfg.State.Meta().Month < month {
		res, err := submit(ctx, cfg, &ledger.Command{
			ID: "reset_month/" + month, Type: ledger.CmdResetMonth, Time: now,
			ResetMonth: &ledger.ResetMonth{Month: month, Credits: cfg.Prices.MonthlyCredits()},
		})
		if err != nil {
			return rep, fmt.Errorf("reset month %s: %w", month, err)
		}
		if res.Error == "" && !res.Duplicate {
			rep.MonthStarted = month
		}
	}
	var lapsed []*ledger.Account
	err := cfg.State.Accounts(func(a *ledger.Account) (bool, error) {
		if !a.PassExpires.IsZero() && !now.Before(a.PassExpires) {
			if v, err := cfg.State.Balance(ledger.BucketAccount(a.ID, ledger.BucketPass)); err != nil {
				return false, err
			} else if v > 0 {
				lapsed = append(lapsed, a)
			}
		}
		return true, nil
	})
	if err != nil {
		return rep, err
	}
	for _, a := range lapsed {
		res, err := submit(ctx, cfg, &ledger.Command{
			ID: fmt.Sprintf("expire_pass/%s/%d", a.ID, a.PassExpires.Unix()), Type: ledger.CmdExpirePass, Time: now,
			ExpirePass: &ledger.ExpirePass{Account: a.ID},
		})
		if err != nil {
			return rep, fmt.Errorf("expire pass of %s: %w", a.ID, err)
		}
		if res.Error == "" {
			rep.PassesLapsed++
		}
	}
	rep.Recharges, err = RunRecharges(ctx, cfg)
	return rep, err
}

// RunMaintenance calls Maintain every interval while isLeader says this node
// leads, until ctx ends. Errors are logged and retried on the next tick.
func RunMaintenance(ctx context.Context, cfg Config, isLeader func() bool, every time.Duration) {
	cfg = cfg.withDefaults()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if isLeader() {
			if rep, err := Maintain(ctx, cfg); err != nil {
				cfg.Logger.Warn("billing maintenance", "err", err)
			} else if rep.MonthStarted != "" || rep.PassesLapsed > 0 {
				cfg.Logger.Info("billing maintenance", "month_started", rep.MonthStarted, "passes_lapsed", rep.PassesLapsed)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

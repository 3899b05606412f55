package billing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/trawlhq/trawl/ledger"
)

// MaintainReport says what one maintenance pass did.
type MaintainReport struct {
	PlansSet     bool // this pass sent the plans' monthly credits
	PassesLapsed int
	Recharges    *RechargeReport
}

// Maintain is the leader's billing pass, run by the process that hosts the
// voter. The calendar month is not its business: the ledger turns it inside
// Apply, on the first command whose time falls in a later month (the unspent
// monthly credit lapses, the plan's monthly credit is granted), so it turns
// even if this pass never runs. The pass keeps the plans' monthly credits
// the ledger grants equal to the configured prices (set_plans), lapses
// 7-day passes whose time has come, and runs due auto-recharges. Every
// command has a fixed id, so a pass repeated by a new leader changes
// nothing twice.
func Maintain(ctx context.Context, cfg Config) (*MaintainReport, error) {
	cfg = cfg.withDefaults()
	now := cfg.Now().UTC()
	rep := &MaintainReport{}
	want := cfg.CurrentPrices().MonthlyCredits()
	have, err := cfg.State.Plans()
	if err != nil {
		return rep, err
	}
	if !maps.Equal(have.Monthly, want) {
		res, err := submit(ctx, cfg, &ledger.Command{
			ID: "set_plans/" + plansID(want), Type: ledger.CmdSetPlans, Time: now,
			SetPlans: &ledger.Plans{Monthly: want},
		})
		if err != nil {
			return rep, fmt.Errorf("set plans: %w", err)
		}
		rep.PlansSet = res.Error == "" && !res.Duplicate
	}
	// Once an hour, drop the ledger's records of commands older than a
	// week (results kept only to answer repeats); the time is in the
	// command, so every replica drops the same.
	hour := now.Truncate(time.Hour)
	if _, err := submit(ctx, cfg, &ledger.Command{
		ID: "compact/" + hour.Format("2006-01-02T15"), Type: ledger.CmdCompact, Time: now,
		Compact: &ledger.Compact{Before: hour.Add(-CompactAfter)},
	}); err != nil {
		return rep, fmt.Errorf("compact: %w", err)
	}
	var lapsed []*ledger.Account
	err = cfg.State.Accounts(func(a *ledger.Account) (bool, error) {
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

// CompactAfter is how long the ledger keeps a command's result (to answer
// a repeat of it with the same result): far longer than any retry.
const CompactAfter = 7 * 24 * time.Hour

// plansID names a table of monthly credits: the same table, the same id.
func plansID(m map[string]ledger.MC) string {
	h := sha256.New()
	for _, plan := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(h, "%s=%d\n", plan, m[plan])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// RunMaintenance calls Maintain as soon as this node leads (isLeader is
// polled every second) and then every interval while it leads, until ctx
// ends: a leader restarting often still runs it. Errors are logged and
// retried at the next poll.
func RunMaintenance(ctx context.Context, cfg Config, isLeader func() bool, every time.Duration) {
	cfg = cfg.withDefaults()
	t := time.NewTicker(min(every, time.Second))
	defer t.Stop()
	var last time.Time // the last good pass while leading; zero when not leading
	for {
		if !isLeader() {
			last = time.Time{}
		} else if last.IsZero() || time.Since(last) >= every {
			if rep, err := Maintain(ctx, cfg); err != nil {
				cfg.Logger.Warn("billing maintenance", "err", err)
			} else {
				last = time.Now()
				if rep.PlansSet || rep.PassesLapsed > 0 {
					cfg.Logger.Info("billing maintenance", "plans_set", rep.PlansSet, "passes_lapsed", rep.PassesLapsed)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

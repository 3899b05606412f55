package billing

import (
	"context"
	"testing"
	"time"

	"github.com/trawlhq/trawl/gate/payments"
	"github.com/trawlhq/trawl/ledger"
)

func TestMaintainSetsPlansAndLapsesPasses(t *testing.T) {
	e := newEnv(t, payments.LocalConfig{Instant: true})
	now := t0
	cfg := e.cfg
	cfg.Now = func() time.Time { return now }
	ctx := context.Background()
	// A pass that lapses in a week.
	if _, err := e.led.Submit(ctx, &ledger.Command{ID: "pass", Type: ledger.CmdGrant, Time: t0,
		Grant: &ledger.Grant{Account: "acct1", Bucket: ledger.BucketPass, Amount: ledger.Credits(7), PassExpires: t0.Add(7 * 24 * time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	rep, err := Maintain(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.PlansSet || rep.PassesLapsed != 0 {
		t.Fatalf("first pass: %+v", rep)
	}
	plans, err := e.state.Plans()
	if err != nil {
		t.Fatal(err)
	}
	monthly := DefaultPrices().MonthlyCredits()[ledger.PlanFree]
	if plans.Monthly[ledger.PlanFree] != monthly {
		t.Fatalf("plans %+v", plans)
	}
	// The ledger is in the month of its first command: no month started,
	// nothing granted by maintenance.
	if m := e.state.Meta().Month; m != t0.Format("2006-01") {
		t.Fatalf("ledger month %q", m)
	}
	if got := e.bucket("acct1", ledger.BucketMonthly); got != 0 {
		t.Fatalf("monthly %s before any month start", got)
	}
	// Again: nothing new.
	if rep, _ = Maintain(ctx, cfg); rep.PlansSet {
		t.Fatalf("plans sent twice: %+v", rep)
	}
	// Eight days later (still November) the pass has lapsed.
	now = t0.AddDate(0, 0, 8)
	if rep, _ = Maintain(ctx, cfg); rep.PassesLapsed != 1 || e.bucket("acct1", ledger.BucketPass) != 0 {
		t.Fatalf("pass: %+v, left %s", rep, e.bucket("acct1", ledger.BucketPass))
	}
	// December: the first command of the month, whatever it is, turns it;
	// maintenance does not run.
	dec := time.Date(t0.Year(), t0.Month()+1, 1, 0, 0, 1, 0, time.UTC)
	e.ok(ledger.Command{Type: ledger.CmdGrant, Time: dec, Grant: &ledger.Grant{Account: "acct2", Bucket: ledger.BucketSignup, Amount: 1}})
	if got := e.bucket("acct1", ledger.BucketMonthly); got != monthly {
		t.Fatalf("monthly after the month turned %s, want %s", got, monthly)
	}
	if a, _ := e.state.Account("acct1"); a.Month != dec.Format("2006-01") || a.MonthSpent != 0 {
		t.Fatalf("account after the month turned: %+v", a)
	}
	if rep, err := e.state.Audit(); err != nil || !rep.OK() {
		t.Fatalf("audit: %v %v", err, rep.Violations)
	}
}

// RunMaintenance runs a pass as soon as the node leads, not a minute later:
// a gate restarting often still sets the plans.
func TestRunMaintenanceRunsOnLeadership(t *testing.T) {
	e := newEnv(t, payments.LocalConfig{Instant: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunMaintenance(ctx, e.cfg, func() bool { return true }, time.Hour)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := e.state.Plans()
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Monthly) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no maintenance pass within 10 s of leading")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
}

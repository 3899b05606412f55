package billing

import (
	"context"
	"testing"
	"time"

	"github.com/trawlhq/trawl/gate/payments"
	"github.com/trawlhq/trawl/ledger"
)

func TestMaintainStartsMonthsAndLapsesPasses(t *testing.T) {
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
	if rep.MonthStarted != t0.Format("2006-01") || rep.PassesLapsed != 0 {
		t.Fatalf("first pass: %+v", rep)
	}
	monthly := DefaultPrices().MonthlyCredits()[ledger.PlanFree]
	if got := e.bucket("acct1", ledger.BucketMonthly); got != monthly {
		t.Fatalf("monthly %s, want %s", got, monthly)
	}
	// Again the same month: nothing new.
	if rep, _ = Maintain(ctx, cfg); rep.MonthStarted != "" {
		t.Fatalf("month started twice: %+v", rep)
	}
	// Eight days later (still November) the pass has lapsed; on the 1st the month turns.
	now = t0.AddDate(0, 0, 8)
	if rep, _ = Maintain(ctx, cfg); rep.PassesLapsed != 1 || e.bucket("acct1", ledger.BucketPass) != 0 {
		t.Fatalf("pass: %+v, left %s", rep, e.bucket("acct1", ledger.BucketPass))
	}
	now = time.Date(t0.Year(), t0.Month()+1, 1, 0, 5, 0, 0, time.UTC)
	if rep, _ = Maintain(ctx, cfg); rep.MonthStarted != now.Format("2006-01") {
		t.Fatalf("new month: %+v", rep)
	}
	if got := e.bucket("acct1", ledger.BucketMonthly); got != monthly {
		t.Fatalf("monthly after reset %s", got)
	}
	if rep, err := e.state.Audit(); err != nil || !rep.OK() {
		t.Fatalf("audit: %v %v", err, rep.Violations)
	}
}

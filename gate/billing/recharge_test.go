package billing

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/gate/payments"
	"github.com/trawlhq/trawl/ledger"
)

// spend holds and settles amount of acct's credit in eu, as the gate's
// holds client would: a settle that leaves the balance under the recharge
// threshold makes the account due.
func (e *env) spend(acct string, amount ledger.MC) {
	e.t.Helper()
	e.ok(ledger.Command{Type: ledger.CmdHold, Hold: &ledger.HoldRequest{Account: acct, Region: "eu", Want: amount}})
	e.n++
	e.ok(ledger.Command{Type: ledger.CmdSettle, Settle: &ledger.Settle{Region: "eu", Charges: []ledger.Charge{
		{Account: acct, Receipt: fmt.Sprintf("r-%d", e.n), Amount: amount, Time: t0},
	}}})
}

func (e *env) recharges() *RechargeReport {
	e.t.Helper()
	rep, err := RunRecharges(context.Background(), e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

func TestRunRecharges(t *testing.T) {
	e := newEnv(t, payments.LocalConfig{Instant: true})
	if r := e.do("POST", "/v1/billing/settings", keyUser, `{"recharge": {"on": true, "under_credits": 95, "pack_usd": 5, "max_per_month": 2}}`); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if rep := e.recharges(); rep.Due != 0 {
		t.Fatalf("nothing spent, yet %+v", rep)
	}
	e.spend("acct1", ledger.Credits(10)) // 90 left, under 95
	e.spend("acct2", ledger.Credits(45)) // acct2 has no recharge
	if !e.acct("acct1").RechargeDue || e.acct("acct2").RechargeDue {
		t.Fatal("settle did not mark acct1 (only) due")
	}
	rep := e.recharges()
	if rep.Due != 1 || rep.Paid != 1 || len(rep.Errors) != 0 {
		t.Fatalf("%+v", rep)
	}
	a := e.acct("acct1")
	if a.RechargeDue || a.RechargesThisMonth != 1 || a.Plan != ledger.PlanSupporter || e.bucket("acct1", ledger.BucketPack) != ledger.Credits(1000) {
		t.Fatalf("after the recharge: %+v pack %s", a, e.bucket("acct1", ledger.BucketPack))
	}
	if rep := e.recharges(); rep.Due != 0 {
		t.Errorf("a second pass found %+v", rep)
	}
	// Spend down again: the second recharge of the month has its own key.
	e.spend("acct1", ledger.Credits(1000)) // 90 signup and 910 of the pack
	if rep := e.recharges(); rep.Paid != 1 || e.bucket("acct1", ledger.BucketPack) != ledger.Credits(1090) {
		t.Fatalf("second recharge: %+v, pack %s", rep, e.bucket("acct1", ledger.BucketPack))
	}
	// max_per_month is 2: the ledger marks no third.
	e.spend("acct1", ledger.Credits(100))
	if e.acct("acct1").RechargeDue {
		t.Error("due past max_per_month")
	}
	e.audit()
}

func TestRunRechargesRetryChargesOnce(t *testing.T) {
	e := newEnv(t, payments.LocalConfig{Instant: true})
	e.do("POST", "/v1/billing/settings", keyUser, `{"recharge": {"on": true, "under_credits": 95, "pack_usd": 10, "max_per_month": 3}}`)
	e.spend("acct1", ledger.Credits(10))
	// Paid, but the ledger is unreachable for the credit: left due.
	e.led.FailNext(3)
	rep := e.recharges()
	if rep.Due != 1 || rep.Paid != 0 || len(rep.Errors) != 1 || !e.acct("acct1").RechargeDue {
		t.Fatalf("%+v", rep)
	}
	// The next pass repeats the same key: the same payment, credited once.
	if rep := e.recharges(); rep.Paid != 1 {
		t.Fatalf("%+v", rep)
	}
	if v := e.bucket("acct1", ledger.BucketPack); v != ledger.Credits(2200) {
		t.Errorf("pack %s, want one $10 pack", v)
	}
	var paid []string
	e.state.Journal(0, func(en *ledger.Entry) (bool, error) {
		if en.Kind == ledger.KindTopup {
			paid = append(paid, en.Receipt)
		}
		return true, nil
	})
	if len(paid) != 1 {
		t.Errorf("topup entries %v", paid)
	}
	if k := RechargeKey("acct1", "2026-11", 1); k != "recharge/acct1/2026-11/1" {
		t.Errorf("key %q", k)
	}
	if k := RechargeKey(strings.Repeat("a", 300), "2026-11", 1); len(k) > payments.MaxKeyLen {
		t.Errorf("long key %d bytes", len(k))
	}
}

func TestRunRechargesRefused(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  payments.LocalConfig
	}{
		{"declined", payments.LocalConfig{Instant: true, DeclineSaved: true}},
		{"no saved card", payments.LocalConfig{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.cfg)
			e.do("POST", "/v1/billing/settings", keyUser, `{"recharge": {"on": true, "under_credits": 95, "pack_usd": 5, "max_per_month": 2}}`)
			e.spend("acct1", ledger.Credits(10))
			rep := e.recharges()
			if rep.Due != 1 || rep.Refused != 1 || len(rep.Errors) != 0 {
				t.Fatalf("%+v", rep)
			}
			a := e.acct("acct1")
			if a.RechargeDue || a.RechargesThisMonth != 0 || e.bucket("acct1", ledger.BucketPack) != 0 {
				t.Errorf("after a refused card: %+v", a)
			}
		})
	}
}

func TestRunRechargesSkipped(t *testing.T) {
	e := newEnv(t, payments.LocalConfig{Instant: true})
	e.do("POST", "/v1/billing/settings", keyUser, `{"recharge": {"on": true, "under_credits": 95, "pack_usd": 50, "max_per_month": 2}}`)
	e.spend("acct1", ledger.Credits(10))
	// The $50 pack left the price table after the account chose it.
	e.cfg.Prices = DefaultPrices()
	e.cfg.Prices.Packs = e.cfg.Prices.Packs[:3]
	rep := e.recharges()
	if rep.Skipped != 1 || rep.Paid != 0 || e.acct("acct1").RechargeDue {
		t.Fatalf("%+v", rep)
	}
	// Turned off after it became due.
	e.cfg.Prices = DefaultPrices()
	e.spend("acct1", ledger.Credits(1))
	e.do("POST", "/v1/billing/settings", keyUser, `{"recharge": {"on": false}}`)
	if rep := e.recharges(); rep.Skipped != 1 || e.bucket("acct1", ledger.BucketPack) != 0 {
		t.Fatalf("%+v", rep)
	}
}

package ledger

import (
	"encoding/json"
	"testing"
)

func TestSetPrices(t *testing.T) {
	a := &applier{t: t, s: newState(t)}
	if _, ok, err := a.s.PriceTable(); err != nil || ok {
		t.Fatalf("a new ledger has a price table: ok=%v err=%v", ok, err)
	}
	for _, bad := range []string{``, `[1]`, `{"a":`, `"x"`} {
		if r := a.do(Command{Type: CmdSetPrices, SetPrices: &SetPrices{Table: json.RawMessage(bad)}}); r.Error != ErrCodeInvalid {
			t.Fatalf("table %q: %+v, want invalid", bad, r)
		}
	}
	if r := a.do(Command{Type: CmdSetPrices}); r.Error != ErrCodeInvalid {
		t.Fatalf("no body: %+v", r)
	}
	r := a.ok(Command{Type: CmdSetPrices, SetPrices: &SetPrices{Table: json.RawMessage(`{"archive_percent":40}`)}})
	pt, ok, err := a.s.PriceTable()
	if err != nil || !ok || pt.Version != r.Index || string(pt.Table) != `{"archive_percent":40}` {
		t.Fatalf("after set: %+v %v %v (result %+v)", pt, ok, err, r)
	}
	// A change made from an older read is refused and changes nothing.
	if r := a.do(Command{Type: CmdSetPrices, SetPrices: &SetPrices{Table: json.RawMessage(`{"archive_percent":10}`), Version: 0}}); r.Error != ErrCodeConflict {
		t.Fatalf("stale version: %+v", r)
	}
	r2 := a.ok(Command{Type: CmdSetPrices, SetPrices: &SetPrices{Table: json.RawMessage(`{"archive_percent":30}`), Version: pt.Version}})
	pt, _, _ = a.s.PriceTable()
	if pt.Version != r2.Index || string(pt.Table) != `{"archive_percent":30}` {
		t.Fatalf("second set: %+v", pt)
	}
}

func TestOperatorKeyRole(t *testing.T) {
	a := &applier{t: t, s: newState(t)}
	a.ok(Command{Type: CmdCreateAccount, CreateAccount: &CreateAccount{Account: "ops", Plan: PlanSupporter}})
	h := "0123456789012345678901234567890123456789012345678901234567890123"
	a.ok(Command{Type: CmdAddKey, AddKey: &Key{ID: "k1", Account: "ops", Hash: h, Role: RoleOperator, Kind: "permanent"}})
	if r := a.do(Command{Type: CmdAddKey, AddKey: &Key{ID: "k2", Account: "ops", Hash: h[1:] + "4", Role: "root", Kind: "permanent"}}); r.Error != ErrCodeInvalid {
		t.Fatalf("role root: %+v", r)
	}
	k, err := a.s.KeyByID("k1")
	if err != nil || k.Role != RoleOperator {
		t.Fatalf("key: %+v %v", k, err)
	}
}

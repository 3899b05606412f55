package ledger

import "testing"

func TestMonitorSlots(t *testing.T) {
	a := &applier{t: t, s: newState(t)}
	lim := MonitorLimits{Account: 2, Fast: 1, Host: 3}
	slot := func(op, mon, acct, host string, fast bool) *Result {
		return a.do(Command{Type: CmdMonitorSlot, MonitorSlot: &MonitorSlot{Op: op, Monitor: mon, Account: acct, Host: host, Fast: fast, Limits: lim}})
	}
	if r := slot(MonitorAdd, "m1", "acct1", "a.example", true); r.Error != "" {
		t.Fatalf("add m1: %+v", r)
	}
	if r := slot(MonitorAdd, "m1", "acct1", "a.example", true); r.Error != ErrCodeExists {
		t.Fatalf("add m1 again: %+v", r)
	}
	if r := slot(MonitorAdd, "m2", "acct1", "a.example", true); r.Error != ErrCodeMonitorLimit ||
		r.Message != "at most 1 running monitors checked more often than every 1h per account" {
		t.Fatalf("second fast: %+v", r)
	}
	if r := slot(MonitorAdd, "m2", "acct1", "a.example", false); r.Error != "" {
		t.Fatalf("add m2: %+v", r)
	}
	if r := slot(MonitorAdd, "m3", "acct1", "b.example", false); r.Error != ErrCodeMonitorLimit || r.Message != "at most 2 monitors per account" {
		t.Fatalf("third: %+v", r)
	}
	if r := slot(MonitorAdd, "m4", "acct2", "a.example", false); r.Error != "" {
		t.Fatalf("add m4: %+v", r)
	}
	if r := slot(MonitorAdd, "m5", "acct3", "a.example", false); r.Error != ErrCodeMonitorLimit || r.Message != "this site has too many monitors already" {
		t.Fatalf("host limit: %+v", r)
	}
	// m2 cannot become fast while m1 is; after m1 pauses it can.
	if r := slot(MonitorSet, "m2", "", "", true); r.Error != ErrCodeMonitorLimit {
		t.Fatalf("m2 fast: %+v", r)
	}
	if r := slot(MonitorSet, "m1", "", "", false); r.Error != "" {
		t.Fatalf("m1 paused: %+v", r)
	}
	if r := slot(MonitorSet, "m2", "", "", true); r.Error != "" {
		t.Fatalf("m2 fast: %+v", r)
	}
	if n, _ := a.s.MonitorCounts("acct1", "a.example"); n != (MonitorCounts{Account: 2, Fast: 1, Host: 3}) {
		t.Fatalf("counts %+v", n)
	}
	// Removing gives the place back, once.
	slot(MonitorRemove, "m2", "", "", false)
	slot(MonitorRemove, "m2", "", "", false)
	if n, _ := a.s.MonitorCounts("acct1", "a.example"); n != (MonitorCounts{Account: 1, Fast: 0, Host: 2}) {
		t.Fatalf("counts after remove %+v", n)
	}
	if r := slot(MonitorAdd, "m5", "acct3", "a.example", false); r.Error != "" {
		t.Fatalf("m5 after a place came free: %+v", r)
	}
	if r := a.do(Command{Type: CmdMonitorSlot, MonitorSlot: &MonitorSlot{Op: "grow", Monitor: "m1"}}); r.Error != ErrCodeInvalid {
		t.Fatalf("bad op: %+v", r)
	}
}

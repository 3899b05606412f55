package monitor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trawlhq/trawl/internal/monstore"
	"github.com/trawlhq/trawl/internal/store"
)

// A monitor of before (kept in its cell's store, id naming the cell) is
// moved into the region's store at the cell's start, with its versions,
// timeline, waiting charge and pending delivery; its old id keeps working;
// the cell's copy is gone; a second start moves nothing.
func TestMigrateOldMonitors(t *testing.T) {
	mem := func() *store.Store {
		st, err := store.Open("", &store.Options{FS: vfs.NewMem()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	own, region := mem(), mem()
	id := "mon_eu.c1.5f2a09c3e1d4b7a86f10"
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	m := Monitor{ID: id, Account: "acct1", URL: "https://shop.example/", Host: "shop.example", Every: "1h", EveryD: time.Hour,
		Interval: time.Hour, Region: "eu", Health: "ok", Version: "v1", CreatedAt: now, NextAt: now.Add(time.Hour), LastEvent: 1}
	rec, _ := json.Marshal(m)
	ev, _ := json.Marshal(Event{ID: 1, Event: "change", Monitor: id, Summary: "Price changed", FirstSeen: now, Delivery: &Delivery{Webhook: &WebhookState{Status: "pending"}}})
	ch, _ := json.Marshal(Charge{ID: id + "/check/1", Account: "acct1", Monitor: id, At: now})
	for k, v := range map[string][]byte{
		"mon/m/" + id: rec, "mon/v/" + id + "/v1": []byte("# Shop"), "mon/e/" + id + "/0000000000000001": ev,
		"mon/c/00000000000000000001/" + id + "/check/1": ch, "monhook/mh_" + id + "_1": []byte(`{"id":"mh_` + id + `_1"}`),
	} {
		if err := own.Set([]byte(k), v, store.Sync); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := New(own, Config{Region: "eu", Cell: "c1", Fetcher: httpFetcher(), Shared: monstore.NewLocal(region, monstore.LocalConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if n, err := svc.migrate(ctx, own); err != nil || n != 1 {
		t.Fatalf("moved %d: %v", n, err)
	}
	if v, err := svc.Get(ctx, "acct1", id); err != nil || v.Baseline.Version != "v1" {
		t.Fatalf("get after the move: %+v %v", v, err)
	}
	if l, _ := svc.List(ctx, "acct1"); len(l) != 1 {
		t.Fatalf("list %d", len(l))
	}
	if md, err := svc.Version(ctx, "acct1", id, "v1"); err != nil || md != "# Shop" {
		t.Fatalf("version %q %v", md, err)
	}
	if es, err := svc.Events(ctx, "acct1", id, time.Time{}, 10); err != nil || len(es) != 1 || es[0].Summary != "Price changed" {
		t.Fatalf("events %+v %v", es, err)
	}
	if cs, _ := svc.Charges(ctx, 10); len(cs) != 1 {
		t.Fatalf("charges %+v", cs)
	}
	if _, err := region.Get([]byte("monhook/mh_" + id + "_1")); err != nil {
		t.Fatalf("pending delivery not moved: %v", err)
	}
	left := 0
	own.Scan([]byte("mon"), nil, func(_, _ []byte) (bool, error) { left++; return true, nil })
	if left != 0 {
		t.Fatalf("%d keys left in the cell's store", left)
	}
	if n, err := svc.migrate(ctx, own); err != nil || n != 0 {
		t.Fatalf("second start moved %d: %v", n, err)
	}
}

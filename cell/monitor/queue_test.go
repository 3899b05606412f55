package monitor

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/monstore"
	"github.com/trawlhq/trawl/internal/store"
)

// memQueue is a region's check queue in memory, shared by the cells'
// services: sched says which of them schedules.
type memQueue struct {
	cell  string
	sched *string
	mu    *sync.Mutex
	items *[]monstore.Claimed
}

func (q memQueue) Scheduling() bool { return *q.sched == q.cell }
func (q memQueue) Room(context.Context) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return 100 - len(*q.items)
}
func (q memQueue) Publish(_ context.Context, c monstore.Claimed) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	*q.items = append(*q.items, c)
	return nil
}

// Checks as work items: only the cell that schedules claims, and it
// claims every due check of the region, whatever its share; any cell
// runs a queued check; a check delivered twice (its first cell taken for
// dead) writes one result, charged once; a scheduler that changes claims
// the next slots.
func TestChecksAsWorkItems(t *testing.T) {
	regionSt, err := store.Open(filepath.Join(t.TempDir(), "region"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { regionSt.Close() })
	region := monstore.NewLocal(regionSt, monstore.LocalConfig{Live: func() []string { return []string{"c1", "c2"} }})
	c := &clock{now: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
	sched, mu, items := "c1", &sync.Mutex{}, &[]monstore.Claimed{}
	svcs := map[string]*Service{}
	for _, cell := range []string{"c1", "c2"} {
		svc, err := New(nil, Config{Region: "eu", Cell: cell, AllowPrivateNetworks: true, Fetcher: httpFetcher(), Now: c.Now, Shared: region})
		if err != nil {
			t.Fatal(err)
		}
		svc.SetQueue(memQueue{cell: cell, sched: &sched, mu: mu, items: items})
		svcs[cell] = svc
	}
	s := newSite(t, shop("50"))
	const n = 10
	for i := range n {
		if _, err := svcs["c2"].Create(ctx0, "acct1", &Request{URL: str(fmt.Sprintf("%s/shop/%d", s.URL, i)), Every: str("1h")}); err != nil {
			t.Fatal(err)
		}
	}
	take := func() []monstore.Claimed {
		mu.Lock()
		defer mu.Unlock()
		out := *items
		*items = nil
		return out
	}
	round := func(want int) {
		t.Helper()
		c.Add(time.Second)
		if got := svcs[sched].Tick(ctx0); got != want {
			t.Fatalf("the scheduler queued %d checks, want %d (every due check of the region)", got, want)
		}
		other := map[string]string{"c1": "c2", "c2": "c1"}[sched]
		if got := svcs[other].Tick(ctx0); got != 0 {
			t.Fatalf("%s, not the scheduler, claimed %d checks", other, got)
		}
		queued := take()
		// Each runs on a cell in turn; the first is delivered twice.
		for i, cl := range queued {
			svcs[[]string{"c1", "c2"}[i%2]].RunClaimed(ctx0, cl)
		}
		svcs["c2"].RunClaimed(ctx0, queued[0])
		if got := svcs[sched].Tick(ctx0); got != 0 {
			t.Fatalf("%d checks queued again after they ran", got)
		}
	}
	round(n) // baselines
	c.Add(time.Hour)
	sched = "c2" // the lease moved
	round(n)
	// Nobody schedules (the lease between holders): a check overdue by
	// overdueGrace is claimed by its own cell, and run there.
	sched = ""
	c.Add(time.Hour + overdueGrace + time.Second)
	if got := svcs["c1"].Tick(ctx0) + svcs["c2"].Tick(ctx0); got != n {
		t.Fatalf("without a scheduler the cells ran %d overdue checks, want %d", got, n)
	}
	if q := take(); len(q) != 0 {
		t.Fatalf("%d checks queued without a scheduler", len(q))
	}
	charges, err := svcs["c1"].Charges(ctx0, 100)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, ch := range charges {
		if ch.Usage.Kind == metering.KindMonitorCheck {
			per[ch.Monitor]++
		}
	}
	if len(per) != n {
		t.Fatalf("%d monitors charged, want %d: %v", len(per), n, per)
	}
	for id, k := range per {
		if k != 3 {
			t.Errorf("%s charged %d checks, want 3 (one a window; the check delivered twice once)", id, k)
		}
	}
	l, err := svcs["c1"].List(ctx0, "acct1")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range l {
		if v.Baseline.Status != "ok" {
			t.Errorf("%s: baseline %+v", v.ID, v.Baseline)
		}
	}

	// Queued checks whose claim lapsed before a cell took them (their
	// deliveries met dying cells) are dropped unrun, and the scheduler
	// claims those monitors again at once.
	sched = "c1"
	c.Add(time.Hour)
	if got := svcs["c1"].Tick(ctx0); got != n {
		t.Fatalf("the scheduler queued %d checks, want %d", got, n)
	}
	stale := take()
	c.Add(svcs["c1"].lease() + time.Second)
	checks := svcs["c2"].Stats().Checks
	for _, cl := range stale {
		svcs["c2"].RunClaimed(ctx0, cl)
	}
	if st := svcs["c2"].Stats(); st.Checks != checks || st.Lapsed != n {
		t.Fatalf("lapsed items: %d checks ran (want none), %d dropped (want %d)", st.Checks-checks, st.Lapsed, n)
	}
	if got := svcs["c1"].Tick(ctx0); got != n {
		t.Fatalf("after the claims lapsed the scheduler queued %d checks, want %d", got, n)
	}
	for _, cl := range take() {
		svcs["c2"].RunClaimed(ctx0, cl)
	}
	if st := svcs["c2"].Stats(); st.Checks != checks+n {
		t.Fatalf("the checks claimed again: %d ran, want %d", st.Checks-checks, n)
	}
}

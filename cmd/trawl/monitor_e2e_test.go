package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/monstore"
	"github.com/trawlhq/trawl/internal/testwait"
)

// TestMonitorCellKill9 is the crash test of the monitors issue: a region
// of two cells (trawl dev's c1 and a second process, c2) shares its
// monitors through the gate's monitor store. c2 is killed with SIGKILL
// while monitors it checks are due, changes are waiting for confirmation
// and webhook deliveries are being retried. Nothing is lost: every change
// is confirmed and delivered; nothing is sent twice: each change has one
// delivery id and one receiver took it once; and c1 takes c2's monitors
// over within 30 s. Real time, shortened by flags: every 2s, confirmation
// after 3s, webhook retries after 1s.
func TestMonitorCellKill9(t *testing.T) {
	var mu sync.Mutex
	price := "50"
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		p := price
		mu.Unlock()
		writeShop(w, r.URL.Path, p)
	}))
	defer site.Close()
	// The receiver answers 500 to the first posts of each delivery, so
	// deliveries are being retried around the kill.
	got := map[string]int{}   // delivery id → 2xx answers
	tries := map[string]int{} // delivery id → posts
	byMonitor := map[string]map[string]bool{}
	recv := httptest.NewServer(hookReceiver(&mu, 2, got, tries, byMonitor))
	defer recv.Close()

	monFlags := []string{"--monitor-min-every", "1s", "--monitor-confirm-after", "3s", "--webhook-retries", "1s,1s,1s,1s,1s"}
	gateAddr := fmt.Sprintf("127.0.0.1:%d", freeRun(t, 1))
	dev := launch(t, []string{"TRAWL_DEV_KEY=" + e2eKey}, "gate serving", append([]string{"dev",
		"--listen", gateAddr, "--ledger-raft", fmt.Sprintf("127.0.0.1:%d", freeRun(t, 1)),
		"--data", t.TempDir(), "--allow-private-networks", "--browsers", "0", "--prices", pricesFile(t, 100000)}, monFlags...)...)
	seed := dev.logField(t, "gate serving", "members")
	c2 := launch(t, nil, "cell serving", append([]string{"cell", "--name", "c2", "--region", "eu", "--listen", "127.0.0.1:0",
		"--members-join", seed, "--data", t.TempDir(), "--allow-private-networks", "--browsers", "0"}, monFlags...)...)
	testwait.Until(t, 10*time.Second, "two cells", func() bool {
		a, err := tryGateCall("GET", dev.base+"/health", "")
		var h struct{ Cells int }
		return err == nil && json.Unmarshal(a.body, &h) == nil && h.Cells == 2
	})

	// Monitors until c2 checks at least three of them.
	var ids []string
	ofC2 := 0
	for i := 0; ofC2 < 3 || len(ids) < 6; i++ {
		if i == 16 {
			t.Fatalf("rendezvous gave c2 only %d of %d monitors", ofC2, len(ids))
		}
		a := createMonitor(t, dev.base, fmt.Sprintf(`{"url":"%s/shop/%d","watch":"the price drops below 48","every":"2s","notify":{"webhook":"%s","secret":"s"}}`, site.URL, i, recv.URL))
		var v struct{ ID string }
		if a.status != 201 || json.Unmarshal(a.body, &v) != nil {
			t.Fatalf("create: %d %s", a.status, a.body)
		}
		ids = append(ids, v.ID)
		if monstore.Owner(v.ID, []string{"c1", "c2"}) == "c2" {
			ofC2++
		}
	}
	type view struct {
		ID        string `json:"id"`
		Baseline  struct{ Status string }
		NextCheck string `json:"next_check_at"`
	}
	list := func() []view {
		a := gateCall(t, "GET", dev.base+"/monitors", "")
		var l struct{ Monitors []view }
		if a.status != 200 || json.Unmarshal(a.body, &l) != nil {
			t.Fatalf("list: %d %s", a.status, a.body)
		}
		return l.Monitors
	}
	testwait.Until(t, 20*time.Second, "every baseline", func() bool {
		for _, v := range list() {
			if v.Baseline.Status != "ok" {
				return false
			}
		}
		return true
	})

	type event struct {
		Event       string
		ConfirmedAt *string `json:"confirmed_at"`
		Delivery    struct {
			Webhook *struct{ Status string }
			Done    bool
		}
	}
	events := func(id string) []event {
		a := gateCall(t, "GET", dev.base+"/monitors/"+id+"/events", "")
		var out struct{ Events []event }
		if a.status != 200 || json.Unmarshal(a.body, &out) != nil {
			t.Fatalf("events: %d %s", a.status, a.body)
		}
		return out.Events
	}

	// The price drops everywhere. As soon as one change is seen (the
	// others are due, or waiting for confirmation), c2 dies.
	mu.Lock()
	price = "45"
	mu.Unlock()
	testwait.Until(t, 20*time.Second, "a change at first sight", func() bool {
		for _, id := range ids {
			if len(events(id)) > 0 {
				return true
			}
		}
		return false
	})

	killed := time.Now()
	c2.kill(t)
	// Taken over: every monitor checked again after the kill (its next
	// check set from a check that ran at least 2 s after it).
	after := killed.Add(4 * time.Second)
	testwait.Until(t, 30*time.Second, "c1 to check every monitor", func() bool {
		for _, v := range list() {
			next, err := time.Parse(time.RFC3339, v.NextCheck)
			if err != nil || next.Before(after) {
				return false
			}
		}
		return true
	})

	t.Logf("every monitor checked again %v after the kill (membership, claim, check)", time.Since(killed).Round(100*time.Millisecond))

	// Nothing lost: every change confirmed and delivered, on the timeline.
	testwait.Until(t, 30*time.Second, "every change delivered", func() bool {
		for _, id := range ids {
			es := events(id)
			if len(es) != 1 || es[0].ConfirmedAt == nil || !es[0].Delivery.Done {
				return false
			}
		}
		return true
	})

	for _, id := range ids {
		if e := events(id)[0]; e.Delivery.Webhook == nil || e.Delivery.Webhook.Status != "delivered" {
			t.Errorf("%s: delivery %+v", id, e.Delivery)
		}
	}
	// Nothing sent twice: one delivery per change, taken once.
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if n := len(byMonitor[id]); n != 1 {
			t.Errorf("%s: %d distinct deliveries, want 1", id, n)
		}
	}
	if len(got) != len(ids) {
		t.Errorf("%d deliveries taken, want %d", len(got), len(ids))
	}
	for d, n := range got {
		if n != 1 {
			t.Errorf("delivery %s taken %d times", d, n)
		}
	}
	t.Logf("%d monitors (%d checked by c2 before the kill), %d deliveries, %d posts with retries", len(ids), ofC2, len(got), sumValues(tries))
	if !strings.Contains(c2.logs(), "cell serving") {
		t.Error("c2 never served")
	}
}

// writeShop writes the watched page of the monitor tests: a shop at
// path whose widget costs price.
func writeShop(w http.ResponseWriter, path, price string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, `<!doctype html><html><head><title>Shop %[1]s</title></head><body><main><article><h1>Shop %[1]s</h1>
<p>The products of the shop at %[1]s and their prices, kept up to date by the shop team every day.</p>
<h2>Prices</h2><table><thead><tr><th>Product</th><th>Price</th></tr></thead>
<tbody><tr><td>Widget</td><td>%[2]s</td></tr><tr><td>Gadget</td><td>20</td></tr></tbody></table>
<p>All prices include tax and are shown in euros; shipping is free over 100 euros.</p></article></main></body></html>`, path, price)
}

// hookReceiver takes monitor webhooks under mu: each delivery's first
// fails posts are answered 500 (retried), the next is taken (got);
// tries counts posts per delivery id, byMonitor the delivery ids of each
// monitor.
func hookReceiver(mu *sync.Mutex, fails int, got, tries map[string]int, byMonitor map[string]map[string]bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		id, mon := r.Header.Get("X-Svc-Delivery"), r.Header.Get("X-Svc-Monitor")
		mu.Lock()
		defer mu.Unlock()
		tries[id]++
		if byMonitor[mon] == nil {
			byMonitor[mon] = map[string]bool{}
		}
		byMonitor[mon][id] = true
		if tries[id] <= fails {
			w.WriteHeader(500)
			return
		}
		got[id]++
	}
}

// shopSite serves writeShop's pages at *price, recording each request's
// time by path in asked (both under mu).
func shopSite(t *testing.T, mu *sync.Mutex, price *int, asked map[string][]time.Time) *httptest.Server {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		p := *price
		asked[r.URL.Path] = append(asked[r.URL.Path], time.Now())
		mu.Unlock()
		writeShop(w, r.URL.Path, strconv.Itoa(p))
	}))
	t.Cleanup(site.Close)
	return site
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestMonitorsSurviveKillLoop is the kill loop of issue 33 for monitors:
// a region of three cells (trawl dev's c1, and c2 and c3 as processes of
// their own) checks nine monitors every 2 s while the watched pages change
// five times; c2 and c3 are killed with SIGKILL ten times at random
// moments (each restarted on its data directory 0.5–3 s later). No
// confirmed change is lost or doubled: every monitor has exactly one
// event per change, each confirmed and delivered by one webhook taken
// once; no monitor goes unchecked for long: the longest silence of a
// watched page (the site's own request log) stays within the takeover
// bound. Monitors live in the gate's store (internal/monstore) and are
// checked under claims (a cell's claim dies with it in membership, a
// check's write is conditional on the claim), which is what this test
// holds to.
func TestMonitorsSurviveKillLoop(t *testing.T) {
	const monitors, rounds, kills = 9, 5, 10
	var mu sync.Mutex
	price := 50
	asked := map[string][]time.Time{} // path → requests
	site := shopSite(t, &mu, &price, asked)
	// The receiver answers 500 to the first post of each delivery: the
	// kills also meet deliveries being retried.
	got := map[string]int{}
	tries := map[string]int{}
	byMonitor := map[string]map[string]bool{}
	recv := httptest.NewServer(hookReceiver(&mu, 1, got, tries, byMonitor))
	defer recv.Close()

	monFlags := []string{"--monitor-min-every", "1s", "--monitor-confirm-after", "3s", "--webhook-retries", "1s,1s,1s,1s,1s"}
	// Clustered cells: the region's checks are work items of its
	// JetStream queue, scheduled by the coordinator (c1, in the gate's
	// process, unless the lease went elsewhere) and run by any cell.
	dev := launch(t, []string{"TRAWL_DEV_KEY=" + e2eKey}, "gate serving", append([]string{"dev",
		"--listen", fmt.Sprintf("127.0.0.1:%d", freeRun(t, 1)), "--ledger-raft", fmt.Sprintf("127.0.0.1:%d", freeRun(t, 1)),
		"--data", t.TempDir(), "--allow-private-networks", "--browsers", "0", "--prices", pricesFile(t, 100000),
		"--route-listen", "127.0.0.1:0"}, monFlags...)...)
	seed := dev.logField(t, "gate serving", "members")
	args := map[string][]string{}
	procs := map[string]*proc{}
	for _, name := range []string{"c2", "c3"} {
		args[name] = append([]string{"cell", "--name", name, "--region", "eu", "--listen", "127.0.0.1:0",
			"--members-join", seed, "--data", t.TempDir(), "--allow-private-networks", "--browsers", "0",
			"--route-listen", "127.0.0.1:0"}, monFlags...)
		procs[name] = launch(t, nil, "cell serving", args[name]...)
	}
	bases := func() []string {
		out := []string{"http://" + dev.logField(t, "gate serving", "cell")}
		for _, name := range []string{"c2", "c3"} {
			out = append(out, procs[name].base)
		}
		return out
	}
	testwait.Until(t, 2*time.Minute, "every cell sharing its checks", func() bool {
		for _, b := range bases() {
			if h, err := getCellHealth(b); err != nil || h.CheckQueue == nil {
				return false
			}
		}
		return true
	})
	cells := func() int {
		a, err := tryGateCall("GET", dev.base+"/health", "")
		var h struct{ Cells int }
		if err != nil || json.Unmarshal(a.body, &h) != nil {
			return -1
		}
		return h.Cells
	}
	testwait.Until(t, 15*time.Second, "three cells", func() bool { return cells() == 3 })

	var ids []string
	for i := range monitors {
		a := createMonitor(t, dev.base, fmt.Sprintf(`{"url":"%s/shop/%d","watch":"","every":"2s","notify":{"webhook":"%s","secret":"s"}}`, site.URL, i, recv.URL))
		var v struct{ ID string }
		if a.status != 201 || json.Unmarshal(a.body, &v) != nil {
			t.Fatalf("create: %d %s", a.status, a.body)
		}
		ids = append(ids, v.ID)
	}
	type event struct {
		ConfirmedAt *string `json:"confirmed_at"`
		Delivery    struct {
			Webhook *struct{ Status string }
			Done    bool
		}
	}
	events := func(id string) ([]event, error) {
		a, err := tryGateCall("GET", dev.base+"/monitors/"+id+"/events", "")
		if err != nil {
			return nil, err
		}
		var out struct{ Events []event }
		if a.status != 200 || json.Unmarshal(a.body, &out) != nil {
			return nil, fmt.Errorf("events: %d %s", a.status, a.body)
		}
		return out.Events, nil
	}
	// delivered reports whether every monitor has n events, each
	// confirmed and its delivery done.
	delivered := func(n int) bool {
		for _, id := range ids {
			es, err := events(id)
			if err != nil || len(es) != n {
				return false
			}
			for _, e := range es {
				if e.ConfirmedAt == nil || !e.Delivery.Done {
					return false
				}
			}
		}
		return true
	}
	testwait.Until(t, 30*time.Second, "every baseline", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range monitors {
			if len(asked[fmt.Sprintf("/shop/%d", i)]) < 2 {
				return false
			}
		}
		return true
	})

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 33))
	start := time.Now()
	killed := 0
	var down []time.Duration
	for round := 1; round <= rounds; round++ {
		mu.Lock()
		price++
		mu.Unlock()
		changed := time.Now()
		// Two kills a round, at random moments while the change is seen,
		// confirmed and delivered.
		for k := 0; k < kills/rounds; k++ {
			time.Sleep(time.Duration(rng.IntN(2500)) * time.Millisecond)
			name := []string{"c2", "c3"}[rng.IntN(2)]
			procs[name].kill(t)
			killed++
			off := time.Duration(500+rng.IntN(2500)) * time.Millisecond
			time.Sleep(off)
			down = append(down, off)
			procs[name] = launch(t, nil, "cell serving", args[name]...)
		}
		if err := testwait.Poll(90*time.Second, func() bool { return delivered(round) }); err != nil {
			// Say which monitor is behind and where: its events, the
			// site's requests for its page since the change, and the
			// receiver's posts.
			for i, id := range ids {
				a, err := tryGateCall("GET", dev.base+"/monitors/"+id+"/events", "")
				mu.Lock()
				var since int
				var last time.Time
				for _, at := range asked[fmt.Sprintf("/shop/%d", i)] {
					if at.After(changed) {
						since++
					}
					last = at
				}
				posts := len(byMonitor[id])
				mu.Unlock()
				t.Logf("%s (/shop/%d): events %s err %v; %d requests since the change, last %v ago; %d deliveries posted", id, i, a.body, err, since, time.Since(last).Round(100*time.Millisecond), posts)
			}
			for _, b := range bases() {
				h, err := getCellHealth(b)
				if err != nil || h.CheckQueue == nil {
					t.Logf("%s: check queue: %v", b, err)
					continue
				}
				t.Logf("%s: check queue %+v", b, *h.CheckQueue)
			}
			t.Fatalf("%v: round %d: every change confirmed and delivered", err, round)
		}
		t.Logf("round %d: the change confirmed and delivered on every monitor %v after it (%d kills so far)", round, time.Since(changed).Round(100*time.Millisecond), killed)
	}
	t.Logf("%d kills in %v (each cell down %v)", killed, time.Since(start).Round(100*time.Millisecond), roundAll(down))

	// Nothing doubled: one event per change, one delivery per event,
	// taken once.
	for _, id := range ids {
		es, err := events(id)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != rounds {
			t.Errorf("%s: %d events, want %d", id, len(es), rounds)
		}
		for _, e := range es {
			if e.Delivery.Webhook == nil || e.Delivery.Webhook.Status != "delivered" {
				t.Errorf("%s: delivery %+v", id, e.Delivery)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if n := len(byMonitor[id]); n != rounds {
			t.Errorf("%s: %d distinct deliveries, want %d", id, n, rounds)
		}
	}
	for d, n := range got {
		if n != 1 {
			t.Errorf("delivery %s taken %d times", d, n)
		}
	}
	if len(got) != monitors*rounds {
		t.Errorf("%d deliveries taken, want %d", len(got), monitors*rounds)
	}
	// Never unchecked for long: a monitor of a killed cell is claimed by
	// another once membership drops the dead one (~3 s) and checked at
	// its next second; 2 s checks, so a silence over 15 s is a check
	// missed.
	var worst time.Duration
	for i := range monitors {
		at := asked[fmt.Sprintf("/shop/%d", i)]
		for j := 1; j < len(at); j++ {
			if at[j].Before(start) {
				continue
			}
			worst = max(worst, at[j].Sub(at[j-1]))
		}
	}
	t.Logf("longest silence of a watched page during the loop: %v; %d deliveries, %d posts", worst.Round(10*time.Millisecond), len(got), sumValues(tries))
	// The checks ran as work items: queued by the scheduler, run by
	// every cell (the killed ones count since their last start; the last
	// one restarted may still be joining).
	testwait.Until(t, time.Minute, "every cell sharing its checks again", func() bool {
		for _, b := range bases() {
			if h, err := getCellHealth(b); err != nil || h.CheckQueue == nil {
				return false
			}
		}
		return true
	})
	var queued, ran int64
	var per []string
	for _, b := range bases() {
		h, err := getCellHealth(b)
		if err != nil || h.CheckQueue == nil {
			t.Errorf("%s: check queue %v", b, err)
			continue
		}
		queued += h.CheckQueue.Queued
		ran += h.CheckQueue.Ran
		per = append(per, fmt.Sprintf("%+v", *h.CheckQueue))
	}
	t.Logf("check queues: %s", strings.Join(per, "; "))
	if queued == 0 || ran == 0 {
		t.Errorf("no check went through the region's queue (queued %d, ran %d)", queued, ran)
	}
	if worst > 15*time.Second {
		t.Errorf("a watched page went unchecked for %v during the kills, want at most 15 s", worst)
	}
}

// TestCheckSchedulerKilled: in a region of three clustered cells, the
// cell that schedules the region's monitor checks (the coordinator lease's
// holder) is killed with SIGKILL. An operator first drains c1 (it lives
// with the gate, so it cannot be the one killed): a drained cell gives
// the lease up, and c2 or c3 takes it. Then that cell is killed: the
// other takes the lease, claims the dead scheduler's checks again (its
// claims are void with it) and every watched page is checked again within
// 15 s; a change made after the kill is confirmed and delivered once per
// monitor.
func TestCheckSchedulerKilled(t *testing.T) {
	const monitors = 6
	var mu sync.Mutex
	price := 50
	asked := map[string][]time.Time{} // path → requests
	site := shopSite(t, &mu, &price, asked)
	got, tries, byMonitor := map[string]int{}, map[string]int{}, map[string]map[string]bool{}
	recv := httptest.NewServer(hookReceiver(&mu, 0, got, tries, byMonitor))
	defer recv.Close()

	monFlags := []string{"--monitor-min-every", "1s", "--monitor-confirm-after", "3s", "--webhook-retries", "1s,1s,1s"}
	dev := launch(t, []string{"TRAWL_DEV_KEY=" + e2eKey, "TRAWL_OPERATOR_KEY=" + e2eOperatorKey}, "gate serving", append([]string{"dev",
		"--listen", fmt.Sprintf("127.0.0.1:%d", freeRun(t, 1)), "--ledger-raft", fmt.Sprintf("127.0.0.1:%d", freeRun(t, 1)),
		"--data", t.TempDir(), "--allow-private-networks", "--browsers", "0", "--prices", pricesFile(t, 100000),
		"--route-listen", "127.0.0.1:0"}, monFlags...)...)
	seed := dev.logField(t, "gate serving", "members")
	procs := map[string]*proc{}
	for _, name := range []string{"c2", "c3"} {
		procs[name] = launch(t, nil, "cell serving", append([]string{"cell", "--name", name, "--region", "eu", "--listen", "127.0.0.1:0",
			"--members-join", seed, "--data", t.TempDir(), "--allow-private-networks", "--browsers", "0",
			"--route-listen", "127.0.0.1:0"}, monFlags...)...)
	}
	bases := map[string]string{"c1": "http://" + dev.logField(t, "gate serving", "cell"), "c2": procs["c2"].base, "c3": procs["c3"].base}
	scheduler := func(skip string) string {
		for name, b := range bases {
			if name == skip {
				continue
			}
			if h, err := getCellHealth(b); err == nil && h.CheckQueue != nil && h.CheckQueue.Scheduling {
				return name
			}
		}
		return ""
	}
	testwait.Until(t, 2*time.Minute, "every cell sharing its checks, one scheduling", func() bool {
		for _, b := range bases {
			if h, err := getCellHealth(b); err != nil || h.CheckQueue == nil {
				return false
			}
		}
		return scheduler("") != ""
	})
	var ids []string
	for i := range monitors {
		a := createMonitor(t, dev.base, fmt.Sprintf(`{"url":"%s/shop/%d","watch":"","every":"2s","notify":{"webhook":"%s","secret":"s"}}`, site.URL, i, recv.URL))
		var v struct{ ID string }
		if a.status != 201 || json.Unmarshal(a.body, &v) != nil {
			t.Fatalf("create: %d %s", a.status, a.body)
		}
		ids = append(ids, v.ID)
	}
	checkedSince := func(at time.Time) bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range monitors {
			hits := asked[fmt.Sprintf("/shop/%d", i)]
			if len(hits) == 0 || hits[len(hits)-1].Before(at) {
				return false
			}
		}
		return true
	}
	testwait.Until(t, 30*time.Second, "every baseline", func() bool { return checkedSince(time.Time{}) })

	// The operator drains c1: another cell takes the lease.
	req, _ := http.NewRequest("POST", dev.base+"/operator/v1/cells/c1/drain", nil)
	req.Header.Set("Authorization", "Bearer "+e2eOperatorKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("drain c1: %v %v", resp, err)
	}
	resp.Body.Close()
	drained := time.Now()
	var victim string
	testwait.Until(t, 30*time.Second, "c2 or c3 scheduling", func() bool {
		victim = scheduler("c1")
		return victim != "" && scheduler(victim) == ""
	})
	t.Logf("c1 drained: %s holds the lease %v later (it may have held it before)", victim, time.Since(drained).Round(10*time.Millisecond))
	testwait.Until(t, 30*time.Second, "checks scheduled by "+victim, func() bool {
		h, err := getCellHealth(bases[victim])
		return err == nil && h.CheckQueue != nil && h.CheckQueue.Queued >= monitors
	})

	killed := time.Now()
	procs[victim].kill(t)
	delete(bases, victim)
	mu.Lock()
	price++ // a change the next scheduler's checks must see, confirm and deliver
	mu.Unlock()
	var next string
	testwait.Until(t, 30*time.Second, "another cell scheduling", func() bool {
		next = scheduler("")
		return next != ""
	})
	tookOver := time.Since(killed)
	testwait.Until(t, 30*time.Second, "every page checked after the kill", func() bool { return checkedSince(killed) })
	checked := time.Since(killed)
	t.Logf("%s killed: %s schedules %v later, every page checked again %v after the kill", victim, next, tookOver.Round(10*time.Millisecond), checked.Round(10*time.Millisecond))
	if checked > 15*time.Second {
		t.Errorf("the pages were checked again %v after the scheduler's kill, want within 15 s", checked)
	}
	testwait.Until(t, 60*time.Second, "the change confirmed and delivered on every monitor", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			if len(byMonitor[id]) != 1 {
				return false
			}
		}
		return len(got) == monitors
	})
	// Once: a second check of the change's slot would make a second
	// event. Two more checks of every page, then the count.
	after := time.Now()
	testwait.Until(t, 30*time.Second, "two more checks of every page", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range monitors {
			n := 0
			for _, at := range asked[fmt.Sprintf("/shop/%d", i)] {
				if at.After(after) {
					n++
				}
			}
			if n < 2 {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if n := len(byMonitor[id]); n != 1 {
			t.Errorf("%s: %d deliveries, want 1", id, n)
		}
	}
	for d, n := range got {
		if n != 1 {
			t.Errorf("delivery %s taken %d times", d, n)
		}
	}
}

// createMonitor creates a monitor through the gate at base. A cell that
// has just joined may not have heard of its gate yet (the gate hears of
// it first): its 503 store_unavailable says to repeat the request, and
// this does, for up to 15 s.
func createMonitor(t *testing.T, base, body string) answer {
	t.Helper()
	var a answer
	testwait.Until(t, 15*time.Second, "a monitor created", func() bool {
		a = gateCall(t, "POST", base+"/monitors", body)
		return a.status != http.StatusServiceUnavailable
	})
	return a
}

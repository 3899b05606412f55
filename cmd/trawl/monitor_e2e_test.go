package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><title>Shop %[1]s</title></head><body><main><article><h1>Shop %[1]s</h1>
<p>The products of the shop at %[1]s and their prices, kept up to date by the shop team every day.</p>
<h2>Prices</h2><table><thead><tr><th>Product</th><th>Price</th></tr></thead>
<tbody><tr><td>Widget</td><td>%[2]s</td></tr><tr><td>Gadget</td><td>20</td></tr></tbody></table>
<p>All prices include tax and are shown in euros; shipping is free over 100 euros.</p></article></main></body></html>`, r.URL.Path, p)
	}))
	defer site.Close()
	// The receiver answers 500 to the first posts of each delivery, so
	// deliveries are being retried around the kill.
	got := map[string]int{}   // delivery id → 2xx answers
	tries := map[string]int{} // delivery id → posts
	byMonitor := map[string]map[string]bool{}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		id, mon := r.Header.Get("X-Svc-Delivery"), r.Header.Get("X-Svc-Monitor")
		mu.Lock()
		defer mu.Unlock()
		tries[id]++
		if byMonitor[mon] == nil {
			byMonitor[mon] = map[string]bool{}
		}
		byMonitor[mon][id] = true
		if tries[id] <= 2 {
			w.WriteHeader(500)
			return
		}
		got[id]++
	}))
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
		a := gateCall(t, "POST", dev.base+"/monitors", fmt.Sprintf(`{"url":"%s/shop/%d","watch":"the price drops below 48","every":"2s","notify":{"webhook":"%s","secret":"s"}}`, site.URL, i, recv.URL))
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

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

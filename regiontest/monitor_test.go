package regiontest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/testwait"
	"github.com/trawlhq/trawl/internal/webhook"
	"github.com/trawlhq/trawl/ledger"
)

// fakeClock is the cells' injected clock: the test moves it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

const shopPage = `<!doctype html><html><head><title>Shop</title></head><body><nav>Home · Build 4711</nav><main><article>
<h1>Shop</h1><p>Our products and their prices, kept up to date by the shop team every single day.</p>
<h2>Prices</h2><table><thead><tr><th>Product</th><th>Price</th></tr></thead>
<tbody><tr><td>Widget</td><td>PRICE</td></tr><tr><td>Gadget</td><td>20</td></tr></tbody></table>
<p>All prices include tax and are shown in euros; shipping is free over 100 euros.</p></article></main></body></html>`

// A monitor through the gate: create (and again), list, get, the baseline,
// a table row's price change reported as a typed fact, confirmed after the
// delay and delivered as a signed webhook, the versions behind the
// evidence, patch, delete; another account sees none of it; bad input is
// the spec's text and changes nothing; monitor calls cost nothing.
func TestMonitorThroughGate(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
	var mu sync.Mutex
	price := "50"
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, strings.Replace(shopPage, "PRICE", price, 1))
	}))
	defer shop.Close()
	type hook struct {
		header http.Header
		body   []byte
	}
	var hooks []hook
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		hooks = append(hooks, hook{r.Header.Clone(), b})
		mu.Unlock()
	}))
	defer recv.Close()

	g := Start(t, Options{Cell: func(c *cell.Config) {
		c.Now = clk.Now
		c.Monitor.ConfirmAfter = 2 * time.Minute
	}})
	mon := g.Cells[0].Cell.Monitors()
	key1, key2 := g.Account(t, "supporter", 100), g.Account(t, "supporter", 100) // acct1, acct2

	// Refusals: the spec's texts, nothing created.
	for _, c := range []struct{ body, want string }{
		{`{"url":"nope"}`, "url is not valid"},
		{`{"url":"gopher://x.example/"}`, "url must start with http:// or https://"},
		{`{"url":"` + shop.URL + `","every":"1m"}`, "every must be at least 4m"},
		{`{"url":"` + shop.URL + `","paused":true}`, "paused is set with PATCH only"},
		{`{"url":"` + shop.URL + `","every":5}`, ""},
		{`{"url":`, ""},
	} {
		r := call(t, "POST", g.URL+"/monitors", key1, c.body)
		var e struct{ Error, Message string }
		json.Unmarshal([]byte(r.body), &e)
		if r.status != 400 || c.want != "" && e.Message != c.want {
			t.Errorf("POST %s: %d %s, want 400 %q", c.body, r.status, r.body, c.want)
		}
		if r.header.Get("X-Svc-Cost") != "" && r.header.Get("X-Svc-Cost") != "0.000" {
			t.Errorf("a refusal cost %s", r.header.Get("X-Svc-Cost"))
		}
	}

	body := `{"url":"` + shop.URL + `/shop","watch":"Tell me when the price drops below 48","every":"1h",` +
		`"notify":{"webhook":"` + recv.URL + `","secret":"s3cret"},"name":"widget price"}`
	r := call(t, "POST", g.URL+"/monitors", key1, body)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var v struct {
		ID         string `json:"id"`
		Created    bool   `json:"created"`
		Conditions struct {
			Any []struct{ ID, Text string } `json:"any"`
		} `json:"conditions"`
		Baseline struct{ Status, Version string } `json:"baseline"`
		Health   string                           `json:"health"`
		Cost     struct {
			PerChangeCredits int `json:"per_change_credits"`
		} `json:"cost"`
	}
	json.Unmarshal([]byte(r.body), &v)
	if (!strings.HasPrefix(v.ID, "mon_eu.") || strings.Count(v.ID, ".") != 1) || !v.Created || len(v.Conditions.Any) != 1 || v.Conditions.Any[0].ID != "c1" ||
		v.Baseline.Status != "pending" || v.Health != "ok" || v.Cost.PerChangeCredits != 3 {
		t.Fatalf("create: %s", r.body)
	}
	if c := r.header.Get("X-Svc-Cost"); c != "" && c != "0.000" {
		t.Errorf("create cost %s", c)
	}
	if r := call(t, "POST", g.URL+"/monitors", key1, body); r.status != 200 || !strings.Contains(r.body, `"created":false`) || !strings.Contains(r.body, v.ID) {
		t.Fatalf("create again: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", g.URL+"/monitors", key1, ""); r.status != 200 || strings.Count(r.body, `"id":"mon_`) != 1 {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", g.URL+"/monitors", key2, ""); r.status != 200 || strings.Contains(r.body, "mon_") {
		t.Fatalf("another account's list: %d %s", r.status, r.body)
	}
	for _, path := range []string{"/monitors/" + v.ID, "/monitors/" + v.ID + "/events", "/monitors/nope", "/monitors/mon_sin.c1.5f2a09c3e1d4b7a86f10"} {
		if r := call(t, "GET", g.URL+path, key2, ""); r.status != 404 || !strings.Contains(r.body, "no such monitor") {
			t.Errorf("GET %s as another account: %d %s", path, r.status, r.body)
		}
	}
	if r := call(t, "DELETE", g.URL+"/monitors/"+v.ID, key2, ""); r.status != 404 {
		t.Errorf("another account's delete: %d %s", r.status, r.body)
	}

	// The baseline, within a minute.
	// Waits poll the cell's service, not the gate: the plan's rate limit
	// counts every call.
	testwait.Until(t, 10*time.Second, "the baseline", func() bool {
		m, err := mon.Get(context.Background(), "acct1", v.ID)
		return err == nil && m.Baseline.Status == "ok"
	})

	// The price drops: seen at once, confirmed after the delay.
	mu.Lock()
	price = "45"
	mu.Unlock()
	clk.Add(time.Hour)
	mon.Kick()
	type event struct {
		ID          int64                          `json:"id"`
		Event       string                         `json:"event"`
		Matched     []string                       `json:"matched"`
		Summary     string                         `json:"summary"`
		Facts       []map[string]string            `json:"facts"`
		ConfirmedAt *string                        `json:"confirmed_at"`
		Evidence    struct{ Before, After string } `json:"evidence"`
		CostCredits int                            `json:"cost_credits"`
		Delivery    struct {
			Webhook *struct {
				Status   string `json:"status"`
				Attempts int    `json:"attempts"`
			} `json:"webhook"`
			Done bool `json:"done"`
		} `json:"delivery"`
	}
	events := func() []event {
		r := call(t, "GET", g.URL+"/monitors/"+v.ID+"/events", key1, "")
		var out struct{ Events []event }
		if err := json.Unmarshal([]byte(r.body), &out); err != nil || r.status != 200 {
			t.Fatalf("events: %d %s", r.status, r.body)
		}
		return out.Events
	}
	testwait.Until(t, 10*time.Second, "the change at first sight", func() bool {
		es, _ := mon.Events(context.Background(), "acct1", v.ID, time.Time{}, 10)
		return len(es) == 1
	})

	e := events()[0]
	if e.Event != "change" || e.ConfirmedAt != nil || len(e.Matched) != 1 || len(e.Facts) != 1 {
		t.Fatalf("first sight: %+v", e)
	}
	if f := e.Facts[0]; f["kind"] != "changed" || f["entity"] != "Widget" || f["field"] != "Price" || f["before"] != "50" || f["after"] != "45" {
		t.Fatalf("fact %+v", f)
	}
	clk.Add(2 * time.Minute)
	mon.Kick()
	testwait.Until(t, 10*time.Second, "the delivery", func() bool {
		es, _ := mon.Events(context.Background(), "acct1", v.ID, time.Time{}, 10)
		return len(es) == 1 && es[0].Delivery.Done && es[0].Delivery.Webhook != nil && es[0].Delivery.Webhook.Status == "delivered"
	})

	e = events()[0]
	if e.ConfirmedAt == nil || e.CostCredits != 3 {
		t.Fatalf("confirmed: %+v", e)
	}
	mu.Lock()
	if len(hooks) != 1 {
		t.Fatalf("%d webhook posts", len(hooks))
	}
	h := hooks[0]
	mu.Unlock()
	if h.header.Get("X-Svc-Event") != "change" || h.header.Get("X-Svc-Monitor") != v.ID ||
		!webhook.Verify("s3cret", h.header.Get("X-Svc-Timestamp"), h.header.Get("X-Svc-Signature"), h.body, time.Time{}, 0) {
		t.Fatalf("webhook headers %v", h.header)
	}
	if r := call(t, "GET", g.URL+e.Evidence.After, key1, ""); r.status != 200 || !strings.Contains(r.body, "| Widget | 45 |") {
		t.Fatalf("version after: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", g.URL+e.Evidence.Before, key1, ""); r.status != 200 || !strings.Contains(r.body, "| Widget | 50 |") {
		t.Fatalf("version before: %d %s", r.status, r.body)
	}
	for path, want := range map[string]string{
		"/monitors/" + v.ID + "/versions/nope":         "no such version",
		"/monitors/" + v.ID + "/events?limit=0":        "limit must be 1 to 500",
		"/monitors/" + v.ID + "/events?since=tomorrow": "since must be an ISO 8601 time or unix seconds",
	} {
		if r := call(t, "GET", g.URL+path, key1, ""); r.status/100 != 4 || !strings.Contains(r.body, want) {
			t.Errorf("GET %s: %d %s", path, r.status, r.body)
		}
	}
	if r := call(t, "GET", g.URL+"/monitors/"+v.ID+"/events?since=2099-01-01T00:00:00Z", key1, ""); !strings.Contains(r.body, `"events":[]`) {
		t.Errorf("since in the future: %s", r.body)
	}
	// The charges wait for the gate: checks and the matched change.
	cs, err := mon.Charges(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, c := range cs {
		kinds[c.Usage.Kind]++
	}
	if kinds[metering.KindMonitorChange] != 1 || kinds[metering.KindMonitorCheck] < 2 {
		t.Fatalf("charges %+v", cs)
	}
	// The gate collects them: each a usage line with its receipt, charged
	// once.
	n, err := g.Runtime.CollectMonitorCharges(context.Background())
	if err != nil || n != len(cs) {
		t.Fatalf("collected %d of %d: %v", n, len(cs), err)
	}
	if left, _ := mon.Charges(context.Background(), 100); len(left) != 0 {
		t.Fatalf("%d charges left at the cell", len(left))
	}
	if n, err := g.Runtime.CollectMonitorCharges(context.Background()); n != 0 || err != nil {
		t.Fatalf("collected again: %d %v", n, err)
	}
	r = call(t, "GET", g.URL+"/v1/billing/usage", key1, "")
	var hist struct {
		Lines []struct {
			Receipt, Call, URL, Units string
		} `json:"lines"`
	}
	json.Unmarshal([]byte(r.body), &hist)
	got := map[string]string{}
	for _, l := range hist.Lines {
		if !strings.HasPrefix(l.Receipt, "r_eu_") || l.URL != shop.URL+"/shop" {
			t.Errorf("usage line %+v", l)
		}
		got[l.Call] = l.Units
	}
	if got[metering.KindMonitorChange] != "3.000" || got[metering.KindMonitorCheck] != "1.000" || len(hist.Lines) != len(cs) {
		t.Fatalf("usage lines %s", r.body)
	}
	// A customer cannot read them through the gate.
	if r := call(t, "GET", g.URL+"/monitor-charges", key1, ""); r.status != 403 {
		t.Errorf("/monitor-charges as a customer: %d %s", r.status, r.body)
	}

	// PATCH: a bad value changes nothing; paused.
	if r := call(t, "PATCH", g.URL+"/monitors/"+v.ID, key1, `{"every":"1m","name":"x"}`); r.status != 400 || !strings.Contains(r.body, "every must be at least 4m") {
		t.Fatalf("bad patch: %d %s", r.status, r.body)
	}
	if r := call(t, "PATCH", g.URL+"/monitors/"+v.ID, key1, `{"paused":true}`); r.status != 200 || !strings.Contains(r.body, `"paused":true`) || !strings.Contains(r.body, `"name":"widget price"`) {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	if r := call(t, "DELETE", g.URL+"/monitors/"+v.ID, key1, ""); r.status != 200 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", g.URL+"/monitors/"+v.ID, key1, ""); r.status != 404 || !strings.Contains(r.body, "no such monitor") {
		t.Fatalf("after delete: %d %s", r.status, r.body)
	}
}

// The account-wide limits through a real gate: each create, each patch
// that makes a monitor fast, each delete moves the account's and the
// host's counts in the ledger (monitor_slot, in Raft order), so every
// region counts the same monitors. A place taken in another region (a
// command the sin gate would have submitted) counts here too; refusals are
// the spec's 429 texts and create nothing.
func TestMonitorLimitsInTheLedger(t *testing.T) {
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, strings.Replace(shopPage, "PRICE", "50", 1))
	}))
	defer shop.Close()
	g := Start(t, Options{Cells: 2, Cell: func(c *cell.Config) {
		c.Monitor.Limits.Account, c.Monitor.Limits.Fast, c.Monitor.Limits.Host = 3, 1, 4
	}})
	key1, key2 := g.Account(t, "supporter", 100), g.Account(t, "supporter", 100) // acct1, acct2
	state := g.Runtime.Node().State()
	counts := func(acct string) ledger.MonitorCounts {
		n, err := state.MonitorCounts(acct, "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	create := func(key, path, every string) reply {
		return call(t, "POST", g.URL+"/monitors", key, `{"url":"`+shop.URL+path+`","every":"`+every+`"}`)
	}
	refused := func(r reply, want string) {
		t.Helper()
		var e struct{ Error, Message string }
		json.Unmarshal([]byte(r.body), &e)
		if r.status != 429 || e.Error != "monitor_limit" || e.Message != want {
			t.Fatalf("got %d %s, want 429 %q", r.status, r.body, want)
		}
	}
	a := create(key1, "/a", "15m")
	if a.status != 201 {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	refused(create(key1, "/b", "15m"), "at most 1 running monitors checked more often than every 1h per account")
	if n := counts("acct1"); n.Account != 1 || n.Fast != 1 || n.Host != 1 {
		t.Fatalf("ledger counts %+v", n)
	}
	// Another region took a place for acct1 (as the sin gate's store does).
	if err := Submit(g.Runtime.Node(), &ledger.Command{ID: "sin-slot", Type: ledger.CmdMonitorSlot, Time: time.Now().UTC(),
		MonitorSlot: &ledger.MonitorSlot{Op: ledger.MonitorAdd, Monitor: "mon_sin.00000000000000000001", Account: "acct1",
			Host: "127.0.0.1", Limits: ledger.MonitorLimits{Account: 3, Fast: 1, Host: 4}}}); err != nil {
		t.Fatal(err)
	}
	if r := create(key1, "/b", "1h"); r.status != 201 {
		t.Fatalf("third place: %d %s", r.status, r.body)
	}
	// eu holds two of acct1's monitors, the ledger three: the fourth is refused.
	refused(create(key1, "/c", "1h"), "at most 3 monitors per account")
	if r := call(t, "GET", g.URL+"/monitors", key1, ""); strings.Count(r.body, `"id":"mon_`) != 2 {
		t.Fatalf("list after refusals: %s", r.body)
	}
	// The host: 3 places taken; acct2's first takes the fourth, its second is refused.
	if r := create(key2, "/d", "1h"); r.status != 201 {
		t.Fatalf("acct2: %d %s", r.status, r.body)
	}
	refused(create(key2, "/e", "1h"), "this site has too many monitors already")
	// Patch: slowing the fast one frees the fast place; delete gives back the rest.
	var v struct{ ID string }
	json.Unmarshal([]byte(a.body), &v)
	if r := call(t, "PATCH", g.URL+"/monitors/"+v.ID, key1, `{"every":"1h"}`); r.status != 200 {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	if n := counts("acct1"); n.Fast != 0 || n.Account != 3 {
		t.Fatalf("after patch %+v", n)
	}
	if r := call(t, "DELETE", g.URL+"/monitors/"+v.ID, key1, ""); r.status != 200 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if n := counts("acct1"); n.Account != 2 || n.Host != 3 {
		t.Fatalf("after delete %+v", n)
	}
	if r := create(key1, "/c", "15m"); r.status != 201 {
		t.Fatalf("after delete: %d %s", r.status, r.body)
	}
}

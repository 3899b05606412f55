package regiontest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/gate"
	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/jobid"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/internal/testwait"
	"github.com/trawlhq/trawl/ledger"
)

const testOperatorKey = "trawl_operator_test_key_0123456789"

func operatorGate(t *testing.T, cells int) *Gate {
	t.Helper()
	return operatorGateWith(t, Options{Cells: cells})
}

func operatorGateWith(t *testing.T, o Options) *Gate {
	t.Helper()
	g := Start(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := gate.EnsureOperatorKey(ctx, g.Runtime.Node(), testOperatorKey, time.Now); err != nil {
		t.Fatal(err)
	}
	return g
}

// Every operator row refuses a request without a key (401), with a
// customer's key and with an auditor's key (403), and changes nothing.
func TestOperatorRoutesRefuseCustomerKeys(t *testing.T) {
	g := operatorGate(t, 1)
	customer := g.Account(t, ledger.PlanSupporter, 10)
	auditorAcct := g.Account(t, ledger.PlanSupporter, 0)
	_ = auditorAcct
	auditor := "trawl_test_auditor_key_0123456789"
	if err := Submit(g.Runtime.Node(), &ledger.Command{ID: "auditor/key", Type: ledger.CmdAddKey, Time: time.Now().UTC(),
		AddKey: &ledger.Key{ID: "key_auditor", Account: "acct2", Hash: billing.HashKey(auditor), Prefix: auditor[:14], Role: ledger.RoleAuditor, Kind: "permanent"}}); err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer("{name}", "c1", "{account}", "acct1", "{id}", "key_acct1", "{plan}", "free")
	n := 0
	for _, row := range routes.Default().Rows() {
		if row.Service != "operator" {
			continue
		}
		n++
		method := row.Method()
		if method == "" {
			method = "GET"
		}
		path := fill.Replace(row.Path())
		if row.Prefix() {
			path += "v1/anything"
		}
		body := ""
		if method == "POST" || method == "PUT" {
			body = `{}`
		}
		if r := call(t, method, g.URL+path, "", body); r.status != 401 {
			t.Errorf("%s %s without a key: %d %s", method, path, r.status, r.body)
		}
		for name, key := range map[string]string{"customer": customer, "auditor": auditor} {
			r := call(t, method, g.URL+path, key, body)
			if r.status != 403 || !strings.Contains(r.body, `"forbidden"`) {
				t.Errorf("%s %s with a %s key: %d %s", method, path, name, r.status, r.body)
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d operator rows", n)
	}
	// Nothing changed: the customer's key works, no cell drained, prices
	// as before.
	if r := call(t, "GET", g.URL+"/v1/billing/balance", customer, ""); r.status != 200 {
		t.Fatalf("customer key after: %d %s", r.status, r.body)
	}
	if len(g.Runtime.WorkCells()) != 1 || g.Runtime.Prices().Calls["scrape"].Base != billing.DefaultPrices().Calls["scrape"].Base {
		t.Fatal("a refused operator call changed something")
	}
}

func TestOperatorCells(t *testing.T) {
	g := operatorGate(t, 2)
	pages := site(t)
	key := g.Account(t, ledger.PlanSupporter, 100)
	op := testOperatorKey

	var list gate.CellList
	r := call(t, "GET", g.URL+"/operator/v1/cells", op, "")
	if r.status != 200 || json.Unmarshal([]byte(r.body), &list) != nil || len(list.Cells) != 2 || !list.Cells[0].Live || list.Cells[0].Drained {
		t.Fatalf("cells: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", g.URL+"/operator/v1/cells/nope/drain", op, ""); r.status != 404 {
		t.Fatalf("drain an unknown cell: %d %s", r.status, r.body)
	}
	// Drain c1, stop c2: the region has no cell for new work, though c1
	// is live.
	if r := call(t, "POST", g.URL+"/operator/v1/cells/c1/drain", op, ""); r.status != 200 || !strings.Contains(r.body, `"drained":true`) {
		t.Fatalf("drain: %d %s", r.status, r.body)
	}
	if r := call(t, "DELETE", g.URL+"/operator/v1/cells/c1", op, ""); r.status != 409 || !strings.Contains(r.body, gate.CodeCellLive) {
		t.Fatalf("remove a live cell: %d %s", r.status, r.body)
	}
	g.Cells[1].Stop()
	testwait.Until(t, 10*time.Second, "c2 gone", func() bool { return len(g.Runtime.Cells()) == 1 })
	if r := call(t, "POST", g.URL+"/scrape", key, `{"url":"`+pages.URL+`/a"}`); r.status != 503 {
		t.Fatalf("scrape with the only live cell drained: %d %s", r.status, r.body)
	}
	// Its own objects still reach it: a job id naming c1 is answered by
	// c1 (404: no such job), not refused as unreachable.
	if r := call(t, "GET", g.URL+"/scrape/jobs/"+jobid.New("eu", "c1"), key, ""); r.status != 404 {
		t.Fatalf("a drained cell's job id: %d %s", r.status, r.body)
	}
	if r := call(t, "DELETE", g.URL+"/operator/v1/cells/c1/drain", op, ""); r.status != 200 || !strings.Contains(r.body, `"drained":false`) {
		t.Fatalf("undrain: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", g.URL+"/scrape", key, `{"url":"`+pages.URL+`/b"}`); r.status != 200 {
		t.Fatalf("scrape after the undrain: %d %s", r.status, r.body)
	}
	// c2 is down: its ids answer 503 until it is removed, then 404.
	c2job := jobid.New("eu", "c2")
	if r := call(t, "GET", g.URL+"/scrape/jobs/"+c2job, key, ""); r.status != 503 {
		t.Fatalf("a down cell's job: %d %s", r.status, r.body)
	}
	if r := call(t, "DELETE", g.URL+"/operator/v1/cells/c2", op, ""); r.status != 204 {
		t.Fatalf("remove c2: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", g.URL+"/scrape/jobs/"+c2job, key, ""); r.status != 404 {
		t.Fatalf("a removed cell's job: %d %s", r.status, r.body)
	}
	r = call(t, "GET", g.URL+"/operator/v1/cells", op, "")
	if json.Unmarshal([]byte(r.body), &list) != nil || len(list.Cells) != 1 || list.Cells[0].Name != "c1" {
		t.Fatalf("cells after the removal: %s", r.body)
	}
}

func TestOperatorKeys(t *testing.T) {
	g := operatorGate(t, 1)
	op := testOperatorKey
	other := g.Account(t, ledger.PlanFree, 0) // acct1
	if r := call(t, "POST", g.URL+"/operator/v1/accounts", op, `{"id":"team","plan":"weird"}`); r.status != 400 {
		t.Fatalf("bad plan: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", g.URL+"/operator/v1/accounts", op, `{"id":"team","plan":"supporter","email":"ops@example.com"}`); r.status != 201 {
		t.Fatalf("create account: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", g.URL+"/operator/v1/accounts", op, `{"id":"team"}`); r.status != 409 {
		t.Fatalf("again: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", g.URL+"/operator/v1/accounts/team/keys", op, `{"role":"root"}`); r.status != 400 {
		t.Fatalf("bad role: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", g.URL+"/operator/v1/accounts/ghost/keys", op, `{}`); r.status != 404 {
		t.Fatalf("no account: %d %s", r.status, r.body)
	}
	var k gate.OperatorKey
	r := call(t, "POST", g.URL+"/operator/v1/accounts/team/keys", op, `{"name":"ci"}`)
	if r.status != 201 || json.Unmarshal([]byte(r.body), &k) != nil || k.Key == "" || k.Role != "user" || k.Account != "team" {
		t.Fatalf("create key: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", g.URL+"/v1/billing/balance", k.Key, ""); r.status != 200 {
		t.Fatalf("the new key: %d %s", r.status, r.body)
	}
	// A user key made by an operator is still no operator key.
	if r := call(t, "GET", g.URL+"/operator/v1/cells", k.Key, ""); r.status != 403 {
		t.Fatalf("new user key on the operator API: %d %s", r.status, r.body)
	}
	r = call(t, "GET", g.URL+"/operator/v1/accounts/team/keys", op, "")
	if r.status != 200 || !strings.Contains(r.body, k.ID) || strings.Contains(r.body, k.Key) {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	// Another account's key under this account is 404 and stays.
	if r := call(t, "DELETE", g.URL+"/operator/v1/accounts/team/keys/key_acct1", op, ""); r.status != 404 {
		t.Fatalf("another account's key: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", g.URL+"/v1/billing/balance", other, ""); r.status != 200 {
		t.Fatalf("the other account's key after: %d %s", r.status, r.body)
	}
	if r := call(t, "DELETE", g.URL+"/operator/v1/accounts/team/keys/"+k.ID, op, ""); r.status != 204 {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", g.URL+"/v1/billing/balance", k.Key, ""); r.status != 401 {
		t.Fatalf("a revoked key: %d %s", r.status, r.body)
	}
	// Grants: a refund by its receipt is granted once.
	if r := call(t, "POST", g.URL+"/operator/v1/accounts/team/grants", op, `{"credits":"10.000","bucket":"pack"}`); r.status != 400 {
		t.Fatalf("grant into pack: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", g.URL+"/operator/v1/accounts/team/grants", op, `{"credits":"-1.000"}`); r.status != 400 {
		t.Fatalf("negative grant: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", g.URL+"/operator/v1/accounts/ghost/grants", op, `{"credits":"1.000"}`); r.status != 404 {
		t.Fatalf("grant to no account: %d %s", r.status, r.body)
	}
	for i, want := range []string{`"balance":"10.000","granted":"10.000","repeat":false`, `"balance":"10.000","granted":"10.000","repeat":true`} {
		r := call(t, "POST", g.URL+"/operator/v1/accounts/team/grants", op, `{"credits":"10.000","id":"refund-r_1"}`)
		if r.status != 200 || !strings.Contains(r.body, want) {
			t.Fatalf("grant %d: %d %s, want %s", i, r.status, r.body, want)
		}
	}

	// An operator key made through the API works on the API.
	var ok2 gate.OperatorKey
	r = call(t, "POST", g.URL+"/operator/v1/accounts/operator/keys", op, `{"role":"operator","name":"second"}`)
	if r.status != 201 || json.Unmarshal([]byte(r.body), &ok2) != nil {
		t.Fatalf("operator key: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", g.URL+"/operator/v1/cells", ok2.Key, ""); r.status != 200 {
		t.Fatalf("second operator key: %d %s", r.status, r.body)
	}
}

func TestOperatorPrices(t *testing.T) {
	g := operatorGate(t, 1)
	op := testOperatorKey
	var pt gate.PriceTableBody
	r := call(t, "GET", g.URL+"/operator/v1/prices", op, "")
	if r.status != 200 || json.Unmarshal([]byte(r.body), &pt) != nil || pt.Version != 0 || pt.Table.Calls["scrape"].Base != billing.DefaultPrices().Calls["scrape"].Base {
		t.Fatalf("prices: %d %s", r.status, r.body)
	}
	// A table that does not validate changes nothing.
	if r := call(t, "PUT", g.URL+"/operator/v1/prices", op, `{"version":0,"table":{"archive_percent":300}}`); r.status != 400 {
		t.Fatalf("bad table: %d %s", r.status, r.body)
	}
	pt.Table.Calls["scrape"] = billing.CallPrice{Base: billing.Amount(ledger.Credits(2)), Per: "call", Effort: true, Cache: true}
	body, _ := json.Marshal(map[string]any{"version": pt.Version, "table": pt.Table})
	r = call(t, "PUT", g.URL+"/operator/v1/prices", op, string(body))
	var after gate.PriceTableBody
	if r.status != 200 || json.Unmarshal([]byte(r.body), &after) != nil || after.Version == 0 {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	// The public table and the meter price with it.
	if r := call(t, "GET", g.URL+"/v1/prices", "", ""); !strings.Contains(r.body, `"scrape":{"base":"2.000"`) {
		t.Fatalf("public prices after the change: %s", r.body)
	}
	if q, err := g.Runtime.Prices().Quote(billing.Usage{Kind: "scrape"}); err != nil || q != ledger.Credits(2) {
		t.Fatalf("quote: %v %v", q, err)
	}
	// A change from the old version is refused.
	if r := call(t, "PUT", g.URL+"/operator/v1/prices", op, string(body)); r.status != 409 {
		t.Fatalf("stale version: %d %s", r.status, r.body)
	}
	// A plan: its limits and monthly credit.
	r = call(t, "PUT", g.URL+"/operator/v1/plans/free", op, `{"version":`+jsonNum(after.Version)+`,"rate_per_minute":30,"concurrency":3,"keys":4,"monthly_cap":"0.000","monthly_credits":"150.000"}`)
	if r.status != 200 {
		t.Fatalf("put plan: %d %s", r.status, r.body)
	}
	if r := call(t, "PUT", g.URL+"/operator/v1/plans/gold", op, `{"version":0}`); r.status != 404 {
		t.Fatalf("unknown plan: %d %s", r.status, r.body)
	}
	var plans gate.PlansBody
	r = call(t, "GET", g.URL+"/operator/v1/plans", op, "")
	if r.status != 200 || json.Unmarshal([]byte(r.body), &plans) != nil || plans.Plans["free"].Keys != 4 || plans.Plans["free"].MonthlyCredits != billing.Amount(ledger.Credits(150)) {
		t.Fatalf("plans: %d %s", r.status, r.body)
	}
	// The scrape price survived the plan change (one table).
	if g.Runtime.Prices().Calls["scrape"].Base != billing.Amount(ledger.Credits(2)) {
		t.Fatal("the plan change lost the price change")
	}
	// The table is ledger state: a restarted gate (no file) serves it.
	g.Restart(t)
	g.WaitReady(t)
	testwait.Until(t, 10*time.Second, "the replicated table after a restart", func() bool {
		return g.Runtime.Prices().Plans["free"].Keys == 4
	})

}

func jsonNum(v uint64) string { b, _ := json.Marshal(v); return string(b) }

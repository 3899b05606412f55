package regiontest

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/caddy-modules/app"
	"github.com/trawlhq/trawl/ledger"
)

// A config reload keeps the runtime (the voter, the holds, the membership)
// and the rate limiter's counts: a client cannot reset its limit by waiting
// for an operator's reload, and the ledger is not reopened.
func TestReloadKeepsRuntimeAndLimits(t *testing.T) {
	g := Start(t, Options{})
	key := g.Account(t, ledger.PlanFree, 10)
	for i := 0; i < 15; i++ {
		if r := call(t, "GET", g.URL+"/v1/billing/balance", key, ""); r.status != 200 {
			t.Fatalf("call %d: %d %s", i, r.status, r.body)
		}
	}
	g.Reload(t)
	if rt, ok := app.Running(g.DataDir); !ok || rt != g.Runtime {
		t.Fatal("the reload opened a new runtime")
	}
	for i := 15; i < 20; i++ {
		r := call(t, "GET", g.URL+"/v1/billing/balance", key, "")
		if r.status != 200 {
			t.Fatalf("call %d after reload: %d %s", i, r.status, r.body)
		}
		if r.header.Get("X-RateLimit-Remaining") != strconv.Itoa(19-i) {
			t.Fatalf("call %d: remaining %q, want %d", i, r.header.Get("X-RateLimit-Remaining"), 19-i)
		}
	}
	if r := call(t, "GET", g.URL+"/v1/billing/balance", key, ""); r.status != 429 {
		t.Fatalf("21st call in the minute: %d, want 429", r.status)
	}
}

// The gate caches key lookups per applied index of the replica: a revoked
// key is refused on the very next request.
func TestRevokedKeyRefusedAtOnce(t *testing.T) {
	g := Start(t, Options{})
	key := g.Account(t, ledger.PlanFree, 10)
	for range 3 {
		if r := call(t, "GET", g.URL+"/v1/billing/balance", key, ""); r.status != 200 {
			t.Fatalf("before: %d %s", r.status, r.body)
		}
	}
	id := "key_acct" + strconv.Itoa(1)
	if err := Submit(g.Runtime.Node(), &ledger.Command{ID: "revoke/" + id, Type: ledger.CmdRevokeKey, Time: time.Now().UTC(),
		RevokeKey: &ledger.RevokeKey{KeyID: id}}); err != nil {
		t.Fatal(err)
	}
	if r := call(t, "GET", g.URL+"/v1/billing/balance", key, ""); r.status != 401 || !strings.Contains(r.body, "revoked") {
		t.Fatalf("after revocation: %d %s", r.status, r.body)
	}
}

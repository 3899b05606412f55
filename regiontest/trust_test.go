package regiontest

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/members"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/testwait"
	"github.com/trawlhq/trawl/ledger"
)

// What a cell receives: never the customer's key, always the account id
// signed with the region's keys.
func TestCellGetsTheAccountNotTheKey(t *testing.T) {
	g := Start(t, Options{Cells: 1})
	key := g.Account(t, ledger.PlanFree, 100)
	seen := make(chan http.Header, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		http.Error(w, "no", http.StatusTeapot)
	}))
	defer up.Close()
	// A listener of the cell's own shape is not needed: the gate's request
	// itself is what this test reads, through a member whose API is up.
	g.Cells[0].Stop()
	m := rogueMember(t, g, up.Listener.Addr().String(), g.Runtime.RegionKeys().All())
	defer m.Close()
	testwait.Until(t, 10*time.Second, "the member is the region's only cell", func() bool {
		cs := g.Runtime.Cells()
		return len(cs) == 1 && cs[0].API == up.Listener.Addr().String()
	})

	req, _ := http.NewRequest("POST", g.URL+"/scrape", strings.NewReader(`{"url":"http://127.0.0.1:1/"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Api-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h := <-seen
	if h.Get("Authorization") != "" || h.Get("X-Api-Key") != "" {
		t.Fatalf("the customer's key reached the cell: %v", h)
	}
	if h.Get(regionauth.HeaderAccount) == "" || h.Get(regionauth.HeaderAuth) == "" {
		t.Fatalf("the cell got no signed account: %v", h)
	}
	// The answer above was not signed: the client got a 502, not the 418.
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("an unsigned answer was passed on: %d", resp.StatusCode)
	}
}

// A process at a cell's address that lacks the region's keys (here: a
// member's API answered by a forger) cannot bill anyone: its answer is
// replaced by a 502 and nothing is charged.
func TestForgedCellAnswerIsRefused(t *testing.T) {
	g := Start(t, Options{Cells: 1})
	key := g.Account(t, ledger.PlanFree, 100)
	var mu sync.Mutex
	forged := 0
	other, _ := regionauth.ParseKeys(regionauth.NewKey())
	forger := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		forged++
		mu.Unlock()
		usage := `{"kind":"scrape","engine":"browser","level":"browser","count":10}`
		w.Header().Set(metering.Header, usage)
		// Signed, but with a key of another region.
		w.Header().Set(regionauth.HeaderUsageSig, other.SignAnswer("00", 200, usage))
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true,"markdown":"forged page"}`))
	}))
	defer forger.Close()
	g.Cells[0].Stop()
	m := rogueMember(t, g, forger.Listener.Addr().String(), g.Runtime.RegionKeys().All())
	defer m.Close()
	testwait.Until(t, 10*time.Second, "the forger is the region's only cell", func() bool {
		cs := g.Runtime.Cells()
		return len(cs) == 1 && cs[0].API == forger.Listener.Addr().String()
	})

	r := call(t, "POST", g.URL+"/scrape", key, `{"url":"http://127.0.0.1:1/"}`)
	mu.Lock()
	n := forged
	mu.Unlock()
	if n == 0 {
		t.Fatal("the request never reached the forger")
	}
	if r.status != http.StatusBadGateway || strings.Contains(r.body, "forged page") || !strings.Contains(r.body, "cell_unavailable") {
		t.Fatalf("forged answer: %d %s", r.status, r.body)
	}
	if c := r.header.Get("X-Svc-Cost"); c != "" && c != "0.000" {
		t.Fatalf("a forged answer cost %s", c)
	}
	r = call(t, "GET", g.URL+"/v1/billing/balance", key, "")
	if r.header.Get("X-Svc-Balance") != "100.000" {
		t.Fatalf("balance after a forged answer: %q (%s)", r.header.Get("X-Svc-Balance"), r.body)
	}
}

// rogueMember joins the gate's region as a cell whose API is api.
func rogueMember(t *testing.T, g *Gate, api string, keys [][]byte) *members.Cluster {
	t.Helper()
	m, err := members.Start(members.Config{
		Bind: "127.0.0.1:0", Join: []string{g.Runtime.MembersAddr()}, Keys: keys,
		Meta: members.Meta{Role: "cell", Region: g.Runtime.Region(), Name: "rogue", API: api},
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// An id naming a cell the region never had is no object (404); one naming
// a cell that is down is kept (503, repeat later).
func TestJobOfACellThatNeverWas(t *testing.T) {
	g := Start(t, Options{Cells: 1})
	key := g.Account(t, ledger.PlanFree, 100)
	never := "j_eu.c9.0123456789abcdef0123"
	r := call(t, "GET", g.URL+"/scrape/jobs/"+never, key, "")
	if r.status != http.StatusNotFound || !strings.Contains(r.body, `"not_found"`) {
		t.Fatalf("job of a cell the region never had: %d %s", r.status, r.body)
	}
	g.Cells[0].Stop()
	testwait.Until(t, 10*time.Second, "c1 leaves the region", func() bool { return len(g.Runtime.Cells()) == 0 })
	r = call(t, "GET", g.URL+"/scrape/jobs/j_eu.c1.0123456789abcdef0123", key, "")
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, `"cell_unavailable"`) {
		t.Fatalf("job of a cell that is down: %d %s", r.status, r.body)
	}
}

// Behind a trusted front proxy, sign-ups count per client (the forwarded
// address), not per proxy; an IPv6 /64 is one client.
func TestSignupCountsClientsBehindTrustedProxies(t *testing.T) {
	g := Start(t, Options{Cells: 1, TrustedProxies: []string{"127.0.0.1/32"}})
	n := 0
	signup := func(client string) int {
		n++
		req, _ := http.NewRequest("POST", g.URL+"/signup", strings.NewReader("email=p"+strconv.Itoa(n)+"%40example.com"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-For", client)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 5 {
		if s := signup("198.51.100.7"); s != http.StatusOK {
			t.Fatalf("sign-up %d of one client: %d", i+1, s)
		}
	}
	if s := signup("198.51.100.7"); s != http.StatusTooManyRequests {
		t.Fatalf("sixth sign-up of one client in an hour: %d, want 429", s)
	}
	if s := signup("198.51.100.8"); s != http.StatusOK {
		t.Fatalf("another client behind the same proxy: %d, want its own bucket", s)
	}
	for i := range 5 {
		if s := signup("2001:db8:5:5::" + strconv.Itoa(i+1)); s != http.StatusOK {
			t.Fatalf("IPv6 sign-up %d: %d", i+1, s)
		}
	}
	if s := signup("2001:db8:5:5:ffff::1"); s != http.StatusTooManyRequests {
		t.Fatalf("a sixth address of the same /64: %d, want 429", s)
	}
}

package main

// Process tests of the gate: real trawl processes (dev regions, extra
// cells), spoken to over HTTP, stopped and killed as an operator or a crash
// would.

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/testwait"
)

const e2eKey = "trawl_dev_e2e_0123456789abcdef"

// pages is a site of distinct small pages on loopback.
func pages(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><title>Page %[1]s</title></head><body><main><h1>Page %[1]s</h1>
<p>This is the page at %[1]s, with a paragraph long enough to be taken as the main content of the page.</p>
<p>And a second paragraph so the Markdown has some body.</p></main></body></html>`, r.URL.RequestURI())
	}))
	t.Cleanup(srv.Close)
	return srv
}

// freeRun returns the first of n consecutive loopback ports that are free now.
// They are taken below Linux's ephemeral range (32768–60999), where no
// listener on port 0 and no outgoing connection of another test can take
// one before the process under test binds it.
// handed are the ports freeRun has handed out in this test process.
var (
	handedMu sync.Mutex
	handed   = map[int]bool{}
)

func freeRun(t *testing.T, n int) int {
	t.Helper()
	handedMu.Lock()
	defer handedMu.Unlock()
	for try := 0; try < 200; try++ {
		base := 20000 + rand.IntN(12000-n)
		ok := true
		for i := 0; i < n && ok; i++ {
			if handed[base+i] {
				// Free now, but a run handed out before (its process
				// may not listen yet): two calls of one test overlapped
				// this way (gate ports 24063-5, ledger ports 24065-7).
				ok = false
				break
			}
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+i))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			for i := range n {
				handed[base+i] = true
			}
			return base
		}
	}
	t.Fatal("no free port run")
	return 0
}

// pricesFile writes the launch price table with the free plan unlimited
// (load tests) and a sign-up grant of signup credits.
func pricesFile(t *testing.T, signup int64) string {
	t.Helper()
	p := billing.DefaultPrices()
	free := p.Plans["free"]
	free.RatePerMinute, free.Concurrency = 0, 0
	p.Plans["free"] = free
	p.Grants.Signup = billing.Amount(signup * 1000)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func gateCall(t *testing.T, method, url, body string) answer {
	t.Helper()
	a, err := tryGateCall(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func tryGateCall(method, url, body string) (answer, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+e2eKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, b}, err
}

// ledgerTotal is the account's balance in the ledger as a gate's replica has
// it (buckets and every region's holds), in millicredits.
func ledgerTotal(gateURL string) (int64, error) {
	a, err := tryGateCall("GET", gateURL+"/v1/billing/balance", "")
	if err != nil {
		return 0, err
	}
	var b struct{ Total string }
	if a.status != 200 || json.Unmarshal(a.body, &b) != nil {
		return 0, fmt.Errorf("balance: %d %s", a.status, a.body)
	}
	var amt billing.Amount
	if err := amt.UnmarshalJSON([]byte(strconv.Quote(b.Total))); err != nil {
		return 0, err
	}
	return int64(amt), nil
}

// TestDevThreeRegions: one command runs three regions; each gate serves,
// names its region, and routes another region's job there; credit spent in
// sin shows in eu's replica after settlement.
func TestDevThreeRegions(t *testing.T) {
	site := pages(t)
	gp, rp := freeRun(t, 3), freeRun(t, 3)
	p := launch(t, []string{"TRAWL_DEV_KEY=" + e2eKey}, "dev serving", "dev", "--regions", "eu,sin,us",
		"--listen", fmt.Sprintf("127.0.0.1:%d", gp), "--ledger-raft", fmt.Sprintf("127.0.0.1:%d", rp),
		"--data", t.TempDir(), "--allow-private-networks", "--browsers", "0", "--prices", pricesFile(t, 100))
	gates := map[string]string{}
	for i, r := range []string{"eu", "sin", "us"} {
		gates[r] = fmt.Sprintf("http://127.0.0.1:%d", gp+i)
	}
	if p.base != gates["eu"] {
		t.Fatalf("dev serving at %s, want %s", p.base, gates["eu"])
	}
	for r, g := range gates {
		resp, err := http.Post(g+"/scrape", "application/json", strings.NewReader(`{"url":"`+site.URL+`/"}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 || !strings.HasPrefix(string(body), `{"error":"unauthorized"`) || resp.Header.Get("X-Svc-Cost") != "0.000" {
			t.Fatalf("%s without a key: %d %s", r, resp.StatusCode, body)
		}
		a := gateCall(t, "POST", g+"/scrape", `{"url":"`+site.URL+`/`+r+`"}`)
		if a.status != 200 || a.header.Get("X-Svc-Region") != r || a.header.Get("X-Svc-Cost") != "1.000" ||
			!strings.Contains(string(a.body), "Page /"+r) {
			t.Fatalf("%s: %d %v %s", r, a.status, a.header, a.body)
		}
	}

	// Spend in sin; eu's replica shows it once sin has settled.
	euBefore, err := ledgerTotal(gates["eu"])
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if a := gateCall(t, "POST", gates["sin"]+"/scrape", fmt.Sprintf(`{"url":"%s/sin-%d"}`, site.URL, i)); a.status != 200 {
			t.Fatalf("sin scrape: %d %s", a.status, a.body)
		}
	}
	testwait.Until(t, 15*time.Second, "sin's spending in eu's replica", func() bool {
		total, err := ledgerTotal(gates["eu"])
		return err == nil && total <= euBefore-3000
	})

	// A job submitted in sin is read through eu and us: routed to sin.
	a := gateCall(t, "POST", gates["sin"]+"/scrape/jobs", `{"urls":["`+site.URL+`/j1","`+site.URL+`/j2"]}`)
	var job struct {
		JobID string `json:"job_id"`
	}
	if a.status != 202 || json.Unmarshal(a.body, &job) != nil || !strings.HasPrefix(job.JobID, "j_sin.") || a.header.Get("X-Svc-Cost") != "2.000" {
		t.Fatalf("job submit: %d %v %s", a.status, a.header, a.body)
	}
	for _, r := range []string{"eu", "us"} {
		testwait.Until(t, 20*time.Second, "job done via "+r, func() bool {
			a := gateCall(t, "GET", gates[r]+"/scrape/jobs/"+job.JobID, "")
			return a.status == 200 && a.header.Get("X-Svc-Region") == "sin" && strings.Contains(string(a.body), `"status":"done"`)
		})

	}
	a = gateCall(t, "GET", gates["us"]+"/scrape/jobs/"+job.JobID+"/results", "")
	if a.status != 200 || strings.Count(string(a.body), "\n") != 2 {
		t.Fatalf("results via us: %d %s", a.status, a.body)
	}

	// Usage history stays in its region; asked of eu, sin's comes from sin.
	a = gateCall(t, "GET", gates["eu"]+"/v1/billing/usage?region=sin", "")
	var page struct {
		Region string
		Lines  []struct{ Region, Call, Units string }
	}
	if a.status != 200 || json.Unmarshal(a.body, &page) != nil || page.Region != "sin" || len(page.Lines) != 5 {
		t.Fatalf("sin's usage via eu: %d %s", a.status, a.body)
	}
	if l := page.Lines[4]; l.Call != "job" || l.Units != "2.000" || l.Region != "sin" {
		t.Fatalf("last sin line: %+v", l)
	}
}

// logField returns field of the first JSON log line of p with msg.
func (p *proc) logField(t *testing.T, msg, field string) string {
	t.Helper()
	for _, line := range strings.Split(p.logs(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == msg {
			if v, ok := rec[field].(string); ok {
				return v
			}
		}
	}
	t.Fatalf("no %q log line with %s", msg, field)
	return ""
}

// TestCellKilledUnderLoad: a region with two cells under steady load; one
// cell is killed with SIGKILL. Membership drops it within 5 s; requests in
// flight to it may fail with a clean 502, and every request started after
// the gate saw it leave succeeds.
func TestCellKilledUnderLoad(t *testing.T) {
	site := pages(t)
	gateAddr := fmt.Sprintf("127.0.0.1:%d", freeRun(t, 1))
	dev := launch(t, []string{"TRAWL_DEV_KEY=" + e2eKey}, "gate serving", "dev",
		"--listen", gateAddr, "--ledger-raft", fmt.Sprintf("127.0.0.1:%d", freeRun(t, 1)),
		"--data", t.TempDir(), "--allow-private-networks", "--browsers", "0", "--prices", pricesFile(t, 100000))
	seed := dev.logField(t, "gate serving", "members")
	c2 := launch(t, nil, "cell serving", "cell", "--name", "c2", "--region", "eu", "--listen", "127.0.0.1:0",
		"--members-join", seed, "--data", t.TempDir(), "--allow-private-networks", "--browsers", "0")
	cells := func() int {
		resp, err := http.Get(dev.base + "/health")
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		var h struct{ Cells int }
		json.NewDecoder(resp.Body).Decode(&h)
		return h.Cells
	}
	testwait.Until(t, 10*time.Second, "two cells", func() bool { return cells() == 2 })

	type outcome struct {
		start, end time.Time
		status     int
		body       string
		err        error
	}
	var mu sync.Mutex
	var outcomes []outcome
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var n atomicCounter
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				a, err := tryGateCall("POST", dev.base+"/scrape", fmt.Sprintf(`{"url":"%s/w%d-%d"}`, site.URL, w, n.next()))
				mu.Lock()
				outcomes = append(outcomes, outcome{start, time.Now(), a.status, string(a.body), err})
				mu.Unlock()
			}
		}()
	}
	time.Sleep(time.Second) // load runs before the kill
	killed := time.Now()
	c2.kill(t)
	testwait.Until(t, 10*time.Second, "the gate to drop the killed cell", func() bool { return cells() == 1 })
	gone := time.Now()
	t.Logf("killed cell left the upstream set after %v", gone.Sub(killed).Round(10*time.Millisecond))
	if gone.Sub(killed) > 5*time.Second {
		t.Errorf("membership took %v to drop the cell, want under 5 s", gone.Sub(killed))
	}
	time.Sleep(2 * time.Second) // load after the update
	close(stop)
	wg.Wait()

	var before, after, failedBefore, failedAfter int
	for _, o := range outcomes {
		ok := o.err == nil && o.status == 200
		if o.start.After(gone) {
			after++
			if !ok {
				failedAfter++
				t.Errorf("request started after the update failed: %d %v %s", o.status, o.err, o.body)
			}
			continue
		}
		before++
		if !ok {
			failedBefore++
			if o.err != nil || o.status != 502 || !strings.Contains(o.body, `"error":"cell_unavailable"`) {
				t.Errorf("request in flight at the kill failed uncleanly: %d %v %s", o.status, o.err, o.body)
			}
		}
	}
	t.Logf("%d requests before the update (%d failed with a clean 502), %d after (%d failed)", before, failedBefore, after, failedAfter)
	if after < 10 {
		t.Fatalf("only %d requests after the update", after)
	}
}

type atomicCounter struct {
	mu sync.Mutex
	n  int
}

func (c *atomicCounter) next() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.n
}

// TestPartitionedRegionServesFromHold: three regions, each its own process.
// sin is cut off from the other two voters (they are stopped with SIGSTOP:
// no answer, as in a partition). sin keeps serving from its hold, then
// refuses with 402 rather than overspend. When the partition heals, every
// charge sin made reaches the ledger exactly once.
func TestPartitionedRegionServesFromHold(t *testing.T) {
	site := pages(t)
	gp, rp := freeRun(t, 3), freeRun(t, 3)
	regions := []string{"eu", "sin", "us"}
	prices := pricesFile(t, 40)
	data := t.TempDir()
	env := []string{"TRAWL_DEV_KEY=" + e2eKey, "TRAWL_LEDGER_SECRET=e2e-partition"}
	procs := map[string]*proc{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, r := range regions {
		var peers []string
		for j, o := range regions {
			if j != i {
				peers = append(peers, fmt.Sprintf("%s=127.0.0.1:%d/127.0.0.1:%d", o, rp+j, gp+j))
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := launch(t, env, "gate serving", "dev", "--region", r, "--listen", fmt.Sprintf("127.0.0.1:%d", gp+i),
				"--ledger-raft", fmt.Sprintf("127.0.0.1:%d", rp+i), "--peers", strings.Join(peers, ","),
				"--dev-account="+strconv.FormatBool(r == "eu"), "--data", data, "--allow-private-networks", "--browsers", "0", "--prices", prices)
			mu.Lock()
			procs[r] = p
			mu.Unlock()
		}()
	}
	wg.Wait()
	sin := procs["sin"].base
	testwait.Until(t, 20*time.Second, "the dev account in sin", func() bool {
		a, err := tryGateCall("GET", sin+"/v1/billing/balance", "")
		return err == nil && a.status == 200
	})

	// A first call takes sin's hold.
	if a := gateCall(t, "POST", sin+"/scrape", `{"url":"`+site.URL+`/first"}`); a.status != 200 {
		t.Fatalf("first: %d %s", a.status, a.body)
	}
	for _, r := range []string{"eu", "us"} {
		procs[r].cmd.Process.Signal(syscall.SIGSTOP)
	}
	stopped := true
	defer func() {
		if stopped {
			for _, r := range []string{"eu", "us"} {
				procs[r].cmd.Process.Signal(syscall.SIGCONT)
			}
		}
	}()
	served, refused := 1, 0
	for i := 0; i < 60 && refused == 0; i++ {
		a := gateCall(t, "POST", sin+"/scrape", fmt.Sprintf(`{"url":"%s/cut-%d"}`, site.URL, i))
		switch a.status {
		case 200:
			served++
		case 503:
			// The hold is spent and the ledger does not answer: the
			// account has credit, so not 402 but "try again".
			refused++
			if !strings.Contains(string(a.body), `"error":"ledger_unreachable"`) || a.header.Get("Retry-After") == "" {
				t.Fatalf("503 body: %s (Retry-After %q)", a.body, a.header.Get("Retry-After"))
			}
		default:
			t.Fatalf("cut off: %d %s", a.status, a.body)
		}
	}
	t.Logf("sin served %d calls from its hold, then refused", served)
	if refused == 0 || served < 2 {
		t.Fatalf("served %d, refused %d: want service from the hold, then a 402", served, refused)
	}
	for _, r := range []string{"eu", "us"} {
		procs[r].cmd.Process.Signal(syscall.SIGCONT)
	}
	stopped = false
	// Healed: sin's charges settle; the ledger has spent exactly what sin served.
	testwait.Until(t, 30*time.Second, "settlement after the partition", func() bool {
		a, err := tryGateCall("GET", procs["eu"].base+"/v1/billing/balance", "")
		if err != nil || a.status != 200 {
			return false
		}
		var b struct {
			MonthSpent string `json:"month_spent"`
		}
		json.Unmarshal(a.body, &b)
		return b.MonthSpent == fmt.Sprintf("%d.000", served)
	})

}

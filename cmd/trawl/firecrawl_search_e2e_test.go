package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/gate/billing"
)

// Firecrawl's JS SDK's search against `trawl dev`: the SDK reads trawl's
// POST /v2/search answer and its refusals, and the gate bills the call as
// one GET /search. The index of this fresh `trawl dev` is empty: the
// shape on an empty result here; results with pages indexed first, and
// their scrapes, in TestFirecrawlSDKSearchScrapes.
func TestFirecrawlSDKSearch(t *testing.T) {
	dev := startMCPDev(t)

	res := firecrawlSDK(t, dev.base, e2eKey,
		fcCall{"search", []any{"query words", map[string]any{"limit": 3}}},
		fcCall{"search", []any{"query words", map[string]any{"sources": []any{"images"}}}},
		fcCall{"search", []any{"query words", map[string]any{"tbs": "qdr:d"}}},
		fcCall{"search", []any{"query words", map[string]any{"limit": 101}}},
	)
	if len(res) != 4 {
		t.Fatalf("results: %+v", res)
	}
	if r := res[0]; r.Thrown != "" {
		t.Fatalf("search threw: %s (status %v)", r.Thrown, deref(r.Status))
	}
	var v struct{ Web []any }
	if err := json.Unmarshal(res[0].Value, &v); err != nil || v.Web == nil {
		t.Errorf("search: want web: [], got %s (%v)", res[0].Value, err)
	}
	for i, code := range []string{"UNSUPPORTED_FEATURE", "UNSUPPORTED_FEATURE", "BAD_REQUEST"} {
		r := res[1+i]
		if r.Thrown == "" || r.Status == nil || *r.Status != 400 || r.Code == nil || *r.Code != code {
			t.Errorf("call %d: want a thrown 400 %s, got %+v", 1+i, code, r)
		}
	}

	// The price is GET /search's: a new query each, both searched live.
	cost := func(method, path, body string) string {
		t.Helper()
		req, _ := http.NewRequest(method, dev.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e2eKey)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return resp.Header.Get("X-Svc-Cost")
	}
	native := cost("GET", "/search?q="+url.QueryEscape("kettle spout"), "")
	v2 := cost("POST", "/v2/search", `{"query":"kettle water"}`)
	if native == "" || v2 != native {
		t.Errorf("POST /v2/search costs %q, GET /search %q", v2, native)
	}
}

// teaPages are the loopback site TestFirecrawlSDKSearchScrapes indexes.
var teaPages = map[string][2]string{
	"/green":  {"Green tea", "Steeping green tea takes two to three minutes in water just off the boil."},
	"/black":  {"Black tea", "Steeping black tea takes four to five minutes at a full boil."},
	"/oolong": {"Oolong tea", "Steeping oolong tea takes three to four minutes, and the leaves steep again."},
}

// Issue 30: the SDK's search with scrapeOptions against `trawl dev`, on a
// loopback site whose pages were scraped (and so indexed) first. Each
// result is scraped as the caller's own POST /v2/scrape through the gate
// and comes back merged with its document; the gate's usage history has
// one scrape line per result beside the search's own line, and the
// balance falls by exactly their sum; options the cell refuses are the
// search's 400, free. The plan allows two calls at once: the search holds
// one, so its scrapes go one at a time through the real rate limiter
// (each refused too_many_concurrent while another runs, and tried again).
func TestFirecrawlSDKSearchScrapes(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := teaPages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html lang="en"><head><title>%[1]s</title></head><body><main><h1>%[1]s</h1>
<p>%[2]s</p><p>See <a href="/green">green</a>, <a href="/black">black</a> and <a href="/oolong">oolong</a>.</p></main></body></html>`, p[0], p[1])
	}))
	defer site.Close()
	gateAddr := fmt.Sprintf("127.0.0.1:%d", freeRun(t, 1))
	dev := launch(t, []string{"TRAWL_DEV_KEY=" + e2eKey}, "gate serving", "dev",
		"--listen", gateAddr, "--ledger-raft", fmt.Sprintf("127.0.0.1:%d", freeRun(t, 1)),
		"--data", t.TempDir(), "--allow-private-networks", "--browsers", "0", "--prices", devPrices(t, 0, 2, 1000))

	indexed := time.Now()
	for p := range teaPages {
		if a := gateCall(t, "POST", dev.base+"/v2/scrape", `{"url":"`+site.URL+p+`"}`); a.status != 200 {
			t.Fatalf("scrape %s: %d %s", p, a.status, a.body)
		}
	}
	// Searchable once the cell's indexer has taken them (a batch every
	// few seconds). Each search is billed: polled every 300 ms. A search
	// with results is kept in the gate's archive for a minute, so each
	// poll asks another limit: one that found some of the pages must not
	// be answered again from the archive.
	const q = "steeping tea minutes"
	var found int
	for n, deadline := 0, time.Now().Add(30*time.Second); found < len(teaPages); n++ {
		a := gateCall(t, "POST", dev.base+"/v2/search", fmt.Sprintf(`{"query":%q,"limit":%d}`, q, 10+n%90))
		var v struct{ Data struct{ Web []any } }
		if a.status != 200 || json.Unmarshal(a.body, &v) != nil {
			t.Fatalf("search: %d %s", a.status, a.body)
		}
		if found = len(v.Data.Web); found >= len(teaPages) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scraped pages are not all in the index after 30 s: %s", a.body)
		}
		time.Sleep(300 * time.Millisecond)
	}

	type line struct {
		Seq          uint64
		Call, URL    string
		Cache, Units string
		Status       int
	}
	history := func() []line {
		t.Helper()
		a := gateCall(t, "GET", dev.base+"/v1/billing/usage", "")
		var h struct{ Lines []line }
		if a.status != 200 || json.Unmarshal(a.body, &h) != nil {
			t.Fatalf("usage: %d %s", a.status, a.body)
		}
		return h.Lines
	}
	// What the account can spend: charges count at once, settled or not.
	balance := func() billing.Amount {
		t.Helper()
		a := gateCall(t, "GET", dev.base+"/v1/billing/balance", "")
		var b struct{ Balance billing.Amount }
		if a.status != 200 || json.Unmarshal(a.body, &b) != nil {
			t.Fatalf("balance: %d %s", a.status, a.body)
		}
		return b.Balance
	}
	t.Logf("the scraped pages were all found %v after their scrapes", time.Since(indexed).Round(time.Millisecond))
	before := history()
	seen := before[len(before)-1].Seq
	bal := balance()

	// limit 5: a search none of the polls made, so not archived; links,
	// so the scrapes are not the cached copies of the scrapes above.
	res := firecrawlSDK(t, dev.base, e2eKey,
		fcCall{"search", []any{q, map[string]any{"limit": 5, "scrapeOptions": map[string]any{"formats": []any{"markdown", "links"}}}}},
		fcCall{"search", []any{q, map[string]any{"limit": 5, "scrapeOptions": map[string]any{"formats": []any{"markdown", "bogus"}}}}},
	)
	if len(res) != 2 || res[0].Thrown != "" {
		t.Fatalf("search threw: %+v", res)
	}
	var v struct {
		Web []struct {
			URL, Title, Description, Markdown string
			Position                          int
			Links                             []string
			Metadata                          map[string]any
		}
	}
	if err := json.Unmarshal(res[0].Value, &v); err != nil || len(v.Web) != len(teaPages) {
		t.Fatalf("search: %s (%v)", res[0].Value, err)
	}
	var urls []string
	for i, r := range v.Web {
		p := teaPages[strings.TrimPrefix(r.URL, site.URL)]
		if r.Position != i+1 || r.Title != p[0] || !strings.Contains(r.Description, "<b>") {
			t.Errorf("web[%d]: the search's fields: %+v", i, r)
		}
		if !strings.Contains(r.Markdown, "# "+p[0]) || !strings.Contains(r.Markdown, p[1]) || !slices.Contains(r.Links, site.URL+"/green") ||
			r.Metadata["sourceURL"] != r.URL || r.Metadata["statusCode"] != float64(200) {
			t.Errorf("web[%d]: the scraped document: %+v", i, r)
		}
		urls = append(urls, r.URL)
	}
	if r := res[1]; r.Status == nil || *r.Status != 400 || r.Code == nil || *r.Code != "BAD_REQUEST" || !strings.Contains(r.Thrown, "bogus") {
		t.Errorf("refused options: want a thrown 400 BAD_REQUEST, got %+v", r)
	}

	// One scrape line per result, the search's own line (GET /search's
	// price), nothing for the refused call; the balance fell by their sum.
	var scraped []string
	var spent billing.Amount
	searches := 0
	for _, l := range history() {
		if l.Seq <= seen {
			continue
		}
		var u billing.Amount
		if err := u.UnmarshalJSON([]byte(`"` + l.Units + `"`)); err != nil || l.Status != 200 {
			t.Errorf("line %+v: %v", l, err)
		}
		spent += u
		switch l.Call {
		case "scrape":
			scraped = append(scraped, l.URL)
		case "search":
			searches++
			if l.Units != "2.000" || l.Cache != "miss" {
				t.Errorf("the search's line: %+v", l)
			}
		default:
			t.Errorf("line %+v", l)
		}
	}
	slices.Sort(scraped)
	slices.Sort(urls)
	if searches != 1 || !slices.Equal(scraped, urls) {
		t.Errorf("usage lines: %d searches, scrapes of %q, want one each of %q", searches, scraped, urls)
	}
	if got := bal - balance(); got != spent || spent <= 2000 {
		t.Errorf("the balance fell by %s, the lines say %s", got, spent)
	}
}

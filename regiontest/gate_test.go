package regiontest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/trawlhq/trawl/gate"
	"github.com/trawlhq/trawl/internal/telemetry"
	"github.com/trawlhq/trawl/internal/testwait"
	"github.com/trawlhq/trawl/ledger"
)

// site serves a few small pages on loopback.
func site(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><title>Page %[1]s</title></head><body><main><h1>Page %[1]s</h1>
<p>This is the page at %[1]s. It has a paragraph with enough words to be the main content of the page,
so the extractor keeps it and the Markdown has something to show.</p><p>A second paragraph, for good measure.</p></main></body></html>`, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv
}

type reply struct {
	status int
	header http.Header
	body   string
}

func call(t *testing.T, method, url, key, body string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

func TestScrapeThroughGate(t *testing.T) {
	g := Start(t, Options{})
	pages := site(t)
	key := g.Account(t, ledger.PlanFree, 100)

	r := call(t, "POST", g.URL+"/scrape", key, `{"url":"`+pages.URL+`/a"}`)
	if r.status != 200 {
		t.Fatalf("scrape: %d %s", r.status, r.body)
	}
	var res struct {
		Markdown string `json:"markdown"`
	}
	if err := json.Unmarshal([]byte(r.body), &res); err != nil || !strings.Contains(res.Markdown, "Page /a") {
		t.Fatalf("markdown: %v %q", err, r.body)
	}
	for h, want := range map[string]string{"X-Svc-Cost": "1.000", "X-Svc-Balance": "99.000", "X-Svc-Region": "eu"} {
		if got := r.header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	if !strings.HasPrefix(r.header.Get("X-Svc-Receipt"), "r_eu_") {
		t.Errorf("receipt %q", r.header.Get("X-Svc-Receipt"))
	}
	if r.header.Get("Trawl-Usage") != "" {
		t.Error("the cell's usage header reached the client")
	}

	// The same page again comes from the cache: free.
	r = call(t, "POST", g.URL+"/scrape", key, `{"url":"`+pages.URL+`/a"}`)
	if r.status != 200 || r.header.Get("X-Svc-Cost") != "0.000" || r.header.Get("X-Svc-Balance") != "99.000" {
		t.Fatalf("cache hit: %d cost %q balance %q", r.status, r.header.Get("X-Svc-Cost"), r.header.Get("X-Svc-Balance"))
	}

	// A batch bills one unit per line it delivers with a page; a URL
	// refused before any fetch costs nothing. The total is a trailer.
	resp, br := streamBatch(t, g, key, `{"urls":["`+pages.URL+`/b1","`+pages.URL+`/b2","ftp://nope/"]}`)
	body, _ := io.ReadAll(br)
	if resp.StatusCode != 200 || resp.Trailer.Get("X-Svc-Cost") != "2.000" || strings.Count(string(body), "\n") != 3 {
		t.Fatalf("batch: %d cost %q\n%s", resp.StatusCode, resp.Trailer.Get("X-Svc-Cost"), body)
	}

	// The usage history has four lines: the two scrapes and one per
	// batch line charged.
	r = call(t, "GET", g.URL+"/v1/billing/usage", key, "")
	if r.status != 200 || strings.Count(r.body, `"receipt"`) != 4 {
		t.Fatalf("usage: %d %s", r.status, r.body)
	}
}

func TestRefusals(t *testing.T) {
	g := Start(t, Options{})
	pages := site(t)

	t.Run("no key", func(t *testing.T) {
		r := call(t, "POST", g.URL+"/scrape", "", `{"url":"`+pages.URL+`/"}`)
		want := `{"error":"unauthorized","message":"send your API key as Authorization: Bearer <key> or x-api-key: <key>"}` + "\n"
		if r.status != 401 || r.body != want || r.header.Get("Www-Authenticate") == "" || r.header.Get("X-Svc-Cost") != "0.000" {
			t.Fatalf("got %d %q %v", r.status, r.body, r.header)
		}
	})
	t.Run("unknown key", func(t *testing.T) {
		r := call(t, "GET", g.URL+"/v1/billing/balance", "trawl_nope", "")
		if r.status != 401 || !strings.Contains(r.body, `"error":"unauthorized"`) {
			t.Fatalf("got %d %q", r.status, r.body)
		}
	})
	t.Run("public routes need no key", func(t *testing.T) {
		if r := call(t, "GET", g.URL+"/v1/prices", "", ""); r.status != 200 {
			t.Fatalf("prices: %d %s", r.status, r.body)
		}
	})
	t.Run("no credit", func(t *testing.T) {
		key := g.Account(t, ledger.PlanFree, 0)
		bal := call(t, "GET", g.URL+"/v1/billing/balance", key, "")
		r := call(t, "POST", g.URL+"/scrape", key, `{"url":"`+pages.URL+`/nc"}`)
		want := `{"error":"no_credit","balance":"0.000","message":"Your balance (0.000) does not cover this call. Top up to continue: POST /v1/billing/topup?amount=5 charges your saved card, or add checkout=1 to pay on a checkout page.","actions":{"topup":"POST /v1/billing/topup?amount=5","checkout":"POST /v1/billing/topup?amount=5&checkout=1","prices":"GET /v1/prices","mcp":"topup tool"}}` + "\n"
		if r.status != 402 || r.body != want {
			t.Fatalf("got %d\n%s\nwant\n%s\n(balance %s)", r.status, r.body, want, bal.body)
		}
		if r.header.Get("X-Svc-Cost") != "0.000" || r.header.Get("X-Svc-Balance") != "0.000" {
			t.Fatalf("receipt headers %v", r.header)
		}
	})
	t.Run("spend cap", func(t *testing.T) {
		key := g.Account(t, ledger.PlanFree, 50)
		if r := call(t, "POST", g.URL+"/v1/billing/settings", key, `{"spend_cap_mc":1500}`); r.status != 200 {
			t.Fatalf("settings: %d %s", r.status, r.body)
		}
		if r := call(t, "POST", g.URL+"/scrape", key, `{"url":"`+pages.URL+`/cap1"}`); r.status != 200 {
			t.Fatalf("first: %d %s", r.status, r.body)
		}
		r := call(t, "POST", g.URL+"/scrape", key, `{"url":"`+pages.URL+`/cap2"}`)
		if r.status != 402 || !strings.HasPrefix(r.body, `{"error":"spend_cap","cap_left":"0.500"`) {
			t.Fatalf("got %d %s", r.status, r.body)
		}
	})
	t.Run("site down is free", func(t *testing.T) {
		key := g.Account(t, ledger.PlanFree, 10)
		down := httptest.NewServer(http.NotFoundHandler())
		url := down.URL
		down.Close()
		r := call(t, "POST", g.URL+"/scrape", key, `{"url":"`+url+`/"}`)
		if r.status < 500 || r.header.Get("X-Svc-Cost") != "0.000" || r.header.Get("X-Svc-Balance") != "10.000" {
			t.Fatalf("got %d cost %q balance %q: %s", r.status, r.header.Get("X-Svc-Cost"), r.header.Get("X-Svc-Balance"), r.body)
		}
	})
	t.Run("bad input is free", func(t *testing.T) {
		key := g.Account(t, ledger.PlanFree, 10)
		r := call(t, "POST", g.URL+"/scrape", key, `{"url":"ftp://x"}`)
		if r.status != 400 || r.header.Get("X-Svc-Cost") != "0.000" {
			t.Fatalf("got %d %q %s", r.status, r.header.Get("X-Svc-Cost"), r.body)
		}
	})
	t.Run("rate limit", func(t *testing.T) {
		key := g.Account(t, ledger.PlanFree, 10)
		var last reply
		for i := 0; i < 21; i++ {
			last = call(t, "GET", g.URL+"/v1/billing/balance", key, "")
		}
		if last.status != 429 || last.header.Get("Retry-After") == "" || last.header.Get("X-RateLimit-Limit") != "20" ||
			last.header.Get("X-RateLimit-Remaining") != "0" || last.header.Get("X-RateLimit-Reset") == "" {
			t.Fatalf("got %d %v %s", last.status, last.header, last.body)
		}
		if !strings.HasPrefix(last.body, `{"error":"rate_limited"`) {
			t.Fatalf("body %s", last.body)
		}
	})
}

// The global tracer provider can be set once per process (tracers taken
// before delegate to the first one), so every run shares this exporter.
var (
	traceOnce sync.Once
	traceExp  = tracetest.NewInMemoryExporter()
)

func TestTraceSpans(t *testing.T) {
	traceOnce.Do(func() {
		otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(traceExp)))
		if _, err := telemetry.Setup(context.Background(), "test"); err != nil { // the W3C propagator
			t.Fatal(err)
		}
	})
	traceExp.Reset()
	g := Start(t, Options{})
	pages := site(t)
	key := g.Account(t, ledger.PlanFree, 10)

	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req, _ := http.NewRequest("POST", g.URL+"/scrape", strings.NewReader(`{"url":"`+pages.URL+`/t"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("traceparent", parent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// The gate's own span ends after the client has its answer.
	byName := map[string]sdktrace.ReadOnlySpan{}
	testwait.Until(t, 5*time.Second, "the gate's span", func() bool {
		for _, s := range traceExp.GetSpans().Snapshots() {
			if s.SpanContext().TraceID().String() == "4bf92f3577b34da6a3ce929d0e0e4736" {
				byName[s.Name()] = s
			}
		}
		_, ok := byName["trawl.gate POST"]
		return ok
	})

	for _, name := range []string{"trawl.gate POST", "trawl.auth", "trawl.ratelimit", "trawl.meter.check", "trawl.route", "trawl.meter.charge", "cell POST /scrape"} {
		if _, ok := byName[name]; !ok {
			t.Errorf("no span %q in the caller's trace; have %v", name, keys(byName))
		}
	}
	if gs, ok := byName["trawl.gate POST"]; ok && gs.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("gate span's parent %s, want the caller's", gs.Parent().SpanID())
	}
	if cs, ok := byName["cell POST /scrape"]; ok {
		if rs, ok := byName["trawl.route"]; ok && cs.Parent().SpanID() != rs.SpanContext().SpanID() {
			t.Errorf("cell span's parent %s, want the route span %s", cs.Parent().SpanID(), rs.SpanContext().SpanID())
		}
	}
}

func keys(m map[string]sdktrace.ReadOnlySpan) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Issue 21: the Prometheus endpoint shows what an SRE pages on during a
// run: requests by route and status, credits charged, the ledger voter,
// settlement lag, parked charges, live cells, and the cells' gauges.
func TestMetricsEndpoint(t *testing.T) {
	m, err := telemetry.SetupMetrics(context.Background(), "127.0.0.1:0", slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Shutdown(context.Background()) })
	g := Start(t, Options{})
	pages := site(t)
	key := g.Account(t, ledger.PlanFree, 10)
	if r := call(t, "POST", g.URL+"/scrape", key, `{"url":"`+pages.URL+`/m"}`); r.status != 200 {
		t.Fatalf("scrape: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", g.URL+"/scrape", "", `{}`); r.status != 401 {
		t.Fatalf("no key: %d", r.status)
	}
	// A drained cell shows in trawl_gate_cells_drained (the operator API).
	g.AddCell(t, "c2", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := gate.EnsureOperatorKey(ctx, g.Runtime.Node(), testOperatorKey, time.Now); err != nil {
		t.Fatal(err)
	}
	if r := call(t, "POST", g.URL+"/operator/v1/cells/c2/drain", testOperatorKey, ""); r.status != 200 {
		t.Fatalf("drain: %d %s", r.status, r.body)
	}
	resp, err := http.Get("http://" + m.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	for _, want := range []string{
		`trawl_gate_requests_total{http_request_method="POST",http_response_status_code="200",http_route="POST /scrape"`,
		`trawl_gate_requests_total{http_request_method="POST",http_response_status_code="401",http_route="POST /scrape"`,
		`trawl_gate_request_duration_seconds_bucket{http_route="POST /scrape"`,
		`trawl_gate_credits_charged_total{otel_scope_name="github.com/trawlhq/trawl/gate",otel_scope_schema_url="",otel_scope_version="",trawl_kind="scrape",trawl_level="light"} 1000`,
		`trawl_ledger_raft_leader{`,
		`trawl_ledger_raft_commit_lag{`,
		`trawl_ledger_holds_unsettled{`,
		`trawl_ledger_charges_parked{`,
		`trawl_gate_cells_live{`,
		`trawl_cell_store_disk_bytes{`,
		`trawl_cell_pages_total{http_route="POST /scrape",otel_scope_name="github.com/trawlhq/trawl/cell",otel_scope_schema_url="",otel_scope_version="",trawl_cache="miss",trawl_engine="http"} 1`,
		// Work backlogs and lags (docs/operations.md, "Metrics").
		`trawl_ledger_settlement_lag_seconds{`,
		`trawl_gate_cells_drained{otel_scope_name="github.com/trawlhq/trawl/gate",otel_scope_schema_url="",otel_scope_version="",trawl_region="eu"} 1`,
		`trawl_cell_jobs_backlog{`,
		`trawl_cell_jobs_backlog_urls{`,
		`trawl_cell_jobs_oldest_age_seconds{`,
		`trawl_monitor_check_lag_seconds{`,
		`trawl_monitor_webhook_failed_attempts_total{`,
		`trawl_monitor_webhook_given_up_total{`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in /metrics", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}

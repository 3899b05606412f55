package ratelimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/trawlhq/trawl/gate"
	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/ledger"
)

// priceTable is the launch table: free 20/min and 2 at a time, supporter
// 120/min and 10 at a time.
func priceTable(caddy.Context) (map[string]billing.PlanLimits, error) {
	return billing.DefaultPrices().Plans, nil
}

// provision provisions h as Caddy would, with the launch price table for
// the plans it leaves out, and cleans it up when the test ends.
func provision(t testing.TB, h *Handler) *Handler {
	t.Helper()
	if h.priceTable == nil {
		h.priceTable = priceTable
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	if err := h.Provision(ctx); err != nil {
		t.Fatalf("provision: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Cleanup(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if err := h.Validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	return h
}

func account(id, plan string) *gate.Identity {
	return &gate.Identity{Account: &ledger.Account{ID: id, Plan: plan}}
}

func request(id *gate.Identity) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/v1/scrape", nil)
	if id != nil {
		r = r.WithContext(gate.WithIdentity(r.Context(), id))
	}
	return r
}

var ok = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
	w.WriteHeader(http.StatusNoContent)
	return nil
})

// serve runs one request through h and returns the recorder and h's error.
func serve(h *Handler, id *gate.Identity, next caddyhttp.Handler) (*httptest.ResponseRecorder, error) {
	rec := httptest.NewRecorder()
	err := h.ServeHTTP(rec, request(id), next)
	return rec, err
}

// refusal unwraps the gate.Refusal of a 429.
func refusal(t *testing.T, err error) *gate.Refusal {
	t.Helper()
	var he caddyhttp.HandlerError
	if !errors.As(err, &he) {
		t.Fatalf("error %v is not a caddyhttp.HandlerError", err)
	}
	if he.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429", he.StatusCode)
	}
	ref, isRefusal := he.Err.(*gate.Refusal)
	if !isRefusal {
		t.Fatalf("error %T is not a *gate.Refusal", he.Err)
	}
	return ref
}

// rendered is a refusal as the error renderer writes it.
func rendered(ref *gate.Refusal) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	ref.Write(rec)
	return rec
}

func unix(t *testing.T, h http.Header, name string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(h.Get(name), 10, 64)
	if err != nil {
		t.Fatalf("%s %q: %v", name, h.Get(name), err)
	}
	return v
}

func TestLimitsPerPlan(t *testing.T) {
	tests := []struct {
		name  string
		plans map[string]Limits
		id    *gate.Identity
		rate  int // 0: no limit (checked up to 300 requests)
		msg   string
	}{
		{name: "free from the price table", id: account("a", ledger.PlanFree), rate: 20,
			msg: "Too many requests: the free plan allows 20 requests per minute. Retry in %d seconds, or make a paid top-up to move to the supporter plan (120 requests per minute)."},
		{name: "supporter from the price table", id: account("a", ledger.PlanSupporter), rate: 120,
			msg: "Too many requests: the supporter plan allows 120 requests per minute. Retry in %d seconds."},
		{name: "free overridden", plans: map[string]Limits{"free": {RatePerMinute: 3, Concurrency: 1}}, id: account("a", ledger.PlanFree), rate: 3,
			msg: "Too many requests: the free plan allows 3 requests per minute. Retry in %d seconds, or make a paid top-up to move to the supporter plan (120 requests per minute)."},
		{name: "one request a minute", plans: map[string]Limits{"free": {RatePerMinute: 1}, "supporter": {}}, id: account("a", ledger.PlanFree), rate: 1,
			msg: "Too many requests: the free plan allows 1 request per minute. Retry in %d seconds, or make a paid top-up to move to the supporter plan (no limit per minute)."},
		{name: "a plan of the config only", plans: map[string]Limits{"team": {RatePerMinute: 5}}, id: account("a", "team"), rate: 5,
			msg: "Too many requests: the team plan allows 5 requests per minute. Retry in %d seconds."},
		{name: "unknown plan takes the free plan's limits", id: account("a", "gold"), rate: 20,
			msg: "Too many requests: the free plan allows 20 requests per minute. Retry in %d seconds, or make a paid top-up to move to the supporter plan (120 requests per minute)."},
		{name: "key without its account", id: &gate.Identity{Key: &ledger.Key{Account: "a"}}, rate: 20,
			msg: "Too many requests: the free plan allows 20 requests per minute. Retry in %d seconds, or make a paid top-up to move to the supporter plan (120 requests per minute)."},
		{name: "0 is no limit", plans: map[string]Limits{"supporter": {}}, id: account("a", ledger.PlanSupporter)},
		{name: "no identity passes untouched"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := provision(t, &Handler{Zone: t.Name(), Plans: tt.plans})
			start := time.Now()
			h.now = func() time.Time { return start }
			n := tt.rate
			if n == 0 {
				n = 300
			}
			for i := range n {
				rec, err := serve(h, tt.id, ok)
				if err != nil {
					t.Fatalf("request %d: %v", i+1, err)
				}
				if rec.Code != http.StatusNoContent {
					t.Fatalf("request %d: status %d", i+1, rec.Code)
				}
				hdr := rec.Header()
				if tt.rate == 0 {
					if len(hdr) != 0 {
						t.Fatalf("request %d: headers %v with no rate limit", i+1, hdr)
					}
					continue
				}
				if got, want := hdr.Get(HeaderLimit), strconv.Itoa(tt.rate); got != want {
					t.Fatalf("request %d: %s %q, want %q", i+1, HeaderLimit, got, want)
				}
				if got, want := hdr.Get(HeaderRemaining), strconv.Itoa(tt.rate-i-1); got != want {
					t.Fatalf("request %d: %s %q, want %q", i+1, HeaderRemaining, got, want)
				}
				if reset := unix(t, hdr, HeaderReset) - start.Unix(); reset < 60 || reset > 62 {
					t.Fatalf("request %d: %s is %d s away, want 60 to 62", i+1, HeaderReset, reset)
				}
			}
			if tt.rate == 0 {
				return
			}

			_, err := serve(h, tt.id, ok)
			ref := refusal(t, err)
			rec := rendered(ref)
			reset := unix(t, rec.Header(), HeaderReset)
			retry := reset - start.Unix()
			if retry < 60 || retry > 62 {
				t.Fatalf("retry after %d s, want 60 to 62", retry)
			}
			msg, _ := json.Marshal(fmt.Sprintf(tt.msg, retry))
			body := fmt.Sprintf(`{"error":"rate_limited","message":%s,"limit":%d,"window_s":60,"retry_after_s":%d}`+"\n", msg, tt.rate, retry)
			if got := rec.Body.String(); got != body {
				t.Fatalf("body\n got %s\nwant %s", got, body)
			}
			want := http.Header{
				"Content-Type":           {"application/json"},
				"Content-Length":         {strconv.Itoa(len(body))},
				"X-Content-Type-Options": {"nosniff"},
				"X-Ratelimit-Limit":      {strconv.Itoa(tt.rate)},
				"X-Ratelimit-Remaining":  {"0"},
				"X-Ratelimit-Reset":      {strconv.FormatInt(reset, 10)},
				"Retry-After":            {strconv.FormatInt(retry, 10)},
			}
			if !reflect.DeepEqual(rec.Header(), want) {
				t.Fatalf("headers\n got %v\nwant %v", rec.Header(), want)
			}
			if rec.Code != http.StatusTooManyRequests {
				t.Fatalf("rendered status %d", rec.Code)
			}
			if h.zone.inflight.accounts() != 0 {
				t.Fatalf("%d accounts in flight after the requests ended", h.zone.inflight.accounts())
			}
		})
	}
}

func TestAccountsCountApart(t *testing.T) {
	h := provision(t, &Handler{Zone: t.Name(), Plans: map[string]Limits{"free": {RatePerMinute: 1}}})
	for _, id := range []string{"a", "b"} {
		if _, err := serve(h, account(id, "free"), ok); err != nil {
			t.Fatalf("first request of %s: %v", id, err)
		}
	}
	if _, err := serve(h, account("a", "free"), ok); err == nil {
		t.Fatal("second request of a allowed")
	}
}

func TestUpgradeKeepsTheCount(t *testing.T) {
	h := provision(t, &Handler{Zone: t.Name(), Plans: map[string]Limits{"free": {RatePerMinute: 2}, "supporter": {RatePerMinute: 5}}})
	for range 2 {
		if _, err := serve(h, account("a", "free"), ok); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := serve(h, account("a", "free"), ok); err == nil {
		t.Fatal("third request on the free plan allowed")
	}
	// A paid top-up moves the account to supporter: the same minute
	// counts on, against the higher limit.
	rec, err := serve(h, account("a", "supporter"), ok)
	if err != nil {
		t.Fatalf("after the upgrade: %v", err)
	}
	if got := rec.Header().Get(HeaderRemaining); got != "1" {
		t.Fatalf("remaining %s after 4 of 5", got)
	}
}

// blocking is a next handler that stays in flight until released.
type blocking struct {
	entered chan struct{}
	release chan struct{}
}

func newBlocking() *blocking {
	return &blocking{entered: make(chan struct{}), release: make(chan struct{})}
}

func (b *blocking) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	b.entered <- struct{}{}
	<-b.release
	return nil
}

// start serves a request in a goroutine, returns once next has it, and
// returns a channel with h's error once it is done.
func start(h *Handler, id *gate.Identity, b *blocking) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := serve(h, id, b)
		done <- err
	}()
	<-b.entered
	return done
}

func TestConcurrency(t *testing.T) {
	h := provision(t, &Handler{Zone: t.Name()})
	start0 := time.Now()
	h.now = func() time.Time { return start0 }
	b := newBlocking()
	free := account("a", ledger.PlanFree)
	first := start(h, free, b)
	second := start(h, free, b)
	if n := h.zone.inflight.inFlight("a"); n != 2 {
		t.Fatalf("%d in flight, want 2", n)
	}

	_, err := serve(h, free, ok)
	rec := rendered(refusal(t, err))
	reset := unix(t, rec.Header(), HeaderReset)
	body := `{"error":"too_many_concurrent","message":"Too many requests at once: the free plan allows 2 requests in flight at a time. Retry when one of them has finished, or make a paid top-up to move to the supporter plan (10 at a time).","limit":2,"retry_after_s":1}` + "\n"
	if got := rec.Body.String(); got != body {
		t.Fatalf("body\n got %s\nwant %s", got, body)
	}
	want := http.Header{
		"Content-Type":           {"application/json"},
		"Content-Length":         {strconv.Itoa(len(body))},
		"X-Content-Type-Options": {"nosniff"},
		"X-Ratelimit-Limit":      {"20"},
		"X-Ratelimit-Remaining":  {"18"}, // the two in flight; the refused one is not counted
		"X-Ratelimit-Reset":      {strconv.FormatInt(reset, 10)},
		"Retry-After":            {"1"},
	}
	if !reflect.DeepEqual(rec.Header(), want) {
		t.Fatalf("headers\n got %v\nwant %v", rec.Header(), want)
	}

	// Another account is not held up.
	if _, err := serve(h, account("b", ledger.PlanFree), ok); err != nil {
		t.Fatalf("another account: %v", err)
	}

	// Release one of the two (whichever takes the release) and wait for it.
	b.release <- struct{}{}
	var still <-chan error
	select {
	case err := <-first:
		if err != nil {
			t.Fatal(err)
		}
		still = second
	case err := <-second:
		if err != nil {
			t.Fatal(err)
		}
		still = first
	}
	third := start(h, free, b)
	if _, err := serve(h, free, ok); err == nil {
		t.Fatal("a third request in flight allowed")
	}
	close(b.release)
	for _, done := range []<-chan error{still, third} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := h.zone.inflight.accounts(); n != 0 {
		t.Fatalf("%d accounts left in the counters", n)
	}
}

func TestConcurrencySupporterMessage(t *testing.T) {
	h := provision(t, &Handler{Zone: t.Name(), Plans: map[string]Limits{"supporter": {Concurrency: 1}}})
	b := newBlocking()
	id := account("a", ledger.PlanSupporter)
	done := start(h, id, b)
	_, err := serve(h, id, ok)
	rec := rendered(refusal(t, err))
	body := `{"error":"too_many_concurrent","message":"Too many requests at once: the supporter plan allows 1 request in flight at a time. Retry when one of them has finished.","limit":1,"retry_after_s":1}` + "\n"
	if got := rec.Body.String(); got != body {
		t.Fatalf("body\n got %s\nwant %s", got, body)
	}
	// No rate limit: no X-RateLimit-* headers.
	if got := rec.Header().Get(HeaderLimit); got != "" {
		t.Fatalf("%s %q with no rate limit", HeaderLimit, got)
	}
	if got := rec.Header().Get(HeaderRetry); got != "1" {
		t.Fatalf("%s %q", HeaderRetry, got)
	}
	close(b.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestReleased(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name string
		next caddyhttp.HandlerFunc
	}{
		{"error", func(http.ResponseWriter, *http.Request) error { return boom }},
		{"handler error", func(http.ResponseWriter, *http.Request) error {
			return caddyhttp.Error(http.StatusBadGateway, boom)
		}},
		{"panic", func(http.ResponseWriter, *http.Request) error { panic(boom) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := provision(t, &Handler{Zone: t.Name(), Plans: map[string]Limits{"free": {Concurrency: 1}}})
			id := account("a", ledger.PlanFree)
			for range 3 {
				func() {
					defer func() {
						if v := recover(); v != nil && v != boom {
							panic(v)
						}
					}()
					if _, err := serve(h, id, tt.next); !errors.Is(err, boom) {
						t.Fatalf("error %v, want next's", err)
					}
				}()
				if n := h.zone.inflight.inFlight("a"); n != 0 {
					t.Fatalf("%d in flight after next returned", n)
				}
			}
		})
	}
}

func TestRateRefusalReleasesTheSlot(t *testing.T) {
	h := provision(t, &Handler{Zone: t.Name(), Plans: map[string]Limits{"free": {RatePerMinute: 1, Concurrency: 1}}})
	id := account("a", ledger.PlanFree)
	if _, err := serve(h, id, ok); err != nil {
		t.Fatal(err)
	}
	_, err := serve(h, id, ok)
	if ref := refusal(t, err); ref.Body.(RateLimitedBody).Error != CodeRateLimited {
		t.Fatalf("refusal %+v", ref.Body)
	}
	if n := h.zone.inflight.accounts(); n != 0 {
		t.Fatalf("%d accounts in flight after a refusal", n)
	}
}

func TestStateSurvivesReload(t *testing.T) {
	zoneName := t.Name()
	key := poolKeyPrefix + zoneName
	plans := map[string]Limits{"free": {RatePerMinute: 5, Concurrency: 1}}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()

	a := &Handler{Zone: zoneName, Plans: plans, priceTable: priceTable}
	if err := a.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	id := account("a", ledger.PlanFree)
	for range 2 {
		if _, err := serve(a, id, ok); err != nil {
			t.Fatal(err)
		}
	}
	b := newBlocking()
	inFlight := start(a, id, b) // the third request, in flight across the reload

	// The new config is provisioned before the old one is cleaned up.
	next := &Handler{Zone: zoneName, Plans: plans, priceTable: priceTable}
	if err := next.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if refs, _ := zones.References(key); refs != 1 {
		t.Fatalf("%d references to the zone, want 1", refs)
	}

	_, err := serve(next, id, ok)
	if ref := refusal(t, err); ref.Body.(TooManyConcurrentBody).Limit != 1 {
		t.Fatalf("refusal %+v: the request in flight before the reload is not counted", ref.Body)
	}
	close(b.release)
	if err := <-inFlight; err != nil {
		t.Fatal(err)
	}
	rec, err := serve(next, id, ok)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.Header().Get(HeaderRemaining); got != "1" {
		t.Fatalf("remaining %s, want 1: the old config's 3 requests not counted", got)
	}

	if err := next.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if _, ok := zones.References(key); ok {
		t.Fatal("the zone outlived its last config")
	}
}

func TestZonesApart(t *testing.T) {
	plans := map[string]Limits{"free": {RatePerMinute: 1}}
	x := provision(t, &Handler{Zone: t.Name() + "/x", Plans: plans})
	y := provision(t, &Handler{Zone: t.Name() + "/y", Plans: plans})
	id := account("a", ledger.PlanFree)
	for _, h := range []*Handler{x, y} {
		if _, err := serve(h, id, ok); err != nil {
			t.Fatalf("zone %s: %v", h.Zone, err)
		}
	}
}

func TestCleanupAfterFailedProvision(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	noApp := errors.New("no trawl app")
	h := &Handler{
		Zone:       t.Name(),
		Plans:      map[string]Limits{"free": {RatePerMinute: 1}},
		priceTable: func(caddy.Context) (map[string]billing.PlanLimits, error) { return nil, noApp },
	}
	if err := h.Provision(ctx); !errors.Is(err, noApp) {
		t.Fatalf("provision: %v", err)
	}
	for range 2 {
		if err := h.Cleanup(); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := zones.References(poolKeyPrefix + t.Name()); ok {
		t.Fatal("a failed provision left the zone in the pool")
	}
	if err := new(Handler).Cleanup(); err != nil {
		t.Fatalf("cleanup of a handler never provisioned: %v", err)
	}

	// A price table without the free plan.
	h = &Handler{
		Zone: t.Name(),
		priceTable: func(caddy.Context) (map[string]billing.PlanLimits, error) {
			return map[string]billing.PlanLimits{"supporter": {}}, nil
		},
	}
	if err := h.Provision(ctx); err == nil || !strings.Contains(err.Error(), "free plan") {
		t.Fatalf("provision without the free plan: %v", err)
	}
	if err := h.Cleanup(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigNeedsNoAppWhenComplete(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	// No priceTable: asking the runtime would need a trawl app.
	h := &Handler{Zone: t.Name(), Plans: map[string]Limits{"free": {}, "supporter": {}}}
	if err := h.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Cleanup(); err != nil {
		t.Fatal(err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		plans map[string]Limits
		err   string
	}{
		{nil, ""},
		{map[string]Limits{"free": {RatePerMinute: 1, Concurrency: 1}}, ""},
		{map[string]Limits{"free": {RatePerMinute: -1}}, `plan "free": limits must not be negative`},
		{map[string]Limits{"supporter": {Concurrency: -1}}, `plan "supporter": limits must not be negative`},
		{map[string]Limits{"": {}}, "a plan has no name"},
	}
	for _, tt := range tests {
		err := (&Handler{Plans: tt.plans}).Validate()
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("plans %v: error %v, want %q", tt.plans, err, tt.err)
		}
	}
}

func TestJSON(t *testing.T) {
	in := `{"zone":"api","plans":{"free":{"rate_per_minute":30,"concurrency":3},"supporter":{}}}`
	var h Handler
	if err := json.Unmarshal([]byte(in), &h); err != nil {
		t.Fatal(err)
	}
	want := Handler{Zone: "api", Plans: map[string]Limits{"free": {RatePerMinute: 30, Concurrency: 3}, "supporter": {}}}
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("got %+v", h)
	}
	out, err := json.Marshal(&h)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Fatalf("round trip %s", out)
	}
}

func TestSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	h := provision(t, &Handler{Zone: t.Name(), Plans: map[string]Limits{"free": {RatePerMinute: 1}}})
	h.tracer = tp.Tracer(TracerName)

	// traced serves a request inside a recorded parent span, as
	// trawl_trace starts one.
	traced := func(id *gate.Identity) {
		r := request(id)
		ctx, parent := tp.Tracer("test").Start(r.Context(), "parent")
		defer parent.End()
		h.ServeHTTP(httptest.NewRecorder(), r.WithContext(ctx), ok)
	}
	traced(account("a", ledger.PlanFree))
	traced(account("a", ledger.PlanFree))
	traced(account("b", "gold"))
	traced(nil)                                 // no identity: no span
	serve(h, account("c", ledger.PlanFree), ok) // no recorded trace: no span

	var got []string
	for _, s := range exp.GetSpans() {
		if s.Name == "parent" {
			continue
		}
		attrs := map[string]string{}
		for _, kv := range s.Attributes {
			attrs[string(kv.Key)] = kv.Value.AsString()
		}
		got = append(got, fmt.Sprintf("%s %s %s", s.Name, attrs["trawl.plan"], attrs["trawl.ratelimit.decision"]))
		if s.InstrumentationScope.Name != TracerName {
			t.Errorf("tracer %q", s.InstrumentationScope.Name)
		}
		if !s.Parent.IsValid() {
			t.Errorf("span %s has no parent", s.Name)
		}
	}
	want := []string{
		"trawl.ratelimit free allowed",
		"trawl.ratelimit free rate_limited",
		"trawl.ratelimit gold allowed",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("spans\n got %q\nwant %q", got, want)
	}
}

func TestInflightForgetsIdleAccounts(t *testing.T) {
	f := newInflight()
	for i := range 1000 {
		a := "acct" + strconv.Itoa(i)
		if !f.acquire(a, 2) || !f.acquire(a, 2) || f.acquire(a, 2) {
			t.Fatalf("%s: want two places, not three", a)
		}
	}
	if n := f.accounts(); n != 1000 {
		t.Fatalf("%d accounts", n)
	}
	for i := range 1000 {
		a := "acct" + strconv.Itoa(i)
		f.release(a)
		f.release(a)
	}
	if n := f.accounts(); n != 0 {
		t.Fatalf("%d accounts kept after their requests ended", n)
	}
}

func BenchmarkAllowed(b *testing.B) {
	h := provision(b, &Handler{Zone: b.Name(), Plans: map[string]Limits{
		"free":      {RatePerMinute: 20, Concurrency: 2},
		"supporter": {RatePerMinute: 1 << 40, Concurrency: 10},
	}})
	r := request(account("acct_0123456789", ledger.PlanSupporter))
	w := &discard{h: make(http.Header)}
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		if err := h.ServeHTTP(w, r, next); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAllowedParallel(b *testing.B) {
	h := provision(b, &Handler{Zone: b.Name(), Plans: map[string]Limits{
		"free":      {RatePerMinute: 20, Concurrency: 2},
		"supporter": {RatePerMinute: 1 << 40, Concurrency: 1 << 20},
	}})
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	b.ReportAllocs()
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		r := request(account("acct_"+strconv.FormatInt(n.Add(1)%8, 10), ledger.PlanSupporter))
		w := &discard{h: make(http.Header)}
		for pb.Next() {
			clear(w.h)
			if err := h.ServeHTTP(w, r, next); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}

// A request another region's gate forwarded (an object this region owns)
// was counted there: it counts here neither against the rate nor as a
// request in flight, and the account's own requests here keep their count.
func TestForwardedRequestsCountOnce(t *testing.T) {
	h := provision(t, &Handler{Zone: t.Name(), Plans: map[string]Limits{"free": {RatePerMinute: 2, Concurrency: 1}}})
	fwd := account("a", "free")
	fwd.Forwarded = "eu"
	for i := range 5 {
		rec, err := serve(h, fwd, ok)
		if err != nil || rec.Header().Get("X-Ratelimit-Limit") != "" {
			t.Fatalf("forwarded request %d: %v, headers %v", i, err, rec.Header())
		}
	}
	for i := range 2 {
		if _, err := serve(h, account("a", "free"), ok); err != nil {
			t.Fatalf("own request %d after 5 forwarded: %v", i, err)
		}
	}
	if _, err := serve(h, account("a", "free"), ok); err == nil {
		t.Fatal("third own request allowed")
	}
}

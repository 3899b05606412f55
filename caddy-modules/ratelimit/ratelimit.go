// Package ratelimit is the Caddy HTTP handler "trawl_ratelimit": it limits
// each account, by its plan, to a number of requests per minute and a
// number of requests in flight. A request with no identity (a public
// route) passes untouched. The counters live in a caddy.UsagePool, so a
// config reload keeps them.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/trawlhq/trawl/caddy-modules/app"
	"github.com/trawlhq/trawl/gate"
	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/ledger"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// TracerName is the OpenTelemetry tracer of the module's spans.
const TracerName = "github.com/trawlhq/trawl/caddy-modules/ratelimit"

// Window is the rate limit's window: limits are per minute.
const Window = time.Minute

// Response headers. X-RateLimit-Reset is a Unix time in seconds (as
// GitHub's API): the first whole second at which the current window has
// certainly ended.
const (
	HeaderLimit     = "X-Ratelimit-Limit"
	HeaderRemaining = "X-Ratelimit-Remaining"
	HeaderReset     = "X-Ratelimit-Reset"
	HeaderRetry     = "Retry-After"
)

// Refusal codes (the "error" field of a 429 body).
const (
	CodeRateLimited       = "rate_limited"
	CodeTooManyConcurrent = "too_many_concurrent"
)

// zones holds each zone's counters across config reloads.
var zones = caddy.NewUsagePool()

const poolKeyPrefix = "trawl_ratelimit:"

// Handler limits each account's requests by its plan: a rate per minute
// and a number in flight at once.
type Handler struct {
	// Zone names the counters: handlers with the same zone count together,
	// in one config and across reloads. Two handlers with the same zone on
	// one request's path count it twice. Default "" (one shared zone).
	Zone string `json:"zone,omitempty"`
	// Plans overrides the limits of the price table, per plan; a plan
	// listed here takes both of its limits from here (0: no limit). Plans
	// not listed take the limits of the runtime's price table.
	Plans map[string]Limits `json:"plans,omitempty"`

	plans    map[string]*plan
	fallback *plan // the free plan: for an unknown plan
	zone     *zone
	poolKey  string // set once the zone is taken from the pool
	tracer   trace.Tracer
	now      func() time.Time
	// priceTable gives the plans' limits the config leaves out (default:
	// the trawl app's runtime); tests replace it.
	priceTable func(caddy.Context) (map[string]billing.PlanLimits, error)
}

// Limits are one plan's limits; 0 means no limit.
type Limits struct {
	// RatePerMinute is the number of requests an account may start per
	// minute.
	RatePerMinute int `json:"rate_per_minute,omitempty"`
	// Concurrency is the number of an account's requests in flight at
	// once.
	Concurrency int `json:"concurrency,omitempty"`
}

// RateLimitedBody is the body of a 429 for the rate.
type RateLimitedBody struct {
	Error       string `json:"error"`
	Message     string `json:"message"`
	Limit       int    `json:"limit"`
	WindowS     int    `json:"window_s"`
	RetryAfterS int64  `json:"retry_after_s"`
}

// TooManyConcurrentBody is the body of a 429 for requests in flight.
type TooManyConcurrentBody struct {
	Error       string `json:"error"`
	Message     string `json:"message"`
	Limit       int    `json:"limit"`
	RetryAfterS int64  `json:"retry_after_s"`
}

// plan is a plan's limits, ready for the hot path.
type plan struct {
	name        string
	rate        int
	concurrency int
	limiter     *limiter.Limiter // nil: no rate limit
	limitValue  string           // rate as the X-RateLimit-Limit value
	upgrade     *plan            // the supporter plan, offered to the free plan
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.trawl_ratelimit",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision fills in the plans the config leaves out from the runtime's
// price table and takes the zone's counters from the pool.
func (h *Handler) Provision(ctx caddy.Context) error {
	limits := make(map[string]Limits, len(h.Plans)+2)
	for name, l := range h.Plans {
		limits[name] = l
	}
	// The runtime is asked only for what the config leaves out, so a
	// config that lists both plans needs no trawl app.
	var missing []string
	for _, name := range []string{ledger.PlanFree, ledger.PlanSupporter} {
		if _, ok := limits[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		table := h.priceTable
		if table == nil {
			table = runtimePlans
		}
		plans, err := table(ctx)
		if err != nil {
			return fmt.Errorf("trawl_ratelimit: limits of plans %v: %w", missing, err)
		}
		for name, l := range plans {
			if _, ok := limits[name]; !ok {
				limits[name] = Limits{RatePerMinute: l.RatePerMinute, Concurrency: l.Concurrency}
			}
		}
	}
	if _, ok := limits[ledger.PlanFree]; !ok {
		return errors.New("trawl_ratelimit: no limits for the free plan")
	}
	if h.now == nil {
		h.now = time.Now
	}
	h.tracer = otel.Tracer(TracerName)

	// Taken last: nothing after it can fail, and Cleanup gives it back
	// only if it was taken.
	key := poolKeyPrefix + h.Zone
	val, _, err := zones.LoadOrNew(key, newZone)
	if err != nil {
		return fmt.Errorf("trawl_ratelimit: zone %q: %w", h.Zone, err)
	}
	h.poolKey, h.zone = key, val.(*zone)

	h.plans = make(map[string]*plan, len(limits))
	for name, l := range limits {
		p := &plan{name: name, rate: l.RatePerMinute, concurrency: l.Concurrency}
		if l.RatePerMinute > 0 {
			p.limiter = limiter.New(h.zone.store, limiter.Rate{Period: Window, Limit: int64(l.RatePerMinute)})
			p.limitValue = strconv.Itoa(l.RatePerMinute)
		}
		h.plans[name] = p
	}
	h.fallback = h.plans[ledger.PlanFree]
	h.fallback.upgrade = h.plans[ledger.PlanSupporter]
	if rt := app.RuntimeIfConfigured(ctx); rt != nil {
		// The gate's GET /v2/concurrency-check and queue-status read
		// what this handler counts.
		rt.SetInFlight(func(account, plan string) (int, int) {
			p, ok := h.plans[plan]
			if !ok {
				p = h.fallback
			}
			return h.zone.inflight.inFlight(account), p.concurrency
		})
	}
	return nil
}

// Validate rejects negative limits and nameless plans.
func (h *Handler) Validate() error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(h.Plans)) {
		l := h.Plans[name]
		if name == "" {
			errs = append(errs, errors.New("trawl_ratelimit: a plan has no name"))
		}
		if l.RatePerMinute < 0 || l.Concurrency < 0 {
			errs = append(errs, fmt.Errorf("trawl_ratelimit: plan %q: limits must not be negative", name))
		}
	}
	return errors.Join(errs...)
}

// Cleanup gives back this config's use of the zone's counters; the next
// config, provisioned before this one is cleaned up, keeps them. The
// handler keeps its references: a request still finishing on the old
// config after the grace period gives its place back to the same counters.
func (h *Handler) Cleanup() error {
	if h.poolKey == "" {
		return nil
	}
	_, err := zones.Delete(h.poolKey)
	h.poolKey = ""
	return err
}

// ServeHTTP counts the request against its account's limits, answers 429
// with a gate.Refusal when one is reached, and otherwise sets the
// X-RateLimit-* headers and calls next. The request's place in flight is
// given back when next returns, panics included.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	id := gate.IdentityFrom(r.Context())
	if id != nil && id.Forwarded != "" {
		// The gate that forwarded it counted it: a request counts once.
		return next.ServeHTTP(w, r)
	}
	account, planName := subject(id)
	if account == "" {
		return next.ServeHTTP(w, r)
	}
	if routes.Default().Match(r).Relay {
		// The tool server: each of its calls comes through the gate
		// again and is counted there, as the route it stands for.
		return next.ServeHTTP(w, r)
	}
	p := h.plans[planName]
	if p == nil {
		p = h.fallback
	}
	// A child span only, when the request's trace is recorded (trawl_trace
	// starts it): under the default parent-based sampler this one would
	// not be recorded otherwise, and starting a span that records nothing
	// still costs allocations on every request.
	ctx := r.Context()
	var span trace.Span
	if trace.SpanFromContext(ctx).IsRecording() {
		ctx, span = h.tracer.Start(ctx, "trawl.ratelimit")
	}
	acquired, decision, err := h.check(ctx, w.Header(), account, p)
	if span != nil {
		span.SetAttributes(
			attribute.String("trawl.plan", planName),
			attribute.String("trawl.ratelimit.decision", decision),
		)
		span.End()
	}
	if err != nil {
		return err
	}
	if acquired {
		defer h.zone.inflight.release(account)
	}
	return next.ServeHTTP(w, r)
}

// Decisions, as the span records them.
const (
	decisionAllowed = "allowed"
	decisionError   = "error"
)

// check takes a place in flight and a request of the rate. It reports
// whether it took a place in flight (the caller gives it back) and, when
// the request may not go on, the error to return.
func (h *Handler) check(ctx context.Context, hdr http.Header, account string, p *plan) (acquired bool, decision string, err error) {
	// In flight first: it is undone for free, whereas a request counted
	// against the rate stays counted, so a refusal for concurrency does
	// not use up the minute.
	if p.concurrency > 0 {
		if !h.zone.inflight.acquire(account, p.concurrency) {
			return false, CodeTooManyConcurrent, h.refuseConcurrent(ctx, account, p)
		}
		acquired = true
	}
	if p.limiter == nil {
		return acquired, decisionAllowed, nil
	}
	lc, err := p.limiter.Get(ctx, account)
	if err != nil || lc.Reached {
		if acquired {
			h.zone.inflight.release(account)
		}
		if err != nil {
			return false, decisionError, caddyhttp.Error(http.StatusInternalServerError, fmt.Errorf("trawl_ratelimit: %w", err))
		}
		return false, CodeRateLimited, h.refuseRate(p, lc)
	}
	// Two allocations for the three values: one string holding both
	// numbers, one array for the slices. Each header gets its own slice,
	// as other handlers may edit values in place.
	var buf [40]byte
	b := strconv.AppendInt(buf[:0], lc.Remaining, 10)
	n := len(b)
	b = strconv.AppendInt(b, resetAt(lc), 10)
	nums := string(b)
	v := [...]string{p.limitValue, nums[:n], nums[n:]}
	vals := v[:]
	hdr[HeaderLimit] = vals[0:1:1]
	hdr[HeaderRemaining] = vals[1:2:2]
	hdr[HeaderReset] = vals[2:3:3]
	return acquired, decisionAllowed, nil
}

func (h *Handler) refuseRate(p *plan, lc limiter.Context) error {
	reset := resetAt(lc)
	retry := max(1, reset-h.now().Unix())
	msg := fmt.Sprintf("Too many requests: the %s plan allows %s per minute. Retry in %s", p.name, count(p.rate, "request"), count(int(retry), "second"))
	if up := p.upgrade; up != nil && (up.rate == 0 || up.rate > p.rate) {
		msg += fmt.Sprintf(", or make a paid top-up to move to the %s plan (%s).", up.name, perMinute(up.rate))
	} else {
		msg += "."
	}
	hdr := make(http.Header, 4)
	hdr.Set(HeaderLimit, p.limitValue)
	hdr.Set(HeaderRemaining, "0")
	hdr.Set(HeaderReset, strconv.FormatInt(reset, 10))
	hdr.Set(HeaderRetry, strconv.FormatInt(retry, 10))
	return caddyhttp.Error(http.StatusTooManyRequests, &gate.Refusal{
		Status: http.StatusTooManyRequests,
		Body: RateLimitedBody{
			Error: CodeRateLimited, Message: msg,
			Limit: p.rate, WindowS: int(Window / time.Second), RetryAfterS: retry,
		},
		Header: hdr,
	})
}

func (h *Handler) refuseConcurrent(ctx context.Context, account string, p *plan) error {
	msg := fmt.Sprintf("Too many requests at once: the %s plan allows %s in flight at a time. Retry when one of them has finished", p.name, count(p.concurrency, "request"))
	if up := p.upgrade; up != nil && (up.concurrency == 0 || up.concurrency > p.concurrency) {
		msg += fmt.Sprintf(", or make a paid top-up to move to the %s plan (%s).", up.name, atATime(up.concurrency))
	} else {
		msg += "."
	}
	hdr := make(http.Header, 4)
	hdr.Set(HeaderRetry, "1")
	// The rate's headers too, as on every answer to an account; Peek
	// does not count this request.
	if p.limiter != nil {
		if lc, err := p.limiter.Peek(ctx, account); err == nil {
			hdr.Set(HeaderLimit, p.limitValue)
			hdr.Set(HeaderRemaining, strconv.FormatInt(lc.Remaining, 10))
			hdr.Set(HeaderReset, strconv.FormatInt(resetAt(lc), 10))
		}
	}
	return caddyhttp.Error(http.StatusTooManyRequests, &gate.Refusal{
		Status: http.StatusTooManyRequests,
		Body: TooManyConcurrentBody{
			Error: CodeTooManyConcurrent, Message: msg,
			Limit: p.concurrency, RetryAfterS: 1,
		},
		Header: hdr,
	})
}

func runtimePlans(ctx caddy.Context) (map[string]billing.PlanLimits, error) {
	rt, err := app.Runtime(ctx)
	if err != nil {
		return nil, err
	}
	return rt.Prices().Plans, nil
}

// resetAt is the window's end rounded up to a whole second: the store
// truncates it, and a client told to come back at a truncated time would
// come back too early.
func resetAt(lc limiter.Context) int64 { return lc.Reset + 1 }

// subject is the account a request counts against and its plan; "" for a
// request with no account.
func subject(id *gate.Identity) (account, plan string) {
	switch {
	case id == nil:
		return "", ""
	case id.Account != nil:
		return id.Account.ID, id.Account.Plan
	case id.Key != nil:
		return id.Key.Account, ""
	}
	return "", ""
}

func count(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}

func perMinute(n int) string {
	if n == 0 {
		return "no limit per minute"
	}
	return count(n, "request") + " per minute"
}

func atATime(n int) string {
	if n == 0 {
		return "no limit at a time"
	}
	return strconv.Itoa(n) + " at a time"
}

// zone is the state a zone keeps across reloads.
type zone struct {
	// store is ulule/limiter's memory store. Its cleaner goroutine (every
	// 30 s it drops ended windows) has no Close: it stops through the
	// store's finalizer once the zone is dropped and collected.
	store    limiter.Store
	inflight *inflight
}

func newZone() (caddy.Destructor, error) {
	return &zone{
		store: memory.NewStoreWithOptions(limiter.StoreOptions{
			Prefix:          "trawl",
			CleanUpInterval: limiter.DefaultCleanUpInterval,
		}),
		inflight: newInflight(),
	}, nil
}

// Destruct implements caddy.Destructor; there is nothing to close (see
// zone.store).
func (z *zone) Destruct() error { return nil }

// inflight counts each account's requests in flight. An account's entry
// is deleted when its count returns to zero, so memory is bounded by the
// requests in flight, exactly, with no sweeper goroutine to stop and no
// window in which a sweep races an increment (the hazard of a sync.Map of
// counters swept later). Accounts are spread over shards so that the
// lock is seldom contended.
type inflight struct {
	seed   maphash.Seed
	shards [inflightShards]inflightShard
}

const inflightShards = 64

type inflightShard struct {
	mu sync.Mutex
	n  map[string]int
	_  [48]byte // a cache line per shard
}

func newInflight() *inflight {
	f := &inflight{seed: maphash.MakeSeed()}
	for i := range f.shards {
		f.shards[i].n = make(map[string]int)
	}
	return f
}

func (f *inflight) shard(account string) *inflightShard {
	return &f.shards[maphash.String(f.seed, account)%inflightShards]
}

// acquire takes a place for account if it has fewer than limit in flight.
func (f *inflight) acquire(account string, limit int) bool {
	s := f.shard(account)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.n[account]
	if n >= limit {
		return false
	}
	s.n[account] = n + 1
	return true
}

// release gives back a place acquire took.
func (f *inflight) release(account string) {
	s := f.shard(account)
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.n[account] - 1; n > 0 {
		s.n[account] = n
	} else {
		delete(s.n, account)
	}
}

// inFlight is account's count.
func (f *inflight) inFlight(account string) int {
	s := f.shard(account)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[account]
}

// accounts is the number of accounts with a request in flight.
func (f *inflight) accounts() int {
	total := 0
	for i := range f.shards {
		s := &f.shards[i]
		s.mu.Lock()
		total += len(s.n)
		s.mu.Unlock()
	}
	return total
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddy.Destructor            = (*zone)(nil)
)

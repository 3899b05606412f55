// Package meter is the gate's Caddy module trawl_meter: it bills the usage
// that whoever answers a billed route reports (a cell, or the gate's own
// search and answer), priced by the call kinds of internal/metering.
// Before forwarding a billed call it reads the body within the route's
// limit (413 over it), counts its URLs, and checks that the region's hold
// can cover the call's minimum price (402 no_credit or spend_cap
// otherwise, docs/spec/hosted-api.md §7). When the response arrives it
// prices the usage header, charges the hold (a durable local write, see
// ledger.HoldsClient), records the receipt line, puts the usage object in a
// JSON answer, and writes the receipt headers x-svc-cost and
// x-svc-balance; an NDJSON answer is billed line by line (lines.go), and
// a held job or retry is released once charged (release.go). Refusals
// and 5xx answers cost nothing, but for a recipe run that failed after
// fetching pages.
package meter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/trawlhq/trawl/caddy-modules/app"
	"github.com/trawlhq/trawl/caddy-modules/body"
	"github.com/trawlhq/trawl/caddy-modules/route"
	"github.com/trawlhq/trawl/gate"
	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/gate/estimate"
	"github.com/trawlhq/trawl/gate/usage"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/ledger"
)

func init() {
	caddy.RegisterModule(Meter{})
}

var tracer = otel.Tracer("github.com/trawlhq/trawl/caddy-modules/meter")

// UsageHeader is the cell's report of how it produced a response (the
// usage contract of internal/metering); the meter removes it before the
// client sees it.
const UsageHeader = metering.Header

// Receipt headers.
const (
	HeaderCost    = "X-Svc-Cost"
	HeaderBalance = "X-Svc-Balance"
	HeaderReceipt = "X-Svc-Receipt"
)

// Meter bills calls against the region's holds.
type Meter struct {
	// ctx ends with the module (Provision's context): late releases stop.
	ctx    context.Context
	client *http.Client
	rt     *gate.Runtime
	routes *routes.Table
	usage  *usage.Log
	obs    *estimate.Observer
	// smallest pack, suggested in the no_credit body
	topup string
}

// CaddyModule returns the Caddy module information.
func (Meter) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.trawl_meter", New: func() caddy.Module { return new(Meter) }}
}

// Provision finds the runtime and reads the route table.
func (m *Meter) Provision(ctx caddy.Context) error {
	rt, err := app.Runtime(ctx)
	if err != nil {
		return err
	}
	m.rt, m.routes, m.usage, m.obs = rt, rt.Routes(), rt.Usage(), rt.Observer()
	m.ctx, m.client = ctx, &http.Client{Timeout: releaseTimeout}
	// Releases a previous run owed (a reload resumes them too: a release
	// made twice is one release).
	m.resume()
	packs := rt.Prices().Packs
	m.topup = billing.RouteTopup
	if len(packs) > 0 {
		m.topup = billing.TopupRoute(packs[0].USD, false)
	}
	return nil
}

// call is what the meter learned of a request before forwarding it.
type call struct {
	kind   string // a billing kind; "" for a free call
	count  int    // URLs, for batch and jobs
	perURL bool   // count is the body's number of urls
	url    string // the page, for a single-page call
	limit  int64  // the route's body limit (routes.Route.BodyLimit)
}

// classify names the billed kind of r: its route's, when the route takes
// r's method (a billed route is a POST or a GET). Everything else is free.
func (m *Meter) classify(r *http.Request) call {
	rt := m.routes.Match(r)
	if !rt.Allowed || rt.Kind == "" {
		return call{}
	}
	return call{kind: rt.Kind, count: 1, perURL: rt.PerURL, limit: rt.BodyLimit}
}

// peek reads the body within the route's own limit (413 over it, before
// anything is forwarded or charged; trawl_body has already refused a
// declared length over it, and spooled a body of unknown length), counts
// its urls with a streaming decoder and puts the body back for the proxy.
// A body that does not parse is left for the cell to refuse with its own
// 400. The returned spool, if any, must be closed when the request is done.
func peek(r *http.Request, c *call) (*body.Spool, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if s, ok := r.Body.(*body.Spool); ok { // trawl_body's, closed by it
		return nil, count(r, s, c)
	}
	s, err := body.Read(r, c.limit)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	return s, count(r, s, c)
}

// count reads the spooled body's url and number of urls into c and puts
// the body back, from its start, for the proxy.
func count(r *http.Request, s *body.Spool, c *call) error {
	if n := s.Size(); n == 0 {
		r.Body, r.ContentLength = http.NoBody, 0
		return nil
	}
	url, n := countBody(s)
	c.url = url
	if c.perURL {
		c.count = max(n, 1)
	}
	s.Rewind()
	r.Body = s
	r.ContentLength = s.Size()
	return nil
}

// ServeHTTP checks the hold, forwards, and bills the answer.
func (m *Meter) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	id := gate.IdentityFrom(r.Context())
	if id == nil {
		// A public route: free, and no account to show a balance of.
		w.Header().Set(HeaderCost, "0.000")
		return next.ServeHTTP(w, r)
	}
	c := m.classify(r)
	if c.kind != "" {
		ctx, span := tracer.Start(r.Context(), "trawl.meter.check", trace.WithAttributes(
			attribute.String("trawl.account", id.Account.ID), attribute.String("trawl.kind", c.kind)))
		spool, err := peek(r, &c)
		if err != nil {
			span.End()
			if tl, ok := errors.AsType[body.TooLarge](err); ok {
				return caddyhttp.Error(http.StatusRequestEntityTooLarge, gate.Refuse(http.StatusRequestEntityTooLarge, "too_large", tl.Error()))
			}
			return caddyhttp.Error(http.StatusBadRequest, gate.Refuse(http.StatusBadRequest, billing.CodeBadInput, "could not read the request body"))
		}
		if spool != nil {
			defer spool.Close()
		}
		min, _ := m.rt.Prices().Quote(billing.Usage{Kind: c.kind, Count: c.count})
		if r.Header.Get("Idempotency-Key") != "" {
			// A keyed job submission may be a repeat, which the cell
			// answers with the first job, free: it is not refused for the
			// price of a new one. A new one is still charged (or refused
			// and dropped) when the cell's answer starts.
			min = 0
		}
		err = m.rt.Holds().Ensure(ctx, id.Account.ID, min)
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		if err != nil {
			return m.refusal(id, err)
		}
	}
	r, answer := route.WithAnswer(r)
	mw := &writer{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, m: m, r: r, id: id, call: c, answer: answer}
	return mw.serve(next, r)
}

// refusal is the 402 for a failed hold check or charge; any other error is
// a 503 (the charge could not be recorded, so the answer is not given).
func (m *Meter) refusal(id *gate.Identity, err error) error {
	cfg := m.rt.Billing()
	switch {
	case errors.Is(err, ledger.ErrSpendCap):
		left, _ := billing.CapLeft(cfg, id.Account)
		return caddyhttp.Error(http.StatusPaymentRequired, &gate.Refusal{Status: http.StatusPaymentRequired, Body: billing.SpendCapBody(left)})
	case errors.Is(err, ledger.ErrNoCredit):
		bal, _ := m.rt.Balance(id.Account)
		return caddyhttp.Error(http.StatusPaymentRequired, &gate.Refusal{Status: http.StatusPaymentRequired, Body: billing.NoCreditBody(max(bal, 0), m.topup)})
	case errors.Is(err, ledger.ErrUnreachable):
		m.rt.Logger().Warn("meter: the region's hold is spent and the ledger does not answer", "account", id.Account.ID, "err", err)
		ref := gate.Refuse(http.StatusServiceUnavailable, "ledger_unreachable",
			"this region cannot reach the ledger to extend your credit right now; nothing was charged, repeat the request in a few seconds")
		ref.Header = http.Header{"Retry-After": {"5"}}
		return caddyhttp.Error(http.StatusServiceUnavailable, ref)
	}
	m.rt.Logger().Error("meter: charge not recorded", "account", id.Account.ID, "err", err)
	return caddyhttp.Error(http.StatusServiceUnavailable, gate.Refuse(http.StatusServiceUnavailable, "meter_unavailable",
		"the charge for this call could not be recorded, so it was not answered; repeat it in a few seconds"))
}

// writer bills when the response's header is written.
type writer struct {
	*caddyhttp.ResponseWriterWrapper
	m           *Meter
	r           *http.Request
	id          *gate.Identity
	call        call
	answer      *route.Answer
	wroteHeader bool
	discard     bool // the answer was replaced by a refusal
	// obj is the usage object put at the start of a JSON answer's body
	// (docs/spec/hosted-api.md §2.8); inject is where that stands (see injectWrite).
	obj    []byte
	inject int
	// lines bills an NDJSON answer line by line (metering.Usage.PerLine).
	lines *lineMeter
}

// States of inject.
const (
	injectNone  = iota // nothing to put in
	injectOpen         // before the body's opening brace
	injectComma        // after the usage object: a comma before the next member
	injectDone
)

func (w *writer) WriteHeader(status int) {
	if w.wroteHeader {
		return
	}
	if status < 200 {
		w.ResponseWriter.WriteHeader(status)
		return
	}
	w.wroteHeader = true
	h := w.Header()
	raw := h.Get(UsageHeader)
	h.Del(UsageHeader)
	if raw == "" && h.Get(HeaderCost) != "" {
		// Another region's gate answered (a forwarded object) and billed it.
		w.ResponseWriter.WriteHeader(status)
		return
	}
	if raw != "" && status < 300 {
		if u, err := metering.Parse(raw); err == nil && u.PerLine {
			// Billed per line as the lines pass: the totals are trailers.
			w.lines = &lineMeter{w: w, kind: w.call.kind}
			h.Del("Content-Length")
			h.Set("Trailer", HeaderCost+", "+HeaderBalance)
			w.ResponseWriter.WriteHeader(status)
			return
		}
	}
	var cost ledger.MC
	// A failed recipe run bills the pages it fetched and says so in its
	// usage object, 5xx included (docs/spec/hosted-api.md §7, recipe errors).
	failedRun := status >= 300 && raw != "" && failedRecipe(raw)
	if raw != "" && (status < 500 || failedRun) {
		var err error
		var line *usage.Line
		cost, line, err = w.bill(raw, status)
		if err != nil {
			w.refuse(err)
			return
		}
		if line != nil && (status < 300 || failedRun) && strings.HasPrefix(h.Get("Content-Type"), "application/json") {
			obj := line.Object()
			if strings.Contains(raw, `"lines"`) {
				u, _ := metering.Parse(raw)
				for _, l := range u.Lines {
					obj.Lines = append(obj.Lines, usage.Inner{Call: l.Call, URL: l.URL, Step: l.Step, Engine: l.Engine,
						Level: l.Level, Cache: l.Cache, LLMTokens: usage.Tokens{In: l.InTokens, Out: l.OutTokens}})
				}
			}
			w.obj, _ = json.Marshal(obj)
			w.inject = injectOpen
			h.Del("Content-Length")
		}
	}
	h.Set(HeaderCost, cost.String())
	if bal, err := w.m.rt.Balance(w.id.Account); err == nil {
		h.Set(HeaderBalance, bal.String())
	}
	w.ResponseWriter.WriteHeader(status)
}

// failedRecipe: the cell's report of a recipe run that failed after it
// fetched pages (the cell reports nothing for a refused request).
func failedRecipe(raw string) bool {
	if !strings.Contains(raw, `"kind":"`+metering.KindRecipe+`"`) {
		return false
	}
	u, err := metering.Parse(raw)
	return err == nil && u.Kind == metering.KindRecipe
}

// refuse replaces the answer by the refusal of a failed charge.
func (w *writer) refuse(err error) {
	h := w.Header()
	w.discard = true
	for k := range h {
		delete(h, k)
	}
	ref := w.m.refusalOf(w.id, err)
	h.Set(HeaderCost, "0.000")
	if bal, err := w.m.rt.Balance(w.id.Account); err == nil {
		h.Set(HeaderBalance, bal.String())
	}
	ref.Write(w.ResponseWriter)
}

// refusalOf is the refusal m.refusal returns for err.
func (m *Meter) refusalOf(id *gate.Identity, err error) *gate.Refusal {
	var ref *gate.Refusal
	if he, ok := m.refusal(id, err).(caddyhttp.HandlerError); ok {
		ref, _ = he.Err.(*gate.Refusal)
	}
	if ref == nil {
		ref = gate.Refuse(http.StatusServiceUnavailable, "meter_unavailable", "try again")
	}
	return ref
}

// bill prices the cell's usage, charges it, records the receipt line and
// releases what the cell holds until then (a job or a retry). It returns
// the line (nil for a free call the cell reported anyway).
func (w *writer) bill(raw string, status int) (ledger.MC, *usage.Line, error) {
	u, err := metering.Parse(raw)
	if err != nil {
		w.m.rt.Logger().Warn("meter: unreadable usage header", "usage", raw, "err", err)
		return 0, nil, nil
	}
	count := max(w.call.count, 1)
	if u.Count != nil {
		count = *u.Count
	}
	price, line, err := w.charge(u, count, w.call.url, status)
	if err != nil {
		if u.Hold != "" {
			w.m.drop(w.r.Context(), w.id.Account.ID, u.Job, u.Hold)
		}
		return 0, nil, err
	}
	if line != nil && line.Receipt != "" {
		w.Header().Set(HeaderReceipt, line.Receipt)
	}
	if u.Hold != "" {
		// Charged (or nothing to charge): now the cell may start it.
		w.m.release(w.r.Context(), w.id.Account.ID, u.Job, u.Hold, price.String())
	}
	return price, line, nil
}

// charge prices count units of u, charges them and records the receipt
// line. A count of 0 (nothing the cell could fetch) charges and records
// nothing: the line returned has no receipt.
func (w *writer) charge(u metering.Usage, count int, url string, status int) (ledger.MC, *usage.Line, error) {
	kind := u.Kind
	if kind == "" {
		kind = w.call.kind
	}
	if kind == "" {
		return 0, nil, nil // a free call the cell reported anyway
	}
	level := u.EffectiveLevel()
	boxes := u.Boxes
	if boxes == nil && u.Engine != "" {
		boxes = []string{u.Engine}
	}
	line := &usage.Line{
		Region: w.m.rt.Region(), Account: w.id.Account.ID,
		Call: kind, URL: url, Engine: u.Engine, Level: level, Cache: u.Cache, Count: count,
		LLMTokens: usage.Tokens{In: u.InTokens, Out: u.OutTokens}, Status: status, Boxes: boxes,
	}
	if count == 0 {
		return 0, line, nil
	}
	price, err := w.m.rt.Prices().Quote(billing.Usage{Kind: kind, Level: level, Cache: u.Cache, Count: count, InTokens: u.InTokens, OutTokens: u.OutTokens})
	if err != nil {
		w.m.rt.Logger().Warn("meter: usage not priceable", "usage", u.String(), "err", err)
		return 0, nil, nil
	}
	if left, ok := billing.CapLeft(w.m.rt.Billing(), w.id.Account); ok {
		a := billing.Amount(left)
		line.RemainingBefore = &a
	}
	ctx, span := tracer.Start(w.r.Context(), "trawl.meter.charge",
		trace.WithAttributes(attribute.String("trawl.kind", kind), attribute.String("trawl.level", level), attribute.Int64("trawl.cost_mc", int64(price))))
	defer span.End()
	receipt := newReceipt(w.m.rt.Region())
	if price > 0 {
		if err := w.m.rt.Holds().Charge(ctx, w.id.Account.ID, receipt, price); err != nil {
			span.SetStatus(codes.Error, err.Error())
			return 0, nil, err
		}
	}
	gate.Metrics().Charged(ctx, kind, level, price)
	line.Receipt, line.At, line.Units = receipt, w.m.rt.Now().UTC(), billing.Amount(price)
	if err := w.m.usage.Record(line); err != nil {
		w.m.rt.Logger().Warn("meter: usage line not recorded", "receipt", receipt, "err", err)
	}
	if url != "" && u.Engine != metering.EngineCache {
		w.m.obs.Observe(url, kind, level, u.InTokens, u.OutTokens)
	}
	return price, line, nil
}

func (w *writer) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	switch {
	case w.discard:
		return len(p), nil
	case w.lines != nil:
		return w.lines.write(p)
	case w.inject != injectNone && w.inject != injectDone:
		return w.injectWrite(p)
	}
	return w.ResponseWriter.Write(p)
}

// injectWrite puts "usage":{…} first in the answer's JSON object: after
// its opening brace, with a comma when the object has other members.
func (w *writer) injectWrite(p []byte) (int, error) {
	n := len(p)
	var out []byte
	for i := 0; i < len(p) && w.inject != injectDone; i++ {
		c := p[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		switch w.inject {
		case injectOpen:
			if c != '{' {
				w.inject = injectDone // not an object: left as it is
				break
			}
			out = append(append(append(out, p[:i+1]...), `"usage":`...), w.obj...)
			p, i = p[i+1:], -1
			w.inject = injectComma
		case injectComma:
			if c != '}' {
				out = append(out, ',')
			}
			w.inject = injectDone
		}
	}
	out = append(out, p...)
	if _, err := w.ResponseWriter.Write(out); err != nil {
		return 0, err
	}
	return n, nil
}

// serve runs next and ends a per-line answer: its trailers, and a last
// line when the cell's answer stopped early. reverse_proxy ends a stream
// it could not finish (the cell died, or the meter stopped it) by
// panicking with http.ErrAbortHandler; for a per-line answer the meter
// takes that as the end of the cell's lines.
func (w *writer) serve(next caddyhttp.Handler, r *http.Request) (err error) {
	defer func() {
		if w.lines == nil {
			return
		}
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			err = errStopped
		}
		w.lines.finish(err)
		err = nil
	}()
	return next.ServeHTTP(w, r)
}

// newReceipt is a receipt id: r_<region>_<random>.
func newReceipt(region string) string {
	var b [12]byte
	rand.Read(b[:])
	return "r_" + region + "_" + hex.EncodeToString(b[:])
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Meter)(nil)
	_ caddyhttp.MiddlewareHandler = (*Meter)(nil)
)

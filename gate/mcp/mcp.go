// Package mcp is the gate's tool server: the 16 tools of
// docs/spec/hosted-api.md §4.1 at /mcp, over MCP's streamable HTTP
// transport (github.com/modelcontextprotocol/go-sdk), for AI agents.
//
// A tool call is not served here: it is turned into the HTTP request of the
// route it stands for and sent through the gate's own handler chain (the
// pipeline trawl_api puts in the /mcp request's context: trawl_trace →
// trawl_auth → trawl_ratelimit → trawl_meter → trawl_api → trawl_route →
// cell), with the caller's own key. So a tool call is authenticated, rate
// limited, counted in flight, metered against the region's hold, routed to
// its cell or region and given a receipt exactly as that HTTP call would
// be; the receipt headers come back in the tool result (structuredContent
// "billing" and _meta "trawl/…"). The /mcp request itself is free and is not
// counted by the rate limiter (routes.Route.Relay): only its calls are, so
// a tool call never holds a place in flight its own call needs.
//
// The server is stateless (StreamableHTTPOptions.Stateless): every POST
// stands alone, so any gate of a region, or of another region, answers any
// request without a session to find. docs/mcp.md is the user's guide.
package mcp

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trawlhq/trawl/internal/routes"
)

// Config is what the tool server needs.
type Config struct {
	// Region is the gate's region (for the server's instructions).
	Region string
	// Pipeline returns the gate's handler chain from a request's context
	// (gate.PipelineFrom).
	Pipeline func(context.Context) http.Handler
	// ProgressEvery is how often a call still waiting sends a progress
	// notification, when the client asked for them (default 10 s).
	ProgressEvery time.Duration
	Logger        *slog.Logger
}

// Receipt headers (docs/gate.md).
const (
	headerCost    = "X-Svc-Cost"
	headerBalance = "X-Svc-Balance"
	headerReceipt = "X-Svc-Receipt"
	headerRegion  = "X-Svc-Region"
)

// Meta keys of a tool result's _meta: the call's receipt.
const (
	MetaCost    = "trawl/cost"
	MetaBalance = "trawl/balance"
	MetaReceipt = "trawl/receipt"
	MetaRegion  = "trawl/region"
)

// Handlers are the tool server's handler by its row of the route table
// (internal/routes, service mcp): POST /mcp, a message of at most the
// row's BodyLimit.
func Handlers(cfg Config) routes.Handlers {
	srv := NewServer(cfg)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{
		Stateless: true,
		// The SDK refuses a loopback connection whose Host is not
		// loopback (DNS rebinding of a local server). Every request here
		// has passed trawl_auth with an API key, which a rebinding page
		// does not have; and a gate behind a local proxy gets its public
		// Host on a loopback connection.
		DisableLocalhostProtection: true,
		// The row's limit bounds the body (below); the SDK reads a
		// http.MaxBytesReader's error as its own, 413.
		MaxRequestBodyBytes: -1,
		Logger:              quiet(cfg.Logger),
	})
	return routes.Handlers{"POST /mcp": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, routes.Limit(r))
		h.ServeHTTP(w, r.WithContext(withCaller(r.Context(), r)))
	})}
}

type server struct {
	cfg Config
}

// NewServer returns the MCP server with the 16 tools.
func NewServer(cfg Config) *sdk.Server {
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Pipeline == nil {
		cfg.Pipeline = func(context.Context) http.Handler { return nil }
	}
	s := &server{cfg: cfg}
	srv := sdk.NewServer(&sdk.Implementation{Name: "trawl", Title: "trawl web data", Version: "1"}, &sdk.ServerOptions{
		Instructions: instructions,
		Logger:       quiet(cfg.Logger),
	})
	s.register(srv)
	return srv
}

const instructions = `trawl turns public web pages into Markdown, HTML and typed JSON, searches what it has crawled, and runs named scrapers (recipes). Every call costs credits, exactly as the same call over HTTP: each tool result carries what it cost and the balance after it, in structuredContent.billing {cost, balance, receipt, region} and in _meta (trawl/cost, trawl/balance, trawl/receipt, trawl/region); each charge is one line of the usage history under its receipt id. Use estimate to price a call first and balance to see the credit. Out of credit or over the monthly cap, a tool answers an error whose actions say what to do (topup, spend_cap). Rate limited, it answers an error with retry_after_s. Pages that need a browser can take up to 90 s: allow 120 s per call and do not cancel and retry (ask for progress notifications to keep the call alive). For 50 to 500 URLs use jobs_submit; for more than 500 use the HTTP jobs API (POST /scrape/jobs).`

// billing is a call's receipt.
type billing struct {
	cost, balance, receipt, region string
}

func receiptOf(h, trailer http.Header) billing {
	get := func(k string) string {
		if v := trailer.Get(k); v != "" {
			return v
		}
		return h.Get(k)
	}
	return billing{cost: get(headerCost), balance: get(headerBalance), receipt: get(headerReceipt), region: get(headerRegion)}
}

func (b billing) object() map[string]any {
	o := map[string]any{}
	for k, v := range map[string]string{"cost": b.cost, "balance": b.balance, "receipt": b.receipt, "region": b.region} {
		if v != "" {
			o[k] = v
		}
	}
	return o
}

func (b billing) meta() sdk.Meta {
	m := sdk.Meta{}
	for k, v := range map[string]string{MetaCost: b.cost, MetaBalance: b.balance, MetaReceipt: b.receipt, MetaRegion: b.region} {
		if v != "" {
			m[k] = v
		}
	}
	return m
}

// out is a tool's structured result.
type out = map[string]any

// finish makes the tool result: the structured content with its billing,
// and for an error a text a model can act on before the JSON.
func finish(o out, b billing, isErr bool, text string) (*sdk.CallToolResult, out, error) {
	o["billing"] = b.object()
	res := &sdk.CallToolResult{IsError: isErr, Meta: b.meta()}
	if isErr {
		j, _ := json.Marshal(o)
		res.Content = []sdk.Content{&sdk.TextContent{Text: text}, &sdk.TextContent{Text: string(j)}}
	}
	return res, o, nil
}

// refuse is a tool error the tool decides itself (no call was made).
func refuse(code, msg string, extra out) (*sdk.CallToolResult, out, error) {
	o := out{"error": code, "message": msg}
	for k, v := range extra {
		o[k] = v
	}
	return finish(o, billing{cost: "0.000"}, true, msg)
}

// progress sends progress notifications for req while a call runs, when
// the client gave a progress token.
type progress struct {
	ctx   context.Context
	req   *sdk.CallToolRequest
	token any
	n     float64
}

func newProgress(ctx context.Context, req *sdk.CallToolRequest) *progress {
	p := &progress{ctx: ctx, req: req}
	if req != nil && req.Params != nil {
		p.token = req.Params.GetProgressToken()
	}
	return p
}

func (p *progress) send(done, total float64, msg string) {
	if p.token == nil || p.req.Session == nil {
		return
	}
	if done <= p.n {
		done = p.n + 1 // progress must increase
	}
	p.n = done
	_ = p.req.Session.NotifyProgress(p.ctx, &sdk.ProgressNotificationParams{ProgressToken: p.token, Progress: done, Total: total, Message: msg})
}

// heartbeat sends a progress notification every interval until stop is
// called: a client that resets its timeout on progress keeps waiting for a
// page that needs the browser (up to 90 s).
func (p *progress) heartbeat(every time.Duration, what string) (stop func()) {
	if p.token == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-p.ctx.Done():
				return
			case <-t.C:
				p.send(p.n+1, 0, what+": still working after "+strconv.Itoa(int(time.Since(start).Seconds()))+" s")
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// call sends r through the gate as the caller and makes the tool result
// of its JSON answer; shape, when set, turns a successful answer into the
// tool's structured content.
func (s *server) call(ctx context.Context, req *sdk.CallToolRequest, what string, r request, shape func(o out, h http.Header) string) (*sdk.CallToolResult, out, error) {
	c, _ := ctx.Value(callerKey{}).(*caller)
	if c == nil {
		c = &caller{header: http.Header{}}
	}
	p := newProgress(ctx, req)
	stop := p.heartbeat(s.cfg.ProgressEvery, what)
	resp, err := do(ctx, s.cfg.Pipeline(ctx), c, r)
	if err != nil {
		stop()
		return refuse("unavailable", "the call could not be made: "+err.Error(), nil)
	}
	body, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	stop()
	b := receiptOf(resp.Header, resp.Trailer())
	o := out{}
	if len(body) > 0 {
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			o["body"] = string(body)
		} else if m, ok := v.(map[string]any); ok {
			o = m
		} else {
			o["data"] = v
		}
	}
	if rerr != nil && resp.Status < 400 {
		return finish(out{"error": "unavailable", "message": "the answer was cut off: " + rerr.Error(), "status": resp.Status}, b, true,
			"The answer was cut off before it was complete; repeat the call.")
	}
	if resp.Status >= 400 {
		return s.failed(o, resp, b)
	}
	var text string
	if shape != nil {
		text = shape(o, resp.Header)
	}
	res, o2, err := finish(o, b, false, "")
	if text != "" {
		j, _ := json.Marshal(o2)
		res.Content = []sdk.Content{&sdk.TextContent{Text: text}, &sdk.TextContent{Text: string(j)}}
	}
	return res, o2, err
}

// failed is the tool error of a refused or failed call: the route's error
// body as it is (a 402's actions included), its status, and for a 429 when
// to retry.
func (s *server) failed(o out, resp *response, b billing) (*sdk.CallToolResult, out, error) {
	o["status"] = resp.Status
	msg, _ := o["message"].(string)
	code, _ := o["error"].(string)
	if msg == "" {
		msg = http.StatusText(resp.Status)
	}
	text := msg
	switch resp.Status {
	case http.StatusTooManyRequests:
		retry := 1
		if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n > 0 {
			retry = n
		}
		o["retry_after_s"] = retry
		rl := out{}
		for k, h := range map[string]string{"limit": "X-Ratelimit-Limit", "remaining": "X-Ratelimit-Remaining", "reset": "X-Ratelimit-Reset"} {
			if v, err := strconv.ParseInt(resp.Header.Get(h), 10, 64); err == nil {
				rl[k] = v
			}
		}
		if len(rl) > 0 {
			o["rate_limit"] = rl
		}
		text = "Rate limited (" + code + "): retry this call in " + strconv.Itoa(retry) + " s. " + msg
	case http.StatusPaymentRequired:
		text = "Payment required (" + code + "): " + msg
		if a, ok := o["actions"].(map[string]any); ok {
			if m, ok := a["mcp"].(string); ok {
				text += " With this server: use the " + strings.TrimSuffix(m, " tool") + " tool."
			}
		}
	case http.StatusServiceUnavailable:
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			if n, err := strconv.Atoi(ra); err == nil {
				o["retry_after_s"] = n
				text += " Retry in " + ra + " s."
			}
		}
	}
	return finish(o, b, true, text)
}

// quiet passes on the SDK's warnings and errors only: it logs every
// session's start and end at Info, which on a stateless server is every
// request.
func quiet(l *slog.Logger) *slog.Logger {
	if l == nil {
		l = slog.Default()
	}
	return slog.New(warnOnly{l.Handler()})
}

type warnOnly struct{ slog.Handler }

func (w warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}
func (w warnOnly) WithAttrs(a []slog.Attr) slog.Handler { return warnOnly{w.Handler.WithAttrs(a)} }
func (w warnOnly) WithGroup(n string) slog.Handler      { return warnOnly{w.Handler.WithGroup(n)} }

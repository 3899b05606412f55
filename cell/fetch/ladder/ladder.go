// Package ladder picks the fetch engine for each page: plain HTTP first,
// the browser when HTTP gets a JavaScript shell or a bot wall, and the
// browser through a proxy when the browser is walled too. It remembers, per
// site, the step that last produced content, starts there next time, and
// now and then tries the bottom again so a site that relaxed steps down.
//
// The cache, the first step of docs/spec/hosted-api.md §1, is the scrape service's;
// the ladder is what runs on a miss.
package ladder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/fetch/detect"
	"github.com/trawlhq/trawl/internal/store"
)

// Engines and effort levels, as the usage header names them. The gate
// prices the level (docs/billing.md); the cell never prices.
const (
	EngineHTTP    = "http"
	EngineBrowser = "browser"

	LevelLight        = "light"
	LevelBrowser      = "browser"
	LevelBrowserProxy = "browser_proxy"
)

// Defaults for Config.
const (
	// DefaultStepDown is how long a site that needed a higher step goes
	// straight to it before one request tries plain HTTP again.
	DefaultStepDown = 24 * time.Hour
	// DefaultBudget bounds a whole climb, all steps together: inside the
	// 120 s clients give a scrape (docs/spec/hosted-api.md §8) and the gate's 125 s.
	DefaultBudget = 110 * time.Second
	// DefaultForget is how long a site's memory lasts without being
	// renewed; then the site starts from plain HTTP like a new one.
	DefaultForget = 30 * 24 * time.Hour
)

// Settle is the WaitFor the ladder gives the browser when the request
// names none: capture once the page shows some text (about 50 words, or 600
// characters for scripts without spaces) or 5 s after its document started
// loading, whichever comes first. The browser engine captures at the load
// event otherwise, before most applications have fetched their data, and
// while a challenge page is still working out its cookie and reloading (a
// reload starts the clock again).
const Settle = `js:(() => { const t = document.body ? document.body.innerText.trim() : ""; ` +
	`return t.split(/\s+/).length >= 50 || t.length >= 600 || performance.now() > 5000; })()`

// prefixMemory is the store prefix of the per-site memory: site/<host>,
// or site/<host>|<proxy kind> for requests that named a proxy.
var prefixMemory = []byte(store.PrefixSite)

// HTTPEngine is the plain engine, which can go through a proxy
// (*fetch.HTTP).
type HTTPEngine interface {
	FetchVia(ctx context.Context, req *fetch.Request, p *fetch.Proxy) (*fetch.Response, error)
}

// Config configures a Ladder.
type Config struct {
	// HTTP is the plain engine; required.
	HTTP HTTPEngine
	// Browser is the browser engine; nil when the cell runs none, and the
	// ladder then stops at HTTP.
	Browser fetch.Engine
	// Proxies are the configured upstream proxies; nil means none.
	Proxies *fetch.ProxyPools
	// EscalateProxy is the proxy kind (fetch.ProxyISP or
	// fetch.ProxyResidential) of the last step for requests that ask for
	// no proxy: the browser through a proxy of that kind, used only when
	// the browser alone is walled. Empty: such requests never use a proxy.
	EscalateProxy string
	// StepDown: see DefaultStepDown. Negative: never step down.
	StepDown time.Duration
	// Forget: see DefaultForget.
	Forget time.Duration
	// Budget: see DefaultBudget.
	Budget time.Duration
	// MemoryPrefix is the store range of the per-site memory; default
	// store.PrefixSite (the cell's). Another process's store names its own
	// (the crawl server's: store.PrefixCrawlSite).
	MemoryPrefix string
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger; default slog.Default.
	Logger *slog.Logger
}

// Ladder fetches pages, choosing engines per site. Safe for concurrent use.
type Ladder struct {
	cfg     Config
	store   *store.Store
	prefix  []byte   // of the per-site memory
	probing sync.Map // memory key → struct{}: a step-down probe is running
}

// New returns a ladder that keeps its memory in st.
func New(st *store.Store, cfg Config) (*Ladder, error) {
	if cfg.HTTP == nil {
		return nil, errors.New("ladder: no HTTP engine")
	}
	switch cfg.EscalateProxy {
	case "", fetch.ProxyNone:
		cfg.EscalateProxy = ""
	case fetch.ProxyISP, fetch.ProxyResidential:
		if !cfg.Proxies.Has(cfg.EscalateProxy, "") {
			return nil, fmt.Errorf("ladder: escalation through %s proxies, but none is configured", cfg.EscalateProxy)
		}
	default:
		return nil, fmt.Errorf("ladder: escalation proxy kind must be isp or residential (got %q)", cfg.EscalateProxy)
	}
	if cfg.StepDown == 0 {
		cfg.StepDown = DefaultStepDown
	}
	if cfg.Forget <= 0 {
		cfg.Forget = DefaultForget
	}
	if cfg.Budget <= 0 {
		cfg.Budget = DefaultBudget
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := &Ladder{cfg: cfg, store: st, prefix: prefixMemory}
	if cfg.MemoryPrefix != "" {
		l.prefix = []byte(cfg.MemoryPrefix)
	}
	return l, nil
}

// Request is one page to fetch.
type Request struct {
	// URL is the page, already validated (urlpolicy.Validate).
	URL *url.URL
	// Proxy is the kind the caller asked for: "" or fetch.ProxyNone,
	// fetch.ProxyISP, fetch.ProxyResidential. With a kind, every step goes
	// through a proxy of that kind.
	Proxy string
	// Country is the exit country asked for, lower case, or "".
	Country string
	// Browser, when set, asks for what only the browser does (wait_for,
	// js, screenshot, viewport, actions): the ladder skips plain HTTP, and does not
	// learn from the page. Its Proxy is set by the ladder.
	Browser *fetch.BrowserOptions
	// Header holds the caller's request headers (fetch.CheckHeaders):
	// sent by every step, the HTTP engine's request and the browser's
	// page alike; secrets, never stored or logged. The ladder does not
	// learn from a page fetched with them.
	Header http.Header
	// Cookie is one Cookie header line (a recipe's session): a secret,
	// sent with this request only (to the page's host: the HTTP engine
	// drops it on a redirect to another host, the browser scopes its
	// cookies to the host), never stored or logged.
	Cookie string
}

func (r *Request) kind() string {
	if r.Proxy == "" {
		return fetch.ProxyNone
	}
	return r.Proxy
}

// Result is a page and how it was fetched.
type Result struct {
	*fetch.Response
	// Engine is EngineHTTP or EngineBrowser.
	Engine string
	// Level is the effort level: LevelLight for HTTP (direct or through a
	// proxy), LevelBrowser, LevelBrowserProxy for the browser through a
	// proxy.
	Level string
	// Proxy is the kind of proxy used, or "".
	Proxy string
	// Verdict is what detect said of the page kept: Content, or Shell when
	// no browser could do better.
	Verdict detect.Result
	// Steps lists what was tried, in order.
	Steps []Step
}

// Step is one engine tried.
type Step struct {
	Rung    string // http, browser, browser_proxy
	Verdict detect.Result
}

func (s Step) String() string {
	if s.Verdict.Reason == "" {
		return s.Rung + ": " + s.Verdict.Verdict.String()
	}
	return s.Rung + ": " + s.Verdict.Verdict.String() + " (" + s.Verdict.Reason + ")"
}

// ErrBlocked means every step got the site's bot wall. Fetch returns it
// inside a *BlockedError.
var ErrBlocked = errors.New("the site answered every engine with its block page")

// ErrNeedsBrowser refuses a request with browser options on a cell that
// runs no browser.
var ErrNeedsBrowser = errors.New("wait_for, js, screenshot, viewport and page actions need the browser engine, which this cell does not run")

// BlockedError is ErrBlocked with the steps tried.
type BlockedError struct{ Steps []Step }

func (e *BlockedError) Error() string {
	parts := make([]string, len(e.Steps))
	for i, s := range e.Steps {
		parts[i] = s.String()
	}
	return ErrBlocked.Error() + " (" + strings.Join(parts, "; ") + ")"
}

func (e *BlockedError) Is(target error) bool { return target == ErrBlocked }

// rung is one step of a request's ladder.
type rung struct {
	name      string // memory name: http, browser, browser_proxy
	order     int    // 0, 1, 2: comparable across plans
	engine    string
	level     string
	proxyKind string // "" direct
	country   string
}

// plan lists the steps open to a request, bottom first.
func (l *Ladder) plan(req *Request) []rung {
	var rungs []rung
	kind := req.kind()
	if kind != fetch.ProxyNone {
		// The caller chose the exit: every step goes through it.
		if req.Browser == nil {
			rungs = append(rungs, rung{name: "http", order: 0, engine: EngineHTTP, level: LevelLight, proxyKind: kind, country: req.Country})
		}
		if l.cfg.Browser != nil {
			rungs = append(rungs, rung{name: "browser", order: 1, engine: EngineBrowser, level: LevelBrowserProxy, proxyKind: kind, country: req.Country})
		}
		return rungs
	}
	if req.Browser == nil {
		rungs = append(rungs, rung{name: "http", order: 0, engine: EngineHTTP, level: LevelLight})
	}
	if l.cfg.Browser == nil {
		return rungs
	}
	rungs = append(rungs, rung{name: "browser", order: 1, engine: EngineBrowser, level: LevelBrowser})
	if k := l.cfg.EscalateProxy; k != "" {
		// The caller's country if a pool serves it, else any exit.
		country := ""
		if req.Country != "" && l.cfg.Proxies.Has(k, req.Country) {
			country = req.Country
		}
		rungs = append(rungs, rung{name: "browser_proxy", order: 2, engine: EngineBrowser, level: LevelBrowserProxy, proxyKind: k, country: country})
	}
	return rungs
}

// Check refuses a request this cell cannot serve as asked: a proxy kind
// and country without a pool (*fetch.NoProxyError), or browser options
// without a browser (ErrNeedsBrowser). Country without a proxy kind is
// accepted: it only steers the escalation proxy.
func (l *Ladder) Check(req *Request) error {
	if req.Browser != nil && l.cfg.Browser == nil {
		return ErrNeedsBrowser
	}
	if kind := req.kind(); kind != fetch.ProxyNone {
		if _, err := l.cfg.Proxies.Pick(kind, req.Country); err != nil {
			return err
		}
	}
	return nil
}

// Fetch fetches req.URL, climbing the ladder as far as needed. Errors: a
// *BlockedError (ErrBlocked) when every step was walled; the engines' own
// errors (fetch.ErrUnreachable, fetch.ErrFleetBusy, fetch.ErrProxy...),
// which stop the climb, since a higher step would not fare better; and
// Check's refusals.
func (l *Ladder) Fetch(ctx context.Context, req *Request) (*Result, error) {
	if err := l.Check(req); err != nil {
		return nil, err
	}
	rungs := l.plan(req)
	if len(rungs) == 0 {
		return nil, ErrNeedsBrowser
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Budget)
	defer cancel()
	// A page fetched with the caller's browser options or headers says
	// nothing of what the site answers everyone else: not learnt from.
	learn := req.Browser == nil && len(req.Header) == 0
	key := l.memoryKey(req.URL.Host, req.kind())
	start, mem, probe := 0, memory{}, false
	if learn {
		var found bool
		mem, found = l.recall(key)
		if found {
			start = startAt(rungs, mem.Rung)
			if start > 0 && l.cfg.StepDown >= 0 && !l.cfg.Now().Before(mem.At.Add(l.cfg.StepDown)) {
				if _, busy := l.probing.LoadOrStore(string(key), struct{}{}); !busy {
					// One request at a time tries the bottom again.
					defer l.probing.Delete(string(key))
					start, probe = 0, true
				}
			}
		}
	}

	var steps []Step
	for i := start; i < len(rungs); i++ {
		r := rungs[i]
		resp, err := l.try(ctx, r, req)
		if err != nil {
			return nil, err
		}
		v := detect.Page(resp.Status, resp.ContentType, resp.Body)
		steps = append(steps, Step{Rung: r.name, Verdict: v})
		if v.Verdict == detect.Blocked {
			continue
		}
		if v.Verdict == detect.Shell && r.engine == EngineHTTP && i+1 < len(rungs) {
			continue
		}
		if learn {
			l.remember(key, req.URL.Host, mem, r, i > start || probe, steps)
		}
		return &Result{Response: resp, Engine: r.engine, Level: r.level, Proxy: r.proxyKind, Verdict: v, Steps: steps}, nil
	}
	l.cfg.Logger.Info("engine ladder: blocked on every step", "host", req.URL.Host, "steps", fmt.Sprint(steps))
	return nil, &BlockedError{Steps: steps}
}

// startAt is the index of the remembered rung in rungs, or of the highest
// rung below it when this request's plan lacks it.
func startAt(rungs []rung, name string) int {
	order := map[string]int{"http": 0, "browser": 1, "browser_proxy": 2}[name]
	start := 0
	for i, r := range rungs {
		if r.order <= order {
			start = i
		}
	}
	return start
}

// try runs one step. A proxy that fails is replaced once by the next of
// its pool, when the pool has another.
func (l *Ladder) try(ctx context.Context, r rung, req *Request) (*fetch.Response, error) {
	attempts := 1
	if r.proxyKind != "" && l.cfg.Proxies.Size(r.proxyKind, r.country) > 1 {
		attempts = 2
	}
	var err error
	for range attempts {
		var p *fetch.Proxy
		if r.proxyKind != "" {
			if p, err = l.cfg.Proxies.Pick(r.proxyKind, r.country); err != nil {
				return nil, err
			}
		}
		var resp *fetch.Response
		if r.engine == EngineHTTP {
			freq := &fetch.Request{URL: req.URL.String(), Header: req.Header}
			if req.Cookie != "" {
				freq.Header = req.Header.Clone()
				if freq.Header == nil {
					freq.Header = http.Header{}
				}
				freq.Header.Set("Cookie", req.Cookie)
			}
			resp, err = l.cfg.HTTP.FetchVia(ctx, freq, p)
		} else {
			opts := fetch.BrowserOptions{}
			if req.Browser != nil {
				opts = *req.Browser
			}
			if opts.WaitFor == "" {
				opts.WaitFor = Settle
			}
			opts.Proxy = ""
			hdr := req.Header
			for _, line := range []string{req.Cookie, hdr.Get("Cookie")} {
				if line != "" {
					// Cookies for the page's host only, as the HTTP engine
					// keeps them: the browser's own jar scopes them, where
					// a header would go with every request of the page.
					opts.Cookies = append(append([]fetch.Cookie(nil), opts.Cookies...), sessionCookies(line, req.URL.Hostname())...)
				}
			}
			if hdr.Get("Cookie") != "" {
				hdr = hdr.Clone()
				hdr.Del("Cookie")
			}
			if p != nil {
				opts.Proxy = p.URL()
			}
			resp, err = l.cfg.Browser.Fetch(ctx, &fetch.Request{URL: req.URL.String(), Header: hdr, Browser: &opts})
		}
		if err == nil {
			return resp, nil
		}
		if !errors.Is(err, fetch.ErrProxy) {
			return nil, err
		}
		l.cfg.Logger.Warn("engine ladder: proxy failed", "proxy", p, "rung", r.name, "err", err)
	}
	return nil, err
}

// sessionCookies are the cookies of a Cookie header line, for host.
func sessionCookies(line, host string) []fetch.Cookie {
	cs, err := http.ParseCookie(line)
	if err != nil {
		return nil
	}
	out := make([]fetch.Cookie, 0, len(cs))
	for _, c := range cs {
		out = append(out, fetch.Cookie{Name: c.Name, Value: c.Value, Domain: host, Path: "/"})
	}
	return out
}

// memory is what the ladder remembers of a site.
type memory struct {
	// Rung is the step that last produced content (http, browser,
	// browser_proxy).
	Rung string `json:"rung"`
	// At is when the steps below Rung were last seen failing.
	At time.Time `json:"at"`
}

func (l *Ladder) memoryKey(host, kind string) []byte {
	k := append([]byte(nil), l.prefix...)
	k = append(k, strings.ToLower(host)...)
	if kind != fetch.ProxyNone {
		k = append(k, '|')
		k = append(k, kind...)
	}
	return k
}

func (l *Ladder) recall(key []byte) (memory, bool) {
	v, _, err := l.store.GetLive(nil, key, l.cfg.Now())
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			l.cfg.Logger.Warn("engine ladder: memory unreadable", "key", string(key), "err", err)
		}
		return memory{}, false
	}
	var m memory
	if err := json.Unmarshal(v, &m); err != nil {
		l.cfg.Logger.Warn("engine ladder: memory corrupt", "key", string(key), "err", err)
		return memory{}, false
	}
	return m, true
}

// remember records r as the site's step when it differs from what was
// remembered, or when the steps below it were just seen failing (climbed).
// Plain HTTP is not recorded: no memory means start there.
func (l *Ladder) remember(key []byte, host string, old memory, r rung, climbed bool, steps []Step) {
	if r.order == 0 {
		if old.Rung != "" {
			l.cfg.Logger.Info("engine ladder: site steps down", "host", host, "from", old.Rung, "to", r.name)
			if err := l.store.Delete(key, store.NoSync); err != nil {
				l.cfg.Logger.Warn("engine ladder: memory not written", "host", host, "err", err)
			}
		}
		return
	}
	if old.Rung == r.name && !climbed {
		return
	}
	now := l.cfg.Now()
	v, _ := json.Marshal(memory{Rung: r.name, At: now.UTC()})
	if old.Rung != r.name {
		l.cfg.Logger.Info("engine ladder: site needs a higher step", "host", host, "from", orDefault(old.Rung, "http"), "to", r.name, "steps", fmt.Sprint(steps))
	}
	if err := l.store.SetExpiring(key, v, now.Add(l.cfg.Forget), store.NoSync); err != nil {
		l.cfg.Logger.Warn("engine ladder: memory not written", "host", host, "err", err)
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Remembered is the step the ladder would start a request of proxy kind
// (fetch.ProxyNone for none) to host at: "http", "browser" or
// "browser_proxy". For tests and operators.
func (l *Ladder) Remembered(host, kind string) string {
	m, ok := l.recall(l.memoryKey(host, kind))
	if !ok {
		return "http"
	}
	return m.Rung
}

// Sweep drops memories not renewed within Config.Forget.
func (l *Ladder) Sweep() (int, error) {
	return l.store.SweepExpired(l.prefix, l.cfg.Now())
}

package crawl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/andybalholm/cascadia"

	"github.com/trawlhq/trawl/cell/crawl/extract"
	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/internal/urlpolicy"
	"github.com/trawlhq/trawl/internal/webhook"
)

// Limits of a crawl request.
const (
	MaxURLs            = 100
	MinPriority        = 1
	MaxPriority        = 10
	DefaultPriority    = 5
	DefaultTTL         = time.Hour
	MaxTTL             = 30 * 24 * time.Hour
	DefaultSemaphore   = 5
	MaxSemaphore       = 20
	MaxJSSnippets      = 32
	maxRequestBytes    = 1 << 20
	defaultPageTimeout = 60 * time.Second
	maxPageTimeout     = 5 * time.Minute
	maxDelay           = 60 * time.Second
)

// Request is the body of POST /crawl and POST /crawl/stream (docs/spec/crawl-server.md §2.1). It
// is kept as received in the task record, so a task resumed after a
// restart runs exactly what was accepted.
type Request struct {
	URLs             stringOrList      `json:"urls"`
	Priority         *int              `json:"priority,omitempty"`
	TTL              *int              `json:"ttl,omitempty"`
	ExtractionConfig *ExtractionConfig `json:"extraction_config,omitempty"`
	CrawlerParams    *CrawlerParams    `json:"crawler_params,omitempty"`
	Extra            *Extra            `json:"extra,omitempty"`
	CSSSelector      string            `json:"css_selector,omitempty"`
	JSCode           stringOrList      `json:"js_code,omitempty"`
	WaitFor          string            `json:"wait_for,omitempty"`
	Screenshot       bool              `json:"screenshot,omitempty"`
	// PDF asks for the page printed as a PDF (base64 in the result's pdf),
	// as Crawl4AI's CrawlerRunConfig.pdf; it needs the browser.
	PDF           bool           `json:"pdf,omitempty"`
	BrowserConfig *BrowserConfig `json:"browser_config,omitempty"`
	// SessionID (or crawler_params.session_id) names a browser context
	// kept between requests, as Crawl4AI's: cookies and storage stay
	// (docs/crawl-server.md, "Sessions").
	SessionID string `json:"session_id,omitempty"`

	// WebhookConfig asks for a POST when the task finishes (docs/spec/crawl-server.md §6 leaves
	// its fields to us; docs/crawl-server.md, "Webhooks").
	WebhookConfig *WebhookConfig `json:"webhook_config,omitempty"`
	// CacheMode is Crawl4AI v0.4's cache_mode: enabled (default),
	// disabled, read_only, write_only, bypass.
	CacheMode string `json:"cache_mode,omitempty"`
	// Magic and WordCountThreshold are v0.4's top-level forms of
	// crawler_params.magic and extra.word_count_threshold.
	Magic              bool `json:"magic,omitempty"`
	WordCountThreshold *int `json:"word_count_threshold,omitempty"`

	// urlList is set when urls came as a JSON array.
	urlList bool
}

// WebhookConfig is a task's webhook: Crawl4AI's field names, and a
// secret of ours that signs each delivery (x-svc-signature).
type WebhookConfig struct {
	URL           string            `json:"webhook_url"`
	DataInPayload bool              `json:"webhook_data_in_payload,omitempty"`
	Headers       map[string]string `json:"webhook_headers,omitempty"`
	Secret        string            `json:"webhook_secret,omitempty"`
}

// ExtractionConfig selects an extraction strategy.
type ExtractionConfig struct {
	Type   string          `json:"type"`
	Params json.RawMessage `json:"params,omitempty"`
}

// CrawlerParams are docs/spec/crawl-server.md §2.2's browser and behaviour settings.
type CrawlerParams struct {
	Headless              *bool             `json:"headless,omitempty"`
	BrowserType           string            `json:"browser_type,omitempty"`
	UserAgent             string            `json:"user_agent,omitempty"`
	Proxy                 string            `json:"proxy,omitempty"`
	Headers               map[string]string `json:"headers,omitempty"`
	PageTimeout           *float64          `json:"page_timeout,omitempty"`
	SemaphoreCount        *int              `json:"semaphore_count,omitempty"`
	Verbose               bool              `json:"verbose,omitempty"`
	LogConsole            bool              `json:"log_console,omitempty"`
	SimulateUser          bool              `json:"simulate_user,omitempty"`
	Magic                 bool              `json:"magic,omitempty"`
	OverrideNavigator     bool              `json:"override_navigator,omitempty"`
	SessionID             string            `json:"session_id,omitempty"`
	UserDataDir           string            `json:"user_data_dir,omitempty"`
	UseManagedBrowser     bool              `json:"use_managed_browser,omitempty"`
	RemoveOverlayElements bool              `json:"remove_overlay_elements,omitempty"`
	ScreenshotWaitFor     string            `json:"screenshot_wait_for,omitempty"`
}

// Extra are docs/spec/crawl-server.md §2.3's arguments of the crawler's run call.
type Extra struct {
	WordCountThreshold    *int     `json:"word_count_threshold,omitempty"`
	OnlyText              bool     `json:"only_text,omitempty"`
	BypassCache           bool     `json:"bypass_cache,omitempty"`
	ProcessIframes        bool     `json:"process_iframes,omitempty"`
	DelayBeforeReturnHTML *float64 `json:"delay_before_return_html,omitempty"`
}

// BrowserConfig is the browser-level configuration; a non-default one is
// served by a hot or cold pool browser rather than the permanent one.
type BrowserConfig struct {
	Viewport    *Viewport `json:"viewport,omitempty"`
	UserAgent   string    `json:"user_agent,omitempty"`
	BrowserType string    `json:"browser_type,omitempty"`
	Headless    *bool     `json:"headless,omitempty"`
}

// Viewport is a window size in CSS pixels.
type Viewport struct {
	Width  int `json:"width"`
	Height int `json:"height"`
}

// stringOrList decodes a JSON string or array of strings.
type stringOrList []string

func (s *stringOrList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = stringOrList{one}
		return nil
	}
	if bytes.Equal(b, []byte("null")) {
		*s = nil
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("want a string or an array of strings")
	}
	*s = many
	return nil
}

// BadRequest is an invalid crawl request: the server answers 400 with
// Message and changes nothing.
type BadRequest struct{ Message string }

func (e *BadRequest) Error() string { return e.Message }

func bad(format string, args ...any) error { return &BadRequest{Message: fmt.Sprintf(format, args...)} }

// plan is a validated request, ready to run.
type plan struct {
	urls      []*url.URL
	priority  int
	ttl       time.Duration
	semaphore int
	// sig is the browser configuration signature: "" for the default
	// configuration (the permanent browser), else a stable text naming
	// what differs (the pool key of a hot or cold browser).
	sig      string
	opts     fetch.BrowserOptions
	header   http.Header
	selector string
	urlList  bool
	onlyText bool
	minWords int
	strategy extract.Strategy
	webhook  *WebhookConfig
	// session is the session_id whose browser context the pages use, or
	// empty for a fresh context per page.
	session string
	// needsBrowser: the request asks for what only a browser does (a
	// script, a wait, a screenshot, a viewport, a delay, its own user
	// agent, proxy or headers); otherwise the page cache and
	// the engine ladder serve it. cacheRead and cacheWrite follow
	// cache_mode and bypass_cache.
	needsBrowser          bool
	cacheRead, cacheWrite bool
}

// decodeRequest parses a request body strictly enough to catch type errors
// and loosely enough that unknown fields (a newer client's) pass.
func decodeRequest(body []byte) (*Request, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, bad("request body is empty: want a JSON object with urls")
	}
	var r Request
	if err := json.Unmarshal(body, &r); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, bad("field %s: want %s, got %s", te.Field, jsonType(te.Type.String()), te.Value)
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, bad("request body is not valid JSON (at byte %d): %v", se.Offset, se)
		}
		return nil, bad("request body: %v", err)
	}
	var probe struct {
		URLs json.RawMessage `json:"urls"`
	}
	if json.Unmarshal(body, &probe) == nil {
		u := bytes.TrimSpace(probe.URLs)
		r.urlList = len(u) > 0 && u[0] == '['
	}
	return &r, nil
}

func jsonType(goType string) string {
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "*int"):
		return "an integer"
	case strings.Contains(goType, "float"):
		return "a number"
	case strings.Contains(goType, "bool"):
		return "true or false"
	case strings.Contains(goType, "string"):
		return "a string"
	case strings.HasPrefix(goType, "map"), strings.Contains(goType, "crawl."):
		return "an object"
	}
	return goType
}

// compile validates r and turns it into a plan. Every error is a
// *BadRequest whose message names the field; the fields are checked in
// the order of the steps below, so a request with several bad fields is
// told about the first.
func (s *Server) compile(r *Request) (*plan, error) {
	p := &plan{priority: DefaultPriority, ttl: s.cfg.DefaultTTL, semaphore: DefaultSemaphore, header: http.Header{}, urlList: r.urlList}
	cp := r.CrawlerParams
	if cp == nil {
		cp = &CrawlerParams{}
	}
	bc := r.BrowserConfig
	if bc == nil {
		bc = &BrowserConfig{}
	}
	if err := s.compileURLs(p, r); err != nil {
		return nil, err
	}
	if err := compileSchedule(p, r); err != nil {
		return nil, err
	}
	if err := checkBrowserKind(cp, bc); err != nil {
		return nil, err
	}
	if err := compileSession(p, r, cp); err != nil {
		return nil, err
	}
	sig, err := s.compileBrowser(p, cp, bc)
	if err != nil {
		return nil, err
	}
	if err := compilePageLimits(p, cp); err != nil {
		return nil, err
	}
	if err := compileScripts(p, r, cp); err != nil {
		return nil, err
	}
	if err := compileExtra(p, r.Extra); err != nil {
		return nil, err
	}
	if err := s.compileOutput(p, r); err != nil {
		return nil, err
	}
	if err := s.compileWebhook(p, r.WebhookConfig); err != nil {
		return nil, err
	}
	if err := compileCache(p, r); err != nil {
		return nil, err
	}
	if err := compileWordCount(p, r); err != nil {
		return nil, err
	}
	p.needsBrowser = p.opts.JS != "" || p.opts.WaitFor != "" || p.opts.Screenshot || p.opts.PDF || p.opts.Delay > 0 || bc.Viewport != nil ||
		len(sig) > 0 || len(p.header) > 0 || p.session != ""
	sort.Strings(sig)
	p.sig = strings.Join(sig, " ")
	return p, nil
}

// compileURLs checks urls (one to MaxURLs, each a URL the server may
// fetch) into p.urls.
func (s *Server) compileURLs(p *plan, r *Request) error {
	if len(r.URLs) == 0 {
		return bad("urls is required: a URL or an array of URLs")
	}
	if len(r.URLs) > MaxURLs {
		return bad("urls has %d entries; at most %d per request", len(r.URLs), MaxURLs)
	}
	for i, raw := range r.URLs {
		u, err := urlpolicy.Validate(strings.TrimSpace(raw), s.cfg.AllowPrivateNetworks)
		if err != nil {
			if len(r.URLs) == 1 {
				return bad("urls: %v", err)
			}
			return bad("urls[%d]: %v", i, err)
		}
		p.urls = append(p.urls, u)
	}
	return nil
}

// compileSchedule checks priority and ttl into p (0 ttl: the default).
func compileSchedule(p *plan, r *Request) error {
	if r.Priority != nil {
		if *r.Priority < MinPriority || *r.Priority > MaxPriority {
			return bad("priority must be between %d and %d, got %d", MinPriority, MaxPriority, *r.Priority)
		}
		p.priority = *r.Priority
	}
	if r.TTL != nil {
		switch {
		case *r.TTL < 0:
			return bad("ttl is in seconds and must not be negative, got %d", *r.TTL)
		case *r.TTL == 0:
		case time.Duration(*r.TTL)*time.Second > MaxTTL:
			return bad("ttl is in seconds and at most %d (30 days), got %d", int(MaxTTL/time.Second), *r.TTL)
		default:
			p.ttl = time.Duration(*r.TTL) * time.Second
		}
	}
	return nil
}

// checkBrowserKind refuses a browser the server does not run: a type
// other than Chromium, or a profile directory of the caller's.
func checkBrowserKind(cp *CrawlerParams, bc *BrowserConfig) error {
	for _, bt := range []struct{ field, v string }{{"crawler_params.browser_type", cp.BrowserType}, {"browser_config.browser_type", bc.BrowserType}} {
		if bt.v != "" && !strings.EqualFold(bt.v, "chromium") {
			return bad("%s %q is not available: this server runs Chromium only (use \"chromium\" or leave it out)", bt.field, bt.v)
		}
	}
	if cp.UserDataDir != "" {
		return bad("crawler_params.user_data_dir is not supported: every page gets a fresh browser context and no profile is kept on the server")
	}
	return nil
}

// compileSession checks session_id (top level or in crawler_params, the
// same if both) into p.session.
func compileSession(p *plan, r *Request, cp *CrawlerParams) error {
	p.session = strings.TrimSpace(r.SessionID)
	if id := strings.TrimSpace(cp.SessionID); id != "" {
		if p.session != "" && p.session != id {
			return bad("session_id %q and crawler_params.session_id %q differ: name one session", p.session, id)
		}
		p.session = id
	}
	if len(p.session) > 256 || strings.IndexFunc(p.session, unicode.IsControl) >= 0 {
		return bad("session_id must be one line of at most 256 characters")
	}
	return nil
}

// compileBrowser checks the browser's user agent, viewport, proxy and
// headers into p, and returns the parts of the browser configuration
// signature they make (those that differ from the default browser's).
func (s *Server) compileBrowser(p *plan, cp *CrawlerParams, bc *BrowserConfig) ([]string, error) {
	var sig []string
	if cp.UseManagedBrowser {
		return nil, bad("crawler_params.use_managed_browser is not supported: the server's own pool manages its browsers")
	}
	ua := bc.UserAgent
	if cp.UserAgent != "" {
		ua = cp.UserAgent
	}
	if ua != "" {
		if len(ua) > 512 || strings.ContainsAny(ua, "\r\n") {
			return nil, bad("user_agent must be one line of at most 512 characters")
		}
		p.opts.UserAgent = ua
		sig = append(sig, "ua="+ua)
	}
	p.opts.Viewport = s.cfg.DefaultViewport
	if vp := bc.Viewport; vp != nil {
		if vp.Width < 100 || vp.Width > 7680 || vp.Height < 100 || vp.Height > 7680 {
			return nil, bad("browser_config.viewport: width and height must be integers from 100 to 7680, got %dx%d", vp.Width, vp.Height)
		}
		p.opts.Viewport = fetch.Viewport{Width: vp.Width, Height: vp.Height}
		if vp.Width != s.cfg.DefaultViewport.Width || vp.Height != s.cfg.DefaultViewport.Height {
			sig = append(sig, fmt.Sprintf("viewport=%dx%d", vp.Width, vp.Height))
		}
	}
	if cp.Proxy != "" {
		pu, err := s.checkProxy(cp.Proxy)
		if err != nil {
			return nil, err
		}
		p.opts.Proxy = pu
		sig = append(sig, "proxy="+redactURL(pu))
	}
	if len(cp.Headers) > 0 {
		for k, v := range cp.Headers {
			if k == "" || strings.ContainsAny(k, " \t\r\n:") || strings.ContainsAny(v, "\r\n") {
				return nil, bad("crawler_params.headers: %q is not a valid header", k)
			}
			p.header.Set(k, v)
		}
	}
	return sig, nil
}

// compilePageLimits checks page_timeout and semaphore_count into p.
func compilePageLimits(p *plan, cp *CrawlerParams) error {
	if cp.PageTimeout != nil {
		ms := *cp.PageTimeout
		if ms <= 0 || time.Duration(ms)*time.Millisecond > maxPageTimeout {
			return bad("crawler_params.page_timeout is in milliseconds, from 1 to %d, got %v", maxPageTimeout.Milliseconds(), ms)
		}
		p.opts.Timeout = time.Duration(ms * float64(time.Millisecond))
	} else {
		p.opts.Timeout = defaultPageTimeout
	}
	if cp.SemaphoreCount != nil {
		if *cp.SemaphoreCount < 1 || *cp.SemaphoreCount > MaxSemaphore {
			return bad("crawler_params.semaphore_count must be from 1 to %d, got %d", MaxSemaphore, *cp.SemaphoreCount)
		}
		p.semaphore = *cp.SemaphoreCount
	}
	return nil
}

// compileScripts joins what the page runs (the overlay remover, js_code,
// the iframe inliner) and what it waits for (wait_for, the screenshot's
// wait) into p.opts.
func compileScripts(p *plan, r *Request, cp *CrawlerParams) error {
	var js []string
	if len(r.JSCode) > MaxJSSnippets {
		return bad("js_code has %d snippets; at most %d", len(r.JSCode), MaxJSSnippets)
	}
	if cp.RemoveOverlayElements {
		js = append(js, removeOverlaysJS)
	}
	for _, c := range r.JSCode {
		if strings.TrimSpace(c) != "" {
			js = append(js, c)
		}
	}
	if r.Extra != nil && r.Extra.ProcessIframes {
		js = append(js, inlineIframesJS)
	}
	p.opts.JS = joinScripts(js)
	waitFor, err := combineWaits(r.WaitFor, cp.ScreenshotWaitFor, r.Screenshot)
	if err != nil {
		return err
	}
	p.opts.WaitFor = waitFor
	p.opts.Screenshot = r.Screenshot
	p.opts.PDF = r.PDF
	return nil
}

// compileExtra checks extra's delay, word count threshold and only_text
// into p.
func compileExtra(p *plan, e *Extra) error {
	if e == nil {
		return nil
	}
	if e.DelayBeforeReturnHTML != nil {
		d := *e.DelayBeforeReturnHTML
		if d < 0 || time.Duration(d*float64(time.Second)) > maxDelay {
			return bad("extra.delay_before_return_html is in seconds, from 0 to %d, got %v", int(maxDelay/time.Second), d)
		}
		p.opts.Delay = time.Duration(d * float64(time.Second))
	}
	if e.WordCountThreshold != nil {
		if *e.WordCountThreshold < 0 || *e.WordCountThreshold > 1000 {
			return bad("extra.word_count_threshold must be from 0 to 1000, got %d", *e.WordCountThreshold)
		}
		p.minWords = *e.WordCountThreshold
	}
	p.onlyText = e.OnlyText
	return nil
}

// compileOutput checks css_selector and extraction_config into p.
func (s *Server) compileOutput(p *plan, r *Request) error {
	if sel := strings.TrimSpace(r.CSSSelector); sel != "" {
		if err := checkSelector(sel); err != nil {
			return bad("css_selector %q: %v", sel, err)
		}
		p.selector = sel
	}
	if ec := r.ExtractionConfig; ec != nil && ec.Type != "" {
		st, err := extract.New(s.cfg.Extract, ec.Type, ec.Params)
		if err != nil {
			return bad("extraction_config: %v", err)
		}
		p.strategy = st
	}
	return nil
}

// compileWebhook checks webhook_config (nil: none) into p.webhook.
func (s *Server) compileWebhook(p *plan, wc *WebhookConfig) error {
	if wc == nil {
		return nil
	}
	if strings.TrimSpace(wc.URL) == "" {
		return bad("webhook_config.webhook_url is required: the URL that receives the POST when the task finishes")
	}
	if len(wc.Secret) > 256 {
		return bad("webhook_config.webhook_secret is longer than 256 characters")
	}
	if err := webhook.Check(&webhook.Delivery{URL: strings.TrimSpace(wc.URL), Header: wc.Headers}, s.cfg.AllowPrivateNetworks); err != nil {
		return bad("webhook_config: %v", err)
	}
	p.webhook = wc
	return nil
}

// compileCache checks cache_mode (and extra.bypass_cache) into p's cache
// reads and writes.
func compileCache(p *plan, r *Request) error {
	mode, ok := cacheModes[strings.ToLower(strings.TrimSpace(r.CacheMode))]
	if !ok {
		return bad("cache_mode %q: want enabled, disabled, read_only, write_only or bypass", r.CacheMode)
	}
	p.cacheRead, p.cacheWrite = mode.read, mode.write
	if r.Extra != nil && r.Extra.BypassCache {
		p.cacheRead = false
	}
	return nil
}

// compileWordCount takes v0.4's top-level word_count_threshold when extra
// has none.
func compileWordCount(p *plan, r *Request) error {
	if r.WordCountThreshold != nil && (r.Extra == nil || r.Extra.WordCountThreshold == nil) {
		if *r.WordCountThreshold < 0 || *r.WordCountThreshold > 1000 {
			return bad("word_count_threshold must be from 0 to 1000, got %d", *r.WordCountThreshold)
		}
		p.minWords = *r.WordCountThreshold
	}
	return nil
}

// DefaultViewport is the permanent browser's window unless
// Config.DefaultViewport says otherwise: Crawl4AI's own default (1080×600),
// so the 1280×720 its demos ask for is a non-default configuration, served
// by a cold browser that turns hot, as there. A request asking for exactly
// the default size still counts as the default configuration.
var DefaultViewport = fetch.Viewport{Width: 1080, Height: 600}

// checkProxy accepts a caller's proxy URL: http, https or socks5, with a
// host that the server may reach (public, unless private networks are
// allowed: a proxy on the operator's LAN is the operator's choice).
func (s *Server) checkProxy(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return "", bad("crawler_params.proxy must be a URL such as http://user:pass@host:port")
	}
	switch u.Scheme {
	case "http", "https", "socks5":
	default:
		return "", bad("crawler_params.proxy: scheme %q is not supported (http, https or socks5)", u.Scheme)
	}
	check := *u
	check.Scheme = "http"
	check.User = nil
	if _, err := urlpolicy.Validate(check.String(), s.cfg.AllowPrivateNetworks); err != nil {
		return "", bad("crawler_params.proxy: %v", err)
	}
	return u.String(), nil
}

// joinScripts runs the snippets one after the other in one async
// function (which the engine calls): each is its own async function, so a snippet's `return` or `await` stays
// inside it and one snippet's variables cannot clash with the next one's.
func joinScripts(js []string) string {
	if len(js) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("async () => {\n")
	for _, c := range js {
		b.WriteString("await (async () => {\n")
		b.WriteString(c)
		b.WriteString("\n})();\n")
	}
	b.WriteString("}")
	return b.String()
}

// combineWaits merges wait_for with screenshot_wait_for (which only
// matters when a screenshot is taken) into one condition.
func combineWaits(waitFor, shotWait string, screenshot bool) (string, error) {
	var conds []string
	for _, w := range []struct{ field, v string }{{"wait_for", waitFor}, {"crawler_params.screenshot_wait_for", shotWait}} {
		v := strings.TrimSpace(w.v)
		if v == "" || (w.field != "wait_for" && !screenshot) {
			continue
		}
		if len(v) > 10000 {
			return "", bad("%s is longer than 10000 characters", w.field)
		}
		conds = append(conds, v)
	}
	switch len(conds) {
	case 0:
		return "", nil
	case 1:
		if !strings.HasPrefix(conds[0], "js:") {
			if err := checkSelector(conds[0]); err != nil {
				return "", bad("wait_for %q: %v", conds[0], err)
			}
		}
		return conds[0], nil
	}
	var parts []string
	for _, c := range conds {
		if js, ok := strings.CutPrefix(c, "js:"); ok {
			parts = append(parts, "(() => { const f = ("+js+"); return typeof f === 'function' ? f() : f; })()")
		} else {
			if err := checkSelector(c); err != nil {
				return "", bad("wait condition %q: %v", c, err)
			}
			parts = append(parts, "!!document.querySelector("+strconv.Quote(c)+")")
		}
	}
	return "js:() => " + strings.Join(parts, " && "), nil
}

// removeOverlaysJS removes what covers the page: fixed or sticky elements
// above the content (cookie banners, newsletter pop-ups, modals) and the
// scroll locks they put on <body>.
const removeOverlaysJS = `
const vw = window.innerWidth, vh = window.innerHeight;
for (const el of Array.from(document.querySelectorAll('body *'))) {
  const cs = getComputedStyle(el);
  if (cs.position !== 'fixed' && cs.position !== 'sticky') continue;
  const r = el.getBoundingClientRect();
  const z = parseInt(cs.zIndex, 10) || 0;
  const big = r.width * r.height > 0.25 * vw * vh;
  const banner = r.width > 0.8 * vw && (r.top <= 1 || r.bottom >= vh - 1);
  if (z >= 10 || big || banner) el.remove();
}
for (const el of Array.from(document.querySelectorAll('[role=dialog],[aria-modal=true],.modal,.popup,.overlay,#cookie-banner,.cookie-banner'))) el.remove();
document.documentElement.style.overflow = '';
document.body.style.overflow = '';
`

// inlineIframesJS replaces each same-origin iframe by its document's body,
// so its content is part of the captured HTML. A cross-origin frame's
// document cannot be read from the page; it stays as it is.
const inlineIframesJS = `
for (const f of Array.from(document.querySelectorAll('iframe'))) {
  let doc = null;
  try { doc = f.contentDocument; } catch (e) {}
  if (!doc || !doc.body) continue;
  const div = document.createElement('div');
  div.setAttribute('data-trawl-iframe', f.src || '');
  div.innerHTML = doc.body.innerHTML;
  f.replaceWith(div);
}
`

// redactURL drops a URL's password, for the pool key, logs and answers.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparsable>"
	}
	if u.User != nil {
		u.User = url.User("redacted")
	}
	return u.String()
}

// checkSelector reports whether sel is a CSS selector the server can use.
func checkSelector(sel string) error {
	if len(sel) > 2000 {
		return errors.New("longer than 2000 characters")
	}
	_, err := cascadia.ParseGroup(sel)
	return err
}

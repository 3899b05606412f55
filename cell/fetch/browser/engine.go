package browser

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/fetch/guardproxy"
)

// Defaults for EngineConfig.
const (
	// DefaultTimeout is the page deadline when the request sets none.
	DefaultTimeout = 60 * time.Second
	// DefaultLoadWait bounds the wait for the load event once the
	// document has been parsed; a page whose load never fires (a stalled
	// image, an ad) is captured as it is.
	DefaultLoadWait = 10 * time.Second
	// MaxViewport bounds each side of a requested viewport.
	MaxViewport = 8192
)

// Errors of the engine, to be tested with errors.Is. Fetch also returns
// the fetch package's errors (ErrInvalidURL, ErrNotPublic, ErrUnreachable,
// ErrTooLarge, ErrFleetBusy) and the pool's.
var (
	// ErrOptions means the BrowserOptions are not usable: a viewport out
	// of range, a cookie the browser refused, a bad proxy URL. The caller
	// must change the request.
	ErrOptions = errors.New("invalid browser options")
	// ErrWaitFor means the WaitFor condition did not hold before the page
	// deadline, or could not be evaluated (a malformed selector).
	ErrWaitFor = errors.New("wait_for condition not met")
	// ErrScript means the JS option threw, or did not finish before the
	// page deadline.
	ErrScript = errors.New("page script failed")
)

// EngineConfig configures an Engine. The zero value is usable.
type EngineConfig struct {
	// Timeout is the page deadline when BrowserOptions.Timeout is zero.
	// Default DefaultTimeout.
	Timeout time.Duration
	// LoadWait bounds the wait for the load event after
	// DOMContentLoaded. Default DefaultLoadWait.
	LoadWait time.Duration
	// UserAgent is sent when the request names none. Default: the
	// browser's own, with "HeadlessChrome" spelt "Chrome".
	UserAgent string
	// Locale sets Accept-Language and navigator.language. Default "en-US".
	Locale string
	// MaxBodyBytes caps the rendered HTML; over it Fetch fails with
	// fetch.ErrTooLarge. Default fetch.DefaultMaxBodyBytes. What a page's
	// actions return (screenshots, copies of the page, script values) is
	// capped at four times as much, all together.
	MaxBodyBytes int64
	// ElementWait bounds how long an action waits for its element (a
	// wait for a selector, a click, a scroll of an element); it is never
	// more than half the time left before the page deadline. Default
	// DefaultElementWait.
	ElementWait time.Duration
}

// Engine is the browser fetch engine: it renders pages in a Pool's
// browsers. It is safe for concurrent use; closing the pool stops it.
type Engine struct {
	pool *Pool
	cfg  EngineConfig
}

// NewEngine returns an engine rendering pages in pool.
func NewEngine(pool *Pool, cfg EngineConfig) *Engine {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.LoadWait <= 0 {
		cfg.LoadWait = DefaultLoadWait
	}
	if cfg.Locale == "" {
		cfg.Locale = "en-US"
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = fetch.DefaultMaxBodyBytes
	}
	if cfg.ElementWait <= 0 {
		cfg.ElementWait = DefaultElementWait
	}
	return &Engine{pool: pool, cfg: cfg}
}

// Fetch renders req.URL in a fresh browser context and returns the DOM as
// it stands after req.Browser's JS, WaitFor and Delay, serialised as HTML
// (Body, always UTF-8 text/html), with the status and headers of the
// document shown (the main frame's last navigation response, after any
// reload or navigation by the page's scripts), the final URL and, when
// asked, a full-page screenshot.
//
// The URL is validated like the HTTP engine's, and every connection the
// page makes (redirects, subresources, fetch/XHR, frames, WebSockets)
// passes the pool's guard; a main document refused by it fails with
// fetch.ErrNotPublic, while refused subresources just fail inside the
// page, as network errors. A main document the upstream proxy could not
// fetch (not answering, refusing the credentials) fails with
// fetch.ErrProxy. A navigation that fails or does not finish in time wraps
// fetch.ErrUnreachable (and context.DeadlineExceeded); a JS option that
// throws or hangs wraps ErrScript; a WaitFor that never holds wraps
// ErrWaitFor; an action that fails is an *ActionError (ErrAction). When
// ctx ends first the error wraps ctx.Err() alone. With no
// page free within the pool's AcquireTimeout it fails with
// fetch.ErrFleetBusy.
func (e *Engine) Fetch(ctx context.Context, req *fetch.Request) (*fetch.Response, error) {
	return e.fetch(ctx, nil, req)
}

// fetch renders req in a fresh context, or in sess's when not nil.
func (e *Engine) fetch(ctx context.Context, sess *Session, req *fetch.Request) (*fetch.Response, error) {
	if req == nil {
		return nil, fmt.Errorf("%w: no request", fetch.ErrInvalidURL)
	}
	u, err := e.pool.guard.CheckURL(req.URL)
	if err != nil {
		return nil, err
	}
	var o fetch.BrowserOptions
	if req.Browser != nil {
		o = *req.Browser
	}
	spec, err := e.spec(u, req.Header, &o)
	if err != nil {
		return nil, fmt.Errorf("browser fetch %s: %w", u, err)
	}
	var resp *fetch.Response
	err = e.pool.run(ctx, sess, spec, func(pctx context.Context, s *session) error {
		r, err := e.render(ctx, pctx, s, u, &o)
		resp = r
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("browser fetch %s: %w", u, err)
	}
	return resp, nil
}

// hopHeaders are request headers the browser owns.
var hopHeaders = map[string]bool{
	"Accept-Encoding": true, "Connection": true, "Content-Length": true, "Host": true,
	"Keep-Alive": true, "Proxy-Authorization": true, "Proxy-Connection": true, "Te": true,
	"Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "User-Agent": true,
}

// spec turns the request into the page's context options.
func (e *Engine) spec(u *url.URL, h http.Header, o *fetch.BrowserOptions) (*pageSpec, error) {
	if err := checkActions(o.Actions); err != nil {
		return nil, err
	}
	timeout := o.Timeout
	if timeout <= 0 {
		// The actions' pauses are the caller's: on top of the page's
		// own time.
		timeout = e.cfg.Timeout + actionWaits(o.Actions)
	}
	if o.Delay < 0 || o.Delay >= timeout {
		return nil, fmt.Errorf("%w: delay %s is not within the page timeout %s", ErrOptions, o.Delay, timeout)
	}
	ua := o.UserAgent
	if ua == "" {
		ua = h.Get("User-Agent")
	}
	if ua == "" {
		ua = e.cfg.UserAgent
	}
	if ua == "" {
		e.pool.mu.Lock()
		ua = e.pool.ua
		e.pool.mu.Unlock()
	}
	opts := playwright.BrowserNewContextOptions{
		UserAgent: playwright.String(ua),
		Locale:    playwright.String(e.cfg.Locale),
		// Our waits and scripts must work on pages whose CSP forbids eval.
		BypassCSP:       playwright.Bool(true),
		AcceptDownloads: playwright.Bool(false),
		ServiceWorkers:  playwright.ServiceWorkerPolicyBlock,
	}
	if v := o.Viewport; v != (fetch.Viewport{}) {
		if v.Width < 1 || v.Height < 1 || v.Width > MaxViewport || v.Height > MaxViewport {
			return nil, fmt.Errorf("%w: viewport %dx%d is not within 1x1 and %dx%d", ErrOptions, v.Width, v.Height, MaxViewport, MaxViewport)
		}
		opts.Viewport = &playwright.Size{Width: v.Width, Height: v.Height}
	}
	if len(h) > 0 {
		extra := make(map[string]string, len(h))
		for k, vs := range h {
			k = http.CanonicalHeaderKey(k)
			if hopHeaders[k] || strings.HasPrefix(k, "Proxy-") || len(vs) == 0 {
				continue
			}
			extra[k] = strings.Join(vs, ", ")
		}
		if len(extra) > 0 {
			opts.ExtraHttpHeaders = extra
		}
	}
	spec := &pageSpec{timeout: timeout, options: opts}
	if o.Proxy != "" {
		if _, err := guardproxy.ParseUpstream(o.Proxy); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrOptions, err)
		}
		spec.upstream = o.Proxy
	}
	for _, c := range o.Cookies {
		if c.Name == "" {
			return nil, fmt.Errorf("%w: a cookie has no name", ErrOptions)
		}
		oc := playwright.OptionalCookie{Name: c.Name, Value: c.Value}
		path := c.Path
		if path == "" {
			path = "/"
		}
		if c.Domain == "" {
			// Host-only, for the page's own host.
			cu := url.URL{Scheme: u.Scheme, Host: u.Host, Path: path}
			oc.URL = playwright.String(cu.String())
		} else {
			oc.Domain = playwright.String(c.Domain)
			oc.Path = playwright.String(path)
		}
		spec.cookies = append(spec.cookies, oc)
	}
	return spec, nil
}

// render loads the page and captures it. ctx is the caller's, pctx ends at
// the page deadline.
func (e *Engine) render(ctx, pctx context.Context, s *session, u *url.URL, o *fetch.BrowserOptions) (*fetch.Response, error) {
	page := s.page

	// The main frame's latest navigation, to tell why a navigation failed:
	// the proxy knows whether it refused the target (the guard), could not
	// use the upstream, or could not reach the site.
	// And its latest response: a page's script may reload or navigate
	// (a challenge that sets a cookie and reloads answers 503, then 200),
	// and the status and headers reported are the final document's.
	var navMu sync.Mutex
	lastNav := u.String()
	var lastDoc playwright.Response
	page.OnRequest(func(r playwright.Request) {
		if r.IsNavigationRequest() && isMainFrame(r) {
			navMu.Lock()
			lastNav = r.URL()
			navMu.Unlock()
		}
	})
	// Events arrive in the driver's order on one goroutine, before the
	// answers of later calls: when the new document's content or WaitFor
	// is seen, its response has been recorded.
	page.OnResponse(func(r playwright.Response) {
		req := r.Request()
		if !req.IsNavigationRequest() || !isMainFrame(req) || !commits(r.Status()) {
			return
		}
		navMu.Lock()
		lastDoc = r
		navMu.Unlock()
	})
	why := func() error {
		navMu.Lock()
		defer navMu.Unlock()
		return s.route.Failure(lastNav)
	}

	main, err := page.Goto(u.String(), playwright.PageGotoOptions{
		WaitUntil: playwright.WaitUntilStateDomcontentloaded,
		Timeout:   playwright.Float(msUntil(pctx)),
	})
	if err != nil {
		if cause := why(); cause != nil && pctx.Err() == nil {
			return nil, fmt.Errorf("navigate: %w", cause)
		}
		return nil, e.failed(ctx, pctx, "navigate", fetch.ErrUnreachable, err)
	}
	if main == nil {
		return nil, fmt.Errorf("%w: navigation gave no document", fetch.ErrUnreachable)
	}

	// Give the load event a bounded chance; a page that never finishes
	// loading is captured as it is.
	loadWait := min(e.cfg.LoadWait, time.Until(deadline(pctx))/2)
	if loadWait > 0 {
		err := page.WaitForLoadState(playwright.PageWaitForLoadStateOptions{
			State:   playwright.LoadStateLoad,
			Timeout: playwright.Float(float64(max(loadWait.Milliseconds(), 1))),
		})
		if err != nil && !errors.Is(err, playwright.ErrTimeout) {
			return nil, e.failed(ctx, pctx, "load", fetch.ErrUnreachable, err)
		}
	}

	if o.JS != "" {
		if err := runScript(page, o.JS); err != nil {
			return nil, e.failed(ctx, pctx, "js", ErrScript, err)
		}
	}
	if o.WaitFor != "" {
		if err := waitFor(pctx, page, o.WaitFor); err != nil {
			return nil, e.failed(ctx, pctx, "wait_for", ErrWaitFor, err)
		}
	}
	if o.Delay > 0 {
		t := time.NewTimer(o.Delay)
		select {
		case <-t.C:
		case <-pctx.Done():
			t.Stop()
			return nil, e.failed(ctx, pctx, "delay", fetch.ErrUnreachable, pctx.Err())
		}
	}

	var acts *fetch.ActionResults
	if len(o.Actions) > 0 {
		if acts, err = e.runActions(ctx, pctx, page, o.Actions); err != nil {
			return nil, err
		}
	}

	html, err := capture(pctx, page)
	if err != nil {
		return nil, e.failed(ctx, pctx, "capture", fetch.ErrUnreachable, err)
	}
	if int64(len(html)) > e.cfg.MaxBodyBytes {
		return nil, fmt.Errorf("%w: rendered page of %d bytes over %d", fetch.ErrTooLarge, len(html), e.cfg.MaxBodyBytes)
	}
	var shot []byte
	if o.Screenshot {
		shot, err = page.Screenshot(playwright.PageScreenshotOptions{
			FullPage: playwright.Bool(true),
			Type:     playwright.ScreenshotTypePng,
			Timeout:  playwright.Float(msUntil(pctx)),
		})
		if err != nil {
			return nil, e.failed(ctx, pctx, "screenshot", fetch.ErrUnreachable, err)
		}
	}
	var pdf []byte
	if o.PDF {
		pdf, err = page.PDF(playwright.PagePdfOptions{PrintBackground: playwright.Bool(true)})
		if err != nil {
			return nil, e.failed(ctx, pctx, "pdf", fetch.ErrUnreachable, err)
		}
	}
	navMu.Lock()
	if lastDoc != nil {
		main = lastDoc
	}
	navMu.Unlock()
	header := make(http.Header)
	if hs, err := main.HeadersArray(); err == nil {
		for _, h := range hs {
			header.Add(h.Name, h.Value)
		}
	} else if pctx.Err() != nil {
		return nil, e.failed(ctx, pctx, "capture", fetch.ErrUnreachable, err)
	}
	// Body is the serialised DOM, not the bytes on the wire.
	header.Del("Content-Encoding")
	header.Del("Content-Length")
	redirects := 0
	for r := main.Request().RedirectedFrom(); r != nil; r = r.RedirectedFrom() {
		redirects++
	}
	resp := &fetch.Response{
		URL:         page.URL(),
		Status:      main.Status(),
		Header:      header,
		Body:        []byte(html),
		ContentType: "text/html",
		Charset:     "utf-8",
		Engine:      "browser",
		Redirects:   redirects,
		Screenshot:  shot,
		PDF:         pdf,
		Actions:     acts,
	}
	if err := e.document(page, resp); err != nil {
		return nil, e.failed(ctx, pctx, "capture", fetch.ErrUnreachable, err)
	}
	return resp, nil
}

// document makes resp the document's own bytes when the page shows a
// PDF: the DOM is then Chromium's PDF viewer, which holds none of its
// text, and the viewer stands in for the bytes of the response too. The
// page asks for them again, with fetch() from the page itself, so the
// request carries the page's cookies and headers and goes through the
// guard like any other.
func (e *Engine) document(page playwright.Page, resp *fetch.Response) error {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "application/pdf" {
		return nil
	}
	out, err := page.Evaluate(fetchDocument, e.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	m, _ := out.(map[string]any)
	if n, ok := m["tooLarge"]; ok {
		return fmt.Errorf("%w: a PDF of %v bytes over %d", fetch.ErrTooLarge, n, e.cfg.MaxBodyBytes)
	}
	b64, _ := m["b64"].(string)
	body, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return fmt.Errorf("the PDF's bytes: %w", err)
	}
	resp.Body, resp.ContentType, resp.Charset = body, mt, ""
	return nil
}

// fetchDocument reads the page's own URL again and hands back its bytes
// in base64, or their length when over max.
const fetchDocument = `async (max) => {
  const r = await fetch(location.href, { credentials: "include" });
  const b = new Uint8Array(await r.arrayBuffer());
  if (b.length > max) return { tooLarge: b.length };
  let s = "";
  for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode.apply(null, b.subarray(i, i + 0x8000));
  return { b64: btoa(s) };
}`

// capture serialises the DOM. A page caught navigating (a script's reload
// or redirect under way) cannot be read; the capture then waits for the
// new document and tries again, a few times, within the page deadline.
func capture(pctx context.Context, page playwright.Page) (string, error) {
	for try := 0; ; try++ {
		html, err := page.Content()
		if err == nil || try == 4 || !navigatingRE.MatchString(err.Error()) || pctx.Err() != nil {
			return html, err
		}
		wait := min(5*time.Second, time.Until(deadline(pctx))/2)
		if wait <= 0 {
			return html, err
		}
		// Until the new document commits the old one's load state
		// stands: pause a little first.
		t := time.NewTimer(time.Duration(try+1) * 100 * time.Millisecond)
		select {
		case <-t.C:
		case <-pctx.Done():
			t.Stop()
			return html, err
		}
		page.WaitForLoadState(playwright.PageWaitForLoadStateOptions{
			State:   playwright.LoadStateDomcontentloaded,
			Timeout: playwright.Float(float64(max(wait.Milliseconds(), 1))),
		})
	}
}

// navigatingRE matches playwright's refusal to read a page mid-navigation.
var navigatingRE = regexp.MustCompile(`(?i)page is navigating`)

// isMainFrame reports whether r is the top frame's.
func isMainFrame(r playwright.Request) bool {
	f := r.Frame()
	return f != nil && f.ParentFrame() == nil
}

// commits reports whether a navigation response of this status replaces
// the document: redirects lead to another response, and 204 and 205 leave
// the page as it was.
func commits(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect,
		http.StatusPermanentRedirect, http.StatusNoContent, http.StatusResetContent:
		return false
	}
	return true
}

// failed classifies an error of one step of rendering: the caller gone
// (ctx.Err alone), the page deadline passed (kind and
// context.DeadlineExceeded), or the step's own failure (kind and the
// browser's message).
func (e *Engine) failed(ctx, pctx context.Context, step string, kind, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", step, ctx.Err())
	case pctx.Err() != nil || passed(pctx):
		return fmt.Errorf("%s: %w: page deadline passed: %w", step, kind, context.DeadlineExceeded)
	}
	return fmt.Errorf("%s: %w: %w", step, kind, trim(err))
}

// passed reports whether ctx's deadline is past by the clock: on a
// loaded machine the browser's timeout (set to the deadline) can answer
// before the context's own timer has run (CI: TestWaitForFailures).
func passed(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

func deadline(ctx context.Context) time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return dl
	}
	return time.Now().Add(DefaultTimeout)
}

// looksLikeFunction reports whether src is a function expression, which
// playwright calls rather than evaluates.
func looksLikeFunction(src string) bool {
	return functionRE.MatchString(src)
}

var functionRE = regexp.MustCompile(`^\s*(async\s+)?(function\b|\([^()]*\)\s*=>|[A-Za-z_$][\w$]*\s*=>)`)

// isSyntaxError reports whether the page could not parse a script.
func isSyntaxError(err error) bool {
	return err != nil && strings.Contains(err.Error(), "SyntaxError")
}

// runScript runs the JS option: an expression or statements (evaluated,
// promises awaited), a function (called), or a function body with return
// or await at its top level (wrapped in an async function). Its result is
// dropped. A script that never settles is ended by the page deadline's
// watchdog, which closes the context.
func runScript(page playwright.Page, src string) error {
	_, err := page.Evaluate(src)
	if isSyntaxError(err) && !looksLikeFunction(src) {
		_, err = page.Evaluate("async () => {\n" + src + "\n}")
	}
	return err
}

// cssPredicate checks a CSS selector; an invalid selector throws, which
// fails the wait at once instead of at the deadline.
const cssPredicate = `sel => document.querySelector(sel) !== null`

// waitFor waits, checking on every animation frame, until cond holds:
// "js:" and a JavaScript condition, or a CSS selector.
func waitFor(pctx context.Context, page playwright.Page, cond string) error {
	opts := playwright.PageWaitForFunctionOptions{
		Polling: "raf",
		Timeout: playwright.Float(msUntil(pctx)),
	}
	if src, ok := strings.CutPrefix(cond, "js:"); ok {
		src = strings.TrimSpace(src)
		if src == "" {
			return fmt.Errorf("%w: empty js: condition", ErrOptions)
		}
		_, err := page.WaitForFunction(src, nil, opts)
		if isSyntaxError(err) && !looksLikeFunction(src) {
			opts.Timeout = playwright.Float(msUntil(pctx))
			_, err = page.WaitForFunction("() => {\n"+src+"\n}", nil, opts)
		}
		return err
	}
	_, err := page.WaitForFunction(cssPredicate, strings.TrimSpace(cond), opts)
	return err
}

var _ fetch.Engine = (*Engine)(nil)

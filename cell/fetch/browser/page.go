package browser

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/fetch/guardproxy"
)

// pageSpec describes the browser context a request gets.
type pageSpec struct {
	timeout  time.Duration // the page deadline
	upstream string        // upstream proxy URL, or empty
	options  playwright.BrowserNewContextOptions
	cookies  []playwright.OptionalCookie
}

// session is a page lent to a request, in its own context.
type session struct {
	page  playwright.Page
	route *guardproxy.Route // the context's proxy route: what it refused
}

// run lends fn a fresh page in a fresh context, within spec.timeout. ctx
// passed to fn ends at the page deadline; when it ends the context is
// closed, which ends whatever call fn is blocked in. If the browser dies
// under fn, fn runs once more on another browser. With a Session the page
// is opened in the session's context instead (created by its first
// request), one page of the session at a time, and the deadline closes
// the page rather than the context.
func (p *Pool) run(ctx context.Context, sess *Session, spec *pageSpec, fn func(context.Context, *session) error) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer p.leave()
	if sess != nil {
		if err := sess.lock(ctx); err != nil {
			return err
		}
		defer sess.unlock()
	}
	if err := p.acquireSlot(ctx); err != nil {
		return err
	}
	defer p.slots.Release(1)
	for attempt := 0; ; attempt++ {
		inst, err := p.pick(ctx, sess.browser(p))
		if err != nil {
			return err
		}
		crashed, err := p.runOn(ctx, inst, sess, spec, fn)
		p.release(inst)
		if !crashed {
			return err
		}
		if attempt > 0 || ctx.Err() != nil || p.isClosed() {
			return fmt.Errorf("%w: %w", ErrCrashed, err)
		}
		p.mu.Lock()
		p.st.Retries++
		p.mu.Unlock()
		p.log.Info("retrying a page on another browser", "crashed", inst.id)
	}
}

// enter counts a request in, unless the pool is closed.
func (p *Pool) enter() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.active++
	return nil
}

func (p *Pool) leave() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.active--
	if p.closed && p.active == 0 {
		close(p.idle)
	}
}

func (p *Pool) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// acquireSlot takes one of the pool's page slots, waiting at most
// AcquireTimeout; waiters are served first come, first served.
func (p *Pool) acquireSlot(ctx context.Context) error {
	actx, cancel := context.WithTimeout(ctx, p.cfg.AcquireTimeout)
	defer cancel()
	stop := context.AfterFunc(p.life, cancel) // Close ends the wait
	defer stop()
	if err := p.slots.Acquire(actx, 1); err != nil {
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case p.isClosed():
			return ErrClosed
		}
		p.mu.Lock()
		p.st.FleetBusy++
		p.mu.Unlock()
		return fmt.Errorf("%w: no page free within %s", fetch.ErrFleetBusy, p.cfg.AcquireTimeout)
	}
	if p.isClosed() {
		p.slots.Release(1)
		return ErrClosed
	}
	return nil
}

// pick chooses the serving browser with the fewest pages open, waiting
// for one to start when none can take the page (after a crash). want,
// when not nil, is the browser holding the page's session: it is the one
// chosen (once it has room) as long as it serves.
func (p *Pool) pick(ctx context.Context, want *instance) (*instance, error) {
	p.mu.Lock()
	failures := p.st.LaunchFailures
	p.mu.Unlock()
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrClosed
		}
		var best *instance
		serving := false
		for _, in := range p.current {
			if in == want && !in.dead {
				serving = true
			}
		}
		for _, in := range p.current {
			if serving && in != want {
				continue
			}
			if !in.dead && in.inflight < p.cfg.PagesPerBrowser && (best == nil || in.inflight < best.inflight) {
				best = in
			}
		}
		if best != nil {
			best.inflight++
			p.st.PagesInUse++
			p.mu.Unlock()
			return best, nil
		}
		if p.st.LaunchFailures > failures && p.launchEr != nil {
			err := p.launchEr
			p.mu.Unlock()
			return nil, fmt.Errorf("no browser: %w", err)
		}
		wait := p.changed
		p.mu.Unlock()
		p.poke()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// release returns a page to the pool and decides whether its browser is
// due for recycling or, drained, for closing.
func (p *Pool) release(inst *instance) {
	p.mu.Lock()
	inst.inflight--
	inst.served++
	p.st.PagesInUse--
	p.st.PagesServed++
	_, draining := p.draining[inst]
	wake := draining && inst.inflight == 0
	if !draining && !inst.recycle && p.cfg.RecycleAfterPages > 0 && inst.served >= p.cfg.RecycleAfterPages {
		inst.recycle = true
		wake = true
	}
	p.mu.Unlock()
	if wake {
		p.poke()
	}
}

// runOn runs fn on a page of inst. crashed reports that the browser died
// under it, so the request may be retried elsewhere.
func (p *Pool) runOn(ctx context.Context, inst *instance, sess *Session, spec *pageSpec, fn func(context.Context, *session) error) (crashed bool, err error) {
	if sess != nil {
		return p.runInSession(ctx, inst, sess, spec, fn)
	}
	pctx, cancel := context.WithTimeout(ctx, spec.timeout)
	defer cancel()

	rt, err := p.proxy.Open(spec.upstream, true)
	if err != nil {
		return false, err
	}
	defer rt.Close()

	// The watchdog: when the page deadline passes (or the caller gives
	// up) the context is closed, which fails whatever call is pending on
	// it, evaluate included, since playwright has no timeout for those.
	// If even that does not end the request within CloseGrace, the
	// browser is killed.
	// The watchdog and the request's own end both close the context:
	// once (playwright's Close is not safe to call from two goroutines).
	var (
		mu        sync.Mutex
		bctx      playwright.BrowserContext
		closeOnce sync.Once
	)
	closeCtx := func(c playwright.BrowserContext) { closeOnce.Do(func() { c.Close() }) }
	finished := make(chan struct{})
	defer close(finished)
	stop := context.AfterFunc(pctx, func() {
		mu.Lock()
		c := bctx
		mu.Unlock()
		if c != nil {
			go closeCtx(c)
		}
		t := time.NewTimer(p.cfg.CloseGrace)
		defer t.Stop()
		select {
		case <-finished:
		case <-t.C:
			p.kill(inst, "a page outlived its deadline")
		}
	})
	defer stop()

	opts := spec.options
	opts.Proxy = &playwright.Proxy{Server: rt.URL()}
	c, err := inst.browser.NewContext(opts)
	if err != nil {
		return p.pageError(ctx, pctx, inst, "new context", err)
	}
	mu.Lock()
	bctx = c
	mu.Unlock()
	defer p.closeWithin(inst, "a context did not close", func() { closeCtx(c) })
	if crashed, err := p.prepareContext(ctx, pctx, inst, c, spec); err != nil {
		return crashed, err
	}
	page, err := c.NewPage()
	if err != nil {
		return p.pageError(ctx, pctx, inst, "new page", err)
	}
	err = fn(pctx, &session{page: page, route: rt})
	if err == nil {
		return false, nil
	}
	crashed, _ = p.pageError(ctx, pctx, inst, "", err)
	return crashed, err
}

// closeContext closes a page's context, killing the browser if that takes
// longer than CloseGrace.
func (p *Pool) closeContext(inst *instance, c playwright.BrowserContext) {
	p.closeWithin(inst, "a context did not close", func() { c.Close() })
}

// prepareContext gives a new context the page deadline and the request's
// cookies; an error is what the request answers (crashed: the browser
// died).
func (p *Pool) prepareContext(ctx, pctx context.Context, inst *instance, c playwright.BrowserContext, spec *pageSpec) (bool, error) {
	if pctx.Err() != nil {
		return p.pageError(ctx, pctx, inst, "new context", pctx.Err())
	}
	c.SetDefaultTimeout(msUntil(pctx))
	c.SetDefaultNavigationTimeout(msUntil(pctx))
	if len(spec.cookies) > 0 {
		if err := c.AddCookies(spec.cookies); err != nil {
			// The browser's message may quote the cookie: not passed on.
			if crashed, e := p.pageError(ctx, pctx, inst, "set cookies", err); crashed || pctx.Err() != nil {
				return crashed, e
			}
			return false, fmt.Errorf("%w: the browser refused a cookie (check its name, domain and path)", ErrOptions)
		}
	}
	return false, nil
}

// closeWithin runs closeFn, killing the browser (why) if it takes longer
// than CloseGrace; it returns at once if the browser is gone.
func (p *Pool) closeWithin(inst *instance, why string, closeFn func()) {
	done := make(chan struct{})
	go func() {
		closeFn()
		close(done)
	}()
	t := time.NewTimer(p.cfg.CloseGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-inst.gone:
	case <-t.C:
		p.kill(inst, why)
	}
}

// pageError classifies an error from the browser: the caller gone, the
// page deadline passed, or the browser dead (crashed true).
func (p *Pool) pageError(ctx, pctx context.Context, inst *instance, op string, err error) (crashed bool, _ error) {
	wrap := func(e error) error {
		if op == "" {
			return e
		}
		return fmt.Errorf("%s: %w", op, e)
	}
	switch {
	case ctx.Err() != nil:
		return false, wrap(ctx.Err())
	case pctx.Err() != nil:
		return false, wrap(fmt.Errorf("%w: page deadline passed", context.DeadlineExceeded))
	}
	if p.browserDied(inst, err) {
		return true, wrap(fmt.Errorf("%w: %w", ErrCrashed, trim(err)))
	}
	return false, wrap(trim(err))
}

// browserDied reports whether inst died, waiting briefly for the news
// when err looks like it: the error of a call can arrive before the
// disconnect event.
func (p *Pool) browserDied(inst *instance, err error) bool {
	p.mu.Lock()
	dead := inst.dead
	p.mu.Unlock()
	if dead {
		return true
	}
	if !errors.Is(err, playwright.ErrTargetClosed) && !closedRE.MatchString(err.Error()) {
		return false
	}
	// A call cut by the driver's death ("Connection closed") can arrive
	// long before the maintenance goroutine has handled it (every browser
	// on the driver marked dead) on a loaded machine: give it longer.
	wait := 2 * time.Second
	p.mu.Lock()
	d := p.drv
	p.mu.Unlock()
	// "Connection closed" is the driver's death itself; a shared driver
	// may already have been replaced by the time the error arrives, so the
	// old one's exit is not the test.
	if d == nil || d.exited() || strings.Contains(strings.ToLower(err.Error()), "connection closed") {
		wait = 15 * time.Second
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-inst.gone:
	case <-t.C:
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return inst.dead
}

// closedRE matches playwright's words for a browser gone under a call.
// "Connection closed" is a call pending when the driver died.
var closedRE = regexp.MustCompile(`(?i)target (page, context or browser )?(has been )?closed|browser has (been closed|disconnected)|connection closed`)

// msUntil is the time left before ctx's deadline in milliseconds, for
// playwright's timeout options; at least 1, since 0 means none.
func msUntil(ctx context.Context) float64 {
	dl, ok := ctx.Deadline()
	if !ok {
		return float64(DefaultTimeout.Milliseconds())
	}
	// Rounded up: a browser timeout that fires never comes before the
	// page deadline, so failed reads it as the deadline's.
	return float64(max((time.Until(dl)+time.Millisecond-1)/time.Millisecond, 1))
}

// trimmedError keeps the first line of a playwright error: the rest is a
// call log.
type trimmedError struct{ err error }

func (e *trimmedError) Error() string {
	s, _, _ := strings.Cut(e.err.Error(), "\n")
	return strings.TrimSpace(s)
}

func (e *trimmedError) Unwrap() error { return e.err }

func trim(err error) error {
	if err == nil || !strings.Contains(err.Error(), "\n") {
		return err
	}
	return &trimmedError{err}
}

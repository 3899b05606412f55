package browser

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/fetch/guardproxy"
)

// ErrSessionClosed means a request named a Session that was closed.
var ErrSessionClosed = errors.New("browser session is closed")

// Session is a browser context kept between requests, as Crawl4AI's
// session_id keeps one: cookies, localStorage, sessionStorage of the
// context and the HTTP cache stay from one request to the next. Each
// request still gets a page of its own in that context (closed after it);
// the session's requests run one at a time, in the order they asked.
//
// The context is created by the session's first request, with that
// request's user agent, viewport, headers and proxy; later requests use
// it as it is (their own cookies are added to it). It lives in one
// browser of the pool: when that browser dies, is recycled or the pool
// closes, the context goes with it and the session's next request starts
// a new one, empty. A page deadline closes the page, not the context. Close
// the session when done with it; it is safe for concurrent use.
type Session struct {
	eng  *Engine
	turn chan struct{} // held by the request running in the session

	mu     sync.Mutex
	inst   *instance // the browser holding ctx
	ctx    playwright.BrowserContext
	route  *guardproxy.Route // ctx's proxy route
	closed bool
}

// NewSession returns a session rendering in e's pool. It holds nothing
// until its first request.
func (e *Engine) NewSession() *Session {
	return &Session{eng: e, turn: make(chan struct{}, 1)}
}

// Fetch renders req as Engine.Fetch does, in the session's context.
func (s *Session) Fetch(ctx context.Context, req *fetch.Request) (*fetch.Response, error) {
	return s.eng.fetch(ctx, s, req)
}

// Close closes the session's context (waiting at most the pool's
// CloseGrace, else the browser is killed) and its proxy route. A request
// running in it fails.
func (s *Session) Close() error {
	s.mu.Lock()
	s.closed = true
	inst, c, rt := s.inst, s.ctx, s.route
	s.inst, s.ctx, s.route = nil, nil, nil
	s.mu.Unlock()
	if c != nil {
		s.eng.pool.closeContext(inst, c)
	}
	if rt != nil {
		rt.Close()
	}
	return nil
}

// lock waits for the session's turn.
func (s *Session) lock(ctx context.Context) error {
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		<-s.turn
		return ErrSessionClosed
	}
	return nil
}

func (s *Session) unlock() { <-s.turn }

// browser is the browser holding the session's context, nil when it has
// none (or s is nil: no session).
func (s *Session) browser(p *Pool) *instance {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inst
}

// forget drops the session's context (closing it, bounded by CloseGrace,
// when its browser still runs) and route: the next request starts anew.
func (s *Session) forget(p *Pool) {
	s.mu.Lock()
	inst, c, rt := s.inst, s.ctx, s.route
	s.inst, s.ctx, s.route = nil, nil, nil
	s.mu.Unlock()
	if c != nil {
		p.closeContext(inst, c)
	}
	if rt != nil {
		rt.Close()
	}
}

// runInSession runs fn on a new page of the session's context in inst,
// creating the context first when the session has none there.
func (p *Pool) runInSession(ctx context.Context, inst *instance, sess *Session, spec *pageSpec, fn func(context.Context, *session) error) (crashed bool, err error) {
	pctx, cancel := context.WithTimeout(ctx, spec.timeout)
	defer cancel()

	sess.mu.Lock()
	same := sess.inst == inst && sess.ctx != nil
	sess.mu.Unlock()
	if !same {
		if sess.browser(p) != nil {
			p.log.Info("browser session: its browser is gone; starting an empty context")
		}
		sess.forget(p)
	}

	// The watchdog, as for a fresh context, but closing the page: the
	// session's context outlives a page that overran its deadline. Before
	// the page exists the pending call is on the context (a new one, or
	// cookies), which is then closed and forgotten.
	var (
		mu   sync.Mutex
		page playwright.Page
		bctx playwright.BrowserContext
	)
	finished := make(chan struct{})
	defer close(finished)
	stop := context.AfterFunc(pctx, func() {
		mu.Lock()
		pg, c := page, bctx
		mu.Unlock()
		switch {
		case pg != nil:
			go pg.Close()
		case c != nil:
			go c.Close()
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

	sess.mu.Lock()
	c, rt := sess.ctx, sess.route
	sess.mu.Unlock()
	if c == nil {
		rt, err = p.proxy.Open(spec.upstream, true)
		if err != nil {
			return false, err
		}
		opts := spec.options
		opts.Proxy = &playwright.Proxy{Server: rt.URL()}
		c, err = inst.browser.NewContext(opts)
		if err != nil {
			rt.Close()
			return p.pageError(ctx, pctx, inst, "new context", err)
		}
		sess.mu.Lock()
		closed := sess.closed
		if !closed {
			sess.inst, sess.ctx, sess.route = inst, c, rt
		}
		sess.mu.Unlock()
		if closed {
			p.closeContext(inst, c)
			rt.Close()
			return false, ErrSessionClosed
		}
	}
	mu.Lock()
	bctx = c
	mu.Unlock()
	defer func() {
		if pctx.Err() != nil {
			mu.Lock()
			open := page != nil
			mu.Unlock()
			if !open { // the watchdog closed the context itself
				sess.forget(p)
			}
		}
		if crashed {
			sess.forget(p)
		}
	}()
	if crashed, err := p.prepareContext(ctx, pctx, inst, c, spec); err != nil {
		return crashed, err
	}
	pg, err := c.NewPage()
	if err != nil {
		return p.pageError(ctx, pctx, inst, "new page", err)
	}
	mu.Lock()
	page = pg
	mu.Unlock()
	defer p.closePage(inst, pg)
	err = fn(pctx, &session{page: pg, route: rt})
	if err == nil {
		return false, nil
	}
	crashed, _ = p.pageError(ctx, pctx, inst, "", err)
	return crashed, err
}

// closePage closes a session's page, killing the browser if that takes
// longer than CloseGrace.
func (p *Pool) closePage(inst *instance, pg playwright.Page) {
	p.closeWithin(inst, "a page did not close", func() { pg.Close() })
}

package crawl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/fetch/browser"
)

// Tiers of the browser pool (docs/spec/crawl-server.md §3).
const (
	TierPermanent = "permanent"
	TierHot       = "hot"
	TierCold      = "cold"
)

// PromoteAfter is the number of uses after which a cold browser becomes hot.
const PromoteAfter = 3

// ErrNoBrowser is returned when a request cannot get a browser (the pool
// is closing, or the permanent browser cannot be started).
var ErrNoBrowser = errors.New("no browser available")

// errUnknownBrowser is a kill or restart naming no pool browser.
var errUnknownBrowser = errors.New("unknown browser_id")

// Engine renders pages for one pool browser. *browser.Engine is one.
type Engine interface {
	Fetch(ctx context.Context, req *fetch.Request) (*fetch.Response, error)
}

// Browser is one running browser behind a pool entry: a browser.Pool of
// one Chromium in production.
type Browser interface {
	Engine
	// MemoryBytes is the browser's memory (PSS of its process tree) as
	// last measured; Measure measures it now.
	MemoryBytes() int64
	Measure() int64
	// NewSession returns a browser context kept between requests (a
	// session_id's), holding nothing until its first page.
	NewSession() Session
	Close() error
}

// Session is a browser context kept between the requests of one
// session_id: cookies and storage stay. *browser.Session is one.
type Session interface {
	Engine
	Close() error
}

// Defaults of the sessions (PoolConfig).
const (
	// DefaultMaxSessions bounds the sessions kept at once; past it the
	// least recently used one is closed.
	DefaultMaxSessions = 100
	// DefaultSessionIdle is how long a session is kept unused: Crawl4AI's
	// session_ttl (1800 s).
	DefaultSessionIdle = 30 * time.Minute
)

// Launcher starts a browser for a configuration signature ("" is the
// default configuration).
type Launcher func(ctx context.Context, id, sig string) (Browser, error)

// entry is one browser of the pool, in a tier.
type entry struct {
	id       string
	tier     string
	sig      string
	created  time.Time
	lastUsed time.Time
	uses     int   // acquisitions, for promotion
	requests int64 // pages served
	inflight int
	slots    chan struct{}
	br       Browser // nil while launching
	ready    chan struct{}
	err      error // launch failure, set before ready closes
	gone     bool  // removed from the pool
}

// sessionEntry is a session_id's browser context, in one pool browser.
type sessionEntry struct {
	id       string
	sig      string // the configuration it was started with
	e        *entry
	s        Session
	lastUsed time.Time
	inUse    int // requests holding it
}

// Pool is the crawl server's 3-tier browser pool: a permanent browser for
// the default configuration, and hot and cold browsers for the others,
// swept by a janitor. It is safe for concurrent use.
type Pool struct {
	launch   Launcher
	pages    int
	maxOther int
	now      func() time.Time
	pressure func() float64 // memory in use, 0 to 1
	log      *slog.Logger
	jlog     func(JanitorEntry)
	// maxSessions bounds sessions; sessionIdle expires them.
	maxSessions int
	sessionIdle time.Duration

	mu        sync.Mutex
	sessions  map[string]*sessionEntry // by session_id
	permanent *entry
	others    map[string]*entry // by sig
	byID      map[string]*entry
	nextID    int
	closed    bool
	// counters for the reuse rate: acquisitions served by a running
	// browser vs all acquisitions.
	acquired, reused         int64
	sweepAcquired, sweepReus int64 // at the previous janitor report
	wg                       sync.WaitGroup
}

// PoolConfig configures a Pool.
type PoolConfig struct {
	Launch Launcher
	// PagesPerBrowser bounds the pages one browser renders at once.
	PagesPerBrowser int
	// MaxBrowsers bounds the hot and cold browsers (the permanent one is
	// not counted). Default 6.
	MaxBrowsers int
	Now         func() time.Time
	// Pressure reports memory use from 0 to 1 (the process tree against
	// its cgroup limit); nil means none.
	Pressure func() float64
	Logger   *slog.Logger
	// Janitor receives every janitor log entry.
	Janitor func(JanitorEntry)
	// MaxSessions bounds the session_id contexts kept (default
	// DefaultMaxSessions); SessionIdle is how long one is kept unused
	// (default DefaultSessionIdle), on Now's clock.
	MaxSessions int
	SessionIdle time.Duration
}

// JanitorEntry is a line of the janitor log.
type JanitorEntry struct {
	Timestamp     Number `json:"timestamp"`
	Message       string `json:"message"`
	Action        string `json:"action"`
	BrowserID     string `json:"browser_id,omitempty"`
	Tier          string `json:"tier,omitempty"`
	MemoryFreedMB Number `json:"memory_freed_mb,omitempty"`
}

// NewPool starts the permanent browser.
func NewPool(ctx context.Context, cfg PoolConfig) (*Pool, error) {
	if cfg.PagesPerBrowser <= 0 {
		cfg.PagesPerBrowser = browser.DefaultPagesPerBrowser
	}
	if cfg.MaxBrowsers <= 0 {
		cfg.MaxBrowsers = 6
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Pressure == nil {
		cfg.Pressure = func() float64 { return 0 }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Janitor == nil {
		cfg.Janitor = func(JanitorEntry) {}
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = DefaultSessionIdle
	}
	p := &Pool{launch: cfg.Launch, pages: cfg.PagesPerBrowser, maxOther: cfg.MaxBrowsers, now: cfg.Now,
		pressure: cfg.Pressure, log: cfg.Logger, jlog: cfg.Janitor, maxSessions: cfg.MaxSessions, sessionIdle: cfg.SessionIdle,
		others: map[string]*entry{}, byID: map[string]*entry{}, sessions: map[string]*sessionEntry{}}
	e := p.newEntryLocked(TierPermanent, "")
	e.id = "permanent"
	p.byID = map[string]*entry{e.id: e}
	p.permanent = e
	if err := p.start(ctx, e); err != nil {
		return nil, fmt.Errorf("start the permanent browser: %w", err)
	}
	return p, nil
}

func (p *Pool) newEntryLocked(tier, sig string) *entry {
	p.nextID++
	now := p.now()
	return &entry{id: "browser-" + strconv.Itoa(p.nextID), tier: tier, sig: sig, created: now, lastUsed: now,
		slots: make(chan struct{}, p.pages), ready: make(chan struct{})}
}

// start launches e's browser and marks it ready (or failed).
func (p *Pool) start(ctx context.Context, e *entry) error {
	br, err := p.launch(ctx, e.id, e.sig)
	if err != nil && ctx.Err() == nil {
		// Once more: a browser that dies as it starts (seen under load)
		// is no reason to fail the requests waiting for it.
		p.log.Warn("crawl pool: browser did not start; starting it again", "browser_id", e.id, "config", e.sig, "err", err)
		br, err = p.launch(ctx, e.id, e.sig)
	}
	p.mu.Lock()
	e.br, e.err = br, err
	closed := p.closed || e.gone
	p.mu.Unlock()
	close(e.ready)
	if err == nil && closed {
		br.Close()
		return ErrNoBrowser
	}
	return err
}

// lease is a page slot on a pool browser, in a session when sess is set.
type lease struct {
	p    *Pool
	e    *entry
	sess *sessionEntry
}

// Engine is the browser of the lease (the session's context in it, for a
// session).
func (l *lease) Engine() Engine {
	if l.sess != nil {
		return l.sess.s
	}
	return l.e.br
}

// BrowserID names the browser of the lease.
func (l *lease) BrowserID() string { return l.e.id }

// Release returns the page slot.
func (l *lease) Release() {
	<-l.e.slots
	l.p.mu.Lock()
	l.e.inflight--
	l.e.requests++
	l.e.lastUsed = l.p.now()
	if l.sess != nil {
		l.sess.inUse--
		l.sess.lastUsed = l.e.lastUsed
	}
	l.p.mu.Unlock()
}

// Use counts one use of the configuration sig by a request (a task or a
// stream, however many pages it has): the first starts a cold browser,
// the PromoteAfter-th makes it hot. Call it once per request, before
// Acquire.
func (p *Pool) Use(sig string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.acquired++
	e, created := p.entryLocked(sig)
	if !created {
		p.reused++
	}
	if created || e == p.permanent {
		return
	}
	e.uses++
	if e.tier == TierCold && e.uses >= PromoteAfter {
		e.tier = TierHot
		p.janitorLocked("promote", e, 0, fmt.Sprintf("promoted cold browser %s to hot after %d uses (%s)", e.id, e.uses, e.sig))
	}
}

// Acquire finds (or starts) the browser for sig and waits for a page slot
// on it, as long as ctx allows.
func (p *Pool) Acquire(ctx context.Context, sig string) (*lease, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrNoBrowser
		}
		e, _ := p.entryLocked(sig)
		l, err := p.acquireLocked(ctx, e)
		if errors.Is(err, errGone) {
			continue
		}
		return l, err
	}
}

// errGone: the browser was removed while a request waited for it.
var errGone = errors.New("browser removed")

// acquireLocked waits for a page slot on e; p.mu is held on entry and
// released. errGone means e was removed meanwhile: ask again.
func (p *Pool) acquireLocked(ctx context.Context, e *entry) (*lease, error) {
	e.inflight++
	e.lastUsed = p.now()
	p.mu.Unlock()
	select {
	case <-e.ready:
	case <-ctx.Done():
		p.unflight(e)
		return nil, ctx.Err()
	}
	if e.err != nil {
		p.mu.Lock()
		e.inflight--
		if !e.gone {
			p.removeLocked(e)
		}
		p.mu.Unlock()
		if e.sig == "" {
			return nil, fmt.Errorf("%w: %v", ErrNoBrowser, e.err)
		}
		return nil, fmt.Errorf("%w: start a browser for %s: %v", ErrNoBrowser, e.sig, e.err)
	}
	select {
	case e.slots <- struct{}{}:
	case <-ctx.Done():
		p.unflight(e)
		return nil, ctx.Err()
	}
	p.mu.Lock()
	if e.gone { // killed while we waited: try again
		e.inflight--
		p.mu.Unlock()
		<-e.slots
		return nil, errGone
	}
	p.mu.Unlock()
	return &lease{p: p, e: e}, nil
}

// AcquireSession is Acquire for a request naming a session_id: the page
// opens in the session's context, kept between requests in the browser
// that served its first one. A session whose browser was removed (killed,
// restarted, idle, evicted), or named with another configuration than it
// was started with, is closed and started afresh. Starting one past
// MaxSessions closes the least recently used idle one.
func (p *Pool) AcquireSession(ctx context.Context, sig, id string) (*lease, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrNoBrowser
		}
		se := p.sessions[id]
		if se != nil && (se.e.gone || se.sig != sig) {
			p.dropSessionLocked(se)
			se = nil
		}
		if se != nil {
			se.inUse++
			l, err := p.acquireLocked(ctx, se.e)
			if err != nil {
				p.mu.Lock()
				se.inUse--
				p.mu.Unlock()
				if errors.Is(err, errGone) {
					continue
				}
				return nil, err
			}
			l.sess = se
			return l, nil
		}
		e, _ := p.entryLocked(sig)
		l, err := p.acquireLocked(ctx, e)
		if errors.Is(err, errGone) {
			continue
		}
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		se = p.sessions[id]
		if se != nil && se.e != e { // started meanwhile by another request, elsewhere
			p.dropSessionLocked(se)
			se = nil
		}
		if se == nil {
			se = p.newSessionLocked(id, sig, e)
		}
		se.inUse++
		p.mu.Unlock()
		l.sess = se
		return l, nil
	}
}

// newSessionLocked keeps a new session on e, closing the least recently
// used idle session first when MaxSessions are kept.
func (p *Pool) newSessionLocked(id, sig string, e *entry) *sessionEntry {
	if len(p.sessions) >= p.maxSessions {
		var victim *sessionEntry
		for _, s := range p.sessions {
			if s.inUse == 0 && (victim == nil || s.lastUsed.Before(victim.lastUsed)) {
				victim = s
			}
		}
		if victim != nil { // else every one is serving a page: over the bound until one ends
			p.dropSessionLocked(victim)
			p.janitorLocked("evict_session", victim.e, 0, fmt.Sprintf("closed session %q (least recently used of %d) to keep a new one", victim.id, p.maxSessions))
		}
	}
	se := &sessionEntry{id: id, sig: sig, e: e, s: e.br.NewSession(), lastUsed: p.now()}
	p.sessions[id] = se
	p.log.Info("crawl pool: session started", "browser_id", e.id, "sessions", len(p.sessions))
	return se
}

// dropSessionLocked forgets a session and closes its context in the
// background (a page still running in it fails).
func (p *Pool) dropSessionLocked(se *sessionEntry) {
	if p.sessions[se.id] == se {
		delete(p.sessions, se.id)
	}
	p.wg.Go(func() { se.s.Close() })
}

func (p *Pool) unflight(e *entry) {
	p.mu.Lock()
	e.inflight--
	p.mu.Unlock()
}

// entryLocked returns the browser serving sig, starting a cold one when
// there is none (created is then true). Above 95% memory, or with every
// pool browser busy and MaxBrowsers reached, the permanent browser serves
// instead: a context of its own still gets the configuration's viewport,
// user agent and proxy, only without a browser of its own.
func (p *Pool) entryLocked(sig string) (e *entry, created bool) {
	if sig == "" {
		return p.permanent, false
	}
	if e, ok := p.others[sig]; ok {
		return e, false
	}
	if pr := p.pressure(); pr >= 0.95 {
		p.janitorLocked("refuse_create", nil, 0, fmt.Sprintf("memory at %.0f%%: not starting a browser for %s; served by the permanent browser", pr*100, sig))
		return p.permanent, false
	}
	if len(p.others) >= p.maxOther && !p.evictLocked() {
		p.janitorLocked("refuse_create", nil, 0, fmt.Sprintf("%d pool browsers busy: not starting one for %s; served by the permanent browser", len(p.others), sig))
		return p.permanent, false
	}
	e = p.newEntryLocked(TierCold, sig)
	e.uses = 1
	p.others[sig] = e
	p.byID[e.id] = e
	p.wg.Go(func() {
		lctx, cancel := context.WithTimeout(context.Background(), browser.DefaultLaunchTimeout)
		defer cancel()
		if err := p.start(lctx, e); err != nil {
			p.log.Warn("crawl pool: browser did not start", "browser_id", e.id, "config", sig, "err", err)
		}
	})
	p.log.Info("crawl pool: cold browser started", "browser_id", e.id, "config", sig)
	return e, true
}

// evictLocked removes the least recently used idle cold (else hot)
// browser to make room; false when every one is busy.
func (p *Pool) evictLocked() bool {
	var victim *entry
	for _, e := range p.others {
		if e.inflight > 0 || !isReady(e) {
			continue
		}
		if victim == nil || (e.tier == TierCold && victim.tier == TierHot) ||
			(e.tier == victim.tier && e.lastUsed.Before(victim.lastUsed)) {
			victim = e
		}
	}
	if victim == nil {
		return false
	}
	mb := mbOf(victim.br.MemoryBytes())
	p.removeLocked(victim)
	p.janitorLocked("evict", victim, mb, fmt.Sprintf("evicted %s browser %s (%s) to make room, %.1f MB freed", victim.tier, victim.id, victim.sig, mb))
	return true
}

func isReady(e *entry) bool {
	select {
	case <-e.ready:
		return e.err == nil
	default:
		return false
	}
}

// removeLocked takes e out of the pool and closes its browser in the
// background (pages in flight on it fail; the crawler retries them).
func (p *Pool) removeLocked(e *entry) {
	e.gone = true
	delete(p.byID, e.id)
	if p.others[e.sig] == e {
		delete(p.others, e.sig)
	}
	for _, se := range p.sessions {
		if se.e == e {
			p.dropSessionLocked(se)
		}
	}
	p.wg.Go(func() {
		<-e.ready
		if e.br != nil {
			e.br.Close()
		}
	})
}

func (p *Pool) janitorLocked(action string, e *entry, mb float64, msg string) {
	je := JanitorEntry{Timestamp: unixSeconds(p.now()), Message: msg, Action: action, MemoryFreedMB: round1(mb)}
	if e != nil {
		je.BrowserID, je.Tier = e.id, e.tier
	}
	p.log.Info("crawl janitor: "+msg, "action", action)
	p.jlog(je)
}

// Idle thresholds of the janitor, by memory pressure.
type thresholds struct{ cold, hot time.Duration }

func idleThresholds(pressure float64) thresholds {
	switch {
	case pressure >= 0.90:
		return thresholds{30 * time.Second, 120 * time.Second}
	case pressure >= 0.80:
		return thresholds{60 * time.Second, 300 * time.Second}
	case pressure >= 0.60:
		return thresholds{120 * time.Second, 600 * time.Second}
	}
	return thresholds{300 * time.Second, 1800 * time.Second}
}

// Sweep is one janitor pass: idle cold and hot browsers past their
// thresholds are removed, and the reuse rate since the last pass is
// logged when there was traffic. force removes every idle non-permanent
// browser (the cleanup action). It returns how many browsers were removed
// and the memory they held.
func (p *Pool) Sweep(force bool) (cleaned int, freedMB float64) {
	pr := p.pressure()
	th := idleThresholds(pr)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, 0
	}
	now := p.now()
	var victims []*entry
	for _, e := range p.others {
		if e.inflight > 0 || !isReady(e) {
			continue
		}
		idle := now.Sub(e.lastUsed)
		limit := th.cold
		if e.tier == TierHot {
			limit = th.hot
		}
		if force || idle >= limit {
			victims = append(victims, e)
		}
	}
	sort.Slice(victims, func(i, j int) bool { return victims[i].id < victims[j].id })
	for _, e := range victims {
		mb := mbOf(e.br.Measure())
		idle := now.Sub(e.lastUsed).Round(time.Second)
		p.removeLocked(e)
		cleaned++
		freedMB += mb
		why := fmt.Sprintf("idle %s", idle)
		if force {
			why = "cleanup requested"
		} else if pr >= 0.60 {
			why += fmt.Sprintf(", memory at %.0f%%", pr*100)
		}
		p.janitorLocked("remove_idle", e, mb, fmt.Sprintf("removed %s browser %s (%s; %s), %.1f MB freed", e.tier, e.id, e.sig, why, mb))
	}
	if !force {
		var expired []*sessionEntry
		for _, se := range p.sessions {
			if se.inUse == 0 && now.Sub(se.lastUsed) >= p.sessionIdle {
				expired = append(expired, se)
			}
		}
		sort.Slice(expired, func(i, j int) bool { return expired[i].id < expired[j].id })
		for _, se := range expired {
			p.dropSessionLocked(se)
			p.janitorLocked("expire_session", se.e, 0, fmt.Sprintf("closed session %q of browser %s, idle %s", se.id, se.e.id, now.Sub(se.lastUsed).Round(time.Second)))
		}
	}
	if n := p.acquired - p.sweepAcquired; n > 0 {
		rate := 100 * float64(p.reused-p.sweepReus) / float64(n)
		p.janitorLocked("reuse_rate", nil, 0, fmt.Sprintf("reuse rate %.1f%% over %d requests; %d hot, %d cold browsers", rate, n, p.countLocked(TierHot), p.countLocked(TierCold)))
		p.sweepAcquired, p.sweepReus = p.acquired, p.reused
	}
	return cleaned, float64(round1(freedMB))
}

func (p *Pool) countLocked(tier string) int {
	n := 0
	for _, e := range p.others {
		if e.tier == tier {
			n++
		}
	}
	return n
}

// Kill removes a browser. Killing the permanent browser starts a new one
// at once: the default configuration is always served.
func (p *Pool) Kill(id string) error {
	p.mu.Lock()
	e, ok := p.byID[id]
	if !ok || p.closed {
		p.mu.Unlock()
		return errUnknownBrowser
	}
	if e == p.permanent {
		p.mu.Unlock()
		return p.Restart(id)
	}
	mb := mbOf(e.br.MemoryBytes())
	p.removeLocked(e)
	p.janitorLocked("kill", e, mb, fmt.Sprintf("killed %s browser %s (%s) on request, %.1f MB freed", e.tier, e.id, e.sig, mb))
	p.mu.Unlock()
	return nil
}

// Restart replaces a browser by a fresh one of the same tier, id and
// configuration. The new browser starts first; pages in flight on the old
// one fail and are retried by the crawler.
func (p *Pool) Restart(id string) error {
	p.mu.Lock()
	old, ok := p.byID[id]
	if !ok || p.closed {
		p.mu.Unlock()
		return errUnknownBrowser
	}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), browser.DefaultLaunchTimeout)
	defer cancel()
	br, err := p.launch(ctx, id, old.sig)
	if err != nil {
		return fmt.Errorf("restart %s: %w", id, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || old.gone {
		br.Close()
		return errUnknownBrowser
	}
	now := p.now()
	e := &entry{id: id, tier: old.tier, sig: old.sig, created: now, lastUsed: now, uses: old.uses,
		slots: make(chan struct{}, p.pages), ready: make(chan struct{}), br: br}
	close(e.ready)
	mb := mbOf(old.br.MemoryBytes())
	p.removeLocked(old)
	p.byID[id] = e
	if old == p.permanent {
		p.permanent = e
	} else {
		p.others[e.sig] = e
	}
	p.janitorLocked("restart", e, mb, fmt.Sprintf("restarted %s browser %s on request, %.1f MB freed", e.tier, id, mb))
	return nil
}

// BrowserInfo describes a pool browser (docs/spec/crawl-server.md §2.5's browsers payload).
type BrowserInfo struct {
	BrowserID    string `json:"browser_id"`
	Tier         string `json:"tier"`
	Config       string `json:"config"`
	RequestCount int64  `json:"request_count"`
	MemoryMB     Number `json:"memory_mb"`
	CreatedAt    Number `json:"created_at"`
	LastUsedAt   Number `json:"last_used_at"`
	IdleSeconds  Number `json:"idle_seconds"`
	PagesInUse   int    `json:"pages_in_use"`
	Uses         int    `json:"uses"`
	Ready        bool   `json:"ready"`
	// Sessions counts the session_id contexts kept in the browser.
	Sessions int `json:"sessions"`
}

// Browsers lists the pool by tier.
func (p *Pool) Browsers() (permanent, hot, cold []BrowserInfo, reuseRate Number) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	info := func(e *entry) BrowserInfo {
		bi := BrowserInfo{BrowserID: e.id, Tier: e.tier, Config: e.sig, RequestCount: e.requests,
			CreatedAt: unixSeconds(e.created), LastUsedAt: unixSeconds(e.lastUsed), PagesInUse: e.inflight, Uses: e.uses, Ready: isReady(e)}
		if bi.Config == "" {
			bi.Config = "default"
		}
		for _, se := range p.sessions {
			if se.e == e {
				bi.Sessions++
			}
		}
		if e.inflight == 0 {
			bi.IdleSeconds = round1(now.Sub(e.lastUsed).Seconds())
		}
		if bi.Ready {
			n := e.br.MemoryBytes()
			if n == 0 { // not measured yet (the pool measures every few seconds)
				n = e.br.Measure()
			}
			bi.MemoryMB = round1(mbOf(n))
		}
		return bi
	}
	permanent = []BrowserInfo{}
	hot, cold = []BrowserInfo{}, []BrowserInfo{}
	if p.permanent != nil && !p.closed {
		permanent = append(permanent, info(p.permanent))
	}
	for _, e := range p.others {
		if e.tier == TierHot {
			hot = append(hot, info(e))
		} else {
			cold = append(cold, info(e))
		}
	}
	byID := func(s []BrowserInfo) { sort.Slice(s, func(i, j int) bool { return s[i].BrowserID < s[j].BrowserID }) }
	byID(hot)
	byID(cold)
	if p.acquired > 0 {
		reuseRate = round1(100 * float64(p.reused) / float64(p.acquired))
	}
	return permanent, hot, cold, reuseRate
}

// PermanentActive reports whether the permanent browser is up.
func (p *Pool) PermanentActive() (bool, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.permanent == nil {
		return false, ""
	}
	return isReady(p.permanent), p.permanent.id
}

// ResetStats clears the reuse counters and the browsers' request counts.
func (p *Pool) ResetStats() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.acquired, p.reused, p.sweepAcquired, p.sweepReus = 0, 0, 0, 0
	for _, e := range p.byID {
		e.requests = 0
	}
}

// Close closes every browser and waits for them to be gone.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	all := make([]*entry, 0, len(p.byID))
	for _, e := range p.byID {
		all = append(all, e)
	}
	for _, e := range all {
		p.removeLocked(e)
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

func mbOf(b int64) float64 { return float64(b) / (1 << 20) }

func round1(f float64) Number { return Number(math.Round(f*10) / 10) }

func unixSeconds(t time.Time) Number { return Number(float64(t.UnixMilli()) / 1000) }

// poolBrowser is a Browser made of a browser.Pool of one Chromium.
type poolBrowser struct {
	*browser.Engine
	pool *browser.Pool
}

func (b *poolBrowser) MemoryBytes() int64 { return b.pool.Stats().PSS }
func (b *poolBrowser) Measure() int64 {
	n, err := b.pool.PSS()
	if err != nil {
		return b.pool.Stats().PSS
	}
	return n
}
func (b *poolBrowser) Close() error { return b.pool.Close() }

func (b *poolBrowser) NewSession() Session { return b.Engine.NewSession() }

// ChromiumLauncher starts each pool browser as a browser.Pool of one
// Chromium with pages page slots, on base.Driver when set (the server
// gives every tier one driver), else on a driver of its own.
func ChromiumLauncher(base browser.Config, eng browser.EngineConfig, pages int, log *slog.Logger) Launcher {
	return func(ctx context.Context, id, sig string) (Browser, error) {
		cfg := base
		cfg.Browsers = 1
		cfg.PagesPerBrowser = pages
		cfg.Logger = log.With("browser_id", id)
		pool, err := browser.NewPool(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return &poolBrowser{Engine: browser.NewEngine(pool, eng), pool: pool}, nil
	}
}

package jobs

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/jobid"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

// Limits of docs/spec/hosted-api.md §8.
const (
	MaxJobURLs = 10000
	PageLines  = 500
)

// Job states (docs/api.md). A job is pending until a worker takes its first
// URL, running while URLs remain, done when every URL has a result (ok or
// error). A retry of its failed URLs makes it running again. A cancelled
// job (Cancel) is cancelled for good, whatever its URLs' states.
const (
	StatusPending   = "pending"
	StatusRunning   = "running"
	StatusDone      = "done"
	StatusCancelled = "cancelled"
	// StatusFailed: the cell stopped the job (Stop).
	StatusFailed = "failed"
)

// URL states. A held URL is a failed one a retry has quoted and the gate
// has not released yet: it is shown (and counted) as failed. A cancelled
// URL was pending when its job was cancelled: it is never fetched.
const (
	urlPending   = "pending"
	urlDone      = "done"
	urlError     = "error"
	urlHeld      = "held"
	urlCancelled = "cancelled"
)

// ErrNoJob is returned for an unknown job id.
var ErrNoJob = errors.New("no such job")

// Errors of Release and HoldRetry.
var (
	// ErrNoHold: the token names no hold of the job, or its hold expired
	// (the held submission was deleted, the held retry undone).
	ErrNoHold = errors.New("no such hold, or it expired")
	// ErrRetryHeld: a retry of the job is already waiting for its release.
	ErrRetryHeld = errors.New("a retry of this job is already waiting to start")
)

// DefaultHoldTTL is how long a held submission or retry waits for the
// gate's release before it expires.
const DefaultHoldTTL = 10 * time.Minute

// Storage layout (store.PrefixJob and store.PrefixJobIndex):
//
//	j/<id>/m          job meta (JSON)
//	j/<id>/u/<seq>    one record per submitted URL, seq = index in the submission
//	j/<id>/p/<seq>    present while the URL waits to be scraped; value = the URL
//	j/<id>/r/<slot>   result line; slots are handed out in completion order and
//	                  a URL keeps its slot forever, so result pages are stable
//	                  and a retried URL replaces its own line. A job with a
//	                  shape (Extra.Shape) gives slots to successful URLs
//	                  only, so its offsets count documents
//	ji/<id>           index of jobs, for start-up
//
// seq and slot are 8-byte big-endian. A URL's completion writes its record,
// its result line and removes its p/ key in one batch, so a crash leaves each
// URL either finished exactly once or still pending.

// Config configures a Manager.
type Config struct {
	// Region and Cell name the owner in every job id
	// (j_<region>.<cell>.<hex>, see ParseJobID). Required, 1 to 16 of [a-z0-9].
	Region string
	Cell   string
	// Concurrency is the number of URLs scraped at once across all jobs.
	// Default 16.
	Concurrency int
	// Attempts is how often a URL is tried when the site does not answer
	// (transient failures); default 2.
	Attempts int
	// Retention is how long a job and its results are kept after creation.
	// Default 7 days.
	Retention time.Duration
	// Busy is how a URL waits out a busy browser fleet (see BusyRetry)
	// before fleet-busy becomes its result; the zero value waits up to
	// DefaultBusyWait. Shutting down ends the wait and leaves the URL
	// pending.
	Busy BusyRetry
	// HoldTTL is how long a held submission or retry (Hold, HoldRetry)
	// waits for its release; default DefaultHoldTTL. An expired held
	// submission is deleted by Sweep; an expired held retry is undone
	// (its URLs are failed again) by Sweep or by the next HoldRetry.
	HoldTTL time.Duration
	// Shaped produces the results of jobs submitted with a shape
	// (HoldWith, Extra.Shape) in place of the scrape function; without it
	// such a submission is refused.
	Shaped ShapedFunc
	// Events, when set, is told of what happens to jobs with a shape,
	// inside the write that records it (Observer).
	Events Observer
	// TakeMark, when set, acts for a cell that is not live on a mark its
	// observer left pending with a payload (marks.go): the region's
	// coordinator calls it (a webhook delivery: this cell sends it).
	TakeMark func(job, key string, mk Mark) error
	// AwaitShare, for a cell that will share its jobs (a clustered one),
	// holds URLs for up to this long after Start until Share is called,
	// rather than fetch them locally meanwhile: a restarted owner would
	// otherwise fetch again the URLs whose outcomes wait for it in the
	// queue. After it, URLs run locally until Share. 0: no wait.
	AwaitShare time.Duration
	Now        func() time.Time
	Logger     *slog.Logger
}

// Extra is what a submission may carry besides its URLs and options
// (HoldWith).
type Extra struct {
	// Shape is opaque to the manager: kept with the job and handed to
	// Config.Shaped for each of its URLs, whose result (a Firecrawl
	// document, say) becomes the URL's line. A job with a shape keeps
	// lines for its successful URLs only: its failed ones are read with
	// Failures.
	Shape json.RawMessage
	// Units is what the submission bills (the URLs the caller counted
	// fetchable), kept so Status can tell what the job has been charged
	// (Status.Charged).
	Units int
	// Concurrency bounds how many of the job's URLs are fetched at once
	// (besides Config.Concurrency across all jobs); 0: no bound of its
	// own.
	Concurrency int
	// Grow makes the job's URL set grow with the links its pages lead to
	// (a site crawl); it needs a shape.
	Grow *Growth
	// Local keeps the job's URLs on the cell that accepted it, even when
	// the cell shares its work with the region (share.go): for a job
	// whose pages depend on one another's timing (a crawl's delay
	// between pages is kept by one cell's clock). It is in the region's
	// log all the same (mirror.go), so a lost disk loses none of it.
	Local bool
	// Placed gives the job an id that names no cell when the manager
	// places ids (ShareConfig.Place) and shares: for a job every route of
	// which any cell answers (routes.AnyCell), so that the gate may send
	// its calls to whichever cell the id is placed on. Submit, Hold and
	// HoldKeyed (POST /scrape/jobs) set it.
	Placed bool
}

// Growth bounds a growing job (Extra.Grow). The links of a page
// (Produced.Links) are added in the write that records the page, each
// URL once (the submitted ones included), so a crash neither loses a
// found URL nor fetches one twice.
type Growth struct {
	// Limit is the most URLs the job holds, the submitted ones included.
	Limit int `json:"limit"`
	// MaxDepth is the deepest link a URL may be found at (a submitted URL
	// is at 0); links of a page at MaxDepth are not followed.
	MaxDepth int `json:"max_depth"`
}

// Manager owns every job of the cell.
type Manager struct {
	cfg    Config
	st     *store.Store
	scrape ScrapeFunc
	work   chan task

	mu   sync.Mutex
	jobs map[string]*job
	// creating is the jobs being submitted: in the region's log before
	// they are in jobs, so a restore running meanwhile must not take
	// them for jobs lost with the store.
	creating map[string]bool
	// keyMu orders submissions with an idempotency key (idempotency.go).
	keyMu sync.Mutex
	// share, once set (Share), sends admitted URLs to the region's work
	// queue rather than to the local workers (share.go).
	share atomic.Pointer[sharing]
	// shared is closed by Share; started is when Start ran (AwaitShare).
	shared  chan struct{}
	started time.Time
	// restored is set once this cell's jobs and the region's log agree
	// (mirror.go); until then, and within Config.AwaitShare, a job id it
	// does not know may be one it has yet to restore.
	restored atomic.Bool
	// drained stops the pullers (SetDrained), ending the pulls under
	// pullCtx.
	drained  atomic.Bool
	drainMu  sync.Mutex
	pullCtx  context.Context
	pullStop context.CancelFunc

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type meta struct {
	ID string `json:"id"`
	// Account owns the job: only its calls see or change it. A job of a
	// version without owners has none and is seen by no one.
	Account   string         `json:"account"`
	CreatedAt time.Time      `json:"created_at"`
	Options   scrape.Options `json:"options"`
	Total     int            `json:"total"`
	// Hold is the token of a submission the gate has not released yet
	// (nothing of the job runs), HeldUntil when it expires; Released the
	// token it was released with (a repeated release is no change).
	Hold      string    `json:"hold,omitempty"`
	HeldUntil time.Time `json:"held_until,omitzero"`
	Released  string    `json:"released,omitempty"`
	// RetryHold is a retry quoted and not yet released: its URLs are held.
	RetryHold     string    `json:"retry_hold,omitempty"`
	RetryUntil    time.Time `json:"retry_until,omitzero"`
	RetryReleased string    `json:"retry_released,omitempty"`
	// IdemKey is the store key of the idempotency key the job was
	// submitted with (idempotency.go), deleted with the job.
	IdemKey string `json:"idem_key,omitempty"`
	// Shape, Units and Concurrency are the submission's Extra;
	// RetryUnits the units of the retries released since.
	Shape       json.RawMessage `json:"shape,omitempty"`
	Units       int             `json:"units,omitempty"`
	Concurrency int             `json:"concurrency,omitempty"`
	RetryUnits  int             `json:"retry_units,omitempty"`
	Grow        *Growth         `json:"grow,omitempty"`
	Local       bool            `json:"local,omitempty"`
	// CancelledAt is when the job was cancelled (Cancel): its pending
	// URLs were cancelled then, and none is fetched after.
	CancelledAt time.Time `json:"cancelled_at,omitzero"`
	// Failure is why the job was stopped rather than cancelled by its
	// owner (Stop); its status is failed.
	Failure string `json:"failure,omitempty"`
	// CreditsMC is what the gate charged for the job's released holds
	// (ReleaseCharged), in thousandths; Uncounted says a release did not
	// say (an older gate).
	CreditsMC int64 `json:"credits_mc,omitempty"`
	Uncounted bool  `json:"uncounted,omitempty"`
}

// addCredits adds what a release was charged (-1: unknown).
func (mt *meta) addCredits(mc int64) {
	if mc < 0 {
		mt.Uncounted = true
		return
	}
	mt.CreditsMC += mc
}

type urlRecord struct {
	URL      string `json:"url"`
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	Error    string `json:"error,omitempty"`
	Message  string `json:"message,omitempty"`
	Slot     int64  `json:"slot"` // -1 until the URL has a result line
	// Status is the HTTP status of a failure; At when the URL finished
	// (or was cancelled).
	Status int       `json:"status,omitempty"`
	At     time.Time `json:"at,omitzero"`
	// Depth is how many links away from a submitted URL this one was
	// found (Extra.Grow).
	Depth int `json:"depth,omitempty"`
}

type job struct {
	meta meta

	mu        sync.Mutex // guards everything below and orders result slots
	pending   int
	done      int
	failed    int
	cancelled int // URLs cancelled
	started   bool
	nextSlot  int64
	inflight  map[uint64]bool
	// dispatching is true while a dispatcher goroutine runs for the job;
	// kick wakes it when URLs are added or re-queued or the last one
	// finishes; rescan tells it URLs were re-queued before its cursor.
	dispatching bool
	rescan      bool
	kick        chan struct{}
	// slot wakes a dispatcher waiting for a place under the job's own
	// concurrency (meta.Concurrency) when one of its URLs finishes.
	slot chan struct{}
	gone bool // swept
	// restoring is true while restore applies the job's outcomes from
	// the region's log: their events are marked Restored.
	restoring bool
	// lastDone is when a URL of the job last finished well (Queue).
	lastDone time.Time
}

// isCancelled reports whether the job was cancelled; j.mu is held.
func (j *job) isCancelled() bool { return !j.meta.CancelledAt.IsZero() }

// wake signals the job's dispatcher, whichever way it waits.
func (j *job) wake() {
	for _, c := range []chan struct{}{j.kick, j.slot} {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

type task struct {
	job *job
	seq uint64
	url string
	// logSeq is the sequence of the outcome's message in the region's
	// log, for an outcome read from there (Event.Key).
	logSeq uint64
}

// total is how many URLs the job holds; j.mu is held.
func (j *job) total() int { return j.pending + j.done + j.failed + j.cancelled }

// NewManager loads the jobs in the store; Start resumes the unfinished ones.
func NewManager(st *store.Store, fn ScrapeFunc, cfg Config) (*Manager, error) {
	if !jobid.ValidName(cfg.Region) || !jobid.ValidName(cfg.Cell) {
		return nil, fmt.Errorf("jobs: region %q and cell %q must be 1 to 16 of [a-z0-9]", cfg.Region, cfg.Cell)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 2
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	if cfg.HoldTTL <= 0 {
		cfg.HoldTTL = DefaultHoldTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Manager{cfg: cfg, st: st, scrape: fn, jobs: map[string]*job{}, creating: map[string]bool{}, work: make(chan task), shared: make(chan struct{})}
	var ids []string
	err := st.Scan([]byte(store.PrefixJobIndex), nil, func(k, _ []byte) (bool, error) {
		ids = append(ids, string(k[len(store.PrefixJobIndex):]))
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		j, err := m.load(id)
		if err != nil {
			return nil, fmt.Errorf("load job %s: %w", id, err)
		}
		m.jobs[id] = j
	}
	return m, nil
}

// load rebuilds a job's counters from its URL records, the source of truth.
func (m *Manager) load(id string) (*job, error) {
	raw, err := m.st.Get(metaKey(id))
	if err != nil {
		return nil, err
	}
	j := newJob(meta{})
	if err := json.Unmarshal(raw, &j.meta); err != nil {
		return nil, err
	}
	err = m.st.Scan(jobKey(id, 'u'), nil, func(_, v []byte) (bool, error) {
		var r urlRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return false, err
		}
		switch r.State {
		case urlPending:
			j.pending++
		case urlDone:
			j.done++
		case urlError, urlHeld:
			j.failed++
		case urlCancelled:
			j.cancelled++
		}
		if r.Slot >= j.nextSlot {
			j.nextSlot = r.Slot + 1
		}
		return true, nil
	})
	j.started = j.done+j.failed > 0
	j.meta.Total = j.total()
	return j, err
}

// Start launches the workers and resumes unfinished jobs. It returns at once;
// Close stops everything.
func (m *Manager) Start() {
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.started = time.Now()
	for range m.cfg.Concurrency {
		m.wg.Add(1)
		go m.worker()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, j := range m.jobs {
		j.mu.Lock()
		if j.pending > 0 && j.isCancelled() {
			// Cancelled with URLs in flight, which the stop cut: they
			// are not fetched again.
			if _, err := m.cancelPendingLocked(j, j.meta, nil); err != nil {
				m.cfg.Logger.Error("cancel the rest of a cancelled job", "job", j.meta.ID, "err", err)
			}
		}
		if j.pending > 0 && j.meta.Hold == "" {
			m.cfg.Logger.Info("resuming job", "job", j.meta.ID, "pending", j.pending, "done", j.done, "error", j.failed)
			m.startDispatchLocked(j)
		}
		j.mu.Unlock()
	}
}

// startDispatchLocked makes sure a dispatcher runs for j; j.mu is held.
func (m *Manager) startDispatchLocked(j *job) {
	if m.ctx == nil {
		return // Start will do it
	}
	if j.dispatching {
		select {
		case j.kick <- struct{}{}:
		default:
		}
		return
	}
	j.dispatching = true
	m.wg.Add(1)
	go m.dispatch(j)
}

// Close stops the workers; URLs in flight stay pending and resume on the next
// start.
func (m *Manager) Close() {
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
}

// Submit durably records a new job of account, starts it and returns its
// id. Every URL is written before Submit returns.
func (m *Manager) Submit(account string, urls []string, opts scrape.Options) (string, error) {
	id, _, err := m.submit(account, urls, opts, false)
	return id, err
}

// Hold durably records a new job of account without starting it, and
// returns its id and the token Release starts it with. A held job shows as
// pending; if it is not released within HoldTTL, Sweep deletes it and
// nothing of it has run.
func (m *Manager) Hold(account string, urls []string, opts scrape.Options) (id, token string, err error) {
	return m.submit(account, urls, opts, true)
}

func newToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// HoldWith is Hold of a job that carries x: a shape its URLs are
// produced with (Config.Shaped), the units its submission bills, a
// concurrency of its own.
func (m *Manager) HoldWith(account string, urls []string, opts scrape.Options, x Extra) (id, token string, err error) {
	if err := m.checkExtra(urls, x); err != nil {
		return "", "", err
	}
	return m.submitKeyed(account, urls, opts, true, nil, nil, x)
}

// checkExtra refuses what a submission's Extra cannot be.
func (m *Manager) checkExtra(urls []string, x Extra) error {
	switch g := x.Grow; {
	case len(x.Shape) > 0 && m.cfg.Shaped == nil:
		return errors.New("jobs: a job with a shape needs Config.Shaped")
	case x.Units < 0 || x.Concurrency < 0:
		return errors.New("jobs: negative units or concurrency")
	case g != nil && (len(x.Shape) == 0 || g.Limit < len(urls) || g.MaxDepth < 0):
		return errors.New("jobs: a growing job needs a shape, a limit of at least its URLs and a depth")
	}
	return nil
}

// SubmitWith is Submit of a job that carries x (HoldWith): it starts at
// once, with its started event.
func (m *Manager) SubmitWith(account string, urls []string, opts scrape.Options, x Extra) (string, error) {
	if err := m.checkExtra(urls, x); err != nil {
		return "", err
	}
	id, _, err := m.submitKeyed(account, urls, opts, false, nil, nil, x)
	return id, err
}

func (m *Manager) submit(account string, urls []string, opts scrape.Options, held bool) (string, string, error) {
	return m.submitKeyed(account, urls, opts, held, nil, nil, Extra{Placed: true})
}

// NewID is an id for a job of this cell's kept elsewhere (a background
// recipe run's), made as newID makes a job's that Extra.Placed says.
func (m *Manager) NewID(placed bool) string { return m.newID(Extra{Placed: placed}) }

// newID is a new job's id: one that names no cell and that the gates
// place on this cell (jobid.NewPlaced) for a job x places, when the
// manager places ids and shares its jobs with the region (a job of a
// cell that does not share is in no log another cell could answer
// from); else one that names this cell.
func (m *Manager) newID(x Extra) string {
	if s := m.share.Load(); x.Placed && s != nil && s.cfg.Place != nil {
		return jobid.NewPlaced(m.cfg.Region, s.cfg.Place)
	}
	return jobid.New(m.cfg.Region, m.cfg.Cell)
}

// account is the job's owner account (read under the job's lock: a
// change of the record replaces it whole).
func (j *job) account() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.meta.Account
}

func newJob(mt meta) *job {
	return &job{meta: mt, inflight: map[uint64]bool{}, kick: make(chan struct{}, 1), slot: make(chan struct{}, 1)}
}

// submitKeyed is submit that also writes idemKey → idemVal in the job's
// own batch (an idempotency key, idempotency.go).
func (m *Manager) submitKeyed(account string, urls []string, opts scrape.Options, held bool, idemKey, idemVal []byte, x Extra) (string, string, error) {
	if account == "" {
		return "", "", errors.New("jobs: a job needs an owner account")
	}
	if len(urls) == 0 || len(urls) > MaxJobURLs {
		return "", "", scrape.BadInput(fmt.Sprintf("urls must hold 1 to %d URLs (got %d)", MaxJobURLs, len(urls)))
	}
	id := m.newID(x)
	m.mu.Lock()
	m.creating[id] = true // until it is in m.jobs (or refused)
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.creating, id)
		m.mu.Unlock()
	}()
	now := m.cfg.Now().UTC()
	j := newJob(meta{ID: id, Account: account, CreatedAt: now, Options: opts, Total: len(urls),
		Shape: x.Shape, Units: x.Units, Concurrency: x.Concurrency, Grow: x.Grow, Local: x.Local})
	j.pending = len(urls)
	if held {
		j.meta.Hold, j.meta.HeldUntil = newToken(), now.Add(m.cfg.HoldTTL)
	}
	if idemKey != nil {
		j.meta.IdemKey = string(idemKey)
	}
	// A shared job is in the region's log before it is answered: a cell
	// that loses its data directory restores it from there (mirror.go).
	if s := m.mirrored(); s != nil {
		if err := s.putJob(m.ctx, j.meta, urls); err != nil {
			m.cfg.Logger.Error("jobs: the region's log did not take a job; refused", "err", err)
			return "", "", errMirror
		}
	}
	b := m.st.NewBatch()
	if idemKey != nil {
		b.Set(idemKey, append(append([]byte(id), 0), idemVal...))
	}
	putNewJob(b, j.meta, urls)
	var started *Event
	if !held {
		var err error
		if started, err = m.stage(b, j, Event{Kind: EventStarted}, 0); err != nil {
			b.Discard()
			return "", "", err
		}
	}
	if err := b.Commit(store.Sync); err != nil {
		return "", "", err
	}
	m.committed(started)
	m.mu.Lock()
	m.jobs[id] = j
	m.mu.Unlock()
	if !held {
		j.mu.Lock()
		m.startDispatchLocked(j)
		j.mu.Unlock()
	}
	return id, j.meta.Hold, nil
}

// putNewJob adds to b a new job's record, its index entry and every URL
// pending (with its seen entry when the job grows).
func putNewJob(b *store.Batch, mt meta, urls []string) {
	mb, _ := json.Marshal(mt)
	b.Set(metaKey(mt.ID), mb)
	b.Set([]byte(store.PrefixJobIndex+mt.ID), nil)
	for i, u := range urls {
		rec, _ := json.Marshal(urlRecord{URL: u, State: urlPending, Slot: -1})
		b.Set(seqKey(mt.ID, 'u', uint64(i)), rec)
		b.Set(seqKey(mt.ID, 'p', uint64(i)), []byte(u))
		if mt.Grow != nil {
			b.Set(seenKey(mt.ID, u), nil)
		}
	}
}

// statusOf is a job's status from its record and counts: pending URLs
// left, and whether any URL has an outcome.
func statusOf(mt *meta, pending int, started bool) string {
	switch {
	case mt.Failure != "":
		return StatusFailed
	case !mt.CancelledAt.IsZero():
		return StatusCancelled
	case pending == 0:
		return StatusDone
	case started:
		return StatusRunning
	}
	return StatusPending
}

// putMeta writes j's meta; j.mu is held.
func (m *Manager) putMeta(j *job) error {
	mb, _ := json.Marshal(j.meta)
	if err := m.st.Set(metaKey(j.meta.ID), mb, store.Sync); err != nil {
		return err
	}
	m.mirrorMetaLocked(j)
	return nil
}

// Release starts what token holds of account's job id: the held job
// itself (Hold) or its held retry (HoldRetry). Releasing again with the
// same token changes nothing; an unknown or expired token is ErrNoHold.
func (m *Manager) Release(id, account, token string) error {
	return m.ReleaseCharged(id, account, token, -1)
}

// ReleaseCharged is Release of a hold the gate charged creditsMC
// thousandths of a credit for (-1: it did not say), which the job adds to
// what it has been charged (Status.CreditsMC).
func (m *Manager) ReleaseCharged(id, account, token string, creditsMC int64) error {
	if s, ok := m.foreign(id); ok {
		if s == nil {
			return ErrRestoring
		}
		return m.fromLog("release", id, m.logRelease(s, id, account, token, creditsMC)) // its owner is down (logread.go)
	}
	j, err := m.get(id, account)
	if err != nil {
		return err
	}
	return m.releaseJob(j, token, creditsMC, m.cfg.Now(), false)
}

// releaseJob is ReleaseCharged of a job of this cell, its hold judged at
// now; fromLog: taken by another cell while this one was down, which
// marked a retry's URLs pending in the log already.
func (m *Manager) releaseJob(j *job, token string, creditsMC int64, now time.Time, fromLog bool) error {
	if token == "" {
		return ErrNoHold
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	id := j.meta.ID
	switch {
	case token == j.meta.Released || token == j.meta.RetryReleased:
		return nil
	case token == j.meta.Hold:
		if now.After(j.meta.HeldUntil) {
			return ErrNoHold
		}
		nm := j.meta
		nm.Hold, nm.HeldUntil, nm.Released = "", time.Time{}, token
		nm.addCredits(creditsMC)
		b := m.st.NewBatch()
		mb, _ := json.Marshal(nm)
		b.Set(metaKey(id), mb)
		ev, err := m.stage(b, j, Event{Kind: EventStarted}, 0)
		if err == nil {
			err = b.Commit(store.Sync)
		}
		if err != nil {
			b.Discard()
			return err
		}
		j.meta = nm
		m.mirrorMetaLocked(j)
		m.committed(ev)
		m.startDispatchLocked(j)
		return nil
	case token == j.meta.RetryHold:
		if now.After(j.meta.RetryUntil) {
			return ErrNoHold
		}
		// A retry charged while its job was being cancelled is cancelled
		// with it: nothing of it is fetched.
		to := urlPending
		if j.isCancelled() {
			to = urlCancelled
		}
		n, err := m.moveHeldLocked(j, to, token, creditsMC, !fromLog)
		if err != nil {
			return err
		}
		j.failed -= n
		if to == urlCancelled {
			j.cancelled += n
			return nil
		}
		j.pending += n
		if n > 0 {
			j.rescan = true
			m.startDispatchLocked(j)
		}
		return nil
	}
	return ErrNoHold
}

// Drop ends what token holds of account's job id without starting it (the
// gate could not charge it): a held job expires now (Sweep deletes it), a
// held retry is undone. An unknown token changes nothing.
//
// A job of another cell (its id placed here once the region's cells
// changed, or its owner down) is dropped through the log, as a cancel is
// (logDrop).
func (m *Manager) Drop(id, account, token string) error {
	if s, ok := m.foreign(id); ok {
		if s == nil {
			return ErrRestoring
		}
		return m.fromLog("drop", id, m.logDrop(s, id, account, token))
	}
	j, err := m.get(id, account)
	if err != nil {
		return err
	}
	return m.dropJob(j, token)
}

// dropJob is Drop of a job of this cell.
func (m *Manager) dropJob(j *job, token string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case token == "":
	case token == j.meta.Hold:
		old := j.meta
		j.meta.HeldUntil = time.Time{}
		if err := m.putMeta(j); err != nil {
			j.meta = old
			return err
		}
	case token == j.meta.RetryHold:
		_, err := m.moveHeldLocked(j, urlError, "", -1, true)
		return err
	}
	return nil
}

// moveHeldLocked moves the job's held URLs to state to (pending: queued
// again; cancelled: released into a cancelled job; error: the retry
// undone) and ends the retry hold, in one batch; j.mu is held.
func (m *Manager) moveHeldLocked(j *job, to, token string, creditsMC int64, mirror bool) (int, error) {
	id := j.meta.ID
	b := m.st.NewBatch()
	n := 0
	var queued []uint64
	err := m.st.Scan(jobKey(id, 'u'), nil, func(k, v []byte) (bool, error) {
		var r urlRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return false, err
		}
		if r.State != urlHeld {
			return true, nil
		}
		r.State = to
		rb, _ := json.Marshal(r)
		b.Set(bytes.Clone(k), rb)
		if to == urlPending {
			b.Set(seqKey(id, 'p', seqOf(k)), []byte(r.URL))
			queued = append(queued, seqOf(k))
		}
		n++
		return true, nil
	})
	if err != nil {
		b.Discard()
		return 0, err
	}
	nm := j.meta
	nm.RetryHold, nm.RetryUntil = "", time.Time{}
	if to != urlError {
		nm.RetryReleased = token
		nm.RetryUnits += n
		nm.addCredits(creditsMC)
	}
	mb, _ := json.Marshal(nm)
	b.Set(metaKey(id), mb)
	if err := b.Commit(store.Sync); err != nil {
		return 0, err
	}
	j.meta = nm
	m.mirrorMetaLocked(j)
	if mirror {
		m.mirrorPendingLocked(j, queued)
	}
	return n, nil
}

// dispatch feeds the job's pending URLs to the workers in submission order,
// reading them from the store in chunks so a 10,000-URL job is never held in
// memory. It ends when no URL of the job is pending.
func (m *Manager) dispatch(j *job) {
	defer m.wg.Done()
	const chunk = 64
	var cursor []byte
	for {
		var batch []task
		err := m.st.Scan(jobKey(j.meta.ID, 'p'), cursor, func(k, v []byte) (bool, error) {
			seq := binary.BigEndian.Uint64(k[len(k)-8:])
			batch = append(batch, task{job: j, seq: seq, url: string(v)})
			cursor = append(bytes.Clone(k), 0)
			return len(batch) < chunk, nil
		})
		if err != nil {
			m.cfg.Logger.Error("job dispatch scan", "job", j.meta.ID, "err", err)
		}
		for _, t := range batch {
			if !m.admit(j, t.seq) {
				continue
			}
			if !m.send(t) {
				return
			}
		}
		if len(batch) < chunk || err != nil {
			// Reached the end. Stop if nothing is pending; otherwise URLs
			// are in flight (and may be re-queued): wait for a kick.
			j.mu.Lock()
			if j.pending == 0 || j.gone {
				j.dispatching = false
				j.mu.Unlock()
				return
			}
			j.mu.Unlock()
			select {
			case <-j.kick:
				// Go on from the cursor: a growing job's new URLs come
				// after it. A retry's re-queued URLs are before it: scan
				// again from the start.
				j.mu.Lock()
				if j.rescan {
					cursor, j.rescan = nil, false
				}
				j.mu.Unlock()
			case <-m.ctx.Done():
				return
			}
		}
	}
}

// admit marks the job's URL seq in flight, first waiting for a place when
// the job has a concurrency of its own. It reports false for a URL not to
// send: in flight already, its job cancelled or swept, or the manager
// closing.
func (m *Manager) admit(j *job, seq uint64) bool {
	for {
		j.mu.Lock()
		if j.inflight[seq] || j.isCancelled() || j.gone || !m.stillPending(j, seq) {
			j.mu.Unlock()
			return false
		}
		if c := j.meta.Concurrency; c <= 0 || len(j.inflight) < c {
			j.inflight[seq] = true
			j.started = true
			j.mu.Unlock()
			return true
		}
		j.mu.Unlock()
		select {
		case <-j.slot:
		case <-m.ctx.Done():
			return false
		}
	}
}

// stillPending reports whether URL seq of j still waits to be fetched: a
// scan that read its pending key may meet it after it finished (a
// dispatcher woken to rescan while URLs complete). j.mu is held.
func (m *Manager) stillPending(j *job, seq uint64) bool {
	_, err := m.st.Get(seqKey(j.meta.ID, 'p', seq))
	return err == nil
}

func (m *Manager) worker() {
	defer m.wg.Done()
	for {
		select {
		case <-m.ctx.Done():
			return
		case t := <-m.work:
			m.run(t)
		}
	}
}

func (m *Manager) run(t task) {
	j := t.job
	j.mu.Lock()
	cancelled := j.isCancelled()
	// Read under the lock: a cancel replaces the whole record.
	id, account := j.meta.ID, j.meta.Account
	opts, shape, grow := j.meta.Options, j.meta.Shape, j.meta.Grow != nil
	j.mu.Unlock()
	target := Target{Job: id, Account: account, URL: t.url}
	if grow && !cancelled {
		rec, err := m.record(id, t.seq)
		if err != nil {
			m.cfg.Logger.Error("job URL record unreadable; the URL stays pending", "job", id, "err", err)
			j.mu.Lock()
			delete(j.inflight, t.seq)
			j.mu.Unlock()
			return
		}
		target.Depth = rec.Depth
	}
	if cancelled {
		// Cancelled between its dispatch and now: not fetched.
		if err := m.cancelOne(t); err != nil {
			m.cfg.Logger.Error("job cancel write failed; the URL stays pending", "job", id, "url", urlpolicy.Redact(t.url), "err", err)
		}
		return
	}
	line, made, serr, attempts := m.fetch(target, opts, shape)
	if m.ctx.Err() != nil {
		// Shutting down: leave the URL pending for the next start.
		m.unadmit(t)
		return
	}
	if s := m.mirrored(); s != nil {
		// A job kept here while the cell shares (a crawl with a delay):
		// its outcome goes to the log first, and is recorded from there
		// as any shared outcome is (mirror.go).
		it, err := m.itemOf(t, s.cfg.Cell)
		if err == nil {
			out := jobOutcome{Job: it.Job, Seq: it.Seq, Gen: it.Gen, URL: it.URL, Links: made.Links, Usage: made.Usage,
				Attempts: attempts, Cell: m.cfg.Cell}
			if serr != nil {
				out.Error = &outcomeError{Status: serr.Status, Code: serr.Code, Message: serr.Message}
			}
			if err = s.send(m.ctx, it, &out, line); err == nil {
				return
			}
		}
		m.cfg.Logger.Warn("jobs: a kept job's outcome not sent to the region's log; recorded here only", "job", id, "err", err)
	}
	if err := m.complete(t, line, made, serr, attempts); err != nil {
		m.cfg.Logger.Error("job result write failed; the URL stays pending", "job", id, "url", urlpolicy.Redact(t.url), "err", err)
	}
}

// takePending takes a dispatched URL off the job's in-flight set and
// returns its record while it is still pending; nil (and no error) when it
// already has an outcome. The job's lock is held.
func (m *Manager) takePending(t task) (*urlRecord, error) {
	j := t.job
	delete(j.inflight, t.seq)
	rec, err := m.record(j.meta.ID, t.seq)
	if err != nil || rec.State != urlPending {
		return nil, err
	}
	return rec, nil
}

// record reads the record of URL seq of job id.
func (m *Manager) record(id string, seq uint64) (*urlRecord, error) {
	raw, err := m.st.Get(seqKey(id, 'u', seq))
	if err != nil {
		return nil, err
	}
	var rec urlRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// complete records a URL's outcome, with the URLs a growing job found on
// it and what its observer owes for it, in one write. Slots are assigned
// and committed under the job's lock, so the results log never has a gap
// a reader could skip over.
func (m *Manager) complete(t task, line []byte, made Produced, serr *httpjson.HTTPError, attempts int) error {
	return m.completeWith(t, line, made, serr, attempts, nil)
}

// completeWith is complete, calling recorded (if set) once the outcome
// is committed; it is not called for a URL that had an outcome already.
func (m *Manager) completeWith(t task, line []byte, made Produced, serr *httpjson.HTTPError, attempts int, recorded func()) error {
	j := t.job
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.inflight, t.seq)
	rec, err := m.record(j.meta.ID, t.seq)
	if errors.Is(err, store.ErrNotFound) && j.meta.Grow != nil && t.seq >= uint64(j.total()) {
		// A URL the coordinator added to this crawl while this cell was
		// down, after the restore took in what the log had then.
		if s := m.mirrored(); s != nil {
			if err = m.absorbGrowthLocked(m.ctx, s, j); err == nil {
				rec, err = m.record(j.meta.ID, t.seq)
			}
		}
	}
	if err != nil {
		return err
	}
	// A cancelled job's URL may still get its outcome: one that was in
	// the region's queue when the cancel was taken for its owner by
	// another cell (logread.go), and cancelled with the rest when the
	// owner applied it. It was fetched (and paid for): it keeps its
	// result, as a cancel's in-flight URLs do.
	late := rec.State == urlCancelled && j.isCancelled()
	if rec.State != urlPending && !late {
		return nil // already recorded (a duplicate dispatch)
	}
	rec.Attempts += attempts
	rec.State, rec.Error, rec.Message, rec.Status = urlDone, "", "", 0
	rec.At = m.cfg.Now().UTC()
	if serr != nil {
		rec.State, rec.Error, rec.Message, rec.Status = urlError, serr.Code, serr.Message, serr.Status
	}
	// A shaped job's failure has no line (Extra.Shape).
	lined := serr == nil || len(j.meta.Shape) == 0
	if rec.Slot < 0 && lined {
		rec.Slot = j.nextSlot
	}
	b := m.st.NewBatch()
	rb, _ := json.Marshal(rec)
	b.Set(seqKey(j.meta.ID, 'u', t.seq), rb)
	if lined {
		b.Set(seqKey(j.meta.ID, 'r', uint64(rec.Slot)), line)
	}
	b.Delete(seqKey(j.meta.ID, 'p', t.seq))
	var added int
	if serr == nil && !j.isCancelled() {
		var grown []grownURL
		if grown, err = m.growLocked(b, j, rec.Depth, made.Links); err != nil {
			b.Discard()
			return err
		}
		added = len(grown)
		// In the region's log before the store: a restored crawl finds
		// every URL at the seq it had (mirror.go). Refused, the outcome is
		// not recorded (offered again).
		if s := m.mirrored(); s != nil && added > 0 {
			if err := s.putGrowth(m.ctx, j.meta.ID, uint64(j.total()), grown); err != nil {
				b.Discard()
				if errors.Is(err, errGrowthTaken) {
					// URLs at that seq already (the coordinator grew the
					// crawl while this cell was down): taken in, and the
					// outcome, offered again, grows it from there.
					if aerr := m.absorbGrowthLocked(m.ctx, s, j); aerr != nil {
						err = fmt.Errorf("%w (and taking them in: %v)", err, aerr)
					}
				}
				return fmt.Errorf("the URLs a page added not in the region's log: %w", err)
			}
		}
	}
	var evs []*Event
	if !j.isCancelled() {
		page := Event{Kind: EventPage, URL: t.url, Seq: t.seq, Usage: made.Usage, Err: serr}
		if serr == nil {
			page.Line = line
		}
		ev, err := m.stage(b, j, page, t.logSeq)
		if err != nil {
			b.Discard()
			return err
		}
		evs = append(evs, ev)
		if j.pending+added == 1 {
			ev, err := m.stage(b, j, Event{Kind: EventCompleted}, 0)
			if err != nil {
				b.Discard()
				return err
			}
			evs = append(evs, ev)
		}
	}
	// NoSync: a kill -9 keeps it (the OS has the WAL); were the machine to
	// lose it, the URL is simply still pending and is scraped again. The last
	// URL of a job is synced so "done" is durable.
	d := store.NoSync
	if j.pending+added == 1 {
		d = store.Sync
	}
	if err := b.Commit(d); err != nil {
		return err
	}
	if recorded != nil {
		recorded()
	}
	if lined && rec.Slot == j.nextSlot {
		j.nextSlot++
	}
	if late {
		j.cancelled--
	} else {
		j.pending += added - 1
	}
	j.meta.Total += added
	if serr != nil {
		j.failed++
	} else {
		j.done++
		j.lastDone = rec.At
	}
	m.committed(evs...)
	if j.pending == 0 || added > 0 {
		select {
		case j.kick <- struct{}{}:
		default:
		}
	}
	select {
	case j.slot <- struct{}{}:
	default:
	}
	return nil
}

// grownURL is a URL a growing job's page added, at its depth.
type grownURL struct {
	URL   string `json:"u"`
	Depth int    `json:"d"`
}

// growLocked adds to b the links of a growing job's page found at depth
// that the job has not seen, as pending URLs one deeper, within the job's
// limit, from seq j.total() on, and returns them; j.mu is held.
func (m *Manager) growLocked(b *store.Batch, j *job, depth int, links []string) ([]grownURL, error) {
	g := j.meta.Grow
	if g == nil {
		return nil, nil
	}
	id := j.meta.ID
	added, err := newLinks(g, j.total(), []pageLinks{{depth: depth, links: links}}, func(u string) (bool, error) {
		_, err := m.st.Get(seenKey(id, u))
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return nil, err
	}
	putGrown(b, id, uint64(j.total()), added)
	return added, nil
}

// newLinks is how a growing job grows, on its owner (growLocked) and on
// the coordinator that feeds it while the owner is down (growAdopted),
// which must choose alike: of pages' links, in order, those not seen by
// the job and not chosen before, one deeper than their page if it is
// above g.MaxDepth, until the job, which has have URLs, has g.Limit.
func newLinks(g *Growth, have int, pages []pageLinks, seen func(url string) (bool, error)) ([]grownURL, error) {
	var added []grownURL
	fresh := map[string]bool{}
	for _, pl := range pages {
		if pl.depth >= g.MaxDepth {
			continue
		}
		for _, u := range pl.links {
			if have+len(added) >= g.Limit {
				return added, nil
			}
			if fresh[u] {
				continue
			}
			if ok, err := seen(u); err != nil {
				return nil, err
			} else if ok {
				continue
			}
			fresh[u] = true
			added = append(added, grownURL{URL: u, Depth: pl.depth + 1})
		}
	}
	return added, nil
}

// putGrown adds to b a growing job's URLs from seq on, pending.
func putGrown(b *store.Batch, id string, seq uint64, urls []grownURL) {
	for i, g := range urls {
		rec, _ := json.Marshal(urlRecord{URL: g.URL, State: urlPending, Slot: -1, Depth: g.Depth})
		b.Set(seqKey(id, 'u', seq+uint64(i)), rec)
		b.Set(seqKey(id, 'p', seq+uint64(i)), []byte(g.URL))
		b.Set(seenKey(id, g.URL), nil)
	}
}

// Cancel cancels account's job id: its URLs not yet fetched are cancelled
// (durably, in one write) and never fetched, those in flight finish and
// keep their results, and the job is cancelled for good: its status says
// so, and nothing of it is retried. A retry held when it is cancelled is
// cancelled when released. Cancelling again changes nothing.
//
// Another cell's job is cancelled through the region's log (logCancel):
// the gate sends the cancel here only while its owner is down.
func (m *Manager) Cancel(id, account string) error {
	if s, ok := m.foreign(id); ok {
		if s == nil {
			return ErrRestoring
		}
		return m.fromLog("cancel", id, m.logCancel(s, id, account))
	}
	j, err := m.get(id, account)
	if err != nil {
		return err
	}
	return m.cancelJob(j)
}

// cancelJob is Cancel of a job of this cell.
func (m *Manager) cancelJob(j *job) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.isCancelled() {
		return nil
	}
	nm := j.meta
	nm.CancelledAt = m.cfg.Now().UTC()
	var end *Event
	if j.pending > 0 {
		end = &Event{Kind: EventCancelled} // an ended job has had its end
	}
	_, err := m.cancelPendingLocked(j, nm, end)
	return err
}

// Stop ends job id as Cancel does, for a reason of the cell's rather than
// its owner's (its account ran out of credit): its status is failed, and
// its end event says why. Stopping a job that ended changes nothing.
func (m *Manager) Stop(id, reason string) error {
	m.mu.Lock()
	j, ok := m.jobs[id]
	m.mu.Unlock()
	if !ok {
		return ErrNoJob
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.isCancelled() || j.pending == 0 {
		return nil
	}
	nm := j.meta
	nm.CancelledAt, nm.Failure = m.cfg.Now().UTC(), reason
	_, err := m.cancelPendingLocked(j, nm, &Event{Kind: EventFailed, Failure: reason})
	return err
}

// cancelPendingLocked cancels every URL of j that is pending and not in
// flight and writes meta nm, with the end event ev if there is one, in
// one batch, and wakes the job's dispatcher; j.mu is held.
func (m *Manager) cancelPendingLocked(j *job, nm meta, ev *Event) (int, error) {
	id := j.meta.ID
	now := m.cfg.Now().UTC()
	b := m.st.NewBatch()
	n := 0
	err := m.st.Scan(jobKey(id, 'u'), nil, func(k, v []byte) (bool, error) {
		var r urlRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return false, err
		}
		seq := binary.BigEndian.Uint64(k[len(k)-8:])
		if r.State != urlPending || j.inflight[seq] {
			return true, nil
		}
		r.State, r.At = urlCancelled, now
		rb, _ := json.Marshal(r)
		b.Set(bytes.Clone(k), rb)
		b.Delete(seqKey(id, 'p', seq))
		n++
		return true, nil
	})
	if err != nil {
		b.Discard()
		return 0, err
	}
	mb, _ := json.Marshal(nm)
	b.Set(metaKey(id), mb)
	var staged *Event
	if ev != nil {
		if staged, err = m.stage(b, j, *ev, 0); err != nil {
			b.Discard()
			return 0, err
		}
	}
	if err := b.Commit(store.Sync); err != nil {
		return 0, err
	}
	j.meta = nm
	m.mirrorMetaLocked(j)
	j.pending -= n
	j.cancelled += n
	m.committed(staged)
	j.wake()
	return n, nil
}

// cancelOne cancels a dispatched URL of a cancelled job before it is
// fetched.
func (m *Manager) cancelOne(t task) error {
	j := t.job
	j.mu.Lock()
	defer j.mu.Unlock()
	rec, err := m.takePending(t)
	if rec == nil {
		return err
	}
	rec.State, rec.At = urlCancelled, m.cfg.Now().UTC()
	rb, _ := json.Marshal(rec)
	b := m.st.NewBatch()
	b.Set(seqKey(j.meta.ID, 'u', t.seq), rb)
	b.Delete(seqKey(j.meta.ID, 'p', t.seq))
	if err := b.Commit(store.Sync); err != nil {
		return err
	}
	j.pending--
	j.cancelled++
	j.wake()
	return nil
}

// Status is the body of GET /scrape/jobs/{id}.
type Status struct {
	JobID   string `json:"job_id"`
	Status  string `json:"status"`
	Total   int    `json:"total"`
	Pending int    `json:"pending"`
	Done    int    `json:"done"`
	Error   int    `json:"error"`
	// Cancelled counts the URLs its cancel stopped (Cancel).
	Cancelled int            `json:"cancelled,omitempty"`
	CreatedAt time.Time      `json:"created_at"`
	Options   scrape.Options `json:"options"`
	URLs      []URLStatus    `json:"urls,omitempty"`

	// Not in the native answer: what HoldWith's jobs show.

	// Shape is the job's Extra.Shape.
	Shape json.RawMessage `json:"-"`
	// Charged is the units the job has been charged: its submission's
	// Extra.Units once the gate released it, and each released retry's.
	Charged int `json:"-"`
	// ExpiresAt is when the job and its results are deleted (created +
	// Config.Retention).
	ExpiresAt time.Time `json:"-"`
	// Failure is why a failed job was stopped (Stop).
	Failure string `json:"-"`
	// Held: the gate has not released the job yet (Hold).
	Held bool `json:"-"`
	// CreditsMC is what the gate charged for the job's releases, in
	// thousandths of a credit; CreditsKnown whether every release said.
	CreditsMC    int64 `json:"-"`
	CreditsKnown bool  `json:"-"`
}

// URLStatus is the per-URL detail of ?full=1.
type URLStatus struct {
	URL      string `json:"url"`
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	Error    string `json:"error,omitempty"`
	Message  string `json:"message,omitempty"`
}

// get returns the job id of account. A job of another account is
// ErrNoJob, exactly as a job that does not exist, so an id tells a
// stranger nothing.
func (m *Manager) get(id, account string) (*job, error) {
	m.mu.Lock()
	j, ok := m.jobs[id]
	m.mu.Unlock() // before the job's lock (account): never both
	if !ok && m.mayRestore() {
		return nil, ErrRestoring
	}
	if !ok || account == "" || subtle.ConstantTimeCompare([]byte(j.account()), []byte(account)) != 1 {
		return nil, ErrNoJob
	}
	return j, nil
}

// Status reports the counts of account's job id, and with full every
// URL's state.
func (m *Manager) Status(id, account string, full bool) (*Status, error) {
	if s, ok := m.foreign(id); ok {
		if s == nil {
			return nil, ErrRestoring
		}
		st, err := m.logStatus(s, id, account, full) // its owner is down (logread.go)
		return st, m.fromLog("status", id, err)
	}
	j, err := m.get(id, account)
	if err != nil {
		return nil, err
	}
	j.mu.Lock()
	s := &Status{
		JobID: id, Total: j.total(), Pending: j.pending, Done: j.done, Error: j.failed, Cancelled: j.cancelled,
		CreatedAt: j.meta.CreatedAt, Options: j.meta.Options,
		Shape: j.meta.Shape, Charged: j.meta.RetryUnits, ExpiresAt: j.meta.CreatedAt.Add(m.cfg.Retention),
	}
	if j.meta.Hold == "" {
		s.Charged += j.meta.Units
	}
	s.Held = j.meta.Hold != ""
	s.CreditsMC, s.CreditsKnown = j.meta.CreditsMC, !j.meta.Uncounted
	s.Status, s.Failure = statusOf(&j.meta, j.pending, j.started), j.meta.Failure
	j.mu.Unlock()
	if full {
		s.URLs = make([]URLStatus, 0, s.Total)
		err := m.st.Scan(jobKey(id, 'u'), nil, func(_, v []byte) (bool, error) {
			var r urlRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return false, err
			}
			s.URLs = append(s.URLs, URLStatus{URL: r.URL, State: r.State, Attempts: r.Attempts, Error: r.Error, Message: r.Message})
			return true, nil
		})
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Results writes up to PageLines result lines starting at offset after, each
// followed by a newline, and returns how many it wrote. Lines are in
// completion order and a line never moves, so paging with increasing offsets
// while the job runs sees every line exactly once.
func (m *Manager) Results(id, account string, after int64, w io.Writer) (int, error) {
	if s, ok := m.foreign(id); ok {
		if s == nil {
			return 0, ErrRestoring
		}
		n, err := m.logResults(s, id, account, max(after, 0), w) // its owner is down (logread.go)
		if n == 0 {
			err = m.fromLog("results", id, err) // nothing written yet: the answer may still be a 503
		} else if err != nil {
			m.cfg.Logger.Warn("jobs: results from the region's log cut short", "job", id, "lines", n, "err", err)
		}
		return n, err
	}
	if _, err := m.get(id, account); err != nil {
		return 0, err
	}
	if after < 0 {
		after = 0
	}
	n := 0
	var werr error
	err := m.st.Scan(jobKey(id, 'r'), seqKey(id, 'r', uint64(after)), func(_, v []byte) (bool, error) {
		if _, werr = w.Write(append(v, '\n')); werr != nil {
			return false, werr
		}
		n++
		return n < PageLines, nil
	})
	return n, err
}

// ScanResults calls fn with the result lines of account's job id from
// offset after on, in order, until fn returns false or the lines end. A
// line is valid only until fn returns. Lines never move (Results), so a
// reader may go on later from after plus the lines it took.
func (m *Manager) ScanResults(id, account string, after int64, fn func(line []byte) bool) error {
	if s, ok := m.foreign(id); ok {
		if s == nil {
			return ErrRestoring
		}
		return m.fromLog("results", id, m.logScanResults(s, id, account, max(after, 0), fn)) // its owner is down (logread.go)
	}
	if _, err := m.get(id, account); err != nil {
		return err
	}
	if after < 0 {
		after = 0
	}
	return m.st.Scan(jobKey(id, 'r'), seqKey(id, 'r', uint64(after)), func(_, v []byte) (bool, error) {
		return fn(v), nil
	})
}

// Failure is a URL of a job that failed (held for a retry included).
type Failure struct {
	// Index is the URL's place in the submission, from 0.
	Index int
	URL   string
	// Error and Message are the API's code and sentence, Status the
	// HTTP status of the failure; At when it failed.
	Error   string
	Message string
	Status  int
	At      time.Time
}

// Failures returns the failed URLs of account's job id, in submission
// order.
func (m *Manager) Failures(id, account string) ([]Failure, error) {
	if s, ok := m.foreign(id); ok {
		if s == nil {
			return nil, ErrRestoring
		}
		failed, err := m.logFailures(s, id, account) // its owner is down (logread.go)
		return failed, m.fromLog("failures", id, err)
	}
	if _, err := m.get(id, account); err != nil {
		return nil, err
	}
	var out []Failure
	err := m.st.Scan(jobKey(id, 'u'), nil, func(k, v []byte) (bool, error) {
		var r urlRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return false, err
		}
		if r.State == urlError || r.State == urlHeld {
			out = append(out, Failure{Index: int(binary.BigEndian.Uint64(k[len(k)-8:])), URL: r.URL,
				Error: r.Error, Message: r.Message, Status: r.Status, At: r.At})
		}
		return true, nil
	})
	return out, err
}

// HoldRetry holds the failed URLs of account's job id that fetchable
// accepts (a URL that can never be fetched is neither retried nor billed)
// and returns how many, with the token Release queues them with. Until
// then they stay failed; a hold not released within HoldTTL is undone. A
// job has at most one held retry (ErrRetryHeld); a held or cancelled job
// has nothing to retry. n 0 holds nothing and returns no token.
func (m *Manager) HoldRetry(id, account string, fetchable func(string) bool) (n int, token string, err error) {
	if s, ok := m.foreign(id); ok {
		if s == nil {
			return 0, "", ErrRestoring
		}
		n, token, err := m.logRetry(s, id, account, fetchable) // its owner is down (logread.go)
		return n, token, m.fromLog("retry", id, err)
	}
	j, err := m.get(id, account)
	if err != nil {
		return 0, "", err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.meta.Hold != "" || j.isCancelled() {
		return 0, "", nil
	}
	if j.meta.RetryHold != "" {
		if !m.cfg.Now().After(j.meta.RetryUntil) {
			return 0, "", ErrRetryHeld
		}
		if _, err := m.moveHeldLocked(j, urlError, "", -1, true); err != nil {
			return 0, "", err
		}
	}
	b := m.st.NewBatch()
	var seqs []uint64
	err = m.st.Scan(jobKey(id, 'u'), nil, func(k, v []byte) (bool, error) {
		var r urlRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return false, err
		}
		if r.State != urlError || !fetchable(r.URL) {
			return true, nil
		}
		r.State = urlHeld
		rb, _ := json.Marshal(r)
		b.Set(bytes.Clone(k), rb)
		seqs = append(seqs, seqOf(k))
		n++
		return true, nil
	})
	if err != nil || n == 0 {
		b.Discard()
		return 0, "", err
	}
	nm := j.meta
	nm.RetryHold, nm.RetryUntil = newToken(), m.cfg.Now().Add(m.cfg.HoldTTL)
	mb, _ := json.Marshal(nm)
	b.Set(metaKey(id), mb)
	if err := b.Commit(store.Sync); err != nil {
		return 0, "", err
	}
	j.meta = nm
	if s := m.mirrored(); s != nil {
		// Which URLs the retry holds, in the log as another cell's retry
		// for this one would be (logRetry): if this cell goes down before
		// the gate's release, the cell that takes the release finds them
		// (logReleaseRetry). Its own request comes back to it, a no-op.
		req := retryRequest{releaseRequest: releaseRequest{cancelRequest: cancelRequest{Job: id, Account: account, At: m.cfg.Now().UTC(), Cell: m.cfg.Cell},
			Token: nm.RetryHold}, Until: nm.RetryUntil, Seqs: seqs}
		if err := s.putRequest(m.ctx, s.cfg.Cell, id, retryKind(nm.RetryHold, false), headerRetry, req); err != nil && m.ctx.Err() == nil {
			m.cfg.Logger.Warn("jobs: a held retry not written to the region's log (its release waits for this cell if it goes down)", "job", id, "err", err)
		}
	}
	m.mirrorMetaLocked(j)
	return n, nm.RetryHold, nil
}

// holdRetryFor holds, as HoldRetry would have, the failed URLs of a
// retry another cell held for this one while it was down (logRetry),
// under that retry's token and until. A job held, cancelled, or with a
// retry of its own still held keeps its state (the other token's release
// then finds no hold).
func (m *Manager) holdRetryFor(j *job, req retryRequest) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := m.cfg.Now()
	switch {
	case j.meta.RetryHold == req.Token || j.meta.RetryReleased == req.Token:
		return nil
	case j.meta.Hold != "" || j.isCancelled():
		return nil // not started, or cancelled: nothing to retry
	case j.meta.RetryHold != "":
		if !now.After(j.meta.RetryUntil) {
			m.cfg.Logger.Warn("jobs: a retry taken while this cell was down meets one of its own; not held", "job", j.meta.ID)
			return nil
		}
		if _, err := m.moveHeldLocked(j, urlError, "", -1, true); err != nil {
			return err
		}
	}
	// Held even if its end has passed: its release, taken before the
	// end, may follow in the results (one never released is undone by
	// the sweep).
	id := j.meta.ID
	b := m.st.NewBatch()
	for _, seq := range req.Seqs {
		k := seqKey(id, 'u', seq)
		v, err := m.st.Get(k)
		if err != nil {
			b.Discard()
			return fmt.Errorf("job %s: URL %d of a retry: %w", id, seq, err)
		}
		var r urlRecord
		if err := json.Unmarshal(v, &r); err != nil {
			b.Discard()
			return err
		}
		if r.State != urlError {
			continue
		}
		r.State = urlHeld
		rb, _ := json.Marshal(r)
		b.Set(k, rb)
	}
	nm := j.meta
	nm.RetryHold, nm.RetryUntil = req.Token, req.Until
	mb, _ := json.Marshal(nm)
	b.Set(metaKey(id), mb)
	if err := b.Commit(store.Sync); err != nil {
		return err
	}
	j.meta = nm
	m.mirrorMetaLocked(j)
	return nil
}

// releasedInLog reports whether hold token (a job's or a retry's) of a
// job of this cell may have been released in the region's log while the
// cell was down (logRelease, logReleaseRetry): its record there says
// so, or the log cannot say. The release is then applied from the
// cell's results; the sweep leaves the hold alone.
func (m *Manager) releasedInLog(j *job, token string) bool {
	j.mu.Lock()
	id, account := j.meta.ID, j.meta.Account
	j.mu.Unlock()
	s := m.mirrored()
	if s == nil {
		return m.cfg.AwaitShare > 0 // a cell that will share: not yet known
	}
	ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
	defer cancel()
	mt, _, err := s.logMeta(ctx, id, account)
	if errors.Is(err, ErrNoJob) {
		return false
	}
	return err != nil || mt.Released == token || mt.RetryReleased == token
}

// Sweep deletes jobs older than the retention period and held jobs whose
// hold expired, undoes expired held retries, and returns how many jobs it
// deleted.
func (m *Manager) Sweep() (int, error) {
	now := m.cfg.Now()
	cutoff := now.Add(-m.cfg.Retention)
	m.mu.Lock()
	type held struct {
		j     *job
		token string
	}
	var old []*job
	var retries, expired []held
	for _, j := range m.jobs {
		j.mu.Lock()
		hold, retry := j.meta.Hold, j.meta.RetryHold
		gone := hold != "" && now.After(j.meta.HeldUntil)
		if retry != "" && now.After(j.meta.RetryUntil) {
			retries = append(retries, held{j, retry})
		}
		j.mu.Unlock()
		switch {
		case j.meta.CreatedAt.Before(cutoff):
			old = append(old, j)
		case gone:
			expired = append(expired, held{j, hold})
		}
	}
	m.mu.Unlock()
	// A hold released by another cell while this one was down is left:
	// the release is applied from this cell's results.
	for _, h := range expired {
		if !m.releasedInLog(h.j, h.token) {
			old = append(old, h.j)
		}
	}
	for _, h := range retries {
		if m.releasedInLog(h.j, h.token) {
			continue
		}
		j := h.j
		j.mu.Lock()
		if j.meta.RetryHold == h.token && now.After(j.meta.RetryUntil) {
			if _, err := m.moveHeldLocked(j, urlError, "", -1, true); err != nil {
				j.mu.Unlock()
				return 0, err
			}
		}
		j.mu.Unlock()
	}
	sort.Slice(old, func(a, b int) bool { return old[a].meta.ID < old[b].meta.ID })
	for _, j := range old {
		id := j.meta.ID
		j.mu.Lock()
		idle := len(j.inflight) == 0
		if idle {
			j.gone = true
			select {
			case j.kick <- struct{}{}:
			default:
			}
		}
		j.mu.Unlock()
		if !idle {
			continue
		}
		if k := j.meta.IdemKey; k != "" {
			m.forgetKey([]byte(k), id)
		}
		if err := m.st.Delete([]byte(store.PrefixJobIndex+id), store.Sync); err != nil {
			return 0, err
		}
		if err := m.st.DeletePrefix([]byte(store.PrefixJob+id+"/"), store.NoSync); err != nil {
			return 0, err
		}
		m.mu.Lock()
		delete(m.jobs, id)
		m.mu.Unlock()
		if s := m.mirrored(); s != nil {
			if err := s.forget(m.ctx, id); err != nil {
				m.cfg.Logger.Warn("jobs: swept job not removed from the region's log (its age will)", "job", id, "err", err)
			}
		}
	}
	return len(old), nil
}

// ParseJobID returns the region and cell that own a job, and false if id is
// not a well-formed job id. The gate routes by it; it lives in the light
// package jobid, which the gate may import directly to avoid linking this one.
func ParseJobID(id string) (region, cell string, ok bool) {
	return jobid.Parse(id)
}

func metaKey(id string) []byte { return []byte(store.PrefixJob + id + "/m") }

func jobKey(id string, kind byte) []byte {
	return []byte(store.PrefixJob + id + "/" + string(kind) + "/")
}

func seqKey(id string, kind byte, n uint64) []byte {
	return binary.BigEndian.AppendUint64(jobKey(id, kind), n)
}

// seenKey marks u as one of a growing job's URLs (Extra.Grow).
func seenKey(id, u string) []byte {
	sum := sha256.Sum256([]byte(u))
	return append(jobKey(id, 's'), sum[:16]...)
}

// Running lists the statuses (without URLs) of account's jobs still
// running whose shape has the prefix shapePrefix (a kind, say): released,
// neither ended nor cancelled, oldest first. They are this cell's jobs,
// and on the region's coordinator also the jobs of down owners it feeds
// (read from the log), so that the gate, which merges every live cell's,
// misses none while their owner is down.
func (m *Manager) Running(account string, shapePrefix []byte) []*Status {
	m.mu.Lock()
	var ids []string
	for id, j := range m.jobs {
		if account != "" && subtle.ConstantTimeCompare([]byte(j.meta.Account), []byte(account)) == 1 {
			ids = append(ids, id)
		}
	}
	m.mu.Unlock()
	// On the coordinator, the jobs of down owners it feeds (read from
	// the log).
	if s := m.share.Load(); s != nil && account != "" {
		if fed := s.fed.Load(); fed != nil {
			for id, acct := range *fed {
				if subtle.ConstantTimeCompare([]byte(acct), []byte(account)) == 1 && !slices.Contains(ids, id) {
					ids = append(ids, id)
				}
			}
		}
	}
	var out []*Status
	for _, id := range ids {
		s, err := m.Status(id, account, false)
		if err != nil || s.Status == StatusDone || s.Status == StatusCancelled || s.Status == StatusFailed || !bytes.HasPrefix(s.Shape, shapePrefix) {
			continue
		}
		if s.Held {
			continue // not released yet
		}
		out = append(out, s)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].CreatedAt.Before(out[b].CreatedAt) })
	return out
}

// Exists reports whether job id is this cell's: kept (not swept), or being
// recorded now, whatever its id names.
func (m *Manager) Exists(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.jobs[id]
	return ok || m.creating[id]
}

// Queue is account's work waiting in the cell's jobs: URLs being fetched
// (active), URLs still to fetch (waiting), and when a URL of its jobs last
// finished well (zero: never, or not since the cell started).
func (m *Manager) Queue(account string) (active, waiting int, last time.Time) {
	m.mu.Lock()
	var js []*job
	for _, j := range m.jobs {
		if account != "" && subtle.ConstantTimeCompare([]byte(j.meta.Account), []byte(account)) == 1 {
			js = append(js, j)
		}
	}
	m.mu.Unlock()
	for _, j := range js {
		j.mu.Lock()
		if j.meta.Hold == "" && !j.isCancelled() && !j.gone {
			active += len(j.inflight)
			waiting += j.pending - len(j.inflight)
		}
		if j.lastDone.After(last) {
			last = j.lastDone
		}
		j.mu.Unlock()
	}
	return active, waiting, last
}

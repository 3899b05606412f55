package crawl

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/trawlhq/trawl/cell/crawl/dashboard"
	"github.com/trawlhq/trawl/cell/crawl/extract"
	"github.com/trawlhq/trawl/cell/crawl/sysstat"
	"github.com/trawlhq/trawl/cell/fetch/browser"
	"github.com/trawlhq/trawl/internal/store"
)

// DefaultListen is the crawl server's address (spec 9: port 11235).
const DefaultListen = "127.0.0.1:11235"

// Defaults of Config.
const (
	DefaultMaxConcurrentTasks = 5
	DefaultMaxQueuedTasks     = 1000
	DefaultJanitorEvery       = 30 * time.Second
	DefaultPushEvery          = 2 * time.Second
)

// Config configures a Server. cmd/trawl fills it from flags and the
// spec's environment variables (FromEnv).
type Config struct {
	// DataDir holds the task store (DataDir/crawl).
	DataDir string
	// Token, when set, is required as `Authorization: Bearer <token>` on
	// every route but /health (SERVICE_API_TOKEN).
	Token string
	// MaxConcurrentTasks bounds the tasks (and streams) running at once
	// (MAX_CONCURRENT_TASKS). Default 5.
	MaxConcurrentTasks int
	// MaxQueuedTasks bounds the tasks waiting for a slot; past it a
	// submission gets 503 "No available slots". Default 1000.
	MaxQueuedTasks int
	// DefaultTTL is how long a finished task is kept when the request
	// gives no ttl. Default 1 hour.
	DefaultTTL time.Duration
	// AllowPrivateNetworks lets pages reach loopback and private
	// addresses (tests and local use).
	AllowPrivateNetworks bool
	// PagesPerBrowser bounds the pages one pool browser renders at once
	// (default 4); MaxBrowsers bounds the hot and cold browsers (default 6).
	PagesPerBrowser int
	MaxBrowsers     int
	// Browser is the base configuration of every pool browser (each is a
	// browser.Pool of one Chromium); Engine configures their engines.
	Browser browser.Config
	Engine  browser.EngineConfig
	// Launch starts pool browsers; nil means Chromium (ChromiumLauncher).
	Launch Launcher
	// Extract configures the extraction strategies (LLM endpoints).
	Extract extract.Config
	// JanitorEvery is the janitor's period (default 30 s); PushEvery the
	// WebSocket's (default 2 s).
	JanitorEvery time.Duration
	PushEvery    time.Duration
	// Pressure reports memory use from 0 to 1; nil means the process
	// tree against its cgroup limit, as measured (tests inject one).
	Pressure func() float64
	// Now is the clock of every time-driven decision (idle browsers, task
	// expiry). Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// FromEnv applies the spec's environment variables (SERVICE_API_TOKEN,
// MAX_CONCURRENT_TASKS) to cfg where getenv has them.
func (c *Config) FromEnv(getenv func(string) string) error {
	if t := getenv("SERVICE_API_TOKEN"); t != "" {
		c.Token = t
	}
	if v := getenv("MAX_CONCURRENT_TASKS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return fmt.Errorf("MAX_CONCURRENT_TASKS=%q: want an integer from 1 to 1000", v)
		}
		c.MaxConcurrentTasks = n
	}
	return nil
}

func (c *Config) defaults() {
	if c.MaxConcurrentTasks <= 0 {
		c.MaxConcurrentTasks = DefaultMaxConcurrentTasks
	}
	if c.MaxQueuedTasks <= 0 {
		c.MaxQueuedTasks = DefaultMaxQueuedTasks
	}
	if c.DefaultTTL <= 0 {
		c.DefaultTTL = DefaultTTL
	}
	if c.PagesPerBrowser <= 0 {
		c.PagesPerBrowser = browser.DefaultPagesPerBrowser
	}
	if c.JanitorEvery <= 0 {
		c.JanitorEvery = DefaultJanitorEvery
	}
	if c.PushEvery <= 0 {
		c.PushEvery = DefaultPushEvery
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Browser.AllowPrivateNetworks = c.AllowPrivateNetworks
	if c.Launch == nil {
		c.Launch = ChromiumLauncher(c.Browser, c.Engine, c.PagesPerBrowser, c.Logger)
	}
}

// Server is the self-hosted crawl server: the task API, the browser pool
// tiers and the operations monitor. Create it with New, serve Handler,
// stop it with Close.
type Server struct {
	cfg     Config
	log     *slog.Logger
	st      *store.Store
	tasks   taskStore
	sched   *scheduler
	pool    *Pool
	mon     *monitor
	sampler *sysstat.Sampler
	started time.Time

	sampleMu  sync.Mutex
	last      sysstat.Sample
	sampledAt time.Time

	life    context.Context
	endLife context.CancelFunc
	bg      sync.WaitGroup
	once    sync.Once
}

// New opens the task store, starts the permanent browser, resumes the
// tasks a previous run accepted and did not finish, and starts the
// janitor.
func New(ctx context.Context, cfg Config) (*Server, error) {
	cfg.defaults()
	if cfg.DataDir == "" {
		return nil, errors.New("crawl: DataDir is required")
	}
	dir := filepath.Join(cfg.DataDir, "crawl")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("crawl: %w", err)
	}
	st, err := store.Open(dir, &store.Options{Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("crawl: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, st: st, tasks: taskStore{st}, mon: newMonitor(cfg.Now),
		sampler: sysstat.New(), started: cfg.Now()}
	s.life, s.endLife = context.WithCancel(context.Background())
	s.refreshSample()
	if cfg.Pressure == nil {
		cfg.Pressure = s.pressure
	}
	s.pool, err = NewPool(ctx, PoolConfig{Launch: cfg.Launch, PagesPerBrowser: cfg.PagesPerBrowser, MaxBrowsers: cfg.MaxBrowsers,
		Now: cfg.Now, Pressure: cfg.Pressure, Logger: cfg.Logger, Janitor: s.mon.logJanitor})
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("crawl: %w", err)
	}
	s.sched = newScheduler(cfg.MaxConcurrentTasks, cfg.MaxQueuedTasks, s.runTask)
	if err := s.resume(); err != nil {
		s.Close()
		return nil, err
	}
	s.bg.Go(s.janitor)
	return s, nil
}

// resume queues the tasks accepted before a restart and not finished.
func (s *Server) resume() error {
	var n int
	err := s.tasks.each(func(t *Task) error {
		if t.Status != StatusPending && t.Status != StatusProcessing {
			return nil
		}
		n++
		return s.sched.push(&queued{priority: t.Priority, seq: t.Seq, taskID: t.ID}, true)
	})
	if n > 0 {
		s.log.Info("crawl: resumed unfinished tasks", "tasks", n)
	}
	return err
}

// Close stops taking work, cancels running tasks (they resume at the next
// start), closes every browser and the store.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		s.endLife()
		s.sched.close()
		s.bg.Wait()
		err = errors.Join(s.pool.Close(), s.st.Close())
	})
	return err
}

// janitor runs the pool sweep, the task expiry and the timeline samples.
func (s *Server) janitor() {
	sweep := time.NewTicker(s.cfg.JanitorEvery)
	sample := time.NewTicker(timelineStep)
	defer sweep.Stop()
	defer sample.Stop()
	for {
		select {
		case <-s.life.Done():
			return
		case <-sweep.C:
			s.pool.Sweep(false)
			if n, err := s.tasks.sweep(s.cfg.Now()); err != nil {
				s.log.Warn("crawl: task sweep", "err", err)
			} else if n > 0 {
				s.log.Info("crawl: expired tasks removed", "tasks", n)
			}
		case <-sample.C:
			s.takeSample()
		}
	}
}

// refreshSample measures the process tree, at most once a second (CPU
// percentages need a window; several WebSocket clients share one).
func (s *Server) refreshSample() sysstat.Sample {
	s.sampleMu.Lock()
	defer s.sampleMu.Unlock()
	if !s.sampledAt.IsZero() && time.Since(s.sampledAt) < time.Second {
		return s.last
	}
	smp, err := s.sampler.Sample()
	s.sampledAt = time.Now()
	if err != nil {
		s.log.Debug("crawl: system sample", "err", err)
		return s.last
	}
	s.last = smp
	return smp
}

func (s *Server) lastSample() sysstat.Sample {
	s.sampleMu.Lock()
	defer s.sampleMu.Unlock()
	return s.last
}

func (s *Server) pressure() float64 { return s.lastSample().Pressure() }

func (s *Server) takeSample() {
	smp := s.refreshSample()
	perm, hot, cold, _ := s.pool.Browsers()
	_, running := s.sched.counts()
	s.mon.sample(TimelinePoint{Timestamp: unixSeconds(s.cfg.Now()), CPUPercent: round1(smp.CPUPercent),
		MemoryPercent: round1(smp.MemoryPercent), MemoryMB: round1(mbOf(smp.MemoryBytes)),
		Browsers: len(perm) + len(hot) + len(cold), ActiveTasks: running})
}

// Handler serves every route of the crawl server.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	route := func(pattern, method string, h http.HandlerFunc) {
		mux.Handle(pattern, s.only(method, h))
	}
	mux.HandleFunc("/health", s.handleHealth)
	route("/crawl", http.MethodPost, s.tracked("/crawl", s.handleCrawl))
	route("/crawl/stream", http.MethodPost, s.handleStream)
	route("/task/{task_id}", http.MethodGet, s.tracked("/task/{task_id}", s.handleTask))
	route("/monitor/health", http.MethodGet, s.handleMonitorHealth)
	route("/monitor/requests", http.MethodGet, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, s.mon.requests()) })
	route("/monitor/browsers", http.MethodGet, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, s.browsersPayload()) })
	route("/monitor/endpoints/stats", http.MethodGet, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, s.mon.endpointStats()) })
	route("/monitor/timeline", http.MethodGet, s.handleTimeline)
	route("/monitor/logs/janitor", http.MethodGet, s.handleJanitorLog)
	route("/monitor/logs/errors", http.MethodGet, s.handleErrorLog)
	route("/monitor/actions/cleanup", http.MethodPost, s.tracked("/monitor/actions/cleanup", s.handleCleanup))
	route("/monitor/actions/kill_browser", http.MethodPost, s.tracked("/monitor/actions/kill_browser", s.handleKill))
	route("/monitor/actions/restart_browser", http.MethodPost, s.tracked("/monitor/actions/restart_browser", s.handleRestart))
	route("/monitor/stats/reset", http.MethodPost, s.handleReset) // not tracked: it would count itself
	route("/monitor/ws", http.MethodGet, s.handleWS)
	dash := dashboard.Handler()
	mux.Handle("/dashboard", s.only(http.MethodGet, dash.ServeHTTP))
	mux.Handle("/dashboard/", s.only(http.MethodGet, dash.ServeHTTP))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no route %s %s; see docs/crawl-server.md", r.Method, r.URL.Path))
	})
	return s.auth(mux)
}

// only answers 405 with a JSON body for other methods.
func (s *Server) only(method string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", method)
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, method))
			return
		}
		h(w, r)
	})
}

// auth enforces the token on every route but /health. The WebSocket and
// the dashboard page also take it as ?token= (a browser cannot set the
// header on them).
func (s *Server) auth(next http.Handler) http.Handler {
	if s.cfg.Token == "" {
		return next
	}
	want := []byte(s.cfg.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The dashboard's script and style sheet are static and hold no
		// data; the page's <script> and <link> tags cannot carry the token.
		if r.URL.Path == "/health" || strings.HasPrefix(r.URL.Path, "/dashboard/") {
			next.ServeHTTP(w, r)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok && (r.URL.Path == "/monitor/ws" || r.URL.Path == "/dashboard") {
			got, ok = r.URL.Query().Get("token"), r.URL.Query().Has("token")
		}
		if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="trawl-crawl"`)
			msg := "this server needs its API token: send Authorization: Bearer <SERVICE_API_TOKEN>"
			if ok {
				msg = "the API token is not valid"
			}
			writeError(w, http.StatusUnauthorized, "unauthorized", msg)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// statusWriter remembers the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// tracked records a request in the monitor under endpoint.
func (s *Server) tracked(endpoint string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a := s.mon.begin(endpoint, "", "")
		sw := &statusWriter{ResponseWriter: w}
		h(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		ok := sw.status < 500
		msg := ""
		if !ok {
			msg = fmt.Sprintf("%s answered HTTP %d", endpoint, sw.status)
		}
		s.mon.finish(a, ok, sw.status, msg)
	}
}

// errorBody is every error's JSON. detail repeats message for clients
// written against FastAPI servers, which read "detail".
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	Detail  string `json:"detail"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{Error: code, Message: msg, Detail: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":"internal","message":"answer could not be encoded","detail":"answer could not be encoded"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// readPlan reads and validates a crawl request body.
func (s *Server) readPlan(w http.ResponseWriter, r *http.Request) (*Request, *plan, []byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body is over %d bytes", maxRequestBytes))
		} else {
			writeError(w, http.StatusBadRequest, "bad_input", "request body could not be read")
		}
		return nil, nil, nil, false
	}
	req, err := decodeRequest(body)
	var p *plan
	if err == nil {
		p, err = s.compile(req)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_input", err.Error())
		return nil, nil, nil, false
	}
	return req, p, body, true
}

func (s *Server) handleCrawl(w http.ResponseWriter, r *http.Request) {
	_, p, body, ok := s.readPlan(w, r)
	if !ok {
		return
	}
	if s.sched.full() {
		writeError(w, http.StatusServiceUnavailable, "no_slots", ErrNoSlots.Error())
		return
	}
	t := &Task{ID: newTaskID(), Status: StatusPending, Priority: p.priority, TTL: int64(p.ttl / time.Second),
		CreatedAt: unixSeconds(s.cfg.Now()), Request: json.RawMessage(body), Seq: s.sched.nextSeq()}
	for _, u := range p.urls {
		t.URLs = append(t.URLs, u.String())
	}
	if err := s.tasks.put(t); err != nil {
		s.log.Error("crawl: task not stored", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "the task could not be stored; nothing was queued")
		return
	}
	if err := s.sched.push(&queued{priority: t.Priority, seq: t.Seq, taskID: t.ID}, true); err != nil {
		writeError(w, http.StatusServiceUnavailable, "no_slots", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"task_id": t.ID, "status": t.Status})
}

// runTask runs a stored task on a worker.
func (s *Server) runTask(id string) {
	t, err := s.tasks.get(id)
	if err != nil {
		s.log.Warn("crawl: queued task not found", "task_id", id, "err", err)
		return
	}
	if t.Status != StatusPending && t.Status != StatusProcessing {
		return
	}
	t.Status = StatusProcessing
	t.StartedAt = unixSeconds(s.cfg.Now())
	if err := s.tasks.put(t); err != nil {
		s.log.Error("crawl: task not updated", "task_id", id, "err", err)
		return
	}
	finish := func() {
		t.FinishedAt = unixSeconds(s.cfg.Now())
		t.ExpiresAt = t.FinishedAt + float64(t.TTL)
		if err := s.tasks.putFinished(t); err != nil {
			s.log.Error("crawl: task result not stored", "task_id", id, "err", err)
		}
	}
	req, err := decodeRequest(t.Request)
	var p *plan
	if err == nil {
		p, err = s.compile(req)
	}
	if err != nil {
		t.Status, t.Error = StatusFailed, "the stored request is no longer valid: "+err.Error()
		finish()
		return
	}
	first := ""
	if len(t.URLs) > 0 {
		first = t.URLs[0]
		if len(t.URLs) > 1 {
			first += fmt.Sprintf(" (+%d)", len(t.URLs)-1)
		}
	}
	a := s.mon.begin("/crawl (task)", first, id)
	ctx, cancel := context.WithTimeout(s.life, deadlineFor(p))
	defer cancel()
	results := s.crawlAll(ctx, p, id, nil)
	if s.life.Err() != nil {
		// Shutting down: the task stays processing and runs again after
		// the restart.
		s.mon.finish(a, false, 0, "server shut down; the task resumes at the next start")
		return
	}
	t.Results = results
	t.Status = StatusCompleted
	okAll := true
	for _, r := range results {
		okAll = okAll && r.Success
	}
	s.mon.finish(a, okAll, 0, "")
	finish()
}

// taskView is GET /task/{task_id}: the task, with result (one URL) or
// results (several).
type taskView struct {
	*Task
	// Request shadows the stored request, which is not answered back.
	Request json.RawMessage `json:"request,omitempty"`
	Result  *Result         `json:"result,omitempty"`
	Results []*Result       `json:"results,omitempty"`
}

func (s *Server) handleTask(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("task_id")
	t, err := s.tasks.get(id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && t.ExpiresAt > 0 && t.ExpiresAt <= unixSeconds(s.cfg.Now())) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no task %q (unknown, or expired after its ttl)", id))
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "the task could not be read")
		return
	}
	v := taskView{Task: t}
	if t.Status == StatusCompleted {
		if len(t.URLs) == 1 && len(t.Results) == 1 {
			v.Result = t.Results[0]
		} else {
			v.Results = t.Results
		}
	}
	t.Results = nil
	writeJSON(w, http.StatusOK, v)
}

// handleStream runs a crawl in a slot of the task workers and writes one
// NDJSON line per URL as it completes, then {"status":"completed"}.
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request) {
	a := s.mon.begin("/crawl/stream", "", "")
	sw := &statusWriter{ResponseWriter: w}
	ok, msg := s.stream(sw, r)
	s.mon.finish(a, ok, sw.status, msg)
}

func (s *Server) stream(w *statusWriter, r *http.Request) (bool, string) {
	_, p, _, ok := s.readPlan(w, r)
	if !ok {
		return true, ""
	}
	done := make(chan struct{})
	var okAll = true
	q := &queued{priority: p.priority, run: func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(r.Context(), deadlineFor(p))
		defer cancel()
		stop := context.AfterFunc(s.life, cancel)
		defer stop()
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		w.Flush()
		enc := json.NewEncoder(w)
		s.crawlAll(ctx, p, "", func(res *Result) {
			okAll = okAll && res.Success
			enc.Encode(res)
			w.Flush()
		})
		status := StatusCompleted
		if ctx.Err() != nil {
			status = StatusFailed
		}
		enc.Encode(map[string]string{"status": status})
		w.Flush()
	}}
	if err := s.sched.push(q, false); err != nil {
		writeError(w, http.StatusServiceUnavailable, "no_slots", err.Error())
		return false, err.Error()
	}
	select {
	case <-done:
	case <-r.Context().Done():
		if s.sched.remove(q) {
			return false, "client went away while the stream was queued"
		}
		<-done
	}
	return okAll, ""
}

// healthPayload is GET /monitor/health (spec 2.5).
type healthPayload struct {
	Status    string `json:"status"`
	Container struct {
		CPUPercent    float64 `json:"cpu_percent"`
		MemoryPercent float64 `json:"memory_percent"`
		MemoryMB      float64 `json:"memory_mb"`
		MemoryLimitMB float64 `json:"memory_limit_mb"`
		UptimeSeconds float64 `json:"uptime_seconds"`
		Processes     int     `json:"processes"`
	} `json:"container"`
	Pool struct {
		Permanent struct {
			Active    bool   `json:"active"`
			BrowserID string `json:"browser_id"`
		} `json:"permanent"`
		Hot struct {
			Count int `json:"count"`
		} `json:"hot"`
		Cold struct {
			Count int `json:"count"`
		} `json:"cold"`
	} `json:"pool"`
	Stats stats `json:"stats"`
}

func (s *Server) health() healthPayload {
	var h healthPayload
	smp := s.lastSample()
	h.Container.CPUPercent = round1(smp.CPUPercent)
	h.Container.MemoryPercent = round1(smp.MemoryPercent)
	h.Container.MemoryMB = round1(mbOf(smp.MemoryBytes))
	h.Container.MemoryLimitMB = round1(mbOf(smp.MemoryLimitBytes))
	h.Container.UptimeSeconds = round1(s.cfg.Now().Sub(s.started).Seconds())
	h.Container.Processes = smp.Processes
	active, id := s.pool.PermanentActive()
	h.Pool.Permanent.Active, h.Pool.Permanent.BrowserID = active, id
	_, hot, cold, _ := s.pool.Browsers()
	h.Pool.Hot.Count, h.Pool.Cold.Count = len(hot), len(cold)
	h.Stats = s.mon.stats()
	h.Stats.QueuedTasks, h.Stats.RunningTasks = s.sched.counts()
	h.Status = "ok"
	if !active {
		h.Status = "degraded"
	}
	return h
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	active, _ := s.pool.PermanentActive()
	status := "ok"
	if !active {
		status = "degraded"
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": status, "timestamp": unixSeconds(s.cfg.Now()), "version": Version})
}

// Version is reported by /health.
var Version = "0.7.7-trawl"

func (s *Server) handleMonitorHealth(w http.ResponseWriter, r *http.Request) {
	s.refreshSample()
	writeJSON(w, http.StatusOK, s.health())
}

// BrowsersPayload is GET /monitor/browsers.
type BrowsersPayload struct {
	Summary struct {
		TotalCount       int     `json:"total_count"`
		TotalMemoryMB    float64 `json:"total_memory_mb"`
		ReuseRatePercent float64 `json:"reuse_rate_percent"`
	} `json:"summary"`
	Permanent []BrowserInfo `json:"permanent"`
	Hot       []BrowserInfo `json:"hot"`
	Cold      []BrowserInfo `json:"cold"`
}

func (s *Server) browsersPayload() BrowsersPayload {
	var b BrowsersPayload
	var rate float64
	b.Permanent, b.Hot, b.Cold, rate = s.pool.Browsers()
	b.Summary.ReuseRatePercent = rate
	for _, l := range [][]BrowserInfo{b.Permanent, b.Hot, b.Cold} {
		for _, bi := range l {
			b.Summary.TotalCount++
			b.Summary.TotalMemoryMB += bi.MemoryMB
		}
	}
	b.Summary.TotalMemoryMB = round1(b.Summary.TotalMemoryMB)
	return b
}

// intParam reads a positive integer query parameter with a default and a
// maximum; ok false means the answer (400) was written.
func intParam(w http.ResponseWriter, r *http.Request, name string, def, max int) (int, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		writeError(w, http.StatusBadRequest, "bad_input", fmt.Sprintf("%s must be an integer from 1 to %d, got %q", name, max, v))
		return 0, false
	}
	return n, true
}

func (s *Server) handleTimeline(w http.ResponseWriter, r *http.Request) {
	if n, ok := intParam(w, r, "minutes", 5, int(keepTimeline/time.Minute)); ok {
		writeJSON(w, http.StatusOK, s.mon.timelineSince(n))
	}
}

func (s *Server) handleJanitorLog(w http.ResponseWriter, r *http.Request) {
	if n, ok := intParam(w, r, "limit", 100, keepJanitor); ok {
		writeJSON(w, http.StatusOK, s.mon.janitorLog(n))
	}
}

func (s *Server) handleErrorLog(w http.ResponseWriter, r *http.Request) {
	if n, ok := intParam(w, r, "limit", 100, keepErrors); ok {
		writeJSON(w, http.StatusOK, s.mon.errorLog(n))
	}
}

func (s *Server) handleCleanup(w http.ResponseWriter, r *http.Request) {
	n, mb := s.pool.Sweep(true)
	noun := "browsers"
	if n == 1 {
		noun = "browser"
	}
	msg := fmt.Sprintf("cleanup: %d idle %s removed, %.1f MB freed", n, noun, mb)
	s.mon.logJanitor(JanitorEntry{Timestamp: unixSeconds(s.cfg.Now()), Message: msg, Action: "cleanup", MemoryFreedMB: mb})
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "cleaned_count": n, "memory_freed_mb": mb})
}

// browserIDBody reads {"browser_id": "..."}.
func browserIDBody(w http.ResponseWriter, r *http.Request) (string, bool) {
	var b struct {
		BrowserID string `json:"browser_id"`
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4096))
	if err == nil {
		err = json.Unmarshal(body, &b)
	}
	if err != nil || b.BrowserID == "" {
		writeError(w, http.StatusBadRequest, "bad_input", `send {"browser_id": "<id from /monitor/browsers>"}`)
		return "", false
	}
	return b.BrowserID, true
}

func (s *Server) handleKill(w http.ResponseWriter, r *http.Request) {
	id, ok := browserIDBody(w, r)
	if !ok {
		return
	}
	if err := s.pool.Kill(id); err != nil {
		s.browserActionError(w, id, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "browser_id": id, "message": "browser " + id + " killed"})
}

func (s *Server) handleRestart(w http.ResponseWriter, r *http.Request) {
	id, ok := browserIDBody(w, r)
	if !ok {
		return
	}
	if err := s.pool.Restart(id); err != nil {
		s.browserActionError(w, id, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "browser_id": id, "message": "browser " + id + " restarted"})
}

func (s *Server) browserActionError(w http.ResponseWriter, id string, err error) {
	if errors.Is(err, errUnknownBrowser) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no browser %q in the pool; see /monitor/browsers", id))
		return
	}
	s.log.Error("crawl: browser action failed", "browser_id", id, "err", err)
	writeError(w, http.StatusInternalServerError, "internal", err.Error())
}

func (s *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	s.mon.reset()
	s.pool.ResetStats()
	s.mon.logJanitor(JanitorEntry{Timestamp: unixSeconds(s.cfg.Now()), Message: "statistics reset on request", Action: "stats_reset"})
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "message": "statistics reset"})
}

// wsMessage is one push of /monitor/ws (spec 6).
type wsMessage struct {
	Timestamp float64         `json:"timestamp"`
	Health    healthPayload   `json:"health"`
	Requests  RequestsPayload `json:"requests"`
	Browsers  BrowsersPayload `json:"browsers"`
	Errors    []ErrorEntry    `json:"errors"`
}

func (s *Server) snapshot() wsMessage {
	return wsMessage{Timestamp: unixSeconds(s.cfg.Now()), Health: s.health(), Requests: s.mon.requests(),
		Browsers: s.browsersPayload(), Errors: s.mon.recentErrors(time.Minute)}
}

// handleWS pushes a snapshot at once and then every PushEvery until the
// client leaves or the server stops.
func (s *Server) handleWS(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept wrote the answer
	}
	defer c.CloseNow()
	ctx := c.CloseRead(r.Context())
	stop := context.AfterFunc(s.life, func() { c.Close(websocket.StatusGoingAway, "server shutting down") })
	defer stop()
	t := time.NewTicker(s.cfg.PushEvery)
	defer t.Stop()
	for {
		s.refreshSample()
		b, err := json.Marshal(s.snapshot())
		if err != nil {
			return
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = c.Write(wctx, websocket.MessageText, b)
		cancel()
		if err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

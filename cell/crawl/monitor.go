package crawl

import (
	"cmp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Sizes of the monitor's rings.
const (
	keepCompleted = 100
	keepErrors    = 500
	keepJanitor   = 500
	timelineStep  = 5 * time.Second
	keepTimeline  = 60 * time.Minute
)

// ActiveRequest is a request (or a crawl task) in progress.
type ActiveRequest struct {
	ID        string `json:"id"`
	Endpoint  string `json:"endpoint"`
	URL       string `json:"url,omitempty"`
	TaskID    string `json:"task_id,omitempty"`
	StartedAt Number `json:"started_at"`
	ElapsedMS Number `json:"elapsed_ms"`
	started   time.Time
	// quiet requests (task polls) count in the endpoint statistics but
	// stay out of the active and completed lists, which are for work.
	quiet bool
}

// CompletedRequest is a finished request (or crawl task).
type CompletedRequest struct {
	ID         string `json:"id"`
	Endpoint   string `json:"endpoint"`
	URL        string `json:"url,omitempty"`
	TaskID     string `json:"task_id,omitempty"`
	Success    bool   `json:"success"`
	StatusCode int    `json:"status_code,omitempty"`
	LatencyMS  Number `json:"latency_ms"`
	FinishedAt Number `json:"finished_at"`
	Error      string `json:"error,omitempty"`
}

// ErrorEntry is a line of the error log.
type ErrorEntry struct {
	Timestamp Number `json:"timestamp"`
	Message   string `json:"message"`
	Endpoint  string `json:"endpoint,omitempty"`
	URL       string `json:"url,omitempty"`
	TaskID    string `json:"task_id,omitempty"`
	Status    int    `json:"status_code,omitempty"`
	// ErrorType classifies the error as Crawl4AI 0.7.7's log does:
	// http_error (the site answered 4xx/5xx) or crawl_error.
	ErrorType string `json:"error_type"`
}

// EndpointStats are one endpoint's figures since the last reset.
type EndpointStats struct {
	Count              int64  `json:"count"`
	Errors             int64  `json:"errors"`
	AvgLatencyMS       Number `json:"avg_latency_ms"`
	SuccessRatePercent Number `json:"success_rate_percent"`
	totalMS            float64
}

// TimelinePoint is one sample of the timeline.
type TimelinePoint struct {
	Timestamp     Number `json:"timestamp"`
	CPUPercent    Number `json:"cpu_percent"`
	MemoryPercent Number `json:"memory_percent"`
	MemoryMB      Number `json:"memory_mb"`
	Requests      int64  `json:"requests"`
	Errors        int64  `json:"errors"`
	AvgLatencyMS  Number `json:"avg_latency_ms"`
	Browsers      int    `json:"browsers"`
	ActiveTasks   int    `json:"active_tasks"`
}

// monitor keeps what the operations monitor shows. Everything but the
// logs and the timeline is cleared by a stats reset.
type monitor struct {
	now  func() time.Time
	next atomic.Int64

	mu        sync.Mutex
	active    map[string]*ActiveRequest
	completed []CompletedRequest // ring, newest last
	endpoints map[string]*EndpointStats
	total     int64
	successes int64
	totalMS   float64
	errors    []ErrorEntry
	janitor   []JanitorEntry
	timeline  []TimelinePoint
	// since the last timeline sample
	winRequests, winErrors int64
	winMS                  float64
}

func newMonitor(now func() time.Time) *monitor {
	return &monitor{now: now, active: map[string]*ActiveRequest{}, endpoints: map[string]*EndpointStats{}}
}

// begin records the start of a request; finish must follow.
func (m *monitor) begin(endpoint, url, taskID string) *ActiveRequest {
	return m.beginAs(endpoint, url, taskID, false)
}

// beginQuiet records the start of a request that is counted but not
// listed (see ActiveRequest.quiet).
func (m *monitor) beginQuiet(endpoint string) *ActiveRequest {
	return m.beginAs(endpoint, "", "", true)
}

func (m *monitor) beginAs(endpoint, url, taskID string, quiet bool) *ActiveRequest {
	now := m.now()
	a := &ActiveRequest{ID: "r" + strconv.FormatInt(m.next.Add(1), 10), Endpoint: endpoint, URL: url, TaskID: taskID,
		StartedAt: unixSeconds(now), started: now, quiet: quiet}
	m.mu.Lock()
	m.active[a.ID] = a
	m.mu.Unlock()
	return a
}

// finish records the end of a request. A non-empty errMsg also goes to
// the error log (a task whose pages failed logs each page instead).
func (m *monitor) finish(a *ActiveRequest, success bool, status int, errMsg string) {
	now := m.now()
	ms := float64(now.Sub(a.started).Microseconds()) / 1000
	c := CompletedRequest{ID: a.ID, Endpoint: a.Endpoint, URL: a.URL, TaskID: a.TaskID, Success: success,
		StatusCode: status, LatencyMS: round1(ms), FinishedAt: unixSeconds(now), Error: errMsg}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.active, a.ID)
	if !a.quiet {
		m.completed = appendRing(m.completed, c, keepCompleted)
	}
	st := m.endpoints[a.Endpoint]
	if st == nil {
		st = &EndpointStats{}
		m.endpoints[a.Endpoint] = st
	}
	st.Count++
	st.totalMS += ms
	m.total++
	m.totalMS += ms
	m.winRequests++
	m.winMS += ms
	if success {
		m.successes++
	} else {
		st.Errors++
		m.winErrors++
	}
	if errMsg != "" {
		m.errors = appendRing(m.errors, ErrorEntry{Timestamp: c.FinishedAt, Message: errMsg, Endpoint: a.Endpoint,
			URL: a.URL, TaskID: a.TaskID, Status: status}, keepErrors)
	}
}

func (m *monitor) logError(e ErrorEntry) {
	if e.ErrorType == "" {
		e.ErrorType = "crawl_error"
		if e.Status >= 400 {
			e.ErrorType = "http_error"
		}
	}
	m.mu.Lock()
	m.errors = appendRing(m.errors, e, keepErrors)
	m.mu.Unlock()
}

func (m *monitor) logJanitor(e JanitorEntry) {
	m.mu.Lock()
	m.janitor = appendRing(m.janitor, e, keepJanitor)
	m.mu.Unlock()
}

func appendRing[T any](s []T, v T, max int) []T {
	if len(s) >= max {
		copy(s, s[1:])
		s = s[:len(s)-1]
	}
	return append(s, v)
}

// RequestsPayload is GET /monitor/requests.
type RequestsPayload struct {
	Active    []ActiveRequest    `json:"active"`
	Completed []CompletedRequest `json:"completed"`
}

func (m *monitor) requests() RequestsPayload {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := RequestsPayload{Active: make([]ActiveRequest, 0, len(m.active)), Completed: make([]CompletedRequest, 0, len(m.completed))}
	for _, a := range m.active {
		if a.quiet {
			continue
		}
		c := *a
		c.ElapsedMS = round1(float64(now.Sub(a.started).Microseconds()) / 1000)
		out.Active = append(out.Active, c)
	}
	slices.SortFunc(out.Active, func(a, b ActiveRequest) int { return cmp.Compare(a.StartedAt, b.StartedAt) })
	for i := len(m.completed) - 1; i >= 0; i-- { // newest first
		out.Completed = append(out.Completed, m.completed[i])
	}
	return out
}

// stats is the stats part of the health payload.
type stats struct {
	TotalRequests      int64  `json:"total_requests"`
	SuccessRatePercent Number `json:"success_rate_percent"`
	AvgLatencyMS       Number `json:"avg_latency_ms"`
	ActiveRequests     int    `json:"active_requests"`
	QueuedTasks        int    `json:"queued_tasks"`
	RunningTasks       int    `json:"running_tasks"`
}

func (m *monitor) stats() stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := stats{TotalRequests: m.total, SuccessRatePercent: 100, ActiveRequests: len(m.active)}
	if m.total > 0 {
		s.SuccessRatePercent = round1(100 * float64(m.successes) / float64(m.total))
		s.AvgLatencyMS = round1(m.totalMS / float64(m.total))
	}
	return s
}

func (m *monitor) endpointStats() map[string]EndpointStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]EndpointStats, len(m.endpoints))
	for k, v := range m.endpoints {
		e := *v
		if e.Count > 0 {
			e.AvgLatencyMS = round1(e.totalMS / float64(e.Count))
			e.SuccessRatePercent = round1(100 * float64(e.Count-e.Errors) / float64(e.Count))
		}
		out[k] = e
	}
	return out
}

// errorLog returns the newest limit errors, newest first.
func (m *monitor) errorLog(limit int) []ErrorEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return newestFirst(m.errors, limit)
}

// recentErrors are the errors of the last minute, for the WebSocket.
func (m *monitor) recentErrors(window time.Duration) []ErrorEntry {
	cut := unixSeconds(m.now().Add(-window))
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []ErrorEntry{}
	for i := len(m.errors) - 1; i >= 0 && m.errors[i].Timestamp >= cut && len(out) < 20; i-- {
		out = append(out, m.errors[i])
	}
	return out
}

func (m *monitor) janitorLog(limit int) []JanitorEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return newestFirst(m.janitor, limit)
}

func newestFirst[T any](s []T, limit int) []T {
	if limit <= 0 || limit > len(s) {
		limit = len(s)
	}
	out := make([]T, 0, limit)
	for i := len(s) - 1; i >= 0 && len(out) < limit; i-- {
		out = append(out, s[i])
	}
	return out
}

// sample appends a timeline point made of p and the request counts since
// the previous sample.
func (m *monitor) sample(p TimelinePoint) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p.Requests, p.Errors = m.winRequests, m.winErrors
	if m.winRequests > 0 {
		p.AvgLatencyMS = round1(m.winMS / float64(m.winRequests))
	}
	m.winRequests, m.winErrors, m.winMS = 0, 0, 0
	max := int(keepTimeline / timelineStep)
	m.timeline = appendRing(m.timeline, p, max)
}

// TimelinePayload is GET /monitor/timeline.
type TimelinePayload struct {
	Minutes         int             `json:"minutes"`
	IntervalSeconds Number          `json:"interval_seconds"`
	Points          []TimelinePoint `json:"points"`
	// Memory (memory_percent), Requests and Browsers are the same
	// samples as series of {timestamp, value}: what Crawl4AI 0.7.7's
	// release demo reads (timeline['memory'][-1]['value']).
	Memory   []SeriesPoint `json:"memory"`
	Requests []SeriesPoint `json:"requests"`
	Browsers []SeriesPoint `json:"browsers"`
}

// SeriesPoint is one sample of one timeline series.
type SeriesPoint struct {
	Timestamp Number `json:"timestamp"`
	Value     Number `json:"value"`
}

func (m *monitor) timelineSince(minutes int) TimelinePayload {
	cut := unixSeconds(m.now().Add(-time.Duration(minutes) * time.Minute))
	m.mu.Lock()
	defer m.mu.Unlock()
	out := TimelinePayload{Minutes: minutes, IntervalSeconds: Number(timelineStep.Seconds()), Points: []TimelinePoint{},
		Memory: []SeriesPoint{}, Requests: []SeriesPoint{}, Browsers: []SeriesPoint{}}
	for _, p := range m.timeline {
		if p.Timestamp >= cut {
			out.Points = append(out.Points, p)
			out.Memory = append(out.Memory, SeriesPoint{p.Timestamp, p.MemoryPercent})
			out.Requests = append(out.Requests, SeriesPoint{p.Timestamp, Number(p.Requests)})
			out.Browsers = append(out.Browsers, SeriesPoint{p.Timestamp, Number(p.Browsers)})
		}
	}
	return out
}

// reset clears the accumulated statistics; the logs and the timeline
// stay (they are history, not counters).
func (m *monitor) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.completed = nil
	m.endpoints = map[string]*EndpointStats{}
	m.total, m.successes, m.totalMS = 0, 0, 0
	m.winRequests, m.winErrors, m.winMS = 0, 0, 0
}

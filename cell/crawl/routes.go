package crawl

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/trawlhq/trawl/cell/crawl/dashboard"
)

// Handler serves every route of the crawl server.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	route := func(pattern, method string, h http.HandlerFunc) {
		mux.Handle(pattern, s.only(method, h))
	}
	mux.HandleFunc("/health", s.handleHealth)
	route("/crawl", http.MethodPost, s.tracked("/crawl", s.handleCrawl))
	route("/crawl_sync", http.MethodPost, s.tracked("/crawl_sync", s.handleCrawlSync))
	route("/crawl_direct", http.MethodPost, s.tracked("/crawl_direct", s.handleCrawlDirect))
	route("/crawl/stream", http.MethodPost, s.handleStream)
	route("/task/{task_id}", http.MethodGet, s.polled("/task/{task_id}", s.handleTask))
	// Crawl4AI 0.5+'s routes (c4a_handlers.go); /crawl and /crawl/stream
	// serve both APIs, by the body's shape.
	route("/crawl/job", http.MethodPost, s.tracked("/crawl/job", s.handleCrawlJob))
	route("/crawl/job/{task_id}", http.MethodGet, s.polled("/crawl/job/{task_id}", s.handleCrawlJobStatus))
	route("/md", http.MethodPost, s.tracked("/md", s.handleMD))
	route("/html", http.MethodPost, s.tracked("/html", s.handleHTML))
	route("/screenshot", http.MethodPost, s.tracked("/screenshot", s.handleScreenshot))
	route("/pdf", http.MethodPost, s.tracked("/pdf", s.handlePDF))
	route("/execute_js", http.MethodPost, s.tracked("/execute_js", s.handleExecuteJS))
	route("/token", http.MethodPost, s.handleToken)
	route("/schema", http.MethodGet, s.handleSchema)
	route("/ask", http.MethodGet, s.handleAsk)
	route("/config/dump", http.MethodPost, s.handleConfigDump)
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
		if r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			// Crawl4AI v0.4's root: clients and load balancers probe it.
			writeJSON(w, http.StatusOK, map[string]string{"message": "Crawl4AI API service is running",
				"server": "trawl crawl " + Version, "dashboard": "/dashboard"})
			return
		}
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no route %s %s; see docs/crawl-server.md", r.Method, r.URL.Path))
	})
	// /llm/{url} carries a URL in its path ("/llm/https://example.org"),
	// which the mux would clean and redirect: it is routed before.
	// So does Crawl4AI 0.5's GET /md/{url}.
	llmRoute := s.only(http.MethodGet, s.tracked("/llm", s.handleLLM))
	mdRoute := s.only(http.MethodGet, s.tracked("/md", s.handleMDGet))
	top := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/llm/") {
			llmRoute.ServeHTTP(w, r)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/md/") {
			mdRoute.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
	return s.cors(s.auth(top))
}

// cors answers cross-origin calls as Crawl4AI v0.4 did (any origin, any
// method and header, credentials allowed), or from Config.CORSOrigins
// only. A preflight is answered before the token check: browsers send it
// without the Authorization header.
func (s *Server) cors(next http.Handler) http.Handler {
	if s.cfg.NoCORS {
		return next
	}
	allowed := map[string]bool{}
	for _, o := range s.cfg.CORSOrigins {
		allowed[strings.TrimRight(o, "/")] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		if len(allowed) > 0 && !allowed[origin] {
			next.ServeHTTP(w, r)
			return
		}
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS, HEAD")
			if rh := r.Header.Get("Access-Control-Request-Headers"); rh != "" {
				h.Set("Access-Control-Allow-Headers", rh)
			}
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusOK)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearerToken reads an Authorization header's bearer token; the scheme is
// case-insensitive (RFC 9110 §11.1), so "bearer x" is accepted as
// Crawl4AI's FastAPI server accepted it.
func bearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
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
		// The root answers only that the service runs, as /health does.
		if r.URL.Path == "/health" || r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, "/dashboard/") {
			next.ServeHTTP(w, r)
			return
		}
		got, ok := bearerToken(r.Header.Get("Authorization"))
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

// polled counts a request in the endpoint statistics without listing it
// among the monitor's requests (GET /task polls would crowd the crawls
// out of the last 100).
func (s *Server) polled(endpoint string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a := s.mon.beginQuiet(endpoint)
		sw := &statusWriter{ResponseWriter: w}
		h(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		s.mon.finish(a, sw.status < 500, sw.status, "")
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

// Package dashboard serves the crawl server's operations dashboard: one page
// (HTML, a script and a style sheet embedded in the binary; nothing loaded
// from elsewhere) that watches the monitor API.
//
// The page opens the WebSocket /monitor/ws on its own origin and re-renders on
// every message (health, pool tiers, active and recent requests, errors); it
// polls /monitor/logs/janitor, /monitor/logs/errors and
// /monitor/endpoints/stats every 2 s and /monitor/timeline?minutes=5 every
// 10 s for its chart, and its buttons post to /monitor/actions/cleanup,
// /monitor/actions/kill_browser, /monitor/actions/restart_browser and
// /monitor/stats/reset. When the page's URL carries ?token=X, the page sends
// "Authorization: Bearer X" with every fetch and appends ?token=X to the
// WebSocket URL (a browser cannot set headers on a WebSocket), so the monitor
// must accept the token in that query parameter on /monitor/ws.
//
// Values a test reads have stable ids (#cpu-percent, #ws-status, …) and carry
// the raw value from the payload in a data-value attribute beside the
// formatted text.
package dashboard

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

// Path is where the page is served. Its assets are under Path + "/", and the
// page calls the monitor API at /monitor on the same origin.
const Path = "/dashboard"

//go:embed static
var static embed.FS

// contentSecurityPolicy keeps the page to its own origin: its own script and
// style only, fetches and the WebSocket to the same host.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

type asset struct {
	body  []byte
	ctype string
	etag  string
}

type handler struct {
	assets map[string]asset // by name under static/
}

// Handler serves the dashboard: the page at Path and Path+"/", its script and
// style sheet at Path+"/<name>". Mount it at both:
//
//	mux.Handle(dashboard.Path, dashboard.Handler())
//	mux.Handle(dashboard.Path+"/", dashboard.Handler())
//
// It answers GET and HEAD only and does no authentication of its own: the
// page holds no data until the monitor API, which checks the token, answers.
func Handler() http.Handler {
	h := &handler{assets: map[string]asset{}}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		ctype := mime.TypeByExtension(path.Ext(p))
		if ctype == "" {
			ctype = http.DetectContentType(b)
		}
		sum := sha256.Sum256(b)
		h.assets[strings.TrimPrefix(p, "static/")] = asset{
			body:  b,
			ctype: ctype,
			etag:  `"` + hex.EncodeToString(sum[:8]) + `"`,
		}
		return nil
	})
	if err != nil {
		// The files are compiled in; failing to read them is a build fault.
		panic("dashboard: embedded assets: " + err.Error())
	}
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, Path)
	if !ok {
		http.NotFound(w, r)
		return
	}
	name := strings.TrimPrefix(rest, "/")
	if name == "" {
		name = "index.html"
	}
	a, ok := h.assets[name]
	if !ok || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", a.ctype)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("Referrer-Policy", "no-referrer") // the page URL may carry the token
	// Revalidate every time: a new binary must not be shadowed by a cached
	// script, and the ETag makes the check cheap.
	hd.Set("Cache-Control", "no-cache")
	hd.Set("ETag", a.etag)
	if match := r.Header.Get("If-None-Match"); match != "" && match == a.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if r.Method == http.MethodHead {
		return
	}
	w.Write(a.body)
}

package crawl

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/testlog"

	"github.com/trawlhq/trawl/internal/browsertest"
)

// fakeClock is the injectable clock of the janitor and the task expiry.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testServer is a crawl server on a loopback port with real Chromium.
type testServer struct {
	*Server
	URL  string
	http *httptest.Server
	cfg  Config
}

// startServer starts a crawl server in dir (a new temporary one when
// empty), closed at cleanup.
func startServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	browsertest.Require(t)
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.AllowPrivateNetworks = true
	cfg.Browser.DriverDir = browsertest.DriverDir()
	if p := os.Getenv("PLAYWRIGHT_NODEJS_PATH"); p != "" {
		cfg.Browser.NodePath = p
	}
	if cfg.Logger == nil {
		cfg.Logger = testlog.New(t, slog.LevelInfo)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	hs := httptest.NewServer(s.Handler())
	ts := &testServer{Server: s, URL: hs.URL, http: hs, cfg: cfg}
	t.Cleanup(ts.stop)
	return ts
}

func (ts *testServer) stop() {
	ts.http.CloseClientConnections()
	ts.http.Close()
	ts.Server.Close()
}

// call sends a request and decodes the JSON answer into out (when not
// nil), returning the status.
func call(t testing.TB, method, url, token string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") && out != nil {
		t.Fatalf("%s %s: Content-Type %q, body %s", method, url, ct, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, url, err, raw)
		}
	}
	return resp.StatusCode
}

// taskAnswer is GET /task/{id} as a client reads it.
type taskAnswer struct {
	TaskID  string    `json:"task_id"`
	Status  string    `json:"status"`
	Error   string    `json:"error"`
	Result  *Result   `json:"result"`
	Results []*Result `json:"results"`
}

// submit posts a crawl and returns its task id.
func submit(t testing.TB, base, token string, req any) string {
	t.Helper()
	var out struct {
		TaskID string `json:"task_id"`
	}
	if st := call(t, "POST", base+"/crawl", token, req, &out); st != 200 || out.TaskID == "" {
		t.Fatalf("POST /crawl: status %d, task_id %q", st, out.TaskID)
	}
	return out.TaskID
}

// poll is the legacy client's loop: GET the task every interval until it
// is completed (or failed), for at most limit.
func poll(t testing.TB, base, token, id string, interval, limit time.Duration) *taskAnswer {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		var a taskAnswer
		if st := call(t, "GET", base+"/task/"+id, token, nil, &a); st != 200 {
			t.Fatalf("GET /task/%s: status %d", id, st)
		}
		switch a.Status {
		case StatusCompleted, StatusFailed:
			return &a
		case StatusPending, StatusProcessing:
		default:
			t.Fatalf("task %s: unknown status %q", id, a.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s still %s after %s", id, a.Status, limit)
		}
		time.Sleep(interval)
	}
}

// site serves testdata/site, the extraction fixtures and a few dynamic
// pages on loopback.
type site struct {
	*httptest.Server
	gate chan struct{} // /slow waits on it
	hits sync.Map      // path → *int64 not needed; count via mu
	mu   sync.Mutex
	seen map[string]int
}

func startSite(t testing.TB) *site {
	t.Helper()
	s := &site{gate: make(chan struct{}), seen: map[string]int{}}
	files := http.FileServer(http.Dir("testdata/site"))
	mux := http.NewServeMux()
	mux.Handle("/", files)
	// The extraction fixtures are pages of the site too (the products page
	// is json_css's own fixture, in internal/cssschema).
	for name, file := range map[string]string{
		"products.html": "../../internal/cssschema/testdata/products.html",
		"article.html":  "extract/testdata/article.html",
	} {
		mux.HandleFunc("/"+name, func(w http.ResponseWriter, r *http.Request) {
			http.ServeFile(w, r, file)
		})
	}
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-s.gate:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, `<!DOCTYPE html><html><head><title>Slow</title></head><body><main><h1>Slow page</h1><p>It came at last, after the gate opened for it.</p></main></body></html>`)
	})
	mux.HandleFunc("/ua", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `<!DOCTYPE html><html><head><title>UA</title></head><body><main><h1>Your agent</h1><p id="ua">`+
			strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(r.UserAgent())+`</p><p id="h">`+r.Header.Get("X-Trawl-Test")+`</p></main></body></html>`)
	})
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seen[r.URL.Path]++
		s.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		s.release()
		s.Close()
	})
	return s
}

var releaseOnce sync.Map

func (s *site) release() {
	if _, loaded := releaseOnce.LoadOrStore(s, true); !loaded {
		close(s.gate)
	}
}

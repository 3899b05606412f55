package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/browsertest"
	"github.com/trawlhq/trawl/internal/testwait"
)

// crawlCall sends a request to the crawl server with the token.
func crawlCall(t *testing.T, base, token, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s %s: %d, not JSON: %s", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode, m
}

// marked counts the live processes whose environment holds mark: the
// trawl process and everything it started (driver, Chromium).
func marked(mark string) int {
	n := 0
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		env, err := os.ReadFile(d + "/environ")
		if err != nil || !bytes.Contains(env, []byte(mark)) {
			continue
		}
		if st, err := os.ReadFile(d + "/stat"); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
				continue // a zombie waits for its parent; it holds nothing
			}
		}
		n++
	}
	return n
}

// TestCrawlServerProcess runs `trawl crawl` as a user would: the token from
// SERVICE_API_TOKEN, a task through the legacy client loop, a SIGKILL in
// the middle of a task, a restart that finishes it, and no process of the
// first run left behind.
func TestCrawlServerProcess(t *testing.T) {
	browsertest.Require(t)
	gate := make(chan struct{})
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		io.WriteString(w, `<!DOCTYPE html><html><head><title>Tide page</title></head><body><main><h1>Tides at `+r.URL.Path+`</h1><div id="x"></div>
<script>document.getElementById('x').textContent = 'Rendered by script: the ebb runs south along the breakwater.'</script></main></body></html>`)
	}))
	defer site.Close()
	defer func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	}()
	const token = "e2e-token"
	mark := "TRAWL_E2E_MARK=" + strings.ToLower(rand.Text()[:12])
	data := t.TempDir()
	env := []string{"SERVICE_API_TOKEN=" + token, "MAX_CONCURRENT_TASKS=2", mark}
	args := []string{"crawl", "--listen", "127.0.0.1:0", "--data", data, "--allow-private-networks"}
	p := launch(t, env, "crawl server serving", args...)

	if code, m := crawlCall(t, p.base, "", "GET", "/health", ""); code != 200 || m["status"] != "ok" {
		t.Fatalf("/health: %d %v", code, m)
	}
	if code, m := crawlCall(t, p.base, "", "POST", "/crawl", `{"urls":"`+site.URL+`/a"}`); code != 401 || m["error"] != "unauthorized" {
		t.Fatalf("without the token: %d %v", code, m)
	}
	submit := func(base, path string) string {
		code, m := crawlCall(t, base, token, "POST", "/crawl", `{"urls":"`+site.URL+path+`"}`)
		id, _ := m["task_id"].(string)
		if code != 200 || id == "" {
			t.Fatalf("submit %s: %d %v", path, code, m)
		}
		return id
	}
	status := func(base, id string) (string, map[string]any) {
		code, m := crawlCall(t, base, token, "GET", "/task/"+id, "")
		if code != 200 {
			t.Fatalf("task %s: %d %v", id, code, m)
		}
		res, _ := m["result"].(map[string]any)
		return m["status"].(string), res
	}
	done := submit(p.base, "/first")
	var res map[string]any
	testwait.Until(t, 300*time.Second, "the first task", func() bool {
		var st string
		st, res = status(p.base, done)
		return st == "completed"
	})

	if md, _ := res["markdown"].(string); !strings.Contains(md, "ebb runs south") {
		t.Fatalf("markdown: %q", md)
	}
	cut := submit(p.base, "/slow")
	testwait.Until(t, 60*time.Second, "the slow task to run", func() bool {
		st, _ := status(p.base, cut)
		return st == "processing"
	})

	before := marked(mark)
	p.kill(t)
	testwait.Until(t, 30*time.Second, "the killed server's driver and browsers to go", func() bool { return marked(mark) == 0 })
	t.Logf("SIGKILL with %d processes of the server running; 0 left", before)

	p2 := launch(t, env, "crawl server serving", args...)
	if st, res := status(p2.base, done); st != "completed" || res == nil {
		t.Fatalf("finished task after the restart: %s", st)
	}
	close(gate)
	testwait.Until(t, 120*time.Second, "the cut-off task to finish after the restart", func() bool {
		st, res := status(p2.base, cut)
		return st == "completed" && res != nil && res["success"] == true
	})

	if err := p2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p2.done
	if n := marked(mark); n != 0 {
		t.Fatalf("%d processes left after SIGTERM", n)
	}
}

// TestCellServesCrawlServer: `trawl cell --crawl-listen` serves the crawl
// server beside the cell API, with the cell's data directory.
func TestCellServesCrawlServer(t *testing.T) {
	browsertest.Require(t)
	data := t.TempDir()
	p := launch(t, nil, "crawl server serving", "cell", "--listen", "127.0.0.1:0", "--data", data,
		"--browsers", "0", "--crawl-listen", "127.0.0.1:0", "--allow-private-networks")
	if code, m := crawlCall(t, p.base, "", "GET", "/monitor/health", ""); code != 200 || m["pool"] == nil {
		t.Fatalf("/monitor/health: %d %v", code, m)
	}
	if _, err := os.Stat(filepath.Join(data, "crawl")); err != nil {
		t.Fatalf("tasks not under the cell's data directory: %v", err)
	}
}

package main

// Process tests: the real bin/trawl, started as a client would start it,
// spoken to over HTTP, killed with SIGKILL where crash safety is claimed.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/testcorpus"
	"github.com/trawlhq/trawl/internal/testwait"
)

var trawlBin string

func TestMain(m *testing.M) {
	// make test builds bin/trawl first and passes it in TRAWL_BIN; a bare
	// `go test` builds its own.
	if p := os.Getenv("TRAWL_BIN"); p != "" {
		if _, err := os.Stat(p); err == nil {
			trawlBin = p
		}
	}
	if trawlBin == "" {
		dir, err := os.MkdirTemp("", "trawl-bin")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(dir)
		trawlBin = filepath.Join(dir, "trawl")
		out, err := exec.Command("go", "build", "-o", trawlBin, ".").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build trawl: %v\n%s", err, out)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// proc is a running trawl process.
type proc struct {
	cmd  *exec.Cmd
	base string // http://addr
	mu   sync.Mutex
	log  bytes.Buffer
	done chan struct{}
	// account is the account call signs for (default acct_e2e).
	account string
}

// e2eRegionKeys are the region keys of every process the tests start.
const e2eRegionKeys = "6532652072656769f06e206b657973206f6620746865207465737473212121ff"

// startTrawl starts `trawl <args...> --listen 127.0.0.1:0` and waits until it
// logs its address and answers /health.
func startTrawl(t *testing.T, args ...string) *proc {
	t.Helper()
	p := launch(t, nil, "cell serving", append(args, "--listen", "127.0.0.1:0")...)
	testwait.Until(t, 10*time.Second, "health", func() bool {
		resp, err := http.Get(p.base + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})

	return p
}

// launch starts trawl with args (and extra environment) and waits for the log
// line ready; its addr (or api) field becomes the base URL.
func launch(t *testing.T, env []string, ready string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(trawlBin, args...), done: make(chan struct{})}
	// Every process of a test shares the test region's keys (a test may
	// name others in env: later entries win).
	p.cmd.Env = append(append(os.Environ(), regionauth.EnvKeys+"="+e2eRegionKeys), env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			p.mu.Lock()
			p.log.Write(line)
			p.log.WriteByte('\n')
			p.mu.Unlock()
			var rec struct{ Msg, Addr, API string }
			if json.Unmarshal(line, &rec) == nil && rec.Msg == ready {
				select {
				case addr <- rec.Addr + rec.API:
				default:
				}
			}
		}
		p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("trawl %v log:\n%s", args, p.logs())
		}
	})
	select {
	case a := <-addr:
		p.base = "http://" + a
	case <-p.done:
		t.Fatalf("trawl exited before serving:\n%s", p.logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("trawl did not start:\n%s", p.logs())
	}
	return p
}

func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

func (p *proc) call(t *testing.T, method, path string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		r = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, p.base+path, r)
	req.Header.Set("Content-Type", "application/json")
	// A cell answers only what its region's gate signs: sign as the gate
	// would, for the tests' account, with private networks allowed.
	account := p.account
	if account == "" {
		account = "acct_e2e"
	}
	keys, _ := regionauth.ParseKeys(e2eRegionKeys)
	keys.Sign(req, regionauth.Claims{Account: account, Private: true}, time.Now())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	// A job submission or retry is held until its gate, having charged it,
	// releases it: release it as the gate's meter would.
	if u, err := metering.Parse(resp.Header.Get(metering.Header)); err == nil && u.Hold != "" {
		rel, _ := http.NewRequest("POST", p.base+"/scrape/jobs/"+u.Job+metering.ReleasePath, nil)
		rel.Header.Set(metering.HoldHeader, u.Hold)
		keys.Sign(rel, regionauth.Claims{Account: account, Private: true}, time.Now())
		rr, err := http.DefaultClient.Do(rel)
		if err != nil {
			t.Fatalf("release %s: %v", u.Job, err)
		}
		rb, _ := io.ReadAll(rr.Body)
		rr.Body.Close()
		if rr.StatusCode != http.StatusOK {
			t.Fatalf("release %s: %d %s", u.Job, rr.StatusCode, rb)
		}
	}
	return resp.StatusCode, out
}

type jobStatus struct {
	Status                      string
	Total, Pending, Done, Error int
}

func (p *proc) jobStatus(t *testing.T, id string) jobStatus {
	t.Helper()
	code, b := p.call(t, "GET", "/scrape/jobs/"+id, nil)
	if code != 200 {
		t.Fatalf("job status %d: %s", code, b)
	}
	var s jobStatus
	json.Unmarshal(b, &s)
	return s
}

type resultLine struct {
	URL    string `json:"url"`
	OK     bool   `json:"ok"`
	Error  string `json:"error"`
	Result struct {
		Status      int    `json:"status"`
		Markdown    string `json:"markdown"`
		ContentHash string `json:"content_hash"`
	} `json:"result"`
}

// results pages through a job's results exactly as the API tells clients to.
func (p *proc) results(t *testing.T, id string) []resultLine {
	t.Helper()
	var all []resultLine
	for {
		code, b := p.call(t, "GET", fmt.Sprintf("/scrape/jobs/%s/results?after=%d", id, len(all)), nil)
		if code != 200 {
			t.Fatalf("results %d: %s", code, b)
		}
		page := resultLines(t, b)
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
	}
}

// resultLines parses a page of NDJSON result lines.
func resultLines(t *testing.T, b []byte) []resultLine {
	t.Helper()
	var out []resultLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var l resultLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("bad result line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

func corpusURLs(t *testing.T, n int) (*testcorpus.Server, []string) {
	pages := testcorpus.Pages(t, testcorpus.PostgresDocs)
	srv := testcorpus.Serve(t, testcorpus.PostgresDocs)
	urls := make([]string, n)
	for i := range urls {
		// Distinct URLs, so each is a real fetch and a real result line.
		urls[i] = fmt.Sprintf("%s/%s?v=%d", srv.URL, pages[i%len(pages)], i)
	}
	return srv, urls
}

// TestJobSurvivesKill9 is the crash test of the issue: SIGKILL in the middle
// of a 2,000-URL job, restart on the same data directory, and every URL is in
// the results exactly once.
func TestJobSurvivesKill9(t *testing.T) {
	_, urls := corpusURLs(t, 2000)
	data := t.TempDir()
	p := startTrawl(t, "cell", "--data", data, "--allow-private-networks")
	code, b := p.call(t, "POST", "/scrape/jobs", map[string]any{"urls": urls, "format": "md"})
	if code != 202 {
		t.Fatalf("submit: %d %s", code, b)
	}
	var sub struct {
		JobID string `json:"job_id"`
	}
	json.Unmarshal(b, &sub)

	var before jobStatus
	testwait.Until(t, 60*time.Second, "the job to be under way", func() bool {
		before = p.jobStatus(t, sub.JobID)
		return before.Done >= 200
	})

	p.kill(t)
	if before.Done >= 2000 {
		t.Fatalf("the job finished before the kill (%+v): nothing was tested", before)
	}
	t.Logf("killed with %d of 2000 done", before.Done)

	p2 := startTrawl(t, "cell", "--data", data, "--allow-private-networks")
	var after jobStatus
	testwait.Until(t, 120*time.Second, "the job to finish after restart", func() bool {
		after = p2.jobStatus(t, sub.JobID)
		return after.Status == "done"
	})

	if after.Total != 2000 || after.Done != 2000 || after.Error != 0 {
		t.Fatalf("after restart: %+v", after)
	}
	lines := p2.results(t, sub.JobID)
	if len(lines) != 2000 {
		t.Fatalf("%d result lines, want 2000", len(lines))
	}
	seen := make(map[string]int, len(urls))
	for _, l := range lines {
		seen[l.URL]++
		if !l.OK || l.Result.ContentHash == "" {
			t.Fatalf("bad line for %s: ok=%v error=%q", l.URL, l.OK, l.Error)
		}
	}
	for _, u := range urls {
		if seen[u] != 1 {
			t.Fatalf("%s appears %d times", u, seen[u])
		}
	}
}

// TestCorpus scrapes, batches and runs a 1,000-URL job against a real
// documentation set served from loopback.
func TestCorpus(t *testing.T) {
	srv, urls := corpusURLs(t, 1000)
	p := startTrawl(t, "cell", "--data", t.TempDir(), "--allow-private-networks")

	code, b := p.call(t, "POST", "/scrape", map[string]any{"url": srv.URL + "/sql-createtable.html", "parse": map[string]bool{"tables": true, "metadata": true}})
	if code != 200 {
		t.Fatalf("scrape: %d %s", code, b)
	}
	var r struct {
		Title    string `json:"title"`
		Markdown string `json:"markdown"`
		Parsed   struct {
			Metadata struct{ Title string }
		} `json:"parsed"`
	}
	json.Unmarshal(b, &r)
	for _, want := range []string{"CREATE TABLE", "```", "## Description"} {
		if !strings.Contains(r.Markdown, want) {
			t.Errorf("CREATE TABLE page lacks %q", want)
		}
	}
	if strings.Contains(r.Markdown, "Prev") && strings.Contains(r.Markdown, "Next") && strings.Contains(r.Markdown, "Home") {
		t.Errorf("navigation kept in Markdown")
	}
	if !strings.Contains(r.Parsed.Metadata.Title, "CREATE TABLE") {
		t.Errorf("metadata title %q", r.Parsed.Metadata.Title)
	}

	// A batch of 50 distinct pages: 50 lines, all ok.
	code, b = p.call(t, "POST", "/scrape/batch", map[string]any{"urls": urls[:50], "format": "md"})
	if code != 200 {
		t.Fatalf("batch: %d %s", code, b)
	}
	n := 0
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var l resultLine
		if err := json.Unmarshal(line, &l); err != nil || !l.OK || l.Result.Markdown == "" {
			t.Fatalf("batch line %s: %v", line, err)
		}
		n++
	}
	if n != 50 {
		t.Fatalf("batch gave %d lines", n)
	}

	code, b = p.call(t, "POST", "/scrape/jobs", map[string]any{"urls": urls, "format": "md"})
	if code != 202 {
		t.Fatalf("submit: %d %s", code, b)
	}
	var sub struct {
		JobID string `json:"job_id"`
	}
	json.Unmarshal(b, &sub)
	testwait.Until(t, 120*time.Second, "the 1,000-URL job", func() bool { return p.jobStatus(t, sub.JobID).Status == "done" })
	lines := p.results(t, sub.JobID)
	if len(lines) != 1000 {
		t.Fatalf("%d lines", len(lines))
	}
	for _, l := range lines {
		if !l.OK || l.Result.Status != 200 || l.Result.Markdown == "" {
			t.Fatalf("line %+v", l)
		}
	}
}

// TestSSRFRefusedByTheRealProcess runs the cell as deployed (private networks
// refused) and checks the spec's refusals end to end.
func TestSSRFRefusedByTheRealProcess(t *testing.T) {
	srv := testcorpus.Serve(t, testcorpus.PostgresDocs)
	p := startTrawl(t, "cell", "--data", t.TempDir())
	for _, u := range []string{
		srv.URL + "/index.html",
		"http://2130706433/",
		"http://[::ffff:127.0.0.1]/",
		"http://[::1]/",
		"http://0x7f.1/",
		"http://localhost/",
		"http://10.0.0.1/",
		"http://169.254.169.254/",
	} {
		code, b := p.call(t, "POST", "/scrape", map[string]string{"url": u})
		if code != 400 || !strings.Contains(string(b), "url host is not public") {
			t.Errorf("%s: %d %s", u, code, b)
		}
	}
	code, b := p.call(t, "POST", "/scrape", map[string]string{"url": "javascript:alert(1)"})
	if code != 400 || !strings.Contains(string(b), "url must start with http:// or https://") {
		t.Errorf("javascript: %d %s", code, b)
	}
	if srv.Hits() != 0 {
		t.Fatalf("the loopback server was reached %d times", srv.Hits())
	}
}

package cell

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/scrape"
)

// TestBatchesAndJobsWaitOutABusyFleet: with more job workers than page
// slots, a URL of a job or a batch that meets a full browser fleet
// (fleet-busy) pauses and asks again instead of failing; a single /scrape
// still answers 503 fleet-busy at once.
func TestBatchesAndJobsWaitOutABusyFleet(t *testing.T) {
	site := newWallSite(t)
	fb := &fakeBrowser{}
	tc := newTestCell(t, func(c *Config) {
		c.BrowserEngine = fb
		c.JobConcurrency = 4
		c.busyBackoff = 5 * time.Millisecond
	})

	// A job of JavaScript pages: the browser refuses the first 12 calls.
	fb.busyFor.Store(12)
	var urls []string
	for i := range 6 {
		urls = append(urls, fmt.Sprintf("%q", fmt.Sprintf("%s/app?job=%d", site.URL, i)))
	}
	resp, b := tc.post(t, "/scrape/jobs", `{"urls":[`+strings.Join(urls, ",")+`]}`)
	if resp.StatusCode != 202 {
		t.Fatalf("submit: %d %s", resp.StatusCode, b)
	}
	id := decode[map[string]string](t, b)["job_id"]
	s := tc.waitJob(t, id, func(s jobStatus) bool { return s.Status == "done" })
	if s.Done != 6 || s.Error != 0 {
		_, full := tc.get(t, "/scrape/jobs/"+id+"?full=1")
		t.Fatalf("job: %+v\n%s", s, full)
	}
	if n := fb.calls.Load(); n != 6+12 {
		t.Errorf("the browser was asked %d times; want 18 (6 pages, 12 refusals)", n)
	}
	for _, l := range tc.allResults(t, id) {
		if l["ok"] != true {
			t.Errorf("job line %v", l)
		}
	}

	// A batch likewise.
	fb.calls.Store(0)
	fb.busyFor.Store(8)
	urls = urls[:0]
	for i := range 4 {
		urls = append(urls, fmt.Sprintf("%q", fmt.Sprintf("%s/app?batch=%d", site.URL, i)))
	}
	resp, b = tc.post(t, "/scrape/batch", `{"urls":[`+strings.Join(urls, ",")+`]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("batch: %d %s", resp.StatusCode, b)
	}
	lines := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines++
		if l := decode[map[string]any](t, sc.Bytes()); l["ok"] != true {
			t.Errorf("batch line %v", l)
		}
	}
	if lines != 4 || fb.calls.Load() != 4+8 {
		t.Errorf("batch: %d lines, %d browser calls; want 4 and 12", lines, fb.calls.Load())
	}

	// A single scrape does not wait: 503 at once, for its caller to repeat.
	fb.calls.Store(0)
	fb.busyFor.Store(1)
	resp, b = tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q}`, site.URL+"/app?single=1"))
	if r := decode[scrapeResp](t, b); resp.StatusCode != 503 || r.Error != "fleet-busy" || resp.Header.Get(UsageHeader) != "" || fb.calls.Load() != 1 {
		t.Fatalf("single scrape: %d %s, %d browser calls", resp.StatusCode, b, fb.calls.Load())
	}
}

// TestBusyWaitIsBounded: a fleet that stays busy fails a job's URL with
// fleet-busy once FleetBusyWait has passed, and closing the cell ends a
// wait at once, leaving the URL pending for the next start.
func TestBusyWaitIsBounded(t *testing.T) {
	site := newWallSite(t)
	fb := &fakeBrowser{}
	fb.busy.Store(true)
	tc := newTestCell(t, func(c *Config) {
		c.BrowserEngine = fb
		c.FleetBusyWait = 300 * time.Millisecond
		c.busyBackoff = 20 * time.Millisecond
	})
	start := time.Now()
	_, b := tc.post(t, "/scrape/jobs", fmt.Sprintf(`{"urls":[%q]}`, site.URL+"/app"))
	id := decode[map[string]string](t, b)["job_id"]
	s := tc.waitJob(t, id, func(s jobStatus) bool { return s.Status == "done" })
	took := time.Since(start)
	_, b = tc.get(t, "/scrape/jobs/"+id+"?full=1")
	full := decode[jobStatus](t, b)
	if s.Error != 1 || len(full.URLs) != 1 || full.URLs[0].Error != "fleet-busy" {
		t.Fatalf("job: %s", b)
	}
	if n := fb.calls.Load(); n < 3 || took < 300*time.Millisecond || took > 10*time.Second {
		t.Errorf("%d browser calls in %s; want several, within the 300 ms wait and a little more", n, took)
	}

	// Shutdown in the middle of a long pause.
	dir := t.TempDir()
	cfg := Config{DataDir: dir, AllowPrivateNetworks: true, RegionKeys: testKeys, BrowserEngine: fb, busyBackoff: time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var opts scrape.Options
	if err := opts.Normalize(); err != nil {
		t.Fatal(err)
	}
	id, err = c.jobs.Submit(testAccount, []string{site.URL + "/app?shutdown"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	fb.calls.Store(0)
	deadline := time.Now().Add(10 * time.Second)
	for fb.calls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	closeStart := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(closeStart); d > 5*time.Second {
		t.Errorf("Close took %s during a fleet-busy pause", d)
	}
	fb.busy.Store(false)
	c, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	js, err := c.jobs.Status(id, testAccount, false)
	if err != nil {
		t.Fatal(err)
	}
	if js.Pending != 1 && js.Done != 1 {
		t.Errorf("after a restart the URL is neither pending nor done: %+v", js)
	}
}

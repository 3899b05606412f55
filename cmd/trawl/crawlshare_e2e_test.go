package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/browsertest"
	"github.com/trawlhq/trawl/internal/testwait"
)

// crawlBase waits for the crawl server beside a cell process and returns
// its address.
func crawlBase(t *testing.T, p *proc) string {
	t.Helper()
	var addr string
	testwait.Until(t, 60*time.Second, "the crawl server beside the cell", func() bool {
		for _, line := range strings.Split(p.logs(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "crawl server serving" {
				addr, _ = rec["addr"].(string)
			}
		}
		return addr != ""
	})
	return "http://" + addr
}

// crawlShared is a crawl server's /health tasks_shared, nil when it does
// not answer or does not share.
func crawlShared(base string) *struct{ Shared bool } {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(base + "/health")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var h struct {
		TasksShared *struct{ Shared bool } `json:"tasks_shared"`
	}
	if json.NewDecoder(resp.Body).Decode(&h) != nil {
		return nil
	}
	return h.TasksShared
}

// tasksShared is each crawl server's tasks_shared counters, for the log.
func tasksShared(names []string, bases map[string]string) []string {
	var out []string
	for _, name := range names {
		c := http.Client{Timeout: 2 * time.Second}
		if resp, err := c.Get(bases[name] + "/health"); err == nil {
			var h map[string]any
			json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			out = append(out, fmt.Sprintf("%s %v", name, h["tasks_shared"]))
		}
	}
	return out
}

// TestSharedCrawlTasksSurviveKillLoop is issue 33's kill loop for the
// crawl server: three clustered cells, each with a crawl server beside
// it; 150 four-page tasks submitted to c2's while c2 (the owner) and c3
// are killed with SIGKILL ten times at random moments, each restarted
// on its data directory. Every task is completed exactly once, with both
// pages, on the server that accepted it.
func TestSharedCrawlTasksSurviveKillLoop(t *testing.T) {
	browsertest.Require(t)
	const tasks, pages, kills = 150, 4, 10
	site := newSlowSite(t, 400*time.Millisecond)
	r := startShareRegion(t, 3, 4, "--crawl-listen", "127.0.0.1:0", "--max-concurrent-tasks", "3", "--crawl-cache-for", "0")
	bases := map[string]string{}
	for _, name := range r.names {
		bases[name] = crawlBase(t, r.cells[name].p)
	}
	waitShared := func(within time.Duration) {
		t.Helper()
		testwait.Until(t, within, "every crawl server sharing tasks", func() bool {
			for _, name := range r.names {
				if sh := crawlShared(bases[name]); sh == nil || !sh.Shared {
					return false
				}
			}
			return true
		})
	}
	waitShared(60 * time.Second)

	type task struct {
		id   string
		urls []string
	}
	var all []task
	for i := range tasks {
		urls := site.urls(fmt.Sprintf("task%d", i), pages)
		b, _ := json.Marshal(map[string]any{"urls": urls, "priority": 1 + i%10})
		code, m := crawlCall(t, bases["c2"], "", "POST", "/crawl", string(b))
		id, _ := m["task_id"].(string)
		if code != 200 || id == "" {
			t.Fatalf("submit: %d %v", code, m)
		}
		all = append(all, task{id: id, urls: urls})
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 34))
	start := time.Now()
	var killedAt []time.Time
	for k := range kills {
		time.Sleep(time.Duration(500+rng.IntN(2500)) * time.Millisecond)
		victim := "c3"
		if k%3 == 1 {
			victim = "c2" // the owner, now and then
		}
		running := tasksShared(r.names, bases)
		r.cells[victim].p.kill(t)
		killedAt = append(killedAt, time.Now())
		t.Logf("kill %d: %s (%s)", k+1, victim, strings.Join(running, "; "))
		time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
		r.startCell(t, r.cells[victim])
		bases[victim] = crawlBase(t, r.cells[victim].p)
	}
	t.Logf("%d kills in %v", kills, time.Since(start).Round(100*time.Millisecond))
	waitShared(90 * time.Second)

	// Every task completed, with its two pages, on the owner.
	type answer struct {
		Status  string
		Error   string
		Results []struct {
			URL      string
			Success  bool
			Markdown string
		}
	}
	done := 0
	var last string
	if err := testwait.Poll(4*time.Minute, func() bool {
		done = 0
		for _, tk := range all {
			c := http.Client{Timeout: 5 * time.Second}
			resp, err := c.Get(bases["c2"] + "/task/" + tk.id)
			if err != nil {
				return false
			}
			var a answer
			err = json.NewDecoder(resp.Body).Decode(&a)
			resp.Body.Close()
			if err != nil {
				return false
			}
			if a.Status == "failed" {
				t.Fatalf("task %s failed: %s", tk.id, a.Error)
			}
			if a.Status != "completed" {
				last = tk.id + " " + a.Status
				continue
			}
			done++
			if len(a.Results) != pages {
				t.Fatalf("task %s: %d results", tk.id, len(a.Results))
			}
			for i, res := range a.Results {
				if res.URL != tk.urls[i] || !res.Success || !strings.Contains(res.Markdown, "took its time to answer") {
					t.Fatalf("task %s: result %d %+v", tk.id, i, res)
				}
			}
		}
		return done == tasks
	}); err != nil {
		t.Fatalf("%v: %d of %d tasks completed (still waiting: %s)", err, done, tasks, last)
	}
	// A page asked again was cut by a kill: asked again by another
	// cell within 30 s of the kill that cut it (AckWait 15 s after the
	// last heartbeat, at most 5 s before it).
	twice := 0
	var worst time.Duration
	asked := 0
	var again [][]time.Time
	for i := range tasks {
		for _, at := range site.requests(fmt.Sprintf("task%d", i)) {
			asked++
			if len(at) > 1 {
				again = append(again, at)
			}
		}
	}
	if asked != tasks*pages {
		t.Errorf("the site was asked for %d distinct pages, want %d", asked, tasks*pages)
	}
	for _, at := range again {
		twice++
		var cut time.Time
		for _, k := range killedAt {
			if k.After(at[0]) && k.Before(at[1]) {
				cut = k
				break
			}
		}
		if !cut.IsZero() {
			worst = max(worst, at[1].Sub(cut))
		}
	}
	if worst > 30*time.Second {
		t.Errorf("a task cut by a kill went on %v after it, want within 30 s", worst)
	}
	stats := tasksShared(r.names, bases)
	t.Logf("%d tasks completed %v after the first kill; %d pages asked of the site more than once (tasks cut by a kill run again, at most %v after the kill); %s",
		tasks, time.Since(start).Round(100*time.Millisecond), twice, worst.Round(100*time.Millisecond), strings.Join(stats, "; "))
}

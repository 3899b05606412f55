package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/testwait"
)

// recipeShare is a cell's /health recipe_share.
type recipeShare struct {
	Shared      bool  `json:"shared"`
	Queued      int64 `json:"queued"`
	Ran         int64 `json:"ran"`
	Applied     int64 `json:"applied"`
	Duplicates  int64 `json:"duplicates"`
	Redelivered int64 `json:"redelivered"`
	Running     int64 `json:"running"`
}

func getRecipeShare(base string) (recipeShare, error) {
	var h struct {
		RecipeShare recipeShare `json:"recipe_share"`
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(base + "/health")
	if err != nil {
		return h.RecipeShare, err
	}
	defer resp.Body.Close()
	return h.RecipeShare, json.NewDecoder(resp.Body).Decode(&h)
}

// holdSite answers /hold/<q> once released (before: it waits), and every
// other page at once, with two rows; it records when each was asked for.
type holdSite struct {
	*httptest.Server
	release chan struct{}
	mu      sync.Mutex
	hits    map[string][]time.Time
}

func newHoldSite(t *testing.T) *holdSite {
	s := &holdSite{release: make(chan struct{}), hits: map[string][]time.Time{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("q")
		if q == "" {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		s.hits[q] = append(s.hits[q], time.Now())
		s.mu.Unlock()
		if strings.HasPrefix(q, "hold") {
			select {
			case <-s.release:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!doctype html><html><body><ul><li>%s one</li><li>%s two</li></ul></body></html>", q, q)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *holdSite) asked(q string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.hits[q]...)
}

// recipeJob is GET /recipes/jobs/{id}'s answer.
type recipeJob struct {
	Status string           `json:"status"`
	Rows   []map[string]any `json:"rows"`
	Units  int              `json:"units"`
}

func gateRecipeJob(gate, id string) (recipeJob, int, error) {
	var j recipeJob
	a, err := tryGateCall("GET", gate+"/recipes/jobs/"+id, "")
	if err != nil {
		return j, 0, err
	}
	if a.status != 200 {
		return j, a.status, fmt.Errorf("%d %.200s", a.status, a.body)
	}
	return j, a.status, json.Unmarshal(a.body, &j)
}

// TestRecipeRunsSurviveKill9: background recipe runs are work items of
// the region (cell/recipe/share.go). Six runs held by their page fill the
// three cells' six runners; a cell is killed with -9 mid-run. Its two
// runs are run again by the others, its own runs are answered through
// the gate by another cell from the region's log while it is down, and
// once it is back every run is done with its rows and charged exactly
// once.
func TestRecipeRunsSurviveKill9(t *testing.T) {
	site := newHoldSite(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "shop"), 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := `{"name":"shop","version":1,"title":"Shop","kind":"json","outputs":["name"],"hosts":["127.0.0.1"],"run":"job",
		"inputs":[{"name":"q","type":"string","required":true}],
		"json":{"urls":["` + site.URL + `/list?q={q}"],"rows":{"baseSelector":"li","fields":[{"name":"name","type":"text"}]}}}`
	if err := os.WriteFile(filepath.Join(dir, "shop", "recipe.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startShareRegion(t, 3, 4, "--recipes", dir)
	r.waitLogCurrent(t)
	testwait.Until(t, 60*time.Second, "every cell shares recipe runs", func() bool {
		for _, name := range r.names {
			if s, err := getRecipeShare(r.cells[name].base); err != nil || !s.Shared {
				return false
			}
		}
		return true
	})
	submit := func(q string) string {
		a := gateCall(t, "POST", r.gate+"/recipes/shop", `{"q":"`+q+`"}`)
		var ref struct {
			JobID string `json:"job_id"`
		}
		if a.status != 202 || json.Unmarshal(a.body, &ref) != nil || ref.JobID == "" {
			t.Fatalf("submit %s: %d %.300s", q, a.status, a.body)
		}
		return ref.JobID
	}
	waitDone := func(id, what string, within time.Duration) recipeJob {
		var j recipeJob
		var lastErr error
		if err := testwait.Poll(within, func() bool {
			j, _, lastErr = gateRecipeJob(r.gate, id)
			return lastErr == nil && j.Status != "running"
		}); err != nil {
			t.Fatalf("%s: %+v %v", what, j, lastErr)
		}
		return j
	}

	// One run to learn what a run costs.
	spent0, err := ledgerTotal(r.gate)
	if err != nil {
		t.Fatal(err)
	}
	if j := waitDone(submit("warm"), "the first run", 30*time.Second); j.Status != "done" || len(j.Rows) != 2 {
		t.Fatalf("the first run: %+v", j)
	}
	var perRun int64
	testwait.Until(t, 30*time.Second, "the first run charged", func() bool {
		s, err := ledgerTotal(r.gate)
		perRun = spent0 - s
		return err == nil && perRun > 0
	})

	// Six held runs fill the region's six runners.
	const runs = 6
	ids := map[string]string{} // q → job id
	owners := map[string][]string{}
	for i := range runs {
		q := fmt.Sprintf("hold%d", i)
		ids[q] = submit(q)
		owner := r.ownerOf(t, ids[q])
		owners[owner] = append(owners[owner], q)
	}
	running := map[string]int64{}
	testwait.Until(t, 30*time.Second, "every runner on a held run", func() bool {
		total := int64(0)
		for _, name := range r.names {
			s, err := getRecipeShare(r.cells[name].base)
			if err != nil {
				return false
			}
			running[name] = s.Running
			total += s.Running
		}
		return total == runs
	})
	// Not c1: its process is the gate's. The owner of a run if one is.
	victim := "c2"
	if len(owners["c2"]) == 0 && len(owners["c3"]) > 0 {
		victim = "c3"
	}
	killed := time.Now()
	r.cells[victim].p.kill(t)
	close(site.release)
	t.Logf("runs by owner %v; running %v; killed %s", owners, running, victim)

	// Every run is done while the victim is down, its own read from the
	// log by another cell.
	for q, id := range ids {
		j := waitDone(id, "run "+q+" while "+victim+" is down", 90*time.Second)
		if j.Status != "done" || len(j.Rows) != 2 || j.Rows[0]["name"] != q+" one" || j.Units != 1 {
			t.Fatalf("run %s (%s) while %s is down: %+v", q, id, victim, j)
		}
	}
	var again []time.Duration
	for q := range ids {
		at := site.asked(q)
		if len(at) > 1 {
			again = append(again, at[len(at)-1].Sub(killed))
		}
		if len(at) > 2 {
			t.Errorf("run %s asked its page %d times", q, len(at))
		}
	}
	if len(again) != int(running[victim]) {
		t.Errorf("%d runs fetched again after the kill, want the victim's %d", len(again), running[victim])
	}
	for _, d := range again {
		if d > 30*time.Second {
			t.Errorf("a killed cell's run continued %v after the kill, want within 30 s", d)
		}
	}
	t.Logf("the killed cell's %d runs ran again %v after the kill", len(again), again)

	// The victim back: its runs from its own store, every run charged
	// once.
	r.startCell(t, r.cells[victim])
	for _, q := range owners[victim] {
		testwait.Until(t, 60*time.Second, "the owner back answers "+q, func() bool {
			j, _, err := gateRecipeJob(r.gate, ids[q])
			return err == nil && j.Status == "done" && len(j.Rows) == 2
		})
	}
	want := (runs + 1) * perRun
	testwait.Until(t, 60*time.Second, "every run charged", func() bool {
		s, err := ledgerTotal(r.gate)
		return err == nil && spent0-s >= want
	})
	// Two more rounds of the gate's collection (every 5 s) charge nothing more.
	deadline := time.Now().Add(11 * time.Second)
	for time.Now().Before(deadline) {
		s, err := ledgerTotal(r.gate)
		if err == nil && spent0-s != want {
			t.Fatalf("charged %d millicredits for %d runs of %d each, want %d", spent0-s, runs+1, perRun, want)
		}
		time.Sleep(500 * time.Millisecond)
	}
	var stats []string
	for _, name := range r.names {
		s, _ := getRecipeShare(r.cells[name].base)
		stats = append(stats, fmt.Sprintf("%s %+v", name, s))
	}
	t.Logf("charged %d runs once each (%d millicredits a run); %s", runs+1, perRun, strings.Join(stats, "; "))
}

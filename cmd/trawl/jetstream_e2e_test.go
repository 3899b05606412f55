package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/gate"
	"github.com/trawlhq/trawl/internal/testwait"
)

// cellHealth is the part of a cell's /health the JetStream and sharing
// tests read.
type cellHealth struct {
	Status    string `json:"status"`
	JetStream struct {
		Server      string   `json:"server"`
		Clustered   bool     `json:"clustered"`
		State       string   `json:"state"`
		Ready       bool     `json:"ready"`
		MetaLeader  string   `json:"meta_leader"`
		ClusterSize int      `json:"cluster_size"`
		Peers       []string `json:"peers"`
		JoinSeconds float64  `json:"join_seconds"`
		Error       string   `json:"error"`
	} `json:"jetstream"`
	JobLog *struct {
		Replicas, Current int
		Leader            string
	} `json:"job_log"`
	JobsShared bool `json:"jobs_shared"`
	JobShare   struct {
		Queued      int   `json:"queued"`
		Fetched     int64 `json:"fetched"`
		Applied     int64 `json:"applied"`
		Duplicates  int64 `json:"duplicates"`
		Redelivered int64 `json:"redelivered"`
		Drained     bool  `json:"drained"`
		Adopted     int64 `json:"adopted"`
		Restored    *struct {
			Jobs     int     `json:"jobs"`
			Outcomes int     `json:"outcomes"`
			Seconds  float64 `json:"seconds"`
		} `json:"restored"`
	} `json:"job_share"`
	PageCopies struct {
		Sent     uint64 `json:"sent"`
		Alone    uint64 `json:"alone"`
		Dropped  uint64 `json:"dropped"`
		Indexed  uint64 `json:"indexed"`
		Replayed uint64 `json:"replayed"`
		Skipped  uint64 `json:"skipped"`
	} `json:"page_copies"`
	CheckQueue *struct {
		Scheduling  bool  `json:"scheduling"`
		Queued      int64 `json:"queued"`
		Ran         int64 `json:"ran"`
		Redelivered int64 `json:"redelivered"`
		Waiting     int64 `json:"waiting"`
		AckPending  int64 `json:"ack_pending"`
	} `json:"check_queue"`
}

// cellAddrs are the API addresses of the cells a dev process logged.
func cellAddrs(p *proc) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(p.logs(), "\n") {
		var rec struct{ Msg, Addr, Name string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "cell serving" {
			out[rec.Name] = rec.Addr
		}
	}
	return out
}

// getCellHealth reads the /health of the cell at base (http://host:port).
func getCellHealth(base string) (cellHealth, error) {
	var h cellHealth
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(base + "/health")
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return h, fmt.Errorf("%s", resp.Status)
	}
	return h, json.NewDecoder(resp.Body).Decode(&h)
}

// `trawl dev --cells 3`: three cells in one region, their JetStream nodes
// one cluster of three peers with one meta leader, and the gate scrapes
// through them.
func TestDevThreeCellsJetStream(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/undrained/") {
			// Slow enough that the undrained cell's pullers, back within
			// a second, find URLs still queued.
			select {
			case <-time.After(500 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<html><head><title>Page %s</title></head><body><p>Three cells, one region: %s.</p></body></html>", r.URL.Path, r.URL.Path)
	}))
	t.Cleanup(site.Close)
	start := time.Now()
	dev := launch(t, []string{"TRAWL_DEV_KEY=" + e2eKey, "TRAWL_OPERATOR_KEY=" + e2eOperatorKey}, "gate serving", "dev", "--cells", "3",
		"--prices", pricesFile(t, 100000),
		"--listen", fmt.Sprintf("127.0.0.1:%d", freeRun(t, 1)), "--ledger-raft", fmt.Sprintf("127.0.0.1:%d", freeRun(t, 1)),
		"--data", t.TempDir(), "--allow-private-networks", "--browsers", "0")
	var addrs map[string]string
	testwait.Until(t, 30*time.Second, "three cells logged", func() bool {
		addrs = cellAddrs(dev)
		return len(addrs) == 3
	})
	var saw string
	deadline := time.Now().Add(90 * time.Second)
	for {
		leaders, ok := map[string]bool{}, true
		var views []string
		for _, name := range []string{"c1", "c2", "c3"} {
			h, err := getCellHealth("http://" + addrs[name])
			js := h.JetStream
			views = append(views, fmt.Sprintf("%s: %+v %v", name, js, err))
			if err != nil || !js.Clustered || !js.Ready || js.ClusterSize != 3 || len(js.Peers) != 3 || js.MetaLeader == "" {
				ok = false
				continue
			}
			leaders[js.MetaLeader] = true
		}
		saw = strings.Join(views, "; ")
		if ok && len(leaders) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 3-peer JetStream cluster with one meta leader within 90 s: %s", saw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("3-peer cluster in %v after the dev process started: %s", time.Since(start), saw)
	// Each cell's peers are the same three servers.
	var peers []string
	for _, name := range []string{"c1", "c2", "c3"} {
		h, err := getCellHealth("http://" + addrs[name])
		if err != nil {
			t.Fatal(err)
		}
		if peers == nil {
			peers = h.JetStream.Peers
		} else if !slices.Equal(peers, h.JetStream.Peers) {
			t.Errorf("%s sees peers %v, c1 %v", name, h.JetStream.Peers, peers)
		}
	}

	// The gate's operator view shows each cell's route and join state
	// (from membership, a gossip round behind the cells' own).
	var saw2 string
	if err := testwait.Poll(10*time.Second, func() bool {
		req, _ := http.NewRequest("GET", dev.base+"/operator/v1/cells", nil)
		req.Header.Set("Authorization", "Bearer "+e2eOperatorKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			saw2 = err.Error()
			return false
		}
		var list gate.CellList
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		saw2 = fmt.Sprintf("%v %+v", err, list)
		if err != nil || len(list.Cells) != 3 {
			return false
		}
		for _, c := range list.Cells {
			if !c.Live || c.JetStream == nil || c.JetStream.State != "ready" || !strings.HasPrefix(c.JetStream.Route, "nats-route://127.0.0.1:") {
				if c.JetStream != nil {
					saw2 += fmt.Sprintf(" %s: %+v", c.Name, *c.JetStream)
				}
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("%v: the operator view of three ready cells: %s", err, saw2)
	}

	for i := range 3 {
		a := gateCall(t, "POST", dev.base+"/scrape", fmt.Sprintf(`{"url":"%s/p%d"}`, site.URL, i))
		if a.status != 200 || !strings.Contains(string(a.body), fmt.Sprintf("Three cells, one region: /p%d.", i)) {
			t.Fatalf("scrape %d: %d %.300s", i, a.status, a.body)
		}
	}

	// Every cell shares job URLs: a job through the gate is fetched by
	// the region, recorded once by its owner, and the operator view
	// shows each cell's part of the queue.
	testwait.Until(t, 60*time.Second, "every cell to share job URLs", func() bool {
		for _, name := range []string{"c1", "c2", "c3"} {
			if h, err := getCellHealth("http://" + addrs[name]); err != nil || !h.JobsShared {
				return false
			}
		}
		return true
	})
	const n = 60
	urls := make([]string, n)
	for i := range urls {
		urls[i] = fmt.Sprintf("%s/job/%d", site.URL, i)
	}
	jobID, _ := submitThroughGate(t, dev.base, urls)
	testwait.Until(t, 60*time.Second, "the shared job to finish", func() bool {
		st := gateCall(t, "GET", dev.base+"/scrape/jobs/"+jobID, "")
		var s jobStatus
		json.Unmarshal(st.body, &s)
		return s.Status == "done" && s.Done == n
	})
	var fetched, applied int64
	for _, name := range []string{"c1", "c2", "c3"} {
		h, err := getCellHealth("http://" + addrs[name])
		if err != nil {
			t.Fatal(err)
		}
		fetched += h.JobShare.Fetched
		applied += h.JobShare.Applied
	}
	if fetched < n || applied != n {
		t.Fatalf("the cells fetched %d and recorded %d outcomes of a %d-URL job", fetched, applied, n)
	}
	testwait.Until(t, 20*time.Second, "the operator view of each cell's queue", func() bool {
		req, _ := http.NewRequest("GET", dev.base+"/operator/v1/cells", nil)
		req.Header.Set("Authorization", "Bearer "+e2eOperatorKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var list gate.CellList
		if json.NewDecoder(resp.Body).Decode(&list) != nil || len(list.Cells) != 3 {
			return false
		}
		for _, c := range list.Cells {
			if c.JetStream == nil || c.JetStream.Work == nil {
				return false
			}
		}
		return true
	})

	// An operator drains c3: it takes no more URLs from the region's
	// queue (the gate lists it in its membership meta), and takes them
	// again once undrained.
	drain := func(method string) {
		req, _ := http.NewRequest(method, dev.base+"/operator/v1/cells/c3/drain", nil)
		req.Header.Set("Authorization", "Bearer "+e2eOperatorKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s drain: %v %v", method, resp, err)
		}
		resp.Body.Close()
	}
	shareOf := func(name string) (fetched int64, drained bool) {
		h, err := getCellHealth("http://" + addrs[name])
		if err != nil {
			return -1, false
		}
		return h.JobShare.Fetched, h.JobShare.Drained
	}
	job := func(run string) {
		n := n
		if run == "undrained" {
			n = 200 // 500 ms a page: about 3 s on the other two cells alone
		}
		urls := make([]string, n)
		for i := range urls {
			urls[i] = fmt.Sprintf("%s/%s/%d", site.URL, run, i)
		}
		jobID, _ := submitThroughGate(t, dev.base, urls)
		testwait.Until(t, 60*time.Second, "the job "+run+" to finish", func() bool {
			var s jobStatus
			json.Unmarshal(gateCall(t, "GET", dev.base+"/scrape/jobs/"+jobID, "").body, &s)
			return s.Status == "done" && s.Done == n
		})
	}
	drain("POST")
	testwait.Until(t, 20*time.Second, "c3 to know it is drained", func() bool { _, d := shareOf("c3"); return d })
	before, _ := shareOf("c3")
	job("drained")
	if after, _ := shareOf("c3"); after != before {
		t.Fatalf("drained c3 fetched %d URLs of the region's queue", after-before)
	}
	drain("DELETE")
	testwait.Until(t, 20*time.Second, "c3 to know it is undrained", func() bool { _, d := shareOf("c3"); return !d })
	job("undrained")
	after, _ := shareOf("c3")
	t.Logf("drained, c3 fetched nothing of a %d-URL job; undrained, %d of the next", n, after-before)
	if after == before {
		t.Fatal("undrained c3 fetched nothing of the next job")
	}
}

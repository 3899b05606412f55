package crawl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// healthPayload is GET /monitor/health (docs/spec/crawl-server.md §2.5).
type healthPayload struct {
	Status    string `json:"status"`
	Container struct {
		CPUPercent    Number `json:"cpu_percent"`
		MemoryPercent Number `json:"memory_percent"`
		MemoryMB      Number `json:"memory_mb"`
		MemoryLimitMB Number `json:"memory_limit_mb"`
		UptimeSeconds Number `json:"uptime_seconds"`
		Processes     int    `json:"processes"`
		// The network namespace's traffic since boot (every interface
		// but loopback), under Crawl4AI 0.7.7's release demo's names
		// (rx, tx) and its server's (recv, sent).
		NetworkRxMB   Number `json:"network_rx_mb"`
		NetworkTxMB   Number `json:"network_tx_mb"`
		NetworkRecvMB Number `json:"network_recv_mb"`
		NetworkSentMB Number `json:"network_sent_mb"`
	} `json:"container"`
	Pool struct {
		Permanent struct {
			Active        bool   `json:"active"`
			BrowserID     string `json:"browser_id"`
			TotalRequests int64  `json:"total_requests"`
		} `json:"permanent"`
		Hot struct {
			Count         int   `json:"count"`
			TotalRequests int64 `json:"total_requests"`
		} `json:"hot"`
		Cold struct {
			Count         int   `json:"count"`
			TotalRequests int64 `json:"total_requests"`
		} `json:"cold"`
	} `json:"pool"`
	Stats stats `json:"stats"`
}

func (s *Server) health() healthPayload {
	var h healthPayload
	smp := s.lastSample()
	h.Container.CPUPercent = round1(smp.CPUPercent)
	h.Container.MemoryPercent = round1(smp.MemoryPercent)
	h.Container.MemoryMB = round1(mbOf(smp.MemoryBytes))
	h.Container.MemoryLimitMB = round1(mbOf(smp.MemoryLimitBytes))
	h.Container.UptimeSeconds = round1(s.cfg.Now().Sub(s.started).Seconds())
	h.Container.Processes = smp.Processes
	active, id := s.pool.PermanentActive()
	h.Pool.Permanent.Active, h.Pool.Permanent.BrowserID = active, id
	perm, hot, cold, _ := s.pool.Browsers()
	h.Pool.Hot.Count, h.Pool.Cold.Count = len(hot), len(cold)
	sum := func(l []BrowserInfo) (n int64) {
		for _, b := range l {
			n += b.RequestCount
		}
		return n
	}
	h.Pool.Permanent.TotalRequests, h.Pool.Hot.TotalRequests, h.Pool.Cold.TotalRequests = sum(perm), sum(hot), sum(cold)
	if rx, tx, err := netBytes("/proc/self/net/dev"); err == nil {
		h.Container.NetworkRxMB, h.Container.NetworkTxMB = Number(math.Round(mbOf(int64(rx))*100)/100), Number(math.Round(mbOf(int64(tx))*100)/100)
		h.Container.NetworkRecvMB, h.Container.NetworkSentMB = h.Container.NetworkRxMB, h.Container.NetworkTxMB
	}
	h.Stats = s.mon.stats()
	h.Stats.QueuedTasks, h.Stats.RunningTasks = s.sched.counts()
	h.Status = "ok"
	if !active {
		h.Status = "degraded"
	}
	return h
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	active, _ := s.pool.PermanentActive()
	status := "ok"
	if !active {
		status = "degraded"
	}
	out := map[string]any{"status": status, "timestamp": unixSeconds(s.cfg.Now()), "version": Version}
	if st := s.ShareStats(); st.Shared {
		out["tasks_shared"] = st // share.go: beside a clustered cell
	}
	writeJSON(w, http.StatusOK, out)
}

// Version is reported by /health.
var Version = "0.7.7-trawl"

func (s *Server) handleMonitorHealth(w http.ResponseWriter, r *http.Request) {
	s.refreshSample()
	writeJSON(w, http.StatusOK, s.health())
}

// BrowsersPayload is GET /monitor/browsers.
type BrowsersPayload struct {
	Summary struct {
		TotalCount       int    `json:"total_count"`
		TotalMemoryMB    Number `json:"total_memory_mb"`
		ReuseRatePercent Number `json:"reuse_rate_percent"`
	} `json:"summary"`
	Permanent []BrowserInfo `json:"permanent"`
	Hot       []BrowserInfo `json:"hot"`
	Cold      []BrowserInfo `json:"cold"`
}

func (s *Server) browsersPayload() BrowsersPayload {
	var b BrowsersPayload
	var rate Number
	b.Permanent, b.Hot, b.Cold, rate = s.pool.Browsers()
	b.Summary.ReuseRatePercent = rate
	for _, l := range [][]BrowserInfo{b.Permanent, b.Hot, b.Cold} {
		for _, bi := range l {
			b.Summary.TotalCount++
			b.Summary.TotalMemoryMB += bi.MemoryMB
		}
	}
	b.Summary.TotalMemoryMB = round1(float64(b.Summary.TotalMemoryMB))
	return b
}

func (s *Server) handleTimeline(w http.ResponseWriter, r *http.Request) {
	if n, ok := intParam(w, r, "minutes", 5, int(keepTimeline/time.Minute)); ok {
		writeJSON(w, http.StatusOK, s.mon.timelineSince(n))
	}
}

func (s *Server) handleJanitorLog(w http.ResponseWriter, r *http.Request) {
	if n, ok := intParam(w, r, "limit", 100, keepJanitor); ok {
		writeJSON(w, http.StatusOK, s.mon.janitorLog(n))
	}
}

func (s *Server) handleErrorLog(w http.ResponseWriter, r *http.Request) {
	if n, ok := intParam(w, r, "limit", 100, keepErrors); ok {
		writeJSON(w, http.StatusOK, s.mon.errorLog(n))
	}
}

func (s *Server) handleCleanup(w http.ResponseWriter, r *http.Request) {
	n, mb := s.pool.Sweep(true)
	noun := "browsers"
	if n == 1 {
		noun = "browser"
	}
	msg := fmt.Sprintf("cleanup: %d idle %s removed, %.1f MB freed", n, noun, mb)
	s.mon.logJanitor(JanitorEntry{Timestamp: unixSeconds(s.cfg.Now()), Message: msg, Action: "cleanup", MemoryFreedMB: Number(mb)})
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "cleaned_count": n, "memory_freed_mb": Number(mb)})
}

// browserIDBody reads {"browser_id": "..."}.
func browserIDBody(w http.ResponseWriter, r *http.Request) (string, bool) {
	var b struct {
		BrowserID string `json:"browser_id"`
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4096))
	if err == nil {
		err = json.Unmarshal(body, &b)
	}
	if err != nil || b.BrowserID == "" {
		writeError(w, http.StatusBadRequest, "bad_input", `send {"browser_id": "<id from /monitor/browsers>"}`)
		return "", false
	}
	return b.BrowserID, true
}

func (s *Server) handleKill(w http.ResponseWriter, r *http.Request) {
	id, ok := browserIDBody(w, r)
	if !ok {
		return
	}
	if err := s.pool.Kill(id); err != nil {
		s.browserActionError(w, id, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "browser_id": id, "message": "browser " + id + " killed"})
}

func (s *Server) handleRestart(w http.ResponseWriter, r *http.Request) {
	id, ok := browserIDBody(w, r)
	if !ok {
		return
	}
	if err := s.pool.Restart(id); err != nil {
		s.browserActionError(w, id, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "browser_id": id, "message": "browser " + id + " restarted"})
}

func (s *Server) browserActionError(w http.ResponseWriter, id string, err error) {
	if errors.Is(err, errUnknownBrowser) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no browser %q in the pool; see /monitor/browsers", id))
		return
	}
	s.log.Error("crawl: browser action failed", "browser_id", id, "err", err)
	writeError(w, http.StatusInternalServerError, "internal", err.Error())
}

func (s *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	s.mon.reset()
	s.pool.ResetStats()
	s.mon.logJanitor(JanitorEntry{Timestamp: unixSeconds(s.cfg.Now()), Message: "statistics reset on request", Action: "stats_reset"})
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "message": "statistics reset"})
}

// wsMessage is one push of /monitor/ws (docs/spec/crawl-server.md §6).
type wsMessage struct {
	Timestamp Number          `json:"timestamp"`
	Health    healthPayload   `json:"health"`
	Requests  RequestsPayload `json:"requests"`
	Browsers  BrowsersPayload `json:"browsers"`
	Errors    []ErrorEntry    `json:"errors"`
}

func (s *Server) snapshot() wsMessage {
	return wsMessage{Timestamp: unixSeconds(s.cfg.Now()), Health: s.health(), Requests: s.mon.requests(),
		Browsers: s.browsersPayload(), Errors: s.mon.recentErrors(time.Minute)}
}

// handleWS pushes a snapshot at once and then every PushEvery until the
// client leaves or the server stops.
func (s *Server) handleWS(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept wrote the answer
	}
	defer c.CloseNow()
	ctx := c.CloseRead(r.Context())
	stop := context.AfterFunc(s.life, func() { c.Close(websocket.StatusGoingAway, "server shutting down") })
	defer stop()
	t := time.NewTicker(s.cfg.PushEvery)
	defer t.Stop()
	for {
		s.refreshSample()
		b, err := json.Marshal(s.snapshot())
		if err != nil {
			return
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = c.Write(wctx, websocket.MessageText, b)
		cancel()
		if err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// netBytes sums the received and sent bytes of every interface but
// loopback in a /proc/net/dev file (the process's network namespace: the
// container's traffic).
func netBytes(path string) (rx, tx uint64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) == "lo" {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 9 {
			continue
		}
		r, err1 := strconv.ParseUint(f[0], 10, 64)
		t, err2 := strconv.ParseUint(f[8], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		rx += r
		tx += t
	}
	return rx, tx, nil
}

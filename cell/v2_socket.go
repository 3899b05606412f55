package cell

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/trawlhq/trawl/cell/jobs"
)

// Firecrawl's WebSocket of a crawl or batch scrape (GET /v2/crawl/{id}
// and /v2/batch/scrape/{id} with Upgrade: websocket; docs/firecrawl.md):
// a catchup frame with the status and the documents so far, a document
// frame for each document as it is written, then done (or error for a
// failed or cancelled job) once the job ended and every document was
// sent. The gate takes the key from the subprotocol and answers it back
// (the key never reaches the cell).

// socketPoll is how often a watcher looks at its job when no event woke
// it (a job of another cell process, a missed wake-up).
const socketPoll = 2 * time.Second

func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// watchers wakes the WebSocket watchers of a job when it has an event.
type watchers struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// wait returns a channel closed at job's next event.
func (ws *watchers) wait(job string) <-chan struct{} {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.m == nil {
		ws.m = map[string]chan struct{}{}
	}
	ch, ok := ws.m[job]
	if !ok {
		ch = make(chan struct{})
		ws.m[job] = ch
	}
	return ch
}

func (ws *watchers) notify(job string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ch, ok := ws.m[job]; ok {
		close(ch)
		delete(ws.m, job)
	}
}

type socketFrame struct {
	Type  string `json:"type"`
	Data  any    `json:"data,omitempty"`
	Error string `json:"error,omitempty"`
}

type socketStatus struct {
	Status      string            `json:"status"`
	Total       int               `json:"total"`
	Completed   int               `json:"completed"`
	CreditsUsed float64           `json:"creditsUsed"`
	ExpiresAt   string            `json:"expiresAt"`
	Data        []json.RawMessage `json:"data"`
}

// serveV2CrawlSocket streams crawl st's documents over a WebSocket.
func (c *Cell) serveV2CrawlSocket(w http.ResponseWriter, r *http.Request, st *jobs.Status) {
	c.serveJobSocket(w, r, st, func(job string) float64 { return c.crawlCredits(job, accountOf(r)) })
}

// serveJobSocket streams a Firecrawl job's documents (above); credits
// says what the job has used.
func (c *Cell) serveJobSocket(w http.ResponseWriter, r *http.Request, st *jobs.Status, credits func(string) float64) {
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept answered the client
	}
	defer conn.CloseNow()
	ctx := conn.CloseRead(r.Context())
	acct, id := accountOf(r), st.JobID
	var sent int64
	first := true
	for {
		st, err := c.jobs.Status(id, acct, false)
		if err != nil {
			writeFrame(ctx, conn, socketFrame{Type: "error", Error: "the job is gone"})
			return
		}
		var docs []json.RawMessage
		err = c.jobs.ScanResults(id, acct, sent, func(line []byte) bool {
			var l jobs.Line
			if json.Unmarshal(line, &l) == nil && l.OK {
				docs = append(docs, append(json.RawMessage(nil), l.Result...))
			}
			return len(docs) < jobs.PageLines
		})
		if err != nil {
			c.cfg.Logger.Warn("job socket: results", "job", id, "err", err)
			return
		}
		status := socketStatus{Total: st.Total, Completed: st.Done, CreditsUsed: credits(id),
			ExpiresAt: st.ExpiresAt.UTC().Format(time.RFC3339), Data: []json.RawMessage{}}
		status.Status = firecrawlState(st)
		if first {
			status.Data = docs
			if !writeFrame(ctx, conn, socketFrame{Type: "catchup", Data: status}) {
				return
			}
			first = false
		} else {
			for _, d := range docs {
				if !writeFrame(ctx, conn, socketFrame{Type: "document", Data: d}) {
					return
				}
			}
		}
		sent += int64(len(docs))
		if len(docs) == jobs.PageLines {
			continue // more written already
		}
		ended := st.Status != jobs.StatusRunning && st.Status != jobs.StatusPending
		if ended {
			status.Data = []json.RawMessage{}
			switch st.Status {
			case jobs.StatusDone:
				writeFrame(ctx, conn, socketFrame{Type: "done", Data: status})
			default:
				msg := "the job was cancelled"
				if st.Failure != "" {
					msg = st.Failure
				}
				writeFrame(ctx, conn, socketFrame{Type: "error", Error: msg, Data: status})
			}
			conn.Close(websocket.StatusNormalClosure, "")
			return
		}
		t := time.NewTimer(socketPoll)
		select {
		case <-c.crawlWatch.wait(id):
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
	}
}

func writeFrame(ctx context.Context, conn *websocket.Conn, f socketFrame) bool {
	raw, err := json.Marshal(f)
	if err != nil {
		return false
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return conn.Write(wctx, websocket.MessageText, raw) == nil
}

// firecrawlState is a job's status in Firecrawl's words.
func firecrawlState(st *jobs.Status) string {
	switch st.Status {
	case jobs.StatusDone:
		return "completed"
	case jobs.StatusCancelled:
		return "cancelled"
	case jobs.StatusFailed:
		return "failed"
	}
	return "scraping"
}

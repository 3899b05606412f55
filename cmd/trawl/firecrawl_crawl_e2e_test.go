package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/trawlhq/trawl/internal/testwait"
)

// crawlDocs is a small documentation site on loopback: an index linking
// to n chapters, each linking to the next, and a page robots.txt keeps
// crawlers from.
func crawlDocs(t *testing.T, n int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/robots.txt":
			io.WriteString(w, "User-agent: *\nDisallow: /manual/private.html\n")
			return
		case !strings.HasPrefix(r.URL.Path, "/manual/"):
			http.NotFound(w, r)
			return
		}
		var links strings.Builder
		if r.URL.Path == "/manual/index.html" {
			for i := 1; i <= n; i++ {
				fmt.Fprintf(&links, `<li><a href="ch%d.html">Chapter %d</a></li>`, i, i)
			}
			links.WriteString(`<li><a href="private.html">Private</a></li><li><a href="/elsewhere/">Elsewhere</a></li>`)
		} else {
			links.WriteString(`<li><a href="index.html">Contents</a></li>`)
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><title>Manual %[1]s</title></head><body><nav><ul>%[2]s</ul></nav><main><h1>Manual %[1]s</h1>
<p>This is the manual's page %[1]s, with a paragraph long enough to be taken as the main content of the page.</p></main></body></html>`, r.URL.Path, links.String())
	}))
	t.Cleanup(srv.Close)
	return srv
}

// startCrawlDev is trawl dev whose free plan allows the polling of a
// crawl's clients (600 calls a minute), with 1,000 credits.
func startCrawlDev(t *testing.T) *proc {
	t.Helper()
	gateAddr := fmt.Sprintf("127.0.0.1:%d", freeRun(t, 1))
	return launch(t, []string{"TRAWL_DEV_KEY=" + e2eKey, "TRAWL_LEDGER_SECRET=crawl-e2e-secret"}, "gate serving", "dev",
		"--listen", gateAddr, "--ledger-raft", fmt.Sprintf("127.0.0.1:%d", freeRun(t, 1)),
		"--data", t.TempDir(), "--allow-private-networks", "--browsers", "0", "--prices", devPrices(t, 600, 10, 1000))
}

// Firecrawl's site crawl through its JS SDK against `trawl dev`: crawl
// (start and poll), status, errors with robots.txt's refusals, the
// active list, cancel, and the pages charged through the ledger
// (creditsUsed is the gate's charges); the WebSocket of a crawl with the
// key as its subprotocol (Node 20's SDK has no WebSocket and polls, so a
// Go client speaks it here).
func TestFirecrawlSDKCrawl(t *testing.T) {
	site := crawlDocs(t, 6)
	dev := startCrawlDev(t)
	type doc struct {
		Markdown string         `json:"markdown"`
		Metadata map[string]any `json:"metadata"`
	}
	type crawlJob struct {
		ID          string  `json:"id"`
		URL         string  `json:"url"`
		Status      string  `json:"status"`
		Completed   int     `json:"completed"`
		Total       int     `json:"total"`
		CreditsUsed float64 `json:"creditsUsed"`
		Data        []doc   `json:"data"`
	}
	value := func(r fcResult, v any) { t.Helper(); fcValue(t, r, v) }
	start := site.URL + "/manual/index.html"

	// crawl: start and poll until completed.
	res := firecrawlSDK(t, dev.base, e2eKey, fcCall{"crawl", []any{start,
		map[string]any{"limit": 20, "scrapeOptions": map[string]any{"formats": []any{"markdown"}}, "pollInterval": 1}}})
	var j crawlJob
	value(res[0], &j)
	if j.Status != "completed" || j.Total != 8 || j.Completed != 7 || len(j.Data) != 7 {
		t.Fatalf("crawl: %+v", j)
	}
	for _, d := range j.Data {
		if !strings.Contains(d.Markdown, "main content of the page") {
			t.Errorf("document %v: %q", d.Metadata["sourceURL"], d.Markdown)
		}
	}

	// startCrawl, then its status until the gate has charged its pages.
	res = firecrawlSDK(t, dev.base, e2eKey, fcCall{"startCrawl", []any{start, map[string]any{"limit": 3, "sitemap": "skip"}}})
	var started crawlJob
	value(res[0], &started)
	if started.ID == "" || started.URL != dev.base+"/v2/crawl/"+started.ID {
		t.Fatalf("startCrawl: %+v", started)
	}
	// The first crawl's pages were charged by the gate (a page each, live);
	// the second's came from the cache, which is free.
	var st, first crawlJob
	if err := testwait.Poll(60*time.Second, func() bool {
		res = firecrawlSDK(t, dev.base, e2eKey, fcCall{"getCrawlStatus", []any{started.ID}}, fcCall{"getCrawlStatus", []any{j.ID}})
		value(res[0], &st)
		value(res[1], &first)
		return st.Status == "completed" && first.CreditsUsed == 7
	}); err != nil {
		t.Fatalf("getCrawlStatus: %+v, the first crawl's %v credits (creditsUsed is the gate's charge of each page)", st, first.CreditsUsed)
	}
	if st.Total != 3 || st.CreditsUsed != 0 || len(st.Data) != 3 || st.Data[0].Markdown == "" {
		t.Errorf("second crawl: %+v", st)
	}

	// The first crawl's errors: the page robots.txt refuses.
	res = firecrawlSDK(t, dev.base, e2eKey, fcCall{"getCrawlErrors", []any{j.ID}})
	var errs struct {
		Errors        []map[string]any `json:"errors"`
		RobotsBlocked []string         `json:"robotsBlocked"`
	}
	value(res[0], &errs)
	if len(errs.RobotsBlocked) != 1 || errs.RobotsBlocked[0] != site.URL+"/manual/private.html" || len(errs.Errors) != 0 {
		t.Errorf("getCrawlErrors: %+v", errs)
	}

	// A slow crawl: listed as active, then cancelled.
	res = firecrawlSDK(t, dev.base, e2eKey,
		fcCall{"startCrawl", []any{start, map[string]any{"delay": 2, "sitemap": "skip"}}})
	var slow crawlJob
	value(res[0], &slow)
	res = firecrawlSDK(t, dev.base, e2eKey, fcCall{"getActiveCrawls", nil}, fcCall{"getQueueStatus", nil}, fcCall{"getConcurrency", nil},
		fcCall{"cancelCrawl", []any{slow.ID}}, fcCall{"getCrawlStatus", []any{slow.ID}})
	var queue struct {
		Success                                                            bool
		JobsInQueue, ActiveJobsInQueue, WaitingJobsInQueue, MaxConcurrency int
	}
	value(res[1], &queue)
	if !queue.Success || queue.WaitingJobsInQueue < 1 || queue.JobsInQueue != queue.ActiveJobsInQueue+queue.WaitingJobsInQueue || queue.MaxConcurrency != 10 {
		t.Errorf("getQueueStatus: %s", res[1].Value)
	}
	var conc struct{ Concurrency, MaxConcurrency int }
	value(res[2], &conc)
	if conc.Concurrency != 1 || conc.MaxConcurrency != 10 {
		t.Errorf("getConcurrency: %s (the call itself is the one in flight)", res[2].Value)
	}
	res = append(res[:1], res[3:]...)
	var active struct {
		Success bool `json:"success"`
		Crawls  []struct {
			ID, URL string
		} `json:"crawls"`
	}
	value(res[0], &active)
	if !active.Success || len(active.Crawls) != 1 || active.Crawls[0].ID != slow.ID || active.Crawls[0].URL != start {
		t.Errorf("getActiveCrawls: %s", res[0].Value)
	}
	var cancelled bool
	value(res[1], &cancelled)
	var after crawlJob
	value(res[2], &after)
	if !cancelled || after.Status != "cancelled" || after.Completed >= 7 {
		t.Errorf("cancelCrawl: %v, then %+v", cancelled, after)
	}

	// Another key's account does not see the crawl; a wrong id is a 404.
	res = firecrawlSDK(t, dev.base, e2eKey, fcCall{"getCrawlStatus", []any{"j_nope.c1.0123"}})
	if res[0].Thrown == "" || res[0].Status == nil || *res[0].Status != 404 {
		t.Errorf("unknown crawl: %+v", res[0])
	}

	// The WebSocket: catchup, a document per page, done after them all.
	res = firecrawlSDK(t, dev.base, e2eKey, fcCall{"startCrawl", []any{start, map[string]any{"limit": 5, "sitemap": "skip"}}})
	var ws crawlJob
	value(res[0], &ws)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(dev.base, "http") + "/v2/crawl/" + ws.ID
	if _, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{Subprotocols: []string{"fc-not-a-key"}}); err == nil {
		t.Error("a WebSocket with an unknown key was accepted")
	}
	conn, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{Subprotocols: []string{e2eKey}})
	if err != nil {
		t.Fatalf("dial %s: %v", wsURL, err)
	}
	defer conn.CloseNow()
	if conn.Subprotocol() != e2eKey || resp.Header.Get("Sec-WebSocket-Protocol") != e2eKey {
		t.Errorf("subprotocol %q", conn.Subprotocol())
	}
	docs, kinds := 0, []string{}
	for {
		_, raw, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("read after %v: %v", kinds, err)
		}
		var f struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		}
		json.Unmarshal(raw, &f)
		kinds = append(kinds, f.Type)
		switch f.Type {
		case "catchup":
			var s crawlJob
			json.Unmarshal(f.Data, &s)
			docs += len(s.Data)
		case "document":
			docs++
		}
		if f.Type == "done" || f.Type == "error" {
			var s crawlJob
			json.Unmarshal(f.Data, &s)
			if f.Type != "done" || s.Status != "completed" || s.Completed != docs || docs != 5 {
				t.Errorf("frames %v, %d documents, last %s", kinds, docs, raw)
			}
			break
		}
	}
	if kinds[0] != "catchup" {
		t.Errorf("frames %v: catchup first", kinds)
	}
}

package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/testwait"
	"github.com/trawlhq/trawl/internal/webhook"
)

// Firecrawl's batch scrape through its JS SDK against `trawl dev`: the
// gate holds, charges and releases the batch as a job; the cell that
// owns it answers its status, cancel and errors.
func TestFirecrawlSDKBatchScrape(t *testing.T) {
	release := make(chan struct{})
	var slow atomic.Int64
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			slow.Add(1)
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		case "/file.pdf":
			w.Header().Set("Content-Type", "application/pdf")
			io.WriteString(w, "%PDF-1.4")
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, fcPage)
	}))
	defer site.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	dev := startMCPDev(t)

	type doc struct {
		Markdown string         `json:"markdown"`
		Metadata map[string]any `json:"metadata"`
	}
	type job struct {
		ID          string `json:"id"`
		Status      string `json:"status"`
		Completed   int    `json:"completed"`
		Total       int    `json:"total"`
		CreditsUsed int    `json:"creditsUsed"`
		ExpiresAt   string `json:"expiresAt"`
		Data        []doc  `json:"data"`
	}
	value := func(r fcResult, v any) { t.Helper(); fcValue(t, r, v) }

	// batchScrape: start, then poll until done.
	pages := []string{site.URL + "/green", site.URL + "/black", site.URL + "/oolong"}
	res := firecrawlSDK(t, dev.base, e2eKey, fcCall{"batchScrape", []any{pages,
		map[string]any{"options": map[string]any{"formats": []any{"markdown"}}, "pollInterval": 1}}})
	var j job
	value(res[0], &j)
	if j.Status != "completed" || j.Total != 3 || j.Completed != 3 || len(j.Data) != 3 || j.CreditsUsed != 3 || j.ExpiresAt == "" {
		t.Fatalf("batchScrape: %+v", j)
	}
	got := map[string]bool{}
	for _, d := range j.Data {
		if !strings.Contains(d.Markdown, "Oolong sits between them") || strings.Contains(d.Markdown, "all rights reserved") ||
			d.Metadata["title"] != "Steeping times" || d.Metadata["statusCode"] != 200.0 {
			t.Errorf("document %+v", d)
		}
		got[d.Metadata["sourceURL"].(string)] = true
	}
	for _, p := range pages {
		if !got[p] {
			t.Errorf("no document of %s", p)
		}
	}

	// startBatchScrape, its status while it runs one URL at a time, a
	// cancel, then its errors.
	urls := []string{site.URL + "/slow", site.URL + "/a", site.URL + "/b", "not a url"}
	res = firecrawlSDK(t, dev.base, e2eKey, fcCall{"startBatchScrape", []any{urls, map[string]any{"maxConcurrency": 1}}})
	var started struct {
		ID          string   `json:"id"`
		URL         string   `json:"url"`
		InvalidURLs []string `json:"invalidURLs"`
	}
	value(res[0], &started)
	if started.URL != dev.base+"/v2/batch/scrape/"+started.ID || len(started.InvalidURLs) != 1 || started.InvalidURLs[0] != "not a url" {
		t.Fatalf("startBatchScrape: %+v", started)
	}
	if err := testwait.Poll(20*time.Second, func() bool { return slow.Load() == 1 }); err != nil {
		t.Fatal("the batch never started")
	}
	res = firecrawlSDK(t, dev.base, e2eKey,
		fcCall{"getBatchScrapeStatus", []any{started.ID}},
		fcCall{"cancelBatchScrape", []any{started.ID}},
		fcCall{"getBatchScrapeStatus", []any{started.ID}},
	)
	value(res[0], &j)
	if j.Status != "scraping" || j.Total != 3 || j.Completed != 0 || j.CreditsUsed != 3 {
		t.Errorf("getBatchScrapeStatus while running: %+v", j)
	}
	var cancelled bool
	value(res[1], &cancelled)
	if !cancelled {
		t.Errorf("cancelBatchScrape: %s", res[1].Value)
	}
	value(res[2], &j)
	if j.Status != "cancelled" {
		t.Errorf("after the cancel: %+v", j)
	}
	close(release) // the URL in flight finishes; the two after it never start
	var last job
	if err := testwait.Poll(20*time.Second, func() bool {
		value(firecrawlSDK(t, dev.base, e2eKey, fcCall{"getBatchScrapeStatus", []any{started.ID}})[0], &last)
		return last.Completed == 1
	}); err != nil {
		t.Fatalf("the URL in flight did not finish: %+v", last)
	}
	if last.Status != "cancelled" || len(last.Data) != 1 || slow.Load() != 1 {
		t.Errorf("cancelled batch: %+v, /slow fetched %d times", last, slow.Load())
	}

	// A batch with a failure: getBatchScrapeErrors lists it.
	res = firecrawlSDK(t, dev.base, e2eKey, fcCall{"batchScrape", []any{[]string{site.URL + "/c", site.URL + "/file.pdf"},
		map[string]any{"pollInterval": 1}}})
	value(res[0], &j)
	if j.Status != "completed" || j.Completed != 1 || len(j.Data) != 1 {
		t.Fatalf("batch with a PDF: %+v", j)
	}
	res = firecrawlSDK(t, dev.base, e2eKey, fcCall{"getBatchScrapeErrors", []any{j.ID}})
	var errs struct {
		Errors []struct {
			URL   string `json:"url"`
			Code  string `json:"code"`
			Error string `json:"error"`
		} `json:"errors"`
		RobotsBlocked []string `json:"robotsBlocked"`
	}
	value(res[0], &errs)
	if len(errs.Errors) != 1 || errs.Errors[0].URL != site.URL+"/file.pdf" || errs.Errors[0].Error == "" || errs.RobotsBlocked == nil {
		t.Errorf("getBatchScrapeErrors: %s", res[0].Value)
	}

	// An id that is no batch: the SDK's error, a 404.
	res = firecrawlSDK(t, dev.base, e2eKey, fcCall{"getBatchScrapeStatus", []any{"j_eu.c1.00000000000000000000"}})
	if r := res[0]; r.Thrown == "" || r.Status == nil || *r.Status != 404 {
		t.Errorf("an unknown batch: %+v", r)
	}

	// A batch with a webhook: a receiver on loopback gets started, a
	// page per URL and completed, signed with the account's webhook
	// secret (X-Firecrawl-Signature, and trawl's x-svc-signature), which
	// the account reads on GET /v1/billing/balance.
	type hookPost struct {
		header http.Header
		body   []byte
	}
	hooks := make(chan hookPost, 16)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hooks <- hookPost{r.Header.Clone(), b}
	}))
	defer recv.Close()
	res = firecrawlSDK(t, dev.base, e2eKey, fcCall{"batchScrape", []any{[]string{site.URL + "/d", site.URL + "/e"},
		map[string]any{"pollInterval": 1, "webhook": map[string]any{"url": recv.URL + "/fc", "metadata": map[string]any{"run": "e2e"}}}}})
	value(res[0], &j)
	if j.Status != "completed" || j.Completed != 2 {
		t.Fatalf("batch with a webhook: %+v", j)
	}
	req, _ := http.NewRequest("GET", dev.base+"/v1/billing/balance", nil)
	req.Header.Set("Authorization", "Bearer "+e2eKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var bal struct {
		WebhookSecret string `json:"webhook_secret"`
	}
	json.NewDecoder(resp.Body).Decode(&bal)
	resp.Body.Close()
	if !strings.HasPrefix(bal.WebhookSecret, "whsec_") {
		t.Fatalf("the account's webhook secret: %+v", bal)
	}
	types := map[string]int{}
	for range 4 {
		var p hookPost
		select {
		case p = <-hooks:
		case <-time.After(30 * time.Second):
			t.Fatalf("deliveries %v: not all four came", types)
		}
		var b struct {
			Type     string            `json:"type"`
			ID       string            `json:"id"`
			Metadata map[string]string `json:"metadata"`
		}
		json.Unmarshal(p.body, &b)
		types[b.Type]++
		if b.ID != j.ID || b.Metadata["run"] != "e2e" || !webhook.VerifyBody(bal.WebhookSecret, p.header.Get("X-Firecrawl-Signature"), p.body) ||
			!webhook.Verify(bal.WebhookSecret, p.header.Get("X-Svc-Timestamp"), p.header.Get("X-Svc-Signature"), p.body, time.Now(), 5*time.Minute) {
			t.Errorf("delivery %s %v", p.body, p.header)
		}
	}
	if types["batch_scrape.started"] != 1 || types["batch_scrape.page"] != 2 || types["batch_scrape.completed"] != 1 {
		t.Errorf("deliveries %v", types)
	}
}

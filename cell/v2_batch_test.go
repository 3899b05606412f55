package cell

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/testwait"
)

// batchSite serves the batch tests' pages: the v2 test page, a 404 page,
// a PDF (a failure: unsupported content), pages that wait for release,
// and large pages (/big) for pagination. It counts the fetches of each
// path.
type batchSite struct {
	*httptest.Server
	release chan struct{}
	hits    atomic.Int64
	slow    atomic.Int64 // fetches of /slow started
}

func newBatchSite(t *testing.T) *batchSite {
	s := &batchSite{release: make(chan struct{})}
	big := bigPage()
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		switch {
		case r.URL.Path == "/missing":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `<html><head><title>Not here</title></head><body><main><h1>Page not found</h1><p>The page you asked for is not on this site, sorry about that.</p></main></body></html>`)
			return
		case r.URL.Path == "/pdf":
			w.Header().Set("Content-Type", "application/pdf")
			io.WriteString(w, "%PDF-1.4")
			return
		case r.URL.Path == "/slow":
			s.slow.Add(1)
			select {
			case <-s.release:
			case <-r.Context().Done():
				return
			}
		case r.URL.Path == "/big":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, big)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, v2Page)
	}))
	t.Cleanup(func() {
		s.open()
		s.Close()
	})
	return s
}

func (s *batchSite) open() {
	select {
	case <-s.release:
	default:
		close(s.release)
	}
}

// bigPageSize is the size of bigPage: eight of them pass 10 MiB.
const bigPageSize = 1400 << 10

// bigPage is a short article in a page of bigPageSize: the rest is a
// comment, which costs the converters little (under the race detector
// too) and is all in rawHtml.
func bigPage() string {
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html><html lang="en"><head><title>A long read</title></head><body><main><article><h1>A long read</h1>`)
	b.WriteString(`<p>The kettle was filled, boiled, poured and filled again, and each time the water took a little longer to come to the boil than the time before.</p>`)
	b.WriteString("<!--")
	for b.Len() < bigPageSize {
		b.WriteString(" the archive of every earlier boil, kept in the page for no reader at all;")
	}
	b.WriteString(` --></article></main></body></html>`)
	return b.String()
}

// do sends method path with body as the gate would, for account (the
// tests' own when empty), with extra headers.
func (tc *testCell) do(t *testing.T, method, path, body, account string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, tc.srv.URL+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if account != "" {
		req.Header.Set(testAccountHeader, account)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

type batchStarted struct {
	Success     bool     `json:"success"`
	ID          string   `json:"id"`
	URL         string   `json:"url"`
	InvalidURLs []string `json:"invalidURLs"`
	Error       string   `json:"error"`
	Code        string   `json:"code"`
	Details     []struct {
		Path []string `json:"path"`
	} `json:"details"`
}

type batchStatus struct {
	Success     bool    `json:"success"`
	Status      string  `json:"status"`
	Total       int     `json:"total"`
	Completed   int     `json:"completed"`
	CreditsUsed float64 `json:"creditsUsed"`
	ExpiresAt   string  `json:"expiresAt"`
	Next        string  `json:"next"`
	Data        []v2Doc `json:"data"`
	Error       string  `json:"error"`
	Code        string  `json:"code"`
}

// startBatch posts a batch scrape and leaves it held; the usage is the
// cell's report to the gate.
func (tc *testCell) startBatch(t *testing.T, body string) (*http.Response, batchStarted, metering.Usage) {
	t.Helper()
	resp, b := tc.postHeld(t, "/v2/batch/scrape", body)
	r := decode[batchStarted](t, b)
	var u metering.Usage
	if h := resp.Header.Get(metering.Header); h != "" {
		var err error
		if u, err = metering.Parse(h); err != nil {
			t.Fatal(err)
		}
	}
	return resp, r, u
}

func (tc *testCell) batchStatus(t *testing.T, path string) batchStatus {
	t.Helper()
	resp, b := tc.get(t, path)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return decode[batchStatus](t, b)
}

func (tc *testCell) waitBatch(t *testing.T, id string, cond func(batchStatus) bool) batchStatus {
	t.Helper()
	var s batchStatus
	if err := testwait.Poll(60*time.Second, func() bool {
		s = tc.batchStatus(t, "/v2/batch/scrape/"+id)
		return cond(s)
	}); err != nil {
		t.Fatalf("batch %s: %v; last %+v", id, err, s)
	}
	return s
}

// A batch scrape is a held job charged per fetchable URL; released, its
// URLs become Firecrawl documents, its failures are listed apart.
func TestV2BatchScrape(t *testing.T) {
	site := newBatchSite(t)
	tc := newTestCell(t, nil)
	urls := []string{site.URL + "/a", site.URL + "/b", site.URL + "/missing", site.URL + "/pdf", "ftp://nope/", "not a url"}
	body, _ := json.Marshal(map[string]any{"urls": urls, "formats": []string{"markdown", "links"}, "onlyMainContent": true,
		"origin": "js-sdk@4.42.0", "integration": "test"})
	resp, r, u := tc.startBatch(t, string(body))
	if resp.StatusCode != 200 || !r.Success || r.ID == "" {
		t.Fatalf("start: %d %+v", resp.StatusCode, r)
	}
	if r.URL != tc.srv.URL+"/v2/batch/scrape/"+r.ID {
		t.Errorf("status URL %q", r.URL)
	}
	if len(r.InvalidURLs) != 2 || r.InvalidURLs[0] != "ftp://nope/" || r.InvalidURLs[1] != "not a url" {
		t.Errorf("invalidURLs %v", r.InvalidURLs)
	}
	// The gate charges the four valid URLs as a job's, then releases it.
	if u.Kind != metering.KindJob || u.Count == nil || *u.Count != 4 || u.Job != r.ID || u.Hold == "" {
		t.Fatalf("usage %+v", u)
	}
	s := tc.batchStatus(t, "/v2/batch/scrape/"+r.ID)
	if s.Status != "scraping" || s.Total != 4 || s.Completed != 0 || s.CreditsUsed != 0 || len(s.Data) != 0 || site.hits.Load() != 0 {
		t.Fatalf("held: %+v, %d fetched", s, site.hits.Load())
	}
	if s.ExpiresAt != "2026-11-29T12:00:00Z" {
		t.Errorf("expiresAt %q, want created + 7 days", s.ExpiresAt)
	}
	tc.release(t, resp)
	s = tc.waitBatch(t, r.ID, func(s batchStatus) bool { return s.Status == "completed" })
	if s.Total != 4 || s.Completed != 3 || s.CreditsUsed != 4 || len(s.Data) != 3 || s.Next != "" {
		t.Fatalf("completed: %+v", s)
	}
	bySource := map[string]v2Doc{}
	for _, d := range s.Data {
		bySource[d.Metadata["sourceURL"].(string)] = d
	}
	a := bySource[site.URL+"/a"]
	if a.Markdown == nil || !strings.Contains(*a.Markdown, "copper kettle was the fastest") || strings.Contains(*a.Markdown, "About us") {
		t.Errorf("document of /a: %+v", a)
	}
	if a.Metadata["title"] != "Kettles compared" || a.Metadata["statusCode"] != 200.0 || a.Metadata["ogSiteName"] != "Tea Lab" || len(a.Links) == 0 || a.HTML != nil {
		t.Errorf("document of /a: %+v", a)
	}
	if m := bySource[site.URL+"/missing"].Metadata; m["statusCode"] != 404.0 || m["error"] == nil {
		t.Errorf("a site's 404 page is a document with its status: %v", m)
	}

	resp, b := tc.get(t, "/v2/batch/scrape/"+r.ID+"/errors")
	var errs struct {
		Errors []struct {
			ID, Timestamp, URL, Code, Error string
		} `json:"errors"`
		RobotsBlocked []string `json:"robotsBlocked"`
	}
	if err := json.Unmarshal(b, &errs); err != nil || resp.StatusCode != 200 {
		t.Fatalf("errors: %d %s", resp.StatusCode, b)
	}
	if len(errs.Errors) != 1 || errs.RobotsBlocked == nil {
		t.Fatalf("errors %s", b)
	}
	if e := errs.Errors[0]; e.URL != site.URL+"/pdf" || e.Code != "SCRAPE_FAILED" || e.Error == "" || e.ID == "" || e.Timestamp != "2026-11-22T12:00:00Z" {
		t.Errorf("error %+v", e)
	}

	// The native job routes see the same job.
	if js := tc.status(t, r.ID); js.Status != "done" || js.Done != 3 || js.Error != 1 {
		t.Errorf("native status %+v", js)
	}
	// Behind a TLS front the status URL is https.
	resp2, b := tc.do(t, "POST", "/v2/batch/scrape", `{"urls":["`+site.URL+`/c"]}`, "", map[string]string{"X-Forwarded-Proto": "https"})
	if r2 := decode[batchStarted](t, b); resp2.StatusCode != 200 || !strings.HasPrefix(r2.URL, "https://"+strings.TrimPrefix(tc.srv.URL, "http://")+"/v2/batch/scrape/j_") {
		t.Errorf("behind TLS: %d %s", resp2.StatusCode, b)
	}
}

// A batch's documents come 10 MiB a page: next is the absolute URL of the
// rest, ?skip=N skips N documents.
func TestV2BatchPages(t *testing.T) {
	site := newBatchSite(t)
	tc := newTestCell(t, nil)
	var urls []string
	for i := range 8 {
		urls = append(urls, fmt.Sprintf("%s/big?i=%d", site.URL, i))
	}
	body, _ := json.Marshal(map[string]any{"urls": urls, "formats": []string{"markdown", "rawHtml"}})
	resp, r, _ := tc.startBatch(t, string(body))
	tc.release(t, resp)
	tc.waitJob(t, r.ID, func(s jobStatus) bool { return s.Status == "done" }) // polled: the small native status
	seen := map[string]bool{}
	pages := 0
	for next := "/v2/batch/scrape/" + r.ID; next != ""; pages++ {
		resp, b := tc.get(t, strings.TrimPrefix(next, tc.srv.URL))
		if resp.StatusCode != 200 || len(b) > 10<<20+64<<10 {
			t.Fatalf("page %d: %d, %d bytes", pages, resp.StatusCode, len(b))
		}
		p := decode[batchStatus](t, b)
		if p.Status != "completed" || p.Completed != 8 || p.Total != 8 || (pages == 0 && (p.Next == "" || len(p.Data) == 0)) {
			t.Fatalf("page %d: %d documents, status %s, completed %d, next %q", pages, len(p.Data), p.Status, p.Completed, p.Next)
		}
		for _, d := range p.Data {
			if d.RawHTML == nil || len(*d.RawHTML) < bigPageSize || d.Markdown == nil {
				t.Fatalf("a big document without its formats: %v", d.Metadata)
			}
			seen[d.Metadata["sourceURL"].(string)] = true
		}
		if want := fmt.Sprintf("%s/v2/batch/scrape/%s?skip=%d", tc.srv.URL, r.ID, len(seen)); p.Next != "" && p.Next != want {
			t.Fatalf("next %q", p.Next)
		}
		next = p.Next
	}
	if len(seen) != 8 || pages < 2 {
		t.Fatalf("%d documents over %d pages", len(seen), pages)
	}
	if p := tc.batchStatus(t, "/v2/batch/scrape/"+r.ID+"?skip=100"); len(p.Data) != 0 || p.Next != "" || p.Status != "completed" {
		t.Errorf("skip past the end: %+v", p)
	}
	resp, b := tc.get(t, "/v2/batch/scrape/"+r.ID+"?skip=-1")
	if e := decode[batchStatus](t, b); resp.StatusCode != 400 || e.Code != "BAD_REQUEST" || e.Success {
		t.Errorf("skip=-1: %d %s", resp.StatusCode, b)
	}
}

// Cancel: what has not started never is, what is in flight finishes; it
// survives a restart. Another account's batch is not found, nor is a
// native job through the v2 routes.
func TestV2BatchCancel(t *testing.T) {
	site := newBatchSite(t)
	dir := t.TempDir()
	tc := newTestCell(t, func(c *Config) { c.DataDir = dir })
	var urls []string
	for i := range 6 {
		urls = append(urls, fmt.Sprintf("%s/slow?i=%d", site.URL, i))
	}
	body, _ := json.Marshal(map[string]any{"urls": urls, "maxConcurrency": 1})
	resp, r, _ := tc.startBatch(t, string(body))
	tc.release(t, resp)
	if err := testwait.Poll(10*time.Second, func() bool { return site.slow.Load() == 1 }); err != nil {
		t.Fatal("the first URL never started")
	}

	for _, c := range []struct{ method, path string }{
		{"GET", "/v2/batch/scrape/" + r.ID},
		{"DELETE", "/v2/batch/scrape/" + r.ID},
		{"GET", "/v2/batch/scrape/" + r.ID + "/errors"},
	} {
		resp, b := tc.do(t, c.method, c.path, "", "acct_other", nil)
		if e := decode[batchStatus](t, b); resp.StatusCode != 404 || e.Success || e.Code != "NOT_FOUND" {
			t.Errorf("%s %s by another account: %d %s", c.method, c.path, resp.StatusCode, b)
		}
	}

	resp, b := tc.do(t, "DELETE", "/v2/batch/scrape/"+r.ID, "", "", nil)
	if c := decode[map[string]any](t, b); resp.StatusCode != 200 || c["success"] != true || c["status"] != "cancelled" {
		t.Fatalf("cancel: %d %s", resp.StatusCode, b)
	}
	if s := tc.batchStatus(t, "/v2/batch/scrape/"+r.ID); s.Status != "cancelled" || s.CreditsUsed != 6 {
		t.Fatalf("after cancel: %+v", s)
	}
	site.open() // the one in flight finishes
	tc.waitJob(t, r.ID, func(s jobStatus) bool { return s.Pending == 0 })
	s := tc.batchStatus(t, "/v2/batch/scrape/"+r.ID)
	if s.Status != "cancelled" || s.Completed != 1 || len(s.Data) != 1 || site.slow.Load() != 1 {
		t.Fatalf("after the one in flight: %+v, %d fetched", s, site.slow.Load())
	}
	if resp, b := tc.do(t, "DELETE", "/v2/batch/scrape/"+r.ID, "", "", nil); resp.StatusCode != 200 {
		t.Errorf("a second cancel: %d %s", resp.StatusCode, b)
	}
	tc.srv.Close()
	tc.Cell.Close()

	c2, err := New(Config{DataDir: dir, AllowPrivateNetworks: true, RegionKeys: testKeys, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	tc2 := &testCell{Cell: c2, srv: httptest.NewServer(asGate(t, c2.Handler()))}
	defer func() { tc2.srv.Close(); c2.Close() }()
	if s := tc2.batchStatus(t, "/v2/batch/scrape/"+r.ID); s.Status != "cancelled" || s.Completed != 1 || len(s.Data) != 1 {
		t.Fatalf("after a restart: %+v", s)
	}
	if js := tc2.status(t, r.ID); js.Pending != 0 || site.slow.Load() != 1 {
		t.Fatalf("after a restart: %+v, %d fetched", js, site.slow.Load())
	}

	// A native job is no batch scrape; a malformed id is not found.
	_, b = tc2.post(t, "/scrape/jobs", `{"urls":["`+site.URL+`/a"]}`)
	native := decode[map[string]string](t, b)["job_id"]
	for _, p := range []string{"/v2/batch/scrape/" + native, "/v2/batch/scrape/" + native + "/errors", "/v2/batch/scrape/nope"} {
		resp, b := tc2.get(t, p)
		if e := decode[batchStatus](t, b); resp.StatusCode != 404 || e.Code != "NOT_FOUND" {
			t.Errorf("GET %s: %d %s", p, resp.StatusCode, b)
		}
	}
}

// A cell stopped mid-batch finishes it when it starts again: every
// document once, nothing lost.
func TestV2BatchSurvivesRestart(t *testing.T) {
	site := newBatchSite(t)
	dir := t.TempDir()
	tc := newTestCell(t, func(c *Config) { c.DataDir = dir; c.JobConcurrency = 2; c.Region = "sin"; c.Name = "c7" })
	var urls []string
	for i := range 12 {
		urls = append(urls, fmt.Sprintf("%s/slow?i=%d", site.URL, i))
	}
	body, _ := json.Marshal(map[string]any{"urls": urls, "formats": []string{"markdown"}})
	resp, r, _ := tc.startBatch(t, string(body))
	tc.release(t, resp)
	if err := testwait.Poll(10*time.Second, func() bool { return site.slow.Load() == 2 }); err != nil {
		t.Fatal("the batch never started")
	}
	tc.srv.Close()
	tc.Cell.Close()
	site.open()

	c2, err := New(Config{Region: "sin", Name: "c7", DataDir: dir, AllowPrivateNetworks: true, RegionKeys: testKeys, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	tc2 := &testCell{Cell: c2, srv: httptest.NewServer(asGate(t, c2.Handler()))}
	defer func() { tc2.srv.Close(); c2.Close() }()
	s := tc2.waitBatch(t, r.ID, func(s batchStatus) bool { return s.Status == "completed" })
	if s.Completed != 12 || len(s.Data) != 12 || s.CreditsUsed != 12 {
		t.Fatalf("after the restart: %+v", s)
	}
	seen := map[string]bool{}
	for _, d := range s.Data {
		if d.Markdown == nil || !strings.Contains(*d.Markdown, "copper kettle") {
			t.Errorf("document %v", d.Metadata)
		}
		seen[d.Metadata["sourceURL"].(string)] = true
	}
	if len(seen) != 12 {
		t.Fatalf("%d distinct documents", len(seen))
	}
}

// Firecrawl's refusals: a wrong type, what a batch does not honour, bad
// URLs when they are not to be ignored. None creates a job.
func TestV2BatchRefusals(t *testing.T) {
	tc := newTestCell(t, nil)
	ok := `"urls":["http://a.example/"]`
	tests := []struct {
		name, body string
		header     map[string]string
		code       string
		path       string
	}{
		{"urls not a list", `{"urls":"http://a.example/"}`, nil, "BAD_REQUEST", "urls"},
		{"formats not a list", `{` + ok + `,"formats":"markdown"}`, nil, "BAD_REQUEST", "formats"},
		{"maxConcurrency a string", `{` + ok + `,"maxConcurrency":"2"}`, nil, "BAD_REQUEST", "maxConcurrency"},
		{"maxConcurrency 0", `{` + ok + `,"maxConcurrency":0}`, nil, "BAD_REQUEST", "maxConcurrency"},
		{"no urls", `{"urls":[]}`, nil, "BAD_REQUEST", "urls"},
		{"too many urls", `{"urls":[` + strings.Repeat(`"http://a.example/",`, 10000) + `"http://a.example/"]}`, nil, "BAD_REQUEST", "urls"},
		{"unknown format", `{` + ok + `,"formats":["telepathy"]}`, nil, "BAD_REQUEST", "formats.0"},
		{"webhook with an unknown key", `{` + ok + `,"webhook":{"url":"https://hooks.example/x","evnets":["page"]}}`, nil, "BAD_REQUEST", "webhook"},
		{"appendToId", `{` + ok + `,"appendToId":"j_eu.c1.00000000000000000000"}`, nil, "UNSUPPORTED_FEATURE", "appendToId"},
		{"zero data retention", `{` + ok + `,"zeroDataRetention":true}`, nil, "UNSUPPORTED_FEATURE", "zeroDataRetention"},
		{"json format", `{` + ok + `,"formats":[{"type":"json","prompt":"the price"}]}`, nil, "UNSUPPORTED_FEATURE", "formats.0"},
		{"summary format", `{` + ok + `,"formats":["markdown","summary"]}`, nil, "UNSUPPORTED_FEATURE", "formats.1"},
		{"headers", `{` + ok + `,"headers":{"X-A":"1"}}`, nil, "UNSUPPORTED_FEATURE", "headers"},
		{"invalid URL not ignored", `{"urls":["http://a.example/","ftp://nope/"],"ignoreInvalidURLs":false}`, nil, "BAD_REQUEST", "urls.1"},
		{"no valid URL", `{"urls":["ftp://nope/","not a url"]}`, nil, "BAD_REQUEST", "urls"},
		{"idempotency key", `{` + ok + `}`, map[string]string{"x-idempotency-key": "k1"}, "UNSUPPORTED_FEATURE", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := tc.do(t, "POST", "/v2/batch/scrape", tt.body, "", tt.header)
			r := decode[batchStarted](t, b)
			if resp.StatusCode != 400 || r.Success || r.Code != tt.code || r.Error == "" {
				t.Fatalf("%d %s, want 400 %s", resp.StatusCode, b, tt.code)
			}
			if tt.path != "" && (len(r.Details) == 0 || strings.Join(r.Details[0].Path, ".") != tt.path) {
				t.Errorf("details %s, want the path %s", b, tt.path)
			}
			if resp.Header.Get(metering.Header) != "" {
				t.Errorf("a refusal carries usage %q", resp.Header.Get(metering.Header))
			}
		})
	}
	n := 0
	tc.store.Scan([]byte("ji/"), nil, func(_, _ []byte) (bool, error) { n++; return true, nil })
	if n != 0 {
		t.Fatalf("%d jobs stored after refusals", n)
	}
}

// A batch's creditsUsed is what the gate said it charged when it released
// the batch (Trawl-Charged), whatever its price table.
func TestV2BatchCreditsFromTheGate(t *testing.T) {
	site := newBatchSite(t)
	tc := newTestCell(t, nil)
	resp, r, u := tc.startBatch(t, `{"urls": ["`+site.URL+`/a", "`+site.URL+`/b"]}`)
	if resp.StatusCode != 200 || u.Hold == "" {
		t.Fatalf("start: %d %+v", resp.StatusCode, r)
	}
	rel, _ := tc.do(t, "POST", "/scrape/jobs/"+u.Job+"/release", "", "", map[string]string{metering.HoldHeader: u.Hold, metering.ChargedHeader: "7.500"})
	if rel.StatusCode != 200 {
		t.Fatalf("release: %d", rel.StatusCode)
	}
	tc.waitBatch(t, r.ID, func(s batchStatus) bool { return s.Status == "completed" })
	_, b := tc.get(t, "/v2/batch/scrape/"+r.ID)
	var s struct{ CreditsUsed float64 }
	json.Unmarshal(b, &s)
	if s.CreditsUsed != 7.5 {
		t.Errorf("creditsUsed %v, want the 7.500 the gate charged", s.CreditsUsed)
	}
}

package cell

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/metering"

	"github.com/trawlhq/trawl/cell/jobs"
)

const articleHTML = `<!DOCTYPE html><html lang="en"><head><title>Pot of tea</title></head><body>
<nav><a href="/">Home</a> <a href="/about">About us</a></nav>
<main><article><h1>Brewing tea</h1>
<p>Warm the pot first. Then add one spoon of leaves per cup and one for the pot, and pour water that has just boiled.</p>
<p>Wait four minutes for black tea, three for oolong and two for green tea, then pour through a strainer.</p>
<table><thead><tr><th>Tea</th><th>Minutes</th></tr></thead><tbody><tr><td>Black</td><td>4</td></tr><tr><td>Green</td><td>2</td></tr></tbody></table>
<p>See <a href="/more">more about tea</a>.</p>
</article></main><footer>Copyright 2026 Example footer text</footer></body></html>`

// origin is a local site with a few behaviours the tests need.
type origin struct {
	*httptest.Server
	hits    sync.Map // path -> *atomic.Int64
	release chan struct{}
	failing atomic.Bool // /flaky drops the connection while set
}

func (o *origin) count(path string) int64 {
	v, _ := o.hits.LoadOrStore(path, new(atomic.Int64))
	return v.(*atomic.Int64).Load()
}

func newOrigin(t *testing.T) *origin {
	o := &origin{release: make(chan struct{})}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, _ := o.hits.LoadOrStore(r.URL.Path, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
		switch {
		case r.URL.Path == "/missing":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `<html><head><title>Not here</title></head><body><main><h1>Page not found</h1><p>The page you asked for is not on this site, sorry about that, please look elsewhere for it.</p></main></body></html>`)
		case r.URL.Path == "/slow":
			select {
			case <-o.release:
			case <-r.Context().Done():
				return
			}
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, articleHTML)
		case r.URL.Path == "/flaky":
			if o.failing.Load() {
				hj, _ := w.(http.Hijacker)
				conn, _, _ := hj.Hijack()
				conn.Close() // the site "does not answer"
				return
			}
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, articleHTML)
		case r.URL.Path == "/pdf":
			w.Header().Set("Content-Type", "application/pdf")
			io.WriteString(w, "%PDF-1.4")
		default:
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, articleHTML)
		}
	}))
	t.Cleanup(func() {
		select {
		case <-o.release:
		default:
			close(o.release)
		}
		o.Close()
	})
	return o
}

type testCell struct {
	*Cell
	srv *httptest.Server
	now atomic.Int64
}

func newTestCell(t *testing.T, mod func(*Config)) *testCell {
	t.Helper()
	tc := &testCell{}
	tc.now.Store(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).UnixNano())
	cfg := Config{
		DataDir:              t.TempDir(),
		AllowPrivateNetworks: true,
		FetchTimeout:         5 * time.Second,
		Now:                  func() time.Time { return time.Unix(0, tc.now.Load()) },
		Logger:               slog.New(slog.NewTextHandler(io.Discard, nil)),
		RegionKeys:           testKeys,
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tc.Cell = c
	tc.srv = httptest.NewServer(asGate(t, c.Handler()))
	t.Cleanup(func() {
		tc.srv.Close()
		c.Close()
	})
	return tc
}

func (tc *testCell) advance(d time.Duration) { tc.now.Add(int64(d)) }

// post posts body and, for an answer that holds a job or a retry,
// releases it as the gate's meter does once it has charged it.
func (tc *testCell) post(t *testing.T, path, body string) (*http.Response, []byte) {
	t.Helper()
	resp, b := tc.postHeld(t, path, body)
	tc.release(t, resp)
	return resp, b
}

// postHeld posts body and leaves any hold unreleased.
func (tc *testCell) postHeld(t *testing.T, path, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(tc.srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// release releases the hold resp's usage names, if any.
func (tc *testCell) release(t *testing.T, resp *http.Response) {
	t.Helper()
	raw := resp.Header.Get(UsageHeader)
	if raw == "" {
		return
	}
	u, err := metering.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if u.Hold == "" {
		return
	}
	req, _ := http.NewRequest("POST", tc.srv.URL+"/scrape/jobs/"+u.Job+"/release", nil)
	req.Header.Set(metering.HoldHeader, u.Hold)
	rr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rr.Body)
	rr.Body.Close()
	if rr.StatusCode != 200 {
		t.Fatalf("release %s: %d %s", u.Job, rr.StatusCode, b)
	}
}

func (tc *testCell) get(t *testing.T, path string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(tc.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

type scrapeResp struct {
	OK          bool    `json:"ok"`
	URL         string  `json:"url"`
	Status      int     `json:"status"`
	Title       string  `json:"title"`
	Markdown    *string `json:"markdown"`
	HTML        *string `json:"html"`
	ContentHash string  `json:"content_hash"`
	MS          *int64  `json:"ms"`
	Parsed      *struct {
		Links    []map[string]any `json:"links"`
		Tables   []map[string]any `json:"tables"`
		Metadata map[string]any   `json:"metadata"`
	} `json:"parsed"`
	Error   string `json:"error"`
	Message string `json:"message"`
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func TestScrapeReturnsMarkdownAndCaches(t *testing.T) {
	o := newOrigin(t)
	tc := newTestCell(t, nil)
	body := fmt.Sprintf(`{"url":%q}`, o.URL+"/article")
	resp, b := tc.post(t, "/scrape", body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	r := decode[scrapeResp](t, b)
	if !r.OK || r.Status != 200 || r.Markdown == nil || r.HTML == nil || r.MS == nil {
		t.Fatalf("incomplete response: %s", b)
	}
	md := *r.Markdown
	for _, want := range []string{"# Brewing tea", "| Tea | Minutes |", "[more about tea](" + o.URL + "/more)"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	for _, unwanted := range []string{"About us", "Example footer"} {
		if strings.Contains(md, unwanted) {
			t.Errorf("markdown keeps boilerplate %q:\n%s", unwanted, md)
		}
	}
	if !strings.HasPrefix(r.ContentHash, "sha256:") || len(r.ContentHash) != len("sha256:")+64 {
		t.Errorf("content_hash %q", r.ContentHash)
	}
	if u := resp.Header.Get(UsageHeader); !strings.Contains(u, `"cache":"miss"`) {
		t.Errorf("usage header %q", u)
	}

	// Same URL and options inside the window: no network fetch.
	resp, b2 := tc.post(t, "/scrape", body)
	if got := o.count("/article"); got != 1 {
		t.Fatalf("origin hit %d times, want 1 (cache)", got)
	}
	if r2 := decode[scrapeResp](t, b2); r2.ContentHash != r.ContentHash || *r2.Markdown != md {
		t.Fatalf("cached result differs")
	}
	if u := resp.Header.Get(UsageHeader); !strings.Contains(u, `"cache":"hit"`) {
		t.Errorf("usage header on hit %q", u)
	}
	// Other options are another cache entry.
	tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q,"format":"md"}`, o.URL+"/article"))
	if got := o.count("/article"); got != 2 {
		t.Fatalf("origin hit %d times, want 2", got)
	}
	// After the window, fetched again; the page is in the archive either way.
	tc.advance(11 * time.Minute)
	tc.post(t, "/scrape", body)
	if got := o.count("/article"); got != 3 {
		t.Fatalf("origin hit %d times after the window, want 3", got)
	}
	if p, err := tc.scrape.Archived(o.URL + "/article"); err != nil || !strings.Contains(string(p.Body), "Brewing tea") {
		t.Fatalf("archive: %v", err)
	}
}

func TestScrapeFormatsAndParse(t *testing.T) {
	o := newOrigin(t)
	tc := newTestCell(t, nil)
	_, b := tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q,"format":"md"}`, o.URL+"/a"))
	if r := decode[scrapeResp](t, b); r.HTML != nil || r.Markdown == nil {
		t.Fatalf("format md: %s", b)
	}
	_, b = tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q,"format":"html"}`, o.URL+"/a"))
	if r := decode[scrapeResp](t, b); r.HTML == nil || r.Markdown != nil {
		t.Fatalf("format html: %s", b)
	}
	_, b = tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q,"parse":true}`, o.URL+"/a"))
	r := decode[scrapeResp](t, b)
	if r.Parsed == nil || len(r.Parsed.Links) == 0 || len(r.Parsed.Tables) != 1 || r.Parsed.Metadata == nil {
		t.Fatalf("parse true: %s", b)
	}
	_, b = tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q,"parse":{"tables":true}}`, o.URL+"/a"))
	r = decode[scrapeResp](t, b)
	if r.Parsed == nil || len(r.Parsed.Tables) != 1 || r.Parsed.Links != nil || r.Parsed.Metadata != nil {
		t.Fatalf("parse tables only: %s", b)
	}
}

func TestScrapeSiteErrorsAreResults(t *testing.T) {
	o := newOrigin(t)
	tc := newTestCell(t, nil)
	resp, b := tc.post(t, "/scrape", fmt.Sprintf(`{"url":%q}`, o.URL+"/missing"))
	r := decode[scrapeResp](t, b)
	if resp.StatusCode != 200 || !r.OK || r.Status != 404 || !strings.Contains(*r.Markdown, "Page not found") {
		t.Fatalf("site 404: %d %s", resp.StatusCode, b)
	}
}

func TestScrapeRefusals(t *testing.T) {
	o := newOrigin(t)
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := closed.Addr().String()
	closed.Close()
	tc := newTestCell(t, nil)
	strict := newTestCell(t, func(c *Config) { c.AllowPrivateNetworks = false })
	cases := []struct {
		name   string
		cell   *testCell
		body   string
		status int
		code   string
		msg    string
	}{
		{"malformed json", tc, `{"url":`, 400, "bad_input", "not valid JSON"},
		{"not an object", tc, `[1,2]`, 400, "bad_input", ""},
		{"empty body", tc, ``, 400, "bad_input", "empty"},
		{"two objects", tc, `{"url":"http://a.example/"} {}`, 400, "bad_input", "single"},
		{"unknown field", tc, `{"url":"http://a.example/","colour":"red"}`, 400, "bad_input", "colour"},
		{"url wrong type", tc, `{"url":42}`, 400, "bad_input", "url"},
		{"parse wrong type", tc, `{"url":"http://a.example/","parse":"yes"}`, 400, "bad_input", "parse"},
		{"parse unknown key", tc, `{"url":"http://a.example/","parse":{"images":true}}`, 400, "bad_input", "images"},
		{"bad format", tc, `{"url":"http://a.example/","format":"pdf"}`, 400, "bad_input", "format"},
		{"bad proxy", tc, `{"url":"http://a.example/","proxy":"tor"}`, 400, "bad_input", "proxy"},
		{"no proxy pool", tc, `{"url":"http://a.example/","proxy":"residential","country":"us"}`, 400, "bad_input", "residential"},
		{"bad country", tc, `{"url":"http://a.example/","country":"usa"}`, 400, "bad_input", "country"},
		{"missing url", tc, `{}`, 400, "bad_input", "url is required"},
		{"not a url", tc, `{"url":"http://"}`, 400, "bad_input", "url is not valid"},
		{"ftp scheme", tc, `{"url":"ftp://example.com/x"}`, 400, "bad_input", "url must start with http:// or https://"},
		{"file scheme", tc, `{"url":"file:///etc/passwd"}`, 400, "bad_input", "url must start with http:// or https://"},
		{"loopback", strict, `{"url":"http://127.0.0.1:1/"}`, 400, "bad_input", "url host is not public"},
		{"decimal ip", strict, `{"url":"http://2130706433/"}`, 400, "bad_input", "url host is not public"},
		{"mapped v6", strict, `{"url":"http://[::ffff:127.0.0.1]/"}`, 400, "bad_input", "url host is not public"},
		{"localhost", strict, `{"url":"http://localhost:8080/"}`, 400, "bad_input", "url host is not public"},
		{"private", strict, `{"url":"http://10.1.2.3/"}`, 400, "bad_input", "url host is not public"},
		{"link local", strict, `{"url":"http://169.254.169.254/latest/meta-data/"}`, 400, "bad_input", "url host is not public"},
		{"site down", tc, fmt.Sprintf(`{"url":"http://%s/"}`, deadAddr), 502, "fetch_failed", "did not answer"},
		{"a PDF that is not one", tc, fmt.Sprintf(`{"url":%q}`, o.URL+"/pdf"), 422, "unsupported_content", "the PDF could not be converted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, b := c.cell.post(t, "/scrape", c.body)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, b)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type %q", ct)
			}
			r := decode[scrapeResp](t, b)
			if r.Error != c.code || !strings.Contains(r.Message, c.msg) {
				t.Fatalf("body %s, want error %q with message containing %q", b, c.code, c.msg)
			}
		})
	}
	if n := o.count("/pdf"); n != 1 {
		t.Errorf("refused requests reached the origin (%d)", n)
	}
}

func TestRoutesAnswerJSON(t *testing.T) {
	tc := newTestCell(t, nil)
	resp, b := tc.get(t, "/scrape")
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" || !strings.Contains(string(b), `"method_not_allowed"`) {
		t.Fatalf("GET /scrape: %d %s", resp.StatusCode, b)
	}
	resp, b = tc.get(t, "/nope")
	if resp.StatusCode != 404 || !strings.Contains(string(b), `"not_found"`) {
		t.Fatalf("GET /nope: %d %s", resp.StatusCode, b)
	}
	resp, b = tc.post(t, "/scrape", strings.Repeat(" ", maxScrapeBody+1))
	if resp.StatusCode != 413 || !strings.Contains(string(b), `"too_large"`) {
		t.Fatalf("huge body: %d %s", resp.StatusCode, b)
	}
}

func readLines(t *testing.T, r io.Reader) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		out = append(out, decode[map[string]any](t, sc.Bytes()))
	}
	return out
}

func TestBatchStreamsAsEachFinishes(t *testing.T) {
	o := newOrigin(t)
	tc := newTestCell(t, nil)
	body := fmt.Sprintf(`{"urls":[%q,%q,%q,"gopher://x/"],"format":"md"}`, o.URL+"/slow", o.URL+"/a", o.URL+"/missing")
	resp, err := http.Post(tc.srv.URL+"/scrape/batch", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	got := map[string]map[string]any{}
	// Three lines must arrive while /slow is still held back.
	for len(got) < 3 && sc.Scan() {
		l := decode[map[string]any](t, sc.Bytes())
		got[l["url"].(string)] = l
	}
	if _, ok := got[o.URL+"/slow"]; ok || len(got) != 3 {
		t.Fatalf("lines before release: %v", got)
	}
	close(o.release)
	for sc.Scan() {
		l := decode[map[string]any](t, sc.Bytes())
		got[l["url"].(string)] = l
	}
	if len(got) != 4 {
		t.Fatalf("want 4 lines, got %d", len(got))
	}
	if l := got[o.URL+"/a"]; l["ok"] != true || l["result"].(map[string]any)["markdown"] == nil {
		t.Errorf("ok line: %v", l)
	}
	if l := got[o.URL+"/missing"]; l["ok"] != true || l["result"].(map[string]any)["status"] != 404.0 {
		t.Errorf("404 line: %v", l)
	}
	if l := got["gopher://x/"]; l["ok"] != false || l["error"] != "bad_input" || !strings.Contains(l["message"].(string), "http://") {
		t.Errorf("error line: %v", l)
	}
}

func TestBatchLimitsAndDisconnect(t *testing.T) {
	o := newOrigin(t)
	tc := newTestCell(t, func(c *Config) { c.BatchConcurrency = 2 })
	resp, b := tc.post(t, "/scrape/batch", `{"urls":[]}`)
	if resp.StatusCode != 400 {
		t.Fatalf("empty batch: %d %s", resp.StatusCode, b)
	}
	urls := make([]string, 51)
	for i := range urls {
		urls[i] = fmt.Sprintf("%q", fmt.Sprintf("%s/p%d", o.URL, i))
	}
	resp, b = tc.post(t, "/scrape/batch", `{"urls":[`+strings.Join(urls, ",")+`]}`)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "1 to 50") {
		t.Fatalf("51 urls: %d %s", resp.StatusCode, b)
	}

	// Ten slow URLs with concurrency 2: the client leaves; the rest never start.
	slow := make([]string, 10)
	for i := range slow {
		slow[i] = fmt.Sprintf("%q", fmt.Sprintf("%s/slow?i=%d", o.URL, i))
	}
	req, _ := http.NewRequest("POST", tc.srv.URL+"/scrape/batch", strings.NewReader(`{"urls":[`+strings.Join(slow, ",")+`]}`))
	cresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for o.count("/slow") < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cresp.Body.Close() // disconnect
	// The two in flight are cancelled; no third request is ever made.
	deadline = time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if n := o.count("/slow"); n > 2 {
			t.Fatalf("fetches continued after disconnect: %d", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type jobStatus struct {
	JobID   string `json:"job_id"`
	Status  string `json:"status"`
	Total   int    `json:"total"`
	Pending int    `json:"pending"`
	Done    int    `json:"done"`
	Error   int    `json:"error"`
	URLs    []struct {
		URL      string `json:"url"`
		State    string `json:"state"`
		Attempts int    `json:"attempts"`
		Error    string `json:"error"`
	} `json:"urls"`
}

func (tc *testCell) waitJob(t *testing.T, id string, cond func(jobStatus) bool) jobStatus {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, b := tc.get(t, "/scrape/jobs/"+id)
		s := decode[jobStatus](t, b)
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: condition not met, last status %s", id, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (tc *testCell) allResults(t *testing.T, id string) []map[string]any {
	t.Helper()
	var all []map[string]any
	for {
		resp, b := tc.get(t, fmt.Sprintf("/scrape/jobs/%s/results?after=%d", id, len(all)))
		if resp.StatusCode != 200 {
			t.Fatalf("results: %d %s", resp.StatusCode, b)
		}
		page := readLines(t, strings.NewReader(string(b)))
		if len(page) == 0 {
			return all
		}
		if len(page) > 500 {
			t.Fatalf("page of %d lines", len(page))
		}
		all = append(all, page...)
	}
}

func TestJobLifecycleAndRetry(t *testing.T) {
	o := newOrigin(t)
	tc := newTestCell(t, func(c *Config) { c.JobConcurrency = 4 })
	o.failing.Store(true) // /flaky fails both automatic attempts
	var urls []string
	for i := range 1200 {
		urls = append(urls, fmt.Sprintf("%q", fmt.Sprintf("%s/page?i=%d", o.URL, i)))
	}
	urls = append(urls, fmt.Sprintf("%q", o.URL+"/flaky"), `"ftp://nope/"`)
	resp, b := tc.post(t, "/scrape/jobs", `{"urls":[`+strings.Join(urls, ",")+`],"format":"md"}`)
	if resp.StatusCode != 202 {
		t.Fatalf("submit: %d %s", resp.StatusCode, b)
	}
	sub := decode[map[string]string](t, b)
	id := sub["job_id"]
	if region, cell, ok := jobs.ParseJobID(id); !ok || region != "eu" || cell != "c1" || sub["status"] != "pending" {
		t.Fatalf("submit body %s: id names %q.%q (ok %v), want the default eu.c1", b, region, cell, ok)
	}
	s := tc.waitJob(t, id, func(s jobStatus) bool { return s.Status == "done" })
	if s.Total != 1202 || s.Done != 1200 || s.Error != 2 || s.Pending != 0 {
		t.Fatalf("counts: %+v", s)
	}
	res := tc.allResults(t, id)
	if len(res) != 1202 {
		t.Fatalf("%d result lines, want 1202", len(res))
	}
	_, b = tc.get(t, "/scrape/jobs/"+id+"?full=1")
	full := decode[jobStatus](t, b)
	if len(full.URLs) != 1202 || full.URLs[1200].State != "error" || full.URLs[1200].Attempts != 2 || full.URLs[0].State != "done" {
		t.Fatalf("full detail: %d urls, flaky %+v", len(full.URLs), full.URLs[1200])
	}

	if n := o.count("/flaky"); n < 2 {
		t.Fatalf("flaky fetched %d times, want at least 2 (two attempts)", n)
	}
	o.failing.Store(false)
	resp, b = tc.post(t, "/scrape/jobs/"+id+"/retry", "")
	// The flaky URL is retried; ftp://nope/ can never be fetched: not.
	if r := decode[map[string]any](t, b); resp.StatusCode != 200 || r["retried"] != 1.0 {
		t.Fatalf("retry: %d %s", resp.StatusCode, b)
	}
	s = tc.waitJob(t, id, func(s jobStatus) bool { return s.Status == "done" })
	if s.Done != 1201 || s.Error != 1 {
		t.Fatalf("after retry: %+v", s)
	}
	res2 := tc.allResults(t, id)
	if len(res2) != 1202 {
		t.Fatalf("after retry %d lines, want 1202 (each URL once)", len(res2))
	}
	seen := map[string]int{}
	for i, l := range res2 {
		seen[l["url"].(string)]++
		if i < len(res) && l["url"] != res[i]["url"] {
			t.Fatalf("line %d moved: %v -> %v", i, res[i]["url"], l["url"])
		}
		if l["url"] == o.URL+"/flaky" && l["ok"] != true {
			t.Fatalf("flaky line not replaced: %v", l)
		}
	}
	if len(seen) != 1202 {
		t.Fatalf("%d distinct URLs", len(seen))
	}
}

func TestJobRefusals(t *testing.T) {
	tc := newTestCell(t, nil)
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/scrape/jobs", `{"urls":[]}`, 400},
		{"POST", "/scrape/jobs", `{"urls":"http://a.example/"}`, 400},
		{"POST", "/scrape/jobs", `{"urls":["http://a.example/"],"format":"txt"}`, 400},
		{"POST", "/scrape/jobs", `{"urls":[` + strings.Repeat(`"http://a.example/",`, 10000) + `"http://a.example/"]}`, 400},
		{"GET", "/scrape/jobs/j_nope", "", 404},
		{"GET", "/scrape/jobs/j_nope/results", "", 404},
		{"POST", "/scrape/jobs/j_nope/retry", "", 404},
		{"GET", "/scrape/jobs/j_5f2a09c3e1d4b7a86f10", "", 404},      // the old form
		{"GET", "/scrape/jobs/j_eu.c1.5f2a09c3e1d4b7a86f1", "", 404}, // short
		{"GET", "/scrape/jobs/j_eu.C1.5f2a09c3e1d4b7a86f10/results", "", 404},
		{"GET", "/scrape/jobs/j_nope?full=2", "", 404},                // the id is checked first
		{"GET", "/scrape/jobs/j_eu.c1.5f2a09c3e1d4b7a86f10", "", 404}, // well formed, unknown
		{"GET", "/scrape/jobs/j_eu.c2.5f2a09c3e1d4b7a86f10", "", 404}, // another cell's
		{"POST", "/scrape/jobs/j_eu.c1.5f2a09c3e1d4b7a86f10/retry", "", 404},
	} {
		req, _ := http.NewRequest(c.method, tc.srv.URL+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(b), `"error"`) {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, resp.StatusCode, b, c.status)
		}
	}
	// Nothing was created by the refused submissions.
	n := 0
	tc.store.Scan([]byte("ji/"), nil, func(k, v []byte) (bool, error) { n++; return true, nil })
	if n != 0 {
		t.Fatalf("%d jobs stored after refusals", n)
	}
	_, b := tc.get(t, "/scrape/jobs/j_eu.c1.5f2a09c3e1d4b7a86f10/results?after=-1")
	if !strings.Contains(string(b), "bad_input") {
		t.Fatalf("%s", b)
	}
}

func TestJobSurvivesRestart(t *testing.T) {
	o := newOrigin(t)
	dir := t.TempDir()
	// A cell that stops with URLs in flight.
	tc := newTestCell(t, func(c *Config) { c.DataDir = dir; c.JobConcurrency = 2; c.Region = "sin"; c.Name = "c7" })
	var urls []string
	for i := range 20 {
		urls = append(urls, fmt.Sprintf("%q", fmt.Sprintf("%s/slow?i=%d", o.URL, i)))
	}
	_, b := tc.post(t, "/scrape/jobs", `{"urls":[`+strings.Join(urls, ",")+`]}`)
	id := decode[map[string]string](t, b)["job_id"]
	tc.waitJob(t, id, func(s jobStatus) bool { return s.Status == "running" })
	tc.srv.Close()
	tc.Cell.Close()
	close(o.release)

	if region, cell, _ := jobs.ParseJobID(id); region != "sin" || cell != "c7" {
		t.Fatalf("job id %q does not name sin.c7", id)
	}
	c2, err := New(Config{Region: "sin", Name: "c7", DataDir: dir, AllowPrivateNetworks: true, RegionKeys: testKeys, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	tc2 := &testCell{Cell: c2, srv: httptest.NewServer(asGate(t, c2.Handler()))}
	defer func() { tc2.srv.Close(); c2.Close() }()
	s := tc2.waitJob(t, id, func(s jobStatus) bool { return s.Status == "done" })
	if s.Done != 20 {
		t.Fatalf("after restart: %+v", s)
	}
	if res := tc2.allResults(t, id); len(res) != 20 {
		t.Fatalf("%d results", len(res))
	}
}

func TestConfigNames(t *testing.T) {
	for _, c := range []struct {
		region, name string
		ok           bool
	}{
		{"", "", true}, // defaults eu, c1
		{"sin", "c2", true},
		{"0123456789abcdef", "0123456789abcdef", true},
		{"EU", "c1", false},
		{"eu", "c_1", false},
		{"eu", "0123456789abcdefg", false},
		{"e.u", "c1", false},
	} {
		cl, err := New(Config{Region: c.region, Name: c.name, DataDir: t.TempDir(), RegionKeys: testKeys, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if (err == nil) != c.ok {
			t.Errorf("region %q name %q: err %v, want ok %v", c.region, c.name, err, c.ok)
		}
		if err == nil {
			cl.Close()
		}
	}
	if _, err := New(Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err == nil {
		t.Error("a cell without region keys started")
	}
}

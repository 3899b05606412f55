package main

// The client side of trawl (issue 34, package cli) as a person or a
// script runs it: bin/trawl's client commands against `trawl dev`, their
// stdout when piped, their exit codes, and the progress display through a
// pseudo-terminal.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/syncbuf"

	"github.com/creack/pty"

	"github.com/trawlhq/trawl/cmd/trawl/cli"
	"github.com/trawlhq/trawl/internal/testwait"
)

// cliRun is one client command's outcome.
type cliRun struct {
	stdout, stderr string
	code           int
}

// cliEnv is the environment of a client process: the test's own without
// any trawl client setting, a config file of the test's, then env.
func cliEnv(t *testing.T, env ...string) []string {
	t.Helper()
	var out []string
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		switch k {
		case "TRAWL_URL", "TRAWL_API_KEY", "TRAWL_CONFIG", "XDG_CONFIG_HOME":
			continue
		}
		out = append(out, e)
	}
	return append(append(out, "TRAWL_CONFIG="+filepath.Join(t.TempDir(), "config.json")), env...)
}

// runCLI runs bin/trawl with args, stdin given (may be ""), stdout and
// stderr pipes.
func runCLI(t *testing.T, env []string, stdin string, args ...string) cliRun {
	t.Helper()
	cmd := exec.Command(trawlBin, args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := cliRun{stdout: so.String(), stderr: se.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("trawl %v: %v", args, err)
	}
	return r
}

// mustCLI runs and wants exit code 0.
func mustCLI(t *testing.T, env []string, args ...string) cliRun {
	t.Helper()
	r := runCLI(t, env, "", args...)
	if r.code != 0 {
		t.Fatalf("trawl %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// jsonOf decodes one JSON value.
func jsonOf(t *testing.T, what, s string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: not one JSON object: %v\n%s", what, err, s)
	}
	return v
}

// ndjsonOf decodes NDJSON lines.
func ndjsonOf(t *testing.T, what, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var v map[string]any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: a line that is not a JSON object: %v\n%s", what, err, sc.Text())
		}
		out = append(out, v)
	}
	return out
}

// startCLIDev is trawl dev with prices: the free plan's rate and
// concurrency (0: unlimited) and the sign-up credits.
func startCLIDev(t *testing.T, prices string, args ...string) *proc {
	t.Helper()
	gateAddr := fmt.Sprintf("127.0.0.1:%d", freeRun(t, 1))
	return launch(t, []string{"TRAWL_DEV_KEY=" + e2eKey, "TRAWL_LEDGER_SECRET=cli-e2e-secret"}, "gate serving", append([]string{"dev",
		"--listen", gateAddr, "--ledger-raft", fmt.Sprintf("127.0.0.1:%d", freeRun(t, 1)),
		"--data", t.TempDir(), "--allow-private-networks", "--browsers", "0", "--prices", prices}, args...)...)
}

// urlFile writes urls one a line.
func urlFile(t *testing.T, urls []string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "urls.txt")
	if err := os.WriteFile(p, []byte("# urls\n"+strings.Join(urls, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every client command against one `trawl dev`, piped: its JSON or NDJSON
// on stdout and exit 0; a job with progress through a pseudo-terminal,
// interrupted and picked up again; a crawl into a directory twice; login
// and the config precedence; completion.
func TestCLI(t *testing.T) {
	product, err := os.ReadFile("../../cell/extract/testdata/product.html")
	if err != nil {
		t.Fatal(err)
	}
	var shopChecks atomic.Int64
	// gateOpen holds the /slow/ pages until the test opens it.
	gateOpen := make(chan struct{})
	var openOnce sync.Once
	open := func() { openOnce.Do(func() { close(gateOpen) }) }
	t.Cleanup(open)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		switch {
		case r.URL.Path == "/product":
			w.Write(product)
			return
		case strings.HasPrefix(r.URL.Path, "/slow/"):
			select {
			case <-gateOpen:
			case <-r.Context().Done():
				return
			}
			// Then 100 ms a page, so the terminal shows the counts grow.
			time.Sleep(100 * time.Millisecond)
		case r.URL.Path == "/shop":
			// A price that changes at every check, for a monitor.
			fmt.Fprintf(w, `<!doctype html><html><head><title>Shop</title></head><body><main><article><h1>Shop</h1>
<p>The products of the shop and their prices, kept up to date by the shop team every day.</p>
<h2>Prices</h2><table><thead><tr><th>Product</th><th>Price</th></tr></thead>
<tbody><tr><td>Widget</td><td>%d</td></tr><tr><td>Gadget</td><td>20</td></tr></tbody></table>
<p>All prices include tax and are shown in euros; shipping is free over 100 euros.</p></article></main></body></html>`, 50+shopChecks.Add(1))
			return
		case r.URL.Path == "/missing":
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `<!doctype html><html><head><title>Page %[1]s</title></head><body><main><h1>Page %[1]s</h1>
<p>This is the page at %[1]s, about trawling the harbour, with a paragraph long enough to be taken as the main content.</p>
<p>And a second paragraph so the Markdown has some body.</p></main></body></html>`, r.URL.Path)
	}))
	t.Cleanup(site.Close)
	docs := crawlDocs(t, 6)
	dev := startCLIDev(t, pricesFile(t, 100000), "--monitor-min-every", "1s", "--monitor-confirm-after", "2s")
	env := cliEnv(t, "TRAWL_URL="+dev.base, "TRAWL_API_KEY="+e2eKey)

	t.Run("scrape", func(t *testing.T) {
		r := mustCLI(t, env, "scrape", site.URL+"/a")
		s := jsonOf(t, "scrape", r.stdout)
		if s["ok"] != true || !strings.Contains(str(s["markdown"]), "trawling the harbour") {
			t.Errorf("scrape: %s", r.stdout)
		}
		out := filepath.Join(t.TempDir(), "a.md")
		mustCLI(t, env, "scrape", site.URL+"/b", "--format", "md", "-o", out)
		if b, _ := os.ReadFile(out); !strings.HasPrefix(string(b), "# Page /b") {
			t.Errorf("scrape -o: %q", b)
		}
		if r := runCLI(t, env, "", "scrape", site.URL, "--format", "pdf"); r.code != cli.ExitUsage {
			t.Errorf("--format pdf: exit %d, want %d", r.code, cli.ExitUsage)
		}
	})

	t.Run("batch", func(t *testing.T) {
		var urls []string
		for i := range 60 { // two requests: 50 and 10
			urls = append(urls, fmt.Sprintf("%s/batch/%d", site.URL, i))
		}
		urls = append(urls, "ftp://nowhere/")
		r := runCLI(t, env, "", "batch", urlFile(t, urls))
		lines := ndjsonOf(t, "batch", r.stdout)
		ok := 0
		for _, l := range lines {
			if l["ok"] == true {
				ok++
			}
		}
		if r.code != cli.ExitPartial || len(lines) != 61 || ok != 60 {
			t.Errorf("batch: exit %d, %d lines, %d ok\n%s", r.code, len(lines), ok, r.stderr)
		}
		if !strings.Contains(r.stderr, "batch: 60 done, 1 failed, 0 pending of 61") || !strings.Contains(r.stderr, "60.000 credits") {
			t.Errorf("batch summary: %s", r.stderr)
		}
		// --quiet: the lines and the error, no summary.
		r = runCLI(t, env, "", "batch", urlFile(t, urls[58:]), "--quiet")
		if lines := ndjsonOf(t, "batch --quiet", r.stdout); len(lines) != 3 || r.code != cli.ExitPartial || r.stderr != "trawl: 1 of 3 URLs failed\n" {
			t.Errorf("batch --quiet: exit %d, %d lines, stderr %q", r.code, len(lines), r.stderr)
		}
	})

	var jobID string
	t.Run("job", func(t *testing.T) {
		urls := []string{site.URL + "/job/1", site.URL + "/job/2", site.URL + "/job/3", fmt.Sprintf("http://127.0.0.1:%d/refused", freeRun(t, 1))}
		r := runCLI(t, env, "", "job", "submit", urlFile(t, urls), "--wait")
		st := jsonOf(t, "job submit --wait", r.stdout)
		jobID = str(st["job_id"])
		if r.code != cli.ExitPartial || st["status"] != "done" || st["done"] != 3.0 || st["error"] != 1.0 {
			t.Fatalf("job submit --wait: exit %d %s\n%s", r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, "trawl job retry "+jobID) {
			t.Errorf("no retry hint: %s", r.stderr)
		}
		st = jsonOf(t, "job status", mustCLI(t, env, "job", "status", jobID).stdout)
		if st["status"] != "done" || st["total"] != 4.0 {
			t.Errorf("job status: %v", st)
		}
		lines := ndjsonOf(t, "job results", mustCLI(t, env, "job", "results", jobID).stdout)
		if len(lines) != 4 {
			t.Errorf("job results: %d lines", len(lines))
		}
		if lines := ndjsonOf(t, "job results --after", mustCLI(t, env, "job", "results", jobID, "--after", "3").stdout); len(lines) != 1 {
			t.Errorf("job results --after 3: %d lines", len(lines))
		}
		rt := jsonOf(t, "job retry", mustCLI(t, env, "job", "retry", jobID).stdout)
		if rt["retried"] != 1.0 || rt["job_id"] != jobID {
			t.Errorf("job retry: %v", rt)
		}
		// Submitted without --wait: the answer with the job id.
		sub := jsonOf(t, "job submit", mustCLI(t, env, "job", "submit", urlFile(t, urls[:1])).stdout)
		if !strings.HasPrefix(str(sub["job_id"]), "j_") {
			t.Errorf("job submit: %v", sub)
		}
		if r := runCLI(t, env, "", "job", "status", "j_eu.c1.00000000000000000000"); r.code != cli.ExitNotFound || !strings.Contains(r.stderr, "no such job") {
			t.Errorf("unknown job: exit %d %s", r.code, r.stderr)
		}
	})

	t.Run("progress", func(t *testing.T) {
		// A job of 300 local pages whose fetches wait for the test.
		urls := make([]string, 300)
		for i := range urls {
			urls[i] = fmt.Sprintf("%s/slow/%d", site.URL, i)
		}
		sub := jsonOf(t, "job submit", mustCLI(t, env, "job", "submit", urlFile(t, urls)).stdout)
		id := str(sub["job_id"])

		// Followed on a terminal, then Ctrl-C: it stops and says how to
		// pick the job up again.
		tty := startPTY(t, env, "job", "status", id)
		tty.waitFor(t, regexp.MustCompile(`job `+regexp.QuoteMeta(id)+` +0/300 +done 0 +error 0 +pending 300`))
		tty.cmd.Process.Signal(os.Interrupt)
		out, code := tty.wait(t)
		if code != cli.ExitInterrupted || !strings.Contains(out, "Pick it up again: trawl job status "+id) {
			t.Fatalf("interrupted: exit %d\n%s", code, out)
		}

		// Picked up again, the pages released: counts reach the total
		// and the summary follows.
		tty = startPTY(t, env, "job", "status", id)
		tty.waitFor(t, regexp.MustCompile(`job `+regexp.QuoteMeta(id)+` +0/300`))
		open()
		out, code = tty.wait(t)
		if code != 0 {
			t.Fatalf("job status: exit %d\n%s", code, out)
		}
		if os.Getenv("CLI_SHOW") != "" {
			t.Logf("terminal:\n%q", out)
		}
		between := false
		for _, m := range regexp.MustCompile(`(\d+)/300 +done (\d+) +error 0 +pending (\d+)`).FindAllStringSubmatch(out, -1) {
			between = between || (m[1] != "0" && m[1] != "300")
		}
		if !between {
			t.Errorf("the terminal showed no count between 0 and 300:\n%s", out)
		}
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`300/300 +done 300 +error 0 +pending 0`),
			regexp.MustCompile(`100 %`),
			regexp.MustCompile(`job ` + regexp.QuoteMeta(id) + `: 300 done, 0 failed, 0 pending of 300 in [0-9.]+m?s \([0-9.]+ pages/s\); results: trawl job results ` + regexp.QuoteMeta(id)),
			regexp.MustCompile(`\d+\.\d/s +left`),
		} {
			if !want.MatchString(out) {
				t.Errorf("progress output lacks %s:\n%s", want, out)
			}
		}
		// Submitted with --wait on a terminal: credits spent are shown.
		tty = startPTY(t, env, "job", "submit", urlFile(t, urls[:20]), "--wait")
		out, code = tty.wait(t)
		if code != 0 || !regexp.MustCompile(`20/20 +done 20 +error 0 +pending 0 +credits 20\.000`).MatchString(out) ||
			!strings.Contains(out, ": 20 done, 0 failed, 0 pending of 20") {
			t.Errorf("submit --wait on a terminal: exit %d\n%s", code, out)
		}
	})

	t.Run("crawl", func(t *testing.T) {
		dir := t.TempDir()
		start := docs.URL + "/manual/index.html"
		r := mustCLI(t, env, "crawl", start, "--limit", "20", "-o", dir)
		res := jsonOf(t, "crawl", r.stdout)
		if res["status"] != "completed" || res["written"] != 7.0 || res["skipped"] != 0.0 {
			t.Fatalf("crawl: %s\n%s", r.stdout, r.stderr)
		}
		for _, f := range []string{"manual/index.md", "manual/ch1.md", "manual/ch6.md"} {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil || !strings.Contains(string(b), "main content of the page") {
				t.Errorf("%s: %v %q", f, err, b)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "manual/private.md")); err == nil {
			t.Error("robots.txt's page was written")
		}
		if rb, _ := res["robots_blocked"].([]any); len(rb) != 1 || !strings.Contains(r.stderr, ": 7 done, 0 failed, 0 pending of 7") ||
			!strings.Contains(r.stderr, "7 files written, 0 already there, 1 URLs kept out by robots.txt") {
			t.Errorf("crawl's robots.txt refusal: %v\n%s", res["robots_blocked"], r.stderr)
		}
		// A file changed since is not written again; the crawl is
		// followed again, not started anew.
		os.WriteFile(filepath.Join(dir, "manual/ch1.md"), []byte("mine"), 0o644)
		r = mustCLI(t, env, "crawl", start, "--limit", "20", "-o", dir)
		again := jsonOf(t, "crawl again", r.stdout)
		if again["id"] != res["id"] || again["written"] != 0.0 || again["skipped"] != 7.0 || !strings.Contains(r.stderr, "following crawl") {
			t.Errorf("crawl again: %s\n%s", r.stdout, r.stderr)
		}
		// --new: a new crawl; a deleted file is written again, the others
		// skipped.
		os.Remove(filepath.Join(dir, "manual/ch6.md"))
		fresh := jsonOf(t, "crawl --new", mustCLI(t, env, "crawl", start, "--limit", "20", "-o", dir, "--new").stdout)
		if fresh["id"] == res["id"] || fresh["written"] != 1.0 || fresh["skipped"] != 6.0 {
			t.Errorf("crawl --new: %v", fresh)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "manual/ch1.md")); string(b) != "mine" {
			t.Errorf("an existing file was overwritten: %q", b)
		}
	})

	t.Run("crawl-interrupted", func(t *testing.T) {
		// A site whose chapters wait for the test: the crawl is stopped
		// while they do, then run again once they answer.
		release := make(chan struct{})
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { close(release) }) })
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			links := ""
			if r.URL.Path == "/book/" {
				links = `<a href="one.html">One</a> <a href="two.html">Two</a>`
			} else if strings.HasPrefix(r.URL.Path, "/book/") {
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
			} else {
				http.NotFound(w, r)
				return
			}
			fmt.Fprintf(w, `<html><head><title>%[1]s</title></head><body><main><h1>Book %[1]s</h1><p>The book's page %[1]s, with a paragraph long enough to be the main content of the page.</p>%[2]s</main></body></html>`, r.URL.Path, links)
		}))
		t.Cleanup(slow.Close)
		dir := t.TempDir()
		start := slow.URL + "/book/"
		cmd := exec.Command(trawlBin, "crawl", start, "--limit", "10", "-o", dir)
		cmd.Env = env
		var out syncbuf.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		testwait.Until(t, 30*time.Second, "the start page written", func() bool {
			_, err := os.Stat(filepath.Join(dir, "book/index.md"))
			return err == nil
		})
		cmd.Process.Signal(os.Interrupt)
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != cli.ExitInterrupted ||
			!strings.Contains(out.String(), "Continue (files already written are skipped): trawl crawl "+start+" -o "+dir) {
			t.Fatalf("interrupted crawl: %v\n%s", err, out.String())
		}
		once.Do(func() { close(release) })
		r := mustCLI(t, env, "crawl", start, "--limit", "10", "-o", dir)
		res := jsonOf(t, "crawl resumed", r.stdout)
		if res["written"] != 2.0 || res["skipped"] != 1.0 || res["pages"] != 3.0 || !strings.Contains(r.stderr, "following crawl") {
			t.Errorf("crawl resumed: %s\n%s", r.stdout, r.stderr)
		}
	})

	t.Run("search-answer-extract", func(t *testing.T) {
		s := jsonOf(t, "search", mustCLI(t, env, "search", "harbour", "--rich").stdout)
		if _, ok := s["results"].([]any); !ok || s["rich"] == nil {
			t.Errorf("search: %v", s)
		}
		a := jsonOf(t, "answer", mustCLI(t, env, "answer", "what is trawling").stdout)
		if a["experimental"] != true {
			t.Errorf("answer: %v", a)
		}
		schema := filepath.Join(t.TempDir(), "schema.json")
		os.WriteFile(schema, []byte(`{"type":"object","properties":{"name":{"type":"string"},"price":{"type":"number"}}}`), 0o644)
		x := jsonOf(t, "extract", mustCLI(t, env, "extract", site.URL+"/product", "--schema", schema, "--instruction", "the product").stdout)
		if d, _ := x["data"].(map[string]any); d["name"] != "Ridge Tent 2P" || d["price"] != 1299.0 {
			t.Errorf("extract: %v", x)
		}
	})

	t.Run("monitor", func(t *testing.T) {
		m := jsonOf(t, "monitor create", mustCLI(t, env, "monitor", "create", site.URL+"/watched", "--watch", "the price changes", "--name", "w").stdout)
		id := str(m["id"])
		if m["created"] != true || !strings.HasPrefix(id, "mon_") {
			t.Fatalf("monitor create: %v", m)
		}
		list := ndjsonOf(t, "monitor list", mustCLI(t, env, "monitor", "list").stdout)
		if len(list) != 1 || list[0]["id"] != id {
			t.Errorf("monitor list: %v", list)
		}
		if r := mustCLI(t, env, "monitor", "events", id); len(ndjsonOf(t, "monitor events", r.stdout)) != 0 {
			t.Errorf("monitor events: %s", r.stdout)
		}
		if r := runCLI(t, env, "", "monitor", "events", "mon_eu.00000000000000000000"); r.code != cli.ExitNotFound {
			t.Errorf("unknown monitor: exit %d %s", r.code, r.stderr)
		}

		// --follow: each new event once, as it comes, until Ctrl-C (exit 130).
		shop := jsonOf(t, "monitor create", mustCLI(t, env, "monitor", "create", site.URL+"/shop", "--every", "2s").stdout)
		cmd := exec.Command(trawlBin, "monitor", "events", str(shop["id"]), "--follow", "--interval", "1s")
		cmd.Env = env
		var out, errOut syncbuf.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The change is first seen a check after the baseline, seconds
		// after the command started polling.
		if err := testwait.Poll(30*time.Second, func() bool { return strings.Contains(out.String(), `"event":"change"`) }); err != nil {
			r := runCLI(t, env, "", "monitor", "list")
			t.Fatalf("no change event followed: %s\n%s\nmonitors: %s\nchecks of the page: %d", out.String(), errOut.String(), r.stdout, shopChecks.Load())
		}
		cmd.Process.Signal(os.Interrupt)
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != cli.ExitInterrupted {
			t.Errorf("events --follow after SIGINT: %v %s", err, errOut.String())
		}
		seen := map[float64]bool{}
		for _, ev := range ndjsonOf(t, "events --follow", out.String()) {
			id, _ := ev["id"].(float64)
			if seen[id] || ev["monitor"] != shop["id"] {
				t.Errorf("event %v twice, or of another monitor: %v", id, ev)
			}
			seen[id] = true
		}
	})

	t.Run("recipe", func(t *testing.T) {
		cat := ndjsonOf(t, "recipe list", mustCLI(t, env, "recipe", "list").stdout)
		found := false
		for _, r := range cat {
			found = found || r["name"] == "page-links"
		}
		if !found {
			t.Errorf("recipe list: %v", cat)
		}
		run := jsonOf(t, "recipe run", mustCLI(t, env, "recipe", "run", "page-links", "url="+site.URL+"/links").stdout)
		if run["recipe"] != "page-links" || run["rows"] == nil {
			t.Errorf("recipe run: %v", run)
		}
		if r := runCLI(t, env, "", "recipe", "run", "no-such-recipe"); r.code != cli.ExitNotFound {
			t.Errorf("unknown recipe: exit %d %s", r.code, r.stderr)
		}
		// The local runner keeps its forms.
		if r := mustCLI(t, env, "recipe", "list", "--local"); !strings.Contains(r.stdout, "page-links") || strings.HasPrefix(r.stdout, "{") {
			t.Errorf("recipe list --local: %s", r.stdout)
		}
	})

	t.Run("billing", func(t *testing.T) {
		b := jsonOf(t, "balance", mustCLI(t, env, "balance").stdout)
		if b["account"] == nil || b["balance"] == nil {
			t.Errorf("balance: %v", b)
		}
		e := jsonOf(t, "estimate", mustCLI(t, env, "estimate", "jobs", urlFile(t, []string{"https://example.com/x", "https://example.com/y"})).stdout)
		if e["count"] != 2.0 || e["min"] != "2.000" {
			t.Errorf("estimate jobs: %v", e)
		}
		e = jsonOf(t, "estimate", mustCLI(t, env, "estimate", "scrape", "https://example.com/x").stdout)
		if e["kind"] != "scrape" || e["text"] == "" {
			t.Errorf("estimate scrape: %v", e)
		}
		keys := ndjsonOf(t, "keys", mustCLI(t, env, "keys").stdout)
		if len(keys) == 0 || keys[0]["current"] != true {
			t.Errorf("keys: %v", keys)
		}
	})

	t.Run("login", func(t *testing.T) {
		home := t.TempDir()
		base := cliEnv(t)
		// cliEnv names a config file; login's default is the user config
		// directory's.
		var noConf []string
		for _, e := range base {
			if !strings.HasPrefix(e, "TRAWL_CONFIG=") {
				noConf = append(noConf, e)
			}
		}
		noConf = append(noConf, "XDG_CONFIG_HOME="+home, "HOME="+home)
		r := runCLI(t, noConf, e2eKey+"\n", "login", "--url", dev.base)
		if r.code != 0 {
			t.Fatalf("login: exit %d %s", r.code, r.stderr)
		}
		path := filepath.Join(home, "trawl", "config.json")
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("config file: %v %v", err, fi)
		}
		if b, _ := os.ReadFile(path); !strings.Contains(string(b), e2eKey) || !strings.Contains(string(b), dev.base) {
			t.Errorf("config file: %s", b)
		}
		// File alone; env over file; flag over env.
		mustCLI(t, noConf, "balance")
		if r := runCLI(t, append(noConf, "TRAWL_API_KEY=trawl_wrong_key"), "", "balance"); r.code != cli.ExitAuth {
			t.Errorf("env key over the file's: exit %d", r.code)
		}
		mustCLI(t, append(noConf, "TRAWL_API_KEY=trawl_wrong_key"), "balance", "--key", e2eKey)
		// A wrong key is not saved.
		if r := runCLI(t, noConf, "", "login", "--url", dev.base, "--key", "trawl_wrong_key"); r.code != cli.ExitAuth {
			t.Errorf("login with a wrong key: exit %d", r.code)
		}
		if b, _ := os.ReadFile(path); !strings.Contains(string(b), e2eKey) {
			t.Errorf("config after a failed login: %s", b)
		}
	})

	t.Run("completion", func(t *testing.T) {
		for _, sh := range []string{"bash", "zsh", "fish"} {
			if r := mustCLI(t, env, "completion", sh); !strings.Contains(r.stdout, "trawl") || len(r.stdout) < 1000 {
				t.Errorf("completion %s: %.200s", sh, r.stdout)
			}
		}
		r := mustCLI(t, env, "__complete", "")
		for _, c := range []string{"job", "crawl", "scrape", "dev", "gate", "ledger"} {
			if !strings.Contains(r.stdout, "\n"+c+"\t") && !strings.HasPrefix(r.stdout, c+"\t") {
				t.Errorf("completion lacks %s:\n%s", c, r.stdout)
			}
		}
		if r := mustCLI(t, env, "__complete", "job", ""); !strings.Contains(r.stdout, "submit") || !strings.Contains(r.stdout, "retry") {
			t.Errorf("completion of job: %s", r.stdout)
		}
		// The crawl server keeps its command: without a URL, its flags.
		if r := runCLI(t, env, "", "crawl", "-h"); !strings.Contains(r.stderr, "-listen") {
			t.Errorf("trawl crawl -h: %s", r.stderr)
		}
	})
}

// The exit codes scripts test: 401, 402 with the top-up hint, 404, 429
// with Retry-After, and 2 for a wrong command line, on a trawl dev whose
// account has 3 credits and a plan of 5 requests a minute.
func TestCLIExitCodes(t *testing.T) {
	site := pages(t)
	dev := startCLIDev(t, devPrices(t, 5, 2, 3))
	env := cliEnv(t, "TRAWL_URL="+dev.base, "TRAWL_API_KEY="+e2eKey)

	if r := runCLI(t, env, "", "job", "submit"); r.code != cli.ExitUsage {
		t.Errorf("no FILE: exit %d %s", r.code, r.stderr)
	}
	if r := runCLI(t, cliEnv(t, "TRAWL_URL="+dev.base), "", "balance"); r.code != cli.ExitUsage || !strings.Contains(r.stderr, "trawl login") {
		t.Errorf("no key: exit %d %s", r.code, r.stderr)
	}
	r := runCLI(t, env, "", "balance", "--key", "trawl_not_a_key")
	if r.code != cli.ExitAuth || !strings.Contains(r.stderr, "this API key is not valid (401 unauthorized)") || r.stdout != "" {
		t.Errorf("401: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
	// 1 request of the 5.
	r = runCLI(t, env, "", "job", "status", "j_eu.c1.00000000000000000000")
	if r.code != cli.ExitNotFound || !strings.Contains(r.stderr, "no such job (404 not_found)") {
		t.Errorf("404: exit %d %s", r.code, r.stderr)
	}
	// 2: a batch of 5 URLs, whose least price is more than the 3 credits:
	// refused before it starts, no line.
	five := make([]string, 5)
	for i := range five {
		five[i] = fmt.Sprintf("%s/batch/%d", site.URL, i)
	}
	r = runCLI(t, env, "", "batch", urlFile(t, five))
	if lines := ndjsonOf(t, "batch", r.stdout); r.code != cli.ExitPayment || len(lines) != 0 || !strings.Contains(r.stderr, "(402 no_credit)") {
		t.Errorf("batch past the credit: exit %d, %d lines\n%s", r.code, len(lines), r.stderr)
	}
	// 3: ten URLs need 10 credits.
	urls := make([]string, 10)
	for i := range urls {
		urls[i] = fmt.Sprintf("%s/broke/%d", site.URL, i)
	}
	r = runCLI(t, env, "", "job", "submit", urlFile(t, urls))
	if r.code != cli.ExitPayment || !strings.Contains(r.stderr, "(402 no_credit)") ||
		!regexp.MustCompile(`(?i)top up[^\n]*POST /v1/billing/topup\?amount=\d+`).MatchString(r.stderr) {
		t.Errorf("402: exit %d %s", r.code, r.stderr)
	}
	// 4, 5, then 429.
	var limited cliRun
	for range 6 {
		if limited = runCLI(t, env, "", "balance"); limited.code != 0 {
			break
		}
	}
	if limited.code != cli.ExitRateLimited || !strings.Contains(limited.stderr, "(429 rate_limited)") ||
		!regexp.MustCompile(`retry after \d+s`).MatchString(limited.stderr) {
		t.Errorf("429: exit %d %s", limited.code, limited.stderr)
	}
}

// ttyProc is a client process on a pseudo-terminal (stdin, stdout and
// stderr), its output gathered.
type ttyProc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

func startPTY(t *testing.T, env []string, args ...string) *ttyProc {
	t.Helper()
	p := &ttyProc{cmd: exec.Command(trawlBin, args...), done: make(chan struct{})}
	p.cmd.Env = append(env, "TERM=xterm")
	f, err := pty.StartWithSize(p.cmd, &pty.Winsize{Rows: 40, Cols: 160})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil { // EIO once the process has gone
				return
			}
		}
	}()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		f.Close()
	})
	return p
}

func (p *ttyProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitFor waits until the output matches re.
func (p *ttyProc) waitFor(t *testing.T, re *regexp.Regexp) {
	t.Helper()
	if err := testwait.Poll(30*time.Second, func() bool { return re.MatchString(p.output()) }); err != nil {
		t.Fatalf("the terminal never showed %s:\n%s", re, p.output())
	}
}

// wait waits for the process to end and returns its output and exit code.
func (p *ttyProc) wait(t *testing.T) (string, int) {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(90 * time.Second):
		t.Fatalf("trawl %v did not end:\n%s", p.cmd.Args, p.output())
	}
	<-p.done
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	return p.output(), code
}

func str(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

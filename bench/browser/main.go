// Command browser measures the browser engine of a running trawl cell
// (`make bench`, part `browser`; see bench/README.md):
//
//	browser -api URL -urls FILE [-pages 1000] [-c 4] [-burst 100] [-levels 10,50,100]
//
// URLS holds corpus pages (at least -pages of them). Each is scraped with
// POST /scrape {"url", "format":"md", "wait_for":"body"}: a browser field,
// so the engine ladder sends it straight to the browser. The cell should
// run with its cache off (--fresh-for -1s); every URL also gets a query
// (?b=…) of its own so no two requests share a page.
//
// Phases, in order:
//
//  1. 10 pages at -c, then the browsers' memory (PSS of their process
//     trees, from GET /health?browser_pss=1);
//  2. the rest of -pages at -c: pages/s, p50/p99 over all -pages, then the
//     memory again (memory is also sampled every second for the peak);
//  3. the same -burst pages at each of -levels concurrent requests: success
//     (a 503 fleet-busy is repeated after its Retry-After, as the API asks
//     a client to; a request still failing after 120 s fails), p50/p99 of
//     the whole request including those waits, the 503s seen, memory;
//  4. baseline: the same -pages pages through the same cell's plain HTTP
//     engine (no browser field) at -c;
//  5. baseline: bare Chromium, driven by playwright-go in this process with
//     -c pages in parallel, each in a fresh context (goto, load, content),
//     as the pool does, without the pool, its guard proxy or the cell
//     (skipped with -bare=false).
//
// A cell answers only requests signed by its region's gate: run the cell
// with TRAWL_REGION_KEYS=K and this program with the same, and it signs each
// request to -api as the gate would (bench/internal/benchsign: account
// acct_bench, private networks allowed). Unset, requests go unsigned.
//
// One JSON line on stdout; progress on stderr.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/trawlhq/trawl/bench/internal/benchsign"
	"github.com/trawlhq/trawl/bench/measure"
	"github.com/trawlhq/trawl/cell/fetch/browser"
)

func main() {
	api := flag.String("api", "", "base URL of the trawl cell")
	urlsFile := flag.String("urls", "", "file with one page URL per line")
	pages := flag.Int("pages", 1000, "pages of the throughput run")
	c := flag.Int("c", browser.DefaultBrowsers*browser.DefaultPagesPerBrowser, "concurrent requests of the throughput runs (default: the default pool's pages)")
	burst := flag.Int("burst", 100, "requests of each burst")
	levels := flag.String("levels", "10,50,100", "concurrency of the bursts")
	bare := flag.Bool("bare", true, "also measure bare Chromium (baseline)")
	flag.Parse()
	if err := run(*api, *urlsFile, *pages, *c, *burst, *levels, *bare); err != nil {
		fmt.Fprintf(os.Stderr, "bench/browser: %v\n", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "browser: "+format+"\n", args...) }

func run(api, urlsFile string, pages, c, burst int, levelsArg string, bare bool) error {
	urls, err := readLines(urlsFile)
	if err != nil {
		return err
	}
	if len(urls) < pages || len(urls) < burst {
		return fmt.Errorf("%s has %d URLs, need %d", urlsFile, len(urls), max(pages, burst))
	}
	var levels []int
	for _, s := range strings.Split(levelsArg, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("bad -levels %q", levelsArg)
		}
		levels = append(levels, n)
	}
	keys, err := benchsign.KeysFromEnv()
	if err != nil {
		return err
	}
	b := &bench{api: strings.TrimSuffix(api, "/"), hc: &http.Client{
		Timeout: 3 * time.Minute,
		Transport: benchsign.Transport(keys,
			&http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, DisableCompression: true}),
	}}
	out := map[string]any{"pages": pages, "concurrency": c, "burst": burst}

	if _, err := b.pss(); err != nil {
		return fmt.Errorf("the cell reports no browser (run it with --browsers 1): %w", err)
	}
	stopSampler := b.sample()

	// 1 and 2: the throughput run, memory after 10 pages and after all.
	list := tagged(urls[:pages], "t")
	logf("throughput: %d pages through the browser at c=%d", pages, c)
	first := b.scrapeAll(list[:10], c, true, false)
	pss10, err := b.pss()
	if err != nil {
		return err
	}
	rest := b.scrapeAll(list[10:], c, true, false)
	pssN, err := b.pss()
	if err != nil {
		return err
	}
	all := merge(first, rest)
	out["browser"] = all.report(first.wall + rest.wall)
	out["pss_mb_after_10"] = mb(pss10)
	out[fmt.Sprintf("pss_mb_after_%d", pages)] = mb(pssN)
	out["pss_mb_growth"] = mb(pssN - pss10)
	logf("throughput: %v; PSS %.0f MB after 10, %.0f MB after %d", out["browser"], mb(pss10), mb(pssN), pages)

	// 3: bursts.
	var bursts []map[string]any
	for _, n := range levels {
		list := tagged(urls[:burst], "burst"+strconv.Itoa(n))
		logf("burst: the same %d pages at %d concurrent", burst, n)
		r := b.scrapeAll(list, n, true, true)
		pss, err := b.pss()
		if err != nil {
			return err
		}
		rep := r.report(r.wall)
		rep["level"] = n
		rep["pss_mb_after"] = mb(pss)
		rep["pss_mb_growth"] = mb(pss - pss10)
		rep["fleet_busy_seen"] = r.busy.Load()
		logf("burst %d: %v", n, rep)
		bursts = append(bursts, rep)
	}
	out["bursts"] = bursts
	out["pss_mb_peak"] = mb(stopSampler())
	out["pss_mb_peak_growth"] = mb(b.peak.Load() - pss10)

	// 4: the plain HTTP engine of the same cell.
	logf("baseline: the same %d pages through the cell's plain HTTP engine at c=%d", pages, c)
	h := b.scrapeAll(tagged(urls[:pages], "h"), c, false, false)
	out["http"] = h.report(h.wall)

	// 5: bare Chromium.
	if bare {
		logf("baseline: bare Chromium (playwright-go, %d pages in parallel, a fresh context each)", c)
		rep, err := bareChromium(tagged(urls[:pages], "x"), c)
		if err != nil {
			return fmt.Errorf("bare chromium: %w", err)
		}
		out["bare"] = rep
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// tagged gives every URL a query of its own, so no two requests of the
// bench share a page (the file server ignores it).
func tagged(urls []string, tag string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		out[i] = fmt.Sprintf("%s%sb=%s-%d", u, sep, tag, i)
	}
	return out
}

type bench struct {
	api  string
	hc   *http.Client
	peak atomic.Int64
}

// pss is the browsers' memory now, in bytes.
func (b *bench) pss() (int64, error) {
	resp, err := b.hc.Get(b.api + "/health?browser_pss=1")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var h struct {
		Browser *struct {
			PSS int64 `json:"pss_bytes"`
		} `json:"browser"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return 0, err
	}
	if h.Browser == nil {
		return 0, errors.New("no browser in /health")
	}
	if v := h.Browser.PSS; v > b.peak.Load() {
		b.peak.Store(v)
	}
	return h.Browser.PSS, nil
}

// sample polls the memory every second until the returned func is called,
// which returns the peak seen.
func (b *bench) sample() func() int64 {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				b.pss()
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		return b.peak.Load()
	}
}

type result struct {
	wall            time.Duration
	ms              []float64 // per request, successful or not
	ok, failed      atomic.Int64
	busy            atomic.Int64 // 503 fleet-busy answers seen
	errMu           sync.Mutex
	errs            map[string]int
	engines         sync.Map // engine → *atomic.Int64
	markdownMissing atomic.Int64
}

func merge(a, b *result) *result {
	r := &result{wall: a.wall + b.wall, ms: append(append([]float64(nil), a.ms...), b.ms...), errs: map[string]int{}}
	for _, x := range []*result{a, b} {
		r.ok.Add(x.ok.Load())
		r.failed.Add(x.failed.Load())
		r.busy.Add(x.busy.Load())
		r.markdownMissing.Add(x.markdownMissing.Load())
		for k, v := range x.errs {
			r.errs[k] += v
		}
		x.engines.Range(func(k, v any) bool {
			n, _ := r.engines.LoadOrStore(k, new(atomic.Int64))
			n.(*atomic.Int64).Add(v.(*atomic.Int64).Load())
			return true
		})
	}
	return r
}

func (r *result) report(wall time.Duration) map[string]any {
	ms := slices.Clone(r.ms)
	slices.Sort(ms)
	n := r.ok.Load() + r.failed.Load()
	engines := map[string]int64{}
	r.engines.Range(func(k, v any) bool { engines[k.(string)] = v.(*atomic.Int64).Load(); return true })
	return map[string]any{
		"requests":       n,
		"ok":             r.ok.Load(),
		"failed":         r.failed.Load(),
		"success_pct":    round(100 * float64(r.ok.Load()) / float64(max(n, 1))),
		"seconds":        round(wall.Seconds()),
		"pages_per_s":    round(float64(r.ok.Load()) / wall.Seconds()),
		"p50_ms":         round(measure.Percentile(ms, 50)),
		"p99_ms":         round(measure.Percentile(ms, 99)),
		"max_ms":         round(measure.Percentile(ms, 100)),
		"errors":         r.errs,
		"engines":        engines,
		"empty_markdown": r.markdownMissing.Load(),
	}
}

// scrapeAll POSTs every URL with c workers. With retryBusy, a 503
// fleet-busy is repeated after its Retry-After until 120 s have passed.
func (b *bench) scrapeAll(urls []string, c int, useBrowser, retryBusy bool) *result {
	r := &result{ms: make([]float64, len(urls)), errs: map[string]int{}}
	var next atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for range c {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(urls) {
					return
				}
				start := time.Now()
				engine, md, err := b.scrapeOne(urls[i], useBrowser, retryBusy, r)
				r.ms[i] = float64(time.Since(start).Microseconds()) / 1000
				if err != nil {
					r.failed.Add(1)
					r.errMu.Lock()
					r.errs[err.Error()]++
					r.errMu.Unlock()
					continue
				}
				r.ok.Add(1)
				n, _ := r.engines.LoadOrStore(engine, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
				if md == 0 {
					r.markdownMissing.Add(1)
				}
			}
		})
	}
	wg.Wait()
	r.wall = time.Since(t0)
	return r
}

func (b *bench) scrapeOne(u string, useBrowser, retryBusy bool, r *result) (engine string, markdown int, err error) {
	body := map[string]any{"url": u, "format": "md"}
	if useBrowser {
		body["wait_for"] = "body"
	}
	raw, _ := json.Marshal(body)
	deadline := time.Now().Add(120 * time.Second)
	for {
		resp, err := b.hc.Post(b.api+"/scrape", "application/json", bytes.NewReader(raw))
		if err != nil {
			return "", 0, errors.New("transport: " + strings.SplitN(err.Error(), ": ", 2)[0])
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			r.busy.Add(1)
			if retryBusy && time.Now().Before(deadline) {
				wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
				time.Sleep(time.Duration(max(wait, 1)) * time.Second)
				continue
			}
		}
		var reply struct {
			Markdown string `json:"markdown"`
			Error    string `json:"error"`
		}
		json.Unmarshal(data, &reply)
		if resp.StatusCode != http.StatusOK {
			return "", 0, fmt.Errorf("%d %s", resp.StatusCode, reply.Error)
		}
		var u struct{ Engine string }
		json.Unmarshal([]byte(resp.Header.Get("Trawl-Usage")), &u)
		return u.Engine, len(reply.Markdown), nil
	}
}

// bareChromium renders urls in one Chromium launched by playwright-go, c
// at a time, each in a fresh context: navigate, wait for load (at most
// 10 s, as the pool does), serialise the DOM.
func bareChromium(urls []string, c int) (map[string]any, error) {
	if err := browser.CheckInstall(browser.Config{}); err != nil {
		return nil, err
	}
	// playwright-go finds the node for its driver only in the environment.
	if os.Getenv("PLAYWRIGHT_NODEJS_PATH") == "" {
		node, err := exec.LookPath("node")
		if err != nil {
			return nil, err
		}
		os.Setenv("PLAYWRIGHT_NODEJS_PATH", node)
	}
	pw, err := playwright.Run(&playwright.RunOptions{
		DriverDirectory:     browser.DefaultDriverDir(),
		SkipInstallBrowsers: true,
		Stdout:              io.Discard,
		Stderr:              io.Discard,
		Logger:              nil,
	})
	if err != nil {
		return nil, err
	}
	defer pw.Stop()
	marker := fmt.Sprintf("--trawl-bench-bare=%d", os.Getpid())
	br, err := pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath:  playwright.String(browser.DefaultExecutablePath),
		Headless:        playwright.Bool(true),
		ChromiumSandbox: playwright.Bool(false),
		Args:            []string{"--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run", marker},
	})
	if err != nil {
		return nil, err
	}
	defer br.Close()
	render := func(u string) error {
		ctx, err := br.NewContext()
		if err != nil {
			return err
		}
		defer ctx.Close()
		page, err := ctx.NewPage()
		if err != nil {
			return err
		}
		if _, err := page.Goto(u, playwright.PageGotoOptions{WaitUntil: playwright.WaitUntilStateDomcontentloaded, Timeout: playwright.Float(60_000)}); err != nil {
			return err
		}
		page.WaitForLoadState(playwright.PageWaitForLoadStateOptions{State: playwright.LoadStateLoad, Timeout: playwright.Float(10_000)})
		html, err := page.Content()
		if err == nil && html == "" {
			err = errors.New("empty page")
		}
		return err
	}
	// Warm up as the cell's run did (its first 10 pages are in its figures,
	// but its browser was already running).
	for _, u := range urls[:min(3, len(urls))] {
		render(u + "&warm=1")
	}
	pss10, _ := markedPSS(marker)
	r := &result{ms: make([]float64, len(urls)), errs: map[string]int{}}
	var next atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for range c {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(urls) {
					return
				}
				start := time.Now()
				err := render(urls[i])
				r.ms[i] = float64(time.Since(start).Microseconds()) / 1000
				if err != nil {
					r.failed.Add(1)
					r.errMu.Lock()
					r.errs[strings.SplitN(err.Error(), "\n", 2)[0]]++
					r.errMu.Unlock()
					continue
				}
				r.ok.Add(1)
			}
		})
	}
	wg.Wait()
	r.wall = time.Since(t0)
	rep := r.report(r.wall)
	delete(rep, "engines")
	delete(rep, "empty_markdown")
	pssN, _ := markedPSS(marker)
	rep["pss_mb_start"] = mb(pss10)
	rep["pss_mb_end"] = mb(pssN)
	return rep, nil
}

// markedPSS sums the PSS of the processes whose command line holds marker
// and of their descendants.
func markedPSS(marker string) (int64, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	parent := map[int]int{}
	var roots []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		if i := bytes.LastIndexByte(stat, ')'); i > 0 {
			f := strings.Fields(string(stat[i+1:]))
			if len(f) > 1 {
				parent[pid], _ = strconv.Atoi(f[1])
			}
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.Contains(cmd, []byte(marker)) {
			roots = append(roots, pid)
		}
	}
	in := map[int]bool{}
	for _, r := range roots {
		in[r] = true
	}
	for changed := true; changed; {
		changed = false
		for pid, pp := range parent {
			if !in[pid] && in[pp] {
				in[pid] = true
				changed = true
			}
		}
	}
	var total int64
	for pid := range in {
		f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				total += kb << 10
				break
			}
		}
		f.Close()
	}
	return total, nil
}

func readLines(name string) ([]string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}

func mb(b int64) float64 { return round(float64(b) / (1 << 20)) }

func round(x float64) float64 { return math.Round(x*10) / 10 }

// Command loadgen holds the small clients `make bench` needs besides wrk:
//
//	loadgen freeport
//	    print a free TCP port on 127.0.0.1
//	loadgen fetch -urls FILE [-c N] [-warmup N]
//	    GET every URL once with N workers (the raw-fetch baseline); JSON out
//	loadgen warm -api URL -urls FILE [-c N] [-format md] [-expect-hit]
//	    POST /scrape once per URL (fills the cell's cache); fails unless all ok
//	    (with -expect-hit: unless every answer's Trawl-Usage says a cache hit)
//	loadgen job -api URL -urls FILE -pid PID [-format md] [-timeout D]
//	    submit one /scrape/jobs job with every URL, poll it to the end, report
//	    pages/s and the peak RSS (VmHWM) of process PID; JSON out
//
// Every JSON report is one line on stdout; progress goes to stderr.
//
// A cell answers only requests signed by its region's gate. With
// TRAWL_REGION_KEYS set (the keys the `trawl cell` was started with), warm
// and job sign each request to -api as the gate would (bench/internal/benchsign:
// account acct_bench, private networks allowed); unset, they send unsigned
// requests, for a front that signs them itself (bench/cellfront,
// bench/caddyplain -cell-listen). fetch never signs: its URLs are the origin's.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trawlhq/trawl/bench/internal/benchsign"
	"github.com/trawlhq/trawl/internal/metering"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: loadgen freeport|fetch|warm|job [flags]")
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "freeport":
		err = freeport()
	case "fetch":
		err = fetch(args)
	case "warm":
		err = warm(args)
	case "job":
		err = job(args)
	default:
		err = fmt.Errorf("unknown command %q", cmd)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "loadgen %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func freeport() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	return nil
}

func readLines(name string) ([]string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no URLs in %s", name)
	}
	return out, sc.Err()
}

func client(conns int) *http.Client {
	return &http.Client{
		Timeout: 2 * time.Minute,
		Transport: &http.Transport{
			MaxIdleConns:        conns,
			MaxIdleConnsPerHost: conns,
			DisableCompression:  true,
		},
	}
}

// apiClient is client(conns) for requests to the cell at -api: signed
// with TRAWL_REGION_KEYS when it is set.
func apiClient(conns int) (*http.Client, error) {
	keys, err := benchsign.KeysFromEnv()
	if err != nil {
		return nil, err
	}
	hc := client(conns)
	hc.Transport = benchsign.Transport(keys, hc.Transport)
	return hc, nil
}

// each runs f over items with c workers and returns the wall time.
func each(items []string, c int, f func(string)) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for range c {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(items) {
					return
				}
				f(items[i])
			}
		})
	}
	wg.Wait()
	return time.Since(t0)
}

func emit(v any) error { return json.NewEncoder(os.Stdout).Encode(v) }

func fetch(args []string) error {
	fs := flag.NewFlagSet("fetch", flag.ExitOnError)
	urlsFile := fs.String("urls", "", "file with one URL per line")
	c := fs.Int("c", 16, "concurrent requests")
	warmup := fs.Int("warmup", 500, "URLs fetched before timing (connections, page cache)")
	fs.Parse(args)
	urls, err := readLines(*urlsFile)
	if err != nil {
		return err
	}
	hc := client(*c)
	var errs, bytesIn atomic.Int64
	get := func(u string) {
		resp, err := hc.Get(u)
		if err != nil {
			errs.Add(1)
			return
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			errs.Add(1)
		}
		bytesIn.Add(n)
	}
	each(urls[:min(*warmup, len(urls))], *c, get)
	errs.Store(0)
	bytesIn.Store(0)
	d := each(urls, *c, get)
	return emit(map[string]any{
		"urls":        len(urls),
		"concurrency": *c,
		"seconds":     round3(d.Seconds()),
		"pages_per_s": round3(float64(len(urls)) / d.Seconds()),
		"errors":      errs.Load(),
		"bytes":       bytesIn.Load(),
	})
}

type scrapeReply struct {
	OK       bool   `json:"ok"`
	Markdown string `json:"markdown"`
	Error    any    `json:"error"`
}

func warm(args []string) error {
	fs := flag.NewFlagSet("warm", flag.ExitOnError)
	api := fs.String("api", "", "cell base URL, e.g. http://127.0.0.1:8080")
	urlsFile := fs.String("urls", "", "file with one URL per line")
	c := fs.Int("c", 8, "concurrent requests")
	format := fs.String("format", "md", "scrape format")
	expectHit := fs.Bool("expect-hit", false, "fail unless every answer is a cache hit (Trawl-Usage \"cache\":\"hit\")")
	fs.Parse(args)
	urls, err := readLines(*urlsFile)
	if err != nil {
		return err
	}
	hc, err := apiClient(*c)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var failures []string
	var empty atomic.Int64
	scrape := func(u string) {
		body, _ := json.Marshal(map[string]string{"url": u, "format": *format})
		resp, err := hc.Post(*api+"/scrape", "application/json", bytes.NewReader(body))
		fail := func(why string) {
			mu.Lock()
			failures = append(failures, u+": "+why)
			mu.Unlock()
		}
		if err != nil {
			fail(err.Error())
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var r scrapeReply
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil || !r.OK {
			fail(fmt.Sprintf("HTTP %d: %.200s", resp.StatusCode, b))
			return
		}
		if u := resp.Header.Get("Trawl-Usage"); *expectHit && !strings.Contains(u, `"cache":"hit"`) {
			fail("not a cache hit: Trawl-Usage " + u)
			return
		}
		if r.Markdown == "" {
			empty.Add(1)
		}
	}
	d := each(urls, *c, scrape)
	fmt.Fprintf(os.Stderr, "warm: %d URLs in %.1fs (%d empty markdown)\n", len(urls), d.Seconds(), empty.Load())
	if len(failures) > 0 {
		for _, f := range failures[:min(5, len(failures))] {
			fmt.Fprintln(os.Stderr, "  "+f)
		}
		return fmt.Errorf("%d of %d scrapes failed", len(failures), len(urls))
	}
	return nil
}

func job(args []string) error {
	fs := flag.NewFlagSet("job", flag.ExitOnError)
	api := fs.String("api", "", "cell base URL, e.g. http://127.0.0.1:8080")
	urlsFile := fs.String("urls", "", "file with one URL per line")
	pid := fs.Int("pid", 0, "process whose peak RSS (VmHWM) is reported")
	format := fs.String("format", "md", "scrape format")
	timeout := fs.Duration("timeout", 15*time.Minute, "give up after this long")
	poll := fs.Duration("poll", 100*time.Millisecond, "status poll interval")
	fs.Parse(args)
	urls, err := readLines(*urlsFile)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	hc, err := apiClient(2)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{"urls": urls, "format": *format})

	cpu0, _ := procCPU(*pid)
	t0 := time.Now()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, *api+"/scrape/jobs", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var sub struct {
		JobID  string `json:"job_id"`
		Status string `json:"status"`
	}
	if resp.StatusCode/100 != 2 || json.Unmarshal(b, &sub) != nil || sub.JobID == "" {
		return fmt.Errorf("submit: HTTP %d: %.300s", resp.StatusCode, b)
	}
	// A cell keeps a submitted job held until the gate, having charged its
	// usage report, releases it with the report's hold token; there is no
	// gate here, so do what it does.
	var usage metering.Usage
	if h := resp.Header.Get(metering.Header); h != "" {
		if err := json.Unmarshal([]byte(h), &usage); err != nil {
			return fmt.Errorf("submit: usage report %.200q: %w", h, err)
		}
	}
	if usage.Hold != "" {
		rel, _ := http.NewRequestWithContext(ctx, http.MethodPost, *api+"/scrape/jobs/"+sub.JobID+metering.ReleasePath, nil)
		rel.Header.Set(metering.HoldHeader, usage.Hold)
		rresp, err := hc.Do(rel)
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		rb, _ := io.ReadAll(rresp.Body)
		rresp.Body.Close()
		if rresp.StatusCode/100 != 2 {
			return fmt.Errorf("release: HTTP %d: %.300s", rresp.StatusCode, rb)
		}
	}
	submitted := time.Since(t0)
	fmt.Fprintf(os.Stderr, "job %s submitted and released in %s (status %q)\n", sub.JobID, submitted.Round(time.Millisecond), sub.Status)

	var last map[string]any
	var peakRSS int64
	lastLog := time.Now()
	for {
		if rss, err := procStatusKB(*pid, "VmRSS"); err == nil {
			peakRSS = max(peakRSS, rss)
		}
		st, err := jobStatus(ctx, hc, *api, sub.JobID)
		if err != nil {
			return err
		}
		last = st
		status, _ := st["status"].(string)
		if time.Since(lastLog) > 5*time.Second {
			fmt.Fprintf(os.Stderr, "  %5.1fs status=%s done=%v error=%v pending=%v\n",
				time.Since(t0).Seconds(), status, st["done"], st["error"], st["pending"])
			lastLog = time.Now()
		}
		if status != "pending" && status != "running" {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("job %s not finished after %s: %v", sub.JobID, *timeout, st)
		case <-time.After(*poll):
		}
	}
	d := time.Since(t0)
	cpu1, _ := procCPU(*pid)
	hwm, err := procStatusKB(*pid, "VmHWM")
	if err != nil {
		return fmt.Errorf("read VmHWM of pid %d: %w", *pid, err)
	}
	done, _ := last["done"].(float64)
	errCount, _ := last["error"].(float64)
	return emit(map[string]any{
		"job_id":          sub.JobID,
		"status":          last["status"],
		"urls":            len(urls),
		"done":            done,
		"error":           errCount,
		"seconds":         round3(d.Seconds()),
		"submit_seconds":  round3(submitted.Seconds()),
		"pages_per_s":     round3(float64(len(urls)) / d.Seconds()),
		"cpu_seconds":     round3((cpu1 - cpu0).Seconds()),
		"cpu_ms_per_page": round3(float64((cpu1 - cpu0).Milliseconds()) / float64(len(urls))),
		"vmhwm_mb":        round3(float64(hwm) / 1024),
		"peak_rss_mb":     round3(float64(peakRSS) / 1024),
	})
}

func jobStatus(ctx context.Context, hc *http.Client, api, id string) (map[string]any, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, api+"/scrape/jobs/"+id, nil)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var st map[string]any
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &st) != nil {
		return nil, fmt.Errorf("status: HTTP %d: %.300s", resp.StatusCode, b)
	}
	return st, nil
}

// procCPU is the user+system CPU time of process pid (/proc/PID/stat,
// in USER_HZ ticks: 100 per second on Linux).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14 of stat(5)
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// procStatusKB reads one "Name:   N kB" line of /proc/PID/status.
func procStatusKB(pid int, name string) (int64, error) {
	if pid <= 0 {
		return 0, errors.New("no pid")
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name+":"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("%s not in /proc/%d/status", name, pid)
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

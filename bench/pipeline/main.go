// Command pipeline times trawl's content pipeline (HTML -> main content ->
// Markdown) per page, for `make bench`. It is the Go half of a pair: the
// baseline is bench/js/pipeline.js, run on the same pages with the same
// flags, printing the same JSON.
//
//	pipeline -list FILE -base URL [-root DIR] [-warmup N]
//
// Pages are read into memory before timing and processed one after another
// on one goroutine, so ms_per_page is the cost of one page, not throughput.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/trawlhq/trawl/bench/measure"
	"github.com/trawlhq/trawl/cell/content"
)

type page struct {
	html []byte
	url  *url.URL
}

type report struct {
	Impl      string  `json:"impl"`
	Pages     int     `json:"pages"`
	MsPerPage float64 `json:"ms_per_page"`
	// CPUMsPerPage is the process's user+system CPU time per page (all
	// threads, GC included): less sensitive to a busy machine than wall time.
	CPUMsPerPage  float64 `json:"cpu_ms_per_page"`
	P50           float64 `json:"p50"`
	P99           float64 `json:"p99"`
	Empty         int     `json:"empty"`
	Errors        int     `json:"errors"`
	MarkdownBytes int     `json:"markdown_bytes"`
	// Methods counts pages per extractor (Document.Method), to see that the
	// figure comes from real extraction, not the whole-body fallback.
	Methods map[string]int `json:"methods"`
}

func main() {
	list := flag.String("list", "", "file with one HTML path per line")
	base := flag.String("base", "", "URL the corpus is served under; page URL = base + path relative to -root")
	root := flag.String("root", "", "corpus directory (default: directory of the first page)")
	warmup := flag.Int("warmup", 100, "pages processed before timing starts")
	flag.Parse()
	if *list == "" || *base == "" {
		fmt.Fprintln(os.Stderr, "usage: pipeline -list FILE -base URL [-root DIR] [-warmup N]")
		os.Exit(2)
	}
	pages, err := load(*list, *base, *root)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pipeline: %v\n", err)
		os.Exit(1)
	}

	for i := range min(*warmup, len(pages)) {
		_, _ = content.Process(pages[i].html, pages[i].url, content.Options{})
	}

	r := report{Impl: "trawl cell/content", Pages: len(pages), Methods: map[string]int{}}
	times := make([]float64, len(pages))
	cpu0 := measure.CPUTime()
	t0 := time.Now()
	for i, p := range pages {
		s := time.Now()
		doc, err := content.Process(p.html, p.url, content.Options{})
		times[i] = float64(time.Since(s).Nanoseconds()) / 1e6
		if err != nil {
			r.Errors++
			continue
		}
		r.Methods[doc.Method]++
		n := len(doc.Markdown)
		if n == 0 {
			r.Empty++
		}
		r.MarkdownBytes += n
	}
	total := float64(time.Since(t0).Nanoseconds()) / 1e6
	cpu := float64((measure.CPUTime() - cpu0).Nanoseconds()) / 1e6
	slices.Sort(times)
	r.MsPerPage = round3(total / float64(len(pages)))
	r.CPUMsPerPage = round3(cpu / float64(len(pages)))
	r.P50 = round3(measure.Percentile(times, 50))
	r.P99 = round3(measure.Percentile(times, 99))
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		os.Exit(1)
	}
}

func load(list, base, root string) ([]page, error) {
	b, err := os.ReadFile(list)
	if err != nil {
		return nil, err
	}
	var files []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.TrimSpace(sc.Text()); f != "" {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no pages in %s", list)
	}
	if root == "" {
		root = filepath.Dir(files[0])
	}
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	bu, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("parse -base: %w", err)
	}
	pages := make([]page, 0, len(files))
	for _, f := range files {
		html, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(root, f)
		if err != nil {
			return nil, err
		}
		u, err := bu.Parse(filepath.ToSlash(rel))
		if err != nil {
			return nil, fmt.Errorf("page URL for %s: %w", f, err)
		}
		pages = append(pages, page{html: html, url: u})
	}
	return pages, nil
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

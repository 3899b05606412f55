package gatetest

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/ledger"
)

// TestSearchSpeed measures search through the gate over a documentation
// package served from loopback, indexed through a job (docs/performance.md):
//
//	TRAWL_SEARCH_SPEED=/usr/share/doc/postgresql-doc-15/html go test ./gate/gatetest -run TestSearchSpeed -v
func TestSearchSpeed(t *testing.T) {
	root := os.Getenv("TRAWL_SEARCH_SPEED")
	if root == "" {
		t.Skip("set TRAWL_SEARCH_SPEED to a documentation directory")
	}
	site := httptest.NewServer(http.FileServer(http.Dir(root)))
	defer site.Close()
	var urls []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".html") {
			rel, _ := filepath.Rel(root, p)
			urls = append(urls, site.URL+"/"+filepath.ToSlash(rel))
		}
		return nil
	})
	g := Start(t, Options{})
	key := g.Account(t, ledger.PlanSupporter, 100000)
	body, _ := json.Marshal(map[string]any{"urls": urls})
	start := time.Now()
	if r := call(t, "POST", g.URL+"/scrape/jobs", key, string(body)); r.status != 202 {
		t.Fatalf("job: %d %s", r.status, r.body)
	}
	// Indexed when a query for the last page's words finds it; the cell's
	// own count is the figure.
	c := g.Cells[0].Cell
	deadline := time.Now().Add(10 * time.Minute)
	for c.Indexed() < uint64(len(urls))*9/10 {
		if time.Now().After(deadline) {
			t.Fatalf("indexed %d of %d in 10 minutes", c.Indexed(), len(urls))
		}
		time.Sleep(200 * time.Millisecond)
	}
	took := time.Since(start)
	t.Logf("%d pages fetched, archived and indexed through a job in %v: %.0f pages/s (one cell, the job's fetches beside)", c.Indexed(), took.Round(time.Millisecond), float64(c.Indexed())/took.Seconds())

	// Queries: words of the pages' titles, each once (none from the
	// archive of results); a key per 100 queries (the plan's rate limit).
	var qs []string
	seen := map[string]bool{}
	for _, u := range urls {
		w := strings.TrimSuffix(filepath.Base(u), ".html")
		for _, part := range strings.FieldsFunc(w, func(r rune) bool { return r == '-' || r == '_' || r == '.' }) {
			if len(part) > 3 && !seen[part] {
				seen[part] = true
				qs = append(qs, part)
			}
		}
	}
	if len(qs) > 300 {
		qs = qs[:300]
	}
	measure := func(extra string) []time.Duration {
		var d []time.Duration
		var k string
		for i, q := range qs {
			if i%100 == 0 {
				k = g.Account(t, ledger.PlanSupporter, 100000)
			}
			t0 := time.Now()
			r := call(t, "GET", g.URL+"/search?q="+url.QueryEscape(q)+extra, k, "")
			d = append(d, time.Since(t0))
			if r.status != 200 {
				t.Fatalf("%s: %d %s", q, r.status, r.body)
			}
		}
		slices.Sort(d)
		return d
	}
	pct := func(d []time.Duration, p int) time.Duration { return d[(len(d)-1)*p/100].Round(10 * time.Microsecond) }
	plain := measure("")
	rich := measure("&rich=1")
	t.Logf("search through the gate, %d queries over %d pages: p50 %v p99 %v; rich=1 p50 %v p99 %v", len(qs), c.Indexed(), pct(plain, 50), pct(plain, 99), pct(rich, 50), pct(rich, 99))
	fmt.Println()
}

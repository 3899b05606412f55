package regiontest

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/search/eval"
	"github.com/trawlhq/trawl/ledger"
)

// TestSearchQuality is the ranking evaluation of docs/search.md taken
// through the product rather than the index in process: a documentation
// package served from loopback is fetched by a job through the gate,
// archived and indexed by the cell as any page is, and its back-of-book
// index's known-item queries are asked at the gate's GET /search; the
// baseline in the same run is SQLite FTS5 over the same pages' converted
// text (cell/search/eval's). Each corpus is its own region (no page of one
// competes with another's):
//
//	TRAWL_SEARCH_QUALITY=python:/usr/share/doc/python3.11/html,sqlalchemy:/usr/share/doc/python-sqlalchemy-doc/html \
//	go test ./regiontest -run TestSearchQuality -v -timeout 60m
//
// TRAWL_SEARCH_QUALITY_QUERIES bounds the queries a corpus (1,000);
// TRAWL_SEARCH_QUALITY_OUT writes the figures as JSON (bench/run.sh).
// The pages are those the in-process evaluation indexes (the index pages
// themselves — genindex, bookindex, search — are left out: a page that
// lists every term would be a known item of every query).
func TestSearchQuality(t *testing.T) {
	spec := os.Getenv("TRAWL_SEARCH_QUALITY")
	if spec == "" {
		t.Skip("set TRAWL_SEARCH_QUALITY to name:dir[,name:dir…] of documentation packages")
	}
	nq := 1000
	if s := os.Getenv("TRAWL_SEARCH_QUALITY_QUERIES"); s != "" {
		nq, _ = strconv.Atoi(s)
	}
	var runs []map[string]any
	for _, item := range strings.Split(spec, ",") {
		name, root, ok := strings.Cut(item, ":")
		if !ok {
			t.Fatalf("TRAWL_SEARCH_QUALITY: %q is not name:dir", item)
		}
		t.Run(name, func(t *testing.T) {
			runs = append(runs, searchQuality(t, name, root, nq))
		})
	}
	if out := os.Getenv("TRAWL_SEARCH_QUALITY_OUT"); out != "" {
		b, _ := json.MarshalIndent(map[string]any{"corpora": runs}, "", "  ")
		if err := os.WriteFile(out, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func searchQuality(t *testing.T, name, root string, nq int) map[string]any {
	if _, err := os.Stat(root); err != nil {
		t.Skipf("%s not installed: %v", root, err)
	}
	c, err := eval.Load(name, root, runtime.NumCPU())
	if err != nil {
		t.Fatal(err)
	}
	qs := eval.Sample(c.Queries, nq)
	t.Logf("%s: %d pages, %d index terms, %d queries", name, len(c.Docs), len(c.Queries), len(qs))

	// The package's files as they are; a page Debian compressed
	// (changelog.html.gz) at the URL its index links to (changelog.html),
	// decompressed, as the evaluation reads it.
	files := http.FileServer(http.Dir(root))
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := filepath.Join(root, filepath.FromSlash(path.Clean("/"+r.URL.Path)))
		if _, err := os.Stat(name); err != nil {
			if z, err := os.Open(name + ".gz"); err == nil {
				defer z.Close()
				if zr, err := gzip.NewReader(z); err == nil {
					w.Header().Set("Content-Type", "text/html; charset=utf-8")
					io.Copy(w, zr)
					return
				}
			}
		}
		files.ServeHTTP(w, r)
	}))
	defer site.Close()
	// The evaluation names pages under eval.Base; the job fetches them here.
	urls := make([]string, len(c.Docs))
	for i, d := range c.Docs {
		urls[i] = site.URL + "/" + strings.TrimPrefix(d.URL, eval.Base)
	}
	asEval := func(u string) string { return eval.Base + strings.TrimPrefix(strings.TrimPrefix(u, site.URL), "/") }

	g := Start(t, Options{})
	ix := g.Cells[0].Cell.SearchIndex()
	key := g.Account(t, ledger.PlanSupporter, 10_000_000)
	start := time.Now()
	body, _ := json.Marshal(map[string]any{"urls": urls})
	if r := call(t, "POST", g.URL+"/scrape/jobs", key, string(body)); r.status != 202 {
		t.Fatalf("job: %d %s", r.status, r.body)
	}
	// Every page (a page the job could not fetch fails the test: the
	// relevant pages must all be there).
	deadline := time.Now().Add(20 * time.Minute)
	for ix.Count() < uint64(len(urls)) || ix.Stale() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("indexed %d of %d pages (%d stale) in 20 minutes", ix.Count(), len(urls), ix.Stale())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The link-authority prior is computed in the background at most every
	// 10 s while pages come; computed now so that the figures do not depend
	// on when the queries start.
	ix.UpdateRanks()
	t.Logf("%s: %d pages fetched, archived and indexed through a job in %v", name, ix.Count(), time.Since(start).Round(time.Millisecond))

	// A key per 100 queries: the plan's rate limit (120 a minute).
	asked := 0
	gate := func(q string) ([]string, error) {
		if asked%100 == 0 {
			key = g.Account(t, ledger.PlanSupporter, 100_000)
		}
		asked++
		r := call(t, "GET", g.URL+"/search?q="+url.QueryEscape(q), key, "")
		if r.status != 200 {
			return nil, fmt.Errorf("GET /search: %d %s", r.status, r.body)
		}
		var res struct {
			Results []struct {
				URL string `json:"url"`
			} `json:"results"`
		}
		if err := json.Unmarshal([]byte(r.body), &res); err != nil {
			return nil, err
		}
		out := make([]string, len(res.Results))
		for i, h := range res.Results {
			out[i] = asEval(h.URL)
		}
		return out, nil
	}
	ours, err := eval.Score(qs, gate)
	if err != nil {
		t.Fatal(err)
	}
	fts, err := eval.NewFTS5(t.TempDir(), c.Docs)
	if err != nil {
		t.Fatal(err)
	}
	defer fts.Close()
	// The baseline is its best setup on these queries (query form and
	// column weights, cell/search/eval.FTS5Variants), and its success@10
	// the best any setup has.
	best, base, all, err := fts.Best(qs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("search_quality %s: trawl through the gate %v; SQLite FTS5 bm25 (best setup: %v) %v, best success@10 of any setup %.3f; MRR@10 %+.3f", name, ours, best, base, eval.BestSuccess(all), ours.MRR-base.MRR)
	return map[string]any{
		"name": name, "root": filepath.Clean(root), "pages": len(c.Docs), "queries": ours.N,
		"trawl_mrr10": round3(ours.MRR), "trawl_success10": round3(ours.Success),
		"fts5_setup": best.String(), "fts5_mrr10": round3(base.MRR), "fts5_success10": round3(eval.BestSuccess(all)),
	}
}

func round3(x float64) float64 { return float64(int(x*1000+0.5)) / 1000 }

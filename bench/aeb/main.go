// Command aeb scores trawl's main-content Markdown on the article
// extraction benchmark (scrapinghub/article-extraction-benchmark: 181 news
// and blog pages with a person's marking of the article text), with the
// benchmark's own metric, beside go-trafilatura and go-readability run on
// the same pages in the same process.
//
//	go run ./bench/aeb -data ../shared/data/aeb [-split all|tune|holdout] [-worst N] [-out DIR]
//
// Each page is served from a loopback HTTP server under /aeb/<id> and
// fetched with the cell's own fetch engine (so its decoding is part of the
// run), then:
//
//   - trawl: content.Process, the Markdown's text (links' targets, images
//     and markup removed; see score.MarkdownText);
//   - go-trafilatura: trafilatura.Extract with its defaults (fallback to
//     Readability and DOM Distiller on), its ContentText;
//   - go-readability: the readeck port of Readability.js, its TextContent.
//
// The split is fixed and documented: a page is held out when its id (a
// hex SHA-256) starts with 0-5 (65 of 181 pages); the rest (116) is the
// tuning set, the only pages whose failures were studied while changing
// the pipeline. -worst N lists the N tuning pages where trawl's F1 is
// lowest; it refuses to list held-out pages.
//
// -out DIR writes DIR/output/<extractor>.json in the benchmark's format
// and DIR/ground-truth.json for the chosen split, so that evaluate.py
// (cd DIR && python3 evaluate.py) can check these figures.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	readability "codeberg.org/readeck/go-readability"
	trafilatura "github.com/markusmobius/go-trafilatura"
	"github.com/trawlhq/trawl/bench/aeb/score"
	"github.com/trawlhq/trawl/cell/content"
	"github.com/trawlhq/trawl/cell/fetch"
)

type truth struct {
	ArticleBody string `json:"articleBody"`
	URL         string `json:"url"`
}

// heldOut is the fixed split: ids starting with 0-5.
func heldOut(id string) bool { return id != "" && id[0] >= '0' && id[0] <= '5' }

type extractorFunc func(body []byte, u *url.URL) (string, time.Duration, error)

type extractorDef struct {
	name string
	run  extractorFunc
}

var extractors = []extractorDef{
	{"trawl", func(body []byte, u *url.URL) (string, time.Duration, error) {
		t := time.Now()
		d, err := content.Process(body, u, content.Options{})
		el := time.Since(t)
		if err != nil {
			return "", el, err
		}
		return score.MarkdownText(d.Markdown), el, nil
	}},
	{"go-trafilatura", func(body []byte, u *url.URL) (string, time.Duration, error) {
		t := time.Now()
		r, err := trafilatura.Extract(bytes.NewReader(body), trafilatura.Options{
			OriginalURL:    u,
			EnableFallback: true,
			HtmlDateMode:   trafilatura.Disabled,
		})
		el := time.Since(t)
		if err != nil {
			return "", el, err
		}
		return r.ContentText, el, nil
	}},
	{"go-readability", func(body []byte, u *url.URL) (string, time.Duration, error) {
		t := time.Now()
		p := readability.NewParser()
		a, err := p.Parse(bytes.NewReader(body), u)
		el := time.Since(t)
		if err != nil {
			return "", el, err
		}
		return a.TextContent, el, nil
	}},
}

func main() {
	data := flag.String("data", "../shared/data/aeb", "benchmark directory (ground-truth.json, html/<id>.html.gz)")
	split := flag.String("split", "all", "pages to report: all (both halves and the whole), tune or holdout")
	worst := flag.Int("worst", 0, "list the N tuning pages where trawl does worst")
	only := flag.String("only", "", "comma-separated extractors to run (default all)")
	page := flag.String("page", "", "print trawl's text and the truth for this tuning page id (prefix)")
	out := flag.String("out", "", "write predictions in the benchmark's format under this directory")
	flag.Parse()
	if err := run(*data, *split, *worst, *only, *page, *out); err != nil {
		fmt.Fprintln(os.Stderr, "aeb:", err)
		os.Exit(1)
	}
}

type pageResult struct {
	id     string
	text   map[string]string
	scores map[string]score.Score
}

func run(data, split string, worst int, only, pageID, out string) error {
	raw, err := os.ReadFile(filepath.Join(data, "ground-truth.json"))
	if err != nil {
		return err
	}
	var gt map[string]truth
	if err := json.Unmarshal(raw, &gt); err != nil {
		return fmt.Errorf("ground truth: %w", err)
	}
	ids := make([]string, 0, len(gt))
	for id := range gt {
		if pageID != "" && !strings.HasPrefix(id, pageID) {
			continue
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if pageID != "" {
		if len(ids) != 1 {
			return fmt.Errorf("-page %q matches %d pages", pageID, len(ids))
		}
		if heldOut(ids[0]) {
			return fmt.Errorf("-page %s is held out: not for study", ids[0])
		}
	}
	exs := extractors
	if only != "" {
		exs = nil
		for _, e := range extractors {
			if strings.Contains(","+only+",", ","+e.name+",") {
				exs = append(exs, e)
			}
		}
	}

	pages := map[string][]byte{}
	for _, id := range ids {
		b, err := readGz(filepath.Join(data, "html", id+".html.gz"))
		if err != nil {
			return err
		}
		pages[id] = b
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := pages[strings.TrimPrefix(r.URL.Path, "/aeb/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		// The pages were saved without their headers: no charset here, so
		// the engine's own detection decides.
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write(b)
	}))
	defer srv.Close()
	eng := fetch.NewHTTP(fetch.HTTPConfig{AllowPrivateNetworks: true})
	defer eng.Close()

	total := map[string]time.Duration{}
	var results []pageResult
	for _, id := range ids {
		resp, err := eng.Fetch(context.Background(), &fetch.Request{URL: srv.URL + "/aeb/" + id})
		if err != nil {
			return err
		}
		u, _ := url.Parse(resp.URL)
		pr := pageResult{id: id, text: map[string]string{}, scores: map[string]score.Score{}}
		for _, e := range exs {
			txt, el, err := e.run(resp.Body, u)
			if err != nil {
				fmt.Fprintf(os.Stderr, "aeb: %s on %s: %v\n", e.name, id, err)
			}
			total[e.name] += el
			pr.text[e.name] = txt
			pr.scores[e.name] = score.Match(gt[id].ArticleBody, txt)
		}
		results = append(results, pr)
	}

	if pageID != "" {
		r := results[0]
		f, p, rc := score.Metrics([]score.Score{r.scores["trawl"]})
		fmt.Printf("== %s  F1 %.3f P %.3f R %.3f %s\n== trawl's lines not in the truth:\n", r.id, f, p, rc, gt[r.id].URL)
		want := " " + strings.Join(score.Tokens(gt[r.id].ArticleBody), " ") + " "
		for _, line := range strings.Split(r.text["trawl"], "\n") {
			if t := score.Tokens(line); len(t) > 0 && !strings.Contains(want, " "+strings.Join(t, " ")+" ") {
				fmt.Println("+ " + strings.TrimSpace(line))
			}
		}
		fmt.Println("== truth's lines missing from trawl's text:")
		got := " " + strings.Join(score.Tokens(r.text["trawl"]), " ") + " "
		for _, line := range strings.Split(gt[r.id].ArticleBody, "\n") {
			if t := score.Tokens(line); len(t) > 0 && !strings.Contains(got, " "+strings.Join(t, " ")+" ") {
				fmt.Println("- " + strings.TrimSpace(line))
			}
		}
		return nil
	}

	type row struct {
		name string
		keep func(string) bool
	}
	rows := []row{
		{"tune", func(id string) bool { return !heldOut(id) }},
		{"held-out", heldOut},
		{"all", func(string) bool { return true }},
	}
	switch split {
	case "tune":
		rows = rows[:1]
	case "holdout":
		rows = rows[1:2]
	case "all":
	default:
		return fmt.Errorf("-split %q: want all, tune or holdout", split)
	}
	fmt.Printf("%-10s %-16s %5s %6s %6s %6s %9s\n", "split", "extractor", "pages", "F1", "P", "R", "ms/page")
	for _, rw := range rows {
		for _, e := range exs {
			var ss []score.Score
			var ms time.Duration
			for _, r := range results {
				if rw.keep(r.id) {
					ss = append(ss, r.scores[e.name])
				}
			}
			ms = total[e.name] / time.Duration(max(1, len(results)))
			f, p, rc := score.Metrics(ss)
			fmt.Printf("%-10s %-16s %5d %6.3f %6.3f %6.3f %9.1f\n", rw.name, e.name, len(ss), f, p, rc, float64(ms.Microseconds())/1000)
		}
	}

	if worst > 0 {
		var tune []pageResult
		for _, r := range results {
			if !heldOut(r.id) {
				tune = append(tune, r)
			}
		}
		f1 := func(s score.Score) float64 { f, _, _ := score.Metrics([]score.Score{s}); return f }
		sort.Slice(tune, func(i, j int) bool { return f1(tune[i].scores["trawl"]) < f1(tune[j].scores["trawl"]) })
		fmt.Printf("\nworst tuning pages (trawl F1, P, R | go-trafilatura F1)\n")
		for _, r := range tune[:min(worst, len(tune))] {
			s := r.scores["trawl"]
			fmt.Printf("%s %.3f %.3f %.3f | %.3f  %s\n", r.id[:12], f1(s), score.Precision(s), score.Recall(s), f1(r.scores["go-trafilatura"]), gt[r.id].URL)
		}
	}

	if out != "" {
		return writeOutputs(out, gt, results, exs)
	}
	return nil
}

func writeOutputs(dir string, gt map[string]truth, results []pageResult, exs []extractorDef) error {
	if err := os.MkdirAll(filepath.Join(dir, "output"), 0o755); err != nil {
		return err
	}
	sub := map[string]truth{}
	for _, r := range results {
		sub[r.id] = gt[r.id]
	}
	if err := writeJSON(filepath.Join(dir, "ground-truth.json"), sub); err != nil {
		return err
	}
	for _, e := range exs {
		o := map[string]map[string]string{}
		for _, r := range results {
			o[r.id] = map[string]string{"articleBody": r.text[e.name]}
		}
		if err := writeJSON(filepath.Join(dir, "output", e.name+".json"), o); err != nil {
			return err
		}
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func readGz(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return io.ReadAll(zr)
}

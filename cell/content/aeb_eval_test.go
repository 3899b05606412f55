package content

// The article evaluation behind docs/content.md: the pipeline's variants on
// the article extraction benchmark, scored with its own metric (the same
// code as bench/aeb, which runs the shipped pipeline through the fetch
// engine beside go-trafilatura and go-readability). Skipped unless
// -eval.aeb names the benchmark's directory:
//
//	go test ./cell/content/ -run TestEvalArticles -eval.aeb ../../../shared/data/aeb -v
//
// Only the tuning half is scored unless -eval.aeb.split is "all": the
// held-out half (ids 0-5) is for reporting, not for choosing.

import (
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/bench/aeb/score"
)

var (
	evalAEB      = flag.String("eval.aeb", "", "article extraction benchmark directory: run TestEvalArticles")
	evalAEBSplit = flag.String("eval.aeb.split", "tune", "tune, holdout or all")
	evalAEBWorst = flag.Int("eval.aeb.worst", 0, "log the N worst tuning pages of the first variant")
)

type aebVariant struct {
	name string
	cfg  extractConfig
}

var aebVariants = []aebVariant{
	{"shipped", defaultExtract},
	{"headline kept in the Markdown", extractConfig{mapReadability: true, pruneBelow: 0.5, keepHeadline: true}},
	{"no precision pass", extractConfig{mapReadability: true, pruneBelow: 0.5, noPrecision: true}},
	{"no precision pass, headline kept", extractConfig{mapReadability: true, pruneBelow: 0.5, noPrecision: true, keepHeadline: true}},
	{"no trafilatura fallback", extractConfig{mapReadability: true, pruneBelow: 0.5, noFallback: true}},
	{"Readability tree as is", extractConfig{pruneBelow: 0.5}},
}

func aebHeldOut(id string) bool { return id != "" && id[0] >= '0' && id[0] <= '5' }

func TestEvalArticles(t *testing.T) {
	if *evalAEB == "" {
		t.Skip("runs only with -eval.aeb DIR")
	}
	raw, err := os.ReadFile(filepath.Join(*evalAEB, "ground-truth.json"))
	if err != nil {
		t.Fatal(err)
	}
	var gt map[string]struct {
		ArticleBody string `json:"articleBody"`
		URL         string `json:"url"`
	}
	if err := json.Unmarshal(raw, &gt); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for id := range gt {
		h := aebHeldOut(id)
		if *evalAEBSplit == "all" || h == (*evalAEBSplit == "holdout") {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	pages := map[string][]byte{}
	for _, id := range ids {
		f, err := os.Open(filepath.Join(*evalAEB, "html", id+".html.gz"))
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		pages[id], err = io.ReadAll(zr)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	var report strings.Builder
	for vi, v := range aebVariants {
		var ss []score.Score
		methods := map[string]int{}
		type worst struct {
			id string
			s  score.Score
		}
		var ws []worst
		for _, id := range ids {
			u, _ := url.Parse("http://127.0.0.1/aeb/" + id)
			d, _, err := process(pages[id], u, Options{}, v.cfg)
			txt := ""
			if err == nil {
				txt = score.MarkdownText(d.Markdown)
				methods[d.Method]++
				if d.Method != "readability" && os.Getenv("AEB_METHODS") != "" {
					sc := score.Match(gt[id].ArticleBody, txt)
					f, _, _ := score.Metrics([]score.Score{sc})
					t.Logf("%s %s F1 %.3f %s", v.name, d.Method, f, id[:12])
				}
			}
			s := score.Match(gt[id].ArticleBody, txt)
			ss = append(ss, s)
			ws = append(ws, worst{id, s})
		}
		f, p, r := score.Metrics(ss)
		fmt.Fprintf(&report, "%-40s %s %3d pages  F1 %.3f  P %.3f  R %.3f  %v\n", v.name, *evalAEBSplit, len(ss), f, p, r, methods)
		if vi == 0 && *evalAEBWorst > 0 && *evalAEBSplit == "tune" {
			f1 := func(s score.Score) float64 { f, _, _ := score.Metrics([]score.Score{s}); return f }
			sort.Slice(ws, func(i, j int) bool { return f1(ws[i].s) < f1(ws[j].s) })
			for _, w := range ws[:min(*evalAEBWorst, len(ws))] {
				t.Logf("%s F1 %.3f P %.3f R %.3f %s", w.id[:12], f1(w.s), score.Precision(w.s), score.Recall(w.s), gt[w.id].URL)
			}
		}
	}
	t.Log("\n" + report.String())
}

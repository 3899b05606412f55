package extract

// The metadata evaluation behind docs/content.md ("Extract: what a page
// shows"). Skipped unless -eval is given; it reads the article pages of
// the article-extraction benchmark (../shared/data/aeb, 181 real pages):
//
//	go test ./cell/extract/ -run TestEvalMetadata -eval -v
//
// The truth of each page is its own schema.org JSON-LD (headline, author,
// datePublished); pages without all three are left out. The JSON-LD and
// every <meta> tag are then removed, and both extractors read what is
// left — what a person sees, plus the page's address — in the same run:
// ours (Deterministic, with a schema of the three fields) and
// go-trafilatura's own metadata extraction (title, author, date), the
// baseline. Scores per page: the date exactly (YYYY-MM-DD), the author's
// name (letters and digits, case folded; any one of several authors, or
// all of them), headline token F1 (\w+ tokens, case folded).

import (
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/textscore"

	trafilatura "github.com/markusmobius/go-trafilatura"
	"golang.org/x/net/html"
)

var (
	evalFlag = flag.Bool("eval", false, "run the metadata evaluation over ../shared/data/aeb")
	evalDir  = flag.String("eval.dir", "/work/shared/data/aeb", "the article-extraction benchmark's directory")
	evalShow = flag.Bool("eval.show", false, "print each page's values")
)

type truth struct {
	headline string
	authors  []string
	date     string
}

// pageTruth reads headline, authors and datePublished from a page's
// JSON-LD.
func pageTruth(src string) (truth, bool) {
	doc, err := html.Parse(strings.NewReader(src))
	if err != nil {
		return truth{}, false
	}
	var t truth
	var scripts []string
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "script" {
			for _, a := range n.Attr {
				if a.Key == "type" && strings.Contains(a.Val, "ld+json") && n.FirstChild != nil {
					scripts = append(scripts, n.FirstChild.Data)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	var visit func(v any)
	visit = func(v any) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				visit(e)
			}
		case map[string]any:
			if g, ok := x["@graph"]; ok {
				visit(g)
			}
			h, _ := x["headline"].(string)
			d, _ := x["datePublished"].(string)
			if h == "" || d == "" || t.headline != "" {
				return
			}
			var names []string
			var name func(a any)
			name = func(a any) {
				switch y := a.(type) {
				case string:
					names = append(names, y)
				case map[string]any:
					if s, ok := y["name"].(string); ok {
						names = append(names, s)
					}
				case []any:
					for _, z := range y {
						name(z)
					}
				}
			}
			name(x["author"])
			if len(names) == 0 {
				return
			}
			iso, ok := parseDate(d)
			if !ok {
				return
			}
			t = truth{headline: html.UnescapeString(h), authors: names, date: iso[:10]}
		}
	}
	for _, s := range scripts {
		var v any
		if json.Unmarshal([]byte(strings.TrimSpace(s)), &v) == nil {
			visit(v)
		}
	}
	return t, t.headline != ""
}

var reNameSep = regexp.MustCompile(`\s*(?:,|;|&|\band\b)\s*`)

// authorMatch: the value names one of the authors, or all of them.
func authorMatch(got string, want []string) bool {
	g := textscore.NormName(got)
	if g == "" {
		return false
	}
	all := make([]string, len(want))
	for i, w := range want {
		all[i] = textscore.NormName(w)
		if g == all[i] {
			return true
		}
	}
	parts := reNameSep.Split(strings.ToLower(got), -1)
	var ps []string
	for _, p := range parts {
		if n := textscore.NormName(p); n != "" {
			ps = append(ps, n)
		}
	}
	sort.Strings(ps)
	sort.Strings(all)
	return strings.Join(ps, "|") == strings.Join(all, "|")
}

type evalScore struct {
	date, author int
	f1           float64
}

func TestEvalMetadata(t *testing.T) {
	if !*evalFlag {
		t.Skip("run with -eval")
	}
	var gt map[string]struct {
		URL string `json:"url"`
	}
	raw, err := os.ReadFile(filepath.Join(*evalDir, "ground-truth.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &gt); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(*evalDir, "html", "*.html.gz"))
	sort.Strings(files)
	plan, err := (&Request{URL: "http://x/", Schema: json.RawMessage(
		`{"type":"object","properties":{"headline":{"type":"string"},"author":{"type":"string"},"date_published":{"type":"string","format":"date"}}}`)}).Check()
	if err != nil {
		t.Fatal(err)
	}
	var ours, base evalScore
	var oursTime, baseTime time.Duration
	n := 0
	for _, f := range files {
		id := strings.TrimSuffix(filepath.Base(f), ".html.gz")
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(fh)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(zr)
		fh.Close()
		src := string(b)
		tr, ok := pageTruth(src)
		if !ok {
			continue
		}
		n++
		stripped := textscore.StripTags(src)
		pageURL := gt[id].URL

		start := time.Now()
		data, _ := Deterministic(Page{URL: pageURL, HTML: stripped}, plan).(map[string]any)
		oursTime += time.Since(start)
		oh, _ := data["headline"].(string)
		oa, _ := data["author"].(string)
		od, _ := data["date_published"].(string)

		start = time.Now()
		u, _ := url.Parse(pageURL)
		var bh, ba, bd string
		if res, err := trafilatura.Extract(strings.NewReader(stripped), trafilatura.Options{OriginalURL: u}); err == nil {
			bh, ba = res.Metadata.Title, res.Metadata.Author
			if !res.Metadata.Date.IsZero() {
				bd = res.Metadata.Date.Format("2006-01-02")
			}
		}
		baseTime += time.Since(start)

		add := func(s *evalScore, h, a, d string) {
			s.f1 += textscore.TokenF1(h, tr.headline)
			if authorMatch(a, tr.authors) {
				s.author++
			}
			if d == tr.date {
				s.date++
			}
		}
		add(&ours, oh, oa, od)
		add(&base, bh, ba, bd)
		if *evalShow {
			t.Logf("%s\n  truth %q %q %s\n  ours  %q %q %s\n  base  %q %q %s", id[:8], tr.headline, tr.authors, tr.date, oh, oa, od, bh, ba, bd)
		}
	}
	if n == 0 {
		t.Fatal("no page with headline, author and datePublished")
	}
	pct := func(k int) string { return fmt.Sprintf("%.1f%% (%d)", 100*float64(k)/float64(n), k) }
	t.Logf("%d pages with JSON-LD headline, author and datePublished; JSON-LD and <meta> removed", n)
	t.Logf("| extractor | date exact | author match | headline token F1 | time per page |")
	t.Logf("|---|---|---|---|---|")
	t.Logf("| trawl extract (deterministic) | %s | %s | %.3f | %.1f ms |", pct(ours.date), pct(ours.author), ours.f1/float64(n), float64(oursTime.Microseconds())/1000/float64(n))
	t.Logf("| go-trafilatura metadata (baseline) | %s | %s | %.3f | %.1f ms |", pct(base.date), pct(base.author), base.f1/float64(n), float64(baseTime.Microseconds())/1000/float64(n))
}

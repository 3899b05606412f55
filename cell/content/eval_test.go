package content

// The extractor evaluation behind docs/content.md. It is skipped unless
// -eval is given, because it reads several hundred pages from Debian's
// documentation packages:
//
//	apt-get install -y postgresql-doc-15 python3.11-doc apache2-doc sqlite3-doc
//	go test ./cell/content/ -run TestEval -eval -v -timeout 30m
//
// Each corpus has a ground truth: the text of the container that a person
// would call the page's content, minus the navigation blocks inside it. We
// compare the multiset of word tokens an extractor keeps with the ground
// truth's: precision = kept∩truth / kept, recall = kept∩truth / truth.

import (
	"bytes"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/PuerkitoBio/goquery"
	trafilatura "github.com/markusmobius/go-trafilatura"
	"golang.org/x/net/html"
)

var (
	evalFlag  = flag.Bool("eval", false, "run the extractor evaluation over Debian's documentation packages")
	evalPages = flag.Int("eval.pages", 100, "pages sampled per corpus")
	evalOnly  = flag.String("eval.only", "", "run only the variants whose name contains this")
)

type evalCorpus struct {
	name   string
	root   string
	filter func(rel string) bool
	// truth returns the ground-truth main content of a page.
	truth func(doc *goquery.Document) *goquery.Selection
}

var evalCorpora = []evalCorpus{
	{
		name: "postgresql", root: "/usr/share/doc/postgresql-doc-15/html",
		truth: func(d *goquery.Document) *goquery.Selection {
			b := d.Find("body")
			b.Find("div.navheader, div.navfooter").Remove()
			return b
		},
	},
	{
		name: "python", root: "/usr/share/doc/python3.11/html",
		filter: func(rel string) bool {
			// Generated indexes and the search page have no prose.
			return !strings.HasPrefix(rel, "genindex") && rel != "search.html" && rel != "py-modindex.html"
		},
		truth: func(d *goquery.Document) *goquery.Selection {
			return d.Find(`div.body[role=main]`).First()
		},
	},
	{
		name: "apache", root: "/usr/share/doc/apache2-doc/manual/en",
		truth: func(d *goquery.Document) *goquery.Selection {
			b := d.Find("#page-content")
			b.Find("#quickview, .toplang, .bottomlang, div.top, #footer, button, #page-header, #path, .up").Remove()
			return b
		},
	},
	{
		name: "sqlite", root: "/usr/share/doc/sqlite3",
		truth: func(d *goquery.Document) *goquery.Selection {
			b := d.Find("body")
			// The site header (logo, menus, search form) is the first
			// div.nosearch; the per-page table of contents and the
			// "last modified" footer are navigation too.
			b.ChildrenFiltered("div.nosearch").First().Remove()
			b.Find(".fancy_toc, .rightsidebar, script, style").Remove()
			b.Find("#mtimelink").ParentsFiltered("p").Remove()
			return b
		},
	},
}

type evalVariant struct {
	name string
	run  func(page []byte, u *url.URL) (*html.Node, error)
}

func rawVariant(name string, ex extractor) evalVariant {
	return evalVariant{name: name, run: func(page []byte, u *url.URL) (*html.Node, error) {
		doc, err := html.Parse(bytes.NewReader(page))
		if err != nil {
			return nil, err
		}
		return ex(doc, u)
	}}
}

func pipelineVariant(name string, cfg extractConfig) evalVariant {
	return evalVariant{name: name, run: func(page []byte, u *url.URL) (*html.Node, error) {
		_, n, err := process(page, u, Options{}, cfg)
		return n, err
	}}
}

var evalVariants = []evalVariant{
	pipelineVariant("pipeline (shipped)", defaultExtract),
	pipelineVariant("pipeline, no landmark", extractConfig{mapReadability: true, pruneBelow: 0.5, noLandmark: true}),
	pipelineVariant("pipeline, no trafilatura fallback", extractConfig{mapReadability: true, pruneBelow: 0.5, noFallback: true}),
	pipelineVariant("pipeline, Readability tree as is", extractConfig{pruneBelow: 0.5}),
	pipelineVariant("pipeline, prune below 0.3", extractConfig{mapReadability: true, pruneBelow: 0.3}),
	rawVariant("trafilatura", trafilaturaExtractor(false, trafilatura.Balanced)),
	rawVariant("trafilatura+fallback", trafilaturaExtractor(true, trafilatura.Balanced)),
	rawVariant("trafilatura+fallback(recall)", trafilaturaExtractor(true, trafilatura.FavorRecall)),
	rawVariant("readeck-readability", readabilityExtractor),
}

func samplePages(t *testing.T, c evalCorpus, n int) []string {
	var all []string
	err := filepath.WalkDir(c.root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".html") {
			return nil
		}
		rel, _ := filepath.Rel(c.root, p)
		if c.filter == nil || c.filter(rel) {
			all = append(all, rel)
		}
		return nil
	})
	if err != nil {
		t.Skipf("corpus %s not installed: %v", c.name, err)
	}
	sort.Strings(all)
	if len(all) <= n {
		return all
	}
	// Evenly spaced, deterministic sample.
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, all[i*len(all)/n])
	}
	return out
}

func tokens(s string) map[string]int {
	m := map[string]int{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		m[w]++
	}
	return m
}

func overlap(a, b map[string]int) (common, na, nb int) {
	for w, ca := range a {
		na += ca
		common += min(ca, b[w])
	}
	for _, cb := range b {
		nb += cb
	}
	return common, na, nb
}

// nodeText is the visible text of n, without script/style.
func nodeText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		switch {
		case n.Type == html.TextNode:
			b.WriteString(n.Data)
			b.WriteByte(' ')
			return
		case n.Type == html.ElementNode && (n.Data == "script" || n.Data == "style" || n.Data == "template" || n.Data == "noscript"):
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

type evalScore struct {
	p, r, f1            float64 // macro averages over pages
	common, ext, gt     int     // micro sums
	pages, failed       int
	lowRecall           []string // pages with recall < 0.5
	elapsed             time.Duration
	preKept, preAll     int // code blocks kept / in the truth
	tableKept, tableAll int // tables kept / in the truth
}

func TestEval(t *testing.T) {
	if !*evalFlag {
		t.Skip("evaluation runs only with -eval")
	}
	var report strings.Builder
	fmt.Fprintf(&report, "| corpus | extractor | pages | P (macro) | R (macro) | F1 (macro) | P (micro) | R (micro) | code kept | tables kept | ms/page | failures | R<0.5 |\n")
	fmt.Fprintf(&report, "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range evalCorpora {
		pages := samplePages(t, c, *evalPages)
		// Read and compute ground truth once.
		type page struct {
			rel    string
			data   []byte
			truth  map[string]int
			nPre   int
			nTable int
		}
		var ps []page
		for _, rel := range pages {
			data, err := os.ReadFile(filepath.Join(c.root, rel))
			if err != nil {
				t.Fatal(err)
			}
			gd, err := goquery.NewDocumentFromReader(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			sel := c.truth(gd)
			if sel.Length() == 0 {
				continue
			}
			sel.Find("script, style").Remove()
			ps = append(ps, page{rel: rel, data: data, truth: tokens(sel.Text()), nPre: sel.Find("pre").Length(), nTable: sel.Find("table").Length()})
		}
		for _, v := range evalVariants {
			if !strings.Contains(v.name, *evalOnly) {
				continue
			}
			var s evalScore
			for _, p := range ps {
				u, _ := url.Parse("http://127.0.0.1/" + c.name + "/" + filepath.ToSlash(p.rel))
				start := time.Now()
				n, err := v.run(p.data, u)
				s.elapsed += time.Since(start)
				s.pages++
				var ext map[string]int
				if err != nil || n == nil {
					s.failed++
					ext = map[string]int{}
				} else {
					ext = tokens(nodeText(n))
					s.preKept += min(p.nPre, len(findAll(nil, n, func(n *html.Node) bool {
						return n.Data == "pre" || n.Data == "code" && n.Parent != nil && n.Parent.Data != "pre" && strings.Contains(nodeText(n), "\n")
					})))
					s.tableKept += min(p.nTable, len(findAll(nil, n, func(n *html.Node) bool { return n.Data == "table" })))
				}
				s.preAll += p.nPre
				s.tableAll += p.nTable
				common, ne, ng := overlap(ext, p.truth)
				s.common += common
				s.ext += ne
				s.gt += ng
				var pr, rc, f float64
				if ne > 0 {
					pr = float64(common) / float64(ne)
				}
				if ng > 0 {
					rc = float64(common) / float64(ng)
				} else {
					rc = 1
				}
				if pr+rc > 0 {
					f = 2 * pr * rc / (pr + rc)
				}
				s.p += pr
				s.r += rc
				s.f1 += f
				if os.Getenv("TRAWL_EVAL_DEBUG") == v.name && (pr < 0.8 || rc < 0.8) {
					t.Logf("%s %s P=%.2f R=%.2f ext=%d gt=%d", c.name, p.rel, pr, rc, ne, ng)
				}
				if rc < 0.5 {
					s.lowRecall = append(s.lowRecall, p.rel)
				}
			}
			np := float64(s.pages)
			fmt.Fprintf(&report, "| %s | %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %d/%d | %d/%d | %.1f | %d | %d |\n",
				c.name, v.name, s.pages, s.p/np, s.r/np, s.f1/np,
				float64(s.common)/float64(max(s.ext, 1)), float64(s.common)/float64(max(s.gt, 1)),
				s.preKept, s.preAll, s.tableKept, s.tableAll,
				float64(s.elapsed.Microseconds())/1000/np, s.failed, len(s.lowRecall))
			if len(s.lowRecall) > 0 {
				t.Logf("%s/%s low recall: %s", c.name, v.name, strings.Join(slices.Clip(s.lowRecall[:min(8, len(s.lowRecall))]), " "))
			}
		}
	}
	t.Log("\n" + report.String())
	if out := os.Getenv("TRAWL_EVAL_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(report.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Command metaeval measures headline, author and publish-date extraction
// (issue 31, "Extract metadata and fields"): trawl's deterministic
// extractor (cell/extract, what POST /extract runs without a model) beside
// go-trafilatura's own metadata, in the same run, on real article pages.
//
//	go run ./bench/metaeval [-trafilatura DIR] [-aeb DIR] [-misses N]
//
// Corpus: go-trafilatura's test pages (test-files/{comparison,mock,simple}
// of the module in go.mod) and the article-extraction benchmark's pages
// (/work/shared/data/aeb), deduplicated by content. The truth of a page is
// read from its own JSON-LD (headline, author, datePublished) and meta
// tags (og:title, article:published_time and kin, author and kin) before
// they are removed; a field is scored only on pages that state it. The
// extractors then read the page twice: "stripped" (every <meta> and
// JSON-LD script removed) and "intact" (as fetched). Pages are split by
// a hash of the file name: one in three is held out.
package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"hash/fnv"
	"io"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trawlhq/trawl/internal/textscore"

	trafilatura "github.com/markusmobius/go-trafilatura"
	"golang.org/x/net/html"

	"github.com/trawlhq/trawl/cell/extract"
)

func main() {
	trafDir := flag.String("trafilatura", "", "go-trafilatura's module directory (default: `go list -m` of the one in go.mod)")
	aebDir := flag.String("aeb", "/work/shared/data/aeb", "the article-extraction benchmark's directory (empty: skip)")
	misses := flag.Int("misses", 0, "print up to N of trawl's misses per field (stripped setting)")
	workers := flag.Int("workers", 2, "pages read at once")
	jsonOut := flag.String("json", "", "also write the held-out figures to this file as JSON (bench/run.sh's metaq rows)")
	only := flag.String("only", "", "run one extractor only (trawl or go-trafilatura), stripped setting only: a quick look while tuning")
	flag.Parse()
	if *only != "" {
		extractors, settings = []string{*only}, []string{"stripped"}
	}
	if err := run(*trafDir, *aebDir, *misses, *workers, *jsonOut); err != nil {
		fmt.Fprintln(os.Stderr, "bench/metaeval:", err)
		os.Exit(1)
	}
}

// doc is one corpus page.
type doc struct {
	name    string // corpus/file, the split key
	url     string // the page's address, when known
	src     string
	heldOut bool
}

type truth struct {
	headline string
	authors  []string
	date     string // YYYY-MM-DD
}

// got is what one extractor read.
type got struct{ headline, author, date string }

type result struct {
	d      doc
	t      truth          // the page's own JSON-LD and meta tags
	p      truth          // a person's marking (go-trafilatura's comparison data), when there is one
	vals   map[string]got // key: setting + "/" + extractor
	millis map[string]float64
	shown  shown // what the stripped page shows (ceiling.go)
}

var (
	settings   = []string{"stripped", "intact"}
	extractors = []string{"trawl", "go-trafilatura"}
)

func run(trafDir, aebDir string, misses, workers int, jsonOut string) error {
	if trafDir == "" {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/markusmobius/go-trafilatura").Output()
		if err != nil {
			return fmt.Errorf("find go-trafilatura's module directory: %w", err)
		}
		trafDir = strings.TrimSpace(string(out))
	}
	docs, err := loadTrafilatura(trafDir)
	if err != nil {
		return err
	}
	people, err := personTruth(trafDir)
	if err != nil {
		return err
	}
	if aebDir != "" {
		a, err := loadAEB(aebDir)
		if err != nil {
			return err
		}
		docs = append(docs, a...)
	}
	uniq := dedup(docs)
	results, err := evaluate(uniq, people, settings, workers)
	if err != nil {
		return err
	}
	report(os.Stdout, len(uniq), results)
	reportCeiling(os.Stdout, results)
	if jsonOut != "" {
		if err := writeJSON(jsonOut, results); err != nil {
			return err
		}
	}
	if misses > 0 {
		showMisses(os.Stdout, results, misses)
	}
	return nil
}

// dedup keeps one copy of each page (by content) and marks the held-out
// third: FNV-32a of the page's name mod 3 == 0.
func dedup(docs []doc) []doc {
	seen := map[[32]byte]bool{}
	var uniq []doc
	for _, d := range docs {
		h := sha256.Sum256([]byte(d.src))
		if seen[h] {
			continue
		}
		seen[h] = true
		f := fnv.New32a()
		f.Write([]byte(d.name))
		d.heldOut = f.Sum32()%3 == 0
		uniq = append(uniq, d)
	}
	sort.Slice(uniq, func(i, j int) bool { return uniq[i].name < uniq[j].name })
	return uniq
}

// evaluate reads each page that states a field (in its tags or in the
// person's truth) with each extractor in each of sets.
func evaluate(docs []doc, people map[string]truth, sets []string, workers int) ([]result, error) {
	plan, err := (&extract.Request{URL: "http://x/", Schema: json.RawMessage(
		`{"type":"object","properties":{"headline":{"type":"string"},"author":{"type":"string"},"date_published":{"type":"string","format":"date"}}}`)}).Check()
	if err != nil {
		return nil, err
	}
	var results []result
	var mu sync.Mutex
	jobs := make(chan doc)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for d := range jobs {
				t, pt := pageTruth(d.src, d.url), people[d.name]
				if empty(t) && empty(pt) {
					continue
				}
				r := result{d: d, t: t, p: pt, vals: map[string]got{}, millis: map[string]float64{}}
				r.shown = shownBy(textscore.StripTags(d.src), d.url)
				for _, s := range sets {
					page := d.src
					if s == "stripped" {
						page = textscore.StripTags(d.src)
					}
					for _, e := range extractors {
						start := time.Now()
						if e == "trawl" {
							r.vals[s+"/"+e] = readTrawl(plan, d.url, page)
						} else {
							r.vals[s+"/"+e] = readTrafilatura(d.url, page)
						}
						r.millis[s+"/"+e] = float64(time.Since(start).Microseconds()) / 1000
					}
				}
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			}
		})
	}
	for _, d := range docs {
		jobs <- d
	}
	close(jobs)
	wg.Wait()
	sort.Slice(results, func(i, j int) bool { return results[i].d.name < results[j].d.name })
	return results, nil
}

func readTrawl(plan *extract.Plan, pageURL, page string) got {
	data, _ := extract.Deterministic(extract.Page{URL: pageURL, HTML: page}, plan).(map[string]any)
	var g got
	g.headline, _ = data["headline"].(string)
	g.author, _ = data["author"].(string)
	g.date, _ = data["date_published"].(string)
	return g
}

func readTrafilatura(pageURL, page string) got {
	var opts trafilatura.Options
	if u, err := url.Parse(pageURL); err == nil && pageURL != "" {
		opts.OriginalURL = u
	}
	res, err := trafilatura.Extract(strings.NewReader(page), opts)
	if err != nil || res == nil {
		return got{}
	}
	g := got{headline: res.Metadata.Title, author: res.Metadata.Author}
	if !res.Metadata.Date.IsZero() {
		g.date = res.Metadata.Date.Format("2006-01-02")
	}
	return g
}

// Corpora.

var (
	reCompEntry = regexp.MustCompile(`"(https?://[^"]+)":\s*\{\s*File:\s*"([^"]+)"`)
	reMockEntry = regexp.MustCompile(`"(https?://[^"]+)":\s*"([^"]+\.html)"`)
)

// loadTrafilatura reads go-trafilatura's test pages; their addresses come
// from its comparison data and its real-world mock table.
func loadTrafilatura(dir string) ([]doc, error) {
	urls := map[string]string{}
	for _, f := range []string{"scripts/comparison/data.go", "realworld-mock_test.go"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		for _, re := range []*regexp.Regexp{reCompEntry, reMockEntry} {
			for _, m := range re.FindAllStringSubmatch(string(b), -1) {
				if _, ok := urls[m[2]]; !ok {
					urls[m[2]] = m[1]
				}
			}
		}
	}
	var docs []doc
	for _, sub := range []string{"comparison", "mock", "simple"} {
		files, _ := filepath.Glob(filepath.Join(dir, "test-files", sub, "*"))
		sort.Strings(files)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil || !bytes.Contains(bytes.ToLower(b[:min(len(b), 4096)]), []byte("<")) {
				continue
			}
			base := filepath.Base(f)
			docs = append(docs, doc{name: "trafilatura/" + sub + "/" + base, url: urls[base], src: string(b)})
		}
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("no test pages under %s/test-files", dir)
	}
	return docs, nil
}

func loadAEB(dir string) ([]doc, error) {
	var gt map[string]struct {
		URL string `json:"url"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "ground-truth.json"))
	if err != nil {
		return nil, fmt.Errorf("read aeb ground truth: %w", err)
	}
	if err := json.Unmarshal(raw, &gt); err != nil {
		return nil, fmt.Errorf("aeb ground truth: %w", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "html", "*.html.gz"))
	sort.Strings(files)
	var docs []doc
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		zr, err := gzip.NewReader(fh)
		if err != nil {
			fh.Close()
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		b, err := io.ReadAll(zr)
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		id := strings.TrimSuffix(filepath.Base(f), ".html.gz")
		docs = append(docs, doc{name: "aeb/" + id, url: gt[id].URL, src: string(b)})
	}
	return docs, nil
}

func empty(t truth) bool { return t.headline == "" && len(t.authors) == 0 && t.date == "" }

// personTruth reads the expected metadata a person wrote for
// go-trafilatura's comparison pages (scripts/comparison/data.go: Title,
// Authors, Date), keyed by the page's name in this corpus. It is parsed
// as Go, not matched with patterns, so that every entry is read.
func personTruth(dir string) (map[string]truth, error) {
	path := filepath.Join(dir, "scripts/comparison/data.go")
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		return nil, fmt.Errorf("person truth: %w", err)
	}
	str := func(e ast.Expr) string {
		if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
			if s, err := strconv.Unquote(b.Value); err == nil {
				return s
			}
		}
		return ""
	}
	out := map[string]truth{}
	ast.Inspect(f, func(n ast.Node) bool {
		kv, ok := n.(*ast.KeyValueExpr)
		if !ok {
			return true
		}
		entry, ok := kv.Value.(*ast.CompositeLit)
		if !ok || str(kv.Key) == "" {
			return true
		}
		var file string
		var t truth
		for _, e := range entry.Elts {
			fkv, ok := e.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			id, _ := fkv.Key.(*ast.Ident)
			if id == nil {
				continue
			}
			switch id.Name {
			case "File":
				file = str(fkv.Value)
			case "Title":
				t.headline = collapse(str(fkv.Value))
			case "Date":
				// "2022-01.26", "2022-11-1": as the person typed it.
				d := strings.NewReplacer(".", "-").Replace(str(fkv.Value))
				t.date, _ = day(d)
			case "Authors":
				if l, ok := fkv.Value.(*ast.CompositeLit); ok {
					for _, a := range l.Elts {
						if s := collapse(str(a)); s != "" {
							t.authors = append(t.authors, s)
						}
					}
				}
			}
		}
		if file != "" && !empty(t) {
			out["trafilatura/comparison/"+file] = t
		}
		return false
	})
	if len(out) == 0 {
		return nil, fmt.Errorf("person truth: no entries in %s", path)
	}
	return out, nil
}

// Truth: the page's own JSON-LD first, then its meta tags.

func pageTruth(src, pageURL string) truth {
	var pageHost string
	if u, err := url.Parse(pageURL); err == nil {
		pageHost = u.Hostname()
	}
	root, err := html.Parse(strings.NewReader(src))
	if err != nil {
		return truth{}
	}
	var t truth
	var scripts []string
	metas := map[string][]string{}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "script":
				if strings.Contains(strings.ToLower(attr(n, "type")), "ld+json") && n.FirstChild != nil {
					scripts = append(scripts, n.FirstChild.Data)
				}
			case "meta":
				c := strings.TrimSpace(attr(n, "content"))
				for _, k := range []string{"property", "name", "itemprop"} {
					if v := strings.ToLower(strings.TrimSpace(attr(n, k))); v != "" && c != "" {
						metas[v] = append(metas[v], c)
						break
					}
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
	for _, s := range scripts {
		var v any
		if json.Unmarshal([]byte(cleanJSON(s)), &v) == nil {
			visitLD(v, &t)
		}
	}
	first := func(keys ...string) string {
		for _, k := range keys {
			for _, v := range metas[k] {
				if v = strings.TrimSpace(html.UnescapeString(v)); v != "" {
					return v
				}
			}
		}
		return ""
	}
	if t.headline == "" {
		t.headline = first("og:title", "twitter:title", "headline", "dc.title")
	}
	if len(t.authors) == 0 {
		for _, k := range []string{"author", "article:author", "dc.creator", "parsely-author", "sailthru.author", "byl"} {
			for _, v := range metas[k] {
				if a := cleanAuthor(v); a != "" {
					t.authors = append(t.authors, a)
				}
			}
			if len(t.authors) > 0 {
				break
			}
		}
	}
	if t.date == "" {
		if d := first("article:published_time", "datepublished", "date", "pubdate", "publishdate", "dc.date", "dc.date.issued", "dcterms.date", "og:published_time", "sailthru.date", "parsely-pub-date"); d != "" {
			t.date, _ = day(d)
		}
	}
	site := first("og:site_name", "application-name", "twitter:site")
	t.headline = dropSite(collapse(t.headline), site, pageHost)
	var people []string
	for _, a := range t.authors {
		// "Amy Kuperinsky | NJ Advance Media for NJ.com": the person.
		a = strings.TrimSpace(strings.Split(a, "|")[0])
		if a != "" && !isSite(a, site, pageHost) {
			people = append(people, a)
		}
	}
	t.authors = people
	return t
}

var reTitleSep = regexp.MustCompile(`\s+[|–—·:»-]\s+`)

// dropSite removes a site name before or after a title ("Headline |
// TheHill", "Opinion | Headline" stays as it is: only site names go).
func dropSite(title, site, host string) string {
	for range 2 {
		loc := reTitleSep.FindAllStringIndex(title, -1)
		if len(loc) == 0 {
			return title
		}
		last := loc[len(loc)-1]
		if isSite(title[last[1]:], site, host) {
			title = strings.TrimSpace(title[:last[0]])
			continue
		}
		if isSite(title[:loc[0][0]], site, host) {
			title = strings.TrimSpace(title[loc[0][1]:])
			continue
		}
		return title
	}
	return title
}

// isSite: s names the site (its og:site_name, or its host without dots).
func isSite(s, site, host string) bool {
	n := strings.ReplaceAll(textscore.NormName(s), " ", "")
	if n == "" {
		return false
	}
	if site != "" && n == strings.ReplaceAll(textscore.NormName(strings.TrimPrefix(site, "@")), " ", "") {
		return true
	}
	h := strings.ReplaceAll(textscore.NormName(strings.TrimPrefix(host, "www.")), " ", "")
	return h != "" && (h == n || strings.HasPrefix(h, n) && len(n) >= 3 && len(h)-len(n) <= 4)
}

// cleanJSON drops what some sites wrap JSON-LD in.
func cleanJSON(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "<![CDATA[")
	s = strings.TrimSuffix(s, "]]>")
	s = strings.TrimPrefix(s, "//<![CDATA[")
	s = strings.TrimSuffix(s, "//]]>")
	return strings.TrimSpace(s)
}

var articleTypes = regexp.MustCompile(`(?i)article|posting|report|blog|review|webpage`)

func visitLD(v any, t *truth) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			visitLD(e, t)
		}
	case map[string]any:
		if g, ok := x["@graph"]; ok {
			visitLD(g, t)
		}
		typ := fmt.Sprint(x["@type"])
		if !articleTypes.MatchString(typ) {
			return
		}
		if h, _ := x["headline"].(string); h != "" && t.headline == "" {
			t.headline = html.UnescapeString(h)
		}
		if d, _ := x["datePublished"].(string); d != "" && t.date == "" {
			t.date, _ = day(d)
		}
		if len(t.authors) == 0 {
			var name func(a any)
			name = func(a any) {
				switch y := a.(type) {
				case string:
					if c := cleanAuthor(y); c != "" {
						t.authors = append(t.authors, c)
					}
				case map[string]any:
					if strings.Contains(fmt.Sprint(y["@type"]), "Organization") {
						return
					}
					if s, ok := y["name"].(string); ok {
						if c := cleanAuthor(s); c != "" {
							t.authors = append(t.authors, c)
						}
					}
				case []any:
					for _, z := range y {
						name(z)
					}
				}
			}
			name(x["author"])
		}
	}
}

// cleanAuthor: a person's name, not an address or a profile link.
func cleanAuthor(s string) string {
	s = collapse(html.UnescapeString(s))
	if s == "" || strings.Contains(s, "://") || strings.HasPrefix(s, "www.") || strings.Contains(s, "@") || len(s) > 120 {
		return ""
	}
	return s
}

var (
	reISODay = regexp.MustCompile(`^\s*(\d{4})-(\d{1,2})-(\d{1,2})`)
	dayForms = []string{time.RFC1123Z, time.RFC1123, "2006/01/02", "20060102", "January 2, 2006", "Jan 2, 2006", "2 January 2006", "02.01.2006"}
)

// day is the calendar day a date string names, as written (no zone
// conversion: "2019-06-30T23:30:00-05:00" is 2019-06-30).
func day(s string) (string, bool) {
	if m := reISODay.FindStringSubmatch(s); m != nil {
		var y, mo, d int
		fmt.Sscanf(m[1]+" "+m[2]+" "+m[3], "%d %d %d", &y, &mo, &d)
		if y >= 1990 && y <= 2100 && mo >= 1 && mo <= 12 && d >= 1 && d <= 31 {
			return fmt.Sprintf("%04d-%02d-%02d", y, mo, d), true
		}
		return "", false
	}
	s = strings.TrimSpace(s)
	for _, f := range dayForms {
		if t, err := time.Parse(f, s); err == nil && t.Year() >= 1990 && t.Year() <= 2100 {
			return t.Format("2006-01-02"), true
		}
	}
	return "", false
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if strings.EqualFold(a.Key, key) {
			return a.Val
		}
	}
	return ""
}

// Scoring.

func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

func normHeadline(s string) string {
	s = strings.NewReplacer("’", "'", "‘", "'", "“", `"`, "”", `"`, "\u00a0", " ").Replace(html.UnescapeString(s))
	return strings.ToLower(collapse(s))
}

var (
	reNameSep = regexp.MustCompile(`(?i)\s*(?:,|;|&|\||\band\b|\bund\b)\s*`)
	reBy      = regexp.MustCompile(`(?i)^\s*(?:by|von|par|por)\s+`)
)

// authorMatch: one name the extractor gave is one of the authors.
func authorMatch(got string, want []string) bool {
	if textscore.NormName(got) == "" {
		return false
	}
	w := map[string]bool{}
	for _, a := range want {
		w[textscore.NormName(reBy.ReplaceAllString(a, ""))] = true
	}
	if w[textscore.NormName(got)] {
		return true
	}
	for _, p := range reNameSep.Split(got, -1) {
		if n := textscore.NormName(reBy.ReplaceAllString(p, "")); n != "" && w[n] {
			return true
		}
	}
	return false
}

// fields scored; each a test of one value against the truth, and whether
// the page has a truth for it.
var fields = []struct {
	name string
	has  func(truth) bool
	ok   func(got, truth) bool
}{
	{"headline exact", func(t truth) bool { return t.headline != "" }, func(g got, t truth) bool {
		return normHeadline(g.headline) == normHeadline(t.headline)
	}},
	{"headline F1≥0.9", func(t truth) bool { return t.headline != "" }, func(g got, t truth) bool {
		return textscore.TokenF1(g.headline, t.headline) >= 0.9
	}},
	{"author", func(t truth) bool { return len(t.authors) > 0 }, func(g got, t truth) bool { return authorMatch(g.author, t.authors) }},
	{"date (day)", func(t truth) bool { return t.date != "" }, func(g got, t truth) bool {
		d, _ := day(g.date)
		return d != "" && d == t.date
	}},
}

// truths a page is scored against: its own tags, and a person's
// marking where go-trafilatura's comparison data has one.
var truths = []struct {
	name string
	of   func(result) truth
}{
	{"page tags", func(r result) truth { return r.t }},
	{"person", func(r result) truth { return r.p }},
}

// tally counts, over rs, the pages with a truth for field f (by the
// truth tr) and those an extractor read right, tuning [0] and held-out
// [1].
func tally(rs []result, of func(result) truth, setting, extractor string, fieldIdx int) (k, n [2]int) {
	f := fields[fieldIdx]
	for _, r := range rs {
		t := of(r)
		if !f.has(t) {
			continue
		}
		i := 0
		if r.d.heldOut {
			i = 1
		}
		n[i]++
		if f.ok(r.vals[setting+"/"+extractor], t) {
			k[i]++
		}
	}
	return k, n
}

func report(w io.Writer, pages int, rs []result) {
	var tune, held, person int
	for _, r := range rs {
		if r.d.heldOut {
			held++
		} else {
			tune++
		}
		if !empty(r.p) {
			person++
		}
	}
	fmt.Fprintf(w, "%d unique pages read; %d state at least one of headline, author, date in JSON-LD or meta tags or in the person-written truth (tuning %d, held-out %d; %d with a person's truth)\n\n", pages, len(rs), tune, held, person)
	fmt.Fprintln(w, "| truth | setting | field | extractor | tuning | held-out | all |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, tr := range truths {
		for _, s := range settings {
			for fi, f := range fields {
				for _, e := range extractors {
					k, n := tally(rs, tr.of, s, e, fi)
					cell := func(k, n int) string {
						if n == 0 {
							return "–"
						}
						return fmt.Sprintf("%.3f (%d/%d)", float64(k)/float64(n), k, n)
					}
					fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", tr.name, s, f.name, e, cell(k[0], n[0]), cell(k[1], n[1]), cell(k[0]+k[1], n[0]+n[1]))
				}
			}
		}
	}
	fmt.Fprintln(w)
	for _, s := range settings {
		for _, e := range extractors {
			var total float64
			for _, r := range rs {
				total += r.millis[s+"/"+e]
			}
			fmt.Fprintf(w, "%s %s: %.1f ms per page\n", s, e, total/float64(max(len(rs), 1)))
		}
	}
}

// writeJSON writes the held-out figures of every truth, setting and field
// with both extractors: one row each, for bench/run.sh.
func writeJSON(path string, rs []result) error {
	type row struct {
		Truth       string  `json:"truth"`
		Setting     string  `json:"setting"`
		Field       string  `json:"field"`
		Pages       int     `json:"pages"`
		Trawl       float64 `json:"trawl"`
		Trafilatura float64 `json:"trafilatura"`
	}
	var rows []row
	for _, tr := range truths {
		for _, s := range settings {
			for fi, f := range fields {
				r := row{Truth: tr.name, Setting: s, Field: f.name}
				for _, e := range extractors {
					k, n := tally(rs, tr.of, s, e, fi)
					if n[1] == 0 {
						continue
					}
					r.Pages = n[1]
					v := math.Round(float64(k[1])/float64(n[1])*1000) / 1000
					if e == "trawl" {
						r.Trawl = v
					} else {
						r.Trafilatura = v
					}
				}
				if r.Pages > 0 {
					rows = append(rows, r)
				}
			}
		}
	}
	b, err := json.MarshalIndent(map[string]any{"heldout": rows}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// showMisses prints trawl's misses on tuning pages (stripped), with
// go-trafilatura's value beside.
func showMisses(w io.Writer, rs []result, limit int) {
	for _, tr := range truths {
		for _, f := range fields {
			fmt.Fprintf(w, "\n## trawl misses: %s (%s truth, stripped, tuning pages)\n", f.name, tr.name)
			n := 0
			for _, r := range rs {
				t := tr.of(r)
				if r.d.heldOut || !f.has(t) {
					continue
				}
				g := r.vals["stripped/trawl"]
				if f.ok(g, t) {
					continue
				}
				b := r.vals["stripped/go-trafilatura"]
				want := fmt.Sprintf("%q", t.headline)
				gv, bv := g.headline, b.headline
				switch {
				case strings.HasPrefix(f.name, "author"):
					want, gv, bv = fmt.Sprintf("%q", t.authors), g.author, b.author
				case strings.HasPrefix(f.name, "date"):
					want, gv, bv = t.date, g.date, b.date
				}
				fmt.Fprintf(w, "- %s (%s)\n  truth %s | trawl %q | go-trafilatura %q (ok=%v)\n", r.d.name, r.d.url, want, gv, bv, f.ok(b, t))
				if n++; n >= limit {
					break
				}
			}
		}
	}
}

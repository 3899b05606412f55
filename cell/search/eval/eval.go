// Package eval measures the search index's ranking against the
// back-of-book index of a documentation package (known-item judgments
// written by the documentation's authors: term → the pages it points to),
// beside SQLite FTS5's bm25() over the same pages' text, in the same run
// (docs/search.md, "Evaluation").
package eval

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	nethtml "golang.org/x/net/html"
	_ "modernc.org/sqlite" // FTS5, pure Go

	"github.com/trawlhq/trawl/cell/search"
)

// Corpus is a documentation package's pages and its index's judgments.
type Corpus struct {
	Name    string
	Root    string
	Docs    []*search.Doc
	Queries []Query
}

// Query is an index term and the pages it points to.
type Query struct {
	Text     string
	Relevant map[string]bool // URLs
}

// Base is the URL the pages are given (never fetched).
const Base = "http://docs.test/"

// Load reads every HTML page of root (but the index pages) through the
// cell's own conversion (search.DocOf: main content, headings, links),
// and the judgments of its index pages.
func Load(name, root string, workers int) (*Corpus, error) {
	return LoadSample(name, root, workers, 0, 0)
}

// LoadSample is Load of a sample: n queries at most (Sample), the pages
// they point to, and other pages taken evenly up to pages in all (0: all
// the queries, all the pages). Both rankers are measured on the same
// sample, which is smaller and so easier than the whole corpus.
func LoadSample(name, root string, workers, n, pages int) (*Corpus, error) {
	c := &Corpus{Name: name, Root: root}
	paths, err := pagePaths(root)
	if err != nil {
		return nil, err
	}
	qs, err := judgments(root)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		qs = Sample(qs, n)
	}
	if pages > 0 && pages < len(paths) {
		paths = samplePaths(paths, qs, pages)
	}
	docs := make([]*search.Doc, len(paths))
	var wg sync.WaitGroup
	next := make(chan int)
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				b, err := readPage(filepath.Join(root, paths[i]))
				if err != nil {
					continue
				}
				docs[i] = search.DocOf(search.Page{URL: pageURL(paths[i]), ContentType: "text/html", Body: b, Fetched: time.Unix(0, 0)})
			}
		}()
	}
	for i := range paths {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, d := range docs {
		if d != nil {
			c.Docs = append(c.Docs, d)
		}
	}
	// A term whose pages are none of the pages read (a module's source
	// under _modules, an index page) cannot be found by any ranker: out.
	have := make(map[string]bool, len(c.Docs))
	for _, d := range c.Docs {
		have[d.URL] = true
	}
	for _, q := range qs {
		for u := range q.Relevant {
			if !have[u] {
				delete(q.Relevant, u)
			}
		}
		if len(q.Relevant) > 0 {
			c.Queries = append(c.Queries, q)
		}
	}
	return c, nil
}

// pagePaths are the corpus's pages (.html, and .html.gz Debian
// compressed), relative to root and sorted: every page but the index pages
// and Sphinx's own directories (_static, _sources, _modules).
func pagePaths(root string) ([]string, error) {
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() && strings.HasPrefix(d.Name(), "_") {
			return filepath.SkipDir
		}
		if d.IsDir() || !(strings.HasSuffix(p, ".html") || strings.HasSuffix(p, ".html.gz")) || isIndexPage(rel) {
			return nil
		}
		paths = append(paths, rel)
		return nil
	})
	sort.Strings(paths)
	return paths, err
}

// pageURL is the URL of a page's file (rel, under the corpus's root): a
// page Debian compressed (changelog.html.gz) is the page its index links
// to (changelog.html).
func pageURL(rel string) string {
	return Base + strings.TrimSuffix(filepath.ToSlash(rel), ".gz")
}

// samplePaths are the paths of the pages qs point to, and others taken
// evenly, up to n in all (sorted).
func samplePaths(paths []string, qs []Query, n int) []string {
	keep := map[string]bool{}
	var others []string
	for _, p := range paths {
		u := pageURL(p)
		for _, q := range qs {
			if q.Relevant[u] {
				keep[p] = true
				break
			}
		}
		if !keep[p] {
			others = append(others, p)
		}
	}
	out := slices.Collect(maps.Keys(keep))
	if len(out) < n {
		out = append(out, SampleStrings(others, n-len(out))...)
	}
	sort.Strings(out)
	return out
}

// readPage reads an HTML page, gunzipped when its name ends in .gz.
func readPage(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil || !strings.HasSuffix(path, ".gz") {
		return b, err
	}
	z, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer z.Close()
	return io.ReadAll(z)
}

func isIndexPage(rel string) bool {
	b := filepath.Base(rel)
	return strings.HasPrefix(b, "genindex") || b == "bookindex.html" || b == "search.html" || b == "py-modindex.html"
}

// judgments reads the package's back-of-book index: Sphinx
// genindex-*.html (or genindex.html) or DocBook bookindex.html. A term's
// relevant pages are the pages its entry and the entries under it link to
// (an anchor's page: the unit ranked is the page). A term with several
// entries points to all their pages.
func judgments(root string) ([]Query, error) {
	files, _ := filepath.Glob(filepath.Join(root, "genindex-*.html"))
	if len(files) == 0 {
		// A Sphinx index on one page (python-django-doc, celery,
		// sqlalchemy, sphinx-doc).
		files, _ = filepath.Glob(filepath.Join(root, "genindex.html"))
	}
	files = append(files, filepath.Join(root, "bookindex.html"))
	rel := map[string]map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		doc, err := nethtml.Parse(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, e := range indexEntries(doc) {
			term := queryOf(e.term)
			if term == "" || len(e.pages) == 0 {
				continue
			}
			if rel[term] == nil {
				rel[term] = map[string]bool{}
			}
			for _, p := range e.pages {
				rel[term][Base+p] = true
			}
		}
	}
	var qs []Query
	for t, r := range rel {
		qs = append(qs, Query{Text: t, Relevant: r})
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].Text < qs[j].Text })
	return qs, nil
}

// entry is a top-level entry of a back-of-book index: its term and the
// pages it and its sub-entries link to.
type entry struct {
	term  string
	pages []string
}

// indexEntries reads the top-level entries of an index page. Three
// markups:
//
//	Sphinx ≥ 4:  <li><a href="p.html#x">term (qualifier)</a>, <a href="q.html">[1]</a>
//	             <li>term <ul><li><a href="p.html#x">sub-entry or qualifier</a></ul>
//	Sphinx < 4:  <dt><a href="p.html#x">term (qualifier)</a></dt><dd><dl><dt><a …>(qualifier)</a></dt></dl></dd>
//	DocBook:     <dt>term, <a class="indexterm" href="p.html#x">section title</a></dt><dd><dl><dt>secondary, <a …>
//
// A sub-entry's text is a qualifier ("(in module os)", "module",
// "celery-worker command line option") or a secondary term: either way
// the query is the top-level term, and the sub-entry's pages are among
// its pages. (Reading sub-entries as terms of their own made queries such
// as "module" relevant on every module's page.)
func indexEntries(doc *nethtml.Node) []entry {
	var out []entry
	var walk func(n *nethtml.Node)
	walk = func(n *nethtml.Node) {
		if n.Type == nethtml.ElementNode && (n.Data == "li" || n.Data == "dt") && inIndexList(n) {
			e := entry{term: entryTerm(n)}
			e.pages = entryPages(n, e.pages)
			if n.Data == "dt" {
				// The sub-entries of a <dt> are in the <dd> after it.
				for s := n.NextSibling; s != nil; s = s.NextSibling {
					if s.Type != nethtml.ElementNode {
						continue
					}
					if s.Data == "dd" {
						e.pages = entryPages(s, e.pages)
					}
					break
				}
			}
			out = append(out, e)
			return
		}
		if n.Type == nethtml.ElementNode && n.Data == "dd" {
			return // sub-entries, read with the <dt> before
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return out
}

// inIndexList reports whether an <li> or <dt> is an entry of the index:
// inside the table of a Sphinx genindex, or in a DocBook index division
// (not the page's navigation).
func inIndexList(n *nethtml.Node) bool {
	for p := n.Parent; p != nil; p = p.Parent {
		if p.Type != nethtml.ElementNode {
			continue
		}
		for _, a := range p.Attr {
			if a.Key == "class" && (strings.Contains(a.Val, "indextable") || a.Val == "indexdiv") {
				return true
			}
		}
	}
	return false
}

// entryTerm is an entry's term: its text before its first link (DocBook,
// and Sphinx entries whose links are all sub-entries), else its first
// link's text (Sphinx).
func entryTerm(n *nethtml.Node) string {
	var lead strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		switch {
		case c.Type == nethtml.TextNode:
			lead.WriteString(c.Data)
			continue
		case c.Type == nethtml.ElementNode && c.Data == "a":
			if t := strings.TrimSuffix(strings.TrimSpace(lead.String()), ","); t != "" {
				return t
			}
			return textOf(c)
		case c.Type == nethtml.ElementNode && (c.Data == "ul" || c.Data == "dl"):
			return strings.TrimSpace(lead.String())
		}
		lead.WriteString(textOf(c))
	}
	return strings.TrimSpace(lead.String())
}

// entryPages appends the pages of the links under n (their anchors cut).
func entryPages(n *nethtml.Node, pages []string) []string {
	if n.Type == nethtml.ElementNode && n.Data == "a" {
		for _, a := range n.Attr {
			if a.Key != "href" {
				continue
			}
			p, _, _ := strings.Cut(a.Val, "#")
			if p != "" && !strings.Contains(p, "://") && !slices.Contains(pages, p) {
				pages = append(pages, p)
			}
		}
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		pages = entryPages(c, pages)
	}
	return pages
}

func textOf(n *nethtml.Node) string {
	if n.Type == nethtml.TextNode {
		return n.Data
	}
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		b.WriteString(textOf(c))
	}
	return b.String()
}

// queryOf is an index term as a query: "getcwd() (in module os)" → "getcwd".
func queryOf(term string) string {
	t := strings.Join(strings.Fields(term), " ")
	if i := strings.Index(t, " ("); i > 0 {
		t = t[:i]
	}
	t = strings.TrimSuffix(strings.TrimSpace(t), "()")
	if len(t) < 3 || strings.HasPrefix(t, "-") || strings.ContainsAny(t, "<>") {
		return ""
	}
	return t
}

// Sample is every k-th query, for n of them at most (deterministic).
func Sample(qs []Query, n int) []Query {
	if len(qs) <= n {
		return qs
	}
	k := float64(len(qs)) / float64(n)
	out := make([]Query, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, qs[int(float64(i)*k)])
	}
	return out
}

// SampleStrings is every k-th string, for n of them at most.
func SampleStrings(ss []string, n int) []string {
	if len(ss) <= n {
		return ss
	}
	k := float64(len(ss)) / float64(n)
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, ss[int(float64(i)*k)])
	}
	return out
}

// Ranker ranks pages for a query: their URLs, best first.
type Ranker func(q string) ([]string, error)

// Scores are MRR@10 and success@10 over a set of queries.
type Scores struct {
	MRR, Success float64
	N            int
}

func (s Scores) String() string {
	return fmt.Sprintf("MRR@10 %.3f  success@10 %.3f  (%d queries)", s.MRR, s.Success, s.N)
}

// Score ranks every query with r.
func Score(qs []Query, r Ranker) (Scores, error) {
	var s Scores
	for _, q := range qs {
		urls, err := r(q.Text)
		if err != nil {
			return s, fmt.Errorf("%q: %w", q.Text, err)
		}
		for i, u := range urls {
			if i >= 10 {
				break
			}
			if q.Relevant[u] {
				s.MRR += 1 / float64(i+1)
				s.Success++
				break
			}
		}
		s.N++
	}
	if s.N > 0 {
		s.MRR /= float64(s.N)
		s.Success /= float64(s.N)
	}
	return s, nil
}

// Bleve is the product's ranker over ix.
func Bleve(ix *search.Index) Ranker {
	return func(q string) ([]string, error) {
		res, err := ix.Search(context.Background(), q, 10)
		if err != nil {
			return nil, err
		}
		out := make([]string, len(res.Hits))
		for i, h := range res.Hits {
			out[i] = h.URL
		}
		return out, nil
	}
}

// FTS5 is the baseline: an SQLite FTS5 table of the same pages' title,
// headings and text (porter unicode61), ranked by bm25() with column
// weights. Its query forms and weights are variants (FTS5Variants); the
// evaluation reports the best of them on each corpus, so that the
// baseline is the strongest FTS5 setup on that corpus, not one chosen
// for it beforehand.
type FTS5 struct{ db *sql.DB }

// NewFTS5 builds the baseline's table in dir.
func NewFTS5(dir string, docs []*search.Doc) (*FTS5, error) {
	db, err := sql.Open("sqlite", filepath.Join(dir, "fts.db"))
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec(`CREATE VIRTUAL TABLE pages USING fts5(url UNINDEXED, title, headings, body, tokenize='porter unicode61')`); err != nil {
		db.Close()
		return nil, err
	}
	tx, err := db.Begin()
	if err != nil {
		return nil, err
	}
	st, err := tx.Prepare(`INSERT INTO pages(url, title, headings, body) VALUES(?, ?, ?, ?)`)
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		if _, err := st.Exec(d.URL, d.Title, strings.Join(d.Headings, "\n"), d.Body); err != nil {
			tx.Rollback()
			return nil, err
		}
	}
	st.Close()
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return &FTS5{db: db}, nil
}

// Close closes the table's database.
func (f *FTS5) Close() error { return f.db.Close() }

// FTS5Variant is a query form and column weights of the baseline.
type FTS5Variant struct {
	// Form is how the query's words are matched: "or" (any of them),
	// "and" (all of them, then pages with any to fill the ten), or
	// "phrase" (the words as a phrase, then all, then any).
	Form string
	// Title and Headings weigh their columns in bm25(); the body is 1.
	Title, Headings float64
}

func (v FTS5Variant) String() string {
	return fmt.Sprintf("%s, title %g, headings %g", v.Form, v.Title, v.Headings)
}

// FTS5Variants are the baseline's setups tried on every corpus.
var FTS5Variants = func() []FTS5Variant {
	var vs []FTS5Variant
	for _, form := range []string{"or", "and", "phrase"} {
		for _, title := range []float64{2, 5, 10} {
			for _, heads := range []float64{1, 3} {
				vs = append(vs, FTS5Variant{Form: form, Title: title, Headings: heads})
			}
		}
	}
	return vs
}()

var ftsToken = regexp.MustCompile(`[\p{L}\p{N}_]+`)

// Ranker is the baseline's ranker in variant v. A word joined by _ is
// quoted, so FTS5 matches its parts as a phrase (pg_trigger_depth).
func (f *FTS5) Ranker(v FTS5Variant) Ranker {
	return func(q string) ([]string, error) {
		toks := ftsToken.FindAllString(q, -1)
		if len(toks) == 0 {
			return nil, nil
		}
		for i, t := range toks {
			toks[i] = `"` + t + `"`
		}
		var matches []string
		switch v.Form {
		case "phrase":
			if len(toks) > 1 {
				matches = append(matches, `"`+strings.Join(ftsToken.FindAllString(q, -1), " ")+`"`)
			}
			fallthrough
		case "and":
			if len(toks) > 1 {
				matches = append(matches, strings.Join(toks, " AND "))
			}
		}
		matches = append(matches, strings.Join(toks, " OR "))
		var out []string
		seen := map[string]bool{}
		for _, m := range matches {
			rows, err := f.db.Query(`SELECT url FROM pages WHERE pages MATCH ? ORDER BY bm25(pages, 0.0, ?, ?, 1.0) LIMIT 10`, m, v.Title, v.Headings)
			if err != nil {
				return nil, err
			}
			for rows.Next() {
				var u string
				if err := rows.Scan(&u); err != nil {
					rows.Close()
					return nil, err
				}
				if !seen[u] {
					seen[u] = true
					out = append(out, u)
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return nil, err
			}
			if len(out) >= 10 {
				break
			}
		}
		return out[:min(len(out), 10)], nil
	}
}

// BestSuccess is the highest success@10 of all, whichever variant has it.
func BestSuccess(all map[FTS5Variant]Scores) float64 {
	best := 0.0
	for _, s := range all {
		best = max(best, s.Success)
	}
	return best
}

// Best scores qs with every variant of the baseline and returns the best
// (by MRR@10, then success@10) with its scores, and all the scores.
func (f *FTS5) Best(qs []Query) (FTS5Variant, Scores, map[FTS5Variant]Scores, error) {
	all := map[FTS5Variant]Scores{}
	var best FTS5Variant
	var bestS Scores
	for _, v := range FTS5Variants {
		s, err := Score(qs, f.Ranker(v))
		if err != nil {
			return best, bestS, all, err
		}
		all[v] = s
		if bestS.N == 0 || s.MRR > bestS.MRR || s.MRR == bestS.MRR && s.Success > bestS.Success {
			best, bestS = v, s
		}
	}
	return best, bestS, all, nil
}

// Typo puts one typing error in q's longest word (a letter dropped,
// doubled, or two swapped, by i), or returns "" when q has no word of five
// letters or more.
func Typo(q string, i int) string {
	ws := strings.Fields(q)
	best := -1
	for j, w := range ws {
		if len(w) >= 5 && isLetters(w) && (best < 0 || len(w) > len(ws[best])) {
			best = j
		}
	}
	if best < 0 {
		return ""
	}
	w := ws[best]
	p := 1 + i%(len(w)-2)
	switch i % 3 {
	case 0:
		w = w[:p] + w[p+1:]
	case 1:
		w = w[:p] + w[p:p+1] + w[p:]
	default:
		w = w[:p] + w[p+1:p+2] + w[p:p+1] + w[p+2:]
	}
	if w == ws[best] {
		return ""
	}
	ws[best] = w
	return strings.Join(ws, " ")
}

func isLetters(s string) bool {
	for _, r := range s {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return true
}

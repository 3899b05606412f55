// Package eval measures the search index's ranking against the
// back-of-book index of a documentation package (known-item judgments
// written by the documentation's authors: term → the pages it points to),
// beside SQLite FTS5's bm25() over the same pages' text, in the same run
// (docs/search.md, "Evaluation").
package eval

import (
	"context"
	"database/sql"
	"fmt"
	"html"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

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
	c := &Corpus{Name: name, Root: root}
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() && strings.HasPrefix(d.Name(), "_") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".html") || isIndexPage(rel) {
			return nil
		}
		paths = append(paths, rel)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	docs := make([]*search.Doc, len(paths))
	var wg sync.WaitGroup
	next := make(chan int)
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				b, err := os.ReadFile(filepath.Join(root, paths[i]))
				if err != nil {
					continue
				}
				docs[i] = search.DocOf(search.Page{URL: Base + filepath.ToSlash(paths[i]), ContentType: "text/html", Body: b, Fetched: time.Unix(0, 0)})
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
	c.Queries, err = judgments(root)
	return c, err
}

func isIndexPage(rel string) bool {
	b := filepath.Base(rel)
	return strings.HasPrefix(b, "genindex") || b == "bookindex.html" || b == "search.html" || b == "py-modindex.html"
}

var (
	// Sphinx genindex: <li><a href="library/os.html#os.getcwd">getcwd() (in module os)</a>
	sphinxEntry = regexp.MustCompile(`<li><a href="([^"#]+)[^"]*">([^<]+)</a>`)
	// DocBook bookindex: <dt id="ientry-…">term, <a class="indexterm" href="page.html#…">…</a>, <a …
	docbookEntry = regexp.MustCompile(`<dt id="ientry-[^"]*">([^<,]+),((?:\s*<a class="indexterm" href="[^"]+">[^<]*</a>,?)+)`)
	docbookHref  = regexp.MustCompile(`href="([^"#]+)`)
)

// judgments reads the package's index: Sphinx genindex-*.html or DocBook
// bookindex.html. A term with several entries points to all their pages.
func judgments(root string) ([]Query, error) {
	rel := map[string]map[string]bool{}
	add := func(term, href string) {
		term = queryOf(term)
		if term == "" {
			return
		}
		if rel[term] == nil {
			rel[term] = map[string]bool{}
		}
		rel[term][Base+href] = true
	}
	files, _ := filepath.Glob(filepath.Join(root, "genindex-*.html"))
	if len(files) == 0 {
		// A Sphinx index on one page (python-django-doc).
		files, _ = filepath.Glob(filepath.Join(root, "genindex.html"))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range sphinxEntry.FindAllStringSubmatch(string(b), -1) {
			add(m[2], m[1])
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "bookindex.html")); err == nil {
		for _, m := range docbookEntry.FindAllStringSubmatch(string(b), -1) {
			for _, h := range docbookHref.FindAllStringSubmatch(m[2], -1) {
				add(m[1], h[1])
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

// queryOf is an index term as a query: "getcwd() (in module os)" → "getcwd".
func queryOf(term string) string {
	t := html.UnescapeString(term)
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

// FTS5 is the baseline: an SQLite FTS5 table of the same pages' title and
// text, ranked by bm25() with the title weighted 10 to the body's 1.
type FTS5 struct{ db *sql.DB }

// NewFTS5 builds the baseline's table in dir.
func NewFTS5(dir string, docs []*search.Doc) (*FTS5, error) {
	db, err := sql.Open("sqlite", filepath.Join(dir, "fts.db"))
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec(`CREATE VIRTUAL TABLE pages USING fts5(url UNINDEXED, title, body, tokenize='porter unicode61')`); err != nil {
		db.Close()
		return nil, err
	}
	tx, err := db.Begin()
	if err != nil {
		return nil, err
	}
	st, err := tx.Prepare(`INSERT INTO pages(url, title, body) VALUES(?, ?, ?)`)
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		if _, err := st.Exec(d.URL, d.Title, d.Body); err != nil {
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

var ftsToken = regexp.MustCompile(`[\p{L}\p{N}_]+`)

// Ranker is the baseline's ranker: any of the query's words, by bm25().
func (f *FTS5) Ranker() Ranker {
	return func(q string) ([]string, error) {
		toks := ftsToken.FindAllString(q, -1)
		if len(toks) == 0 {
			return nil, nil
		}
		for i, t := range toks {
			toks[i] = `"` + t + `"`
		}
		rows, err := f.db.Query(`SELECT url FROM pages WHERE pages MATCH ? ORDER BY bm25(pages, 0.0, 10.0, 1.0) LIMIT 10`, strings.Join(toks, " OR "))
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var u string
			if err := rows.Scan(&u); err != nil {
				return nil, err
			}
			out = append(out, u)
		}
		return out, rows.Err()
	}
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

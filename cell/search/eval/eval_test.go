package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/search"
)

// The corpora: Debian documentation packages (apt-get install
// postgresql-doc-15 python-django-doc sphinx-doc python3.11-doc
// python-sqlalchemy-doc python-celery-doc). Tuned on: postgresql and
// django, with sphinx to check each change; held out (aggregate figures
// only, never their failures): python, sqlalchemy, celery.
var corpora = map[string]string{
	"postgresql": "/usr/share/doc/postgresql-doc-15/html",
	"django":     "/usr/share/doc/python-django-doc/html",
	"sphinx":     "/usr/share/doc/sphinx-doc/html",
	"python":     "/usr/share/doc/python3.11/html",
	"sqlalchemy": "/usr/share/doc/python-sqlalchemy-doc/html",
	"celery":     "/usr/share/doc/python-celery-doc/html",
}

func load(t *testing.T, name string) *Corpus {
	t.Helper()
	root := corpora[name]
	if _, err := os.Stat(root); err != nil {
		t.Skipf("%s not installed: %v", root, err)
	}
	start := time.Now()
	c, err := Load(name, root, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d pages, %d index terms, read in %v", name, len(c.Docs), len(c.Queries), time.Since(start).Round(time.Millisecond))
	return c
}

func index(t *testing.T, c *Corpus) *search.Index {
	t.Helper()
	dir := t.TempDir() + "/idx"
	ix, err := search.Open(dir, search.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	start := time.Now()
	for i := 0; i < len(c.Docs); i += 256 {
		if err := ix.Add(c.Docs[i:min(i+256, len(c.Docs))]...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ix.RefreshAnchors(0); err != nil {
		t.Fatal(err)
	}
	ix.UpdateRanks()
	d := time.Since(start)
	t.Logf("%s: indexed %d pages in %v (%.0f pages/s, conversion not counted)", c.Name, len(c.Docs), d.Round(time.Millisecond), float64(len(c.Docs))/d.Seconds())
	var size int64
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if fi, err := e.Info(); err == nil {
				size += fi.Size()
			}
		}
		return nil
	})
	var text int64
	for _, d := range c.Docs {
		text += int64(len(d.Body))
	}
	rss := ""
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmRSS:") {
				rss = strings.TrimSpace(strings.TrimPrefix(l, "VmRSS:"))
			}
		}
	}
	t.Logf("%s: index on disk %.1f MiB for %.1f MiB of page text; process RSS %s (all pages' documents in memory too)", c.Name, float64(size)/(1<<20), float64(text)/(1<<20), rss)
	return ix
}

// TestEvaluation is the ranking evaluation of docs/search.md:
//
//	TRAWL_SEARCH_EVAL=python go test ./cell/search/eval -run TestEvaluation -v
func TestEvaluation(t *testing.T) {
	name := os.Getenv("TRAWL_SEARCH_EVAL")
	if name == "" {
		t.Skip("set TRAWL_SEARCH_EVAL=python (or postgresql) to run the evaluation")
	}
	c := load(t, name)
	qs := Sample(c.Queries, 1000)
	ix := index(t, c)
	if raw := os.Getenv("TRAWL_SEARCH_BOOSTS"); raw != "" {
		// Other boosts than the defaults, as JSON (a look at one factor).
		b := ix.Boosts()
		if err := json.Unmarshal([]byte(raw), &b); err != nil {
			t.Fatal(err)
		}
		ix.SetBoosts(b)
	}
	fts, err := NewFTS5(t.TempDir(), c.Docs)
	if err != nil {
		t.Fatal(err)
	}
	defer fts.Close()
	start := time.Now()
	ours, err := Score(qs, Bleve(ix))
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	bestV, base, all, err := fts.Best(qs)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range FTS5Variants {
		t.Logf("%s FTS5 bm25 (%v): %v", name, v, all[v])
	}
	t.Logf("%s trawl (bleve, boosts %+v): %v, %.2f ms/query", name, ix.Boosts(), ours, float64(took.Microseconds())/1000/float64(len(qs)))
	t.Logf("%s FTS5 bm25, best variant (%v):  %v", name, bestV, base)
	t.Logf("%s trawl − FTS5: MRR@10 %+.3f, success@10 %+.3f (the best success@10 of any variant: %.3f)", name, ours.MRR-base.MRR, ours.Success-base.Success, BestSuccess(all))

	// did_you_mean: the same queries with one typo.
	corrected, n := 0, 0
	for i, q := range qs {
		typo := Typo(strings.ToLower(q.Text), i)
		if typo == "" {
			continue
		}
		n++
		c, err := ix.Correct(context.Background(), typo)
		if err != nil {
			t.Fatal(err)
		}
		if c != nil && c.Query == strings.ToLower(q.Text) {
			corrected++
		}
	}
	if n > 0 {
		t.Logf("%s did_you_mean: %d of %d queries with one typo corrected to the original (%.1f%%)", name, corrected, n, 100*float64(corrected)/float64(n))
	}
}

// TestTune searches the boosts on one corpus (postgresql); the figures
// reported are of the other (TestEvaluation on python).
//
//	TRAWL_SEARCH_TUNE=postgresql go test ./cell/search/eval -run TestTune -v -timeout 30m
func TestTune(t *testing.T) {
	name := os.Getenv("TRAWL_SEARCH_TUNE")
	if name == "" {
		t.Skip("set TRAWL_SEARCH_TUNE=postgresql to tune")
	}
	c := load(t, name)
	qs := Sample(c.Queries, 400)
	ix := index(t, c)
	best, bestB := Scores{}, search.DefaultBoosts
	try := func(b search.Boosts) {
		ix.SetBoosts(b)
		s, err := Score(qs, Bleve(ix))
		if err != nil {
			t.Fatal(err)
		}
		mark := ""
		if s.MRR > best.MRR {
			best, bestB, mark = s, b, " *"
		}
		t.Logf("%+v: %v%s", b, s, mark)
	}
	b := search.DefaultBoosts
	try(b)
	// One field at a time, from the defaults, keeping what helps.
	steps := []struct {
		name string
		vals []float64
		set  func(*search.Boosts, float64)
	}{
		{"title", []float64{0.5, 1, 2}, func(b *search.Boosts, v float64) { b.Title = v }},
		{"headings", []float64{1.5, 3, 5}, func(b *search.Boosts, v float64) { b.Headings = v }},
		{"url", []float64{1.5, 3, 5}, func(b *search.Boosts, v float64) { b.URL = v }},
		{"anchors", []float64{0, 1.5, 3, 5}, func(b *search.Boosts, v float64) { b.Anchors = v }},
		{"phrase", []float64{0, 1, 3}, func(b *search.Boosts, v float64) { b.Phrase = v }},
		{"passage", []float64{1, 4, 8, 16}, func(b *search.Boosts, v float64) { b.Passage = v }},
		{"exact title", []float64{0, 1, 2, 4}, func(b *search.Boosts, v float64) { b.ExactTitle = v }},
		{"candidates", []float64{20, 40, 80}, func(b *search.Boosts, v float64) { b.Candidates = int(v) }},
		{"ident", []float64{0, 2, 5, 10, 20}, func(b *search.Boosts, v float64) { b.Ident = v }},
		{"def", []float64{0, 1, 2, 5, 10}, func(b *search.Boosts, v float64) { b.Def = v }},
		{"defines", []float64{0, 2, 4, 8, 12, 16, 24}, func(b *search.Boosts, v float64) { b.Defines = v }},
		{"authority", []float64{0, 0.5, 1, 2, 4}, func(b *search.Boosts, v float64) { b.Authority = v }},
	}
	only := os.Getenv("TRAWL_SEARCH_TUNE_ONLY") // comma list of step names
	for _, st := range steps {
		if only != "" && !strings.Contains(","+only+",", ","+st.name+",") {
			continue
		}
		for _, v := range st.vals {
			x := bestB
			st.set(&x, v)
			if x != bestB {
				try(x)
			}
		}
	}
	fmt.Printf("best on %s: %+v %v\n", name, bestB, best)
}

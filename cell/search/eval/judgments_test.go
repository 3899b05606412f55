package eval

import (
	"os"
	"path/filepath"
	"testing"
)

// The three index markups judgments reads, each with an entry whose
// sub-entries are qualifiers and one whose sub-entries are pages of their
// own: the query is the top-level term, its pages those of the entry and
// its sub-entries, anchors cut, the page's navigation not read.
func TestJudgmentsMarkups(t *testing.T) {
	pages := map[string]string{
		"sphinx4": `<html><body><ul><li><a href="genindex.html">index</a></li></ul>
<table class="indextable genindextable"><tr><td><ul>
  <li><a href="library/re.html#re.A">A (in module re)</a></li><!-- too short a query -->
  <li><a href="library/aifc.html#index-2">A-LAW</a>, <a href="library/sndhdr.html#index-0">[1]</a></li>
  <li>
    abc
    <ul><li><a href="library/abc.html#module-abc">module</a></li></ul></li>
  <li><a href="c-api/sys.html#index-1">abort()</a>
    <ul><li><a href="library/os.html#os.abort">(in module os)</a></li>
        <li><a href="library/ftplib.html#ftplib.FTP.abort">(ftplib.FTP method)</a></li></ul></li>
</ul></td></tr></table></body></html>`,
		"sphinx1": `<html><body><table class="indextable genindextable"><tr><td><dl>
<dt>
  <a href="core/sqlelement.html#x.__add__">__add__() (sqlalchemy.sql.expression.ColumnOperators method)</a>
</dt>
<dd><dl><dt><a href="orm/internals.html#y.__add__">(sqlalchemy.orm.PropComparator method)</a></dt></dl></dd>
<dt><a href="core/engines.html#create_engine">create_engine() (in module sqlalchemy)</a></dt>
</dl></td></tr></table></body></html>`,
		"docbook": `<html><body><div class="index"><div class="indexdiv" id="indexdiv-A"><h3>A</h3><dl>
<dt id="ientry-1">abbrev, <a class="indexterm" href="functions-net.html">Network Address Functions</a></dt>
<dt id="ientry-2">administration tools</dt><dd><dl><dt>externally maintained, <a class="indexterm" href="external-admin-tools.html">Administration Tools</a></dt></dl></dd>
<dt id="ientry-3">age, <a class="indexterm" href="functions-datetime.html">Date/Time</a>, <a class="indexterm" href="functions-info.html#X">Info</a></dt>
<dt id="ientry-4">VM (see <a href="#ientry-5">Visibility Map</a>)</dt>
</dl></div></div></body></html>`,
	}
	want := map[string]map[string][]string{
		"sphinx4": {"A-LAW": {"library/aifc.html", "library/sndhdr.html"}, "abc": {"library/abc.html"},
			"abort": {"c-api/sys.html", "library/os.html", "library/ftplib.html"}},
		"sphinx1": {"__add__": {"core/sqlelement.html", "orm/internals.html"}, "create_engine": {"core/engines.html"}},
		"docbook": {"abbrev": {"functions-net.html"}, "administration tools": {"external-admin-tools.html"},
			"age": {"functions-datetime.html", "functions-info.html"}},
	}
	for name, page := range pages {
		dir := t.TempDir()
		file := "genindex.html"
		if name == "docbook" {
			file = "bookindex.html"
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
		qs, err := judgments(dir)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]map[string]bool{}
		for _, q := range qs {
			got[q.Text] = q.Relevant
		}
		if len(got) != len(want[name]) {
			t.Errorf("%s: %d terms, want %d: %v", name, len(got), len(want[name]), got)
		}
		for term, ps := range want[name] {
			r := got[term]
			if len(r) != len(ps) {
				t.Errorf("%s: %q → %v, want %v", name, term, r, ps)
				continue
			}
			for _, p := range ps {
				if !r[Base+p] {
					t.Errorf("%s: %q → %v, want %v", name, term, r, ps)
				}
			}
		}
	}
}

// TestJudgmentsCount prints how many judgments each installed corpus
// gives, and their relevant pages on average (a look at the index's
// reading, not at the ranking):
//
//	go test ./cell/search/eval -run TestJudgmentsCount -v
func TestJudgmentsCount(t *testing.T) {
	for _, name := range []string{"postgresql", "django", "sphinx", "python", "sqlalchemy", "celery"} {
		root := corpora[name]
		if _, err := os.Stat(root); err != nil {
			continue
		}
		qs, err := judgments(root)
		if err != nil {
			t.Fatal(err)
		}
		pages := 0
		for _, q := range qs {
			pages += len(q.Relevant)
		}
		if len(qs) < 100 {
			t.Errorf("%s: %d judgments: the index was not read", name, len(qs))
			continue
		}
		t.Logf("%s: %d terms, %.2f relevant pages a term", name, len(qs), float64(pages)/float64(len(qs)))
	}
}

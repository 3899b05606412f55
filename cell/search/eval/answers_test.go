package eval

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/search"
	"github.com/trawlhq/trawl/internal/searchapi"
)

func init() {
	// Held out for answers with python: never tuned on, failures never
	// looked at (apt-get install python-sqlalchemy-doc python-celery-doc
	// sphinx-doc).
	corpora["sqlalchemy"] = "/usr/share/doc/python-sqlalchemy-doc/html"
	corpora["celery"] = "/usr/share/doc/python-celery-doc/html"
	corpora["sphinx"] = "/usr/share/doc/sphinx-doc/html"
}

// unanswerableFrom names the corpus whose entries make a corpus's
// unanswerable questions (names it never mentions).
var unanswerableFrom = map[string]string{
	"python":     "postgresql",
	"sqlalchemy": "django",
	"celery":     "django",
	"sphinx":     "django",
	"django":     "postgresql",
	"postgresql": "django",
}

// tunedOn are the corpora the answer was tuned on: only their failures
// may be shown (TRAWL_SEARCH_ANSWERS_SHOW=1).
var tunedOn = map[string]bool{"django": true, "postgresql": true}

// answerSet is a corpus's questions: n answerable, u unanswerable.
func answerSet(t *testing.T, name string, c *Corpus, n, u int) []Question {
	t.Helper()
	es, err := Entries(corpora[name])
	if err != nil {
		t.Fatal(err)
	}
	qs := Questions(es, n)
	if other := unanswerableFrom[name]; other != "" {
		if _, err := os.Stat(corpora[other]); err != nil {
			t.Logf("%s not installed: no unanswerable questions on %s", corpora[other], name)
		} else {
			oes, err := Entries(corpora[other])
			if err != nil {
				t.Fatal(err)
			}
			bodies := make([]string, len(c.Docs))
			for i, d := range c.Docs {
				bodies[i] = d.Title + "\n" + d.Body
			}
			qs = append(qs, Unanswerable(oes, bodies, u)...)
		}
	}
	t.Logf("%s: %d described names, %d questions", name, len(es), len(qs))
	return qs
}

// quoted is the quoted answer's own text and its page ("", "" for none):
// the answer is “text” — title (url).
func quoted(a *searchapi.Answer) (string, string) {
	if a == nil {
		return "", ""
	}
	text := strings.TrimPrefix(a.Text, "“")
	if i := strings.LastIndex(text, "” — "); i >= 0 {
		text = text[:i]
	}
	url := ""
	if len(a.Sources) > 0 {
		url = a.Sources[0].URL
	}
	return text, url
}

// ask answers qs as GET /answer does without a model on one cell: the
// cell's passages (search.Passages), the gate's choice among them
// (searchapi.Quote); and, beside it, as it did before definitions (the
// proximity rule: search.ProximityPassages).
func ask(t *testing.T, ix *search.Index, qs []Question, show bool) (now, before Tally) {
	t.Helper()
	for _, q := range qs {
		res, err := ix.Search(context.Background(), q.Text, 10)
		if err != nil {
			t.Fatal(err)
		}
		btext, burl := quoted(searchapi.Quote(search.ProximityPassages(res.Hits)))
		before.Add(q, Judge(q, btext, burl))
		text, url := quoted(searchapi.Quote(search.Passages(q.Text, res.Hits)))
		v := Judge(q, text, url)
		now.Add(q, v)
		// Whether a quote could come from the describing page at all.
		for i := range min(3, len(res.Hits)) {
			if q.URL != "" && res.Hits[i].URL == q.URL {
				now.InTop3++
				before.InTop3++
			}
		}
		if show && (v == Wrong || v == Abstained && q.URL != "") {
			want := ""
			if len(q.Sentences) > 0 {
				want = q.Sentences[0]
			}
			t.Logf("%v %q (%s)\n\tgot  %q %s\n\twant %q", map[Verdict]string{Wrong: "WRONG", Abstained: "ABSTAINED"}[v], q.Text, q.URL, text, url, want)
		}
	}
	return now, before
}

// TestAnswers measures the quoted answer (no model) on questions made
// from the corpora's API entries (docs/search.md, "Answer"):
//
//	TRAWL_SEARCH_ANSWERS=django,postgresql go test ./cell/search/eval -run TestAnswers -v -timeout 30m
//	TRAWL_SEARCH_ANSWERS=python,sqlalchemy,celery,sphinx go test ./cell/search/eval -run TestAnswers -v -timeout 30m
//
// TRAWL_SEARCH_ANSWERS_SHOW=1 lists the failures, on the tuning corpora
// (django, postgresql) only: the others are held out.
func TestAnswers(t *testing.T) {
	list := os.Getenv("TRAWL_SEARCH_ANSWERS")
	if list == "" {
		t.Skip("set TRAWL_SEARCH_ANSWERS=django,postgresql (tuning) or python,sqlalchemy,celery,sphinx (held out)")
	}
	for name := range strings.SplitSeq(list, ",") {
		if corpora[name] == "" {
			t.Fatalf("no corpus %q", name)
		}
		t.Run(name, func(t *testing.T) {
			c := load(t, name)
			qs := answerSet(t, name, c, 200, 50)
			ix := index(t, c)
			start := time.Now()
			now, before := ask(t, ix, qs, tunedOn[name] && os.Getenv("TRAWL_SEARCH_ANSWERS_SHOW") == "1")
			t.Logf("%s answers (%.1f ms/question, both rules):\n\tdefinitions: %v\n\tproximity (before): %v", name, float64(time.Since(start).Microseconds())/1000/float64(len(qs)), now, before)
		})
	}
}

// Floors of the model-less answer on python3.11-doc (held out: never
// tuned on), a little below what docs/search.md reports, so that a
// regression fails make test.
const (
	floorPrecision = 0.85
	floorCoverage  = 0.35
	floorFalse     = 0.05 // false answers on unanswerable questions, at most
)

// TestAnswerFloor asks 120 questions on python3.11-doc (and 30 about
// postgresql-doc-15's names it never mentions, when that is installed)
// and fails below the floors.
func TestAnswerFloor(t *testing.T) {
	if raceEnabled {
		// Converting 500 pages under the race detector takes minutes;
		// make test runs this test a second time without -race.
		t.Skip("answer floors measured without the race detector (make test runs it so)")
	}
	if _, err := os.Stat(corpora["python"]); err != nil {
		t.Skipf("python3.11-doc is not installed (%v): bash scripts/deps.sh test installs it", err)
	}
	c := load(t, "python")
	qs := answerSet(t, "python", c, 120, 30)
	ix := index(t, c)
	now, before := ask(t, ix, qs, false)
	t.Logf("python answers:\n\tdefinitions: %v\n\tproximity (before): %v", now, before)
	if now.Answerable < 100 {
		t.Fatalf("only %d answerable questions made from python3.11-doc", now.Answerable)
	}
	if p := now.Precision(); p < floorPrecision {
		t.Errorf("precision %.3f, floor %.2f", p, floorPrecision)
	}
	if c := now.Coverage(); c < floorCoverage {
		t.Errorf("coverage %.3f, floor %.2f", c, floorCoverage)
	}
	if now.Unanswerable > 0 {
		if f := float64(now.FalseAnswers) / float64(now.Unanswerable); f > floorFalse {
			t.Errorf("false answers on %.3f of unanswerable questions, at most %.2f", f, floorFalse)
		}
	}
}

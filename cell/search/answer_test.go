package search

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/internal/searchapi"
)

// quote asks ix as GET /answer does without a model on one cell: the
// cell's passages, the gate's choice (searchapi.Quote); proximity is the
// rule before definitions, for the fixtures to show what they guard.
func quote(t *testing.T, ix *Index, q string) (now, proximity *searchapi.Answer) {
	t.Helper()
	res, err := ix.Search(context.Background(), q, 10)
	if err != nil {
		t.Fatal(err)
	}
	return searchapi.Quote(Passages(q, res.Hits)), searchapi.Quote(ProximityPassages(res.Hits))
}

// quotes reports whether a is the quoted answer text from url.
func quotes(a *searchapi.Answer, text, url string) bool {
	return a != nil && strings.HasPrefix(a.Text, "“"+text+"” — ") && len(a.Sources) == 1 && a.Sources[0].URL == url
}

func TestAnswerQuotesTheDefinitionNotAMention(t *testing.T) {
	ix := testIndex(t,
		md("http://d/os", "os — Miscellaneous operating system interfaces",
			"# os — Miscellaneous operating system interfaces\n\nos.chdir(path)\n\nChange the current working directory to path.\n\n"+
				"os.getcwd()\n\nReturn a string representing the current working directory.\n\nos.getcwdb()\n\nReturn a bytestring representing the current working directory.\n"),
		md("http://d/tutorial", "Scripts and the working directory",
			"# Scripts\n\nWhat does os.getcwd do in a script? The os.getcwd call does what its name says: os.getcwd gives the directory, and os.getcwd is cheap.\n"),
	)
	a, _ := quote(t, ix, "what does os.getcwd do")
	if !quotes(a, "Return a string representing the current working directory.", "http://d/os") {
		t.Errorf("answer: %+v", a)
	}
	// Asked by its last part alone, the entry is still the answer.
	if a, _ := quote(t, ix, "what is getcwdb used for?"); !quotes(a, "Return a bytestring representing the current working directory.", "http://d/os") {
		t.Errorf("answer by the short name: %+v", a)
	}
}

func TestAnswerNotFromAPageThatOnlyMentionsTheName(t *testing.T) {
	docs := []*Doc{md("http://d/heapq", "heapq — Heap queue algorithm",
		"# heapq — Heap queue algorithm\n\nheapq.merge(*iterables)\n\nMerge sorted inputs into a single sorted output, like itertools chain but sorted; what itertools chain does, returns an iterator.\n")}
	for i := range 5 {
		docs = append(docs, md(fmt.Sprintf("http://d/howto%d", i), fmt.Sprintf("How-to %d", i),
			fmt.Sprintf("# How-to %d\n\nWhat itertools chain does here, in recipe %d, is chain the lists.\n", i, i)))
	}
	ix := testIndex(t, docs...)
	q := "what does itertools.chain do"
	now, before := quote(t, ix, q)
	if before == nil {
		t.Fatal("the fixture no longer tempts the proximity rule")
	}
	if now != nil {
		t.Errorf("answered from a page that does not define itertools.chain: %+v", now)
	}
	// No passage a cell sends may be quotable: the gate quotes from the
	// merged results' first three, where this cell's sixth may be.
	res, err := ix.Search(context.Background(), q, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) < 4 {
		t.Fatalf("only %d hits", len(res.Hits))
	}
	for _, p := range Passages(q, res.Hits) {
		if p.Score >= searchapi.Confident {
			t.Errorf("rank %d passage quotable: %+v", p.Rank, p)
		}
	}
}

func TestAnswerFunctionTableRowNotHeaderRun(t *testing.T) {
	ix := testIndex(t,
		md("http://d/string", "String Functions",
			"# String Functions\n\n| Function Description Example(s) | | |\n|---|---|---|\n"+
				"| btrim ( string text , characters text ) → text | Removes the longest string containing only characters in characters from the start and end of string. | btrim('xyxtrimyyx', 'xyz') → trim |\n"+
				"| make_date ( year int , month int , day int ) → date | Create date from year, month and day fields (negative years signify BC) | make_date(2013, 7, 15) → 2013-07-15 |\n"+
				"| lower ( text ) → text | Converts the string to all lower case. | lower('TOM') → tom |\n"),
	)
	for q, want := range map[string]string{
		"what does btrim do":          "Removes the longest string containing only characters in characters from the start and end of string.",
		"what is make_date used for?": "Create date from year, month and day fields (negative years signify BC)",
	} {
		if a, _ := quote(t, ix, q); !quotes(a, want, "http://d/string") {
			t.Errorf("%q: %+v", q, a)
		}
	}
}

func TestAnswerEntryUnderItsClass(t *testing.T) {
	ix := testIndex(t,
		md("http://d/querysets", "QuerySet API reference",
			"# QuerySet API reference\n\nclass QuerySet(model=None)\n\nfilter(*args, **kwargs)\n\nReturns a new QuerySet containing objects that match the given lookup parameters.\n\n"+
				"class Manager\n\nfilter(*args)\n\nA manager's filter passes its arguments on to the queryset it makes.\n"),
	)
	if a, _ := quote(t, ix, "what does QuerySet.filter do"); !quotes(a, "Returns a new QuerySet containing objects that match the given lookup parameters.", "http://d/querysets") {
		t.Errorf("QuerySet.filter: %+v", a)
	}
	if a, _ := quote(t, ix, "what does Manager.filter do"); !quotes(a, "A manager's filter passes its arguments on to the queryset it makes.", "http://d/querysets") {
		t.Errorf("Manager.filter: %+v", a)
	}
	// A class the page has no entry under: no answer from another's.
	if a, _ := quote(t, ix, "what does Storage.filter do"); a != nil {
		t.Errorf("Storage.filter answered: %+v", a)
	}
}

func TestAnswerOtherQuestionsQuoteProseOnly(t *testing.T) {
	ix := testIndex(t,
		md("http://d/files", "Reading files",
			"# Reading files\n\n```python\nwith open('notes.txt') as f:\n    for line in f:  # read a file line by line\n        print(line)\n```\n\n"+
				"To read a file line by line, loop over the file object: each line comes with its newline.\n"),
		md("http://d/regions", "Regions",
			"# Regions\n\n| Server | Region | Pick |\n|---|---|---|\n| alpha | eu | yes |\n\nEach account starts in one region.\n"),
	)
	if a, _ := quote(t, ix, "how to read a file line by line"); !quotes(a, "To read a file line by line, loop over the file object: each line comes with its newline.", "http://d/files") {
		t.Errorf("read a file: %+v", a)
	}
	now, before := quote(t, ix, "server region pick")
	if before == nil {
		t.Fatal("the fixture no longer tempts the proximity rule with its table header")
	}
	if now != nil {
		t.Errorf("quoted a table: %+v", now)
	}
}

func TestFirstSentences(t *testing.T) {
	for in, want := range map[string]string{
		"Join one or more path segments, e.g. os.path.join. The return value is a string.":   "Join one or more path segments, e.g. os.path.join.",
		"Set the count to control whether the full count is shown (e.g. 99 results). Other.": "Set the count to control whether the full count is shown (e.g. 99 results).",
		"Cascade deletes. Django emulates the behavior of ON DELETE CASCADE. More.":          "Cascade deletes. Django emulates the behavior of ON DELETE CASCADE.",
		"Releases all locks held by the session. (This is implicit at session end.)":         "Releases all locks held by the session.",
	} {
		if got := firstSentences(in); got != want {
			t.Errorf("firstSentences(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAskedName(t *testing.T) {
	for q, want := range map[string]string{
		"what does os.getcwd do":                     "os.getcwd",
		"What is QuerySet.filter() used for?":        "queryset.filter",
		"what is work_mem":                           "work_mem",
		"define the QuerySet class":                  "queryset",
		"what is the capital of france":              "capital+of+france",
		"how to read a file line by line":            "",
		"what is the best way to write a long query": "",
		"what does getcwd return":                    "getcwd",
		// What the words do, not what a name is: the proximity rule's.
		"what do magma chambers feed": "",
	} {
		got := ""
		if n := askedName(q); n != nil {
			got = n.key
		}
		if got != want {
			t.Errorf("askedName(%q) = %q, want %q", q, got, want)
		}
	}
}

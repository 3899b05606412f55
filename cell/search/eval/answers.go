package eval

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/PuerkitoBio/goquery"
)

// A Question asks what a documented name does; its answer is the
// documentation's own description of the name (docs/search.md, "Answer").
type Question struct {
	Text string
	// Name is the name the question asks about, as the question has it.
	Name string
	// URL is the page that describes the name; "" for a question the
	// corpus cannot answer (the right answer is none).
	URL string
	// Sentences are the description's sentences, as words (Norm), first
	// the one that answers; a quoted answer holding any of them is right.
	Sentences []string
}

// Entry is one described name of a page: an API entry of Sphinx (<dl
// class="py function">…) or a function table row or configuration
// parameter of DocBook.
type Entry struct {
	ID, Kind, URL string
	Desc          string // the description's first paragraphs, plain text
}

// Entries reads the described names of every page of root (the pages
// Load reads), in path order.
func Entries(root string) ([]Entry, error) {
	paths, err := pagePaths(root)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, rel := range paths {
		b, err := readPage(filepath.Join(root, rel))
		if err != nil {
			return nil, err
		}
		doc, err := goquery.NewDocumentFromReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rel, err)
		}
		out = append(out, pageEntries(doc, pageURL(rel))...)
	}
	return out, nil
}

// sphinxKinds are the Sphinx API entries asked about.
var sphinxKinds = []string{"function", "method", "class", "exception", "attribute", "data", "property", "classmethod", "staticmethod"}

func pageEntries(doc *goquery.Document, url string) []Entry {
	var out []Entry
	for _, kind := range sphinxKinds {
		doc.Find("dl.py." + kind).Each(func(_ int, dl *goquery.Selection) {
			dt := dl.ChildrenFiltered("dt").First()
			id, _ := dt.Attr("id")
			if id == "" {
				return
			}
			out = append(out, Entry{ID: id, Kind: kind, URL: url, Desc: paragraphs(dl.ChildrenFiltered("dd").First().ChildrenFiltered("p"))})
		})
	}
	// DocBook function tables: a signature paragraph, then the
	// description's, then examples (which hold "→").
	doc.Find("td.func_table_entry").Each(func(_ int, td *goquery.Selection) {
		sig := td.ChildrenFiltered("p.func_signature").First()
		name := strings.TrimSpace(sig.Find("code.function").First().Text())
		if name == "" {
			return
		}
		desc := td.ChildrenFiltered("p").FilterFunction(func(_ int, p *goquery.Selection) bool {
			return !p.HasClass("func_signature") && !strings.Contains(p.Text(), "→")
		})
		out = append(out, Entry{ID: name, Kind: "function", URL: url, Desc: paragraphs(desc)})
	})
	// DocBook configuration parameters: <dt id="GUC-…"><code class="varname">.
	doc.Find(`dt[id^="GUC-"]`).Each(func(_ int, dt *goquery.Selection) {
		name := strings.TrimSpace(dt.Find("code.varname").First().Text())
		if name == "" {
			return
		}
		out = append(out, Entry{ID: name, Kind: "data", URL: url, Desc: paragraphs(dt.Next().Filter("dd").ChildrenFiltered("p"))})
	})
	return out
}

// paragraphs is the text of the first two paragraphs of ps, its white
// space collapsed, joined by a line end (a sentence ends there).
func paragraphs(ps *goquery.Selection) string {
	var parts []string
	ps.EachWithBreak(func(i int, p *goquery.Selection) bool {
		parts = append(parts, strings.Join(strings.Fields(p.Text()), " "))
		return i < 1
	})
	return strings.Join(parts, "\n")
}

// Norm is a text as its lower-cased words (letters and digits) joined by
// single spaces: what a quoted answer and a description are compared as,
// whatever markup or punctuation the page's conversion kept.
func Norm(s string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}), " ")
}

// descSentences are a description's sentences (each paragraph apart) as
// Norm has them, those of four words or more ("Availability: Unix." says
// nothing of the name). The cut is a full stop, question or exclamation
// mark before white space and a letter or digit, or an opening
// parenthesis or quote before one (a sentence may start with a
// lower-case identifier: "fieldsets is a list …"), but not after
// "e.g.", "i.e.", "etc." or "vs.": generous to a quote, which must hold
// a whole sentence.
func descSentences(desc string) []string {
	var out []string
	add := func(s string) {
		if n := Norm(s); len(strings.Fields(n)) >= 4 {
			out = append(out, n)
		}
	}
	for p := range strings.SplitSeq(desc, "\n") {
		sentencesOf(p, add)
	}
	return out
}

// sentencesOf calls add with each sentence of a paragraph.
func sentencesOf(desc string, add func(string)) {
	start := 0
	for i := 0; i+2 < len(desc); i++ {
		next, _ := utf8.DecodeRuneInString(strings.TrimLeft(desc[i+2:], "(\"'“"))
		if (desc[i] == '.' || desc[i] == '?' || desc[i] == '!') && desc[i+1] == ' ' && (unicode.IsLetter(next) || unicode.IsDigit(next)) {
			w := strings.ToLower(desc[strings.LastIndexByte(desc[:i+1], ' ')+1 : i+1])
			if w = strings.TrimLeft(w, "(\"'"); w == "e.g." || w == "i.e." || w == "etc." || w == "vs." {
				continue
			}
			add(desc[start : i+1])
			start = i + 2
		}
	}
	add(desc[start:])
}

// displayName is how a user would write an Entry's name: a long dotted
// id by its last two parts ("django.db.models.query.QuerySet.filter" →
// "QuerySet.filter"), a short one whole ("os.path.join").
func displayName(id string) string {
	parts := strings.Split(id, ".")
	if len(parts) > 3 {
		return strings.Join(parts[len(parts)-2:], ".")
	}
	return id
}

// askable: an Entry a question is made of has a name of three letters
// or more that is not a dunder or private, and a first sentence.
func askable(e Entry) bool {
	last := e.ID[strings.LastIndexByte(e.ID, '.')+1:]
	return len(last) >= 3 && !strings.HasPrefix(last, "_") && len(descSentences(e.Desc)) > 0
}

// question writes the i-th question about name of an Entry of kind:
// templates a user types, holding nothing of the answer but the name.
func question(name, kind string, i int) string {
	switch kind {
	case "function", "method", "classmethod", "staticmethod":
		if i%2 == 0 {
			return "what does " + name + " do"
		}
		return "what is " + name + " used for"
	default:
		if i%2 == 0 {
			return "what is " + name
		}
		return "what is " + name + " for"
	}
}

// Questions are up to n questions about the entries of a corpus, taken
// evenly in path order: one about each name described once (an
// overloaded or repeated name has no single answer sentence). Every
// third asks by the name's last part alone when no other Entry ends so.
func Questions(entries []Entry, n int) []Question {
	count := map[string]int{}
	lastCount := map[string]int{}
	for _, e := range entries {
		count[e.ID]++
		lastCount[lastPart(e.ID)]++
	}
	var pool []Entry
	for _, e := range entries {
		if count[e.ID] == 1 && askable(e) {
			pool = append(pool, e)
		}
	}
	var out []Question
	for i, k := range sampleIndexes(len(pool), n) {
		e := pool[k]
		name := displayName(e.ID)
		if last := lastPart(e.ID); i%3 == 2 && last != name && lastCount[last] == 1 && len(last) >= 5 {
			name = last
		}
		out = append(out, Question{Text: question(name, e.Kind, i), Name: name, URL: e.URL, Sentences: descSentences(e.Desc)})
	}
	return out
}

// Unanswerable are up to n questions about names of another corpus's
// entries (other) that this corpus's pages (bodies) never mention: the
// right answer to each is none.
func Unanswerable(other []Entry, bodies []string, n int) []Question {
	var text strings.Builder
	for _, b := range bodies {
		text.WriteString(strings.ToLower(b))
		text.WriteByte('\n')
	}
	all := text.String()
	seen := map[string]bool{}
	var pool []Entry
	for _, e := range other {
		name := displayName(e.ID)
		if !askable(e) || seen[name] || len(name) < 6 || strings.Contains(all, strings.ToLower(name)) {
			continue
		}
		seen[name] = true
		pool = append(pool, e)
	}
	var out []Question
	for i, k := range sampleIndexes(len(pool), n) {
		name := displayName(pool[k].ID)
		out = append(out, Question{Text: question(name, pool[k].Kind, i), Name: name})
	}
	return out
}

func lastPart(id string) string { return id[strings.LastIndexByte(id, '.')+1:] }

// sampleIndexes are n indexes of [0, total) taken evenly (all when
// total <= n).
func sampleIndexes(total, n int) []int {
	var out []int
	if total <= n {
		for i := range total {
			out = append(out, i)
		}
		return out
	}
	k := float64(total) / float64(n)
	for i := 0; i < n; i++ {
		out = append(out, int(float64(i)*k))
	}
	return out
}

// Verdict is how a quoted answer (its text, "" when none) does on q.
type Verdict int

const (
	Abstained Verdict = iota
	Right
	Wrong
)

// Judge: right when the answer quotes q's page and holds a whole
// sentence of the description (the quote's words as Norm has them);
// wrong for any other answer, and for any answer to an unanswerable
// question.
func Judge(q Question, text, url string) Verdict {
	if text == "" {
		return Abstained
	}
	if q.URL == "" || url != q.URL {
		return Wrong
	}
	n := " " + Norm(text) + " "
	for _, s := range q.Sentences {
		if strings.Contains(n, " "+s+" ") {
			return Right
		}
	}
	return Wrong
}

// Tally counts verdicts.
type Tally struct {
	Answerable, Right, Wrong, Abstained int
	Unanswerable, FalseAnswers          int
	// InTop3 counts the answerable questions whose describing page is
	// among the first three results (those a quote may come from): the
	// most any rule can get right, as ranking stands.
	InTop3 int
}

// Add counts v on q.
func (t *Tally) Add(q Question, v Verdict) {
	if q.URL == "" {
		t.Unanswerable++
		if v != Abstained {
			t.FalseAnswers++
		}
		return
	}
	t.Answerable++
	switch v {
	case Right:
		t.Right++
	case Wrong:
		t.Wrong++
	default:
		t.Abstained++
	}
}

// Precision is right/(right+wrong) on the answerable questions.
func (t Tally) Precision() float64 {
	if t.Right+t.Wrong == 0 {
		return 0
	}
	return float64(t.Right) / float64(t.Right+t.Wrong)
}

// Coverage is answered/answerable.
func (t Tally) Coverage() float64 {
	if t.Answerable == 0 {
		return 0
	}
	return float64(t.Right+t.Wrong) / float64(t.Answerable)
}

func (t Tally) String() string {
	return fmt.Sprintf("answerable %d (describing page in the top 3: %d): right %d, wrong %d, abstained %d (precision %.3f, coverage %.3f); unanswerable %d: false answers %d",
		t.Answerable, t.InTop3, t.Right, t.Wrong, t.Abstained, t.Precision(), t.Coverage(), t.Unanswerable, t.FalseAnswers)
}

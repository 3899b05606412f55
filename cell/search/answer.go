package search

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/trawlhq/trawl/internal/searchapi"
)

// How a cell offers passages for GET /answer: the gate quotes the best
// one without a model when its score is searchapi.Confident or more
// (searchapi.Quote), and gives the best five to the operator's model
// otherwise (docs/search.md, "Answer").
//
// A question that asks what a name is or does ("what does os.getcwd
// do", "what is work_mem") is answered only by the page that describes
// the name: the sentence after the line that defines it (a Sphinx API
// entry, a glossary term, a DocBook variable or function table row). A
// passage that merely holds the name's words is not an answer to it:
// pages that call or mention a function outnumber the one that says what
// it does. Other questions keep the proximity rule (every meaningful
// word close together) on the page's prose only: never a table row, a
// heading or a line of code.

// Scores of a passage that answers a question about a name: a line that
// defines the name whole, one that defines it under the asked qualifier
// (class), one whose last part is the name asked without a qualifier,
// one whose last part is the name asked with a qualifier (a module, a
// class) the page names elsewhere, and a page titled by the name. All are above searchapi.Confident; a
// better kind wins over a better place in the results.
const (
	scoreDefExact = 1.0
	scoreDefClass = 0.97
	scoreDefShort = 0.95
	scoreDefQual  = 0.93
	scoreDefTitle = 0.9
	// notConfident is the most a passage that must not be quoted keeps
	// (it is still offered to a model, in its order).
	notConfident = searchapi.Confident - 0.01
)

// Passages are the passages of the results hits for the question q,
// best first: for each hit, the description of the name q asks about
// when the page defines it, else its best passage, scored so that only
// an answer clears searchapi.Confident.
func Passages(q string, hits []Hit) []searchapi.Passage {
	name := askedName(q)
	terms := searchapi.QueryTerms(q)
	var out []searchapi.Passage
	for i, h := range hits {
		p := searchapi.Passage{Title: h.Title, URL: h.URL, Text: h.passage.text, Score: h.passage.score, Rank: i}
		// Every hit, not only a cell's first three: the gate quotes from
		// the first three of the merged results, where a cell's fifth
		// may be second.
		if h.doc != nil {
			switch {
			case name != nil:
				if text, score := name.definition(h.doc); text != "" {
					p.Text, p.Score = text, score
				} else {
					p.Score = min(p.Score, notConfident)
				}
			case p.Score >= searchapi.Confident:
				// The same rule on the page's prose alone.
				pp := newMatcher(terms).bestPassage(proseOnly(h.doc.Body))
				if pp.score >= searchapi.Confident {
					p.Text, p.Score = pp.text, pp.score
				} else {
					p.Score = min(p.Score, notConfident)
				}
			}
		}
		if p.Text == "" {
			continue
		}
		out = append(out, p)
	}
	searchapi.SortPassages(out)
	return out
}

// ProximityPassages are the hits' best passages by the proximity rule
// alone, best first: the passages ranking scored, which were the
// model-less answer's before definitions (the answer evaluation's
// baseline, cell/search/eval).
func ProximityPassages(hits []Hit) []searchapi.Passage {
	var out []searchapi.Passage
	for i, h := range hits {
		if h.passage.text != "" {
			out = append(out, searchapi.Passage{Title: h.Title, URL: h.URL, Text: h.passage.text, Score: h.passage.score, Rank: i})
		}
	}
	searchapi.SortPassages(out)
	return out
}

// name is what a question asks about: "os.getcwd", "QuerySet.filter",
// "work_mem", "capital of france".
type name struct {
	key  string // as defKey has it: "queryset.filter", "capital+of+france"
	last string // the last dotted part: "filter"
	qual string // the part before it: "queryset" ("" when none)
	// class: the qualifier is a class ("QuerySet"), which the entry
	// must be under, not a module ("gdal"), which the page must name.
	class bool
}

// Words that frame a question about a name, before and after it.
var (
	askLead  = map[string]bool{"what": true, "what's": true, "whats": true, "does": true, "do": true, "is": true, "are": true, "the": true, "a": true, "an": true, "define": true, "explain": true, "describe": true, "meaning": true, "of": true}
	askTrail = map[string]bool{"do": true, "does": true, "return": true, "returns": true, "mean": true, "means": true, "for": true, "used": true, "use": true, "work": true, "works": true}
	// askKind are words naming what kind of name it is ("the QuerySet
	// class").
	askKind = map[string]bool{"function": true, "method": true, "class": true, "attribute": true, "parameter": true, "setting": true, "module": true, "command": true, "option": true, "exception": true, "property": true, "variable": true}
)

// askedName is the name a question asks to be defined ("what does X do",
// "what is X", "what is X used for", "define X"), nil for a question of
// another form or about more than three words.
func askedName(q string) *name {
	ws := strings.Fields(strings.ToLower(strings.TrimRight(strings.TrimSpace(q), "?!. ")))
	if len(ws) < 2 || !(ws[0] == "what" || ws[0] == "what's" || ws[0] == "whats" || ws[0] == "define" || ws[0] == "explain") {
		return nil
	}
	aux := false // "what does …": then the question ends with its verb
	for len(ws) > 0 && askLead[ws[0]] {
		aux = aux || ws[0] == "do" || ws[0] == "does"
		ws = ws[1:]
	}
	trailed := false
	for len(ws) > 0 && askTrail[ws[len(ws)-1]] {
		ws = ws[:len(ws)-1]
		trailed = true
	}
	if aux && !trailed {
		// "what do magma chambers feed" asks about what the words do,
		// not what a name is ("what does getcwd do", "… return").
		return nil
	}
	if len(ws) > 1 && askKind[ws[len(ws)-1]] {
		ws = ws[:len(ws)-1]
	} else if len(ws) > 1 && askKind[ws[0]] {
		ws = ws[1:]
	}
	if len(ws) == 0 || len(ws) > 3 {
		return nil
	}
	for i, w := range ws {
		ws[i] = strings.TrimSuffix(strings.Trim(w, "`'\"“”"), "()")
	}
	key := defKey(strings.Join(ws, " "))
	if key == "" {
		return nil
	}
	n := &name{key: key, last: key}
	if i := strings.LastIndexByte(key, '.'); i > 0 && !strings.Contains(key, "+") {
		n.qual, n.last = key[:i], key[i+1:]
		if j := strings.LastIndexByte(n.qual, '.'); j >= 0 {
			n.qual = n.qual[j+1:]
		}
		// A qualifier in CapWords is a class (Python's convention).
		if lq := strings.ToLower(q); len(lq) == len(q) {
			if at := strings.Index(lq, n.qual+"."+n.last); at >= 0 {
				n.class = unicode.IsUpper(rune(q[at]))
			}
		}
	}
	return n
}

// definition is the description of n on d's page and how surely it is
// n's: the prose after the line that defines n, or on a table row that
// does, or the first prose of a page titled n; "" when d defines no such
// name.
func (n *name) definition(d *Doc) (string, float64) {
	bestText, best := "", 0.0
	lines := strings.Split(d.Body, "\n")
	class := ""      // the last part of the class the lines are under
	qualOnPage := -1 // whether the page names n.qual: unknown yet
	for i, line := range lines {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "class ") {
			if k := defKey(defName(line)); k != "" {
				class = k[strings.LastIndexByte(k, '.')+1:]
			}
		}
		if indexASCIIFold(line, n.last) < 0 {
			continue
		}
		k := defKey(defName(line))
		if k == "" {
			continue
		}
		score := 0.0
		last := k[strings.LastIndexByte(k, '.')+1:]
		switch {
		case k == n.key || strings.HasSuffix(k, "."+n.key):
			score = scoreDefExact
		case last != n.last:
		case n.qual != "" && n.qual == class:
			score = scoreDefClass
		case n.qual == "":
			score = scoreDefShort
		case !n.class:
			if qualOnPage < 0 {
				qualOnPage = 0
				if hasWord(d.Title, n.qual) || hasWord(d.Body, n.qual) {
					qualOnPage = 1
				}
			}
			if qualOnPage == 1 {
				score = scoreDefQual
			}
		}
		if score <= best {
			continue
		}
		if n.inList(line, lines[:i]) {
			continue
		}
		if text := n.describedAfter(line, lines[i+1:]); text != "" {
			bestText, best = text, score
			if best == scoreDefExact {
				break
			}
		}
	}
	if bestText == "" {
		if t := defKey(strings.TrimSpace(d.Title)); t == n.key || strings.HasPrefix(t, n.key+"+") {
			for _, line := range lines {
				if isProse(line) {
					return firstSentences(strings.TrimSpace(line)), scoreDefTitle
				}
			}
		}
	}
	return bestText, best
}

// hasWord reports whether s holds w (lower case) in any case as a word
// of its own or a part of a dotted name.
func hasWord(s, w string) bool {
	for from := 0; from < len(s); {
		i := indexASCIIFold(s[from:], w)
		if i < 0 {
			return false
		}
		i += from
		j := i + len(w)
		if (i == 0 || !isNameByte(s[i-1])) && (j == len(s) || !isNameByte(s[j])) {
			return true
		}
		from = i + 1
	}
	return false
}

func isNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

// defName is the name a line defines, or "" when the line is not a
// definition: a signature ("os.getcwd()", "class QuerySet( model=None )",
// "btrim ( string text ) → text Removes …": nothing after the closing
// parenthesis but a return type, a value or the row's description), a
// short line without one ("os.environ", "work_mem ( integer )", a term,
// a heading), less the word of its kind ("class ", "exception ").
func defName(line string) string {
	if line == "" || len(line) > 2000 {
		return ""
	}
	// Sphinx's link to the source ("[source]") ends an entry's line.
	line = strings.TrimSpace(strings.TrimSuffix(line, "source"))
	name := line
	if i := strings.IndexByte(line, '('); i > 0 {
		depth, end := 0, -1
		for j := i; j < len(line) && end < 0; j++ {
			switch line[j] {
			case '(':
				depth++
			case ')':
				if depth--; depth == 0 {
					end = j
				}
			}
		}
		// A signature's parameters hold no call ("f(g(x))" is code),
		// and its name no assignment ("buffer = io.BytesIO()").
		if end < 0 || strings.IndexByte(line[i+1:end], '(') >= 0 || strings.Contains(line[:i], " = ") {
			return ""
		}
		rest := strings.TrimSpace(line[end+1:])
		if rest != "" && !strings.HasPrefix(rest, "→") && !strings.HasPrefix(rest, "->") && !strings.HasPrefix(rest, "=") && !strings.HasPrefix(rest, ":") {
			return ""
		}
		name = line[:i]
	} else {
		// A heading ends with the full stop the body gives it, and may
		// start with its section's number ("9.15.1.7. xmlagg.").
		name = strings.TrimSuffix(name, ".")
		if f := strings.Fields(name); len(f) > 1 && strings.Trim(f[0], "0123456789.") == "" {
			name = strings.TrimSpace(name[len(f[0]):])
		}
		if len(name) > 60 || strings.HasSuffix(name, ".") || strings.HasSuffix(name, ":") || len(strings.Fields(name)) > 4 {
			return ""
		}
	}
	if i := strings.Index(name, " = "); i > 0 {
		name = name[:i]
	}
	lower := strings.ToLower(name)
	for _, p := range defPrefixes {
		if strings.HasPrefix(lower, p) {
			name = name[len(p):]
			break
		}
	}
	return strings.TrimSpace(name)
}

// describedAfter is the description of the name that line defines: on a
// function table row, the row's own prose (after the signature and its
// return type, before the example); otherwise the first prose line of
// the next few, past further signatures (overloads); "" when another
// kind of line comes first.
func (n *name) describedAfter(line string, next []string) string {
	if i := strings.Index(line, " → "); i > 0 && strings.Contains(line[:i], "(") {
		// A function table row: its description is on it, or nowhere.
		return rowDescription(line[i+len(" → "):], n.last)
	}
	for j, l := range next {
		if j >= 6 {
			break
		}
		l = strings.TrimSpace(l)
		switch {
		case l == "" || isVersionNote(l):
		case n.defines(l):
			// Another signature of the same entry, or the entry under
			// its heading.
		default:
			// A description's first sentence may end with a colon
			// before its list ("Returns a 4-tuple with enough
			// information to recreate the field:").
			s := firstSentences(l)
			if strings.HasSuffix(s, ":") && len(strings.Fields(s)) >= 6 {
				s = strings.TrimSuffix(s, ":") + "."
			}
			if isProse(s) {
				return s
			}
			return ""
		}
	}
	return ""
}

// inList reports whether line, after before, is one of a list of names
// ("Storage.size()", "Storage.url()", then prose about them all): it and
// the line before it (past blank ones) are bare names, without
// parameters, the one before another name. Signatures with parameters
// in a row are entries sharing one description ("ngettext_lazy(…)",
// "npgettext_lazy(…)"); a line with " = " is code or a value.
func (n *name) inList(line string, before []string) bool {
	if !isBareName(line) {
		return false
	}
	for j := len(before) - 1; j >= 0 && j >= len(before)-4; j-- {
		l := strings.TrimSpace(before[j])
		if l == "" {
			continue
		}
		return isBareName(l) && !n.defines(l)
	}
	return false
}

// isBareName: a line that is one name, with "()" or without.
func isBareName(l string) bool {
	l = strings.TrimSuffix(strings.TrimSpace(l), "()")
	return l != "" && !strings.ContainsAny(l, " ()=") && defKey(l) != ""
}

// defines reports whether line defines a name whose last part is n's.
func (n *name) defines(line string) bool {
	k := defKey(defName(line))
	return k != "" && k[strings.LastIndexByte(k, '.')+1:] == n.last
}

// isVersionNote: "New in Django 3.2.", "Changed in version 3.6: …" say
// when, not what.
func isVersionNote(l string) bool {
	for _, p := range []string{"New in ", "Changed in ", "Deprecated since ", "Added in ", "Removed in "} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

// rowDescription is the prose of a function table row after its
// signature's arrow: past the return type's words (lower case: "text",
// "setof record"), up to the example (a call of the function, fn, and an
// arrow), its first sentence(s). A row's description may end without a
// full stop ("Create date from year, month and day fields").
func rowDescription(s, fn string) string {
	ws := strings.Fields(s)
	start := -1
	at := 0
	for _, w := range ws {
		at = strings.Index(s[at:], w) + at
		r, _ := utf8.DecodeRuneInString(w)
		if unicode.IsUpper(r) && len(w) > 1 && isLowerWord(strings.TrimRight(w[1:], ",;:")) {
			start = at
			break
		}
		at += len(w)
	}
	if start < 0 {
		return ""
	}
	d := s[start:]
	if i := strings.Index(d, " → "); i >= 0 {
		// The example: from the call before its arrow, else from the
		// last full stop.
		if j := lastIndexASCIIFold(d[:i], fn+"("); j > 0 {
			d = strings.TrimSpace(d[:j])
		} else if j := strings.LastIndex(d[:i], ". "); j > 0 {
			d = d[:j+1]
		} else {
			return ""
		}
	}
	d = firstSentences(d)
	if !isProseText(d) {
		return ""
	}
	return d
}

// lastIndexASCIIFold is the last index of key (lower case) in s, any
// case; -1 when none.
func lastIndexASCIIFold(s, key string) int {
	last := -1
	for from := 0; from <= len(s); {
		i := indexASCIIFold(s[from:], key)
		if i < 0 {
			break
		}
		last = from + i
		from += i + 1
	}
	return last
}

func isLowerWord(s string) bool {
	for _, r := range s {
		if !unicode.IsLower(r) {
			return false
		}
	}
	return s != ""
}

// functionWords: a line of prose has one; a heading, a table header or
// a line of code seldom does.
var functionWords = map[string]bool{"the": true, "a": true, "an": true, "of": true, "to": true, "is": true, "are": true, "in": true, "and": true, "or": true, "for": true, "by": true, "with": true, "as": true, "if": true, "from": true, "this": true, "that": true, "be": true, "it": true, "on": true, "not": true, "can": true, "will": true, "which": true}

// isProse reports whether a line reads as sentences: it ends as a
// sentence does, and isProseText.
func isProse(line string) bool {
	line = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(line), ")"))
	if line == "" {
		return false
	}
	switch line[len(line)-1] {
	case '.', '?', '!':
	default:
		return false
	}
	return isProseText(line)
}

// isProseText: four words or more starting with a letter or digit, one
// of them a function word, few that look like code, no arrow (a table
// row's signature or example).
func isProseText(line string) bool {
	r, _ := utf8.DecodeRuneInString(line)
	if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '"' && r != '\'' && r != '“' {
		return false
	}
	ws := strings.Fields(line)
	if len(ws) < 4 {
		return false
	}
	fw, code := 0, 0
	for _, w := range ws {
		if functionWords[strings.ToLower(w)] {
			fw++
		}
		if strings.ContainsAny(w, "=(){}[];<>→") {
			code++
		}
	}
	return fw > 0 && 4*code <= len(ws) && !strings.Contains(line, "→")
}

// firstSentences is a line's first sentence, and its second when the
// first is under six words ("Return the absolute value.").
func firstSentences(line string) string {
	a := sentenceEnd(line, 0)
	if len(strings.Fields(line[:a])) < 6 && a < len(line) {
		a = sentenceEnd(line, a+1)
	}
	return strings.TrimSpace(line[:a])
}

// sentenceEnd is the end of the sentence that starts at from: after a
// full stop, question or exclamation mark followed by a space and a
// capital letter or digit, but not after an abbreviation ("e.g.",
// "i.e.", "etc.", "vs.", "cf."); the line's end when none.
func sentenceEnd(s string, from int) int {
	for i := from; i+2 < len(s); i++ {
		c := s[i]
		if c != '.' && c != '?' && c != '!' || s[i+1] != ' ' {
			continue
		}
		r, _ := utf8.DecodeRuneInString(strings.TrimLeft(s[i+2:], "(\"'“"))
		if !unicode.IsUpper(r) && !unicode.IsDigit(r) {
			continue
		}
		if c == '.' && isAbbrev(s[:i+1]) {
			continue
		}
		return i + 1
	}
	return len(s)
}

func isAbbrev(s string) bool {
	w := strings.TrimLeft(s[strings.LastIndexByte(s, ' ')+1:], "([\"'“")
	switch strings.ToLower(w) {
	case "e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.", "no.", "fig.":
		return true
	}
	return false
}

// proseOnly is body with every line that is not prose blanked (a
// table's header and rows, headings, code), its line count kept.
func proseOnly(body string) string {
	lines := strings.Split(body, "\n")
	var b strings.Builder
	b.Grow(len(body))
	inTable := false
	for i, line := range lines {
		switch {
		case isTableRule(line):
			inTable = true
		case strings.TrimSpace(line) == "":
			inTable = false
		}
		header := i+1 < len(lines) && isTableRule(lines[i+1])
		if !inTable && !header && isProse(line) {
			b.WriteString(line)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// isTableRule: the line under a table's header ("---").
func isTableRule(line string) bool {
	line = strings.TrimSpace(line)
	return line != "" && strings.Trim(line, "-: ") == ""
}

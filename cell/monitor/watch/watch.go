// Package watch turns a monitor's `watch` sentence into conditions (c1…cn)
// and decides, by rules and without a model, which of them a change's
// facts satisfy: mentions of words or quoted phrases, added or removed
// entities, and numeric rules ("the price drops below 50", "more than 3
// new rows"). An empty sentence is one condition-free monitor: any real
// change is reported, and matches nothing in particular.
package watch

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/trawlhq/trawl/cell/monitor/diff"
)

// Condition is one part of the sentence.
type Condition struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// MaxConditions bounds how many conditions one sentence becomes.
const MaxConditions = 20

var reSplit = regexp.MustCompile(`(?i)[.;\n!?]+\s*|,?\s+(?:and|or)\s+(?:also\s+)?(?:when|if|whenever)\s+|,\s*(?:also|plus)\s+`)

// Split splits the sentence into conditions. It never fails; the model
// splitter that may replace it can (hosted-api §7: 503).
func Split(sentence string) []Condition {
	var out []Condition
	for _, p := range reSplit.Split(sentence, -1) {
		p = strings.TrimSpace(strings.Trim(strings.TrimSpace(p), ",:"))
		if len(strings.Fields(p)) == 0 {
			continue
		}
		if len(out) == MaxConditions {
			break
		}
		out = append(out, Condition{ID: fmt.Sprintf("c%d", len(out)+1), Text: p})
	}
	return out
}

// stop words: what a sentence says about reporting, not what to report.
var stop = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an the of on in at to for from by with and or is are was were be been being
		it its this that these those there their any some all when whenever if once as about
		me us my our you your i we tell notify alert let know inform report send email ping warn
		please want would like should must can could will shall
		change changes changed changing update updates updated page site website anything something
		new added add appears appear appear appears removed remove deleted delete disappears disappear gone
		drops drop falls fall goes go rises rise increases increase decreases decrease becomes become gets get
		below under less than above over more greater exceeds exceed fewer least most
		not no any every each row rows item items entry entries line lines value values one two three`) {
		stop[w] = true
	}
}

var (
	reQuoted = regexp.MustCompile(`"([^"]+)"|“([^”]+)”|'([^']{2,})'`)
	reWord   = regexp.MustCompile(`[\p{L}\p{N}][\p{L}\p{N}_-]*`)
	reNum    = regexp.MustCompile(`-?\d[\d,]*(?:\.\d+)?`)
	reCmp    = regexp.MustCompile(`(?i)\b(drops?|falls?|goes|gets|is|becomes?|rises?|climbs?)?\s*(below|under|less than|lower than|above|over|more than|greater than|higher than|exceeds?|at least|at most)\s+\$?€?£?\s*(-?\d[\d,]*(?:\.\d+)?)`)
	reCount  = regexp.MustCompile(`(?i)\b(more than|over|at least|fewer than|less than)\s+(\d+)\s+(new|added|removed|deleted)?\s*(rows?|items?|entries|lines|products|links|results|[\p{L}]+s)\b`)
	reAdd    = regexp.MustCompile(`(?i)\b(new|added|adds?|appears?|appear|introduced|listed)\b`)
	reRemove = regexp.MustCompile(`(?i)\b(removed|deleted|disappears?|gone|dropped from|delisted|no longer)\b`)
)

// rule is a condition read for evaluation.
type rule struct {
	terms   []string // words or phrases one of which a fact must mention ("" list: any)
	kind    string   // diff.Added, diff.Removed, or "" for any
	cmp     string   // "<", ">", "<=", ">=", "" for no numeric rule
	num     float64
	cross   bool // "drops below": the value must cross the threshold
	count   int  // count rule: more than count facts (>=0 when set)
	countOp string
}

func parse(text string) rule {
	var r rule
	r.count = -1
	rest := text
	if m := reCount.FindStringSubmatch(rest); m != nil {
		n, _ := strconv.Atoi(m[2])
		r.count, r.countOp = n, strings.ToLower(m[1])
		switch strings.ToLower(m[3]) {
		case "new", "added":
			r.kind = diff.Added
		case "removed", "deleted":
			r.kind = diff.Removed
		}
		rest = strings.Replace(rest, m[0], " ", 1)
	} else if m := reCmp.FindStringSubmatch(rest); m != nil {
		v, err := strconv.ParseFloat(strings.ReplaceAll(m[3], ",", ""), 64)
		if err == nil {
			r.num = v
			switch strings.ToLower(m[2]) {
			case "below", "under", "less than", "lower than":
				r.cmp = "<"
			case "at most":
				r.cmp = "<="
			case "at least":
				r.cmp = ">="
			default:
				r.cmp = ">"
			}
			verb := strings.ToLower(m[1])
			r.cross = verb != "" && verb != "is"
			rest = strings.Replace(rest, m[0], " ", 1)
		}
	}
	if r.kind == "" {
		if reAdd.MatchString(rest) && !reRemove.MatchString(rest) {
			r.kind = diff.Added
		} else if reRemove.MatchString(rest) && !reAdd.MatchString(rest) {
			r.kind = diff.Removed
		}
	}
	for _, m := range reQuoted.FindAllStringSubmatch(rest, -1) {
		for _, g := range m[1:] {
			if g != "" {
				r.terms = append(r.terms, strings.ToLower(g))
			}
		}
		rest = strings.Replace(rest, m[0], " ", 1)
	}
	for _, w := range reWord.FindAllString(rest, -1) {
		lw := strings.ToLower(w)
		if stop[lw] || len([]rune(lw)) < 2 || reNum.MatchString(lw) && r.cmp != "" {
			continue
		}
		r.terms = append(r.terms, lw)
	}
	return r
}

// Match returns the ids of the conditions the facts satisfy. With no
// conditions nothing is matched (any real change is still reported).
func Match(conds []Condition, facts []diff.Fact) []string {
	matched := []string{}
	if len(facts) == 0 {
		return matched
	}
	for _, c := range conds {
		if holds(parse(c.Text), facts) {
			matched = append(matched, c.ID)
		}
	}
	return matched
}

func holds(r rule, facts []diff.Fact) bool {
	var hits []diff.Fact
	for _, f := range facts {
		if r.kind != "" && f.Kind != r.kind {
			continue
		}
		if !mentions(f, r.terms) {
			continue
		}
		hits = append(hits, f)
	}
	switch {
	case r.count >= 0:
		n := len(hits)
		switch r.countOp {
		case "at least":
			return n >= r.count
		case "fewer than", "less than":
			return n > 0 && n < r.count
		}
		return n > r.count
	case r.cmp != "":
		for _, f := range hits {
			after, ok := number(f.After)
			if !ok || !compare(after, r.cmp, r.num) {
				continue
			}
			if r.cross {
				if before, ok := number(f.Before); ok && compare(before, r.cmp, r.num) {
					continue // it was already there: not a drop below
				}
			}
			return true
		}
		return false
	}
	return len(hits) > 0
}

func compare(v float64, op string, n float64) bool {
	switch op {
	case "<":
		return v < n
	case "<=":
		return v <= n
	case ">=":
		return v >= n
	}
	return v > n
}

// number reads the first number of a value as the page shows it
// ("$1,299.00", "45 EUR").
func number(s string) (float64, bool) {
	m := reNum.FindString(s)
	if m == "" {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(m, ",", ""), 64)
	return v, err == nil
}

// mentions reports whether a fact names one of terms, in any of its
// fields; no terms: every fact.
func mentions(f diff.Fact, terms []string) bool {
	if len(terms) == 0 {
		return true
	}
	hay := strings.ToLower(f.Entity + "\x00" + f.Field + "\x00" + f.Before + "\x00" + f.After + "\x00" + f.Section)
	for _, t := range terms {
		if strings.Contains(hay, t) {
			return true
		}
		// A plural in the sentence names the singular on the page.
		if s, ok := strings.CutSuffix(t, "s"); ok && len(s) > 2 && strings.Contains(hay, s) {
			return true
		}
	}
	return false
}

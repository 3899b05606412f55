package extract

import (
	"math"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// A small TF-IDF, enough to compare the paragraphs of one page with each
// other and with a short query, without a model download: words are
// lower-cased, English stop words dropped, plurals folded by a light
// S-stemmer; weights are sublinear tf (1+ln tf) times smoothed idf
// (ln((1+n)/(1+df))+1), and vectors are L2-normalized, so a dot product is
// the cosine similarity.

// term is an entry of a sparse vector; vectors are sorted by id.
type term struct {
	id int
	w  float64
}

type vector []term

func dot(a, b vector) float64 {
	var s float64
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i].id == b[j].id:
			s += a[i].w * b[j].w
			i++
			j++
		case a[i].id < b[j].id:
			i++
		default:
			j++
		}
	}
	return s
}

// corpus holds the vocabulary and document frequencies of a page's blocks.
type corpus struct {
	ids     map[string]int
	stems   []string
	df      []int
	surface []map[string]int // per term: how often each lower-cased word form was seen
	docs    int
}

func newCorpus() *corpus { return &corpus{ids: map[string]int{}} }

// add counts one document's tokens and returns its term frequencies.
func (c *corpus) add(tokens []token) map[int]int {
	tf := map[int]int{}
	for _, t := range tokens {
		id, ok := c.ids[t.stem]
		if !ok {
			id = len(c.stems)
			c.ids[t.stem] = id
			c.stems = append(c.stems, t.stem)
			c.df = append(c.df, 0)
			c.surface = append(c.surface, map[string]int{})
		}
		if tf[id] == 0 {
			c.df[id]++
		}
		tf[id]++
		c.surface[id][t.word]++
	}
	c.docs++
	return tf
}

func (c *corpus) idf(id int) float64 {
	df := 0
	if id >= 0 && id < len(c.df) {
		df = c.df[id]
	}
	return math.Log(float64(1+c.docs)/float64(1+df)) + 1
}

// vectorize weights term frequencies of a document of the corpus.
func (c *corpus) vectorize(tf map[int]int) vector {
	v := make(vector, 0, len(tf))
	for id, n := range tf {
		v = append(v, term{id: id, w: (1 + math.Log(float64(n))) * c.idf(id)})
	}
	sort.Slice(v, func(i, j int) bool { return v[i].id < v[j].id })
	return normalize(v)
}

// query vectorizes text that is not part of the corpus (the semantic
// filter): words the page never uses cannot match anything, but they do
// weigh in the norm, as they should (the page misses part of the query).
func (c *corpus) query(text string) vector {
	tf := map[int]int{}
	unknown := map[string]int{}
	for _, t := range tokenize(text) {
		if id, ok := c.ids[t.stem]; ok {
			tf[id]++
		} else {
			unknown[t.stem]++
		}
	}
	v := make(vector, 0, len(tf))
	for id, n := range tf {
		v = append(v, term{id: id, w: (1 + math.Log(float64(n))) * c.idf(id)})
	}
	sort.Slice(v, func(i, j int) bool { return v[i].id < v[j].id })
	var extra float64                       // squared norm of the unknown words
	for _, k := range sortedKeys(unknown) { // fixed order: float sums
		w := (1 + math.Log(float64(unknown[k]))) * c.idf(-1)
		extra += w * w
	}
	var sq float64
	for _, t := range v {
		sq += t.w * t.w
	}
	if norm := math.Sqrt(sq + extra); norm > 0 {
		for i := range v {
			v[i].w /= norm
		}
	}
	return v
}

// word returns the most frequent surface form of a term (ties: the
// alphabetically first), for tags.
func (c *corpus) word(id int) string {
	best, bestN := c.stems[id], 0
	for w, n := range c.surface[id] {
		if n > bestN || (n == bestN && w < best) {
			best, bestN = w, n
		}
	}
	return best
}

func normalize(v vector) vector {
	var sq float64
	for _, t := range v {
		sq += t.w * t.w
	}
	if sq == 0 {
		return v
	}
	norm := math.Sqrt(sq)
	for i := range v {
		v[i].w /= norm
	}
	return v
}

type token struct {
	word string // lower-cased
	stem string
}

var (
	mdLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	rawURL = regexp.MustCompile(`(?i)\b(?:https?|ftp)://\S+`)

	apostrophes = strings.NewReplacer("'", "", "’", "")
)

// plainText removes what Markdown adds that is not prose: link targets
// and bare URLs.
func plainText(md string) string {
	return rawURL.ReplaceAllString(mdLink.ReplaceAllString(md, "$1"), " ")
}

// wordCount counts the words of a block, as str.split() would roughly.
func wordCount(text string) int {
	n := 0
	in := false
	for _, r := range text {
		w := unicode.IsLetter(r) || unicode.IsNumber(r)
		if w && !in {
			n++
		}
		in = w || (in && (r == '\'' || r == '’' || r == '-'))
	}
	return n
}

// tokenize returns the index terms of text.
func tokenize(text string) []token {
	var out []token
	fields := strings.FieldsFunc(text, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsNumber(r) || r == '\'' || r == '’')
	})
	for _, f := range fields {
		w := strings.ToLower(strings.Trim(f, "'’"))
		w = strings.TrimSuffix(strings.TrimSuffix(w, "'s"), "’s")
		w = apostrophes.Replace(w)
		if len([]rune(w)) < 2 || stopWords[w] || isNumber(w) {
			continue
		}
		out = append(out, token{word: w, stem: stem(w)})
	}
	return out
}

func isNumber(w string) bool {
	for _, r := range w {
		if !unicode.IsNumber(r) {
			return false
		}
	}
	return true
}

// stem folds English plurals (a Harman S-stemmer with the -ches, -shes,
// -xes, -sses, -zes cases): "planets" and "planet" meet, "galaxies" and
// "galaxy" too. Nothing more: a query of a few words should still match
// the words of the page it names.
func stem(w string) string {
	n := len(w)
	switch {
	case n > 4 && strings.HasSuffix(w, "ies") && !strings.HasSuffix(w, "eies") && !strings.HasSuffix(w, "aies"):
		return w[:n-3] + "y"
	case n > 4 && (strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "sses") ||
		strings.HasSuffix(w, "xes") || strings.HasSuffix(w, "zes")):
		return w[:n-2]
	case n > 3 && strings.HasSuffix(w, "es") && !strings.HasSuffix(w, "aes") && !strings.HasSuffix(w, "ees") && !strings.HasSuffix(w, "oes"):
		return w[:n-1]
	case n > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "is"):
		return w[:n-1]
	}
	return w
}

var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for w := range strings.FieldsSeq(`a about above after again against all almost also although always am among an and
	another any anyone anything are aren around as at be became because been before being below between both but by
	can cannot could couldn did didn do does doesn doing don done down during each either else enough etc even ever
	every few for from further get gets got had hadn has hasn have haven having he her here hers herself him himself
	his how however i if in into is isn it its itself just least less let like made make many may me might mine more
	most much must mustn my myself neither never no nor not now of off often on once one only onto or other others
	otherwise our ours ourselves out over own per perhaps quite rather really same several shall shan she should
	shouldn since so some something still such than that the their theirs them themselves then there therefore these
	they this those though through thus to too under until up upon us use used using very via was wasn we well were
	weren what whatever when where whether which while who whom whose why will with within without won would wouldn
	yet you your yours yourself yourselves dont doesnt didnt isnt arent wasnt werent cant couldnt wouldnt shouldnt
	wont hasnt havent hadnt im ive youre youve theyre weve thats lets`) {
		m[w] = true
	}
	return m
}()

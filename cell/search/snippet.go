package search

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/trawlhq/trawl/internal/searchapi"
)

// fieldBytes: all but white space (strings.Fields).
var fieldBytes = searchapi.ByteClass(func(c byte) bool { return !unicode.IsSpace(rune(c)) })

// matches reports which query term w is, or -1.
func matches(w string, terms []searchapi.Term) int {
	lw := strings.ToLower(w)
	for i, t := range terms {
		if lw == t.Raw {
			return i
		}
	}
	s := searchapi.Stem(lw)
	for i, t := range terms {
		if s == t.Stem {
			return i
		}
	}
	return -1
}

// passage is a run of a page's sentences and how well it answers a query.
type passage struct {
	text  string
	score float64 // 0 to 1
}

const passageWords = 40

// matcher says which query term a word is, remembering the words it has
// stemmed.
type matcher struct {
	terms []searchapi.Term
	seen  map[string]int
	// prefixes are the first (up to) two bytes of each term's word and
	// stem: a word that starts otherwise cannot match (mayMatch).
	prefixes []string
}

func newMatcher(terms []searchapi.Term) *matcher {
	m := &matcher{terms: terms, seen: map[string]int{}}
	for _, t := range terms {
		for _, w := range []string{t.Raw, t.Stem} {
			if pf := w[:min(2, len(w))]; pf != "" && !slices.Contains(m.prefixes, pf) {
				m.prefixes = append(m.prefixes, pf)
			}
		}
	}
	return m
}

// mayMatch is false for a word that cannot match a term: matchNew
// compares the lower-cased word with a term's word, or its first letters
// with the stem's before stemming it. Most words of a passage are
// rejected here without a map lookup. A word starting outside ASCII is
// left to match.
func (m *matcher) mayMatch(w string) bool {
	c0 := w[0]
	if c0 >= utf8.RuneSelf {
		return true
	}
	c0 = lowerASCII(c0)
	var c1 byte
	if len(w) > 1 {
		if c1 = w[1]; c1 >= utf8.RuneSelf {
			return true
		}
		c1 = lowerASCII(c1)
	}
	for _, pf := range m.prefixes {
		if pf[0] == c0 && (len(pf) == 1 || len(w) > 1 && pf[1] == c1) {
			return true
		}
	}
	return false
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func (m *matcher) match(w string) int {
	if k, ok := m.seen[w]; ok {
		return k
	}
	k := m.matchNew(w)
	m.seen[w] = k
	return k
}

// matchNew is matches without stemming the words that cannot have a
// term's stem: Porter rewrites a word's ending only, so a word whose
// first two letters are not a stem's is not stemmed.
func (m *matcher) matchNew(w string) int {
	lw := strings.ToLower(w)
	for i, t := range m.terms {
		if lw == t.Raw {
			return i
		}
	}
	for i, t := range m.terms {
		if p := min(len(t.Stem), 2); lw[:min(p, len(lw))] == t.Stem[:p] && searchapi.Stem(lw) == t.Stem {
			return i
		}
	}
	return -1
}

// hit is a query term at a word position of a passage.
type hit struct{ pos, term int }

// maxScan bounds the text a passage is looked for in.
const maxScan = 256 << 10

// bestPassage is the run of sentences of body, up to about passageWords
// words, that starts and ends with a query term and holds the most
// distinct terms, closest together.
func bestPassage(body string, terms []searchapi.Term) passage {
	return newMatcher(terms).bestPassage(body)
}

// bestPassage is bestPassage with m's memory of the words it matched
// (shared by the candidates of one query).
func (m *matcher) bestPassage(body string) passage {
	terms := m.terms
	if len(terms) == 0 {
		return passage{}
	}
	if len(body) > maxScan {
		body = body[:maxScan]
	}
	// Only the lines that hold a term (and their neighbours) are read:
	// found with a fast search for each term's stem in the lower-cased
	// text, not word by word.
	best := passage{}
	for _, seg := range segments(body, terms) {
		if p := m.bestIn(seg); p.score > best.score {
			best = p
		}
	}
	return best
}

// segments are the runs of lines of body around the lines that hold a
// term's stem.
func segments(body string, terms []searchapi.Term) []string {
	var hits []int
	var keys []string
	for _, t := range terms {
		keys = append(keys, t.Stem)
		if !strings.HasPrefix(t.Raw, t.Stem) {
			keys = append(keys, t.Raw)
		}
	}
	for _, key := range keys {
		if key == "" {
			continue
		}
		for from, n := 0, 0; n < 500; n++ {
			i := indexASCIIFold(body[from:], key)
			if i < 0 {
				break
			}
			hits = append(hits, from+i)
			from += i + len(key)
		}
	}
	if len(hits) == 0 {
		return nil
	}
	slices.Sort(hits)
	var out []string
	start, end := -1, -1
	for _, h := range hits {
		// The line before, the hit's line and the line after.
		lo := strings.LastIndexByte(body[:h], '\n')
		if lo > 0 {
			lo = strings.LastIndexByte(body[:lo], '\n')
		}
		lo++
		hi := len(body)
		if i := strings.IndexByte(body[h:], '\n'); i >= 0 {
			hi = h + i + 1
			if j := strings.IndexByte(body[hi:], '\n'); j >= 0 {
				hi += j
			} else {
				hi = len(body)
			}
		}
		if start >= 0 && lo <= end {
			end = max(end, hi)
			continue
		}
		if start >= 0 {
			out = append(out, body[start:end])
		}
		start, end = lo, hi
	}
	return append(out, body[start:end])
}

// indexASCIIFold is strings.Index(asciiLower(s), key) for a lower-case
// key, without lower-casing s: the candidates are the positions of key's
// first byte in either case.
func indexASCIIFold(s, key string) int {
	if key == "" {
		return 0
	}
	lo, up := key[0], key[0]
	if 'a' <= lo && lo <= 'z' {
		up = lo - ('a' - 'A')
	}
	// The next position of each case at or after i (-2: not looked for
	// yet, -1: none left).
	nextLo, nextUp := -2, -2
	if up == lo {
		nextUp = -1
	}
	find := func(c byte, from int) int {
		if j := strings.IndexByte(s[from:], c); j >= 0 {
			return from + j
		}
		return -1
	}
	for i := 0; i+len(key) <= len(s); {
		if nextLo != -1 && nextLo < i {
			nextLo = find(lo, i)
		}
		if nextUp != -1 && nextUp < i {
			nextUp = find(up, i)
		}
		switch {
		case nextLo < 0 && nextUp < 0:
			return -1
		case nextUp < 0 || nextLo >= 0 && nextLo < nextUp:
			i = nextLo
		default:
			i = nextUp
		}
		if i+len(key) > len(s) {
			return -1
		}
		if equalASCIIFold(s[i+1:i+len(key)], key[1:]) {
			return i
		}
		i++
	}
	return -1
}

// equalASCIIFold reports whether asciiLower(s) == key.
func equalASCIIFold(s, key string) bool {
	for j := 0; j < len(key); j++ {
		if lowerASCII(s[j]) != key[j] {
			return false
		}
	}
	return true
}

// bestIn is bestPassage within one segment.
func (m *matcher) bestIn(body string) passage {
	terms := m.terms
	// A sentence's length is its words here, as the hits' positions are.
	sents := splitSentences(body, false)
	hits := make([][]hit, len(sents))
	for i := range sents {
		st := sents[i].text
		pos := 0
		searchapi.EachWord(st, func(a, b int) {
			if w := st[a:b]; m.mayMatch(w) {
				if k := m.match(w); k >= 0 {
					hits[i] = append(hits[i], hit{pos, k})
				}
			}
			pos++
		})
		sents[i].n = max(pos, 1)
	}
	best, bestI, bestJ := 0.0, -1, -1
	var buf []hit
	for i := range sents {
		if len(hits[i]) == 0 {
			continue
		}
		n, last := 0, i
		buf = buf[:0]
		for j := i; j < len(sents) && (n == 0 || n+sents[j].n <= passageWords); j++ {
			for _, h := range hits[j] {
				buf = append(buf, hit{n + h.pos, h.term})
			}
			n += sents[j].n
			if len(hits[j]) > 0 {
				last = j
			}
		}
		span := 0
		for j := i; j <= last; j++ {
			span += sents[j].n
		}
		if sc := scoreHits(buf, len(terms), span); sc > best {
			best, bestI, bestJ = sc, i, last
		}
	}
	if bestI < 0 {
		return passage{}
	}
	var b strings.Builder
	for j := bestI; j <= bestJ; j++ {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(sents[j].text)
	}
	return passage{text: b.String(), score: best}
}

// scorePassage scores a text as bestPassage does.
func scorePassage(text string, terms []searchapi.Term) float64 {
	m := newMatcher(terms)
	ws := searchapi.Words(text)
	var hs []hit
	for pos, w := range ws {
		if k := m.match(w.Text); k >= 0 {
			hs = append(hs, hit{pos, k})
		}
	}
	return scoreHits(hs, len(terms), len(ws))
}

// scoreHits: the share of the query's terms the passage holds (most of
// the score), how close together they are, and whether they come as the
// query has them. hs are in position order; n is the passage's words.
func scoreHits(hs []hit, nterms, n int) float64 {
	if len(hs) == 0 {
		return 0
	}
	found := make([]int, nterms)
	for i := range found {
		found[i] = -1
	}
	distinct, ordered, prev := 0, 0, -1
	bestSpan := n + 1
	for _, h := range hs {
		if found[h.term] < 0 {
			distinct++
		}
		found[h.term] = h.pos
		if prev >= 0 && h.term == prev+1 {
			ordered++
		}
		prev = h.term
		if distinct == nterms {
			lo := h.pos
			for _, p := range found {
				lo = min(lo, p)
			}
			bestSpan = min(bestSpan, h.pos-lo+1)
		}
	}
	s := 0.7 * float64(distinct) / float64(nterms)
	if nterms > 1 && bestSpan <= n {
		s += 0.2 * float64(nterms) / float64(bestSpan)
	} else if nterms == 1 {
		s += 0.1
	}
	s += 0.05 * min(float64(len(hs))/float64(2*nterms), 1)
	if nterms > 1 {
		s += 0.05 * min(float64(ordered)/float64(nterms-1), 1)
	}
	return min(s, 1)
}

type sentence struct {
	text string
	n    int // words
}

// sentences splits a page's text at line ends and sentence ends.
func sentences(body string) []sentence { return splitSentences(body, true) }

// splitSentences is sentences, with their lengths counted when count.
func splitSentences(body string, count bool) []sentence {
	var out []sentence
	for line := range strings.SplitSeq(body, "\n") {
		line = strings.TrimSpace(line)
		for line != "" {
			cut := len(line)
			for i := 0; i+1 < len(line); i++ {
				if (line[i] == '.' || line[i] == '?' || line[i] == '!') && line[i+1] == ' ' {
					cut = i + 1
					break
				}
			}
			s := strings.TrimSpace(line[:cut])
			line = strings.TrimSpace(line[cut:])
			if s == "" || s == "." {
				continue
			}
			if !count {
				out = append(out, sentence{s, 0})
			} else if n := len(strings.Fields(s)); n > 0 {
				out = append(out, sentence{s, n})
			}
		}
	}
	return out
}

// Mark tags around the matched words of a snippet.
const (
	MarkOpen  = "<b>"
	MarkClose = "</b>"
)

// marked is the passage with the query's words marked, cut to about
// passageWords words around its first match.
func (p passage) marked(terms []searchapi.Term) string {
	if p.text == "" {
		return ""
	}
	ws := searchapi.Words(p.text)
	first := -1
	for i, w := range ws {
		if matches(w.Text, terms) >= 0 {
			first = i
			break
		}
	}
	if first < 0 {
		return ""
	}
	lo, hi := 0, len(p.text)
	if len(ws) > passageWords+10 {
		a := max(first-8, 0)
		z := min(a+passageWords, len(ws)-1)
		lo, hi = ws[a].Start, ws[z].End
	}
	var b strings.Builder
	if lo > 0 {
		b.WriteString("… ")
	}
	at := lo
	for _, w := range ws {
		if w.Start < lo || w.End > hi {
			continue
		}
		if matches(w.Text, terms) >= 0 {
			b.WriteString(p.text[at:w.Start])
			b.WriteString(MarkOpen)
			b.WriteString(w.Text)
			b.WriteString(MarkClose)
			at = w.End
		}
	}
	b.WriteString(p.text[at:hi])
	if hi < len(p.text) {
		b.WriteString(" …")
	}
	return b.String()
}

// firstWords is the first n words of s.
func firstWords(s string, n int) string {
	f := strings.Fields(s)
	if len(f) > n {
		return strings.Join(f[:n], " ") + " …"
	}
	return strings.Join(f, " ")
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// simhash is a 64-bit simhash of the text's word 3-shingles: pages with
// the same text have the same hash, near-duplicates hashes within a few
// bits.
func simhash(text string) uint64 {
	// The words of strings.Fields(strings.ToLower(text)), each lower-cased
	// alone (the same words: no rune lower-cases to a space or from one),
	// the last three kept.
	var ring [3]string
	nw := 0
	// ones[b] counts the shingles whose hash has bit b set; bit b of the
	// simhash is set when more than half do. The counting is eight bits
	// at a time: lane i of acc[p] counts bit 8p+i, flushed to ones before
	// a lane can overflow.
	var ones [64]int
	var acc [8]uint64
	n, pending := 0, 0
	flush := func() {
		for p := range acc {
			for i := 0; i < 8; i++ {
				ones[8*p+i] += int(acc[p] >> (8 * i) & 0xff)
			}
			acc[p] = 0
		}
		pending = 0
	}
	// shingle counts the hash of the last k words (FNV-1a of the words
	// joined by spaces).
	shingle := func(k int) {
		x := uint64(fnvOffset)
		for j := nw - k; j < nw; j++ {
			if j > nw-k {
				x = (x ^ ' ') * fnvPrime
			}
			w := ring[j%3]
			for i := 0; i < len(w); i++ {
				x = (x ^ uint64(w[i])) * fnvPrime
			}
		}
		for p := range acc {
			acc[p] += byteBits[byte(x>>(8*p))]
		}
		n++
		if pending++; pending == 255 {
			flush()
		}
	}
	searchapi.EachRun(text, &fieldBytes, func(r rune) bool { return !unicode.IsSpace(r) }, func(start, end int) {
		// ToLower returns a word without upper case as it is.
		ring[nw%3] = strings.ToLower(text[start:end])
		if nw++; nw >= 3 {
			shingle(3)
		}
	})
	switch {
	case nw == 0:
		return 0
	case nw < 3:
		shingle(nw) // one shingle of the words there are
	}
	flush()
	var out uint64
	for b := 0; b < 64; b++ {
		if 2*ones[b] > n {
			out |= 1 << b
		}
	}
	return out
}

// byteBits[v] has byte i set to bit i of v.
var byteBits = func() (t [256]uint64) {
	for v := range t {
		for i := 0; i < 8; i++ {
			if v&(1<<i) != 0 {
				t[v] |= 1 << (8 * i)
			}
		}
	}
	return t
}()

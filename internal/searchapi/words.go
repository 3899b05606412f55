package searchapi

import (
	"strings"
	"unicode"
	"unicode/utf8"

	porterstemmer "github.com/blevesearch/go-porterstemmer"
)

// Term is a query word: as written (lower-case) and its stem.
type Term struct{ Raw, Stem string }

// Stop are words a query has that say nothing of what it wants.
var Stop = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "by": true, "do": true, "does": true,
	"for": true, "from": true, "how": true, "i": true, "in": true, "is": true, "it": true, "of": true, "on": true, "or": true,
	"the": true, "to": true, "what": true, "when": true, "where": true, "which": true, "who": true, "why": true, "with": true,
	"can": true, "you": true, "my": true, "this": true, "that": true, "use": true, "get": true, "into": true,
}

// QueryTerms are the distinct words of q that carry meaning.
func QueryTerms(q string) []Term {
	var out []Term
	seen := map[string]bool{}
	for _, w := range Words(q) {
		lw := strings.ToLower(w.Text)
		if Stop[lw] || seen[lw] {
			continue
		}
		seen[lw] = true
		out = append(out, Term{Raw: lw, Stem: Stem(lw)})
	}
	if len(out) == 0 { // a query of stop words only: take them all
		for _, w := range Words(q) {
			lw := strings.ToLower(w.Text)
			if !seen[lw] {
				seen[lw] = true
				out = append(out, Term{Raw: lw, Stem: Stem(lw)})
			}
		}
	}
	return out
}

// Stem is w's Porter stem (w lower-cased), as the index has it.
func Stem(w string) string { return porterstemmer.StemString(w) }

// Word is a word of a text and where it is.
type Word struct {
	Text       string
	Start, End int // byte offsets
}

// Words splits s into words: runs of letters and digits, as the index's
// analyzer has them (an identifier is its parts).
func Words(s string) []Word {
	var out []Word
	EachWord(s, func(start, end int) { out = append(out, Word{s[start:end], start, end}) })
	return out
}

// EachWord calls f with the byte offsets of each word of s (as words has
// them), without allocating.
func EachWord(s string, f func(start, end int)) {
	EachRun(s, &wordBytes, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }, f)
}

// EachRun calls f with the byte offsets of each run of s whose characters
// are in a class: in[c] for a single-byte one, other(r) for the rest.
// Nothing is allocated.
func EachRun(s string, in *[utf8.RuneSelf]bool, other func(rune) bool, f func(start, end int)) {
	start := -1
	for i := 0; i < len(s); {
		c := s[i]
		var ok bool
		n := 1
		if c < utf8.RuneSelf {
			ok = in[c]
		} else {
			var r rune
			r, n = utf8.DecodeRuneInString(s[i:])
			ok = other(r)
		}
		switch {
		case ok && start < 0:
			start = i
		case !ok && start >= 0:
			f(start, i)
			start = -1
		}
		i += n
	}
	if start >= 0 {
		f(start, len(s))
	}
}

// ByteClass is the single-byte characters for which in is true.
func ByteClass(in func(c byte) bool) (t [utf8.RuneSelf]bool) {
	for c := range t {
		t[c] = in(byte(c))
	}
	return t
}

// wordBytes: letters and digits (words).
var wordBytes = ByteClass(func(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' })

// Stems are the stems of q's words that carry meaning (for matching
// queries with one another: gate/search's related queries).
func Stems(q string) []string {
	var out []string
	for _, t := range QueryTerms(q) {
		out = append(out, t.Stem)
	}
	return out
}

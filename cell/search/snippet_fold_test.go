package search

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/internal/searchapi"
)

// indexASCIIFold finds what a search in the ASCII-lower-cased text found.
func TestIndexASCIIFold(t *testing.T) {
	lower := func(s string) string {
		b := []byte(s)
		for i, c := range b {
			b[i] = lowerASCII(c)
		}
		return string(b)
	}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "A", "b", "B", "é", "É", " ", "\n", "ab", "AB", "aB"}
	for n := range 20000 {
		var sb strings.Builder
		for range r.IntN(40) {
			sb.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		s := sb.String()
		var kb strings.Builder
		for range 1 + r.IntN(3) {
			kb.WriteString(strings.ToLower(alphabet[r.IntN(len(alphabet))]))
		}
		key := kb.String()
		if got, want := indexASCIIFold(s, key), strings.Index(lower(s), key); got != want {
			t.Fatalf("case %d: indexASCIIFold(%q, %q) = %d, want %d", n, s, key, got, want)
		}
	}
}

// mayMatch never turns away a word that match takes.
func TestMayMatchKeepsEveryMatch(t *testing.T) {
	text := "Running runners ran; the RUN-time of Über-Run, über cafés, CREATE TABLE tables Tabled a b A I x"
	for _, q := range []string{"running", "run time", "über", "create tables", "a", "i x", "café"} {
		m := newMatcher(searchapi.QueryTerms(q))
		searchapi.EachWord(text, func(a, b int) {
			w := text[a:b]
			if k := m.matchNew(w); k >= 0 && !m.mayMatch(w) {
				t.Errorf("query %q: %q matches term %d but mayMatch turned it away", q, w, k)
			}
		})
	}
}

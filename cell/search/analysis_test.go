package search

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/token/porter"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/character"
)

// The cached stemmer gives porter's stems, the first time and after, from
// several goroutines at once (as bleve's analysis workers call it).
func TestStemCacheStemsAsPorter(t *testing.T) {
	text := strings.Repeat("Running runners ran; the generalizations conflated hopping happily into ÉTÉ été naïveté 42 connection connections connective ", 3)
	tok := character.NewCharacterTokenizer(func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) })
	terms := func(f analysis.TokenFilter) []string {
		var out []string
		for _, tk := range f.Filter(tok.Tokenize([]byte(strings.ToLower(text)))) {
			out = append(out, string(tk.Term))
		}
		return out
	}
	want := terms(porter.NewPorterStemmer())
	c := newStemCache()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				if got := terms(c); !slices.Equal(got, want) {
					t.Errorf("stems:\n got %q\nwant %q", got, want)
				}
			}
		}()
	}
	wg.Wait()
}

// simhashOf and distinctWordsOf are the plain definitions the index's
// faster versions must agree with.
func simhashOf(text string) uint64 {
	ws := strings.Fields(strings.ToLower(text))
	if len(ws) == 0 {
		return 0
	}
	var v [64]int
	for i := 0; i == 0 || i+3 <= len(ws); i++ {
		x := uint64(fnvOffset)
		for _, b := range []byte(strings.Join(ws[i:min(i+3, len(ws))], " ")) {
			x = (x ^ uint64(b)) * fnvPrime
		}
		for b := range 64 {
			if x&(1<<b) != 0 {
				v[b]++
			} else {
				v[b]--
			}
		}
	}
	var out uint64
	for b := range 64 {
		if v[b] > 0 {
			out |= 1 << b
		}
	}
	return out
}

func distinctWordsOf(texts ...string) string {
	seen := map[string]bool{}
	var b strings.Builder
	for _, t := range texts {
		for _, w := range words(t) {
			if lw := strings.ToLower(w.text); !seen[lw] {
				seen[lw] = true
				b.WriteString(lw + " ")
			}
		}
	}
	return b.String()
}

func TestDerivedFieldsAsDefined(t *testing.T) {
	texts := []string{
		"", " ", "one", "Two Words", "  Alpha\tbeta\ngamma  delta\r\n",
		"ÉTÉ İstanbul straße ΣΊΣΥΦΟΣ naïve ǅemal", "a\u00a0b\u0085c\u2003d e", "bad \xff\xfe utf8 \xc3 here Ok",
		"Call os.path.join() or PG_TRIGGER_DEPTH, not a sentence. And __init__ too. ½ ² Ⅻ 42",
		strings.Repeat("The Quick brown fox jumps over the lazy dog. ", 200),
	}
	for _, text := range texts {
		if got, want := simhash(text), simhashOf(text); got != want {
			t.Errorf("%.30q: simhash %x, want %x", text, got, want)
		}
		if got, want := distinctWords(text, strings.ToUpper(text)), distinctWordsOf(text, strings.ToUpper(text)); got != want {
			t.Errorf("%.30q: distinct words %q, want %q", text, got, want)
		}
	}
}

// identifiersOf is identifiers over the runs as first found
// (strings.FieldsFunc), against eachNameToken's.
func identifiersOf(texts ...string) []string {
	isPart := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }
	return identifiersBy(func(t string, f func(string)) {
		for _, tok := range strings.FieldsFunc(t, func(r rune) bool { return !isPart(r) && r != '_' && r != '.' }) {
			if strings.ContainsAny(tok, "._") {
				f(tok)
			}
		}
	}, texts...)
}

func TestIdentifiersAsFirstWritten(t *testing.T) {
	texts := []string{
		"", "plain words only", "os.path.join(a, b) and pg_trigger_depth; __init__ ._x_. a..b x.y.z.w",
		"ÉTÉ_été.Ⅻ ½_² naïve.thing bad\xff_byte end_", "_lead trail_ .dot dot. a.b", strings.Repeat("m.n_o p ", 50),
	}
	for _, text := range texts {
		if got, want := identifiers(text, strings.ToUpper(text)), identifiersOf(text, strings.ToUpper(text)); !slices.Equal(got, want) {
			t.Errorf("%.30q: identifiers %q, want %q", text, got, want)
		}
	}
}

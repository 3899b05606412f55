package search

import (
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/registry"

	"github.com/trawlhq/trawl/internal/searchapi"
)

// The index's two analyzers are written as one pass each, not as bleve's
// chain of a tokenizer and filters: the chain allocates every token on its
// own and walks each field's tokens once per filter (its cost:
// docs/performance.md, "Search"). They give the
// terms and positions of the chains they replace (TestAnalyzersAsChains):
//
//	trawl_en   = runs of letters and numbers, lower-cased, English stop
//	             words out, Porter stems (the stem cache)
//	trawl_list = the text's words as they are, split at white space (a
//	             field the index writes as a list: distinct words,
//	             identifiers)
//
// One difference, on purpose: bleve's character tokenizer stops at the
// first byte that is not UTF-8 (or a U+FFFD), and the page's text after
// it went unindexed; here such a character separates words like any other
// that is neither letter nor number.
const (
	enAnalyzer   = "trawl_en"
	listAnalyzer = "trawl_list"
)

func init() {
	err := registry.RegisterAnalyzer(enAnalyzer, func(_ map[string]any, cache *registry.Cache) (analysis.Analyzer, error) {
		stop, err := cache.TokenMapNamed(en.StopName)
		if err != nil {
			return nil, err
		}
		lower, err := cache.TokenFilterNamed(lowercase.Name)
		if err != nil {
			return nil, err
		}
		return &textAnalysis{stop: stop, lower: lower, stems: newStemCache()}, nil
	})
	if err != nil {
		panic(err)
	}
	err = registry.RegisterAnalyzer(listAnalyzer, func(map[string]any, *registry.Cache) (analysis.Analyzer, error) {
		return listAnalysis{}, nil
	})
	if err != nil {
		panic(err)
	}
}

// tokens hands out a field's tokens from blocks, one allocation for many
// (bleve keeps only the stream's pointers, and only while it indexes the
// field).
type tokens struct {
	block  []analysis.Token
	stream analysis.TokenStream
}

func newTokens(input []byte) *tokens {
	return &tokens{stream: make(analysis.TokenStream, 0, len(input)/8+1)}
}

func (ts *tokens) add(term []byte, start, end, pos int) {
	if len(ts.block) == cap(ts.block) {
		ts.block = make([]analysis.Token, 0, min(max(cap(ts.stream)-len(ts.stream), 16), 1024))
	}
	ts.block = append(ts.block, analysis.Token{Term: term, Start: start, End: end, Position: pos, Type: analysis.AlphaNumeric})
	ts.stream = append(ts.stream, &ts.block[len(ts.block)-1])
}

// textAnalysis is trawl_en.
type textAnalysis struct {
	stop  analysis.TokenMap
	lower analysis.TokenFilter
	stems *stemCache
}

// letterOrNumber is the character tokenizer's test of the chain, by byte
// for ASCII.
var letterOrNumber = searchapi.ByteClass(func(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' })

func (a *textAnalysis) Analyze(input []byte) analysis.TokenStream {
	ts := newTokens(input)
	var buf [64]byte
	pos := 0
	word := func(start, end int, ascii bool) {
		pos++
		var low []byte
		if ascii && end-start <= len(buf) {
			// Lower-cased into buf: the map lookups below do not keep it.
			low = buf[:end-start]
			for i, c := range input[start:end] {
				if 'A' <= c && c <= 'Z' {
					c += 'a' - 'A'
				}
				low[i] = c
			}
		} else {
			// The chain's lower-case filter itself (in place, as in the
			// chain): non-ASCII letters, or a long run.
			one := analysis.Token{Term: input[start:end]}
			a.lower.Filter(analysis.TokenStream{&one})
			low = one.Term
		}
		if a.stop[string(low)] {
			return
		}
		ts.add(a.stems.stem(low), start, end, pos)
	}
	eachByteRun(input, &letterOrNumber, func(r rune) bool {
		return r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsNumber(r))
	}, word)
	return ts.stream
}

// eachByteRun calls f with each run of input's characters for which in
// (ASCII) or other (the rest, decoded) is true, and whether the run is
// all ASCII: eachRun of []byte, for the analyzers.
func eachByteRun(input []byte, in *[utf8.RuneSelf]bool, other func(rune) bool, f func(start, end int, ascii bool)) {
	start, ascii := -1, true
	for i := 0; i < len(input); {
		c := input[i]
		ok, n := false, 1
		if c < utf8.RuneSelf {
			ok = in[c]
		} else {
			var r rune
			r, n = utf8.DecodeRune(input[i:])
			ok = other(r)
		}
		switch {
		case ok && start < 0:
			start, ascii = i, c < utf8.RuneSelf
		case ok:
			ascii = ascii && c < utf8.RuneSelf
		case start >= 0:
			f(start, i, ascii)
			start = -1
		}
		i += n
	}
	if start >= 0 {
		f(start, len(input), ascii)
	}
}

// listAnalysis is trawl_list.
type listAnalysis struct{}

func (listAnalysis) Analyze(input []byte) analysis.TokenStream {
	ts := newTokens(input)
	pos := 0
	eachByteRun(input, &fieldBytes, func(r rune) bool { return !unicode.IsSpace(r) }, func(start, end int, _ bool) {
		pos++
		ts.add(input[start:end], start, end, pos)
	})
	return ts.stream
}

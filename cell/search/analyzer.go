package search

import (
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/registry"
)

// The index's two analyzers are written as one pass each, not as bleve's
// chain of a tokenizer and filters: the chain allocated every token on its
// own and walked each field's tokens once per filter, and was a sixth of
// the CPU a page cost to index (docs/search.md, "Indexing"). They give the
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
var letterOrNumber = byteClass(func(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' })

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
	start, ascii := -1, true
	for i := 0; i < len(input); {
		c := input[i]
		in, n := false, 1
		if c < utf8.RuneSelf {
			in = letterOrNumber[c]
		} else {
			var r rune
			r, n = utf8.DecodeRune(input[i:])
			in = r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsNumber(r))
		}
		switch {
		case in && start < 0:
			start, ascii = i, c < utf8.RuneSelf
		case in:
			ascii = ascii && c < utf8.RuneSelf
		case start >= 0:
			word(start, i, ascii)
			start = -1
		}
		i += n
	}
	if start >= 0 {
		word(start, len(input), ascii)
	}
	return ts.stream
}

// listAnalysis is trawl_list.
type listAnalysis struct{}

// space is white space (unicode.IsSpace), by byte for ASCII.
var space = byteClass(func(c byte) bool { return unicode.IsSpace(rune(c)) })

func (listAnalysis) Analyze(input []byte) analysis.TokenStream {
	ts := newTokens(input)
	pos, start := 0, -1
	for i := 0; i < len(input); {
		c := input[i]
		sp, n := false, 1
		if c < utf8.RuneSelf {
			sp = space[c]
		} else {
			var r rune
			r, n = utf8.DecodeRune(input[i:])
			sp = unicode.IsSpace(r)
		}
		switch {
		case !sp && start < 0:
			start = i
		case sp && start >= 0:
			pos++
			ts.add(input[start:i], start, i, pos)
			start = -1
		}
		i += n
	}
	if start >= 0 {
		pos++
		ts.add(input[start:], start, len(input), pos)
	}
	return ts.stream
}

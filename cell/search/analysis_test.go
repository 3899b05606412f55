package search

import (
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/token/porter"
	stopfilter "github.com/blevesearch/bleve/v2/analysis/token/stop"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/character"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/whitespace"
	"github.com/blevesearch/bleve/v2/registry"

	"github.com/trawlhq/trawl/cell/content"
	"github.com/trawlhq/trawl/internal/searchapi"
)

// The cached stemmer gives porter's stems, the first time and after, from
// several goroutines at once (as bleve's analysis workers call it).
func TestStemCacheStemsAsPorter(t *testing.T) {
	text := strings.Repeat("Running runners ran; the generalizations conflated hopping happily into ÉTÉ été naïveté 42 connection connections connective ", 3)
	tok := character.NewCharacterTokenizer(func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) })
	want := func() []string {
		var out []string
		for _, tk := range porter.NewPorterStemmer().Filter(tok.Tokenize([]byte(strings.ToLower(text)))) {
			out = append(out, string(tk.Term))
		}
		return out
	}()
	c := newStemCache()
	terms := func(c *stemCache) []string {
		var out []string
		for _, tk := range tok.Tokenize([]byte(strings.ToLower(text))) {
			out = append(out, string(c.stem(tk.Term)))
		}
		return out
	}
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

func distinctWordsOf(texts ...string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range texts {
		for _, w := range searchapi.Words(t) {
			if lw := strings.ToLower(w.Text); !seen[lw] {
				seen[lw] = true
				out = append(out, lw)
			}
		}
	}
	return out
}

func TestDerivedFieldsAsDefined(t *testing.T) {
	texts := []string{
		"", " ", "one", "Two searchapi.Words", "  Alpha\tbeta\ngamma  delta\r\n",
		"ÉTÉ İstanbul straße ΣΊΣΥΦΟΣ naïve ǅemal", "a\u00a0b\u0085c\u2003d e", "bad \xff\xfe utf8 \xc3 here Ok",
		"Call os.path.join() or PG_TRIGGER_DEPTH, not a sentence. And __init__ too. ½ ² Ⅻ 42",
		strings.Repeat("The Quick brown fox jumps over the lazy dog. ", 200),
	}
	for _, text := range texts {
		if got, want := simhash(text), simhashOf(text); got != want {
			t.Errorf("%.30q: simhash %x, want %x", text, got, want)
		}
		if got, want := distinctWords(text, strings.ToUpper(text)), distinctWordsOf(text, strings.ToUpper(text)); !slices.Equal(got, want) {
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

// The one-pass analyzers give the terms and positions of the bleve chains
// they replaced (analyzer.go): trawl_en of runs of letters and numbers,
// lower-cased, stop words out, Porter stems; trawl_list of the whitespace
// tokenizer (identifiers) and of the alnum-and-lower-case chain over
// distinctWords' output (the words field).
func TestAnalyzersAsChains(t *testing.T) {
	var texts []string
	pages, _ := filepath.Glob("../content/testdata/*.html")
	more, _ := filepath.Glob("../../cell/recipe/testdata/site/*.html")
	for _, p := range append(pages, more...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		d, err := FromHTML(b, "http://docs.test/"+filepath.Base(p), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, d.Title, strings.Join(d.Headings, "\n"), d.Body)
	}
	if len(texts) < 20 {
		t.Fatalf("only %d texts from the fixtures", len(texts))
	}
	texts = append(texts,
		"", "   ", "The THE the a AN an Is", "ΣΊΣΥΦΟΣ σίσυφος ΟΔΟΣ", "İstanbul ISTANBUL ıi", "Ⱥpple ȾEST Straße STRASSE",
		"naïveté Été ÉTÉ 42nd x² ½ Ⅻ 中文 テスト", "os.path.join(PATH) pg_trigger_depth() __init__ e.g. v1.2.3",
		strings.Repeat("Supercalifragilisticexpialidocious", 3)+" "+strings.Repeat("ÉÉ", 40)+" end")

	cache := registry.NewCache()
	stopMap, err := cache.TokenMapNamed(en.StopName)
	if err != nil {
		t.Fatal(err)
	}
	alnum := character.NewCharacterTokenizer(func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) })
	oldText := &analysis.DefaultAnalyzer{Tokenizer: alnum, TokenFilters: []analysis.TokenFilter{
		lowercase.NewLowerCaseFilter(), stopfilter.NewStopTokensFilter(stopMap), porter.NewPorterStemmer()}}
	oldWords := &analysis.DefaultAnalyzer{Tokenizer: alnum, TokenFilters: []analysis.TokenFilter{lowercase.NewLowerCaseFilter()}}
	ws, err := cache.TokenizerNamed(whitespace.Name)
	if err != nil {
		t.Fatal(err)
	}
	oldIdents := &analysis.DefaultAnalyzer{Tokenizer: ws}
	newText, err := cache.AnalyzerNamed(enAnalyzer)
	if err != nil {
		t.Fatal(err)
	}
	newList, err := cache.AnalyzerNamed(listAnalyzer)
	if err != nil {
		t.Fatal(err)
	}
	type term struct {
		Term            string
		Pos, Start, End int
	}
	terms := func(a analysis.Analyzer, s string) []term {
		var out []term
		for _, tk := range a.Analyze([]byte(s)) { // a copy each time: analyzers lower-case in place
			out = append(out, term{string(tk.Term), tk.Position, tk.Start, tk.End})
		}
		return out
	}
	n := 0
	for _, s := range texts {
		for _, c := range []struct {
			name     string
			old, new analysis.Analyzer
			in       string
		}{
			{"text", oldText, newText, s},
			{"words", oldWords, newList, strings.Join(distinctWords(s), " ")},
			{"idents", oldIdents, newList, strings.Join(identifiers(s), " ")},
		} {
			got, want := terms(c.new, c.in), terms(c.old, c.in)
			if c.name == "words" {
				// distinctWords' output, re-tokenized, has other offsets
				// but the same words in the same order.
				for i := range got {
					got[i].Start, got[i].End = 0, 0
				}
				for i := range want {
					want[i].Start, want[i].End = 0, 0
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s of %.80q:\n got %v\nwant %v", c.name, c.in, got, want)
			}
			n += len(got)
		}
	}
	if n < 1500 {
		t.Fatalf("only %d terms compared", n)
	}
	// Where the chain stopped (a byte that is not UTF-8), trawl_en reads on.
	if got := terms(newText, "alpha \xff beta"); len(got) != 2 || got[1].Term != "beta" {
		t.Errorf("after an invalid byte: %v", got)
	}
}

// fromMarkdownOf and plainOf are FromMarkdown's first definition (a
// strings.Builder, strings.Fields and Join a line), which the one-pass
// appendPlain must agree with.
func fromMarkdownOf(pageURL, title, md string, fetched time.Time) *Doc {
	d := &Doc{URL: pageURL, Title: strings.TrimSpace(title), Date: fetched.UTC(), Fetched: fetched.UTC()}
	var body strings.Builder
	inCode := false
	for line := range strings.SplitSeq(md, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			inCode = !inCode
		} else if !inCode && strings.HasPrefix(t, "#") {
			h := strings.TrimSpace(strings.TrimLeft(t, "#"))
			if h != "" {
				d.Headings = append(d.Headings, plainOf(h))
			}
			body.WriteString(plainOf(h))
			body.WriteString(".\n")
			continue
		}
		body.WriteString(plainOf(t))
		body.WriteByte('\n')
	}
	d.Body = body.String()
	if d.Title == "" && len(d.Headings) > 0 {
		d.Title = d.Headings[0]
	}
	return d
}

func plainOf(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '*', '`', '|', '>':
			b.WriteByte(' ')
			continue
		case '_':
			if wordBefore(s, i) && i+1 < len(s) && isWord(rune(s[i+1])) {
				b.WriteByte(c)
			} else {
				b.WriteByte(' ')
			}
			continue
		case ']':
			if i+1 < len(s) && s[i+1] == '(' {
				if j := strings.IndexByte(s[i+1:], ')'); j > 0 {
					i += j + 1
					continue
				}
			}
			b.WriteByte(' ')
			continue
		case '[':
			b.WriteByte(' ')
			continue
		case '!':
			if i+1 >= len(s) || s[i+1] != '[' {
				b.WriteByte(c)
			}
			continue
		case '\\':
			continue
		}
		b.WriteByte(c)
	}
	t := strings.Join(strings.Fields(b.String()), " ")
	t = strings.TrimPrefix(t, "- ")
	return t
}

func TestFromMarkdownAsDefined(t *testing.T) {
	mds := []string{"", "\n\n", "# \n## **\n", "- item one\n-  item\u00a0two  \n* star", "# Title\n\nSome *emphasis* and `code` | a | b |\n> quote [link](http://x/y) ![img](i.png) \\escaped",
		"snake_case _emph_ __init__ a_ _b x_y_z é_ü c\\_extra\\_keywords \\_x", "bad \xff\xfe utf8 \xc3 [x](", "tabs\tand\u2003em\u3000spaces\u0085next", "!! ![ [a] ]( ) ](x)", "  - - dash\n- ", "# -  heading bullet", "```python\n# a comment\nx = 1\n```\n# Heading\n~~~~\n# shell\n~~~~"}
	pages, _ := filepath.Glob("../content/testdata/*.html")
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse("http://docs.test/" + filepath.Base(p))
		cd, err := content.Process(b, u, content.Options{})
		if err != nil {
			t.Fatal(err)
		}
		mds = append(mds, cd.Markdown)
	}
	for _, m := range mds {
		got, want := FromMarkdown("http://d/", "", m, t0), fromMarkdownOf("http://d/", "", m, t0)
		if got.Body != want.Body || got.Title != want.Title || !slices.Equal(got.Headings, want.Headings) {
			t.Errorf("%.60q:\n got %q %q %q\nwant %q %q %q", m, got.Title, got.Headings, got.Body, want.Title, want.Headings, want.Body)
		}
	}
}

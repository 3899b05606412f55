package search

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/mapping"
	index "github.com/blevesearch/bleve_index_api"

	"github.com/trawlhq/trawl/internal/searchapi"
)

// Analyzers (analyzer.go). Words are runs of letters and numbers: an
// identifier (os.path.join, parse_qsl) is its parts, as a reader searches
// them.
const (
	textAnalyzer  = enAnalyzer   // lower-cased, English stop words out, Porter stems
	identAnalyzer = listAnalyzer // identifiers, lower-cased before: split at white space only
)

func indexMapping() mapping.IndexMapping {
	im := bleve.NewIndexMapping()
	im.ScoringModel = index.BM25Scoring
	im.DefaultAnalyzer = textAnalyzer
	im.StoreDynamic = false
	im.IndexDynamic = false
	im.DocValuesDynamic = false

	text := func(store bool) *mapping.FieldMapping {
		f := bleve.NewTextFieldMapping()
		f.Analyzer = textAnalyzer
		f.Store = store
		f.IncludeInAll = false
		f.IncludeTermVectors = false
		f.DocValues = false
		return f
	}
	keyword := func(store, idx bool) *mapping.FieldMapping {
		f := bleve.NewKeywordFieldMapping()
		f.Store, f.Index, f.IncludeInAll, f.DocValues = store, idx, false, false
		return f
	}

	dm := bleve.NewDocumentStaticMapping()
	// url, type, lang and date are read back, never searched: stored
	// only (the URL is the document's id, which is indexed).
	dm.AddFieldMappingsAt("url", keyword(true, false))
	dm.AddFieldMappingsAt("urlwords", text(false))
	idents := bleve.NewTextFieldMapping()
	idents.Analyzer = identAnalyzer
	idents.Store, idents.IncludeInAll, idents.DocValues, idents.IncludeTermVectors = false, false, false, false
	dm.AddFieldMappingsAt("idents", idents)
	// defs is stored too: a page indexed again from its stored fields
	// (the anchor-text refresh) no longer has the Markdown that told its
	// navigation lines from its definitions.
	defs := bleve.NewTextFieldMapping()
	defs.Analyzer = identAnalyzer
	defs.Store, defs.IncludeInAll, defs.DocValues, defs.IncludeTermVectors = true, false, false, false
	dm.AddFieldMappingsAt("defs", defs)
	dm.AddFieldMappingsAt("title", text(true))
	dm.AddFieldMappingsAt("headings", text(true))
	dm.AddFieldMappingsAt("body", text(true))
	dm.AddFieldMappingsAt("anchors", text(true))
	dm.AddFieldMappingsAt("type", keyword(true, false))
	dm.AddFieldMappingsAt("lang", keyword(true, false))
	dm.AddFieldMappingsAt("desc", keyword(true, false))
	dm.AddFieldMappingsAt("jsonld", keyword(true, false))
	dm.AddFieldMappingsAt("sim", keyword(true, false))
	date := bleve.NewDateTimeFieldMapping()
	date.Index, date.IncludeInAll, date.DocValues, date.IncludeTermVectors = false, false, false, false
	dm.AddFieldMappingsAt("date", date)
	im.DefaultMapping = dm
	return im
}

// Prepare computes what the index reads of d but its anchor text (the
// identifiers, definitions, distinct words and simhash of its text), so
// that Add, which indexes one batch at a time, does not: the Indexer's
// workers prepare each document as they convert it. d must not change
// afterwards.
func (d *Doc) Prepare() {
	if d.prepared != nil && d.prepared["url"] == d.URL {
		return // (a copy of a prepared Doc given another URL is prepared again)
	}
	heads := strings.Join(d.Headings, "\n")
	d.words = distinctWords(d.Title, heads, d.Body)
	defs := d.defs
	if !d.defsKnown {
		defs = definitions(d)
	}
	d.prepared = map[string]any{
		"url":      d.URL,
		"urlwords": urlWords(d.URL),
		"idents":   strings.Join(identifiers(d.Title, heads, d.Body), " "),
		"defs":     strings.Join(defs, " "),
		"title":    d.Title,
		"headings": heads,
		"body":     d.Body,
		"type":     d.Type,
		"lang":     d.Lang,
		"desc":     d.Description,
		"jsonld":   d.JSONLD,
		"sim":      strconv.FormatUint(simhash(d.Body), 16),
		"date":     d.Date,
	}
}

// fields is d as the index mapping reads it.
func (d *Doc) fields() map[string]any {
	d.Prepare()
	f := maps.Clone(d.prepared)
	f["anchors"] = strings.Join(d.Anchors, "\n")
	return f
}

var storedFields = []string{"url", "title", "headings", "body", "anchors", "type", "lang", "desc", "jsonld", "sim", "date", "defs"}

func docOf(f map[string]any) *Doc {
	s := func(k string) string { v, _ := f[k].(string); return v }
	d := &Doc{URL: s("url"), Title: s("title"), Body: s("body"), Type: s("type"), Lang: s("lang"), Description: s("desc"), JSONLD: s("jsonld")}
	if h := s("headings"); h != "" {
		d.Headings = strings.Split(h, "\n")
	}
	if a := s("anchors"); a != "" {
		d.Anchors = strings.Split(a, "\n")
	}
	if defs, ok := f["defs"].(string); ok {
		d.defs, d.defsKnown = strings.Fields(defs), true
	}
	if t, err := time.Parse(time.RFC3339, s("date")); err == nil {
		d.Date = t
	}
	return d
}

// distinctWords is each word of texts once, lower-cased (a word with no
// upper case is a slice of its text): the words a page gives the
// did_you_mean dictionary (words.go).
func distinctWords(texts ...string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range texts {
		searchapi.EachWord(t, func(start, end int) {
			lw := strings.ToLower(t[start:end]) // as it is when it has no upper case
			if !seen[lw] {
				seen[lw] = true
				out = append(out, lw)
			}
		})
	}
	return out
}

// identifiers are the distinct names of texts joined by _ or . (lower-
// cased: pg_trigger_depth, os.path.join), and the dotted ones' tails
// (path.join).
func identifiers(texts ...string) []string { return identifiersBy(eachNameToken, texts...) }

// identifiersBy is identifiers over the runs tokens finds in each text.
func identifiersBy(tokens func(string, func(string)), texts ...string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	for _, t := range texts {
		tokens(t, func(tok string) {
			tok = strings.Trim(tok, "._")
			if !strings.ContainsAny(tok, "._") || strings.Contains(tok, "..") || len(tok) > 80 {
				return
			}
			tok = strings.ToLower(tok)
			add(tok)
			for i := strings.IndexByte(tok, '.'); i >= 0; {
				tail := tok[i+1:]
				if !strings.ContainsAny(tail, "._") {
					break
				}
				add(tail)
				j := strings.IndexByte(tail, '.')
				if j < 0 {
					break
				}
				i += j + 1
			}
		})
	}
	return out
}

// eachNameToken calls f with each run of letters, numbers, _ and . of s
// that holds a _ or a . (the runs identifiers looks at), without
// allocating. Not eachRun: it sees whether a run is joined as it scans,
// and calls f for those alone, where eachRun would cost a call and a
// second scan for every word (docs/performance.md, "Search").
func eachNameToken(s string, f func(string)) {
	start, joined := -1, false
	for i := 0; i < len(s); {
		c := s[i]
		var in bool
		n := 1
		if c < utf8.RuneSelf {
			in = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.'
		} else {
			var r rune
			r, n = utf8.DecodeRuneInString(s[i:])
			in = unicode.IsLetter(r) || unicode.IsNumber(r)
		}
		switch {
		case in && start < 0:
			start, joined = i, false
		case !in && start >= 0:
			if joined {
				f(s[start:i])
			}
			start = -1
		}
		if c == '_' || c == '.' {
			joined = true
		}
		i += n
	}
	if start >= 0 && joined {
		f(s[start:])
	}
}

// defPrefixes are the words before the name an API entry defines.
var defPrefixes = []string{"class ", "exception ", "function ", "method ", "attribute ", "property ", "data ", "classmethod ",
	"staticmethod ", "abstractmethod ", "async ", "coroutine ", "decorator ", "awaitable ", "func ", "type ", "const ", "var ", "macro ", "struct "}

// definitions are the keys (defKey) of the names a page's lines define:
// a short line that is a name, or starts with a name and "(" (an API
// entry), and its headings; a dotted name also by its last part. A line
// that is a link (a table of contents, which Sphinx fills with every
// object's name: it points to the definition) or a line of code defines
// nothing (notDefs).
func definitions(d *Doc) []string {
	seen := map[string]bool{}
	var out []string
	add := func(line string) {
		k := defKey(line)
		if k == "" || seen[k] {
			return
		}
		seen[k] = true
		out = append(out, k)
		if i := strings.LastIndexByte(k, '.'); i > 0 && i+1 < len(k) && !strings.Contains(k, "+") {
			if tail := k[i+1:]; !seen[tail] {
				seen[tail] = true
				out = append(out, tail)
			}
		}
	}
	for _, h := range d.Headings {
		add(h)
	}
	n := -1 // the line's number
	for line := range strings.SplitSeq(d.Body, "\n") {
		n++
		line = strings.TrimSpace(line)
		if line == "" || len(line) > 400 || d.notDefs[n] {
			continue
		}
		if i := strings.IndexByte(line, '('); i > 0 {
			line = line[:i]
		} else if len(line) > 60 || strings.HasSuffix(line, ".") || strings.HasSuffix(line, ":") {
			continue
		}
		if i := strings.Index(line, " = "); i > 0 {
			line = line[:i]
		}
		lower := strings.ToLower(line)
		for _, p := range defPrefixes {
			if strings.HasPrefix(lower, p) {
				// After "class ", "method "…, the name is the next word:
				// what follows is not part of it (Sphinx's "source" link
				// of a class without arguments, a type).
				line, _, _ = strings.Cut(strings.TrimSpace(line[len(p):]), " ")
				break
			}
		}
		if n := len(strings.Fields(line)); n > 0 && n <= 4 {
			add(line)
		}
	}
	return out
}

// defKey is a name as the defs field holds it: lower-cased, its words
// (runs of letters, digits, _ and .) joined by "+"; "" when it has none
// or more than 4.
func defKey(s string) string {
	ws := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r) && r != '_' && r != '.'
	})
	for i := range ws {
		ws[i] = strings.Trim(ws[i], ".")
	}
	ws = slices.DeleteFunc(ws, func(w string) bool { return w == "" })
	if len(ws) == 0 || len(ws) > 4 {
		return ""
	}
	return strings.Join(ws, "+")
}

package search

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	index "github.com/blevesearch/bleve_index_api"

	"github.com/trawlhq/trawl/internal/searchapi"
)

// Correct returns the query with each word the index does not know (or
// knows far less than a word one or two edits away) replaced by that
// word; nil when every word stands.
func (ix *Index) Correct(ctx context.Context, q string) (*searchapi.Correction, error) {
	// The counts still waiting are written first (a document of the
	// pages of the last moments; merged with others later).
	if err := ix.words.flush(); err != nil {
		return nil, err
	}
	adv, err := ix.words.b.Advanced()
	if err != nil {
		return nil, err
	}
	r, err := adv.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	ws := searchapi.Words(q)
	changed := false
	var out strings.Builder
	at := 0
	var freq uint64
	for _, w := range ws {
		lw := strings.ToLower(w.Text)
		out.WriteString(q[at:w.Start])
		at = w.End
		if len([]rune(lw)) < 4 || strings.ContainsAny(lw, "0123456789._") {
			out.WriteString(w.Text)
			continue
		}
		df, err := ix.words.count(ctx, r, lw)
		if err != nil {
			return nil, err
		}
		best, bestDF := "", df
		if df < 3 {
			cands, err := ix.fuzzy(ctx, r, lw)
			if err != nil {
				return nil, err
			}
			for _, c := range cands {
				// A correction must be clearly better attested.
				if c.Count > bestDF*20+2 || (df == 0 && c.Count > bestDF) {
					if df == 0 || c.Count >= 20*max(df, 1) {
						best, bestDF = c.Term, c.Count
					}
				}
			}
		}
		if best != "" && best != lw {
			changed = true
			out.WriteString(best)
			freq += bestDF
		} else {
			out.WriteString(w.Text)
			freq += df
		}
	}
	out.WriteString(q[at:])
	if !changed {
		return nil, nil
	}
	return &searchapi.Correction{Query: out.String(), Freq: freq}, nil
}

type fuzzyReader interface {
	FieldDictFuzzy(field string, term string, fuzziness int, prefix string) (index.FieldDict, error)
}

// fuzzy lists the words of the dictionary within two edits of t (one for
// short words), nearest and most frequent first.
func (ix *Index) fuzzy(ctx context.Context, r index.IndexReader, t string) ([]index.DictEntry, error) {
	fr, ok := r.(fuzzyReader)
	if !ok {
		return nil, fmt.Errorf("search: the index cannot list near words")
	}
	dist := 1
	if len([]rune(t)) >= 6 {
		dist = 2
	}
	fd, err := fr.FieldDictFuzzy("words", t, dist, "")
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	var out []index.DictEntry
	for {
		e, err := fd.Next()
		if err != nil {
			return nil, err
		}
		if e == nil {
			break
		}
		// (e.Count is of the dictionary's documents, not of pages.)
		n, err := ix.words.count(ctx, r, e.Term)
		if err != nil {
			return nil, err
		}
		out = append(out, index.DictEntry{Term: e.Term, Count: n, EditDistance: editDistance(t, e.Term)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].EditDistance != out[j].EditDistance {
			return out[i].EditDistance < out[j].EditDistance
		}
		return out[i].Count > out[j].Count
	})
	// The nearest edit distance only: a word one edit away wins over a
	// more frequent word two edits away.
	for i := range out {
		if out[i].EditDistance != out[0].EditDistance {
			return out[:i], nil
		}
	}
	return out, nil
}

// editDistance is the Damerau–Levenshtein (optimal string alignment)
// distance of a and b.
func editDistance(a, b string) uint8 {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return uint8(min(d[len(ra)][len(rb)], 255))
}

// EntityOf is the entity block of a page: the facts of its JSON-LD
// object, or its definition (its description or first sentence) when the
// page is about the query (the query is its title).
func EntityOf(d *Doc, q string) *searchapi.Entity {
	if d.JSONLD != "" {
		var v any
		if json.Unmarshal([]byte(d.JSONLD), &v) == nil {
			if obj := firstObject(v); obj != nil {
				e := &searchapi.Entity{URL: d.URL, Facts: []searchapi.Fact{}}
				str := func(k string) string { s, _ := obj[k].(string); return strings.TrimSpace(s) }
				e.Title = firstOf(str("name"), str("headline"), d.Title)
				e.Subtitle, _ = obj["@type"].(string)
				e.Description = firstOf(str("description"), d.Description)
				keys := make([]string, 0, len(obj))
				for k := range obj {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					if strings.HasPrefix(k, "@") || k == "name" || k == "headline" || k == "description" {
						continue
					}
					if s := factValue(obj[k]); s != "" && len(e.Facts) < 8 {
						e.Facts = append(e.Facts, searchapi.Fact{Label: label(k), Value: s})
					}
				}
				if e.Title != "" {
					return e
				}
			}
		}
	}
	if normalize(d.Title) == normalize(q) || strings.HasPrefix(normalize(d.Title), normalize(q)+" ") {
		desc := d.Description
		if desc == "" {
			for _, s := range sentences(d.Body) {
				if s.n >= 6 {
					desc = s.text
					break
				}
			}
		}
		if desc != "" {
			return &searchapi.Entity{Title: d.Title, Description: desc, Facts: []searchapi.Fact{}, URL: d.URL}
		}
	}
	return nil
}

func factValue(v any) string {
	switch t := v.(type) {
	case string:
		if len(t) > 200 {
			return ""
		}
		return t
	case float64:
		return fmt.Sprint(t)
	case map[string]any:
		if n, ok := t["name"].(string); ok {
			return n
		}
	case []any:
		var parts []string
		for _, x := range t {
			if s := factValue(x); s != "" {
				parts = append(parts, s)
			}
		}
		if s := strings.Join(parts, ", "); len(s) <= 200 {
			return s
		}
	}
	return ""
}

// label is a JSON-LD key as a label: datePublished → Date published.
func label(k string) string {
	var b strings.Builder
	for i, r := range k {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte(' ')
			b.WriteRune(r + 'a' - 'A')
			continue
		}
		if i == 0 && r >= 'a' && r <= 'z' {
			r -= 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func firstOf(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// FollowUps are the questions of the top pages (headings that ask) and
// their headings as "what is …" questions, without the query's own.
func FollowUps(docs []*Doc, q string, n int) []string {
	nq := normalize(q)
	seen := map[string]bool{nq: true}
	var asked, made []string
	for _, d := range docs {
		for _, h := range d.Headings {
			nh := normalize(h)
			if nh == "" || seen[nh] || nh == normalize(d.Title) || len(h) > 120 || boilerplate[nh] {
				continue
			}
			seen[nh] = true
			if strings.HasSuffix(strings.TrimSpace(h), "?") {
				asked = append(asked, strings.TrimSpace(h))
			} else if len(strings.Fields(h)) >= 2 && len(made) < n {
				made = append(made, "What is "+strings.TrimRight(strings.TrimSpace(h), ".:")+"?")
			}
		}
		for _, s := range sentences(d.Body) {
			if strings.HasSuffix(s.text, "?") && s.n >= 4 && s.n <= 20 && !seen[normalize(s.text)] {
				seen[normalize(s.text)] = true
				asked = append(asked, s.text)
			}
		}
	}
	out := append(asked, made...)
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// boilerplate are headings of page furniture, not of content.
var boilerplate = map[string]bool{"see also": true, "contents": true, "table of contents": true, "references": true,
	"navigation": true, "footnotes": true, "notes": true, "external links": true, "further reading": true, "related": true,
	"previous topic": true, "next topic": true, "this page": true, "quick search": true, "navigation menu": true}

// Related are queries made of the query and the words that occur most in
// the top pages' titles and headings besides the query's own.
func Related(docs []*Doc, q string, n int) []string {
	qt := map[string]bool{}
	for _, t := range searchapi.QueryTerms(q) {
		qt[t.Stem] = true
	}
	count := map[string]int{}
	form := map[string]string{}
	for _, d := range docs {
		seen := map[string]bool{}
		for _, w := range searchapi.Words(d.Title + " " + strings.Join(d.Headings, " ")) {
			lw := strings.ToLower(w.Text)
			s := searchapi.Stem(lw)
			if len(lw) < 3 || searchapi.Stop[lw] || qt[s] || seen[s] || strings.ContainsAny(lw, "0123456789") {
				continue
			}
			seen[s] = true
			count[s]++
			if _, ok := form[s]; !ok {
				form[s] = lw
			}
		}
	}
	type kv struct {
		s string
		n int
	}
	var all []kv
	for s, c := range count {
		if c >= 2 {
			all = append(all, kv{s, c})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].n != all[j].n {
			return all[i].n > all[j].n
		}
		return all[i].s < all[j].s
	})
	var out []string
	base := strings.TrimSpace(strings.ToLower(q))
	for _, x := range all {
		if len(out) == n {
			break
		}
		out = append(out, base+" "+form[x.s])
	}
	return out
}

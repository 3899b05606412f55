package search

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/blevesearch/bleve/v2"
	bsearch "github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"

	"github.com/trawlhq/trawl/internal/searchapi"
)

// Boosts weigh each field's BM25 score in a page's score. They were tuned
// on one corpus and evaluated on another (docs/search.md).
type Boosts struct {
	Title    float64
	Headings float64
	URL      float64
	Anchors  float64
	Body     float64
	// Phrase is the bonus of the query's words as a phrase, in the title
	// and in the body.
	Phrase float64
	// Passage weighs the best passage's proximity score in the second
	// stage (candidates re-ranked).
	Passage float64
	// ExactTitle is added when the title is the query, or starts with it.
	ExactTitle float64
	// Candidates is how many pages of the first stage the second stage
	// re-ranks (at least twice the results asked for).
	Candidates int
	// Ident weighs a match of an identifier of the query (a name joined
	// by _ or ., such as pg_trigger_depth or os.path.join) as the page
	// writes it, whole.
	Ident float64
	// Def weighs a query that is, whole, the name a line of the page
	// defines (a definition term, an API entry: "username",
	// "os.getcwd()", "create_user(username, …)"), or a heading.
	Def float64
	// Defines is added, in the second stage, to a candidate that
	// defines the query (whole) or one of its identifiers: a match of the
	// defs field counted once, however many names the page defines (in
	// BM25 the page that defines a hundred functions, which is where a
	// function is documented, weighs a hundredth of a page that defines
	// one).
	Defines float64
	// Authority weighs the link-authority prior (PageRank over the
	// archived link graph, in [0,1]) in the second stage.
	Authority float64
	// Fresh weighs recency (1 for a page dated now, halving every 30
	// days) for the queries that ask for it ("latest", "news", this
	// year…).
	Fresh float64
}

// DefaultBoosts are the tuned boosts (docs/search.md, "Tuning").
var DefaultBoosts = Boosts{Title: 1, Headings: 3, URL: 3, Anchors: 5, Body: 1, Phrase: 1, Passage: 16, ExactTitle: 2, Candidates: 80, Ident: 5, Def: 5, Defines: 8, Authority: 0.5, Fresh: 2}

// SetBoosts replaces the boosts (the evaluation's tuning).
func (ix *Index) SetBoosts(b Boosts) { ix.boosts = b }

// Boosts returns the boosts in use.
func (ix *Index) Boosts() Boosts { return ix.boosts }

// normalize is s lower-cased with its words joined by single spaces.
func normalize(s string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !isWord(r) && r != '.' && r != '_' }), " ")
}

// freshWords are the words by which a query asks for recent pages.
var freshWords = map[string]bool{"latest": true, "newest": true, "recent": true, "recently": true, "news": true,
	"today": true, "yesterday": true, "current": true, "currently": true, "new": true, "breaking": true, "update": true, "updates": true}

// asksFresh reports whether q asks for recent pages: a word of freshWords,
// or this year or last.
func asksFresh(q string, now time.Time) bool {
	for _, w := range searchapi.Words(q) {
		lw := strings.ToLower(w.Text)
		if freshWords[lw] {
			return true
		}
		if y, err := strconv.Atoi(lw); err == nil && (y == now.Year() || y == now.Year()-1) {
			return true
		}
	}
	return false
}

// firstStage is the query of the first stage: the query's words by BM25
// in each field, weighed by its boost; the identifiers of the query as
// the page writes them (idents) and the query whole as a name a page
// defines (defs); and, for a query of several words, the words as a
// phrase in the title and the body.
func firstStage(q string, b Boosts) query.Query {
	field := func(f string, boost float64) query.Query {
		m := bleve.NewMatchQuery(q)
		m.SetField(f)
		m.SetBoost(boost)
		return m
	}
	qs := []query.Query{
		field("title", b.Title), field("headings", b.Headings), field("urlwords", b.URL),
		field("anchors", b.Anchors), field("body", b.Body),
	}
	if b.Ident > 0 {
		for _, id := range identifiers(q) {
			tq := bleve.NewTermQuery(id)
			tq.SetField("idents")
			tq.SetBoost(b.Ident)
			qs = append(qs, tq)
		}
	}
	if b.Def > 0 {
		for _, k := range defKeys(q) {
			tq := bleve.NewTermQuery(k)
			tq.SetField("defs")
			tq.SetBoost(b.Def)
			qs = append(qs, tq)
		}
	}
	if len(strings.Fields(q)) > 1 && b.Phrase > 0 {
		for _, f := range []string{"title", "body"} {
			p := bleve.NewMatchPhraseQuery(q)
			p.SetField(f)
			p.SetBoost(b.Phrase)
			qs = append(qs, p)
		}
	}
	return bleve.NewDisjunctionQuery(qs...)
}

// defKeys are the keys (defKey) of the names a query may ask for the
// definition of: the query whole ("getcwd", "create user"), and each of
// its identifiers ("enable_hashagg" of "enable_hashagg configuration
// parameter").
func defKeys(q string) []string {
	var out []string
	if k := defKey(q); k != "" {
		out = append(out, k)
	}
	for _, id := range identifiers(q) {
		if k := defKey(id); k != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// definedBy are the pages whose defs field holds one of keys (at most
// max of them).
func (ix *Index) definedBy(ctx context.Context, keys []string, max int) (map[string]bool, error) {
	qs := make([]query.Query, len(keys))
	for i, k := range keys {
		tq := bleve.NewTermQuery(k)
		tq.SetField("defs")
		qs[i] = tq
	}
	req := bleve.NewSearchRequestOptions(bleve.NewDisjunctionQuery(qs...), max, 0, false)
	req.Score = "none"
	res, err := ix.b.SearchInContext(ctx, req)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(res.Hits))
	for _, h := range res.Hits {
		out[h.ID] = true
	}
	return out, nil
}

// secondStage re-ranks the first stage's candidates (read with
// rankFields), best first: each is a Hit with its best passage, scored
// by rescore.
func (ix *Index) secondStage(q string, terms []searchapi.Term, b Boosts, cands bsearch.DocumentMatchCollection, defined map[string]bool) []Hit {
	hits := make([]Hit, 0, len(cands))
	r := rescorer{b: b, nq: normalize(q), graph: ix.graph, defined: defined}
	if len(cands) > 0 {
		r.top = cands[0].Score
	}
	m := newMatcher(terms)
	r.fresh, r.now = asksFresh(q, ix.now()), ix.now()
	for _, h := range cands {
		d := docOf(h.Fields)
		sim, _ := strconv.ParseUint(fmt.Sprint(h.Fields["sim"]), 16, 64)
		p := m.bestPassage(d.Body)
		score := r.rescore(h.Score, d, p)
		hits = append(hits, Hit{Hit: searchapi.Hit{Title: d.Title, URL: d.URL, Type: d.Type, Date: d.Date, Sim: sim, Score: score}, doc: d, passage: p})
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].Score > hits[j].Score })
	return hits
}

// rescorer holds what the second stage scores every candidate of one
// query with.
type rescorer struct {
	b Boosts
	// top is the best first-stage score; nq the query normalized.
	top float64
	nq  string
	// fresh: the query asks for recent pages (asksFresh), as of now.
	fresh bool
	now   time.Time
	graph *graph
	// defined are the pages that define the query or one of its
	// identifiers (definedBy).
	defined map[string]bool
}

// rescore is a candidate's score in the second stage: its first-stage
// score plus its best passage's proximity, a title that is (or starts
// with) the query, its link authority and, when the query asks for it,
// its recency.
func (r *rescorer) rescore(score float64, d *Doc, p passage) float64 {
	b, top := r.b, r.top
	if top > 0 {
		// The second stage in units of the best first-stage score, so
		// the boosts keep their meaning across corpora.
		score += top * b.Passage * p.score
		if nt := normalize(d.Title); nt != "" && (nt == r.nq || strings.HasPrefix(nt, r.nq+" ")) {
			score += top * b.ExactTitle / 4
		}
		if r.defined[d.URL] {
			score += top * b.Defines
		}
		if b.Authority > 0 {
			score += top * b.Authority * r.graph.prior(d.URL)
		}
		if r.fresh && b.Fresh > 0 && !d.Date.IsZero() {
			age := r.now.Sub(d.Date).Hours() / 24
			score += top * b.Fresh * math.Exp2(-max(age, 0)/30)
		}
	}
	return score
}

// Package searchapi is the contract of a region's search between its gate
// and its cells: the cell routes the gate asks (LocalPath, GeneratePath),
// their messages, the rules both sides apply to a query (CheckQuery, the
// words and stems of words.go) and to results (Collapse, Quote, Kind). The
// index itself is cell/search; the gate's merge is gate/search.
package searchapi

import (
	"errors"
	"math/bits"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// Passage is the best passage of one result, for answers.
type Passage struct {
	Title string  `json:"title"`
	URL   string  `json:"url"`
	Text  string  `json:"text"`
	Score float64 `json:"score"` // 0 to 1: how well it holds the query
	Rank  int     `json:"rank"`  // the result's place, from 0
}

// SortPassages orders passages best first: by score, then by their
// result's place.
func SortPassages(ps []Passage) {
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].Score != ps[j].Score {
			return ps[i].Score > ps[j].Score
		}
		return ps[i].Rank < ps[j].Rank
	})
}

// Answer is a direct answer (docs/spec/hosted-api.md §2.4).
type Answer struct {
	// Kind is "generated" (written by the operator's model from the
	// passages) or "quoted" (the best passage, quoted as it is).
	Kind    string `json:"kind"`
	Text    string `json:"text"`
	Sources []Link `json:"sources"`
}

// Confident is the passage score an answer quoted without a model needs:
// every word of the question that carries meaning, close together.
const Confident = 0.85

// Quote is the answer made of the best passage, quoted and attributed,
// when it answers confidently (a passage of one of the top three
// results holding every meaningful word of the question close
// together); nil otherwise.
func Quote(ps []Passage) *Answer {
	for _, p := range ps {
		if p.Score < Confident {
			break
		}
		if p.Rank > 2 {
			continue
		}
		text := strings.TrimSpace(p.Text)
		return &Answer{Kind: "quoted", Text: "“" + text + "” — " + p.Title + " (" + p.URL + ")",
			Sources: []Link{{Title: p.Title, URL: p.URL}}}
	}
	return nil
}

// GeneratePath is the cell route where the gate has the operator's model
// write an answer from passages (GET /answer with a model).
const GeneratePath = "/search/generate"

// GenerateRequest is the body of POST /search/generate.
type GenerateRequest struct {
	Q        string    `json:"q"`
	Passages []Passage `json:"passages"`
}

// Generated is the model's answer: its text (empty when the passages do
// not answer the question), the passages it cited (indexes into the
// request's), and the tokens it took.
type Generated struct {
	Text      string `json:"text"`
	Cited     []int  `json:"cited"`
	InTokens  int    `json:"in_tokens"`
	OutTokens int    `json:"out_tokens"`
}

// MaxGeneratePassages bounds the passages of one request.
const MaxGeneratePassages = 8

// Collapse drops every hit whose text is a near-duplicate of a better one
// (simhashes within 3 bits); hits must be best first.
func Collapse[H interface{ Simhash() uint64 }](hits []H) []H {
	out := hits[:0]
	for _, h := range hits {
		dup := false
		for _, k := range out {
			if s := h.Simhash(); s != 0 && NearDup(s, k.Simhash()) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, h)
		}
	}
	return out
}

// MaxQuery is the longest query, in characters (docs/spec/hosted-api.md §8).
const MaxQuery = 512

// LocalPath is the cell route the gate asks each live cell of its region
// (gate/search merges the answers).
const LocalPath = "/search/local"

// Bounds of a cell's answers to its gate.
const (
	// MaxLocal bounds a cell's answer at LocalPath.
	MaxLocal = 32 << 20
	// MaxGenerated bounds a cell's answer at GeneratePath.
	MaxGenerated = 1 << 20
)

// Local is a cell's answer to the gate.
type Local struct {
	Results []Hit  `json:"results"`
	Total   uint64 `json:"total"`
	// Correction is this cell's spelling correction of the query (spell=1).
	Correction *Correction `json:"correction,omitempty"`
	// Rich holds what this cell's own top pages give the rich block
	// (rich=1): entity, follow-up questions, related queries.
	Rich *Rich `json:"rich,omitempty"`
	// Passages are the best passages of its results (passages=1), for
	// answers.
	Passages []Passage `json:"passages,omitempty"`
}

// Options of a local search.
type Options struct {
	N        int
	Rich     bool
	Spell    bool
	Passages bool
}

// CheckQuery refuses an empty query or one over MaxQuery characters.
func CheckQuery(q string) error {
	switch {
	case q == "":
		return errors.New("q is required")
	case utf8.RuneCountInString(q) > MaxQuery:
		return errors.New("q is longer than 512 characters")
	}
	return nil
}

// Correction is a spelling correction of a query from the index's own
// term dictionary, and how often the corrected words occur (the gate keeps
// the best-attested of its cells').
type Correction struct {
	Query string `json:"query"`
	Freq  uint64 `json:"freq"`
}

// Rich is the rich block (docs/api.md, GET /search): every key only when
// it exists.
type Rich struct {
	DidYouMean        string   `json:"did_you_mean,omitempty"`
	RelatedQueries    []string `json:"related_queries,omitempty"`
	Entity            *Entity  `json:"entity,omitempty"`
	News              []Link   `json:"news,omitempty"`
	Videos            []Link   `json:"videos,omitempty"`
	Discussions       []Link   `json:"discussions,omitempty"`
	FollowUpQuestions []string `json:"follow_up_questions,omitempty"`
	// Answer is a direct answer when one is ready (the best passage of
	// the best page, when it answers the query well).
	Answer *Answer `json:"answer,omitempty"`
}

// Link is an item of news, videos, discussions.
type Link struct {
	Title string `json:"title"`
	URL   string `json:"url"`
}

// Entity is the entity block: from the best result's JSON-LD, or its
// definition (its first sentence).
type Entity struct {
	Title       string `json:"title"`
	Subtitle    string `json:"subtitle,omitempty"`
	Description string `json:"description,omitempty"`
	Facts       []Fact `json:"facts"`
	URL         string `json:"url,omitempty"`
}

// Fact is one {label, value} of an entity.
type Fact struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

// Kind of a page for the news, videos and discussions lists.
func Kind(typ string) string {
	switch typ {
	case "NewsArticle", "ReportageNewsArticle", "AnalysisNewsArticle", "BlogPosting", "LiveBlogPosting":
		return "news"
	case "VideoObject", "Clip", "Movie":
		return "videos"
	case "DiscussionForumPosting", "QAPage", "Question", "SocialMediaPosting", "Comment":
		return "discussions"
	}
	return ""
}

// NearDup reports whether two simhashes are of near-duplicate texts.
func NearDup(a, b uint64) bool { return bits.OnesCount64(a^b) <= 3 }

// Hit is one ranked page of a cell's answer.
type Hit struct {
	Title   string  `json:"title"`
	URL     string  `json:"url"`
	Snippet string  `json:"snippet"`
	Score   float64 `json:"score"`
	// Type is the page's schema.org type, when it has one; Date its date.
	Type string    `json:"type,omitempty"`
	Date time.Time `json:"date,omitzero"`
	// Sim is the simhash of the page's text: near-duplicates are within a
	// few bits of each other (the gate collapses them across cells).
	Sim uint64 `json:"sim,string"`
}

// Simhash is h.Sim (for Collapse).
func (h Hit) Simhash() uint64 { return h.Sim }

package sitemap

import (
	"net/url"
	"slices"
	"strings"
	"unicode"
)

// Field weights of the search ranking (package doc).
const (
	weightURL         = 3
	weightTitle       = 2
	weightDescription = 1
	minPartLen        = 3 // shortest term matched as part of another
)

// rank orders links by relevance to search (package doc), stably: it
// returns a new slice and leaves links as they were.
func rank(links []Link, search string) []Link {
	q := distinct(terms(search))
	if len(q) == 0 {
		return links
	}
	type scored struct {
		matched, urlTerms int
		score             float64
	}
	s := make([]scored, len(links))
	for i, l := range links {
		ut := urlTerms(l.URL)
		tt, dt := terms(l.Title), terms(l.Description)
		s[i].urlTerms = len(ut)
		for _, t := range q {
			best := max(weightURL*match(t, ut), weightTitle*match(t, tt), weightDescription*match(t, dt))
			if best > 0 {
				s[i].matched++
				s[i].score += best
			}
		}
	}
	idx := make([]int, len(links))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		x, y := s[a], s[b]
		switch {
		case x.matched != y.matched:
			return y.matched - x.matched
		case x.score != y.score:
			if x.score > y.score {
				return -1
			}
			return 1
		case x.matched > 0 && x.urlTerms != y.urlTerms:
			return x.urlTerms - y.urlTerms
		}
		return 0
	})
	out := make([]Link, len(links))
	for i, j := range idx {
		out[i] = links[j]
	}
	return out
}

// match is 1 when field has term t; when a term of field contains t
// ("table" in "createtable") or begins t ("tutorial" for "tutorials"),
// the shorter being at least minPartLen long, it is half the share of the
// longer that the shorter covers; else 0.
func match(t string, field []string) float64 {
	best := 0.0
	for _, f := range field {
		switch {
		case f == t:
			return 1
		case len(t) >= minPartLen && strings.Contains(f, t):
			best = max(best, 0.5*float64(len(t))/float64(len(f)))
		case len(f) >= minPartLen && strings.HasPrefix(t, f):
			best = max(best, 0.5*float64(len(f))/float64(len(t)))
		}
	}
	return best
}

// urlTerms are the terms of a normalised URL: its host's labels left of
// the registrable domain (not "www"), its path and its query, decoded.
func urlTerms(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return terms(raw)
	}
	var out []string
	for _, l := range subdomainLabels(u.Hostname()) {
		out = append(out, terms(l)...)
	}
	out = append(out, terms(unescape(u.EscapedPath(), url.PathUnescape))...)
	return append(out, terms(unescape(u.RawQuery, url.QueryUnescape))...)
}

func unescape(s string, f func(string) (string, error)) string {
	if d, err := f(s); err == nil {
		return d
	}
	return s
}

// terms splits s into lower-case runs of letters and digits, also split
// where the case changes: "getStarted" and "HTMLParser" are two terms
// each.
func terms(s string) []string {
	var out []string
	r := []rune(s)
	start := -1
	flush := func(end int) {
		if start >= 0 && end > start {
			out = append(out, strings.ToLower(string(r[start:end])))
		}
		start = -1
	}
	for i, c := range r {
		if !unicode.IsLetter(c) && !unicode.IsDigit(c) {
			flush(i)
			continue
		}
		if start < 0 {
			start = i
			continue
		}
		prev := r[i-1]
		switch {
		case unicode.IsLower(prev) && unicode.IsUpper(c): // getStarted
			flush(i)
			start = i
		case unicode.IsUpper(prev) && unicode.IsUpper(c) && i+1 < len(r) && unicode.IsLower(r[i+1]): // HTMLParser
			flush(i)
			start = i
		}
	}
	flush(len(r))
	return out
}

func distinct(s []string) []string {
	seen := map[string]bool{}
	out := s[:0]
	for _, t := range s {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

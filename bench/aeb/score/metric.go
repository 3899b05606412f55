// Package score is the article extraction benchmark's metric (evaluate.py),
// reimplemented, and the text of Markdown that it scores.
package score

import (
	"strings"
	"unicode"
)

// The article extraction benchmark's metric (evaluate.py in the data
// directory), reimplemented: 4-word shingles of \w+ tokens, TP/FP/FN per
// page normalised to sum 1, precision and recall averaged over pages, F1
// of the averages.

// Score is one page's normalised TP, FP and FN.
type Score struct{ tp, fp, fn float64 }

// isWord is Python's re \w with re.UNICODE: str.isalnum() or '_'. isalnum
// is the letter categories (L*) and the numeric ones (Nd, Nl, No); marks
// are not word characters.
func isWord(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r)
}

// Tokens are the \w+ runs of s, case kept (the IGNORECASE flag of the
// original does not change what \w matches).
func Tokens(s string) []string {
	var out []string
	start := -1
	for i, r := range s {
		if isWord(r) {
			if start < 0 {
				start = i
			}
		} else if start >= 0 {
			out = append(out, s[start:i])
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, s[start:])
	}
	return out
}

// shingles counts the n-grams of s's tokens; a text of fewer than n tokens
// is one shingle of all of them, an empty text has none.
func shingles(s string, n int) map[string]int {
	t := Tokens(s)
	m := map[string]int{}
	for i := 0; i < max(1, len(t)-n+1); i++ {
		g := t[i:min(i+n, len(t))]
		if len(g) == 0 {
			continue
		}
		m[strings.Join(g, "\x00")]++
	}
	return m
}

// Match is string_shingle_matching.
func Match(truth, pred string) Score {
	ts, ps := shingles(truth, 4), shingles(pred, 4)
	var s Score
	for k, tc := range ts {
		pc := ps[k]
		s.tp += float64(min(tc, pc))
		s.fp += float64(max(0, pc-tc))
		s.fn += float64(max(0, tc-pc))
	}
	for k, pc := range ps {
		if _, ok := ts[k]; !ok {
			s.fp += float64(pc)
		}
	}
	if sum := s.tp + s.fp + s.fn; sum > 0 {
		s.tp, s.fp, s.fn = s.tp/sum, s.fp/sum, s.fn/sum
	}
	return s
}

func Precision(s Score) float64 {
	if s.fp == 0 && s.fn == 0 {
		return 1
	}
	if s.tp == 0 && s.fp == 0 {
		return 0
	}
	return s.tp / (s.tp + s.fp)
}

func Recall(s Score) float64 {
	if s.fp == 0 && s.fn == 0 {
		return 1
	}
	if s.tp == 0 && s.fn == 0 {
		return 0
	}
	return s.tp / (s.tp + s.fn)
}

// Metrics is metrics_from_tp_fp_fns: mean precision over pages that
// predicted something, mean recall over pages with a truth, F1 of the two.
func Metrics(ss []Score) (f1, p, r float64) {
	var np, nr int
	for _, s := range ss {
		if s.tp+s.fp > 0 {
			p += Precision(s)
			np++
		}
		if s.tp+s.fn > 0 {
			r += Recall(s)
			nr++
		}
	}
	if np > 0 {
		p /= float64(np)
	}
	if nr > 0 {
		r /= float64(nr)
	}
	if p+r > 0 {
		f1 = 2 * p * r / (p + r)
	}
	return f1, p, r
}

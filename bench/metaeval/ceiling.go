package main

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/net/html"

	"github.com/trawlhq/trawl/internal/textscore"
)

// The ceiling: how many of the truth's values the stripped page shows at
// all. An extractor that reads the page (not its removed tags) can only
// be right where the value is there to read, so this is an upper bound of
// every extractor's score in the stripped setting, and the honest measure
// of how far a goal such as "≥ 0.95 each" is reachable on a truth.
//
// It is a generous bound, never a strict one: a value counts as shown when
// it appears anywhere — any text node outside script and style (sidebars,
// footers, comments included), the <title>, or the values of the
// attributes a reader may use (datetime, title, alt, href, the page URL).
//   - headline: the normalised headline is a part of the normalised text;
//   - author: one author's letters and digits appear, in order, in the
//     text's letters and digits (so "/author/jane-doe" shows "Jane Doe");
//   - date: some day, month and year in any order, with the month as a
//     number or a name in one of eleven languages, within four tokens of
//     each other, or an ISO or compact (yyyymmdd) date, reads as the day.
//
// Generous on purpose: a ceiling that is too high only makes the gap to
// it look smaller than it is. It reads dates with its own loose scan, not
// cell/extract's parser, so that the bound does not share the
// extractor's blind spots.

// shown is what one stripped page shows.
type shown struct {
	text string          // normHeadline form of the text and the title
	name string          // textscore.NormName of text and attributes, spaces removed
	days map[string]bool // every calendar day a form in text, attributes or URL reads as
}

var ceilingAttrs = map[string]bool{"datetime": true, "title": true, "alt": true, "href": true, "content": true, "value": true}

func shownBy(src, pageURL string) shown {
	root, err := html.Parse(strings.NewReader(src))
	if err != nil {
		return shown{}
	}
	var text, attrs strings.Builder
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		switch n.Type {
		case html.TextNode:
			text.WriteString(n.Data)
			text.WriteByte(' ')
			return
		case html.ElementNode:
			switch n.Data {
			case "script", "style", "template":
				return
			}
			for _, a := range n.Attr {
				if ceilingAttrs[strings.ToLower(a.Key)] {
					attrs.WriteString(a.Val)
					attrs.WriteByte(' ')
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
	all := text.String() + " " + attrs.String() + " " + pageURL
	return shown{
		text: normHeadline(text.String()),
		name: strings.ReplaceAll(textscore.NormName(all), " ", ""),
		days: daysIn(all),
	}
}

// shows: the page shows field fi's value of truth t.
func (s shown) shows(fi int, t truth) bool {
	switch {
	case strings.HasPrefix(fields[fi].name, "headline"):
		h := normHeadline(t.headline)
		return h != "" && strings.Contains(s.text, h)
	case strings.HasPrefix(fields[fi].name, "author"):
		for _, a := range t.authors {
			if n := strings.ReplaceAll(textscore.NormName(reBy.ReplaceAllString(a, "")), " ", ""); n != "" && strings.Contains(s.name, n) {
				return true
			}
		}
		return false
	case strings.HasPrefix(fields[fi].name, "date"):
		return s.days[t.date]
	}
	return false
}

var (
	reDateTok  = regexp.MustCompile(`\p{L}+|\d+`)
	reISOIn    = regexp.MustCompile(`(19\d\d|20\d\d)[-/._](\d{1,2})[-/._](\d{1,2})`)
	reCompact  = regexp.MustCompile(`(?:^|\D)(19\d\d|20\d\d)(\d\d)(\d\d)(?:\D|$)`)
	monthNames = func() map[string]int {
		m := map[string]int{}
		for _, lang := range []string{
			"january february march april may june july august september october november december",
			"januar februar märz april mai juni juli august september oktober november dezember",
			"janvier février mars avril mai juin juillet août septembre octobre novembre décembre",
			"enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre",
			"gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre novembre dicembre",
			"janeiro fevereiro março abril maio junho julho agosto setembro outubro novembro dezembro",
			"januari februari maart april mei juni juli augustus september oktober november december",
			"stycznia lutego marca kwietnia maja czerwca lipca sierpnia września października listopada grudnia",
			"января февраля марта апреля мая июня июля августа сентября октября ноября декабря",
			"januari februari mars april maj juni juli augusti september oktober november december",
			"ocak şubat mart nisan mayıs haziran temmuz ağustos eylül ekim kasım aralık",
		} {
			for i, w := range strings.Fields(lang) {
				m[w] = i + 1
				if r := []rune(w); len(r) > 3 {
					if _, ok := m[string(r[:3])]; !ok {
						m[string(r[:3])] = i + 1
					}
				}
			}
		}
		m["sept"] = 9
		return m
	}()
)

// daysIn reads every calendar day s could be saying, generously.
func daysIn(s string) map[string]bool {
	days := map[string]bool{}
	add := func(y, mo, d int) {
		if y >= 1990 && y <= 2100 && mo >= 1 && mo <= 12 && d >= 1 && d <= 31 {
			days[fmt.Sprintf("%04d-%02d-%02d", y, mo, d)] = true
		}
	}
	for _, re := range []*regexp.Regexp{reISOIn, reCompact} {
		for _, m := range re.FindAllStringSubmatch(s, -1) {
			y, _ := strconv.Atoi(m[1])
			mo, _ := strconv.Atoi(m[2])
			d, _ := strconv.Atoi(m[3])
			add(y, mo, d)
		}
	}
	toks := reDateTok.FindAllString(strings.ToLower(s), -1)
	for i, t := range toks {
		y, err := strconv.Atoi(t)
		if err != nil {
			continue
		}
		switch {
		case len(t) == 4 && y >= 1990 && y <= 2100:
		case len(t) == 2: // "03.05.19": a two-digit year after a day and a month
			y += 2000
		default:
			continue
		}
		lo, hi := max(i-4, 0), min(i+5, len(toks))
		for a := lo; a < hi; a++ {
			mo, ok := monthNames[toks[a]]
			if !ok {
				if n, err := strconv.Atoi(toks[a]); err == nil && len(toks[a]) <= 2 {
					mo = n
				}
			}
			if a == i || mo < 1 || mo > 12 {
				continue
			}
			for b := lo; b < hi; b++ {
				if b == i || b == a || len(toks[b]) > 2 {
					continue
				}
				if d, err := strconv.Atoi(toks[b]); err == nil {
					if len(t) == 2 && (b > i || a > i) {
						continue // a two-digit year comes last
					}
					add(y, mo, d)
				}
			}
		}
	}
	return days
}

// reportCeiling prints, per truth and field, the share of pages whose
// stripped page shows the truth's value, beside the best extractor.
func reportCeiling(w io.Writer, rs []result) {
	fmt.Fprintln(w, "\nWhat the stripped page shows at all (the ceiling of any extractor that reads the page, generous; held-out and all pages):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| truth | field | shown, held-out | shown, all | trawl held-out | go-trafilatura held-out |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, tr := range truths {
		for fi, f := range fields {
			if f.name == "headline F1≥0.9" {
				continue
			}
			var k, n [2]int
			for _, r := range rs {
				t := tr.of(r)
				if !f.has(t) {
					continue
				}
				i := 0
				if r.d.heldOut {
					i = 1
				}
				n[i]++
				if r.shown.shows(fi, t) {
					k[i]++
				}
			}
			cell := func(k, n int) string {
				if n == 0 {
					return "–"
				}
				return fmt.Sprintf("%.3f (%d/%d)", float64(k)/float64(n), k, n)
			}
			row := fmt.Sprintf("| %s | %s | %s | %s |", tr.name, f.name, cell(k[1], n[1]), cell(k[0]+k[1], n[0]+n[1]))
			for _, e := range extractors {
				ek, en := tally(rs, tr.of, "stripped", e, fi)
				row += " " + cell(ek[1], en[1]) + " |"
			}
			fmt.Fprintln(w, row)
		}
	}
}

package extract

import (
	"math"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/trawlhq/trawl/internal/htmlread"
)

// Typed values read from text: numbers with separators and currencies,
// written dates (→ ISO 8601), booleans, e-mail addresses, phone numbers
// and URLs. Each parser takes the first such value in its text and says
// whether it found one; none guesses.

var (
	reNumber = regexp.MustCompile(`[-−]?\d[\d.,' \x{00a0}\x{202f}]*\d|[-−]?\d`)
	reEmail  = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`)
	rePhone  = regexp.MustCompile(`(?:\+\d{1,3}[\s.-]?)?(?:\(\d{1,4}\)[\s.-]?)?\d{2,4}(?:[\s.-]\d{2,4}){1,4}`)
	reURL    = regexp.MustCompile(`https?://[^\s<>"')\]]+`)
	// A currency symbol or code next to an amount.
	reMoney = regexp.MustCompile(`(?i)(?:[$€£¥₹₩]|\b(?:usd|eur|gbp|jpy|chf|cad|aud|inr|sek|nok|dkk|pln)\b)\s?[-−]?\d[\d.,' \x{00a0}]*\d?|[-−]?\d[\d.,' \x{00a0}]*\d?\s?(?:[$€£¥₹₩]|\b(?:usd|eur|gbp|jpy|chf|cad|aud|inr|sek|nok|dkk|pln)\b)`)
)

// parseNumber reads the first number of s: "1,299.00" and "1.299,00" are
// 1299, "$ 12" is 12, "4.5 out of 5" is 4.5.
func parseNumber(s string) (float64, bool) {
	m := reNumber.FindString(s)
	if m == "" {
		return 0, false
	}
	neg := strings.HasPrefix(m, "-") || strings.HasPrefix(m, "−")
	m = strings.TrimLeft(m, "-−")
	m = strings.Map(func(r rune) rune {
		if r == ' ' || r == '\'' || r == '\u00a0' || r == '\u202f' {
			return -1
		}
		return r
	}, m)
	lastDot, lastComma := strings.LastIndexByte(m, '.'), strings.LastIndexByte(m, ',')
	switch {
	case lastDot >= 0 && lastComma >= 0:
		if lastComma > lastDot { // 1.299,00
			m = strings.ReplaceAll(m, ".", "")
			m = strings.Replace(m, ",", ".", 1)
		} else {
			m = strings.ReplaceAll(m, ",", "")
		}
	case lastComma >= 0:
		if strings.Count(m, ",") == 1 && len(m)-lastComma-1 != 3 { // 12,50
			m = strings.Replace(m, ",", ".", 1)
		} else { // 1,299 or 1,299,000
			m = strings.ReplaceAll(m, ",", "")
		}
	case strings.Count(m, ".") > 1: // 1.299.000
		m = strings.ReplaceAll(m, ".", "")
	}
	f, err := strconv.ParseFloat(m, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	if neg {
		f = -f
	}
	return f, true
}

// findMoney returns the first amount with a currency in s.
func findMoney(s string) (string, bool) {
	// The regexp runs only around each currency sign or code, in text
	// order: a long text costs a scan, not a regexp pass.
	from := 0
	for from < len(s) {
		i := currencyAt(s, from)
		if i < 0 {
			return "", false
		}
		lo, hi := max(0, i-32), min(len(s), i+40)
		for lo > 0 && !utf8.RuneStart(s[lo]) {
			lo--
		}
		for hi < len(s) && !utf8.RuneStart(s[hi]) {
			hi++
		}
		if m := reMoney.FindString(s[lo:hi]); m != "" {
			return m, true
		}
		from = i + 1
	}
	return "", false
}

// currencyAt is the index of the first currency sign or code of s at or
// after from, or -1.
func currencyAt(s string, from int) int {
	best := -1
	if j := strings.IndexAny(s[from:], "$€£¥₹₩"); j >= 0 {
		best = from + j
	}
	end := len(s)
	if best >= 0 {
		end = best
	}
	for i := from; i+3 <= end; i++ {
		c := s[i] | 0x20
		if c < 'a' || c > 'z' || (i > 0 && isLetter(s[i-1])) || (i+3 < len(s) && isLetter(s[i+3])) {
			continue
		}
		switch strings.ToLower(s[i : i+3]) {
		case "usd", "eur", "gbp", "jpy", "chf", "cad", "aud", "inr", "sek", "nok", "dkk", "pln":
			return i
		}
	}
	return best
}

func isLetter(b byte) bool { b |= 0x20; return b >= 'a' && b <= 'z' }

// monthNames are the months' names and their usual abbreviations in
// the languages of the pages trawl reads most: English, German, French,
// Spanish, Italian, Portuguese, Dutch, and the genitive forms Polish and
// Russian write a date with ("15 października 2023", "15 октября 2023").
var monthNames = [12][]string{
	{"january", "jan", "januar", "jänner", "janvier", "janv", "enero", "ene", "gennaio", "gen", "janeiro", "januari", "stycznia", "styczeń", "января", "янв"},
	{"february", "feb", "februar", "février", "févr", "fevrier", "febrero", "febbraio", "fevereiro", "fev", "februari", "lutego", "luty", "февраля", "фев"},
	{"march", "mar", "märz", "mär", "maerz", "mars", "marzo", "março", "marco", "maart", "mrt", "marca", "marzec", "марта", "мар"},
	{"april", "apr", "avril", "avr", "abril", "abr", "aprile", "kwietnia", "kwiecień", "апреля", "апр"},
	{"may", "mai", "mayo", "maggio", "mag", "maio", "mei", "maja", "maj", "мая"},
	{"june", "jun", "juni", "juin", "junio", "giugno", "giu", "junho", "czerwca", "czerwiec", "июня", "июн"},
	{"july", "jul", "juli", "juillet", "juil", "julio", "luglio", "lug", "julho", "lipca", "lipiec", "июля", "июл"},
	{"august", "aug", "août", "aout", "agosto", "ago", "augustus", "sierpnia", "sierpień", "августа", "авг"},
	{"september", "sep", "sept", "septembre", "septiembre", "setiembre", "settembre", "set", "setembro", "września", "wrzesień", "сентября", "сен"},
	{"october", "oct", "oktober", "okt", "octobre", "octubre", "ottobre", "ott", "outubro", "out", "października", "październik", "октября", "окт"},
	{"november", "nov", "novembre", "noviembre", "novembro", "listopada", "listopad", "ноября", "ноя"},
	{"december", "dec", "dezember", "dez", "décembre", "decembre", "déc", "diciembre", "dic", "dicembre", "dezembro", "grudnia", "grudzień", "декабря", "дек"},
}

var months = func() map[string]time.Month {
	m := map[string]time.Month{}
	for i, names := range monthNames {
		for _, n := range names {
			m[n] = time.Month(i + 1)
		}
	}
	return m
}()

// monthRe matches any name of monthNames, longest first, with an
// optional abbreviation dot. Go's \b is ASCII only: the expressions
// that use it check the letters around a name themselves.
var monthRe = func() string {
	var all []string
	for n := range months {
		all = append(all, regexp.QuoteMeta(n))
	}
	sort.Slice(all, func(i, j int) bool {
		if len(all[i]) != len(all[j]) {
			return len(all[i]) > len(all[j])
		}
		return all[i] < all[j]
	})
	return `(` + strings.Join(all, "|") + `)\.?`
}()

// monthOf is the month a matched name stands for.
func monthOf(name string) int {
	return int(months[strings.TrimSuffix(strings.ToLower(name), ".")])
}

var (
	reISODate = regexp.MustCompile(`\b(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?\s*(Z|[+-]\d{2}:?\d{2})?)?`)
	reMDY     = regexp.MustCompile(`(?i)(?:^|[^\p{L}])` + monthRe + `\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b`)
	// "19 November 2019", "15. Oktober 2023", "12 de marzo de 2019",
	// "1er mars 2020", "3rd of March 2024".
	reDMY       = regexp.MustCompile(`(?i)\b(\d{1,2})(?:st|nd|rd|th|er|º|ª)?\.?\s+(?:of\s+|de\s+)?` + monthRe + `,?\s+(?:de\s+|del\s+)?(\d{4})\b`)
	reSlashDate = regexp.MustCompile(`\b(\d{4})[/.](\d{1,2})[/.](\d{1,2})\b|\b(\d{1,2})/(\d{1,2})/(\d{4})\b`)
	// "06.11.2023", "01. 11. 2023", "6-11-2023": day first wherever it
	// is written with dots or dashes.
	reDotDate   = regexp.MustCompile(`\b(\d{1,2})\.\s?(\d{1,2})\.\s?(\d{4})\b|\b(\d{1,2})-(\d{1,2})-(\d{4})\b`)
	reShortDate = regexp.MustCompile(`\b(\d{1,2})/(\d{1,2})/(\d{2})\b`)
	// "19.10.19, 08:16 Uhr": d.m.yy, day first, two digits of the year.
	reShortDotDate = regexp.MustCompile(`(?:^|[^\d.])(\d{1,2})\.(\d{1,2})\.(\d{2})(?:$|[^\d.]|\.(?:$|\s))`)
	rePathDate     = regexp.MustCompile(`/(20\d{2}|19\d{2})[/-](\d{1,2})[/-](\d{1,2})(?:/|[-_][^/\d]|$)`)
)

// parseDate reads the first date of s in a common written form and
// returns it in ISO 8601: "2019-11-19", or with its time and offset when
// s has them ("2019-11-19T10:30:00-05:00"). Numeric d/m/y dates are read
// as month first when the first number cannot be a day otherwise.
func parseDate(s string) (string, bool) { return parseDateIn(s, false) }

// parseDateIn is parseDate for a page whose language writes the day
// first in d/m/y ("03/05/2022" is 3 May in Spanish, German, French…):
// dayFirst reads a slashed date so unless its first number cannot be a
// day.
func parseDateIn(s string, dayFirst bool) (string, bool) {
	if !strings.ContainsAny(s, "0123456789") {
		return "", false // every form has digits: most text has none
	}
	best, bestAt := "", -1
	try := func(at int, iso string) {
		if iso != "" && (bestAt < 0 || at < bestAt) {
			best, bestAt = iso, at
		}
	}
	// Every form but m/d/yy has a four-digit year: text without one
	// skips the costlier expressions (the month names' alternation).
	if hasYear(s) {
		if m := reISODate.FindStringSubmatchIndex(s); m != nil {
			g := func(i int) string {
				if m[2*i] < 0 {
					return ""
				}
				return s[m[2*i]:m[2*i+1]]
			}
			y, mo, d := atoi(g(1)), atoi(g(2)), atoi(g(3))
			iso := ymd(y, mo, d)
			if iso != "" && g(4) != "" {
				sec := g(6)
				if sec == "" {
					sec = "00"
				}
				iso += "T" + pad2(g(4)) + ":" + g(5) + ":" + pad2(sec)
				if z := g(7); z == "Z" {
					iso += "Z"
				} else if z != "" {
					if !strings.Contains(z, ":") {
						z = z[:3] + ":" + z[3:]
					}
					iso += z
				}
			}
			try(m[0], iso)
		}
		if m := reMDY.FindStringSubmatchIndex(s); m != nil {
			try(m[2], ymd(atoi(s[m[6]:m[7]]), monthOf(s[m[2]:m[3]]), atoi(s[m[4]:m[5]])))
		}
		if m := reDMY.FindStringSubmatchIndex(s); m != nil {
			try(m[0], ymd(atoi(s[m[6]:m[7]]), monthOf(s[m[4]:m[5]]), atoi(s[m[2]:m[3]])))
		}
		if m := reDotDate.FindStringSubmatchIndex(s); m != nil {
			if m[2] >= 0 {
				try(m[0], ymd(atoi(s[m[6]:m[7]]), atoi(s[m[4]:m[5]]), atoi(s[m[2]:m[3]])))
			} else {
				try(m[0], ymd(atoi(s[m[12]:m[13]]), atoi(s[m[10]:m[11]]), atoi(s[m[8]:m[9]])))
			}
		}
		if m := reSlashDate.FindStringSubmatchIndex(s); m != nil {
			if m[2] >= 0 {
				try(m[0], ymd(atoi(s[m[2]:m[3]]), atoi(s[m[4]:m[5]]), atoi(s[m[6]:m[7]])))
			} else {
				a, b, y := atoi(s[m[8]:m[9]]), atoi(s[m[10]:m[11]]), atoi(s[m[12]:m[13]])
				if a > 12 || dayFirst && b <= 12 { // day first
					a, b = b, a
				}
				try(m[0], ymd(y, a, b))
			}
		}
	}
	if bestAt < 0 {
		// m/d/yy, the last resort: "11/19/19 06:56 AM EST".
		if m := reShortDate.FindStringSubmatchIndex(s); m != nil {
			a, b, y := atoi(s[m[2]:m[3]]), atoi(s[m[4]:m[5]]), atoi(s[m[6]:m[7]])
			if y < 70 {
				y += 2000
			} else {
				y += 1900
			}
			if a > 12 {
				a, b = b, a
			}
			try(m[0], ymd(y, a, b))
		}
		if m := reShortDotDate.FindStringSubmatchIndex(s); m != nil {
			d, mo, y := atoi(s[m[2]:m[3]]), atoi(s[m[4]:m[5]]), atoi(s[m[6]:m[7]])
			if y < 70 {
				y += 2000
			} else {
				y += 1900
			}
			try(m[2], ymd(y, mo, d))
		}
	}
	return best, bestAt >= 0
}

// dateFromURL reads a /yyyy/mm/dd/ path date.
func dateFromURL(u string) (string, bool) {
	m := rePathDate.FindStringSubmatch(u)
	if m == nil {
		return "", false
	}
	iso := ymd(atoi(m[1]), atoi(m[2]), atoi(m[3]))
	return iso, iso != ""
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

func pad2(s string) string {
	if len(s) == 1 {
		return "0" + s
	}
	return s
}

// ymd is the ISO date of y-m-d, or "" when it is no date.
func ymd(y, m, d int) string {
	if y < 1000 || y > 9999 || m < 1 || m > 12 || d < 1 || d > 31 {
		return ""
	}
	t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
	if t.Day() != d {
		return ""
	}
	return t.Format("2006-01-02")
}

// parseBool reads yes/no, true/false, in stock/out of stock and their
// kin, and schema.org availability values.
func parseBool(s string) (bool, bool) {
	v := strings.ToLower(htmlread.Collapse(s))
	v = strings.TrimPrefix(strings.TrimPrefix(v, "https://schema.org/"), "http://schema.org/")
	switch v {
	case "yes", "y", "true", "1", "on", "instock", "in stock", "available", "in_stock", "✓", "✔", "included", "limitedavailability", "onlineonly", "instoreonly", "presale", "preorder":
		return true, true
	case "no", "n", "false", "0", "off", "outofstock", "out of stock", "sold out", "soldout", "unavailable", "not available", "discontinued", "✗", "✘", "none", "out_of_stock":
		return false, true
	}
	switch {
	case strings.Contains(v, "out of stock") || strings.Contains(v, "sold out") || strings.Contains(v, "unavailable") || strings.Contains(v, "not available"):
		return false, true
	case strings.Contains(v, "in stock") || strings.HasPrefix(v, "available"):
		return true, true
	}
	return false, false
}

func findEmail(s string) (string, bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "mailto:")
	m := reEmail.FindString(s)
	return m, m != ""
}

// findPhone returns the first phone number of s (7 to 15 digits).
func findPhone(s string) (string, bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "tel:")
	for _, m := range rePhone.FindAllString(s, 8) {
		n := 0
		for _, r := range m {
			if unicode.IsDigit(r) {
				n++
			}
		}
		if n >= 7 && n <= 15 {
			if _, isDate := parseDate(m); isDate {
				continue
			}
			return strings.TrimSpace(m), true
		}
	}
	return "", false
}

// absURL makes ref absolute against base; "" when it is no http(s) URL.
func absURL(base *url.URL, ref string) string {
	ref = strings.TrimSpace(ref)
	if ref == "" || strings.HasPrefix(ref, "javascript:") || strings.HasPrefix(ref, "data:") {
		return ""
	}
	u, err := url.Parse(ref)
	if err != nil {
		return ""
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return ""
	}
	return u.String()
}

// dayFirstLang: a page in this language (<html lang>) writes d/m/y.
// English is month first unless it is British, Irish, Australian,
// New Zealand, Indian or South African English.
func dayFirstLang(lang string) bool {
	l := strings.ToLower(strings.TrimSpace(lang))
	if l == "" {
		return false
	}
	if l == "en" || strings.HasPrefix(l, "en-") || strings.HasPrefix(l, "en_") {
		switch strings.TrimLeft(l[2:], "-_") {
		case "gb", "uk", "ie", "au", "nz", "in", "za":
			return true
		}
		return false
	}
	return true
}

// hasYear: s has four digits in a row.
func hasYear(s string) bool {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			if n++; n == 4 {
				return true
			}
		} else {
			n = 0
		}
	}
	return false
}

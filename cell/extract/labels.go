package extract

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/trawlhq/trawl/internal/htmlread"
)

// "Label: value" lines of the visible text, bylines and author names.

var (
	reLabel = regexp.MustCompile(`^([A-Za-z\p{L}][\p{L}\p{N} ./&()'-]{0,40}?)\s*[:：]\s+(\S.{0,300})$`)
	reBy    = regexp.MustCompile(`^(?i:by|written by|posted by|words by|story by)\s+(\p{Lu}[\p{L}.'-]*(?:\s+(?:\p{Lu}[\p{L}.'-]*|de|van|von|der|da|la|and|&|,)){0,8})`)
)

func (p *page) labels(text string) {
	n := 0
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || len(line) > 400 {
			continue
		}
		if n++; n > 5000 {
			return
		}
		if i := strings.IndexAny(line, ":："); i > 0 && i < 64 {
			if m := reLabel.FindStringSubmatch(line); m != nil && !strings.HasPrefix(m[2], "//") {
				p.add(m[1], m[2], srcLabel)
				continue
			}
		}
		if c := line[0] | 0x20; (c == 'b' || c == 'w' || c == 'p' || c == 's') && strings.Contains(strings.ToLower(line[:min(len(line), 12)]), "by ") {
			m := reBy.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			p.add("by", cleanByline(m[1]), srcLabel)
		}
	}
}

// reBylinePrefix is what comes before a name in a byline, in the
// languages of monthNames: "By", "Von", "Erstellt von", "Artikel von",
// "Autor:", "责任编辑：", and the same glued to the name ("ByJ.R. Stone",
// "porRedaccion").
var reBylinePrefix = regexp.MustCompile(`^(?i:(?:written|posted|story|words|photos?|text|erstellt|geschrieben|verfasst|artikel|beitrag|rezept|ein beitrag|publié|publicado|scritto|article)\s*(?:by|von|par|por|da|di)\s*|(?:by|von|par|por|di|door|av|от|author|autor)\s+|(?:by|von|por|author|autor)(?:\p{Lu})|(?:autor|autorin|author|auteur|autore|text|texto|redaktion|quelle)\s*[:：]\s*|责任编辑\s*[:：]\s*|作者\s*[:：]\s*)`)

// cleanByline trims what comes before and after a name in a byline.
func cleanByline(s string) string {
	s = htmlread.Collapse(s)
	for _, cut := range []string{" | ", " – ", " — ", " - ", " Updated", " Published", " Posted", " on ", " at ", " am ", " um ", " le ", " el ", " il ", " op ", ", den "} {
		if i := strings.Index(s, cut); i > 0 {
			s = s[:i]
		}
	}
	s = strings.TrimSpace(strings.TrimRight(s, ",;:|&"))
	for range 2 {
		if m := reBylinePrefix.FindStringIndex(s); m != nil {
			// A prefix glued to the name keeps the name's capital.
			end := m[1]
			if r, size := utf8.DecodeLastRuneInString(s[:end]); unicode.IsUpper(r) && end > size {
				end -= size
			}
			s = strings.TrimSpace(s[end:])
		}
	}
	return strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(s, " and"), ","))
}

// authorName is the name in an author element's text: its first line
// that is not "By", cut before a handle, a date or a role.
func authorName(text string) string {
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if l := strings.ToLower(strings.TrimRight(line, ":")); l == "" || l == "by" || l == "author" || l == "written by" || l == "posted by" || nameStop[words(l)] || strings.HasPrefix(l, "@") {
			continue // a label, a role or a handle on a line of its own
		}
		// "Monday November 18, 2019 7:45 am PST by Joe Rossignol": the
		// name follows the "by".
		if i := strings.LastIndex(strings.ToLower(line), " by "); i > 0 {
			line = line[i+4:]
		}
		if i := strings.IndexAny(line, "@|/•·"); i > 0 {
			line = line[:i]
		}
		if m := reDigit.FindStringIndex(line); m != nil && m[0] > 0 {
			line = line[:m[0]]
		}
		for _, role := range []string{"Staff Writer", "Staff Reporter", "Contributor", "View More Articles", "More Articles", "Biography", "Follow", "Updated", "Published", "Posted"} {
			if i := strings.Index(line, role); i > 0 {
				line = line[:i]
			}
		}
		if mi := reMonthWord.FindStringIndex(line); mi != nil && mi[0] > 0 {
			line = line[:mi[0]]
		}
		line = cleanByline(line)
		if line == "" || len(line) > 80 {
			return ""
		}
		return line
	}
	return ""
}

var (
	reDigit     = regexp.MustCompile(`\d`)
	reMonthWord = regexp.MustCompile(`\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*\b|\b(?:January|February|March|April|June|July|August|September|October|November|December)\b`)
)

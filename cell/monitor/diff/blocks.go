// Package diff compares two versions of a page's main-content Markdown
// structurally and reports what changed as typed facts (tables by row key
// and column, `label: value` lines, list items, sections by heading path,
// paragraphs), ignoring what is not a change of content: whitespace, the
// order of identical blocks, tracking parameters in links, and values that
// change on every load (timestamps, relative ages, counters, session ids,
// cache busters). It is pure: no I/O, no clock, no model.
package diff

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"sort"
	"strings"
)

// Block kinds.
const (
	kindParagraph = "paragraph"
	kindItem      = "item"
	kindLabel     = "label"
	kindRow       = "row"
	kindCode      = "code"
)

// block is one unit of content within a section.
type block struct {
	kind    string
	section string   // heading path, " > " joined
	text    string   // as the page shows it (whitespace collapsed)
	key     string   // canonical form: what is compared
	label   string   // kindLabel: the label; kindRow: the row's key column
	value   string   // kindLabel: the value
	cells   []string // kindRow: the cells
	header  []string // kindRow: the table's header
	table   string   // kindRow: the table's identity within its section
}

// Doc is a parsed version: its blocks and the set of its sections.
type Doc struct {
	blocks   []block
	sections map[string]bool
	order    []string // sections in page order
}

var (
	reHeading  = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	reItem     = regexp.MustCompile(`^\s*(?:[-*+]|\d{1,9}[.)])\s+(.*)$`)
	reTableSep = regexp.MustCompile(`^\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$`)
	reLabel    = regexp.MustCompile(`^\**([\p{L}][^:*]{0,48}?)\**\s*:\**\s+(\S.*)$`)
	reSpace    = regexp.MustCompile(`\s+`)
)

// Parse reads Markdown into blocks.
func Parse(md string) *Doc {
	d := &Doc{sections: map[string]bool{"": true}, order: []string{""}}
	lines := strings.Split(strings.ReplaceAll(md, "\r\n", "\n"), "\n")
	var stack []string // heading texts by level-1
	var levels []int
	section := ""
	var para []string
	tableN := 0
	flush := func() {
		if len(para) == 0 {
			return
		}
		d.add(section, strings.Join(para, " "), kindParagraph)
		para = nil
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trim := strings.TrimSpace(line)
		switch {
		case trim == "":
			flush()
		case strings.HasPrefix(trim, "```") || strings.HasPrefix(trim, "~~~"):
			flush()
			fence := trim[:3]
			var code []string
			for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), fence); i++ {
				code = append(code, strings.TrimRight(lines[i], " \t"))
			}
			if len(code) > 0 {
				d.blocks = append(d.blocks, block{kind: kindCode, section: section, text: strings.Join(code, "\n"), key: canon(strings.Join(code, "\n"))})
			}
		case reHeading.MatchString(trim):
			flush()
			m := reHeading.FindStringSubmatch(trim)
			level, text := len(m[1]), cleanInline(m[2])
			for len(levels) > 0 && levels[len(levels)-1] >= level {
				levels, stack = levels[:len(levels)-1], stack[:len(stack)-1]
			}
			levels, stack = append(levels, level), append(stack, text)
			section = strings.Join(stack, " > ")
			if !d.sections[section] {
				d.sections[section] = true
				d.order = append(d.order, section)
			}
			tableN = 0
		case strings.HasPrefix(trim, "|") && i+1 < len(lines) && reTableSep.MatchString(strings.TrimSpace(lines[i+1])):
			flush()
			header := splitRow(trim)
			if h := strings.Join(header, " | "); strings.Trim(h, " |") != "" {
				// The header is text too (a one-row layout table is all header).
				d.blocks = append(d.blocks, block{kind: kindParagraph, section: section, text: h, key: canon(h)})
			}
			tableN++
			table := strings.Join(header, "|")
			if table == "" || strings.Trim(table, "|") == "" {
				table = "#" + string(rune('0'+tableN%10))
			}
			for i += 2; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "|"); i++ {
				cells := splitRow(strings.TrimSpace(lines[i]))
				if len(cells) == 0 {
					continue
				}
				d.blocks = append(d.blocks, block{kind: kindRow, section: section, text: strings.Join(cells, " | "),
					key: canon(strings.Join(cells, "|")), label: canon(cells[0]), cells: cells, header: header, table: table})
			}
			i--
		case reItem.MatchString(line):
			flush()
			text := reItem.FindStringSubmatch(line)[1]
			// Continuation lines: indented, not a new item.
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "  ") && !reItem.MatchString(lines[i+1]) && strings.TrimSpace(lines[i+1]) != "" {
				i++
				text += " " + strings.TrimSpace(lines[i])
			}
			d.add(section, text, kindItem)
		default:
			para = append(para, trim)
		}
	}
	flush()
	return d
}

// add appends a paragraph or a list item, as a `label: value` line when it
// is one.
func (d *Doc) add(section, raw, kind string) {
	text := cleanInline(raw)
	if text == "" {
		return
	}
	b := block{kind: kind, section: section, text: text, key: canon(text)}
	if m := reLabel.FindStringSubmatch(text); m != nil && len(m[2]) < 300 {
		b.kind, b.label, b.value = kindLabel, strings.TrimSpace(m[1]), strings.TrimSpace(m[2])
	}
	d.blocks = append(d.blocks, b)
}

// splitRow splits a Markdown table row into its cells.
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	line = strings.ReplaceAll(line, `\|`, "\x00")
	parts := strings.Split(line, "|")
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = cleanInline(strings.ReplaceAll(p, "\x00", "|"))
	}
	return out
}

var (
	reImage = regexp.MustCompile(`!\[([^\]]*)\]\([^)]*\)`)
	reLink  = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]*)(?:\s+"[^"]*")?\)`)
)

// cleanInline is text as a reader sees it: links and images reduced to
// their text, emphasis marks dropped, whitespace collapsed. Link targets
// are kept in the canonical form (canon) through linkKeys.
func cleanInline(s string) string {
	s = reImage.ReplaceAllString(s, "$1")
	s = reLink.ReplaceAllString(s, "$1")
	s = strings.NewReplacer("**", "", "__", "", "`", "").Replace(s)
	return strings.TrimSpace(reSpace.ReplaceAllString(s, " "))
}

// Volatile values: what changes on every load without being content.
var volatile = []*regexp.Regexp{
	// ISO and common timestamps, clock times.
	regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?\b`),
	regexp.MustCompile(`\b\d{1,2}:\d{2}(:\d{2})?\s*(am|pm|AM|PM|UTC|GMT)?\b`),
	// Relative ages.
	regexp.MustCompile(`(?i)\b\d+\s*(seconds?|secs?|minutes?|mins?|hours?|hrs?|days?)\s+ago\b`),
	regexp.MustCompile(`(?i)\b(just now|a (second|minute|moment) ago)\b`),
	// Counters of visits and readers.
	regexp.MustCompile(`(?i)\b\d[\d,.\s]*\s*(views?|visitors?|visits|reads|readers|online|watching|hits|page ?views)\b`),
	regexp.MustCompile(`(?i)\b(views?|visitors?|visits|hits|page ?views|online)\s*:?\s*\d[\d,.]*`),
	// Session ids, tokens, cache busters: long hex or base64-like runs.
	regexp.MustCompile(`\b[0-9a-fA-F]{16,}\b`),
	regexp.MustCompile(`\b[A-Za-z0-9_-]*\d[A-Za-z0-9_-]*[A-Za-z][A-Za-z0-9_-]{22,}\b`),
	regexp.MustCompile(`(?i)\b(session|sid|token|nonce|request)[ _-]?(id)?\s*[:=]\s*\S+`),
}

// Tracking and cache-busting query parameters.
var reURL = regexp.MustCompile(`https?://[^\s)\]>"']+`)

var dropParams = map[string]bool{"gclid": true, "fbclid": true, "msclkid": true, "mc_cid": true, "mc_eid": true, "_ga": true,
	"_gl": true, "yclid": true, "igshid": true, "ref": true, "ref_src": true, "sessionid": true, "sid": true, "phpsessid": true,
	"jsessionid": true, "cb": true, "_": true, "v": true, "ver": true, "ts": true, "t": true, "cachebust": true, "nocache": true}

func cleanURL(u string) string {
	base, query, ok := strings.Cut(u, "?")
	if !ok {
		return u
	}
	frag := ""
	if q, f, ok := strings.Cut(query, "#"); ok {
		query, frag = q, "#"+f
	}
	var keep []string
	for _, kv := range strings.Split(query, "&") {
		k, _, _ := strings.Cut(kv, "=")
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "utm_") || dropParams[lk] || kv == "" {
			continue
		}
		keep = append(keep, kv)
	}
	if len(keep) == 0 {
		return base + frag
	}
	return base + "?" + strings.Join(keep, "&") + frag
}

// canon is the form blocks are compared in: whitespace folded, tracking
// parameters out of links, volatile values masked. Case is kept: "Mysql"
// becoming "MySQL" is an edit of the text.
func canon(s string) string {
	s = reURL.ReplaceAllStringFunc(s, cleanURL)
	for _, re := range volatile {
		s = re.ReplaceAllString(s, "·")
	}
	return strings.Join(strings.Fields(s), " ")
}

// Hash is the identity of a version's content for change detection: equal
// for two versions that differ only in what is not content (see the
// package comment). A check of an unchanged page costs a parse and this
// hash, not a diff.
func Hash(md string) string { return Parse(md).Hash() }

// Hash of a parsed version: its sections' canonical blocks, sorted within
// each section so that reordering identical blocks changes nothing.
func (d *Doc) Hash() string {
	by := map[string][]string{}
	for _, b := range d.blocks {
		k := b.kind
		if k == kindLabel {
			k = kindParagraph // a paragraph that became `label: value` by a colon is the same text
		}
		by[b.section] = append(by[b.section], k+"\x00"+b.key)
	}
	secs := make([]string, 0, len(d.sections))
	for s := range d.sections {
		secs = append(secs, s)
	}
	sort.Strings(secs)
	h := sha256.New()
	for _, s := range secs {
		keys := by[s]
		sort.Strings(keys)
		h.Write([]byte(canon(s)))
		h.Write([]byte{1})
		for _, k := range keys {
			h.Write([]byte(k))
			h.Write([]byte{2})
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// Labels are the version's `label: value` lines, by label as written
// (the first of a label that appears twice).
func (d *Doc) Labels() map[string]string {
	out := map[string]string{}
	for _, b := range d.blocks {
		if b.kind == kindLabel {
			if _, ok := out[b.label]; !ok {
				out[b.label] = b.value
			}
		}
	}
	return out
}

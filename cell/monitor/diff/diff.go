package diff

import (
	"fmt"
	"strings"
)

// NotShown is a fact's before or after when the entity remains but the
// value is not visible (docs/spec/hosted-api.md §2.9).
const NotShown = "not shown"

// Kinds of fact.
const (
	Added   = "added"
	Removed = "removed"
	Changed = "changed"
)

// Fact is one typed difference between two versions (hosted-api §2.9).
// Before and After are values as the page shows them; "" where there is
// none (the before of an added entity, the after of a removed one).
type Fact struct {
	Kind    string `json:"kind"`
	Entity  string `json:"entity"`
	Field   string `json:"field"`
	Before  string `json:"before"`
	After   string `json:"after"`
	Section string `json:"section"`
}

// Compare returns the facts that turn old into new: nil when they differ
// only in what is not content.
func Compare(old, new *Doc) []Fact {
	var facts []Fact
	oldBy, newBy := bySection(old), bySection(new)
	for _, s := range new.order {
		if !old.sections[s] {
			facts = append(facts, Fact{Kind: Added, Entity: lastHeading(s), Field: "section", After: firstText(newBy[s]), Section: s})
			continue
		}
		facts = append(facts, compareSection(s, oldBy[s], newBy[s])...)
	}
	for _, s := range old.order {
		if !new.sections[s] {
			facts = append(facts, Fact{Kind: Removed, Entity: lastHeading(s), Field: "section", Before: firstText(oldBy[s]), Section: s})
		}
	}
	return facts
}

func bySection(d *Doc) map[string][]block {
	m := map[string][]block{}
	for _, b := range d.blocks {
		m[b.section] = append(m[b.section], b)
	}
	return m
}

func lastHeading(section string) string {
	if i := strings.LastIndex(section, " > "); i >= 0 {
		return section[i+3:]
	}
	return section
}

func firstText(bs []block) string {
	for _, b := range bs {
		if b.text != "" {
			return clip(b.text, 200)
		}
	}
	return ""
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

func shown(v string) string {
	if strings.TrimSpace(v) == "" || canon(v) == "" || canon(v) == "-" || canon(v) == "—" {
		return NotShown
	}
	return v
}

func compareSection(section string, old, new []block) []Fact {
	var facts []Fact
	// Tables: rows by their key column, cells by column.
	oldT, newT := tables(old), tables(new)
	for _, id := range tableOrder(new, old) {
		facts = append(facts, compareTable(section, oldT[id], newT[id])...)
	}
	// `label: value` lines by label, when each label is unique.
	oldL, oldDup := labels(old)
	newL, newDup := labels(new)
	entity := lastHeading(section)
	var restOld, restNew []block
	for _, b := range old {
		if b.kind == kindLabel && !oldDup[canon(b.label)] && !newDup[canon(b.label)] {
			if _, ok := newL[canon(b.label)]; !ok {
				facts = append(facts, Fact{Kind: Removed, Entity: or(entity, b.label), Field: b.label, Before: b.value, Section: section})
			}
			continue
		}
		if b.kind != kindRow {
			restOld = append(restOld, b)
		}
	}
	for _, b := range new {
		if b.kind == kindLabel && !oldDup[canon(b.label)] && !newDup[canon(b.label)] {
			ob, ok := oldL[canon(b.label)]
			switch {
			case !ok:
				facts = append(facts, Fact{Kind: Added, Entity: or(entity, b.label), Field: b.label, After: b.value, Section: section})
			case canon(ob.value) != canon(b.value):
				facts = append(facts, Fact{Kind: Changed, Entity: or(entity, b.label), Field: b.label, Before: shown(ob.value), After: shown(b.value), Section: section})
			}
			continue
		}
		if b.kind != kindRow {
			restNew = append(restNew, b)
		}
	}
	// Everything else as a multiset: order does not matter.
	count := map[string]int{}
	for _, b := range restOld {
		count[b.kind+"\x00"+b.key]++
	}
	var added []block
	for _, b := range restNew {
		k := b.kind + "\x00" + b.key
		if count[k] > 0 {
			count[k]--
			continue
		}
		added = append(added, b)
	}
	var removed []block
	for _, b := range restOld {
		k := b.kind + "\x00" + b.key
		if count[k] > 0 {
			count[k]--
			removed = append(removed, b)
		}
	}
	// A removed block like an added one of the same kind is a change of it.
	used := make([]bool, len(removed))
	for _, a := range added {
		best, bestScore := -1, 0.5
		for i, r := range removed {
			if used[i] || r.kind != a.kind && !(r.kind == kindLabel || a.kind == kindLabel) {
				continue
			}
			if s := similarity(r.key, a.key); s >= bestScore {
				best, bestScore = i, s
			}
		}
		if best >= 0 {
			used[best] = true
			r := removed[best]
			facts = append(facts, Fact{Kind: Changed, Entity: or(entity, fieldOf(a)), Field: fieldOf(a), Before: r.text, After: a.text, Section: section})
			continue
		}
		facts = append(facts, Fact{Kind: Added, Entity: clip(a.text, 120), Field: fieldOf(a), After: a.text, Section: section})
	}
	for i, r := range removed {
		if !used[i] {
			facts = append(facts, Fact{Kind: Removed, Entity: clip(r.text, 120), Field: fieldOf(r), Before: r.text, Section: section})
		}
	}
	return facts
}

func fieldOf(b block) string {
	switch b.kind {
	case kindItem:
		return "item"
	case kindCode:
		return "code"
	}
	return "text"
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func tables(bs []block) map[string][]block {
	m := map[string][]block{}
	for _, b := range bs {
		if b.kind == kindRow {
			m[b.table] = append(m[b.table], b)
		}
	}
	return m
}

func tableOrder(new, old []block) []string {
	var ids []string
	seen := map[string]bool{}
	for _, bs := range [][]block{new, old} {
		for _, b := range bs {
			if b.kind == kindRow && !seen[b.table] {
				seen[b.table] = true
				ids = append(ids, b.table)
			}
		}
	}
	return ids
}

func labels(bs []block) (map[string]block, map[string]bool) {
	m, dup := map[string]block{}, map[string]bool{}
	for _, b := range bs {
		if b.kind != kindLabel {
			continue
		}
		k := canon(b.label)
		if _, ok := m[k]; ok {
			dup[k] = true
		}
		m[k] = b
	}
	return m, dup
}

// compareTable compares the rows of one table: by key column (the first)
// when keys are unique, else as a multiset of rows.
func compareTable(section string, old, new []block) []Fact {
	var facts []Fact
	oldBy, oldDup := rowKeys(old)
	newBy, newDup := rowKeys(new)
	if oldDup || newDup {
		count := map[string]int{}
		for _, r := range old {
			count[r.key]++
		}
		for _, r := range new {
			if count[r.key] > 0 {
				count[r.key]--
				continue
			}
			facts = append(facts, Fact{Kind: Added, Entity: r.cells[0], Field: "row", After: r.text, Section: section})
		}
		for _, r := range old {
			if count[r.key] > 0 {
				count[r.key]--
				facts = append(facts, Fact{Kind: Removed, Entity: r.cells[0], Field: "row", Before: r.text, Section: section})
			}
		}
		return facts
	}
	for _, r := range new {
		o, ok := oldBy[r.label]
		if !ok {
			facts = append(facts, Fact{Kind: Added, Entity: r.cells[0], Field: "row", After: r.text, Section: section})
			continue
		}
		if o.key == r.key {
			continue
		}
		n := max(len(o.cells), len(r.cells))
		for i := 1; i < n; i++ {
			before, after := cell(o.cells, i), cell(r.cells, i)
			if canon(before) == canon(after) {
				continue
			}
			field := cell(r.header, i)
			if field == "" {
				field = fmt.Sprintf("column %d", i+1)
			}
			facts = append(facts, Fact{Kind: Changed, Entity: r.cells[0], Field: field, Before: shown(before), After: shown(after), Section: section})
		}
	}
	for _, o := range old {
		if _, ok := newBy[o.label]; !ok {
			facts = append(facts, Fact{Kind: Removed, Entity: o.cells[0], Field: "row", Before: o.text, Section: section})
		}
	}
	return facts
}

func rowKeys(rows []block) (map[string]block, bool) {
	m := map[string]block{}
	for _, r := range rows {
		if _, ok := m[r.label]; ok {
			return m, true
		}
		m[r.label] = r
	}
	return m, false
}

func cell(cells []string, i int) string {
	if i < len(cells) {
		return cells[i]
	}
	return ""
}

// similarity is the Jaccard index of the two texts' words.
func similarity(a, b string) float64 {
	wa, wb := strings.Fields(a), strings.Fields(b)
	if len(wa) == 0 || len(wb) == 0 {
		return 0
	}
	set := map[string]int{}
	for _, w := range wa {
		set[w] |= 1
	}
	for _, w := range wb {
		set[w] |= 2
	}
	both := 0
	for _, v := range set {
		if v == 3 {
			both++
		}
	}
	return float64(both) / float64(len(set))
}

// Summary is one sentence describing facts, written from them.
func Summary(facts []Fact) string {
	if len(facts) == 0 {
		return "No change of content."
	}
	var parts []string
	for i, f := range facts {
		if i == 2 {
			break
		}
		parts = append(parts, describe(f))
	}
	s := strings.Join(parts, "; ")
	if n := len(facts) - len(parts); n > 0 {
		s += fmt.Sprintf("; and %d more change", n)
		if n > 1 {
			s += "s"
		}
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	return s + "."
}

func describe(f Fact) string {
	in := ""
	if f.Section != "" {
		in = " in " + quote(lastHeading(f.Section))
	}
	switch {
	case f.Kind == Changed && (f.Field == "text" || f.Field == "item" || f.Field == "code"):
		return fmt.Sprintf("%s changed%s from %s to %s", f.Field, in, quote(f.Before), quote(f.After))
	case f.Kind == Changed:
		return fmt.Sprintf("%s of %s changed from %s to %s", f.Field, quote(f.Entity), quote(f.Before), quote(f.After))
	case f.Field == "section":
		return fmt.Sprintf("section %s %s", quote(f.Entity), f.Kind)
	case f.Kind == Added:
		return fmt.Sprintf("%s %s added%s", f.Field, quote(f.Entity), in)
	default:
		return fmt.Sprintf("%s %s removed%s", f.Field, quote(f.Entity), in)
	}
}

func quote(s string) string { return `"` + clip(s, 80) + `"` }

package extract

import (
	"strings"

	"github.com/PuerkitoBio/goquery"

	"github.com/trawlhq/trawl/internal/htmlread"
)

// Tables (internal/htmlread reads them), definition lists and lists under
// a heading.

// Bounds of the tables read from one page.
const (
	maxTables    = 200
	maxTableRows = 2000
)

func (p *page) tables(doc *goquery.Document) {
	for ti, t := range htmlread.Tables(doc.Nodes[0]) {
		if ti >= maxTables {
			break
		}
		headRow, rows := t.Header, t.Rows
		if nonEmpty(headRow) < 2 {
			// One heading over the table is a title, not column names.
			if headRow != nil {
				rows = append([][]string{headRow}, rows...)
			}
			headRow = nil
		}
		rows = rows[:min(len(rows), maxTableRows)]
		if headRow != nil && len(rows) > 0 {
			l := recordList{src: srcTable}
			for _, r := range rows {
				var rec []fact
				for j, c := range r {
					if j < len(headRow) && headRow[j] != "" && c != "" {
						rec = append(rec, fact{key: words(headRow[j]), val: c, src: srcTable})
					}
				}
				l.records = append(l.records, rec)
			}
			p.lists = append(p.lists, l)
			if len(rows) == 1 {
				p.facts = append(p.facts, l.records[0]...)
			}
			if len(headRow) > 2 {
				continue
			}
		}
		// Two-column rows are label/value pairs.
		for _, r := range rows {
			if r = trimRow(r); len(r) == 2 && r[0] != "" && len(r[0]) < 80 {
				p.add(strings.TrimSuffix(r[0], ":"), r[1], srcTable)
			}
		}
	}
	doc.Find("dl").Each(func(_ int, dl *goquery.Selection) {
		var key string
		dl.Find("dt, dd").Each(func(_ int, s *goquery.Selection) {
			if goquery.NodeName(s) == "dt" {
				key = strings.TrimSuffix(htmlread.Collapse(visibleText(s)), ":")
				return
			}
			if key != "" {
				p.add(key, visibleText(s), srcTable)
			}
		})
	})
	doc.Find("h2, h3, h4, h5, h6, p > strong:only-child, p > b:only-child").Each(func(_ int, h *goquery.Selection) {
		anchor := h
		if n := goquery.NodeName(h); n == "strong" || n == "b" {
			anchor = h.Parent()
		}
		list := anchor.NextAllFiltered("ul, ol").First()
		if list.Length() == 0 || anchor.NextUntil("ul, ol").Filter("h1, h2, h3, h4, h5, h6, p, div").Length() > 0 {
			return
		}
		var items []any
		list.ChildrenFiltered("li").Each(func(_ int, li *goquery.Selection) {
			if t := htmlread.Collapse(visibleText(li)); t != "" {
				items = append(items, t)
			}
		})
		if len(items) > 0 {
			p.add(strings.TrimSuffix(htmlread.Collapse(visibleText(h)), ":"), items, srcTable)
		}
	})
}

// nonEmpty counts the cells of a row that hold text.
func nonEmpty(row []string) int {
	n := 0
	for _, c := range row {
		if c != "" {
			n++
		}
	}
	return n
}

// trimRow drops a row's empty cells at its end: the grid's padding of a
// short row.
func trimRow(row []string) []string {
	for len(row) > 0 && row[len(row)-1] == "" {
		row = row[:len(row)-1]
	}
	return row
}

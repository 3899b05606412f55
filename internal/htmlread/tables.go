package htmlread

import (
	"strconv"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Limits that keep hostile markup from blowing up a table's grid.
const (
	maxSpan      = 100   // colspan/rowspan beyond this is clamped
	maxTableCols = 1000  // cells per row
	maxTableRows = 10000 // rows per table
)

// Table is a data table's text: every row has a cell per column.
type Table struct {
	Caption string     `json:"caption,omitempty"`
	Header  []string   `json:"header,omitempty"`
	Rows    [][]string `json:"rows"`
}

// ReadTable reads a <table> as text cells (InnerText). Layout tables are
// refused (ok false): role="presentation" or "none", tables holding
// tables, and tables of a single cell. The header is the first row of
// <thead>, else the first row if all its cells are <th>; further <thead>
// rows (multi-row headers) stay data rows. A spanning cell puts its text
// in the first column and row it covers and "" in the others.
func ReadTable(t *html.Node) (Table, bool) {
	if r := attr(t, "role"); r == "presentation" || r == "none" {
		return Table{}, false
	}
	if HoldsTable(t) {
		return Table{}, false
	}
	var caption string
	var head, body []*html.Node
	for ch := t.FirstChild; ch != nil; ch = ch.NextSibling {
		if ch.Type != html.ElementNode {
			continue
		}
		switch ch.DataAtom {
		case atom.Caption:
			caption = InnerText(ch)
		case atom.Thead:
			head = append(head, rowsOf(ch)...)
		case atom.Tbody, atom.Tfoot:
			body = append(body, rowsOf(ch)...)
		case atom.Tr:
			body = append(body, ch)
		}
	}
	rows := append(head, body...)
	if len(rows) > maxTableRows {
		rows = rows[:maxTableRows]
	}
	grid := tableGrid(rows)
	cells := 0
	for _, r := range grid {
		cells += len(r)
	}
	if cells <= 1 {
		return Table{}, false
	}
	tbl := Table{Caption: caption}
	start := 0
	if len(head) > 0 || len(rows) > 0 && allHeaderCells(rows[0]) {
		tbl.Header = grid[0]
		start = 1
	}
	tbl.Rows = grid[start:]
	if tbl.Rows == nil {
		tbl.Rows = [][]string{}
	}
	return tbl, true
}

// Tables are the data tables below root (ReadTable), in document order.
func Tables(root *html.Node) []Table {
	var out []Table
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if isElem(n, atom.Table) {
			if t, ok := ReadTable(n); ok {
				out = append(out, t)
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
	return out
}

// HoldsTable reports a table with a table inside: layout, not data.
func HoldsTable(t *html.Node) bool {
	var found func(n *html.Node) bool
	found = func(n *html.Node) bool {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.ElementNode && c.DataAtom == atom.Table || found(c) {
				return true
			}
		}
		return false
	}
	return found(t)
}

func isElem(n *html.Node, a atom.Atom) bool {
	return n != nil && n.Type == html.ElementNode && n.DataAtom == a && n.Namespace == ""
}

func rowsOf(section *html.Node) []*html.Node {
	var rows []*html.Node
	for ch := section.FirstChild; ch != nil; ch = ch.NextSibling {
		if isElem(ch, atom.Tr) {
			rows = append(rows, ch)
		}
	}
	return rows
}

// Cells are a row's <td> and <th> elements.
func Cells(tr *html.Node) []*html.Node {
	var cells []*html.Node
	for ch := tr.FirstChild; ch != nil; ch = ch.NextSibling {
		if isElem(ch, atom.Td) || isElem(ch, atom.Th) {
			cells = append(cells, ch)
		}
	}
	return cells
}

func allHeaderCells(tr *html.Node) bool {
	cells := Cells(tr)
	for _, c := range cells {
		if c.DataAtom != atom.Th {
			return false
		}
	}
	return len(cells) > 0
}

// Span is a cell's colspan or rowspan (key): 1 unless it is a number
// above 1, at most 100.
func Span(n *html.Node, key string) int {
	v, err := strconv.Atoi(strings.TrimSpace(attr(n, key)))
	if err != nil || v < 1 {
		return 1
	}
	return min(v, maxSpan)
}

// tableGrid lays rows out on a grid, honouring colspan and rowspan, and
// pads every row to the widest.
func tableGrid(rows []*html.Node) [][]string {
	// A colspan wider than the widest row is noise (or hostile).
	widest := 1
	for _, tr := range rows {
		widest = max(widest, len(Cells(tr)))
	}
	grid := make([][]string, len(rows))
	filled := make([][]bool, len(rows))
	width := 0
	for r, tr := range rows {
		col := 0
		for _, cell := range Cells(tr) {
			for col < len(filled[r]) && filled[r][col] {
				col++
			}
			if col >= maxTableCols {
				break
			}
			text := InnerText(cell)
			cs, rs := min(Span(cell, "colspan"), widest), Span(cell, "rowspan")
			for dr := 0; dr < rs && r+dr < len(rows); dr++ {
				for dc := 0; dc < cs && col+dc < maxTableCols; dc++ {
					v := ""
					if dr == 0 && dc == 0 {
						v = text
					}
					put(&grid[r+dr], &filled[r+dr], col+dc, v)
				}
			}
			col += cs
		}
		width = max(width, len(grid[r]))
	}
	for r := range grid {
		for len(grid[r]) < width {
			grid[r] = append(grid[r], "")
		}
	}
	return grid
}

func put(row *[]string, filled *[]bool, col int, v string) {
	for len(*row) <= col {
		*row = append(*row, "")
		*filled = append(*filled, false)
	}
	(*row)[col] = v
	(*filled)[col] = true
}

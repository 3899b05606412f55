package htmlread

import (
	"reflect"
	"strings"
	"testing"
)

func TestTables(t *testing.T) {
	tests := []struct {
		name, src string
		want      []Table
	}{
		{"thead", `<table><caption> Prices </caption><thead><tr><th>Item</th><th>Price</th></tr></thead><tbody><tr><td>Tea</td><td>3 <b>€</b></td></tr></tbody></table>`,
			[]Table{{Caption: "Prices", Header: []string{"Item", "Price"}, Rows: [][]string{{"Tea", "3 €"}}}}},
		{"th row is the header", `<table><tr><th>A</th><th>B</th></tr><tr><td>1</td><td>2</td></tr></table>`,
			[]Table{{Header: []string{"A", "B"}, Rows: [][]string{{"1", "2"}}}}},
		{"no header", `<table><tr><td>k</td><td>v</td></tr><tr><td>k2</td><td>v2</td></tr></table>`,
			[]Table{{Rows: [][]string{{"k", "v"}, {"k2", "v2"}}}}},
		{"spans", `<table><tr><td colspan="2">wide</td><td rowspan="2">tall</td></tr><tr><td>a</td><td>b</td></tr></table>`,
			[]Table{{Rows: [][]string{{"wide", "", "tall"}, {"a", "b", ""}}}}},
		{"padded rows", `<table><tr><td>a</td><td>b</td><td>c</td></tr><tr><td>d</td></tr></table>`,
			[]Table{{Rows: [][]string{{"a", "b", "c"}, {"d", "", ""}}}}},
		{"hostile colspan clamped", `<table><tr><td colspan="100000">x</td></tr><tr><td>a</td><td>b</td></tr></table>`,
			[]Table{{Rows: [][]string{{"x", ""}, {"a", "b"}}}}},
		{"layout tables refused", `<table role="presentation"><tr><td>a</td><td>b</td></tr></table><table><tr><td>one cell</td></tr></table>`, nil},
		{"nesting: the inner table only", `<table><tr><td><table><tr><td>i</td><td>j</td></tr></table></td><td>o</td></tr></table>`,
			[]Table{{Rows: [][]string{{"i", "j"}}}}},
		{"header only", `<table><thead><tr><th>A</th><th>B</th></tr></thead></table>`,
			[]Table{{Header: []string{"A", "B"}, Rows: [][]string{}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Tables(body(t, tc.src))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestCellsAndSpan(t *testing.T) {
	b := body(t, `<table><tr><th colspan="3">a</th><td rowspan="x">b</td><td colspan="500">c <i>text</i></td><!-- c --></tr></table>`)
	tr := find(b, "tr")
	cells := Cells(tr)
	if len(cells) != 3 {
		t.Fatalf("Cells: %d, want 3", len(cells))
	}
	var spans []int
	for _, c := range cells {
		spans = append(spans, Span(c, "colspan")*10+Span(c, "rowspan"))
	}
	if want := []int{31, 11, 1001}; !reflect.DeepEqual(spans, want) {
		t.Errorf("spans %v, want %v", spans, want)
	}
	if HoldsTable(find(b, "table")) || !strings.Contains(InnerText(tr), "c text") {
		t.Error("HoldsTable or the row's text")
	}
}

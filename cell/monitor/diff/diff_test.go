package diff

import (
	"reflect"
	"testing"
)

const page = `# Shop

Welcome to the shop. Updated 2026-11-25T10:00:00Z, 1,234 views.

## Prices

| Product | Price | Stock |
|---|---|---|
| Widget | 50 | 12 |
| Gadget | 20 | 3 |

- Free shipping over 100
- Returns within 30 days

Status: open

See [our terms](https://shop.example/terms?utm_source=x&id=7).
`

func TestCompare(t *testing.T) {
	cases := []struct {
		name string
		new  string
		want []Fact
	}{
		{"identical", page, nil},
		{"only volatile values and tracking params", replace(page,
			"2026-11-25T10:00:00Z, 1,234 views", "2026-11-26T11:30:00Z, 1,301 views",
			"utm_source=x&id=7", "id=7&utm_campaign=y"), nil},
		{"whitespace and reordered identical blocks", replace(page,
			"- Free shipping over 100\n- Returns within 30 days", "- Returns within   30 days\n- Free shipping over 100"), nil},
		{"price of a row", replace(page, "| Widget | 50 | 12 |", "| Widget | 45 | 12 |"),
			[]Fact{{Kind: Changed, Entity: "Widget", Field: "Price", Before: "50", After: "45", Section: "Shop > Prices"}}},
		{"value no longer shown", replace(page, "| Gadget | 20 | 3 |", "| Gadget |  | 3 |"),
			[]Fact{{Kind: Changed, Entity: "Gadget", Field: "Price", Before: "20", After: NotShown, Section: "Shop > Prices"}}},
		{"row added and removed", replace(page, "| Gadget | 20 | 3 |", "| Gizmo | 99 | 1 |"),
			[]Fact{{Kind: Added, Entity: "Gizmo", Field: "row", After: "Gizmo | 99 | 1", Section: "Shop > Prices"},
				{Kind: Removed, Entity: "Gadget", Field: "row", Before: "Gadget | 20 | 3", Section: "Shop > Prices"}}},
		{"label value", replace(page, "Status: open", "Status: closed"),
			[]Fact{{Kind: Changed, Entity: "Prices", Field: "Status", Before: "open", After: "closed", Section: "Shop > Prices"}}},
		{"list item added", replace(page, "- Returns within 30 days", "- Returns within 30 days\n- Gift wrapping"),
			[]Fact{{Kind: Added, Entity: "Gift wrapping", Field: "item", After: "Gift wrapping", Section: "Shop > Prices"}}},
		{"section added", page + "\n## Sale\n\nEverything half price.\n",
			[]Fact{{Kind: Added, Entity: "Sale", Field: "section", After: "Everything half price.", Section: "Shop > Sale"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Compare(Parse(page), Parse(c.new))
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("facts:\n got %+v\nwant %+v", got, c.want)
			}
			if same := Hash(page) == Hash(c.new); same != (len(c.want) == 0) {
				t.Fatalf("hash equal = %v, facts %d", same, len(c.want))
			}
		})
	}
}

func TestSummary(t *testing.T) {
	got := Summary([]Fact{{Kind: Changed, Entity: "Widget", Field: "Price", Before: "50", After: "45", Section: "Shop > Prices"}})
	if want := `Price of "Widget" changed from "50" to "45".`; got != want {
		t.Fatalf("summary %q, want %q", got, want)
	}
}

func replace(s string, pairs ...string) string {
	for i := 0; i < len(pairs); i += 2 {
		n := len(s)
		s = stringsReplace(s, pairs[i], pairs[i+1])
		if len(s) == n && pairs[i] != pairs[i+1] && !contains(s, pairs[i+1]) {
			panic("replace: " + pairs[i] + " not found")
		}
	}
	return s
}

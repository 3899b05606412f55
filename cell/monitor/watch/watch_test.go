package watch

import (
	"reflect"
	"testing"

	"github.com/trawlhq/trawl/cell/monitor/diff"
)

func TestSplit(t *testing.T) {
	got := Split("Tell me when the price drops below 50. Also when a new row is added; or when \"Gadget\" is removed")
	want := []Condition{{"c1", "Tell me when the price drops below 50"}, {"c2", "Also when a new row is added"}, {"c3", `or when "Gadget" is removed`}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("split %+v", got)
	}
	if len(Split("")) != 0 || len(Split("  . ; ")) != 0 {
		t.Fatal("empty sentence has conditions")
	}
}

func TestMatch(t *testing.T) {
	price := diff.Fact{Kind: diff.Changed, Entity: "Widget", Field: "Price", Before: "$50.00", After: "$45.00", Section: "Shop > Prices"}
	row := diff.Fact{Kind: diff.Added, Entity: "Gizmo", Field: "row", After: "Gizmo | 99", Section: "Shop > Prices"}
	gone := diff.Fact{Kind: diff.Removed, Entity: "Gadget", Field: "row", Before: "Gadget | 20", Section: "Shop > Prices"}
	cases := []struct {
		cond  string
		facts []diff.Fact
		want  bool
	}{
		{"the price drops below 48", []diff.Fact{price}, true},
		{"the price drops below 40", []diff.Fact{price}, false},
		{"the price drops below 60", []diff.Fact{price}, false}, // it was below 60 already
		{"price is below 60", []diff.Fact{price}, true},
		{"the price goes above 40", []diff.Fact{price}, false}, // was above already
		{"a new row is added", []diff.Fact{price, row}, true},
		{"a new row is added", []diff.Fact{price, gone}, false},
		{`"Gadget" is removed`, []diff.Fact{gone}, true},
		{`"Gadget" is removed`, []diff.Fact{row}, false},
		{"more than 1 new rows", []diff.Fact{row}, false},
		{"more than 1 new rows", []diff.Fact{row, row}, true},
		{"any change to the stock", []diff.Fact{price}, false},
		{"tell me about changes", []diff.Fact{price}, true},
		{"widget", []diff.Fact{price}, true},
	}
	for _, c := range cases {
		got := len(Match([]Condition{{ID: "c1", Text: c.cond}}, c.facts)) == 1
		if got != c.want {
			t.Errorf("%q on %v: matched %v, want %v", c.cond, c.facts, got, c.want)
		}
	}
}

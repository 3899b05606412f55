package recipehealth

import (
	"testing"
	"time"
)

// The region's report: the newest version any cell has, published when a
// cell published it, the cells' checks of that version in time order
// (the last 10), health from the newest check.
func TestMerge(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	check := func(h int, ok bool, cell string) Check {
		c := Check{At: t0.Add(time.Duration(h) * time.Hour), OK: ok, Rows: h, Region: "eu", Cell: cell}
		if !ok {
			msg := "fetch_failed"
			c.Error = &msg
		}
		return c
	}
	var many []Check
	for h := range 12 {
		many = append(many, check(100+h, true, "c2"))
	}
	reps := []cellReport{
		{Cell: "c2", CheckEveryS: 21600, PromoteAfter: 2, Recipes: []Entry{
			{Name: "shop", Version: 2, Stage: "staged", Checks: []Check{check(7, false, "c2")}},
			{Name: "old", Version: 1, Stage: "staged", Checks: []Check{check(1, true, "c2")}},
			{Name: "busy", Version: 1, Stage: "published", Checks: many},
		}},
		{Cell: "c1", CheckEveryS: 21600, PromoteAfter: 2, Recipes: []Entry{
			{Name: "shop", Version: 2, Stage: "published", Checks: []Check{check(6, true, "c1"), check(8, true, "c1")}},
			{Name: "old", Version: 2, Stage: "staged", Checks: []Check{}},
			{Name: "new", Version: 1, Stage: "staged"},
		}},
	}
	r := merge("eu", reps)
	if r.Region != "eu" || len(r.Cells) != 2 || r.Cells[0] != "c1" || r.CheckEveryS != 21600 || len(r.Recipes) != 4 {
		t.Fatalf("%+v", r)
	}
	by := map[string]Entry{}
	for _, e := range r.Recipes {
		by[e.Name] = e
	}
	shop := by["shop"]
	if shop.Stage != "published" || len(shop.Checks) != 3 || shop.Checks[1].Cell != "c2" || shop.Health.Status != "ok" || *shop.Health.Rows != 8 {
		t.Errorf("shop: %+v", shop)
	}
	if old := by["old"]; old.Version != 2 || len(old.Checks) != 0 || old.Health.Status != "unknown" {
		t.Errorf("old: %+v", old)
	}
	if busy := by["busy"]; len(busy.Checks) != 10 || busy.Checks[0].Rows != 102 || busy.Health.Status != "ok" {
		t.Errorf("busy: %d checks, first %+v", len(busy.Checks), busy.Checks[0])
	}
	if n := by["new"]; n.Checks == nil || n.Health.Status != "unknown" || n.Stage != "staged" {
		t.Errorf("new: %+v", n)
	}
}

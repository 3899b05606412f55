package routes

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// markdown renders rows as the table of docs/architecture.md.
func markdown(rows []Route) string {
	size := func(n int64) string {
		switch {
		case n == 0:
			return "—"
		case n%MiB == 0:
			return fmt.Sprintf("%d MiB", n/MiB)
		}
		return fmt.Sprintf("%d KiB", n/KiB)
	}
	var b strings.Builder
	b.WriteString("| pattern | key | bills | answered by | body | what |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		by := r.Server.String()
		if r.Service != "" {
			by += " (" + r.Service + ")"
		}
		if r.Owner != nil {
			by += " of the " + r.Owner.Name
		}
		if r.RegionQuery {
			by += "; another region's gate for `?region=`"
		}
		if r.AnyCell {
			by += "; another clustered cell while it is down"
		}
		kind := r.Kind
		if kind == "" {
			kind = "free"
		} else if r.PerURL {
			kind += " × urls"
		}
		key := "key"
		if r.Public {
			key = "public"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", r.Pattern, key, kind, by, size(r.BodyLimit), r.Doc)
	}
	return b.String()
}

// docs/architecture.md shows the table as it is.
func TestArchitectureDocShowsTheTable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, rows := range map[string][]Route{"route table": Default().Rows(), "cell's own routes": CellLocal} {
		if want := markdown(rows); !strings.Contains(string(doc), want) {
			t.Errorf("docs/architecture.md does not show the %s as it is; put this there:\n\n%s", name, want)
		}
	}
}

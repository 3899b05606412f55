package sitemap

import (
	"slices"
	"testing"
)

func TestRank(t *testing.T) {
	const s = "https://s.example.test"
	links := []Link{
		{URL: s},
		{URL: s + "/sql-createforeigntable.html"},
		{URL: s + "/tutorial-table.html", Title: "Creating a New Table"},
		{URL: s + "/sql-createtable.html"},
		{URL: s + "/about", Description: "How to create a table here"},
		{URL: s + "/tutorials"},
		{URL: s + "/misc", Title: "Tutorial"},
		{URL: s + "/contact"},
		{URL: "https://docs.s.example.test/"},
	}
	tests := []struct {
		search string
		want   []string // the whole order, as paths
	}{
		// Two terms matched beat one ("/tutorial-table.html": "creating"
		// is no match for "create"); the description's exact matches
		// (1+1) beat the URL's partial ones (3 × 0.5 × (6+5)/11 = 1.5);
		// among partial matches the closer one ("createtable") first.
		{"create table", []string{"/about", "/sql-createtable.html", "/sql-createforeigntable.html", "/tutorial-table.html", "", "/tutorials", "/misc", "/contact", "docs"}},
		// A URL's exact match (3), then a title's (2), then a URL's
		// partial match (3 × 0.5 × 8/9).
		{"tutorial", []string{"/tutorial-table.html", "/misc", "/tutorials", "", "/sql-createforeigntable.html", "/sql-createtable.html", "/about", "/contact", "docs"}},
		{"Docs", []string{"docs", "", "/sql-createforeigntable.html", "/tutorial-table.html", "/sql-createtable.html", "/about", "/tutorials", "/misc", "/contact"}},
		// No term: the order is kept.
		{" -- ", []string{"", "/sql-createforeigntable.html", "/tutorial-table.html", "/sql-createtable.html", "/about", "/tutorials", "/misc", "/contact", "docs"}},
	}
	for _, tc := range tests {
		got := rank(slices.Clone(links), tc.search)
		var paths []string
		for _, l := range got {
			switch l.URL {
			case "https://docs.s.example.test/":
				paths = append(paths, "docs")
			default:
				paths = append(paths, l.URL[len(s):])
			}
		}
		if !slices.Equal(paths, tc.want) {
			t.Errorf("%q:\n got %q\nwant %q", tc.search, paths, tc.want)
		}
	}
}

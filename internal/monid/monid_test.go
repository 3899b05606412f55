package monid

import "testing"

func TestParse(t *testing.T) {
	id := New("eu")
	if r, c, ok := Parse(id); !ok || r != "eu" || c != "" {
		t.Fatalf("Parse(%q) = %q %q %v", id, r, c, ok)
	}
	// The former grammar, with the cell: its region, no owning cell.
	if r, c, ok := Parse("mon_sin.c2.5f2a09c3e1d4b7a86f10"); !ok || r != "sin" || c != "" {
		t.Fatalf("former id: %q %q %v", r, c, ok)
	}
	for _, bad := range []string{"", "mon_", "mon_eu", "mon_eu.c1", "mon_eu.xyz", "mon_eu.c1.xyz", "mon_EU.5f2a09c3e1d4b7a86f10",
		"j_eu.c1.5f2a09c3e1d4b7a86f10", "mon_eu.5f2a09c3e1d4b7a86f1", "mon_eu.5F2A09C3E1D4B7A86F10", "mon_eu..5f2a09c3e1d4b7a86f10",
		"mon_eu.c1.c2.5f2a09c3e1d4b7a86f10", "mon_eu.C1.5f2a09c3e1d4b7a86f10"} {
		if _, _, ok := Parse(bad); ok {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

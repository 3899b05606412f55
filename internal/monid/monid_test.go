package monid

import "testing"

func TestParse(t *testing.T) {
	id := New("eu", "c2")
	if r, c, ok := Parse(id); !ok || r != "eu" || c != "c2" {
		t.Fatalf("Parse(%q) = %q %q %v", id, r, c, ok)
	}
	for _, bad := range []string{"", "mon_", "mon_eu.c1", "mon_eu.c1.xyz", "mon_EU.c1.5f2a09c3e1d4b7a86f10", "j_eu.c1.5f2a09c3e1d4b7a86f10",
		"mon_eu.c1.5f2a09c3e1d4b7a86f1", "mon_eu.c1.5F2A09C3E1D4B7A86F10", "mon_eu..5f2a09c3e1d4b7a86f10"} {
		if _, _, ok := Parse(bad); ok {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

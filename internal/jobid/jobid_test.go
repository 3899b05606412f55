package jobid

import "testing"

func TestNewParses(t *testing.T) {
	id := New("eu", "c1")
	region, cell, ok := Parse(id)
	if !ok || region != "eu" || cell != "c1" {
		t.Fatalf("Parse(%q) = %q, %q, %v; want eu, c1, true", id, region, cell, ok)
	}
	if New("eu", "c1") == id {
		t.Fatal("two ids are equal")
	}
}

func TestParse(t *testing.T) {
	const hex = "5f2a09c3e1d4b7a86f10"
	tests := []struct {
		id           string
		region, cell string
		ok           bool
	}{
		{"j_eu.c1." + hex, "eu", "c1", true},
		{"j_sin.cell0123456789ab." + hex, "sin", "cell0123456789ab", true},
		{"j_" + hex, "", "", false},                             // the old form
		{"j_nope", "", "", false},                               // no parts
		{"", "", "", false},                                     // empty
		{"x_eu.c1." + hex, "", "", false},                       // prefix
		{"j_.c1." + hex, "", "", false},                         // empty region
		{"j_eu.." + hex, "", "", false},                         // empty cell
		{"j_EU.c1." + hex, "", "", false},                       // upper case name
		{"j_eu.c-1." + hex, "", "", false},                      // punctuation
		{"j_eu.c12345678901234567." + hex, "", "", false},       // cell of 17
		{"j_eu.c1." + hex[:19], "", "", false},                  // short hex
		{"j_eu.c1." + hex + "0", "", "", false},                 // long hex
		{"j_eu.c1.5F2A09C3E1D4B7A86F10", "", "", false},         // upper-case hex
		{"j_eu.c1.x" + hex[1:], "", "", false},                  // not hex
		{"j_eu.c1." + hex[:10] + "." + hex[10:], "", "", false}, // extra dot
		{"j_eu." + hex, "eu", "", true},                         // a region's id
		{"j_eu." + hex[:19], "", "", false},                     // a region's id, short
		{"j_eu." + hex + ".", "", "", false},                    // a region's id, a dot more
	}
	for _, tt := range tests {
		region, cell, ok := Parse(tt.id)
		if region != tt.region || cell != tt.cell || ok != tt.ok {
			t.Errorf("Parse(%q) = %q, %q, %v; want %q, %q, %v", tt.id, region, cell, ok, tt.region, tt.cell, tt.ok)
		}
	}
}

func TestValidName(t *testing.T) {
	for s, want := range map[string]bool{
		"eu": true, "c1": true, "0123456789abcdef": true,
		"": false, "0123456789abcdefg": false, "Eu": false, "e_u": false, "e.u": false, "é": false,
	} {
		if got := ValidName(s); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", s, got, want)
		}
	}
}

// NewPlaced mints region ids that place accepts, and gives up (with an
// id all the same) when it accepts none.
func TestNewPlaced(t *testing.T) {
	tries := 0
	id := NewPlaced("eu", func(id string) bool {
		tries++
		return id[len(id)-1]%2 == 0 // about half
	})
	region, cell, ok := Parse(id)
	if !ok || region != "eu" || cell != "" || id[len(id)-1]%2 != 0 {
		t.Fatalf("NewPlaced = %q (Parse %q %q %v) after %d tries", id, region, cell, ok, tries)
	}
	tries = 0
	id = NewPlaced("eu", func(string) bool { tries++; return false })
	if _, _, ok := Parse(id); !ok || tries != 64 {
		t.Fatalf("refused everywhere: %q after %d tries", id, tries)
	}
}

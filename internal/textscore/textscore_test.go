package textscore

import "testing"

func TestTokenF1(t *testing.T) {
	for _, c := range []struct {
		got, want string
		f1        float64
	}{
		{"The Copper Kettle", "the copper kettle", 1},
		{"copper kettle", "the copper kettle", 0.8},
		{"", "x", 0},
		{"tea", "coffee", 0},
	} {
		if f := TokenF1(c.got, c.want); f < c.f1-1e-9 || f > c.f1+1e-9 {
			t.Errorf("TokenF1(%q, %q) = %v, want %v", c.got, c.want, f, c.f1)
		}
	}
	if n := NormName("  Meg  JAMES, "); n != "meg james" {
		t.Errorf("NormName = %q", n)
	}
}

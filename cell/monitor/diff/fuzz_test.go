package diff

import "testing"

// Any two texts parse, hash and compare without panicking; a text
// compared with itself has no facts and the same hash.
func FuzzCompare(f *testing.F) {
	f.Add(page, replace(page, "| Widget | 50 | 12 |", "| Widget | 45 | 12 |"))
	f.Add("| a |\n|---|\n", "# x\n\n- y: z\n```\ncode")
	f.Add("", "| |\n|--|\n| |")
	f.Fuzz(func(t *testing.T, a, b string) {
		da, db := Parse(a), Parse(b)
		_ = Summary(Compare(da, db))
		if facts := Compare(da, Parse(a)); len(facts) != 0 {
			t.Fatalf("a text differs from itself: %+v", facts)
		}
		if Hash(a) != da.Hash() {
			t.Fatal("hash is not stable")
		}
	})
}

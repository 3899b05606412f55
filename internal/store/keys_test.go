package store

import (
	"strings"
	"testing"
)

// A prefix that begins another would let one package's scans and prefix
// deletes reach the other's keys.
func TestPrefixesDoNotOverlap(t *testing.T) {
	seen := map[string]string{}
	for _, l := range Stores {
		for i, a := range l.Ranges {
			if a.Prefix == "" || !strings.HasSuffix(a.Prefix, "/") {
				t.Errorf("store %s: prefix %q of %s must end in /", l.Store, a.Prefix, a.Owner)
			}
			if other, ok := seen[a.Prefix]; ok {
				t.Errorf("prefix %q is used by %s and %s", a.Prefix, other, a.Owner)
			}
			seen[a.Prefix] = a.Owner
			for j, b := range l.Ranges {
				if i != j && strings.HasPrefix(b.Prefix, a.Prefix) {
					t.Errorf("store %s: prefix %q (%s) begins %q (%s)", l.Store, a.Prefix, a.Owner, b.Prefix, b.Owner)
				}
			}
		}
	}
}

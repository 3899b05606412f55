package fcclient

import (
	"os"
	"strings"
	"testing"
)

// The lock file pins the same version as package.json (deps.sh installs
// with npm ci, which refuses a lock that disagrees).
func TestLockPinsTheVersion(t *testing.T) {
	v := Version()
	if v == "" || strings.ContainsAny(v, "^~><*") {
		t.Fatalf("package.json pins %q; want an exact version", v)
	}
	lock, err := os.ReadFile("package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(lock), `"node_modules/@mendable/firecrawl-js": {`+"\n"+`      "version": "`+v+`"`) {
		t.Errorf("package-lock.json does not lock %s at %s", Package, v)
	}
}

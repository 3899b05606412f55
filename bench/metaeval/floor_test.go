package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestHeldOutFloor is issue 31's floor in `make test`: on the held-out
// third of go-trafilatura's own test pages (from the module cache, where
// `go mod download` puts them), with every <meta> and JSON-LD script
// removed, trawl's headline, author and publish date must each be at
// least go-trafilatura's metadata in the same run, less a margin of two
// pages in a hundred, and above an absolute floor a little under what was
// measured (bench/metaeval/README.md has the figures and the full run).
// Both truths are checked: the pages' own tags (read before they are
// removed) and the expected metadata a person wrote for go-trafilatura's
// comparison pages. About 45 s on two shared cores; skipped under -race
// (make test runs the quality floors in a line of their own without it). Skipped, saying why, only where go-trafilatura's module
// is not in the module cache.
func TestHeldOutFloor(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/markusmobius/go-trafilatura").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Skipf("go-trafilatura's module directory not found (go list -m: %v); run go mod download", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "test-files", "comparison")); err != nil {
		t.Skipf("go-trafilatura's test pages not in the module cache: %v", err)
	}
	docs, err := loadTrafilatura(dir)
	if err != nil {
		t.Fatal(err)
	}
	people, err := personTruth(dir)
	if err != nil {
		t.Fatal(err)
	}
	var held []doc
	for _, d := range dedup(docs) {
		if d.heldOut {
			held = append(held, d)
		}
	}
	if raceEnabled {
		// The race detector checks concurrency, not quality, and makes
		// both extractors about eight times slower: make test runs this
		// floor in its own line without it.
		t.Skip("a quality floor: run without -race (make test does, in its own line)")
	}
	rs, err := evaluate(held, people, []string{"stripped"}, runtime.GOMAXPROCS(0))
	if err != nil {
		t.Fatal(err)
	}
	const margin = 0.02
	// floors[truth][field]: measured on these pages (held-out, stripped)
	// at the commit that set them, less about 0.03. Field order as in
	// fields: headline exact, headline F1≥0.9, author, date. Measured
	// 2026-12-03, all held-out pages: page tags 0.708, 0.751, 0.532,
	// 0.707; person 0.760, 0.770, 0.564, 0.831 (go-trafilatura 0.643,
	// 0.692, 0.387, 0.683; 0.746, 0.756, 0.369, 0.729). Every other page:
	// page tags 0.671, 0.718, 0.564, 0.730; person 0.713, 0.734, 0.556,
	// 0.865 (go-trafilatura 0.604, 0.658, 0.436, 0.690; 0.727, 0.741,
	// 0.411, 0.714).
	floors := map[string][4]float64{
		"page tags": {0.67, 0.72, 0.50, 0.67},
		"person":    {0.73, 0.74, 0.53, 0.80},
	}
	if len(held) < 300 {
		floors = map[string][4]float64{
			"page tags": {0.64, 0.69, 0.53, 0.70},
			"person":    {0.68, 0.70, 0.52, 0.83},
		}
	}
	for _, tr := range truths {
		for fi, f := range fields {
			k, n := tally(rs, tr.of, "stripped", "trawl", fi)
			bk, bn := tally(rs, tr.of, "stripped", "go-trafilatura", fi)
			if n[1] < 30 {
				t.Errorf("%s, %s: only %d held-out pages state it", tr.name, f.name, n[1])
				continue
			}
			got, base := float64(k[1])/float64(n[1]), float64(bk[1])/float64(bn[1])
			t.Logf("%s, %s: trawl %.3f (%d/%d), go-trafilatura %.3f (%d/%d)", tr.name, f.name, got, k[1], n[1], base, bk[1], bn[1])
			if got < base-margin {
				t.Errorf("%s, %s: trawl %.3f is below go-trafilatura's %.3f less %.2f", tr.name, f.name, got, base, margin)
			}
			if fl := floors[tr.name][fi]; got < fl {
				t.Errorf("%s, %s: trawl %.3f is below the floor %.2f", tr.name, f.name, got, fl)
			}
		}
	}
}

// Package monid is the grammar of monitor ids. Like a job id, a monitor id
// names the region and the cell that hold the monitor, so any gate routes
// a request for it without a lookup:
//
//	mon_<region>.<cell>.<hex>    e.g. mon_eu.c1.5f2a09c3e1d4b7a86f10
//
// Region and cell names are 1 to 16 of [a-z0-9] (internal/jobid.ValidName);
// hex is 20 lower-case hex digits (80 random bits). The package imports
// nothing heavy, so the gate uses it without linking the cell.
package monid

import (
	"crypto/rand"
	"encoding/hex"
	"strings"

	"github.com/trawlhq/trawl/internal/jobid"
)

const (
	prefix    = "mon_"
	randBytes = 10
)

// New returns a fresh id held by cell of region. Both must be
// jobid.ValidName.
func New(region, cell string) string {
	var b [randBytes]byte
	rand.Read(b[:])
	return prefix + region + "." + cell + "." + hex.EncodeToString(b[:])
}

// Parse returns the region and cell an id names, and false if id is not a
// well-formed monitor id.
func Parse(id string) (region, cell string, ok bool) {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok {
		return "", "", false
	}
	region, rest, _ = strings.Cut(rest, ".")
	cell, random, _ := strings.Cut(rest, ".")
	if !jobid.ValidName(region) || !jobid.ValidName(cell) || len(random) != 2*randBytes {
		return "", "", false
	}
	for i := range len(random) {
		if c := random[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", "", false
		}
	}
	return region, cell, true
}

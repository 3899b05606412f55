// Package monid is the grammar of monitor ids. A monitor belongs to its
// region — it lives in the region's monitor store (internal/monstore),
// checked by whichever of the region's cells holds its claim — so its id
// names the region, and any gate routes a request for it to that region
// without a lookup:
//
//	mon_<region>.<hex>    e.g. mon_eu.5f2a09c3e1d4b7a86f10
//
// Ids made before monitors moved to the region's store also named the
// cell that held them (mon_<region>.<cell>.<hex>); they still parse, to
// their region: their cell moves its monitors into the region's store
// when it starts (cell/monitor/migrate.go, docs/monitors.md). Region and cell names are 1 to 16 of
// [a-z0-9] (internal/jobid.ValidName); hex is 20 lower-case hex digits
// (80 random bits). The package imports nothing heavy, so the gate uses it
// without linking the cell.
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

// New returns a fresh id of a monitor of region, which must be
// jobid.ValidName.
func New(region string) string {
	var b [randBytes]byte
	rand.Read(b[:])
	return prefix + region + "." + hex.EncodeToString(b[:])
}

// Parse returns the region an id names, and false if id is not a
// well-formed monitor id. cell is always "": no cell owns a monitor (the
// route table sends a request for one to any live cell of its region).
func Parse(id string) (region, cell string, ok bool) {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok {
		return "", "", false
	}
	parts := strings.Split(rest, ".")
	switch {
	case len(parts) == 2:
	case len(parts) == 3 && jobid.ValidName(parts[1]): // the former grammar
	default:
		return "", "", false
	}
	region, random := parts[0], parts[len(parts)-1]
	if !jobid.ValidName(region) || len(random) != 2*randBytes {
		return "", "", false
	}
	for i := range len(random) {
		if c := random[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", "", false
		}
	}
	return region, "", true
}

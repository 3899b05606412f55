// Package jobid is the grammar of job ids. An id names the region and the
// cell that own the job, so any gate can route a request for it without a
// lookup:
//
//	j_<region>.<cell>.<hex>    e.g. j_eu.c1.5f2a09c3e1d4b7a86f10
//
// Region and cell names are 1 to 16 of [a-z0-9]; hex is 20 lower-case hex
// digits (80 random bits). The package imports nothing heavy, so the gate can
// use it without linking the cell.
package jobid

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

const (
	prefix    = "j_"
	randBytes = 10
)

// ValidName reports whether s may name a region or a cell: 1 to 16 of
// [a-z0-9].
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 16 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// New returns a fresh id owned by cell of region. Both must be ValidName.
func New(region, cell string) string {
	var b [randBytes]byte
	rand.Read(b[:]) // never fails (crypto/rand panics rather than return an error)
	return prefix + region + "." + cell + "." + hex.EncodeToString(b[:])
}

// Parse returns the region and cell an id names, and false if id is not a
// well-formed job id.
func Parse(id string) (region, cell string, ok bool) {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok {
		return "", "", false
	}
	region, rest, _ = strings.Cut(rest, ".")
	cell, random, _ := strings.Cut(rest, ".")
	if !ValidName(region) || !ValidName(cell) || !isLowerHex(random, 2*randBytes) {
		return "", "", false
	}
	return region, cell, true
}

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Package jobid is the grammar of job ids. An id names the region that
// owns the job, and either the cell that owns it or none:
//
//	j_<region>.<cell>.<hex>    e.g. j_eu.c1.5f2a09c3e1d4b7a86f10
//	j_<region>.<hex>           e.g. j_eu.5f2a09c3e1d4b7a86f10
//
// A gate routes an id that names a cell to that cell (another while it is
// down), and one that names none to the cell its region's ready cells
// place it on (members.Rendezvous over the id): a clustered cell mints
// such ids (NewPlaced) so that, while the region's cells do not change,
// it is the one they are placed on, and any other cell answers for the
// job from the region's job log. Region and cell names are 1 to 16 of
// [a-z0-9]; hex is 20 lower-case hex digits (80 random bits). The package
// imports nothing heavy, so the gate can use it without linking the cell.
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
// NewPlaced returns a new id of region that names no cell and that
// place accepts (the minting cell's check that gates place it on
// itself); after 64 ids place refused (a view of the region that the
// gates do not share), the last one: the job is still answered, by
// whichever cell the id is placed on, from the log.
func NewPlaced(region string, place func(id string) bool) string {
	var id string
	for range 64 {
		var b [randBytes]byte
		rand.Read(b[:])
		id = prefix + region + "." + hex.EncodeToString(b[:])
		if place == nil || place(id) {
			break
		}
	}
	return id
}

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
	if !ValidName(region) {
		return "", "", false
	}
	if isLowerHex(rest, 2*randBytes) {
		return region, "", true // a region's id: no cell
	}
	cell, random, _ := strings.Cut(rest, ".")
	if !ValidName(cell) || !isLowerHex(random, 2*randBytes) {
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

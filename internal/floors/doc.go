// Package floors holds the test that keeps the repository's imports
// running downward (docs/architecture.md, "Floors"): internal/ is the
// floor every part stands on and imports none of them; the ledger and the
// cell stand on internal/ alone; the gate on internal/ and the ledger; the
// gate's Caddy modules on the gate; the commands, the region tests and the
// benchmarks on everything. It has no code of its own.
package floors

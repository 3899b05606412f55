//go:build !race

package eval

// raceEnabled: the binary runs under the race detector.
const raceEnabled = false

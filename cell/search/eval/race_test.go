//go:build race

package eval

// raceEnabled: the test binary runs under the race detector.
const raceEnabled = true

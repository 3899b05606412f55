//go:build !race

package crawl

// raceEnabled: the binary runs under the race detector.
const raceEnabled = false

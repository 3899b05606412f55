//go:build race

package main

// raceEnabled: built with -race (make test), where every page costs about
// eight times as much.
const raceEnabled = true

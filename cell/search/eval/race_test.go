//go:build race

package eval

// raceEnabled: the race detector slows the page conversion about tenfold,
// so the floor's sample is smaller under it (make test).
const raceEnabled = true

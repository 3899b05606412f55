// Package testwait waits, in tests, for a condition to hold: it polls the
// condition until it does or a deadline passes, so that a test waits on
// what it expects and never for a fixed time.
package testwait

import (
	"fmt"
	"testing"
	"time"
)

// Every is how often Until and Poll check their condition.
const Every = 10 * time.Millisecond

// Until polls cond every Every until it holds, and fails t (Fatalf, so
// call it from the test's goroutine) when within passes first, saying
// what it waited for. It returns how long the wait took.
func Until(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	begin := time.Now()
	if err := Poll(within, cond); err != nil {
		t.Fatalf("%v: %s", err, what)
	}
	return time.Since(begin)
}

// Poll polls cond every Every until it holds, and returns an error when
// within passes first: for a caller that adds its own diagnosis to the
// failure, or returns errors rather than fail a test.
func Poll(within time.Duration, cond func() bool) error {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", within)
		}
		time.Sleep(Every)
	}
	return nil
}

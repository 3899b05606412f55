// Package testlog gives a test a slog.Logger that writes to the test's
// own log until the test ends: servers started by a test may log from
// their goroutines after it, and testing panics on a Log after the end.
package testlog

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// New is a text logger at level writing to t's log. Its writer stops at
// t's cleanup; registered when New is called, that cleanup runs after
// every cleanup registered later (the servers the logger is given to).
func New(t testing.TB, level slog.Level) *slog.Logger {
	w := &writer{t: t}
	t.Cleanup(w.stop)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

type writer struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		func() {
			defer func() { recover() }() // a parallel subtest's parent may have ended
			w.t.Log(strings.TrimRight(string(p), "\n"))
		}()
	}
	return len(p), nil
}

func (w *writer) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

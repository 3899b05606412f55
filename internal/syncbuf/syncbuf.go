// Package syncbuf is a bytes.Buffer that one goroutine (a process's
// output, a log handler) writes while another reads it: the tests' and
// test harnesses' sink for logs they show when something fails.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is safe for concurrent Write and String. The zero value is an
// empty, unbounded buffer.
type Buffer struct {
	// Max, when positive, is how much is kept: writes past it are
	// accepted and dropped, so the start, where failures show, stays.
	Max int

	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p (or drops it past Max); it never fails.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Max > 0 && s.b.Len() > s.Max {
		return len(p), nil
	}
	return s.b.Write(p)
}

// String is what was kept so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

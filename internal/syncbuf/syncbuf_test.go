package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

func TestConcurrentWritesAndMax(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("x"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := len(b.String()); got != 800 {
		t.Errorf("unbounded: %d bytes, want 800", got)
	}
	m := Buffer{Max: 10}
	for range 5 {
		if n, err := m.Write([]byte("abcd")); n != 4 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if got := m.String(); got != strings.Repeat("abcd", 3) {
		t.Errorf("Max 10: %q, want the first writes up to past 10 bytes", got)
	}
}

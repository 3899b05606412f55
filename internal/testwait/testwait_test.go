package testwait

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPollWaitsForTheCondition(t *testing.T) {
	var n atomic.Int32
	if err := Poll(10*time.Second, func() bool { return n.Add(1) >= 3 }); err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != 3 {
		t.Errorf("cond called %d times, want 3", got)
	}
}

func TestPollTimesOut(t *testing.T) {
	err := Poll(30*time.Millisecond, func() bool { return false })
	if err == nil || !strings.Contains(err.Error(), "timed out after 30ms") {
		t.Fatalf("err = %v", err)
	}
}

// fatalTB records Fatalf instead of stopping the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
}

func TestUntilSaysWhatItWaitedFor(t *testing.T) {
	tb := &fatalTB{TB: t}
	Until(tb, 20*time.Millisecond, "the job done", func() bool { return false })
	if tb.msg != "timed out after 20ms: the job done" {
		t.Errorf("message %q", tb.msg)
	}
	tb.msg = ""
	if d := Until(tb, time.Second, "at once", func() bool { return true }); tb.msg != "" || d > time.Second {
		t.Errorf("a condition that holds: %q after %s", tb.msg, d)
	}
}

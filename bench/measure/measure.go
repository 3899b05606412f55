// Package measure holds what the bench programs share: the process's CPU
// time and percentiles of sorted samples.
package measure

import (
	"math"
	"syscall"
	"time"
)

// CPUTime is the user+system CPU time of the whole process so far.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of sorted
// samples; 0 for none.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(len(sorted)-1, i))]
}

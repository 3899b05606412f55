package sysstat_test

import (
	"fmt"
	"log"

	"github.com/trawlhq/trawl/internal/sysstat"
)

// One sampler, sampled by one periodic caller (the monitor's 2 s tick); the
// first Sample has no interval to measure CPU over and reports 0.
func ExampleSampler() {
	s := sysstat.New()
	sample, err := s.Sample()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("cpu %.1f%%, memory %d MB of %d MB (%.1f%%), %d processes\n",
		sample.CPUPercent, sample.MemoryBytes>>20, sample.MemoryLimitBytes>>20,
		sample.MemoryPercent, sample.Processes)
	if sample.Pressure() > 0.9 {
		fmt.Println("shed browsers")
	}
}

package cell

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/internal/testcorpus"
)

// BenchmarkJob runs a job over the Debian PostgreSQL docs served from
// loopback: b.N URLs, each a real fetch, content pipeline and store write.
// Reported as pages/s; make bench measures the whole process instead.
func BenchmarkJob(b *testing.B) {
	pages := testcorpus.Pages(b, testcorpus.PostgresDocs)
	srv := testcorpus.Serve(b, testcorpus.PostgresDocs)
	c, err := New(Config{DataDir: b.TempDir(), AllowPrivateNetworks: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	urls := make([]string, b.N)
	for i := range urls {
		urls[i] = fmt.Sprintf("%s/%s?v=%d", srv.URL, pages[i%len(pages)], i)
	}
	b.ResetTimer()
	start := time.Now()
	id, err := c.jobs.Submit(testAccount, urls, mustOptions(b))
	if err != nil {
		b.Fatal(err)
	}
	for {
		s, err := c.jobs.Status(id, testAccount, false)
		if err != nil {
			b.Fatal(err)
		}
		if s.Status == "done" {
			if s.Error > 0 {
				b.Fatalf("%d errors", s.Error)
			}
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pages/s")
}

func mustOptions(b *testing.B) scrape.Options {
	o := scrape.Options{Format: "md"}
	if err := o.Normalize(); err != nil {
		b.Fatal(err)
	}
	return o
}

package cell

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/regionauth"
)

// discardWriter is a ResponseWriter that keeps the headers and drops the
// body, so the benchmark measures the cell, not a recorder.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }

// BenchmarkScrapeCacheHit is the hot path of a repeat scrape: decode the
// request, read the cached result, write it with its usage header.
func BenchmarkScrapeCacheHit(b *testing.B) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, articleHTML)
	}))
	defer site.Close()
	c, err := New(Config{DataDir: b.TempDir(), AllowPrivateNetworks: true, RegionKeys: testKeys, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	h := c.Handler()
	body := `{"url":"` + site.URL + `/tea"}`
	serve := func() *discardWriter {
		w := &discardWriter{h: http.Header{}}
		r, _ := http.NewRequest("POST", "/scrape", strings.NewReader(body))
		testKeys.Sign(r, regionauth.Claims{Account: testAccount, Private: true}, time.Now())
		h.ServeHTTP(w, r)
		return w
	}
	if w := serve(); w.status != http.StatusOK {
		b.Fatalf("first scrape: %d", w.status)
	}
	if w := serve(); w.h.Get(UsageHeader) == "" || !strings.Contains(w.h.Get(UsageHeader), `"hit"`) {
		b.Fatalf("second scrape is not a cache hit: %q", w.h.Get(UsageHeader))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		serve()
	}
}

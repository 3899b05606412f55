package scrape

import "testing"

// BenchmarkUsageHeader is the usage header a scrape writes: every cache hit
// and every fetched page.
func BenchmarkUsageHeader(b *testing.B) {
	b.Run("hit", func(b *testing.B) {
		b.ReportAllocs()
		u := Usage{Engine: "cache", Cache: "hit"}
		for b.Loop() {
			_ = u.String()
		}
	})
	b.Run("miss", func(b *testing.B) {
		b.ReportAllocs()
		u := Usage{Engine: "browser", Level: "browser_proxy", Proxy: "isp", Cache: "miss", Units: 1}
		for b.Loop() {
			_ = u.String()
		}
	})
}

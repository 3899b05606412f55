package extract

import (
	"encoding/json"
	"testing"
)

// BenchmarkDeterministic: the default extractor on the fixtures and the
// real article, with a schema that asks for records too (the costliest
// reading). Whole-system figures: bench/extract (make bench, part 7).
func BenchmarkDeterministic(b *testing.B) {
	plan, err := (&Request{URL: "http://x/", Schema: json.RawMessage(
		`{"type":"object","properties":{"name":{"type":"string"},"price":{"type":"number"},"date":{"type":"string","format":"date"},"author":{"type":"string"},"items":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"price":{"type":"number"}}}}}}`)}).Check()
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"product.html", "structured.html", "aeb_232a43fb.html.gz"} {
		page := readPageB(b, name)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for b.Loop() {
				Deterministic(Page{URL: "https://example.com/a", HTML: page}, plan)
			}
		})
	}
}

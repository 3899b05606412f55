package extract

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// FuzzExtract: any page and any schema, no panic, and what comes back is
// valid JSON (the schema's nulls aside, it validates).
func FuzzExtract(f *testing.F) {
	f.Add(`<html><body><h1>T</h1><p>Price: $5</p></body></html>`, `{"type":"object","properties":{"title":{"type":"string"},"price":{"type":"number"}}}`)
	f.Add(`<script type="application/ld+json">{"@graph":[{"@graph":[[{"name":{"name":{}}}]]}]}</script>`, `{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"}}}}`)
	f.Add(`<ul><li><a href="x">a</a> $1</li><li><a href="y">b</a> $2</li><li><a>c</a></li></ul>`, `{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"name":{},"price":{"type":"integer"}}}}}}`)
	f.Add(`<div itemscope><div itemprop="a" itemscope><span itemprop="a">1</span></div></div>`, `{"anyOf":[{"type":"string"},{"type":"object","properties":{"a":{"enum":[1,"1"]}}}]}`)
	f.Fuzz(func(t *testing.T, page, schema string) {
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				panic(fmt.Sprintf("slow input: page %q schema %q", page, schema))
			}
		}()
		plan, err := (&Request{URL: "http://x/", Schema: json.RawMessage(schema)}).Check()
		if err != nil {
			return
		}
		for _, kind := range []Kind{HTML, Markdown, Text} {
			data := Deterministic(Page{URL: "http://x/a", HTML: ToHTML(page, kind)}, plan)
			if _, err := json.Marshal(data); err != nil {
				t.Fatalf("%v", err)
			}
		}
	})
}

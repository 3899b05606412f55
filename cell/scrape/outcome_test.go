package scrape

import "testing"

// A cache hit's Outcome is only bytes: Result decodes them; a fetch's
// Outcome carries the value it encoded.
func TestOutcomeResult(t *testing.T) {
	hit := &Outcome{Body: []byte(`{"ok":true,"url":"https://a.b/","final_url":"https://a.b/x","status":200,"content_type":"text/html","title":"T","markdown":"# T","html":"<h1>T</h1>","content_hash":"sha256:0"`)}
	r, err := hit.Result()
	if err != nil {
		t.Fatal(err)
	}
	if r.FinalURL != "https://a.b/x" || r.Status != 200 || r.Markdown == nil || *r.Markdown != "# T" || r.HTML == nil || *r.HTML != "<h1>T</h1>" {
		t.Errorf("decoded %+v", r)
	}
	fetched := &Outcome{Body: hit.Body, result: r}
	if got, err := fetched.Result(); err != nil || got != r {
		t.Errorf("a fetch's Result: %p %v, want %p", got, err, r)
	}
	if _, err := (&Outcome{Body: []byte(`{"ok":true,"url":`)}).Result(); err == nil {
		t.Error("a broken body decoded")
	}
}

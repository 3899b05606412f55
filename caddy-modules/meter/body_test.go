package meter

import (
	"strings"
	"testing"
)

func TestCountBody(t *testing.T) {
	for _, tt := range []struct {
		body string
		url  string
		n    int
	}{
		{`{"url":"https://a.example/"}`, "https://a.example/", 0},
		{`{"urls":["https://a/","https://b/",3,{"x":[1,2]}],"formats":["markdown"],"wait_for":{"a":[{}]}}`, "", 4},
		{`{"formats":{"deep":[[[]]]},"urls":[]}`, "", 0},
		{`not json`, "", 0},
		{`{"urls":["a","b"`, "", 2}, // cut short: what was read
		{`[1,2]`, "", 0},
	} {
		url, n := countBody(strings.NewReader(tt.body))
		if url != tt.url || n != tt.n {
			t.Errorf("%s: url %q n %d, want %q %d", tt.body, url, n, tt.url, tt.n)
		}
	}
}

package meter

import (
	"errors"
	"io"
	"net/http/httptest"
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

func TestReadBodyLimit(t *testing.T) {
	for _, tt := range []struct {
		size, limit int64
		declared    bool
		tooLarge    bool
	}{
		{100, 100, true, false},
		{101, 100, true, true},
		{101, 100, false, true},
		{memBody + 10, memBody + 10, false, false}, // spills to the file
		{memBody + 11, memBody + 10, false, true},
		{1, 0, false, true},
		{0, 0, false, false},
	} {
		body := strings.Repeat("x", int(tt.size))
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		if !tt.declared {
			r.ContentLength = -1
		}
		s, err := readBody(r, tt.limit)
		if _, ok := errors.AsType[errTooLarge](err); ok != tt.tooLarge {
			t.Fatalf("%+v: err %v", tt, err)
		}
		if err != nil {
			continue
		}
		got, _ := io.ReadAll(s)
		if string(got) != body || s.size() != tt.size {
			t.Errorf("%+v: read back %d bytes, size %d", tt, len(got), s.size())
		}
		s.Close()
	}
}

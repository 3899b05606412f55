package body

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

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
		s, err := Read(r, tt.limit)
		if _, ok := errors.AsType[TooLarge](err); ok != tt.tooLarge {
			t.Fatalf("%+v: err %v", tt, err)
		}
		if err != nil {
			continue
		}
		got, _ := io.ReadAll(s)
		if string(got) != body || s.Size() != tt.size {
			t.Errorf("%+v: read back %d bytes, size %d", tt, len(got), s.Size())
		}
		s.Close()
	}
}

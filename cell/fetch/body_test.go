package fetch

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"testing/iotest"
)

func TestReadBody(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	tests := []struct {
		name      string
		r         io.Reader
		encodings []string
		limit     int64
		want      string
		err       error // a sentinel, or the transport error itself
	}{
		{name: "plain", r: bytes.NewReader([]byte("hello")), limit: 5, want: "hello"},
		{name: "empty", r: bytes.NewReader(nil), limit: 5, want: ""},
		{name: "one over", r: bytes.NewReader([]byte("hello!")), limit: 5, err: ErrTooLarge},
		{name: "one byte at a time", r: iotest.OneByteReader(bytes.NewReader(gzipped([]byte("hello")))), encodings: []string{"gzip"}, limit: 64, want: "hello"},
		{name: "raw deflate, tiny limit", r: bytes.NewReader(deflated(bytes.Repeat([]byte("a"), 100))), encodings: []string{"deflate"}, limit: 99, err: ErrTooLarge},
		{name: "zlib", r: bytes.NewReader(zlibbed([]byte("hello"))), encodings: []string{"deflate"}, limit: 64, want: "hello"},
		{name: "identity among codings", r: bytes.NewReader(brotlied([]byte("hello"))), encodings: []string{"identity", "br"}, limit: 64, want: "hello"},
		{name: "connection reset, plain", r: io.MultiReader(bytes.NewReader([]byte("hel")), iotest.ErrReader(reset)), limit: 64, err: reset},
		{name: "connection reset inside gzip", r: io.MultiReader(bytes.NewReader(gzipped(page)[:40]), iotest.ErrReader(reset)), encodings: []string{"gzip"}, limit: 1 << 20, err: reset},
		{name: "connection reset in gzip header", r: iotest.ErrReader(reset), encodings: []string{"gzip"}, limit: 64, err: reset},
		{name: "gzip header only", r: bytes.NewReader(gzipped(nil)[:10]), encodings: []string{"gzip"}, limit: 64, err: ErrDecode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readBody(tt.r, tt.encodings, tt.limit, -1)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("readBody = %q, %v; want %v", got, err, tt.err)
				}
				if tt.err == reset && (errors.Is(err, ErrDecode) || errors.Is(err, ErrTooLarge)) {
					t.Fatalf("transport error %v classified as a body error", err)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("readBody = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestReadBodySizeHint(t *testing.T) {
	for _, hint := range []int64{-1, 0, 3, 5, 6, 1 << 30} {
		got, err := readBody(bytes.NewReader([]byte("hello")), nil, 64, hint)
		if err != nil || string(got) != "hello" {
			t.Errorf("hint %d: readBody = %q, %v", hint, got, err)
		}
	}
}

func TestIsZlibHeader(t *testing.T) {
	z := zlibbed([]byte("x"))
	if !isZlibHeader(z[0], z[1]) {
		t.Errorf("zlib stream %x not recognised", z[:2])
	}
	// Raw DEFLATE streams of ordinary text must not look like zlib.
	for _, s := range []string{"x", "hello, world", string(page)} {
		d := deflated([]byte(s))
		if isZlibHeader(d[0], d[1]) {
			t.Errorf("raw deflate of %.10q taken for zlib: %x", s, d[:2])
		}
	}
}

package fetch

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// acceptEncoding lists what decodeContent can undo, in the order Chrome
// sends them.
const acceptEncoding = "gzip, deflate, br, zstd"

// zstdMaxWindow is the largest zstd window the decoder accepts: RFC 9659
// limits zstd as an HTTP content coding to 8 MiB windows, so a larger one
// is not a valid response, and the cap bounds the decoder's memory.
const zstdMaxWindow = 8 << 20

// maxEncodings bounds stacked Content-Encodings: real servers use one, and
// each layer costs decoder memory.
const maxEncodings = 2

// readBody reads a response body of at most limit bytes on the wire and at
// most limit bytes once decompressed, undoing the Content-Encodings listed
// in encodings. It returns ErrTooLarge past the limit (so a compression bomb
// costs no more than limit bytes of memory plus decoder state), ErrDecode
// for a corrupt or unsupported encoding, and the transport's error, as
// is, when reading from r fails.
func readBody(r io.Reader, encodings []string, limit int64, sizeHint int64) ([]byte, error) {
	wire := &capReader{r: r, left: limit}
	dec, err := decodeContent(wire, encodings)
	if err == nil {
		out := &capReader{r: dec, left: limit}
		var b []byte
		b, err = readAll(out, sizeHint, limit)
		if err == nil {
			return b, nil
		}
		if out.over {
			return nil, fmt.Errorf("%w: over %d bytes decompressed", ErrTooLarge, limit)
		}
	}
	switch {
	case wire.over:
		return nil, fmt.Errorf("%w: over %d bytes", ErrTooLarge, limit)
	case wire.err != nil && wire.err != io.EOF:
		return nil, wire.err
	case errors.Is(err, ErrDecode):
		return nil, err
	default:
		return nil, fmt.Errorf("%w: %w", ErrDecode, err)
	}
}

// readAll is io.ReadAll with a first buffer sized from the Content-Length,
// when the server sent one we can believe.
func readAll(r io.Reader, sizeHint, limit int64) ([]byte, error) {
	if sizeHint <= 0 || sizeHint > limit {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, sizeHint+1) // +1: EOF is seen without a regrow
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// errCapped is what a capReader returns past its limit; readBody turns it
// into ErrTooLarge.
var errCapped = errors.New("read limit reached")

// capReader reads at most left bytes from r, then fails with errCapped if r
// has more. Unlike io.LimitReader it does not report a truncated stream as
// a clean EOF, which a decompressor would misread as corruption. It
// records r's first error, so readBody can tell a dropped connection from
// a corrupt stream.
type capReader struct {
	r    io.Reader
	left int64
	over bool
	err  error
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.over {
		return 0, errCapped
	}
	if c.left <= 0 {
		// At the limit: one more byte means too large, EOF means exact.
		var probe [1]byte
		n, err := c.r.Read(probe[:])
		if n > 0 {
			c.over = true
			return 0, errCapped
		}
		c.setErr(err)
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	c.setErr(err)
	return n, err
}

func (c *capReader) setErr(err error) {
	if c.err == nil {
		c.err = err
	}
}

// decodeContent returns a reader that undoes the Content-Encodings listed
// in values (header values, each possibly a comma-separated list, in the
// order the server applied them).
func decodeContent(r io.Reader, values []string) (io.Reader, error) {
	var codings []string
	for _, v := range values {
		for c := range strings.SplitSeq(v, ",") {
			c = strings.ToLower(strings.TrimSpace(c))
			if c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	if len(codings) == 0 {
		return r, nil
	}
	if len(codings) > maxEncodings {
		return nil, fmt.Errorf("%w: %d stacked content-encodings", ErrDecode, len(codings))
	}
	// An empty body (HEAD-like answers, 204, 304) carries the header but no
	// stream; decoders would call that corrupt.
	br := bufio.NewReader(r)
	if _, err := br.Peek(1); err == io.EOF {
		return br, nil
	}
	r = br
	for i := len(codings) - 1; i >= 0; i-- {
		var err error
		if r, err = decoder(r, codings[i]); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func decoder(r io.Reader, coding string) (io.Reader, error) {
	switch coding {
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %w", ErrDecode, err)
		}
		return zr, nil
	case "deflate":
		// RFC 9110 deflate is a zlib stream, but many servers send raw
		// DEFLATE; browsers accept both, told apart by the zlib header.
		br := bufio.NewReader(r)
		if h, err := br.Peek(2); err == nil && isZlibHeader(h[0], h[1]) {
			zr, err := zlib.NewReader(br)
			if err != nil {
				return nil, fmt.Errorf("%w: deflate: %w", ErrDecode, err)
			}
			return zr, nil
		}
		return flate.NewReader(br), nil
	case "br":
		return brotli.NewReader(r), nil
	case "zstd":
		// One goroutine-free decoder per response; it holds no resources
		// beyond its buffers once the stream ends, which the garbage
		// collector reclaims with the reader.
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(zstdMaxWindow), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %w", ErrDecode, err)
		}
		return zr.IOReadCloser(), nil
	default:
		return nil, fmt.Errorf("%w: unsupported content-encoding %q", ErrDecode, coding)
	}
}

// isZlibHeader reports whether cmf, flg start a zlib stream: method 8
// (deflate), window at most 32 KiB, and the header checksum.
func isZlibHeader(cmf, flg byte) bool {
	return cmf&0x0f == 8 && cmf>>4 <= 7 && (uint16(cmf)<<8|uint16(flg))%31 == 0
}

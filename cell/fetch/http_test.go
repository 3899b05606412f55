package fetch

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/nettest"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// page is a realistic HTML page of about 20 KB.
var page = []byte("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Fixture</title></head>\n<body>\n" +
	strings.Repeat("<p>The quick brown fox jumps over the lazy dog. Zürich, naïve, 東京.</p>\n", 250) +
	"</body></html>\n")

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func zlibbed(b []byte) []byte {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func deflated(b []byte) []byte {
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.DefaultCompression)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func brotlied(b []byte) []byte {
	var buf bytes.Buffer
	w := brotli.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func zstded(b []byte) []byte {
	w, _ := zstd.NewWriter(nil)
	defer w.Close()
	return w.EncodeAll(b, nil)
}

// serveBytes answers every request with body, status and the header
// fields in kv (name, value, name, value...). A "Content-Type" of "" is
// removed, so the client must sniff.
func serveBytes(status int, body []byte, kv ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == "Content-Type" && kv[i+1] == "" {
				w.Header()["Content-Type"] = nil
				continue
			}
			w.Header().Add(kv[i], kv[i+1])
		}
		w.WriteHeader(status)
		w.Write(body)
	})
}

func TestFetchContentEncoding(t *testing.T) {
	truncated := gzipped(page)
	truncated = truncated[:len(truncated)/2]
	corrupt := gzipped(page)
	corrupt[len(corrupt)/2] ^= 0xff

	tests := []struct {
		name      string
		encodings []string // Content-Encoding header lines
		body      []byte
		want      []byte
		err       error
	}{
		{name: "none", body: page, want: page},
		{name: "identity", encodings: []string{"identity"}, body: page, want: page},
		{name: "gzip", encodings: []string{"gzip"}, body: gzipped(page), want: page},
		{name: "x-gzip", encodings: []string{"x-gzip"}, body: gzipped(page), want: page},
		{name: "upper case", encodings: []string{"GZIP"}, body: gzipped(page), want: page},
		{name: "gzip multi-member", encodings: []string{"gzip"}, body: append(gzipped(page[:100]), gzipped(page[100:])...), want: page},
		{name: "deflate zlib", encodings: []string{"deflate"}, body: zlibbed(page), want: page},
		{name: "deflate raw", encodings: []string{"deflate"}, body: deflated(page), want: page},
		{name: "br", encodings: []string{"br"}, body: brotlied(page), want: page},
		{name: "gzip then br", encodings: []string{"gzip, br"}, body: brotlied(gzipped(page)), want: page},
		{name: "two header lines", encodings: []string{"deflate", "gzip"}, body: gzipped(zlibbed(page)), want: page},
		{name: "gzip empty body", encodings: []string{"gzip"}, body: nil, want: []byte{}},
		{name: "gzip truncated", encodings: []string{"gzip"}, body: truncated, err: ErrDecode},
		{name: "gzip corrupt", encodings: []string{"gzip"}, body: corrupt, err: ErrDecode},
		{name: "not gzip", encodings: []string{"gzip"}, body: page, err: ErrDecode},
		{name: "br corrupt", encodings: []string{"br"}, body: page, err: ErrDecode},
		{name: "zstd", encodings: []string{"zstd"}, body: zstded(page), want: page},
		{name: "zstd then gzip", encodings: []string{"zstd", "gzip"}, body: gzipped(zstded(page)), want: page},
		{name: "zstd corrupt", encodings: []string{"zstd"}, body: page, err: ErrDecode},
		{name: "zstd truncated", encodings: []string{"zstd"}, body: zstded(page)[:len(zstded(page))/2], err: ErrDecode},
		{name: "unsupported", encodings: []string{"compress"}, body: page, err: ErrDecode},
		{name: "three layers", encodings: []string{"gzip, gzip, gzip"}, body: gzipped(gzipped(gzipped(page))), err: ErrDecode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var gotAE atomic.Value
			srv := nettest.NewServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotAE.Store(r.Header.Get("Accept-Encoding"))
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				for _, e := range tt.encodings {
					w.Header().Add("Content-Encoding", e)
				}
				w.Write(tt.body)
			}))
			resp, err := newEngine(t, HTTPConfig{}).Fetch(t.Context(), &Request{URL: srv.URL})
			if ae := gotAE.Load(); ae != "gzip, deflate, br, zstd" {
				t.Errorf("Accept-Encoding = %q", ae)
			}
			if tt.err != nil {
				if !isOnly(err, tt.err) {
					t.Fatalf("Fetch = %v; want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(resp.Body, tt.want) {
				t.Errorf("body: got %d bytes %.60q, want %d bytes", len(resp.Body), resp.Body, len(tt.want))
			}
			if ce := resp.Header.Get("Content-Encoding"); ce != "" {
				t.Errorf("Content-Encoding still %q after decoding", ce)
			}
			if cl := resp.Header.Get("Content-Length"); len(tt.encodings) > 0 && cl != "" {
				t.Errorf("Content-Length %q left from the compressed body", cl)
			}
		})
	}
}

func TestFetchCharset(t *testing.T) {
	tests := []struct {
		file        string
		contentType string // "" serves no Content-Type header
		gzip        bool
		zstd        bool
		wantType    string
		wantCharset string
	}{
		{file: "windows-1252-meta.html", contentType: "text/html", wantType: "text/html", wantCharset: "windows-1252"},
		{file: "shift_jis-http-equiv.html", contentType: "text/html", wantType: "text/html", wantCharset: "shift_jis"},
		{file: "shift_jis-http-equiv.html", contentType: "text/html", gzip: true, wantType: "text/html", wantCharset: "shift_jis"},
		{file: "iso-8859-1-header.html", contentType: "text/html; charset=ISO-8859-1", wantType: "text/html", wantCharset: "windows-1252"},
		{file: "iso-8859-1-meta.html", contentType: "text/html", wantType: "text/html", wantCharset: "windows-1252"},
		{file: "header-beats-meta.html", contentType: "text/html; charset=\"iso-8859-1\"", wantType: "text/html", wantCharset: "windows-1252"},
		{file: "utf-16le-bom.html", contentType: "text/html; charset=windows-1252", wantType: "text/html", wantCharset: "utf-16le"},
		{file: "utf-8-bom.html", contentType: "text/html; charset=iso-8859-1", wantType: "text/html", wantCharset: "utf-8"},
		{file: "utf-8-undeclared.html", contentType: "text/html", wantType: "text/html", wantCharset: "utf-8"},
		{file: "utf-8-undeclared.html", contentType: "", wantType: "text/html", wantCharset: "utf-8"},
		{file: "latin1-undeclared.html", contentType: "TEXT/HTML", wantType: "text/html", wantCharset: "windows-1252"},
		// Legacy charsets declared nowhere: statistical detection.
		{file: "windows-1251-undeclared.html", contentType: "text/html", wantType: "text/html", wantCharset: "windows-1251"},
		{file: "windows-1251-undeclared.html", contentType: "", zstd: true, wantType: "text/html", wantCharset: "windows-1251"},
		{file: "shift_jis-undeclared.html", contentType: "text/html", wantType: "text/html", wantCharset: "shift_jis"},
		{file: "euc-kr-undeclared.html", contentType: "text/html", wantType: "text/html", wantCharset: "euc-kr"},
		{file: "gbk-undeclared.html", contentType: "text/html", wantType: "text/html", wantCharset: "gbk"},
		// Declarations that the body contradicts.
		{file: "windows-1252-lying-utf-8.html", contentType: "text/html", wantType: "text/html", wantCharset: "windows-1252"},
		{file: "utf-8-lying-iso-8859-1.html", contentType: "text/html; charset=iso-8859-1", wantType: "text/html", wantCharset: "utf-8"},
		{file: "shift_jis.txt", contentType: "text/plain; charset=Shift_JIS", wantType: "text/plain", wantCharset: "shift_jis"},
		{file: "iso-8859-1.xml", contentType: "application/xml", wantType: "application/xml", wantCharset: "windows-1252"},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%s/%s/gzip=%v/zstd=%v", tt.file, tt.contentType, tt.gzip, tt.zstd)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(filepath.Join("testdata", "charset", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			kv := []string{"Content-Type", tt.contentType}
			if tt.gzip {
				raw = gzipped(raw)
				kv = append(kv, "Content-Encoding", "gzip")
			}
			if tt.zstd {
				raw = zstded(raw)
				kv = append(kv, "Content-Encoding", "zstd")
			}
			srv := nettest.NewServer(t, serveBytes(http.StatusOK, raw, kv...))
			resp, err := newEngine(t, HTTPConfig{}).Fetch(t.Context(), &Request{URL: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			if resp.ContentType != tt.wantType || resp.Charset != tt.wantCharset {
				t.Errorf("ContentType, Charset = %q, %q; want %q, %q", resp.ContentType, resp.Charset, tt.wantType, tt.wantCharset)
			}
			golden := filepath.Join("testdata", "charset", tt.file+".golden")
			if *update {
				if err := os.WriteFile(golden, resp.Body, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(resp.Body, want) {
				t.Errorf("body:\n%s\nwant:\n%s", resp.Body, want)
			}
		})
	}
}

func TestFetchBinaryIsRaw(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe\x80")
	for _, ct := range []string{"image/png", ""} {
		srv := nettest.NewServer(t, serveBytes(http.StatusOK, png, "Content-Type", ct))
		resp, err := newEngine(t, HTTPConfig{}).Fetch(t.Context(), &Request{URL: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(resp.Body, png) || resp.ContentType != "image/png" || resp.Charset != "" {
			t.Errorf("Content-Type %q: got %q %q %q", ct, resp.Body, resp.ContentType, resp.Charset)
		}
	}
}

// redirector serves /hop/N, which redirects to /hop/N-1 with the status
// cycled through every redirect code, alternating absolute and relative
// locations; /hop/0 is the page, and /loop redirects to itself.
func redirector() http.Handler {
	codes := []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/loop" {
			http.Redirect(w, r, "/loop", http.StatusFound)
			return
		}
		n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/hop/"))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		if n == 0 {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<p>arrived</p>")
			return
		}
		loc := fmt.Sprintf("/hop/%d", n-1)
		if n%2 == 0 {
			loc = "http://" + r.Host + loc
		}
		http.Redirect(w, r, loc, codes[n%len(codes)])
	})
}

func TestFetchRedirects(t *testing.T) {
	srv := nettest.NewServer(t, redirector())
	tests := []struct {
		name         string
		maxRedirects int
		path         string
		wantStatus   int
		wantPath     string
		wantHops     int
		err          error
	}{
		{name: "none needed", path: "/hop/0", wantStatus: 200, wantPath: "/hop/0"},
		{name: "default limit reached", path: "/hop/10", wantStatus: 200, wantPath: "/hop/0", wantHops: 10},
		{name: "default limit exceeded", path: "/hop/11", err: ErrTooManyRedirects},
		{name: "small limit reached", maxRedirects: 3, path: "/hop/3", wantStatus: 200, wantPath: "/hop/0", wantHops: 3},
		{name: "small limit exceeded", maxRedirects: 3, path: "/hop/4", err: ErrTooManyRedirects},
		{name: "loop", path: "/loop", err: ErrTooManyRedirects},
		{name: "not followed", maxRedirects: -1, path: "/hop/2", wantStatus: http.StatusSeeOther, wantPath: "/hop/2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newEngine(t, HTTPConfig{MaxRedirects: tt.maxRedirects})
			resp, err := h.Fetch(t.Context(), &Request{URL: srv.URL + tt.path})
			if tt.err != nil {
				if !isOnly(err, tt.err) {
					t.Fatalf("Fetch = %v; want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != tt.wantStatus || resp.URL != srv.URL+tt.wantPath || resp.Redirects != tt.wantHops {
				t.Errorf("got status %d, url %s, %d redirects; want %d, %s, %d",
					resp.Status, resp.URL, resp.Redirects, tt.wantStatus, srv.URL+tt.wantPath, tt.wantHops)
			}
		})
	}
}

func TestFetchBodyLimit(t *testing.T) {
	const limit = 1024
	random := make([]byte, 4*limit)
	for i := range random {
		random[i] = byte(i*7919 + i*i*31) // incompressible enough for gzip
	}
	tests := []struct {
		name    string
		handler http.Handler
		err     error
		wantLen int
	}{
		{name: "exactly the limit", handler: serveBytes(200, bytes.Repeat([]byte("a"), limit)), wantLen: limit},
		{name: "over, with content-length", handler: serveBytes(200, bytes.Repeat([]byte("a"), limit+1)), err: ErrTooLarge},
		{name: "over, chunked", handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for range 3 {
				w.Write(bytes.Repeat([]byte("a"), limit/2))
				w.(http.Flusher).Flush()
			}
		}), err: ErrTooLarge},
		{name: "exactly the limit, chunked", handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for range 2 {
				w.Write(bytes.Repeat([]byte("a"), limit/2))
				w.(http.Flusher).Flush()
			}
		}), wantLen: limit},
		{name: "over, compressed on the wire", handler: serveBytes(200, gzipped(random), "Content-Encoding", "gzip"), err: ErrTooLarge},
		{name: "under on the wire, over decompressed", handler: serveBytes(200, gzipped(bytes.Repeat([]byte("a"), limit+1)), "Content-Encoding", "gzip"), err: ErrTooLarge},
		{name: "exactly the limit decompressed", handler: serveBytes(200, gzipped(bytes.Repeat([]byte("a"), limit)), "Content-Encoding", "gzip"), wantLen: limit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := nettest.NewServer(t, tt.handler)
			resp, err := newEngine(t, HTTPConfig{MaxBodyBytes: limit}).Fetch(t.Context(), &Request{URL: srv.URL})
			if tt.err != nil {
				if !isOnly(err, tt.err) {
					t.Fatalf("Fetch = %v; want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Body) != tt.wantLen {
				t.Errorf("body is %d bytes; want %d", len(resp.Body), tt.wantLen)
			}
		})
	}
}

// bombs are bodies that decompress to 1 GiB of zeros from about 1 MB.
func bombs(t *testing.T) map[string][]byte {
	zeros := make([]byte, 1<<20)

	// gzip: a reader must accept concatenated members.
	member := gzipped(zeros)
	gz := bytes.Repeat(member, 1024)

	// deflate: after a sync flush, a segment of back-references into a
	// window of zeros can be repeated as often as we like.
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestCompression)
	w.Write(zeros)
	w.Flush()
	n1 := buf.Len()
	w.Write(zeros)
	w.Flush()
	n2 := buf.Len()
	w.Close()
	all := buf.Bytes()
	df := append(append(bytes.Clone(all[:n1]), bytes.Repeat(all[n1:n2], 1023)...), all[n2:]...)

	// brotli: made once, see testdata/README.md; 1617 bytes.
	br, err := os.ReadFile(filepath.Join("testdata", "bomb", "zeros-1gib.br"))
	if err != nil {
		t.Fatal(err)
	}
	// zstd: a reader must accept concatenated frames.
	zs := bytes.Repeat(zstded(zeros), 1024)
	return map[string][]byte{"gzip": gz, "deflate": df, "br": br, "zstd": zs}
}

// TestFetchCompressionBomb fetches 1 GiB bombs with a 4 MiB cap and checks
// the fetch fails with ErrTooLarge having allocated little more than the
// cap. It is not parallel, so the allocation count is its own.
func TestFetchCompressionBomb(t *testing.T) {
	const limit = 4 << 20
	for enc, body := range bombs(t) {
		t.Run(enc, func(t *testing.T) {
			if len(body) > limit {
				t.Fatalf("bomb is %d bytes on the wire, over the cap", len(body))
			}
			srv := nettest.NewServer(t, serveBytes(200, body, "Content-Type", "text/html", "Content-Encoding", enc))
			h := newEngine(t, HTTPConfig{MaxBodyBytes: limit})

			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := h.Fetch(t.Context(), &Request{URL: srv.URL})
			runtime.ReadMemStats(&after)
			if !isOnly(err, ErrTooLarge) {
				t.Fatalf("Fetch = %v; want ErrTooLarge", err)
			}
			// The body buffer grows to the cap (about 2x in appends); the
			// decoders add their windows; the server side copies the bomb.
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%s bomb: %d KiB on the wire, %d KiB allocated", enc, len(body)>>10, alloc>>10)
			if alloc > 48<<20 {
				t.Errorf("fetch allocated %d MiB for a %d MiB cap", alloc>>20, limit>>20)
			}
		})
	}
}

func TestFetchDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	hang := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}
	tests := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{name: "no headers", handler: hang},
		{name: "headers then nothing", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100000")
			w.WriteHeader(200)
			w.Write([]byte("<html>"))
			w.(http.Flusher).Flush()
			hang(w, r)
		}},
		{name: "slow redirect chain", handler: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/" {
				http.Redirect(w, r, "/next", http.StatusFound)
				return
			}
			hang(w, r)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := nettest.NewServer(t, tt.handler)
			h := newEngine(t, HTTPConfig{Timeout: timeout})
			start := time.Now()
			_, err := h.Fetch(t.Context(), &Request{URL: srv.URL + "/"})
			elapsed := time.Since(start)
			if !isOnly(err, ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Fetch = %v; want ErrUnreachable and DeadlineExceeded", err)
			}
			if elapsed < timeout || elapsed > timeout+2*time.Second {
				t.Errorf("Fetch took %v with a %v deadline", elapsed, timeout)
			}
		})
	}

	t.Run("caller cancels", func(t *testing.T) {
		t.Parallel()
		srv := nettest.NewServer(t, http.HandlerFunc(hang))
		h := newEngine(t, HTTPConfig{Timeout: time.Minute})
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(50*time.Millisecond, cancel)
		_, err := h.Fetch(ctx, &Request{URL: srv.URL})
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnreachable) {
			t.Fatalf("Fetch = %v; want context.Canceled, not ErrUnreachable", err)
		}
	})
}

func TestFetchErrorStatusIsResponse(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 410, 429, 451, 500, 502, 503} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			body := []byte(fmt.Sprintf("<h1>%d %s</h1>", status, http.StatusText(status)))
			srv := nettest.NewServer(t, serveBytes(status, gzipped(body), "Content-Type", "text/html", "Content-Encoding", "gzip", "Retry-After", "120"))
			resp, err := newEngine(t, HTTPConfig{}).Fetch(t.Context(), &Request{URL: srv.URL})
			if err != nil {
				t.Fatalf("Fetch: %v", err)
			}
			if resp.Status != status || !bytes.Equal(resp.Body, body) || resp.Header.Get("Retry-After") != "120" || resp.Engine != "http" {
				t.Errorf("got %d %q, Retry-After %q, engine %q", resp.Status, resp.Body, resp.Header.Get("Retry-After"), resp.Engine)
			}
		})
	}
}

func TestFetchReusesConnections(t *testing.T) {
	var i atomic.Int64
	srv := nettest.NewServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch i.Add(1) % 3 {
		case 0:
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(gzipped(page))
		case 1:
			w.Write(page)
		case 2:
			http.NotFound(w, r)
		}
	}))
	h := newEngine(t, HTTPConfig{})
	for range 20 {
		if _, err := h.Fetch(t.Context(), &Request{URL: srv.URL}); err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.Conns.Load(); n != 1 {
		t.Errorf("20 sequential fetches opened %d connections; want 1", n)
	}

	// Concurrent fetches share the pool too.
	srv2 := nettest.NewServer(t, serveBytes(200, page))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 25 {
				if _, err := h.Fetch(t.Context(), &Request{URL: srv2.URL}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if n := srv2.Conns.Load(); n > 8 {
		t.Errorf("100 fetches from 4 goroutines opened %d connections", n)
	}
	h.Close()
	if _, err := h.Fetch(t.Context(), &Request{URL: srv2.URL}); err != nil {
		t.Errorf("Fetch after Close: %v", err)
	}
}

func TestFetchRequestHeaders(t *testing.T) {
	var mu sync.Mutex
	var hdr http.Header
	srv := nettest.NewServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		hdr = r.Header.Clone()
	}))
	got := func() http.Header {
		mu.Lock()
		defer mu.Unlock()
		return hdr
	}

	h := newEngine(t, HTTPConfig{})
	if _, err := h.Fetch(t.Context(), &Request{URL: srv.URL}); err != nil {
		t.Fatal(err)
	}
	ua := got().Get("User-Agent")
	if ua != DefaultUserAgent || !strings.HasPrefix(ua, "Mozilla/5.0 (") || !strings.Contains(ua, " Chrome/") {
		t.Errorf("User-Agent = %q", ua)
	}
	if a := got().Get("Accept"); !strings.HasPrefix(a, "text/html,") {
		t.Errorf("Accept = %q", a)
	}
	if al := got().Get("Accept-Language"); al != DefaultAcceptLanguage {
		t.Errorf("Accept-Language = %q", al)
	}

	h = newEngine(t, HTTPConfig{UserAgent: "trawl-test/1.0", AcceptLanguage: "fr-FR,fr;q=0.9"})
	extra := http.Header{"accept-language": {"de-DE"}, "X-Trace": {"abc"}, "Accept-Encoding": {"zstd"}}
	if _, err := h.Fetch(t.Context(), &Request{URL: srv.URL, Header: extra}); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"User-Agent":      "trawl-test/1.0",
		"Accept-Language": "de-DE",
		"X-Trace":         "abc",
		"Accept-Encoding": "gzip, deflate, br, zstd", // ours: we must decode what we asked for
	} {
		if v := got().Get(k); v != want {
			t.Errorf("%s = %q; want %q", k, v, want)
		}
	}
}

func TestFetchHTTP2(t *testing.T) {
	s := httptest.NewUnstartedServer(serveBytes(200, gzipped(page), "Content-Type", "text/html", "Content-Encoding", "gzip"))
	var conns atomic.Int64
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	s.EnableHTTP2 = true
	s.StartTLS()
	t.Cleanup(s.Close)
	roots := x509.NewCertPool()
	roots.AddCert(s.Certificate())

	h := newEngine(t, HTTPConfig{TLSClientConfig: &tls.Config{RootCAs: roots}})
	for range 5 {
		resp, err := h.Fetch(t.Context(), &Request{URL: s.URL})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Proto != "HTTP/2.0" || !bytes.Equal(resp.Body, page) {
			t.Fatalf("got %s, %d bytes", resp.Proto, len(resp.Body))
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("5 fetches over HTTP/2 opened %d connections", n)
	}
}

// boundNotListening returns a loopback port held by a socket that is bound
// but not listening, for the test's whole run: a connection to it is
// refused, and no other test's listener can take it meanwhile (a port
// closed after a listen can be, and then it answers: CI saw EOF).
func boundNotListening(t *testing.T) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return sa.(*syscall.SockaddrInet4).Port
}

func TestFetchUnreachable(t *testing.T) {
	closedPort := boundNotListening(t)

	hangup := nettest.NewServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, _ := w.(http.Hijacker).Hijack()
		c.Close()
	}))
	untrusted := httptest.NewUnstartedServer(serveBytes(200, page))
	untrusted.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshake is the point
	untrusted.StartTLS()
	t.Cleanup(untrusted.Close)
	resolver := nettest.StaticDNS(t, nil)

	tests := []struct {
		name string
		url  string
		is   func(error) bool
	}{
		{"connection refused", fmt.Sprintf("http://127.0.0.1:%d/", closedPort), func(err error) bool {
			_, ok := errors.AsType[*net.OpError](err)
			return ok
		}},
		{"no such host", "http://nowhere.test/", func(err error) bool {
			de, ok := errors.AsType[*net.DNSError](err)
			return ok && de.IsNotFound
		}},
		{"hang-up", hangup.URL, func(err error) bool { return errors.Is(err, io.EOF) }},
		{"untrusted certificate", untrusted.URL, func(err error) bool {
			_, ok := errors.AsType[*tls.CertificateVerificationError](err)
			return ok
		}},
	}
	h := newEngine(t, HTTPConfig{Resolver: resolver})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.Fetch(t.Context(), &Request{URL: tt.url})
			if !isOnly(err, ErrUnreachable) || !tt.is(err) {
				t.Fatalf("Fetch = %v (%T); want ErrUnreachable wrapping the cause", err, errors.Unwrap(err))
			}
		})
	}
}

func TestFetchInvalidRequest(t *testing.T) {
	h := newEngine(t, HTTPConfig{})
	if _, err := h.Fetch(t.Context(), nil); !isOnly(err, ErrInvalidURL) {
		t.Errorf("Fetch(nil) = %v", err)
	}
	if _, err := h.Fetch(t.Context(), &Request{URL: "file:///etc/passwd"}); !isOnly(err, ErrScheme) {
		t.Errorf("Fetch(file://) = %v", err)
	}
}

// BenchmarkFetch measures a fetch of a 20 KB page from a loopback server,
// beside a plain net/http GET of the same page as the baseline.
func BenchmarkFetch(b *testing.B) {
	for _, enc := range []string{"identity", "gzip", "br"} {
		body := page
		switch enc {
		case "gzip":
			body = gzipped(page)
		case "br":
			body = brotlied(page)
		}
		srv := nettest.NewServer(b, serveBytes(200, body, "Content-Type", "text/html; charset=utf-8", "Content-Encoding", enc))
		b.Run("engine/"+enc, func(b *testing.B) {
			h := newEngine(b, HTTPConfig{})
			b.ReportAllocs()
			b.SetBytes(int64(len(page)))
			for b.Loop() {
				if _, err := h.Fetch(b.Context(), &Request{URL: srv.URL}); err != nil {
					b.Fatal(err)
				}
			}
		})
		if enc != "identity" {
			continue
		}
		b.Run("net-http-baseline/"+enc, func(b *testing.B) {
			c := &http.Client{Transport: &http.Transport{}}
			defer c.CloseIdleConnections()
			b.ReportAllocs()
			b.SetBytes(int64(len(page)))
			for b.Loop() {
				resp, err := c.Get(srv.URL)
				if err != nil {
					b.Fatal(err)
				}
				io.ReadAll(resp.Body)
				resp.Body.Close()
			}
		})
	}
}

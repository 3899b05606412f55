package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// request is one call a tool makes through the gate: the HTTP request of
// the route it stands for.
type request struct {
	Method string
	Path   string // escaped
	Query  url.Values
	Body   any // JSON; nil for none
	Header http.Header
}

// response is the route's answer as it starts: status and headers; the
// body is read from Body, and Trailer is filled once it is read to the end.
type response struct {
	Status  int
	Header  http.Header
	Body    io.ReadCloser
	Trailer func() http.Header
}

// caller is what the tool server knows of the MCP request a tool call came
// in: the credentials and the address the gate saw.
type caller struct {
	header     http.Header // Authorization, X-Api-Key, X-Forwarded-For
	remoteAddr string
	host       string
	// conn is the MCP request's own context: done when its client has
	// gone, and then the call is too (as an HTTP call whose client hangs
	// up: not charged, the page lost). The SDK's handler context does not
	// end with the connection.
	conn context.Context
}

type callerKey struct{}

func withCaller(ctx context.Context, r *http.Request) context.Context {
	h := http.Header{}
	for _, k := range []string{"Authorization", "X-Api-Key", "X-Forwarded-For", "Traceparent", "Tracestate"} {
		if v := r.Header.Values(k); len(v) > 0 {
			h[k] = v
		}
	}
	return context.WithValue(ctx, callerKey{}, &caller{header: h, remoteAddr: r.RemoteAddr, host: r.Host, conn: r.Context()})
}

// errNoPipeline: the tool server runs outside a gate (a test of the bare
// handler).
var errNoPipeline = errors.New("the tool server is not running inside a gate")

// do sends req through pipeline as the caller, and returns as soon as the
// answer starts. The request runs on its own context (no value of the MCP
// request's, which carries that request's identity): cancelling ctx, or
// closing the body, ends it.
func do(ctx context.Context, pipeline http.Handler, c *caller, req request) (*response, error) {
	if pipeline == nil {
		return nil, errNoPipeline
	}
	var body io.Reader = http.NoBody
	var n int64
	if req.Body != nil {
		b, err := json.Marshal(req.Body)
		if err != nil {
			return nil, err
		}
		body, n = bytes.NewReader(b), int64(len(b))
	}
	inner, cancel := context.WithCancel(context.Background())
	stopTool := context.AfterFunc(ctx, cancel)
	stopConn := func() bool { return false }
	if c.conn != nil {
		stopConn = context.AfterFunc(c.conn, cancel)
	}
	stop := func() { stopTool(); stopConn() }
	target := req.Path
	if len(req.Query) > 0 {
		target += "?" + req.Query.Encode()
	}
	host := c.host
	if host == "" {
		host = "localhost"
	}
	hr, err := http.NewRequestWithContext(inner, req.Method, "http://"+host+target, body)
	if err != nil {
		stop()
		cancel()
		return nil, err
	}
	hr.RequestURI = target
	hr.RemoteAddr = c.remoteAddr
	hr.ContentLength = n
	for k, v := range c.header {
		hr.Header[k] = v
	}
	for k, v := range req.Header {
		hr.Header[k] = v
	}
	if req.Body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("User-Agent", "trawl-mcp")
	// The call is a child of the tool call's span when one is recorded.
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(hr.Header))

	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, started: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			// A handler that panics ends this call only (Caddy's own
			// server would end the connection): never the gate.
			if v := recover(); v != nil {
				w.start(http.StatusBadGateway)
				pw.CloseWithError(fmt.Errorf("the gate failed while answering this call: %v", v))
			}
		}()
		pipeline.ServeHTTP(w, hr)
		w.start(http.StatusOK) // a handler that wrote nothing answered 200
		pw.Close()
	}()
	select {
	case <-w.started:
	case <-done:
	}
	w.mu.Lock()
	status, header := w.status, w.sent
	w.mu.Unlock()
	return &response{
		Status: status, Header: header,
		Body: &bodyCloser{r: pr, close: func() {
			pr.Close()
			cancel()
			<-done
			stop()
		}},
		Trailer: func() http.Header {
			<-done
			return w.trailers()
		},
	}, nil
}

// pipeWriter is the response writer of a call: the status and headers as
// the answer starts, the body through a pipe as it is written (a batch's
// lines as each arrives), and the trailers once the handler returns.
type pipeWriter struct {
	mu      sync.Mutex
	header  http.Header // the handler's
	sent    http.Header // a copy as the answer started
	status  int
	pw      *io.PipeWriter
	started chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) start(status int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent != nil {
		return
	}
	w.status, w.sent = status, w.header.Clone()
	close(w.started)
}

func (w *pipeWriter) WriteHeader(status int) {
	if status < 200 {
		return
	}
	w.start(status)
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.start(http.StatusOK)
	return w.pw.Write(p)
}

// Flush has nothing to do: each Write reaches the reader before it returns.
func (w *pipeWriter) Flush() {}

// trailers are the headers set after the answer started: the declared
// trailers and those written with http.TrailerPrefix.
func (w *pipeWriter) trailers() http.Header {
	t := http.Header{}
	for _, name := range w.sent.Values("Trailer") {
		for _, k := range strings.Split(name, ",") {
			k = http.CanonicalHeaderKey(strings.TrimSpace(k))
			if v := w.header.Values(k); len(v) > 0 {
				t[k] = v
			}
		}
	}
	for k, v := range w.header {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			t[http.CanonicalHeaderKey(name)] = v
		}
	}
	return t
}

type bodyCloser struct {
	r     io.Reader
	close func()
	once  sync.Once
}

func (b *bodyCloser) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b *bodyCloser) Close() error {
	b.once.Do(b.close)
	return nil
}

// lines reads NDJSON lines from r, calling fn with each until it returns
// false.
func lines(r io.Reader, fn func(line []byte) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if !fn(b) {
			return nil
		}
	}
	return sc.Err()
}

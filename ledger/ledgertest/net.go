package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trawlhq/trawl/ledger"
)

// Net is the loopback network between a cluster's nodes, through the seams
// a node takes for its traffic: each node's Raft dialer
// (ledger.NodeConfig.RaftDialer) and the transport of its HTTP client for
// forwarded commands (NodeConfig.HTTPClient). A test cuts a node off (it can
// neither send to nor receive from any other: connections open before the
// cut fail at their next read or write) or delays the links between nodes.
// Every connection between two nodes is dialled by one of them, so shaping
// the dialling side is enough for both directions. Safe for concurrent use.
type Net struct {
	mu    sync.RWMutex
	cut   map[string]bool
	who   map[string]string // host:port → node id
	delay func(from, to string) time.Duration
}

// NewNet returns a network with every link open and no delay.
func NewNet() *Net { return &Net{cut: map[string]bool{}, who: map[string]string{}} }

// Register names the node listening on addrs (its Raft and API addresses).
func (n *Net) Register(id string, addrs ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, a := range addrs {
		n.who[a] = id
	}
}

func (n *Net) nodeAt(addr string) string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if id, ok := n.who[addr]; ok {
		return id
	}
	return addr
}

// Cut cuts id off from every other node, or heals it.
func (n *Net) Cut(id string, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if cut {
		n.cut[id] = true
	} else {
		delete(n.cut, id)
	}
}

// IsCut reports whether id is cut off.
func (n *Net) IsCut(id string) bool {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.cut[id]
}

// Allowed reports whether traffic flows from one node to another now.
func (n *Net) Allowed(from, to string) bool {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return !n.cut[from] && !n.cut[to]
}

// SetDelay gives each link a one-way delay (nil: none). It applies to
// connections dialled and requests sent after the call.
func (n *Net) SetDelay(delay func(from, to string) time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.delay = delay
}

func (n *Net) linkDelay(from, to string) time.Duration {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.delay == nil || from == to {
		return 0
	}
	return n.delay(from, to)
}

// Dialer is node from's Raft dialer on this network.
func (n *Net) Dialer(from string) ledger.Dialer { return &dialer{net: n, from: from} }

type dialer struct {
	net  *Net
	from string
	d    net.Dialer
}

func (d *dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	to := d.net.nodeAt(addr)
	if !d.net.Allowed(d.from, to) {
		return nil, fmt.Errorf("ledgertest: %s unreachable from %s", to, d.from)
	}
	c, err := d.d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if out, in := d.net.linkDelay(d.from, to), d.net.linkDelay(to, d.from); out > 0 || in > 0 {
		c = newDelayedConn(c, out, in)
	}
	return &guardedConn{Conn: c, from: d.from, to: to, net: d.net}, nil
}

// errPartitioned fails reads and writes on a link that was cut.
var errPartitioned = errors.New("ledgertest: link partitioned")

// guardedConn fails reads and writes once the network cuts the link, so a
// partition also breaks connections that were open before it.
type guardedConn struct {
	net.Conn
	from, to string
	net      *Net
}

func (g *guardedConn) cut() bool { return !g.net.Allowed(g.from, g.to) }

func (g *guardedConn) Read(p []byte) (int, error) {
	if g.cut() {
		g.Conn.Close()
		return 0, errPartitioned
	}
	n, err := g.Conn.Read(p)
	if err == nil && g.cut() {
		g.Conn.Close()
		return 0, errPartitioned
	}
	return n, err
}

func (g *guardedConn) Write(p []byte) (int, error) {
	if g.cut() {
		g.Conn.Close()
		return 0, errPartitioned
	}
	return g.Conn.Write(p)
}

// Transport is node from's transport for forwarded commands on this
// network, over base: a request to a node cut off (or from one) fails
// before it is sent; a delayed link holds the request back on the way out
// and the answer on the way back.
func (n *Net) Transport(from string, base http.RoundTripper) http.RoundTripper {
	return &transport{net: n, from: from, base: base}
}

type transport struct {
	net  *Net
	from string
	base http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	to := t.net.nodeAt(req.URL.Host)
	if !t.net.Allowed(t.from, to) {
		return nil, fmt.Errorf("ledgertest: %s unreachable from %s", to, t.from)
	}
	if err := sleepCtx(req.Context(), t.net.linkDelay(t.from, to)); err != nil {
		return nil, err
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	// The body (one small JSON result) is buffered by then; hold the whole
	// answer back for the return trip.
	if err := sleepCtx(req.Context(), t.net.linkDelay(to, t.from)); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// delayedConn is a link with latency and no bandwidth limit: what is
// written reaches the wire out later, what arrives is readable in later.
// Writes are buffered (they return at once); read deadlines apply to
// reading what has arrived, not to the wire.
type delayedConn struct {
	net.Conn
	out, in  time.Duration
	outq     chan chunk
	inq      chan chunk
	done     chan struct{}
	closing  sync.Once
	werr     atomic.Pointer[error]
	rest     []byte
	rerr     error
	deadline atomic.Pointer[time.Time]
}

type chunk struct {
	b   []byte
	due time.Time
	err error
}

func newDelayedConn(c net.Conn, out, in time.Duration) *delayedConn {
	d := &delayedConn{Conn: c, out: out, in: in, outq: make(chan chunk, 4096), inq: make(chan chunk, 4096), done: make(chan struct{})}
	go d.send()
	go d.receive()
	return d
}

func (d *delayedConn) wait(due time.Time) bool {
	if w := time.Until(due); w > 0 {
		t := time.NewTimer(w)
		defer t.Stop()
		select {
		case <-t.C:
		case <-d.done:
			return false
		}
	}
	return true
}

func (d *delayedConn) send() {
	for {
		select {
		case <-d.done:
			return
		case c := <-d.outq:
			if !d.wait(c.due) {
				return
			}
			if _, err := d.Conn.Write(c.b); err != nil {
				d.werr.Store(&err)
				d.Close()
				return
			}
		}
	}
}

func (d *delayedConn) receive() {
	for {
		buf := make([]byte, 32<<10)
		n, err := d.Conn.Read(buf)
		c := chunk{b: buf[:n], due: time.Now().Add(d.in), err: err}
		select {
		case d.inq <- c:
		case <-d.done:
			return
		}
		if err != nil {
			return
		}
	}
}

func (d *delayedConn) Write(p []byte) (int, error) {
	if err := d.werr.Load(); err != nil {
		return 0, *err
	}
	select {
	case d.outq <- chunk{b: append([]byte(nil), p...), due: time.Now().Add(d.out)}:
		return len(p), nil
	case <-d.done:
		return 0, net.ErrClosed
	}
}

func (d *delayedConn) Read(p []byte) (int, error) {
	for len(d.rest) == 0 {
		if d.rerr != nil {
			return 0, d.rerr
		}
		var timeout <-chan time.Time
		if dl := d.deadline.Load(); dl != nil && !dl.IsZero() {
			w := time.Until(*dl)
			if w <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			t := time.NewTimer(w)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case c := <-d.inq:
			if !d.wait(c.due) {
				return 0, net.ErrClosed
			}
			d.rest, d.rerr = c.b, c.err
		case <-timeout:
			return 0, os.ErrDeadlineExceeded
		case <-d.done:
			return 0, net.ErrClosed
		}
	}
	n := copy(p, d.rest)
	d.rest = d.rest[n:]
	return n, nil
}

func (d *delayedConn) Close() error {
	err := net.ErrClosed
	d.closing.Do(func() {
		close(d.done)
		err = d.Conn.Close()
	})
	return err
}

func (d *delayedConn) SetDeadline(t time.Time) error {
	d.deadline.Store(&t)
	return nil
}

func (d *delayedConn) SetReadDeadline(t time.Time) error {
	d.deadline.Store(&t)
	return nil
}

// SetWriteDeadline does nothing: writes are buffered.
func (d *delayedConn) SetWriteDeadline(time.Time) error { return nil }

package guardproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/proxy"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

// Guard is the IP policy of the proxy's clients' network: the same as the
// fetch package's engines (urlpolicy.IsPublic), applied by the proxy to every
// connection a client asks for.
type Guard struct {
	// AllowPrivate turns the policy off: loopback and private addresses
	// may be reached (tests and local use).
	AllowPrivate bool
	// Public says which addresses may be reached; nil means
	// urlpolicy.IsPublic. Tests widen it.
	Public func(netip.Addr) bool
	// Resolver resolves site names; nil means net.DefaultResolver.
	Resolver *net.Resolver
}

func (g *Guard) public(a netip.Addr) bool {
	if g.Public == nil {
		return urlpolicy.IsPublic(a)
	}
	return g.Public(a)
}

// CheckURL validates raw like urlpolicy.Validate and returns it in canonical
// form, refusing hosts that are not public unless private networks are
// allowed. Names are judged by their spelling here and by their addresses
// when dialled.
func (g *Guard) CheckURL(raw string) (*url.URL, error) {
	u, err := urlpolicy.Validate(raw, true) // syntax, canonical form, blocked ports
	if err != nil {
		return nil, err
	}
	if g.AllowPrivate {
		return u, nil
	}
	if a, err := netip.ParseAddr(u.Hostname()); err == nil {
		if !g.public(a) {
			return nil, fmt.Errorf("%w: %s", fetch.ErrNotPublic, a)
		}
		return u, nil
	}
	return urlpolicy.Validate(u.String(), false) // localhost, *.internal, single labels...
}

// control runs for every connection the proxy dials to a site, after name
// resolution and before connect(2), so no DNS answer gets past the policy.
func (g *Guard) control(_ context.Context, network, address string, _ syscall.RawConn) error {
	if g.AllowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot check %s address %q", fetch.ErrNotPublic, network, address)
	}
	if !g.public(ap.Addr()) {
		return fmt.Errorf("%w: refused to connect to %s", fetch.ErrNotPublic, ap.Addr())
	}
	return nil
}

// checkResolved resolves host and refuses it if any of its addresses is
// not public. It is used before handing a name to an upstream proxy, which
// resolves it again on its own network: a name of ours that points inside
// is refused, and a name that does not resolve here is left to the
// upstream.
func (g *Guard) checkResolved(ctx context.Context, host string) error {
	if g.AllowPrivate {
		return nil
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil // literals were judged by CheckURL
	}
	r := g.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if !g.public(a) {
			return fmt.Errorf("%w: %s resolves to %s", fetch.ErrNotPublic, host, a)
		}
	}
	return nil
}

// Proxy is the only way out of the browser pool's browsers: Chromium is
// launched with it as its proxy server, and every browser context gets a
// route of its own. It speaks HTTP/1.1 forward proxying (absolute-form
// requests) and CONNECT tunnels, dials through guard, and can chain a route
// to an upstream proxy.
type Proxy struct {
	guard  *Guard
	log    *slog.Logger
	dialer *net.Dialer // guarded: for sites
	plain  *net.Dialer // unguarded: for configured upstream proxies only
	direct *http.Transport

	mu     sync.Mutex
	routes map[*Route]struct{}
	closed bool
}

// New returns a proxy that dials sites through g and logs to log. It
// listens on nothing until a route is opened; Close ends every route.
func New(g *Guard, log *slog.Logger) *Proxy {
	fp := &Proxy{
		guard:  g,
		log:    log,
		plain:  &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second},
		routes: make(map[*Route]struct{}),
	}
	fp.dialer = &net.Dialer{
		Timeout:        10 * time.Second,
		KeepAlive:      30 * time.Second,
		Resolver:       g.Resolver,
		ControlContext: g.control,
	}
	fp.direct = &http.Transport{
		Proxy:                  nil, // never the environment's: the guard must see the site
		DialContext:            fp.dialer.DialContext,
		MaxIdleConns:           256,
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        90 * time.Second,
		ResponseHeaderTimeout:  60 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 1 << 20,
		DisableCompression:     true, // pass the browser's Accept-Encoding through untouched
	}
	return fp
}

// Route is one listener of the proxy with its own upstream (or none) and
// its own record of refusals. Each browser context gets one, so the page's
// upstream proxy is chosen by which port the browser connects to: nothing
// a page can send selects or forges a route.
type Route struct {
	fp        *Proxy
	ln        net.Listener
	srv       *http.Server
	upstream  *url.URL // nil: dial sites directly through the guard
	transport *http.Transport
	rp        *httputil.ReverseProxy
	record    bool // keep failures for the engine to explain a failed page

	mu sync.Mutex
	// failed says why the route could not carry a request: keyed by URL
	// for plain requests and by host:port for tunnels. Each error wraps
	// fetch.ErrNotPublic (the guard), fetch.ErrProxy (the upstream proxy)
	// or fetch.ErrUnreachable (the site).
	failed  map[string]error
	tunnels map[net.Conn]struct{}
	closed  bool
}

// maxFailures bounds what a route remembers; a page that probes the whole
// private network does not grow it without end.
const maxFailures = 256

// Open starts a route on a fresh loopback port. upstream is a proxy URL
// (http, https, socks5) from the cell's configuration, or empty. With
// record, the route remembers why requests failed (see Route.Failure).
func (fp *Proxy) Open(upstream string, record bool) (*Route, error) {
	r := &Route{fp: fp, record: record, failed: map[string]error{}, tunnels: map[net.Conn]struct{}{}}
	r.transport = fp.direct
	if upstream != "" {
		u, err := ParseUpstream(upstream)
		if err != nil {
			return nil, err
		}
		r.upstream = u
		r.transport = &http.Transport{
			Proxy:                  http.ProxyURL(u),
			DialContext:            fp.plain.DialContext,
			MaxIdleConnsPerHost:    16,
			IdleConnTimeout:        30 * time.Second,
			ResponseHeaderTimeout:  60 * time.Second,
			ExpectContinueTimeout:  time.Second,
			MaxResponseHeaderBytes: 1 << 20,
			DisableCompression:     true,
		}
	}
	r.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The browser sent an absolute URL; keep it and its Host.
			pr.Out.URL = pr.In.URL
			pr.Out.Host = pr.In.Host
		},
		Transport:     r.transport,
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			if r.upstream == nil {
				return nil
			}
			if resp.StatusCode == http.StatusProxyAuthRequired {
				// The upstream refused our credentials. Passed on, a 407
				// would read to the browser as our proxy asking for some.
				return upstreamFailed(r.upstream, fmt.Errorf("it answered %s", resp.Status))
			}
			if ps := resp.Header.Get("Proxy-Status"); strings.Contains(ps, "error=") {
				// RFC 9209: the upstream, not the site, wrote this answer.
				return fmt.Errorf("%w: the upstream proxy reports %s", fetch.ErrUnreachable, redactUpstream(r.upstream, fmt.Sprintf("%q", ps)))
			}
			return nil
		},
		ErrorHandler: r.proxyError,
		ErrorLog:     slog.NewLogLogger(fp.log.Handler(), slog.LevelDebug),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("browser proxy: listen: %w", err)
	}
	r.ln = ln
	r.srv = &http.Server{
		Handler:           r,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       90 * time.Second,
		ErrorLog:          slog.NewLogLogger(fp.log.Handler(), slog.LevelDebug),
	}
	fp.mu.Lock()
	if fp.closed {
		fp.mu.Unlock()
		ln.Close()
		return nil, errors.New("browser proxy is closed")
	}
	fp.routes[r] = struct{}{}
	fp.mu.Unlock()
	go r.srv.Serve(ln)
	return r, nil
}

// ParseUpstream checks an upstream proxy URL.
func ParseUpstream(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("upstream proxy: %w", errors.New("malformed url")) // the url may hold credentials: not echoed
	}
	switch u.Scheme {
	case "http", "https", "socks5", "socks5h":
	default:
		return nil, fmt.Errorf("upstream proxy: scheme %q is not http, https or socks5", u.Scheme)
	}
	if u.Host == "" {
		return nil, errors.New("upstream proxy: no host")
	}
	return u, nil
}

// URL is the address to give the browser.
func (r *Route) URL() string { return "http://" + r.ln.Addr().String() }

// Close stops the route: its listener, its connections and its tunnels.
func (r *Route) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	tunnels := r.tunnels
	r.tunnels = nil
	r.mu.Unlock()
	r.srv.Close()
	for c := range tunnels {
		c.Close()
	}
	if r.upstream != nil {
		r.transport.CloseIdleConnections()
	}
	r.fp.mu.Lock()
	delete(r.fp.routes, r)
	r.fp.mu.Unlock()
}

// Failure returns why the route could not carry a request for rawURL, or
// nil: an error wrapping fetch.ErrNotPublic, fetch.ErrProxy or
// fetch.ErrUnreachable.
func (r *Route) Failure(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.failed[u.String()]; err != nil {
		return err
	}
	return r.failed[hostPort(u)]
}

// note remembers why a request for key failed.
func (r *Route) note(key string, err error) {
	if !r.record {
		return
	}
	r.mu.Lock()
	if len(r.failed) < maxFailures {
		r.failed[key] = err
	}
	r.mu.Unlock()
}

// hostPort is u's host and port, with the scheme's default port.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https", "wss":
			port = "443"
		default:
			port = "80"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// abort ends a plain request the route cannot carry, remembering why: the
// connection closes without an answer, so the page sees a network error,
// as it would without a proxy, and not a response that could pass for the
// site's.
func (r *Route) abort(key string, err error) {
	r.note(key, err)
	r.fp.log.Debug("browser proxy: request failed", "target", key, "err", err)
	panic(http.ErrAbortHandler)
}

// refuseTunnel answers a CONNECT the route cannot carry; the browser
// reports a failed tunnel.
func (r *Route) refuseTunnel(w http.ResponseWriter, hostport string, err error) {
	r.note(hostport, err)
	r.fp.log.Debug("browser proxy: tunnel failed", "target", hostport, "err", err)
	status := http.StatusBadGateway
	if errors.Is(err, fetch.ErrNotPublic) {
		status = http.StatusForbidden
	}
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(status)
}

func (r *Route) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodConnect {
		r.connect(w, req)
		return
	}
	if !req.URL.IsAbs() || req.URL.Scheme != "http" {
		// Chromium sends absolute http URLs to a proxy and tunnels the rest.
		http.Error(w, "trawl: not a proxy request", http.StatusBadRequest)
		return
	}
	u, err := r.fp.guard.CheckURL(req.URL.String())
	if err != nil {
		r.abort(req.URL.String(), err)
	}
	if r.upstream != nil {
		if err := r.fp.guard.checkResolved(req.Context(), u.Hostname()); err != nil {
			r.abort(req.URL.String(), err)
		}
	}
	r.rp.ServeHTTP(w, req)
}

// proxyError ends a forwarded request that failed.
func (r *Route) proxyError(_ http.ResponseWriter, req *http.Request, err error) {
	if req.Context().Err() != nil {
		panic(http.ErrAbortHandler) // the browser went away
	}
	r.abort(req.URL.String(), classify(err, r.upstream))
}

// classify types a failure to carry a request: the guard's refusal, the
// upstream proxy's own failure, or the site not answering.
func classify(err error, upstream *url.URL) error {
	var op *net.OpError
	switch {
	case errors.Is(err, fetch.ErrNotPublic), errors.Is(err, fetch.ErrProxy), errors.Is(err, fetch.ErrUnreachable):
		return err
	case upstream != nil && errors.As(err, &op) && op.Op == "proxyconnect":
		return upstreamFailed(upstream, err)
	}
	return fmt.Errorf("%w: %w", fetch.ErrUnreachable, err)
}

// connect opens a tunnel: TLS (https, wss) and WebSockets go this way.
func (r *Route) connect(w http.ResponseWriter, req *http.Request) {
	target := req.Host
	if _, _, err := net.SplitHostPort(target); err != nil {
		http.Error(w, "trawl: CONNECT needs host:port", http.StatusBadRequest)
		return
	}
	u, err := r.fp.guard.CheckURL("https://" + target + "/")
	if err != nil {
		r.refuseTunnel(w, strings.ToLower(target), err)
		return
	}
	target = u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "443")
	}
	ctx, cancel := context.WithTimeout(req.Context(), 30*time.Second)
	site, err := r.dialTunnel(ctx, target, u.Hostname())
	cancel()
	if err != nil {
		r.refuseTunnel(w, target, classify(err, r.upstream))
		return
	}
	rc := http.NewResponseController(w)
	client, brw, err := rc.Hijack()
	if err != nil {
		site.Close()
		http.Error(w, "trawl: cannot tunnel", http.StatusInternalServerError)
		return
	}
	if !r.track(client, site) {
		client.Close()
		site.Close()
		return
	}
	defer r.untrack(client, site)
	if _, err := brw.WriteString("HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	if err := brw.Flush(); err != nil {
		return
	}
	// Bytes the browser sent after the CONNECT line may already be read.
	var fromClient io.Reader = client
	if n := brw.Reader.Buffered(); n > 0 {
		buffered, _ := brw.Reader.Peek(n)
		fromClient = io.MultiReader(strings.NewReader(string(buffered)), client)
	}
	splice(client, site, fromClient)
}

// dialTunnel connects to target (host:port) directly through the guard, or
// through the route's upstream proxy.
func (r *Route) dialTunnel(ctx context.Context, target, host string) (net.Conn, error) {
	if r.upstream == nil {
		return r.fp.dialer.DialContext(ctx, "tcp", target)
	}
	if err := r.fp.guard.checkResolved(ctx, host); err != nil {
		return nil, err
	}
	return dialUpstream(ctx, r.fp.plain, r.upstream, target)
}

// dialUpstream opens a tunnel to target through the proxy up. Failures
// of the proxy itself (not answering, refusing the credentials, a 502 Bad
// Gateway of its own) wrap fetch.ErrProxy; a proxy that says it could not
// reach the site, fetch.ErrUnreachable. Neither names the proxy.
func dialUpstream(ctx context.Context, d *net.Dialer, up *url.URL, target string) (net.Conn, error) {
	failed := func(err error) error { return upstreamFailed(up, err) }
	switch up.Scheme {
	case "socks5", "socks5h":
		pd, err := proxy.FromURL(up, d)
		if err != nil {
			return nil, failed(err)
		}
		cd, ok := pd.(proxy.ContextDialer)
		if !ok {
			return nil, failed(errors.New("no context dialer"))
		}
		c, err := cd.DialContext(ctx, "tcp", target)
		if err == nil {
			return c, nil
		}
		// The proxy's reply says the site is out of reach; anything else
		// (no proxy, a failed handshake or login) is the proxy's failure.
		var op, dial *net.OpError
		if errors.As(err, &op) && !errors.As(op.Err, &dial) && socksSiteError.MatchString(op.Err.Error()) {
			return nil, fmt.Errorf("%w: the upstream proxy could not reach %s: %s", fetch.ErrUnreachable, target, redactUpstream(up, fetch.ProxyCause(err)))
		}
		return nil, failed(err)
	}
	addr := up.Host
	if up.Port() == "" {
		if up.Scheme == "https" {
			addr = net.JoinHostPort(up.Hostname(), "443")
		} else {
			addr = net.JoinHostPort(up.Hostname(), "80")
		}
	}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, failed(err)
	}
	if up.Scheme == "https" {
		tc := tls.Client(c, &tls.Config{ServerName: up.Hostname(), MinVersion: tls.VersionTLS12})
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, failed(err)
		}
		c = tc
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n", target, target)
	if up.User != nil {
		pass, _ := up.User.Password()
		cred := base64.StdEncoding.EncodeToString([]byte(up.User.Username() + ":" + pass))
		fmt.Fprintf(&b, "Proxy-Authorization: Basic %s\r\n", cred)
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(c, b.String()); err != nil {
		c.Close()
		return nil, failed(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		return nil, failed(err)
	}
	if resp.StatusCode != http.StatusOK {
		// Not Body.Close: it would read to the end of a body that may
		// only end when the proxy closes the connection.
		c.Close()
		if fetch.ProxyRefusedConnect(resp.StatusCode) {
			return nil, failed(fmt.Errorf("CONNECT answered %s", resp.Status))
		}
		return nil, fmt.Errorf("%w: the upstream proxy answered CONNECT with %s", fetch.ErrUnreachable, resp.Status)
	}
	c.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		return &bufferedConn{Conn: c, r: br}, nil
	}
	return c, nil
}

// socksSiteError matches the SOCKS5 replies that are about the site, not
// the proxy.
var socksSiteError = regexp.MustCompile(`(?i)unreachable|refused|TTL expired`)

// bufferedConn is a connection whose first bytes were read ahead.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *bufferedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

func (r *Route) track(cs ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	for _, c := range cs {
		r.tunnels[c] = struct{}{}
	}
	return true
}

func (r *Route) untrack(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		delete(r.tunnels, c)
	}
}

// splice copies both ways until either side ends, then closes both.
func splice(client, site net.Conn, fromClient io.Reader) {
	done := make(chan struct{}, 2)
	go func() {
		io.Copy(site, fromClient)
		closeWrite(site)
		done <- struct{}{}
	}()
	go func() {
		io.Copy(client, site)
		closeWrite(client)
		done <- struct{}{}
	}()
	<-done
	// One side finished; give the other a moment to drain, then end both.
	t := time.NewTimer(5 * time.Second)
	select {
	case <-done:
	case <-t.C:
	}
	t.Stop()
	client.Close()
	site.Close()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

// Close closes every route and the idle connections to sites.
func (fp *Proxy) Close() {
	fp.mu.Lock()
	fp.closed = true
	routes := make([]*Route, 0, len(fp.routes))
	for r := range fp.routes {
		routes = append(routes, r)
	}
	fp.mu.Unlock()
	for _, r := range routes {
		r.Close()
	}
	fp.direct.CloseIdleConnections()
}

// upstreamFailed is the failure of an upstream proxy itself: an error
// wrapping fetch.ErrProxy whose message names neither the proxy's address
// nor its credentials. It reaches callers (the ladder logs the proxy,
// redacted, beside it).
func upstreamFailed(up *url.URL, err error) error {
	return fmt.Errorf("%w: %s", fetch.ErrProxy, redactUpstream(up, fetch.ProxyCause(err)))
}

// redactUpstream removes the proxy's address, name and credentials from
// msg, whatever else spelt them.
func redactUpstream(up *url.URL, msg string) string {
	if up == nil {
		return msg
	}
	secrets := []string{up.Host, up.Hostname()}
	if up.User != nil {
		secrets = append(secrets, up.User.Username())
		if pw, ok := up.User.Password(); ok {
			secrets = append(secrets, pw)
		}
	}
	if p := up.Port(); p != "" {
		secrets = append(secrets, ":"+p)
	}
	for _, s := range secrets {
		if len(s) >= 2 {
			msg = strings.ReplaceAll(msg, s, "[proxy]")
		}
	}
	return msg
}

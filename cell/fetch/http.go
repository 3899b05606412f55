package fetch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/trawlhq/trawl/internal/urlpolicy"
)

// Defaults for HTTPConfig.
const (
	DefaultMaxBodyBytes = 10 << 20
	DefaultTimeout      = 30 * time.Second
	DefaultMaxRedirects = 10
	// DefaultUserAgent is a current desktop Chrome on Windows.
	DefaultUserAgent = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/142.0.0.0 Safari/537.36"
	// DefaultAcceptLanguage is what an English-language Chrome sends.
	DefaultAcceptLanguage = "en-US,en;q=0.9"
	// DefaultMaxIdleConnsPerHost is the keep-alive pool per host; a crawl
	// fetches many pages from one site.
	DefaultMaxIdleConnsPerHost = 16
)

// What Chrome sends for a top-level navigation.
const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"

// HTTPConfig configures the HTTP engine. The zero value is usable: every
// zero field takes its default.
type HTTPConfig struct {
	// AllowPrivateNetworks lets the engine reach loopback, private and
	// other non-public addresses. Off by default; for tests and local use
	// only, since it opens the service to server-side request forgery.
	AllowPrivateNetworks bool
	// MaxBodyBytes caps a response body, both as received and once
	// decompressed; over it Fetch fails with ErrTooLarge. Default 10 MiB.
	MaxBodyBytes int64
	// Timeout is the deadline for a whole fetch: connecting, redirects and
	// reading the body. Default 30s.
	Timeout time.Duration
	// MaxRedirects is how many redirects a fetch follows before failing
	// with ErrTooManyRedirects. Default 10; negative means follow none and
	// return the redirect response itself.
	MaxRedirects int
	// UserAgent is sent with every request. Default DefaultUserAgent.
	UserAgent string
	// AcceptLanguage is sent with every request. Default
	// DefaultAcceptLanguage.
	AcceptLanguage string
	// MaxIdleConnsPerHost is the number of keep-alive connections kept per
	// host. Default DefaultMaxIdleConnsPerHost.
	MaxIdleConnsPerHost int
	// Resolver resolves host names; nil means net.DefaultResolver. The
	// guard checks the addresses it returns when dialling, whatever they
	// are, so a resolver cannot widen what the engine reaches.
	Resolver *net.Resolver
	// TLSClientConfig, if set, is cloned and used for https; for example
	// to trust a test server's certificate. Nil means the system roots
	// and TLS 1.2 or later.
	TLSClientConfig *tls.Config
}

// HTTP is the net/http fetch engine. It is safe for concurrent use and
// keeps connections alive between fetches; call Close when done with it.
type HTTP struct {
	cfg         HTTPConfig
	public      func(netip.Addr) bool // the guard's notion of public; tests widen it
	transport   *http.Transport
	dialer      *net.Dialer // guarded: refuses addresses that are not public
	proxyDialer *net.Dialer // for configured proxies only (see dial)
}

// NewHTTP returns an HTTP engine configured by cfg.
func NewHTTP(cfg HTTPConfig) *HTTP {
	return newHTTP(cfg, urlpolicy.IsPublic)
}

// newHTTP is NewHTTP with the guard's IP policy injected, so tests can
// treat one loopback address as public while the guard is on.
func newHTTP(cfg HTTPConfig, public func(netip.Addr) bool) *HTTP {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxRedirects == 0 {
		cfg.MaxRedirects = DefaultMaxRedirects
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = DefaultUserAgent
	}
	if cfg.AcceptLanguage == "" {
		cfg.AcceptLanguage = DefaultAcceptLanguage
	}
	if cfg.MaxIdleConnsPerHost <= 0 {
		cfg.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	}
	var tlsConfig *tls.Config
	if cfg.TLSClientConfig != nil {
		tlsConfig = cfg.TLSClientConfig.Clone()
	} else {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}

	h := &HTTP{cfg: cfg, public: public}
	h.dialer = &net.Dialer{
		Timeout:        10 * time.Second,
		KeepAlive:      30 * time.Second,
		Resolver:       cfg.Resolver,
		ControlContext: h.checkDial,
	}
	h.proxyDialer = &net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
		Resolver:  cfg.Resolver,
	}
	h.transport = &http.Transport{
		// Never a proxy from the environment: only the proxy a fetch was
		// given (FetchVia), and then the site is checked by name instead.
		Proxy:                  h.proxyFor,
		OnProxyConnectResponse: onProxyConnect,
		DialContext:            h.dial,
		// A custom DialContext turns HTTP/2 off unless forced back on.
		ForceAttemptHTTP2:      true,
		TLSClientConfig:        tlsConfig,
		TLSHandshakeTimeout:    10 * time.Second,
		MaxIdleConns:           256,
		MaxIdleConnsPerHost:    cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:        90 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 1 << 20,
		// We send Accept-Encoding ourselves and decode under our caps.
		DisableCompression: true,
	}
	return h
}

// Close closes idle connections. The engine stays usable.
func (h *HTTP) Close() {
	h.transport.CloseIdleConnections()
}

// dialRefusedError is the guard's refusal of an address at dial time.
type dialRefusedError struct{ addr netip.Addr }

func (e *dialRefusedError) Error() string {
	return fmt.Sprintf("%v: refused to connect to %s", ErrNotPublic, e.addr)
}

func (e *dialRefusedError) Is(target error) bool { return target == ErrNotPublic }

// checkDial runs for every connection attempt, after name resolution and
// before connect(2), with the address about to be dialled; it is the real
// guard, which no DNS answer or redirect can get round.
func (h *HTTP) checkDial(_ context.Context, network, address string, _ syscall.RawConn) error {
	if h.cfg.AllowPrivateNetworks {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot check %s address %q", ErrNotPublic, network, address)
	}
	if !h.public(ap.Addr()) {
		return &dialRefusedError{addr: ap.Addr()}
	}
	return nil
}

// Fetch fetches req.URL with a GET, following redirects, each hop checked
// like the first. A 4xx or 5xx answer is a Response. Errors wrap one of
// the package's sentinels and the cause; when the engine's Timeout passes
// the error wraps ErrUnreachable and context.DeadlineExceeded, but when ctx
// ends first it wraps ctx.Err() alone, since that says nothing about the
// site.
//
// An HTML page whose <meta http-equiv="refresh"> sends the reader to
// another URL within maxRefreshDelay seconds is a redirect, as browsers
// treat it: the engine follows it (checked like any redirect, counted in
// Response.Redirects and against MaxRedirects). A refresh that reloads the
// same page, names no URL, or waits longer is left alone: the page is the
// answer. <link rel="canonical"> is never followed: it is the site's
// preferred address for the content, reported by cell/content in the
// page's metadata, not an instruction to fetch elsewhere.
func (h *HTTP) Fetch(ctx context.Context, req *Request) (*Response, error) {
	if req == nil {
		return nil, fmt.Errorf("%w: no request", ErrInvalidURL)
	}
	u, err := urlpolicy.ValidateWith(req.URL, h.cfg.AllowPrivateNetworks, h.public)
	if err != nil {
		return nil, err
	}
	reqCtx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	host := u.Hostname()

	redirects := 0
	for {
		resp, err := h.fetchOnce(ctx, reqCtx, u, req.Header, redirects)
		if err != nil {
			return nil, err
		}
		target := ""
		if h.cfg.MaxRedirects >= 0 && resp.Status == http.StatusOK && resp.ContentType == "text/html" {
			target = refreshTarget(resp.Body, resp.URL)
		}
		if target == "" {
			return resp, nil
		}
		redirects = resp.Redirects + 1
		if redirects > h.cfg.MaxRedirects {
			return nil, fmt.Errorf("fetch %s: %w: more than %d", u, ErrTooManyRedirects, h.cfg.MaxRedirects)
		}
		if u, err = urlpolicy.ValidateWith(target, h.cfg.AllowPrivateNetworks, h.public); err != nil {
			return nil, fmt.Errorf("fetch %s: refresh to %s: %w", resp.URL, target, err)
		}
		if !strings.EqualFold(u.Hostname(), host) && hasCredentials(req.Header) {
			// A caller's cookies and credentials are for the page's host
			// only, as net/http keeps them on its redirects.
			req = &Request{URL: req.URL, Header: req.Header.Clone(), Browser: req.Browser}
			for _, k := range credentialHeaders {
				req.Header.Del(k)
			}
		}
	}
}

// credentialHeaders are what net/http does not forward on a redirect to
// another domain; the engine drops them on a refresh to another host too.
var credentialHeaders = []string{"Authorization", "Www-Authenticate", "Cookie", "Cookie2"}

func hasCredentials(h http.Header) bool {
	for _, k := range credentialHeaders {
		if h.Get(k) != "" {
			return true
		}
	}
	return false
}

// fetchOnce is one request with its HTTP redirects; done counts the
// redirects already followed by the fetch (meta refreshes and their hops).
func (h *HTTP) fetchOnce(ctx, reqCtx context.Context, u *url.URL, extra http.Header, done int) (*Response, error) {
	hreq, err := http.NewRequestWithContext(reqCtx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	hreq.Header = h.header(extra)

	redirects := done
	client := &http.Client{
		Transport: h.transport,
		CheckRedirect: func(next *http.Request, via []*http.Request) error {
			if h.cfg.MaxRedirects < 0 {
				return http.ErrUseLastResponse
			}
			if done+len(via) > h.cfg.MaxRedirects {
				return fmt.Errorf("%w: more than %d", ErrTooManyRedirects, h.cfg.MaxRedirects)
			}
			nu, err := urlpolicy.ValidateWith(next.URL.String(), h.cfg.AllowPrivateNetworks, h.public)
			if err != nil {
				return fmt.Errorf("redirect to %s: %w", next.URL.Redacted(), err)
			}
			next.URL = nu
			redirects = done + len(via)
			return nil
		},
	}

	resp, err := client.Do(hreq)
	if err != nil {
		return nil, h.fetchError(ctx, reqCtx, u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusProxyAuthRequired && proxyFrom(ctx) != nil {
		// The proxy refused our credentials; the site was never asked.
		return nil, fmt.Errorf("fetch %s: %w: it answered %s", u, ErrProxy, resp.Status)
	}
	if ps := resp.Header.Get("Proxy-Status"); ps != "" && proxyFrom(ctx) != nil && strings.Contains(ps, "error=") {
		// RFC 9209: the proxy, not the site, wrote this answer.
		return nil, fmt.Errorf("fetch %s: %w: the proxy reports %q", u, ErrUnreachable, ps)
	}

	limit := h.cfg.MaxBodyBytes
	if resp.ContentLength > limit {
		return nil, fmt.Errorf("fetch %s: %w: content-length %d over %d", u, ErrTooLarge, resp.ContentLength, limit)
	}
	encodings := resp.Header.Values("Content-Encoding")
	sizeHint := int64(-1)
	if len(encodings) == 0 {
		sizeHint = resp.ContentLength
	}
	wire, err := readBody(resp.Body, encodings, limit, sizeHint)
	if err != nil {
		return nil, h.fetchError(ctx, reqCtx, u, err)
	}

	body, mediaType, cs := decodeText(wire, resp.Header.Get("Content-Type"))
	if len(encodings) > 0 {
		resp.Header.Del("Content-Encoding")
		resp.Header.Del("Content-Length")
	} else if len(body) != len(wire) {
		resp.Header.Del("Content-Length")
	}
	return &Response{
		URL:         resp.Request.URL.String(),
		Status:      resp.StatusCode,
		Header:      resp.Header,
		Body:        body,
		ContentType: mediaType,
		Charset:     cs,
		Engine:      "http",
		Redirects:   redirects,
		Proto:       resp.Proto,
	}, nil
}

// header builds the request header: browser defaults, then the caller's.
func (h *HTTP) header(extra http.Header) http.Header {
	hdr := make(http.Header, 5+len(extra))
	hdr.Set("User-Agent", h.cfg.UserAgent)
	hdr.Set("Accept", browserAccept)
	hdr.Set("Accept-Language", h.cfg.AcceptLanguage)
	hdr.Set("Upgrade-Insecure-Requests", "1")
	for k, v := range extra {
		hdr[http.CanonicalHeaderKey(k)] = append([]string(nil), v...)
	}
	hdr.Set("Accept-Encoding", acceptEncoding)
	return hdr
}

// fetchError classifies err from the client or the body read. parent is
// the caller's context, reqCtx the one carrying the engine's deadline.
func (h *HTTP) fetchError(parent, reqCtx context.Context, u *url.URL, err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err // its message repeats the url
	}
	switch {
	case errors.Is(err, ErrNotPublic), errors.Is(err, ErrScheme), errors.Is(err, ErrInvalidURL),
		errors.Is(err, ErrTooManyRedirects), errors.Is(err, ErrTooLarge), errors.Is(err, ErrDecode):
		return fmt.Errorf("fetch %s: %w", u, err)
	case parent.Err() != nil:
		// The caller gave up; that says nothing about the site.
		return fmt.Errorf("fetch %s: %w", u, parent.Err())
	case errors.Is(err, ErrProxy):
		return fmt.Errorf("fetch %s: %w", u, err)
	case proxyError(err):
		return fmt.Errorf("fetch %s: %w: %s", u, ErrProxy, ProxyCause(err))
	case reqCtx.Err() != nil:
		return fmt.Errorf("fetch %s: %w: no answer within %s: %w", u, ErrUnreachable, h.cfg.Timeout, context.DeadlineExceeded)
	case errors.Is(err, ErrUnreachable):
		return fmt.Errorf("fetch %s: %w", u, err)
	default:
		return fmt.Errorf("fetch %s: %w: %w", u, ErrUnreachable, err)
	}
}

var _ Engine = (*HTTP)(nil)

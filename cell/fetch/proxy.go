package fetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// Proxy kinds a request may ask for (docs/spec/hosted-api.md §2.1 `proxy`).
const (
	ProxyNone        = "none"
	ProxyISP         = "isp"
	ProxyResidential = "residential"
)

// ErrProxy means the upstream proxy itself failed: it did not answer, or
// refused the cell's credentials. The site was never reached.
var ErrProxy = errors.New("the proxy failed")

// ProxySpec is one configured upstream proxy: the kind and country of exit
// it offers and its URL, credentials included. Operators write it
// KIND[:COUNTRY]=URL (see ParseProxySpec).
type ProxySpec struct {
	// Kind is ProxyISP or ProxyResidential.
	Kind string
	// Country is the two-letter exit country in lower case; empty means
	// the proxy exits anywhere, and serves requests that name no country.
	Country string
	// URL is the proxy: http, https or socks5, with user and password if
	// it needs them. It is a secret: String and LogValue redact it.
	URL *url.URL
}

// ParseProxySpec reads KIND[:COUNTRY]=URL, such as
// "isp:us=http://user:pass@proxy.example:8080" or
// "residential=socks5://10.0.0.5:1080".
func ParseProxySpec(s string) (ProxySpec, error) {
	label, raw, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok {
		return ProxySpec{}, errors.New("proxy: want KIND[:COUNTRY]=URL, e.g. isp:us=http://user:pass@host:port")
	}
	kind, country, _ := strings.Cut(strings.ToLower(strings.TrimSpace(label)), ":")
	switch kind {
	case ProxyISP, ProxyResidential:
	default:
		return ProxySpec{}, fmt.Errorf("proxy: kind must be isp or residential (got %q)", kind)
	}
	if country != "" && !ValidCountry(country) {
		return ProxySpec{}, fmt.Errorf("proxy: country must be a two-letter code (got %q)", country)
	}
	u, err := parseProxyURL(strings.TrimSpace(raw))
	if err != nil {
		return ProxySpec{}, err
	}
	return ProxySpec{Kind: kind, Country: country, URL: u}, nil
}

// parseProxyURL checks a proxy URL without ever echoing it: it may hold a
// password.
func parseProxyURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("proxy: the URL does not parse")
	}
	switch u.Scheme {
	case "http", "https", "socks5":
	default:
		return nil, fmt.Errorf("proxy: the URL's scheme must be http, https or socks5 (got %q)", u.Scheme)
	}
	if u.Hostname() == "" || strings.ContainsFunc(u.Host, func(r rune) bool { return r >= utf8.RuneSelf }) {
		return nil, errors.New("proxy: the URL needs an ASCII host")
	}
	if p := u.Port(); p != "" {
		if _, err := netip.ParseAddrPort("0.0.0.0:" + p); err != nil {
			return nil, errors.New("proxy: the URL's port is not valid")
		}
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("proxy: the URL must be scheme://[user:pass@]host[:port] only")
	}
	u.Path, u.RawPath = "", ""
	u.Host = strings.ToLower(u.Host)
	return u, nil
}

// ValidCountry reports whether c is two lower-case ASCII letters.
func ValidCountry(c string) bool {
	return len(c) == 2 && 'a' <= c[0] && c[0] <= 'z' && 'a' <= c[1] && c[1] <= 'z'
}

func (p ProxySpec) String() string {
	return p.Label() + "=" + redactProxy(p.URL.String())
}

// Label is KIND or KIND:COUNTRY.
func (p ProxySpec) Label() string {
	if p.Country == "" {
		return p.Kind
	}
	return p.Kind + ":" + p.Country
}

// LogValue redacts the credentials.
func (p ProxySpec) LogValue() slog.Value { return slog.StringValue(p.String()) }

// Proxy is the upstream proxy chosen for one request. It is a secret (its
// URL holds credentials): String and LogValue redact it.
type Proxy struct {
	// Kind and Country are those of the pool it came from.
	Kind, Country string
	u             *url.URL
	addr          string // host:port the transport dials for it
}

func newProxy(s ProxySpec) *Proxy {
	port := s.URL.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443", "socks5": "1080"}[s.URL.Scheme]
	}
	return &Proxy{Kind: s.Kind, Country: s.Country, u: s.URL, addr: net.JoinHostPort(s.URL.Hostname(), port)}
}

// URL is the proxy's URL with its credentials, for an engine to use (the
// browser engine's BrowserOptions.Proxy). Never log it.
func (p *Proxy) URL() string { return p.u.String() }

// Host is the proxy's host:port, without credentials.
func (p *Proxy) Host() string { return p.addr }

func (p *Proxy) String() string {
	if p == nil {
		return "direct"
	}
	c := p.Country
	if c == "" {
		c = "any"
	}
	return fmt.Sprintf("%s %s via %s", p.Kind, c, redactProxy(p.u.String()))
}

// LogValue redacts the credentials.
func (p *Proxy) LogValue() slog.Value { return slog.StringValue(p.String()) }

// ProxyPools are the configured upstream proxies, pooled by kind and
// country. Pick hands them out round-robin. Safe for concurrent use.
type ProxyPools struct {
	pools map[poolKey]*proxyPool
	kinds map[string]*proxyPool // every proxy of a kind, whatever its country
}

type poolKey struct{ kind, country string }

type proxyPool struct {
	proxies []*Proxy
	next    atomic.Uint64
}

func (p *proxyPool) pick() *Proxy {
	return p.proxies[(p.next.Add(1)-1)%uint64(len(p.proxies))]
}

// NewProxyPools pools specs by kind and country. A proxy listed twice in a
// pool is refused: it is a configuration mistake that would skew the
// rotation.
func NewProxyPools(specs []ProxySpec) (*ProxyPools, error) {
	pp := &ProxyPools{pools: map[poolKey]*proxyPool{}, kinds: map[string]*proxyPool{}}
	for _, s := range specs {
		if s.URL == nil {
			return nil, fmt.Errorf("proxy %s: no URL", s.Label())
		}
		k := poolKey{s.Kind, s.Country}
		pool := pp.pools[k]
		if pool == nil {
			pool = &proxyPool{}
			pp.pools[k] = pool
		}
		for _, q := range pool.proxies {
			if q.u.String() == s.URL.String() {
				return nil, fmt.Errorf("proxy %s listed twice", s)
			}
		}
		p := newProxy(s)
		pool.proxies = append(pool.proxies, p)
		all := pp.kinds[s.Kind]
		if all == nil {
			all = &proxyPool{}
			pp.kinds[s.Kind] = all
		}
		all.proxies = append(all.proxies, p)
	}
	return pp, nil
}

// NoProxyError is Pick's refusal: no pool serves the kind and country.
// Its message names what is missing and what is configured.
type NoProxyError struct {
	Kind, Country string
	Configured    string // "isp us, residential de", or "none"
}

func (e *NoProxyError) Error() string {
	what := "no " + e.Kind + " proxy is configured"
	if e.Country != "" {
		what += " for country " + e.Country
	}
	return what + " on this cell; configured: " + e.Configured
}

// Pick returns the next proxy of kind for country. With a country, only
// that country's pool serves; without one, the kind's pool without a
// country if there is one, else every proxy of the kind in turn. A kind
// and country no pool serves is a *NoProxyError.
func (pp *ProxyPools) Pick(kind, country string) (*Proxy, error) {
	pool := pp.pool(kind, country)
	if pool == nil {
		return nil, &NoProxyError{Kind: kind, Country: country, Configured: pp.Configured()}
	}
	return pool.pick(), nil
}

// Has reports whether Pick would find a proxy.
func (pp *ProxyPools) Has(kind, country string) bool { return pp.pool(kind, country) != nil }

func (pp *ProxyPools) pool(kind, country string) *proxyPool {
	if pp == nil {
		return nil
	}
	if p := pp.pools[poolKey{kind, country}]; p != nil || country != "" {
		return p
	}
	return pp.kinds[kind]
}

// Configured lists the pools, "isp us, isp (any country), residential de",
// sorted; "none" when there are none.
func (pp *ProxyPools) Configured() string {
	if pp == nil || len(pp.pools) == 0 {
		return "none"
	}
	var names []string
	for k, p := range pp.pools {
		c := k.country
		if c == "" {
			c = "(any country)"
		}
		names = append(names, fmt.Sprintf("%s %s (%d)", k.kind, c, len(p.proxies)))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// Len is the number of proxies configured.
func (pp *ProxyPools) Len() int {
	if pp == nil {
		return 0
	}
	n := 0
	for _, p := range pp.kinds {
		n += len(p.proxies)
	}
	return n
}

// proxyKey carries the proxy of one fetch through the request's context to
// the transport's Proxy and DialContext hooks.
type proxyKey struct{}

func proxyFrom(ctx context.Context) *Proxy {
	p, _ := ctx.Value(proxyKey{}).(*Proxy)
	return p
}

// FetchVia is Fetch through the upstream proxy p (nil: directly).
//
// The proxy is trusted configuration: it may be on loopback or a private
// network, and the engine connects to it whatever its address. The site
// still must be public: its URL is validated as for Fetch, and since the
// proxy, not the engine, connects to it, the engine resolves its name
// itself on every hop and refuses it if any address is not public. (A name
// that answers the proxy differently a moment later is out of the
// engine's sight; run proxies that refuse private destinations.)
//
// Failures of the proxy itself wrap ErrProxy.
func (h *HTTP) FetchVia(ctx context.Context, req *Request, p *Proxy) (*Response, error) {
	if p == nil {
		return h.Fetch(ctx, req)
	}
	return h.Fetch(context.WithValue(ctx, proxyKey{}, p), req)
}

// proxyFor is the transport's Proxy hook: the proxy of the request's
// context, once the site's name has been checked.
func (h *HTTP) proxyFor(r *http.Request) (*url.URL, error) {
	p := proxyFrom(r.Context())
	if p == nil {
		return nil, nil
	}
	if !h.cfg.AllowPrivateNetworks {
		if err := h.checkResolves(r.Context(), r.URL.Hostname()); err != nil {
			return nil, err
		}
	}
	return p.u, nil
}

// CheckHost refuses a host that is, or resolves to, an address that is
// not public — what a fetch of it would meet at dial time — and is nil
// when the engine allows private networks. Callers that must know before
// fetching (a job's bill counts only the URLs it can fetch) use it; the
// dial-time guard still decides.
func (h *HTTP) CheckHost(ctx context.Context, host string) error {
	if h.cfg.AllowPrivateNetworks {
		return nil
	}
	return h.checkResolves(ctx, host)
}

// checkResolves refuses a host that is, or resolves to, an address that is
// not public: the check a direct fetch makes at dial time.
func (h *HTTP) checkResolves(ctx context.Context, host string) error {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if !h.public(a) {
			return &dialRefusedError{addr: a}
		}
		return nil
	}
	r := h.cfg.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("%w: resolve %s: %w", ErrUnreachable, host, err)
	}
	for _, a := range addrs {
		if !h.public(a) {
			return &dialRefusedError{addr: a}
		}
	}
	return nil
}

// dial is the transport's DialContext: connections to the request's proxy
// go out unguarded (the operator chose that address), everything else
// through the guarded dialer.
func (h *HTTP) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if p := proxyFrom(ctx); p != nil && addr == p.addr {
		return h.proxyDialer.DialContext(ctx, network, addr)
	}
	return h.dialer.DialContext(ctx, network, addr)
}

// ProxyRefusedConnect reports whether a proxy's answer to CONNECT is a
// failure of the proxy itself, for another proxy of the pool to be tried:
// it refused the cell (407, and 401 or 403, which some proxies send
// instead) or failed as a gateway (502 Bad Gateway: its own exit or
// upstream failed). Other refusals (500, 503, 504: tinyproxy, Squid and
// most others for a site that does not answer or resolve) mean the site is
// out of reach. Both engines use it.
func ProxyRefusedConnect(status int) bool {
	switch status {
	case http.StatusProxyAuthRequired, http.StatusUnauthorized, http.StatusForbidden, http.StatusBadGateway:
		return true
	}
	return false
}

// onProxyConnect types a refused CONNECT (see ProxyRefusedConnect).
func onProxyConnect(_ context.Context, _ *url.URL, _ *http.Request, resp *http.Response) error {
	switch {
	case resp.StatusCode == http.StatusOK:
		return nil
	case ProxyRefusedConnect(resp.StatusCode):
		return fmt.Errorf("%w: it answered CONNECT with %s", ErrProxy, resp.Status)
	default:
		return fmt.Errorf("%w: the proxy answered CONNECT with %s", ErrUnreachable, resp.Status)
	}
}

// proxyError reports whether err is a failure to reach the proxy.
func proxyError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "proxyconnect"
}

// ProxyCause is the cause of a failure to reach a proxy without the
// addresses a network error names ("connect: connection refused"): the
// error reaches callers, the proxy's address is the cell's secret. Both
// engines use it.
func ProxyCause(err error) string {
	for {
		var op *net.OpError
		if !errors.As(err, &op) || op.Err == nil {
			break
		}
		err = op.Err
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return "cannot resolve the proxy's name"
	}
	return err.Error()
}

// Size is the number of proxies Pick chooses among for kind and country.
func (pp *ProxyPools) Size(kind, country string) int {
	if p := pp.pool(kind, country); p != nil {
		return len(p.proxies)
	}
	return 0
}

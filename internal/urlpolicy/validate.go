package urlpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// maxURLLen bounds the URLs we accept; real pages link to URLs of a few
// kilobytes at most, and a bound keeps hostile input cheap to reject.
const maxURLLen = 32 << 10

// Validate checks that raw is an absolute http or https URL that may be
// fetched, and returns it in canonical form: scheme and host in lower case,
// an internationalised host in punycode, an IP literal in its standard form
// (so "http://0x7f.1/" becomes "http://127.0.0.1/"), the default port
// dropped and an empty path written "/".
//
// It returns an error wrapping ErrScheme for a scheme other than http or
// https; ErrInvalidURL for a malformed URL, one with credentials, no host,
// a host name with characters DNS does not allow, or a port that is out of
// range or on the Fetch standard's list of blocked ports (25, 6667...).
// Unless allowPrivate is set, it returns ErrNotPublic for a host that is
// an IP address outside the public internet, in any of the spellings
// resolvers accept (decimal, hex, octal, shortened, IPv4-mapped IPv6, with
// a zone), and for names that only resolve locally: localhost and
// *.localhost, *.local, *.internal, *.home.arpa, and single-label names.
//
// Validate does not resolve names: a name that resolves to a private
// address is refused by the engine when it dials.
func Validate(raw string, allowPrivate bool) (*url.URL, error) {
	return ValidateWith(raw, allowPrivate, isPublic)
}

// ValidateWith is Validate with public deciding which addresses are
// public (tests of a dialer that must see loopback as public).
func ValidateWith(raw string, allowPrivate bool, public func(netip.Addr) bool) (*url.URL, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return nil, fmt.Errorf("%w: empty", ErrInvalidURL)
	}
	if len(s) > maxURLLen {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrInvalidURL, maxURLLen)
	}
	u, err := url.Parse(s)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // drop the url echoed back
		}
		return nil, fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	switch u.Scheme {
	case "http", "https":
	default:
		return nil, ErrScheme
	}
	if u.Opaque != "" {
		return nil, fmt.Errorf("%w: missing // after scheme", ErrInvalidURL)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: credentials in url", ErrInvalidURL)
	}
	host, err := canonicalHost(u, allowPrivate, public)
	if err != nil {
		return nil, err
	}
	port, err := canonicalPort(u)
	if err != nil {
		return nil, err
	}
	if port != "" {
		host += ":" + port
	}
	u.Host = host
	if u.Path == "" {
		u.Path, u.RawPath = "/", ""
	}
	return u, nil
}

// canonicalHost returns the host of u, without port, in canonical form,
// IPv6 literals bracketed.
func canonicalHost(u *url.URL, allowPrivate bool, public func(netip.Addr) bool) (string, error) {
	name := u.Hostname()
	if name == "" {
		return "", fmt.Errorf("%w: missing host", ErrInvalidURL)
	}
	if strings.HasPrefix(u.Host, "[") {
		a, err := netip.ParseAddr(name)
		if err != nil || !a.Is6() || !validZone(a.Zone()) {
			return "", fmt.Errorf("%w: bad ipv6 address", ErrInvalidURL)
		}
		if !allowPrivate && (a.Zone() != "" || !public(a)) {
			return "", fmt.Errorf("%w: %s", ErrNotPublic, a)
		}
		return "[" + a.String() + "]", nil
	}

	// The transport converts names to punycode with idna.Lookup before it
	// dials, which also folds look-alikes such as full-width letters and
	// digits, so the checks below must see the same ASCII form.
	if !isASCII(name) {
		a, err := idna.Lookup.ToASCII(name)
		if err != nil {
			return "", fmt.Errorf("%w: bad host name: %v", ErrInvalidURL, err)
		}
		name = a
	}
	name = strings.ToLower(name)
	bare := strings.TrimSuffix(name, ".")
	if bare == "" {
		return "", fmt.Errorf("%w: bad host name", ErrInvalidURL)
	}

	if endsInNumber(bare) {
		a, ok := parseIPv4(bare)
		if !ok {
			return "", fmt.Errorf("%w: bad ipv4 address", ErrInvalidURL)
		}
		if !allowPrivate && !public(a) {
			return "", fmt.Errorf("%w: %s", ErrNotPublic, a)
		}
		return a.String(), nil
	}

	if err := checkHostName(bare); err != nil {
		return "", err
	}
	if !allowPrivate && localName(bare) {
		return "", fmt.Errorf("%w: %s", ErrNotPublic, bare)
	}
	return name, nil
}

// validZone accepts the zones an IPv6 literal can name: interface names
// and indexes.
func validZone(z string) bool {
	for i := 0; i < len(z); i++ {
		c := z[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// checkHostName accepts what resolvers accept: dot-separated labels of
// letters, digits, hyphens and underscores, at most 63 bytes each and 253
// in all.
func checkHostName(name string) error {
	if len(name) > 253 {
		return fmt.Errorf("%w: host name too long", ErrInvalidURL)
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("%w: bad host name", ErrInvalidURL)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("%w: bad character %q in host name", ErrInvalidURL, c)
			}
		}
	}
	return nil
}

// localName reports whether name (lower case, no trailing dot) can only
// resolve on the local machine or network. Single-label names are
// completed with the resolver's search domains, so they name internal
// hosts.
func localName(name string) bool {
	switch name {
	case "localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback":
		return true
	}
	if !strings.Contains(name, ".") {
		return true
	}
	for _, suffix := range []string{".localhost", ".local", ".internal", ".home.arpa"} {
		if strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}

// endsInNumber reports whether the WHATWG URL standard treats host (no
// trailing dot) as an IPv4 address: its last label is a number.
func endsInNumber(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	_, ok := parseIPv4Number(last)
	return ok || strings.Trim(last, "0123456789") == ""
}

// parseIPv4 parses host the way the WHATWG URL standard and inet_aton do:
// one to four parts, each decimal, octal (leading 0) or hex (0x), the last
// part filling the remaining bytes, so "2130706433", "0x7f000001",
// "0177.0.0.1" and "127.1" are all 127.0.0.1.
func parseIPv4(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var nums [4]uint64
	for i, p := range parts {
		n, ok := parseIPv4Number(p)
		if !ok {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	last := len(parts) - 1
	var v uint64
	for i := range last {
		if nums[i] > 255 {
			return netip.Addr{}, false
		}
		v |= nums[i] << (8 * (3 - i))
	}
	if nums[last] >= 1<<(8*(4-last)) {
		return netip.Addr{}, false
	}
	v |= nums[last]
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func parseIPv4Number(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := 10
	switch {
	case len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X"):
		s, base = s[2:], 16
	case len(s) >= 2 && s[0] == '0':
		s, base = s[1:], 8
	}
	if s == "" {
		return 0, true
	}
	// ParseUint would accept underscores and signs with base 0; with an
	// explicit base it accepts digits only, and overflow is an error.
	n, err := strconv.ParseUint(s, base, 64)
	return n, err == nil
}

// canonicalPort returns the port of u, or "" for the scheme's default.
func canonicalPort(u *url.URL) (string, error) {
	p := u.Port()
	if p == "" {
		return "", nil
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return "", fmt.Errorf("%w: bad port %q", ErrInvalidURL, p)
	}
	if u.Scheme == "http" && n == 80 || u.Scheme == "https" && n == 443 {
		return "", nil
	}
	if blockedPorts[uint16(n)] {
		return "", fmt.Errorf("%w: port %d is blocked", ErrInvalidURL, n)
	}
	return strconv.FormatUint(n, 10), nil
}

// blockedPorts is the Fetch standard's list of "bad ports": services that
// speak other protocols, which a browser will not send HTTP to.
var blockedPorts = func() map[uint16]bool {
	m := make(map[uint16]bool)
	for _, p := range []uint16{
		1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69,
		77, 79, 87, 95, 101, 102, 103, 104, 109, 110, 111, 113, 115, 117,
		119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465, 512, 513,
		514, 515, 526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601,
		636, 989, 990, 993, 995, 1719, 1720, 1723, 2049, 3659, 4045, 4190,
		5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697,
		10080,
	} {
		m[p] = true
	}
	return m
}()

// Redact is raw as a log line may show it: no query, no fragment, no
// user information. Queries carry tokens and session ids often enough
// that no URL a caller sent is logged whole.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if i := strings.IndexAny(raw, "?#"); i >= 0 {
			raw = raw[:i]
		}
		if at := strings.LastIndex(raw, "@"); at >= 0 {
			if s := strings.Index(raw, "://"); s >= 0 && s < at {
				raw = raw[:s+3] + raw[at+1:]
			}
		}
		return raw
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

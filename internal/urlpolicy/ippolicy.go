package urlpolicy

import (
	"net/netip"
)

// nonPublic4 lists the IPv4 ranges that are not on the public internet
// (IANA special-purpose registry, plus multicast and the reserved block).
var nonPublic4 = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("10.0.0.0/8"),      // RFC 1918
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("127.0.0.0/8"),     // loopback
	netip.MustParsePrefix("169.254.0.0/16"),  // link-local, cloud metadata
	netip.MustParsePrefix("172.16.0.0/12"),   // RFC 1918
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // TEST-NET-1
	netip.MustParsePrefix("192.88.99.0/24"),  // deprecated 6to4 relay anycast
	netip.MustParsePrefix("192.168.0.0/16"),  // RFC 1918
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // TEST-NET-2
	netip.MustParsePrefix("203.0.113.0/24"),  // TEST-NET-3
	netip.MustParsePrefix("224.0.0.0/4"),     // multicast
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and 255.255.255.255
}

var (
	// Only 2000::/3 is allocated as global unicast; everything outside it
	// (loopback, unspecified, fc00::/7, fe80::/10, ff00::/8, the deprecated
	// IPv4-compatible ::/96, discard 100::/64, local-use NAT64) is refused,
	// except the well-known NAT64 prefix, which is judged by the IPv4
	// address it carries.
	global6 = netip.MustParsePrefix("2000::/3")
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	teredo  = netip.MustParsePrefix("2001::/32")
	sixTo4  = netip.MustParsePrefix("2002::/16")
	// Non-public ranges inside 2000::/3.
	nonPublic6 = []netip.Prefix{
		netip.MustParsePrefix("2001::/23"),     // IETF protocol assignments (benchmarking, ORCHID...)
		netip.MustParsePrefix("2001:db8::/32"), // documentation
		netip.MustParsePrefix("3fff::/20"),     // documentation (RFC 9637)
	}
)

// IsPublic reports whether a is an address on the public internet: the
// policy every engine's dial-time guard applies (see isPublic). Other
// packages that open connections for a fetch (the browser engine's proxy)
// use it so that one policy guards every path.
func IsPublic(a netip.Addr) bool { return isPublic(a) }

// isPublic reports whether a is an address on the public internet, the
// only kind of address the engine may connect to unless private networks
// are allowed. IPv6 forms that embed an IPv4 address (mapped, NAT64, 6to4,
// Teredo) are judged by the embedded address.
func isPublic(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	a = a.WithZone("")
	if a.Is4In6() {
		a = a.Unmap()
	}
	if a.Is4() {
		return isPublic4(a)
	}
	b := a.As16()
	if !global6.Contains(a) {
		if nat64.Contains(a) {
			return isPublic4(netip.AddrFrom4([4]byte(b[12:16])))
		}
		return false
	}
	switch {
	case teredo.Contains(a):
		// Teredo: server IPv4 in bits 32-63, client IPv4 inverted in 96-127.
		client := [4]byte{^b[12], ^b[13], ^b[14], ^b[15]}
		return isPublic4(netip.AddrFrom4([4]byte(b[4:8]))) && isPublic4(netip.AddrFrom4(client))
	case sixTo4.Contains(a):
		// 6to4: IPv4 in bits 16-47.
		return isPublic4(netip.AddrFrom4([4]byte(b[2:6])))
	}
	for _, p := range nonPublic6 {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

func isPublic4(a netip.Addr) bool {
	for _, p := range nonPublic4 {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// Package clientip carries the caller's network address from the gate's
// front (Caddy, which knows the trusted proxies) to the handlers that limit
// by it, and names the bucket an address counts against.
package clientip

import (
	"context"
	"net"
	"net/http"
	"net/netip"
)

type ctxKey struct{}

// With returns ctx carrying the client's address as the gate's server
// determined it (Caddy's client_ip: the connection's address, or the
// forwarded one when the connection comes from a trusted proxy).
func With(ctx context.Context, ip string) context.Context {
	return context.WithValue(ctx, ctxKey{}, ip)
}

// Of returns the client address of r: the one the gate put in its
// context, else the connection's.
func Of(r *http.Request) string {
	if ip, ok := r.Context().Value(ctxKey{}).(string); ok && ip != "" {
		return ip
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Bucket is the key a per-address limit counts ip under: the address for
// IPv4 (and IPv4-mapped IPv6), its /64 for IPv6, since one subscriber is
// usually handed a whole /64 and could otherwise take a new address per
// request.
func Bucket(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}

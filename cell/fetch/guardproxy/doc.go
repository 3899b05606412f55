// Package guardproxy is an SSRF-guarded forward proxy on loopback: the only
// way out of the browser pool's Chromium (cell/fetch/browser), and usable by
// any client that cannot be trusted to keep to public addresses itself.
//
// A Proxy speaks HTTP/1.1 forward proxying (absolute-form requests) and
// CONNECT tunnels (TLS, WebSockets). Its Guard checks every target's host
// like urlpolicy.Validate, resolves names itself and checks every address it
// dials with urlpolicy.IsPublic at connect time, exactly as the HTTP engine's
// dialer does; so DNS rebinding and redirects to private addresses are
// refused wherever they occur. Guard.AllowPrivate turns the policy off
// (tests, local use).
//
// Each Route is a listener on its own loopback port with its own upstream
// proxy (an http, https or socks5 URL with credentials, or none) and its
// own record of failures: the client's route is fixed by the port it
// connects to, so nothing a client sends can choose or forge one. With an
// upstream, the guard still checks the target's host, and refuses a name
// that resolves here to a private address, before handing it to the
// upstream, which resolves and dials it on its own network.
//
// Route.Failure says why a request could not be carried: an error wrapping
// fetch.ErrNotPublic (the guard refused), fetch.ErrProxy (the upstream
// proxy itself failed: nothing listens, it refuses the credentials, or
// answers CONNECT with 502) or fetch.ErrUnreachable (the site). These
// errors never name the upstream's address or credentials.
package guardproxy

// Package fetch retrieves web pages for trawl.
//
// An Engine turns a Request into a Response. The HTTP engine is a net/http
// client that behaves like a desktop browser (headers, compression, charset
// decoding) and refuses to reach anything but the public internet: URLs are
// checked by urlpolicy.Validate before a request is made, every redirect hop is
// checked again, and every connection is checked at dial time against the IP
// address actually dialled, so DNS rebinding cannot slip past the guard.
//
// Callers test failures with errors.Is against the sentinel errors below; a
// response with a 4xx or 5xx status is a Response, not an error.
package fetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/trawlhq/trawl/internal/urlpolicy"
)

// Request is one page to fetch.
type Request struct {
	// URL is the absolute http or https URL to fetch.
	URL string
	// Header holds extra request headers. They replace the engine's
	// defaults of the same name, except Accept-Encoding, which the engine
	// owns because it must be able to decode what it asked for. A
	// caller's headers must pass CheckHeaders first: the engines trust
	// what they are given.
	Header http.Header
	// Browser holds what only the browser engine does with a page; nil
	// means its defaults. Other engines ignore it.
	Browser *BrowserOptions
}

// BrowserOptions tell the browser engine how to render a page. The zero
// value renders the page with the engine's defaults.
//
// Cookies and Proxy are secrets (a recipe's session, a proxy's
// credentials): the engine uses them for this one request and never logs
// or stores them, and String and LogValue leave them out.
type BrowserOptions struct {
	// WaitFor delays the capture until a condition holds: a CSS selector
	// that must match an element, or "js:" followed by a JavaScript
	// expression, function or function body whose result must be truthy
	// (evaluated again on every animation frame, so it must not return a
	// promise).
	WaitFor string
	// JS is a script run after the page has loaded and before WaitFor is
	// checked: an expression, a function or a function body (which may use
	// await). Its result is ignored; a thrown error fails the fetch.
	JS string
	// Screenshot asks for a full-page PNG in Response.Screenshot.
	Screenshot bool
	// PDF asks for the page printed as a PDF (Chromium's print to PDF, the
	// page's backgrounds included) in Response.PDF.
	PDF bool
	// Viewport is the window size in CSS pixels; zero means the engine's
	// default (1280x720).
	Viewport Viewport
	// UserAgent replaces the browser's user agent, and any User-Agent in
	// Request.Header.
	UserAgent string
	// Cookies are set in the page's fresh browser context before it
	// navigates, and die with it.
	Cookies []Cookie
	// Timeout is the deadline for the whole page: navigation, JS, WaitFor,
	// Delay and capture. Zero means the engine's default.
	Timeout time.Duration
	// Delay is a pause after WaitFor is met and before the capture, for
	// pages that keep moving (animations, late widgets).
	Delay time.Duration
	// Proxy is the URL of an upstream proxy (http, https or socks5, with
	// credentials) for all of this page's traffic. It must come from the
	// cell's configuration, never from a caller: the engine trusts the
	// address. Empty means the page connects directly.
	Proxy string
	// Actions are steps run on the page, in order, after JS, WaitFor and
	// Delay and before the capture (at most MaxActions); their output is
	// Response.Actions. An action that fails fails the fetch.
	Actions []Action
}

// Viewport is a browser window size in CSS pixels.
type Viewport struct {
	Width, Height int
}

// Cookie is a cookie to send with a browser request. An empty Domain means
// the host of Request.URL, an empty Path means "/".
type Cookie struct {
	Name, Value, Domain, Path string
}

// String leaves the cookie's value out.
func (c Cookie) String() string {
	return fmt.Sprintf("%s=<redacted> (domain %q, path %q)", c.Name, c.Domain, c.Path)
}

// LogValue leaves the cookie's value out.
func (c Cookie) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", c.Name), slog.String("domain", c.Domain), slog.String("path", c.Path))
}

// String describes the options without their secrets: cookie values and
// the proxy's credentials.
func (o BrowserOptions) String() string {
	return fmt.Sprintf("{WaitFor:%q JS:%d bytes Screenshot:%v Viewport:%dx%d UserAgent:%q Cookies:%v Timeout:%v Delay:%v Proxy:%q Actions:%d}",
		o.WaitFor, len(o.JS), o.Screenshot, o.Viewport.Width, o.Viewport.Height, o.UserAgent, o.Cookies, o.Timeout, o.Delay, redactProxy(o.Proxy), len(o.Actions))
}

// LogValue describes the options without their secrets.
func (o BrowserOptions) LogValue() slog.Value {
	return slog.StringValue(o.String())
}

func redactProxy(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparsable>"
	}
	if u.User != nil {
		u.User = url.User("redacted")
	}
	return u.String()
}

// Response is a fetched page. It owns its fields: nothing in it is shared
// with the engine after Fetch returns.
type Response struct {
	// URL is the final URL, after redirects.
	URL string
	// Status is the site's own HTTP status; 4xx and 5xx are not errors.
	Status int
	// Header is the response header as received, except that
	// Content-Encoding and Content-Length are removed when Body no longer
	// matches the bytes on the wire.
	Header http.Header
	// Body is decompressed. For HTML, XML, JSON, JavaScript and text/* it is
	// also decoded to valid UTF-8, without a byte order mark; for other
	// types it is the raw bytes.
	Body []byte
	// ContentType is the media type, lower case and without parameters,
	// from the Content-Type header or, when that is missing, sniffed.
	ContentType string
	// Charset is the WHATWG name of the source encoding Body was decoded
	// from ("utf-8", "windows-1252", "shift_jis"...); empty for types that
	// are not text. Note that the WHATWG maps iso-8859-1 to windows-1252.
	Charset string
	// Engine names the engine that produced the response: "http" or
	// "browser".
	Engine string
	// Redirects is the number of redirects followed.
	Redirects int
	// Proto is the protocol of the final response, such as "HTTP/1.1" or
	// "HTTP/2.0".
	Proto string
	// Screenshot is a full-page PNG, when BrowserOptions.Screenshot asked
	// for one.
	Screenshot []byte
	// PDF is the page printed, when BrowserOptions.PDF asked for it.
	PDF []byte
	// Actions is what BrowserOptions.Actions produced; nil without them.
	Actions *ActionResults
}

// Engine fetches pages. Implementations are safe for concurrent use.
type Engine interface {
	Fetch(ctx context.Context, req *Request) (*Response, error)
}

// Errors returned by Engine.Fetch, to be tested with errors.Is. Fetch
// errors wrap the underlying cause as well. The first three are the URL
// policy's (internal/urlpolicy), so that one package names every fetch
// error.
var (
	ErrInvalidURL = urlpolicy.ErrInvalidURL
	ErrScheme     = urlpolicy.ErrScheme
	ErrNotPublic  = urlpolicy.ErrNotPublic
	// ErrUnreachable means the site did not answer: DNS failure, connection
	// refused or reset, TLS failure, or no answer within the deadline.
	ErrUnreachable      = errors.New("site is unreachable")
	ErrTooLarge         = errors.New("response body is too large")
	ErrTooManyRedirects = errors.New("too many redirects")
	// ErrDecode means the body could not be decompressed: a corrupt stream
	// or a Content-Encoding the engine does not support.
	ErrDecode = errors.New("response body could not be decoded")
	// ErrFleetBusy means no browser page came free in time. The API answers
	// 503 fleet-busy and does not charge: the caller repeats the request.
	ErrFleetBusy = errors.New("no browser free")
)

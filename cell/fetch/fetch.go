// Package fetch retrieves web pages for trawl.
//
// An Engine turns a Request into a Response. The HTTP engine is a net/http
// client that behaves like a desktop browser (headers, compression, charset
// decoding) and refuses to reach anything but the public internet: URLs are
// checked by ValidateURL before a request is made, every redirect hop is
// checked again, and every connection is checked at dial time against the IP
// address actually dialled, so DNS rebinding cannot slip past the guard.
//
// Callers test failures with errors.Is against the sentinel errors below; a
// response with a 4xx or 5xx status is a Response, not an error.
package fetch

import (
	"context"
	"errors"
	"net/http"
)

// Request is one page to fetch.
type Request struct {
	// URL is the absolute http or https URL to fetch.
	URL string
	// Header holds extra request headers. They replace the engine's
	// defaults of the same name, except Accept-Encoding, which the engine
	// owns because it must be able to decode what it asked for.
	Header http.Header
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
	// Engine names the engine that produced the response: "http".
	Engine string
	// Redirects is the number of redirects followed.
	Redirects int
	// Proto is the protocol of the final response, such as "HTTP/1.1" or
	// "HTTP/2.0".
	Proto string
}

// Engine fetches pages. Implementations are safe for concurrent use.
type Engine interface {
	Fetch(ctx context.Context, req *Request) (*Response, error)
}

// Errors returned by ValidateURL and Engine.Fetch, to be tested with
// errors.Is. Fetch errors wrap the underlying cause as well.
var (
	ErrInvalidURL = errors.New("url is not valid")
	ErrScheme     = errors.New("url must start with http:// or https://")
	ErrNotPublic  = errors.New("url host is not public")
	// ErrUnreachable means the site did not answer: DNS failure, connection
	// refused or reset, TLS failure, or no answer within the deadline.
	ErrUnreachable      = errors.New("site is unreachable")
	ErrTooLarge         = errors.New("response body is too large")
	ErrTooManyRedirects = errors.New("too many redirects")
	// ErrDecode means the body could not be decompressed: a corrupt stream
	// or a Content-Encoding the engine does not support.
	ErrDecode = errors.New("response body could not be decoded")
)

package fetch

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Bounds of a caller's request headers (CheckHeaders).
const (
	MaxHeaders     = 50
	MaxHeaderBytes = 16 << 10
)

// engineHeaders are request headers a caller may not set: the transport's
// own (framing, connection management, the host the SSRF guard checked),
// the proxy's, and Accept-Encoding, which the engines choose because they
// must decode what they asked for. Proxy-* is refused by prefix.
var engineHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Upgrade": true, "Te": true, "Trailer": true, "Keep-Alive": true, "Expect": true,
	"Accept-Encoding": true,
}

// HeaderError is a caller's header CheckHeaders refuses; Name is as the
// caller wrote it.
type HeaderError struct {
	Name   string
	Reason string
}

func (e *HeaderError) Error() string {
	if e.Name == "" {
		return e.Reason
	}
	return fmt.Sprintf("header %q: %s", e.Name, e.Reason)
}

// CheckHeaders turns a caller's headers (name → value) into a request
// header for Request.Header, refusing what would break the transport or
// step round the SSRF guard (engineHeaders, Proxy-*), names and values
// that are not valid HTTP, and more than MaxHeaders headers or
// MaxHeaderBytes of names and values. A nil map gives a nil header.
// Errors are *HeaderError, the first offending name in sorted order (so
// the answer does not depend on map order).
func CheckHeaders(h map[string]string) (http.Header, error) {
	if len(h) == 0 {
		return nil, nil
	}
	if len(h) > MaxHeaders {
		return nil, &HeaderError{Reason: fmt.Sprintf("at most %d headers (got %d)", MaxHeaders, len(h))}
	}
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make(http.Header, len(h))
	size := 0
	for _, k := range names {
		v := h[k]
		size += len(k) + len(v)
		ck := http.CanonicalHeaderKey(k)
		switch {
		case !httpguts.ValidHeaderFieldName(k):
			return nil, &HeaderError{Name: k, Reason: "not a valid header name"}
		case !httpguts.ValidHeaderFieldValue(v):
			return nil, &HeaderError{Name: k, Reason: "its value is not a valid header value (control characters or a line break)"}
		case engineHeaders[ck] || strings.HasPrefix(ck, "Proxy-"):
			return nil, &HeaderError{Name: k, Reason: "set by trawl's engines, not by a caller"}
		case out[ck] != nil:
			return nil, &HeaderError{Name: k, Reason: "given twice (header names are case-insensitive)"}
		case ck == "Cookie" && !validCookies(v):
			// The browser takes the cookies one by one (ladder): what it
			// could not read would be dropped without a word.
			return nil, &HeaderError{Name: k, Reason: "not a list of name=value cookies"}
		}
		out[ck] = []string{v}
	}
	if size > MaxHeaderBytes {
		return nil, &HeaderError{Reason: fmt.Sprintf("headers are at most %d bytes of names and values together (got %d)", MaxHeaderBytes, size)}
	}
	return out, nil
}

func validCookies(line string) bool {
	_, err := http.ParseCookie(line)
	return err == nil
}

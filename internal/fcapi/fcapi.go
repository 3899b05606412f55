// Package fcapi is Firecrawl's v2 wire contract that the gate and the cell
// share (docs/firecrawl.md): its error envelope {success: false, error,
// code, details}, the refusals in it, and the lenient body decoder (keys
// Firecrawl's SDKs send and trawl does not know are ignored; a wrong type
// is Firecrawl's 400, named by its JSON path). The cell's Firecrawl layer
// (cell/firecrawl), the gate's search (gate/search) and the gate's error
// renderer (caddy-modules/refusal) write with it.
package fcapi

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/routes"
)

// Error codes of the envelope (Firecrawl's, where it documents one).
const (
	CodeBadRequest     = "BAD_REQUEST"
	CodeUnsupported    = "UNSUPPORTED_FEATURE"
	CodeScrapeTimeout  = "SCRAPE_TIMEOUT"
	CodeScrapeFailed   = "SCRAPE_FAILED"
	CodeScrapeAction   = "SCRAPE_ACTION_ERROR" // a page action failed: Firecrawl's status is 500
	CodeUnsupportedURL = "UNSUPPORTED_URL"
	CodeNotFound       = "NOT_FOUND"
	CodeInternal       = "INTERNAL_ERROR"
)

// Envelope is Firecrawl's error answer.
type Envelope struct {
	Success bool   `json:"success"`
	Error   string `json:"error"`
	Code    string `json:"code,omitempty"`
	Details any    `json:"details,omitempty"`
}

// Error is a refusal in Firecrawl's terms: the status it documents, its
// code, a sentence and details (the field at fault).
type Error struct {
	Status  int
	Code    string
	Message string
	Details any
}

func (e *Error) Error() string { return e.Message }

// BadRequest is a 400 for a field of the request.
func BadRequest(field, message string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: "Bad Request: " + message,
		Details: []map[string]any{{"path": fieldPath(field), "message": message}}}
}

// Unsupported is a 400 for a feature trawl does not honour
// (docs/firecrawl.md lists them).
func Unsupported(field, message string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeUnsupported, Message: message + " (see docs/firecrawl.md)",
		Details: []map[string]any{{"path": fieldPath(field), "message": message}}}
}

func fieldPath(field string) []string {
	if field == "" {
		return []string{}
	}
	return strings.Split(field, ".")
}

// Decode reads a Firecrawl body within its row's limit (routes.Limit):
// unknown keys are ignored, a wrong type is a 400 naming the field by
// the JSON path the client sent (encoding/json also names an embedded
// struct by its Go name, ScrapeOptions.formats, which no client sent),
// a body over the limit a 413.
func Decode(w http.ResponseWriter, r *http.Request, dst any) error {
	err := httpjson.DecodeLenient(w, r, routes.Limit(r), dst)
	de, ok := errors.AsType[*httpjson.DecodeError](err)
	if !ok {
		return err
	}
	path := []string{}
	for seg := range strings.SplitSeq(de.Field, ".") {
		if seg != "" && !unicode.IsUpper(rune(seg[0])) {
			path = append(path, seg)
		}
	}
	msg := de.Error()
	if de.Field != "" {
		msg = strings.ReplaceAll(msg, de.Field, strings.Join(path, "."))
	}
	return &Error{Status: de.Status(), Code: CodeBadRequest, Message: "Bad Request: " + msg,
		Details: []map[string]any{{"path": path, "message": msg}}}
}

// CodeFor is the envelope's code of a trawl error's status.
func CodeFor(status int) string {
	switch {
	case status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge:
		return CodeBadRequest
	case status == http.StatusGatewayTimeout || status == http.StatusRequestTimeout:
		return CodeScrapeTimeout
	case status >= 400 && status < 500, status == http.StatusBadGateway:
		return CodeScrapeFailed
	}
	return CodeInternal
}

// WriteError answers err in the envelope: an *Error as it is, a trawl
// error (httpjson.HTTPError, a body DecodeError) with its status, its
// sentence and its code in details (with its Retry-After), anything else
// as a 500.
func WriteError(w http.ResponseWriter, err error) {
	if fe, ok := errors.AsType[*Error](err); ok {
		httpjson.Write(w, fe.Status, Envelope{Error: fe.Message, Code: fe.Code, Details: fe.Details})
		return
	}
	he := httpjson.AsHTTPError(err)
	if he.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((he.RetryAfter+time.Second-1)/time.Second)))
	}
	httpjson.Write(w, he.Status, Envelope{Error: he.Body().Message, Code: CodeFor(he.Status), Details: map[string]string{"trawl_error": he.Code}})
}

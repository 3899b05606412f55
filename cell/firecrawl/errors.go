package firecrawl

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/trawlhq/trawl/internal/httpjson"
)

// Error codes of the envelope (Firecrawl's, where it documents one).
const (
	CodeBadRequest     = "BAD_REQUEST"
	CodeUnsupported    = "UNSUPPORTED_FEATURE"
	CodeScrapeTimeout  = "SCRAPE_TIMEOUT"
	CodeScrapeFailed   = "SCRAPE_FAILED"
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
	return []string{field}
}

// WriteError answers err in Firecrawl's envelope: an *Error as it is, a
// trawl error (httpjson.HTTPError, a body DecodeError) with its status and
// its sentence, anything else as a 500.
func WriteError(w http.ResponseWriter, err error) {
	var fe *Error
	if errors.As(err, &fe) {
		httpjson.Write(w, fe.Status, Envelope{Error: fe.Message, Code: fe.Code, Details: fe.Details})
		return
	}
	he := httpjson.AsHTTPError(err)
	if he.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((he.RetryAfter+time.Second-1)/time.Second)))
	}
	httpjson.Write(w, he.Status, Envelope{Error: he.Body().Message, Code: codeOf(he.Status), Details: map[string]string{"trawl_error": he.Code}})
}

// codeOf is the Firecrawl code of a trawl error's status.
func codeOf(status int) string {
	switch {
	case status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge:
		return CodeBadRequest
	case status == http.StatusGatewayTimeout:
		return CodeScrapeTimeout
	case status >= 400 && status < 500:
		return CodeScrapeFailed
	case status == http.StatusBadGateway || status == http.StatusUnprocessableEntity:
		return CodeScrapeFailed
	}
	return CodeInternal
}

// CodeFor is the Firecrawl code of an error kept as its status and code
// (a job's failed URL): a Firecrawl code as it is, a trawl one as
// WriteError would answer it.
func CodeFor(status int, code string) string {
	switch code {
	case CodeBadRequest, CodeUnsupported, CodeScrapeTimeout, CodeScrapeFailed, CodeUnsupportedURL, CodeNotFound, CodeInternal:
		return code
	}
	return codeOf(status)
}

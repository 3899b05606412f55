package httpjson

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// internalMessage answers an error that carries no status: a bug, or a
// failure the caller can do nothing about. The cause is not shown.
const internalMessage = "something went wrong on our side; try again"

// HTTPError is an error that carries its answer: the status, the code and
// the message of the API's error body (as Caddy's caddyhttp.HandlerError
// does). Packages return it, WriteError renders it.
type HTTPError struct {
	// Status is the HTTP status of the answer.
	Status int
	// Code is the body's "error", a stable code (docs/api.md).
	Code string
	// Message is the body's "message", a sentence safe to show a person.
	Message string
	// Err is the cause, for errors.Is and the logs. The answer's message
	// ends with its text unless Private.
	Err error
	// Private keeps Err out of the answer (it is logged, not shown): a
	// cause that names the service's own infrastructure, such as a
	// proxy's address, or that the caller cannot act on.
	Private bool
	// RetryAfter, when positive, is sent as Retry-After in whole seconds.
	RetryAfter time.Duration
}

// Errorf is an HTTPError with a message formatted as fmt.Sprintf does;
// %w is not understood: a cause goes in Err.
func Errorf(status int, code, format string, args ...any) *HTTPError {
	return &HTTPError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error is the message and, for the logs, the cause even when Private.
func (e *HTTPError) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *HTTPError) Unwrap() error { return e.Err }

// Body is the error body e is answered with.
func (e *HTTPError) Body() ErrorBody {
	msg := e.Message
	if e.Err != nil && !e.Private {
		msg += ": " + e.Err.Error()
	}
	return ErrorBody{Error: e.Code, Message: msg}
}

// AsHTTPError is the HTTPError err is answered with: the first in err's
// chain, else a *DecodeError's refusal, else a 500 internal error that
// wraps err without showing it. It never returns nil; the result may be
// err's own, which the caller must not change.
func AsHTTPError(err error) *HTTPError {
	if e, ok := errors.AsType[*HTTPError](err); ok {
		return e
	}
	if de, ok := errors.AsType[*DecodeError](err); ok {
		// de's text is the message already: not repeated as a cause.
		return &HTTPError{Status: de.Status(), Code: de.Code(), Message: de.Error()}
	}
	return &HTTPError{Status: http.StatusInternalServerError, Code: "internal", Message: internalMessage, Err: err, Private: true}
}

// WriteError answers err with the API's error body {"error": code,
// "message": text}, as AsHTTPError maps it, and its Retry-After.
func WriteError(w http.ResponseWriter, err error) {
	e := AsHTTPError(err)
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	Write(w, e.Status, e.Body())
}

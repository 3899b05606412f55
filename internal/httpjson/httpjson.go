// Package httpjson writes the API's JSON answers and its error body, and
// reads a request's JSON body, for every handler of the gate and the cell
// (the crawl-task server keeps its own shapes, see docs/spec/crawl-server.md).
//
// An error body is {"error": code, "message": text}: a stable code and a
// sentence safe to show a person (docs/api.md). Handlers return an
// *HTTPError, which carries both and its status, and answer any error with
// WriteError.
package httpjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// ErrorBody is the body of every API error.
type ErrorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// internalBody answers when v cannot be encoded (a bug, never the client's).
var internalBody = []byte(`{"error":"internal","message":"` + internalMessage + `"}` + "\n")

// Write answers status with v as JSON. It sets Content-Type, nosniff, and
// Cache-Control: no-store unless the handler set a Cache-Control of its
// own. A v that cannot be encoded is answered with a 500 internal error.
func Write(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, internalBody
	} else {
		b = append(b, '\n')
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if h.Get("Cache-Control") == "" {
		h.Set("Cache-Control", "no-store")
	}
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b) // fails only when the client has gone
}

// Error answers status with the API's error body; WriteError answers an
// error.
func Error(w http.ResponseWriter, status int, code, message string) {
	Write(w, status, ErrorBody{Error: code, Message: message})
}

// Problem is what is wrong with a request body.
type Problem int

// Problems of Decode.
const (
	TooLarge     Problem = iota + 1 // over the route's limit (413)
	Empty                           // no body at all
	WrongType                       // a field of the wrong JSON type, or a body that is not an object
	Syntax                          // not JSON
	UnknownField                    // a field the route does not take (Decode only)
	Trailing                        // data after the object
	Invalid                         // refused by the destination's own UnmarshalJSON
)

// DecodeError says why a body was refused. Its Error text is the API's
// message, and WriteError answers it with its Status and Code; handlers
// with older wording of their own build theirs from the fields.
type DecodeError struct {
	Problem Problem
	// Limit is the route's body limit in bytes.
	Limit int64
	// Field, Want and Got describe a WrongType: the field ("urls.3"), what
	// it must be ("a string"), the JSON it was ("number"). GoType is the Go
	// type of the field ("[]string").
	Field, Want, Got, GoType string
	// Err is the decoder's error.
	Err error
}

// Status is the HTTP status of the refusal: 413 for a body over the limit,
// 400 otherwise.
func (e *DecodeError) Status() int {
	if e.Problem == TooLarge {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

// Code is the error code of the refusal: too_large or bad_input.
func (e *DecodeError) Code() string {
	if e.Problem == TooLarge {
		return "too_large"
	}
	return "bad_input"
}

func (e *DecodeError) Error() string {
	switch e.Problem {
	case TooLarge:
		return fmt.Sprintf("request body is larger than %d bytes", e.Limit)
	case Empty:
		return "request body is empty; send a JSON object"
	case WrongType:
		got := e.Got
		if strings.HasPrefix(got, "number ") {
			// encoding/json's "number 1e400": a number, out of the field's range.
			if e.Field == "" {
				return "request body must be a JSON object, not a number"
			}
			return fmt.Sprintf("field %s is out of range: %s", e.Field, strings.TrimPrefix(got, "number "))
		}
		if e.Field == "" {
			return "request body must be a JSON object, not " + article(got)
		}
		return fmt.Sprintf("field %s must be %s, not %s", e.Field, e.Want, got)
	case Syntax:
		return "request body is not valid JSON: " + e.Err.Error()
	case Trailing:
		return "request body must hold a single JSON object"
	}
	msg := strings.TrimPrefix(e.Err.Error(), "json: ")
	if strings.Contains(msg, "Go ") {
		// encoding/json names our structs ("Go struct field Request.url"):
		// nothing a caller can act on.
		return "request body does not have the fields this route takes"
	}
	return msg
}

// article puts "a" or "an" before a JSON type name.
func article(t string) string {
	switch t {
	case "array", "object":
		return "an " + t
	case "":
		return "something else"
	}
	return "a " + t
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Decode reads exactly one JSON object of at most limit bytes into dst and
// refuses fields dst does not have. The error is a *DecodeError.
func Decode(w http.ResponseWriter, r *http.Request, limit int64, dst any) error {
	return decode(w, r, limit, dst, true)
}

// DecodeLenient is Decode that ignores fields dst does not have.
func DecodeLenient(w http.ResponseWriter, r *http.Request, limit int64, dst any) error {
	return decode(w, r, limit, dst, false)
}

func decode(w http.ResponseWriter, r *http.Request, limit int64, dst any, strict bool) error {
	body := r.Body
	if body == nil {
		body = http.NoBody
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, body, limit))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(dst); err != nil {
		return decodeError(err, limit)
	}
	if dec.More() {
		return &DecodeError{Problem: Trailing, Limit: limit, Err: errors.New("data after the object")}
	}
	if _, err := dec.Token(); err != io.EOF {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &DecodeError{Problem: TooLarge, Limit: limit, Err: err}
		}
		return &DecodeError{Problem: Trailing, Limit: limit, Err: errors.New("data after the object")}
	}
	return nil
}

func decodeError(err error, limit int64) *DecodeError {
	e := &DecodeError{Limit: limit, Err: err}
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &tooBig):
		e.Problem = TooLarge
	case errors.Is(err, io.EOF):
		e.Problem = Empty
	case errors.As(err, &typeErr):
		e.Problem = WrongType
		e.Field, e.Got = typeErr.Field, typeErr.Value
		e.Want = KindName(typeErr.Type.Kind().String())
		e.GoType = typeErr.Type.String()
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		e.Problem = Syntax
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		e.Problem = UnknownField
	default:
		e.Problem = Invalid
	}
	return e
}

// KindName names a Go kind as the JSON a client sends: "a string", "a
// number".
func KindName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64":
		return "a number"
	case "ptr", "interface":
		return "a value of another type"
	}
	return kind
}

// IsJSON reports whether r's body is declared JSON, or not declared at all.
func IsJSON(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	return ct == "" || strings.HasPrefix(strings.ToLower(ct), "application/json")
}

package gate

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// Refusal is an answer a gate module gives instead of forwarding: a status,
// a JSON body and headers. Modules return it wrapped in caddyhttp.Error;
// the error renderer (module trawl_errors) writes it. Every refusal is free.
type Refusal struct {
	Status int
	// Body is the JSON body; at least {"error","message"}.
	Body any
	// Header is added to the response.
	Header http.Header
}

// ErrorBody is the smallest refusal body.
type ErrorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// Refuse returns a refusal with an {"error","message"} body.
func Refuse(status int, code, message string) *Refusal {
	return &Refusal{Status: status, Body: ErrorBody{Error: code, Message: message}}
}

func (r *Refusal) Error() string {
	if b, ok := r.Body.(ErrorBody); ok {
		return b.Error + ": " + b.Message
	}
	return http.StatusText(r.Status)
}

// Write writes the refusal to w.
func (r *Refusal) Write(w http.ResponseWriter) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // messages name <key>; they are JSON, not HTML
	if err := enc.Encode(r.Body); err != nil {
		buf.Reset()
		buf.WriteString(`{"error":"internal","message":"internal error"}` + "\n")
	}
	body := buf.Bytes()
	h := w.Header()
	for k, v := range r.Header {
		h[k] = v
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(r.Status)
	w.Write(body)
}

// Package llmtest runs a local OpenAI-compatible chat-completions endpoint
// for tests: its answers are scripted by the test, and it records every
// request it gets.
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/trawlhq/trawl/cell/llm"
)

// Server is a chat-completions endpoint at URL + "/v1/chat/completions";
// other routes answer 404.
type Server struct {
	*httptest.Server
	mu       sync.Mutex
	requests []Request
	calls    atomic.Int32
	answer   func(n int, r Request, w http.ResponseWriter)
}

// Request is a request the server got.
type Request struct {
	Path, Auth string
	// Body is the request decoded as a chat request; Raw is the same body
	// as a generic map (for fields a test checks by presence).
	Body struct {
		Model    string        `json:"model"`
		Messages []llm.Message `json:"messages"`
	}
	Raw map[string]any
}

// NewServer starts a server whose answer to the n-th call (counting from
// 1) to the chat route is written by answer; closed at cleanup.
func NewServer(t testing.TB, answer func(n int, r Request, w http.ResponseWriter)) *Server {
	cs := &Server{answer: answer}
	cs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec := Request{Path: r.URL.Path, Auth: r.Header.Get("Authorization")}
		if err := json.Unmarshal(body, &rec.Body); err != nil {
			t.Errorf("request body is not a chat request: %v", err)
		}
		_ = json.Unmarshal(body, &rec.Raw)
		cs.mu.Lock()
		cs.requests = append(cs.requests, rec)
		cs.mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "wrong route", http.StatusNotFound)
			return
		}
		cs.answer(int(cs.calls.Add(1)), rec, w)
	}))
	t.Cleanup(cs.Close)
	return cs
}

// Requests lists the requests so far, in order of arrival.
func (cs *Server) Requests() []Request {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append([]Request(nil), cs.requests...)
}

// Calls counts the calls to the chat route.
func (cs *Server) Calls() int32 { return cs.calls.Load() }

// Completion answers with a chat completion whose message is content.
func Completion(w http.ResponseWriter, content string) {
	CompletionUsage(w, content, 0, 0)
}

// CompletionUsage is Completion that reports usage: in prompt tokens and
// out completion tokens (none when both are 0).
func CompletionUsage(w http.ResponseWriter, content string, in, out int) {
	w.Header().Set("Content-Type", "application/json")
	body := map[string]any{
		"id":      "chatcmpl-1",
		"object":  "chat.completion",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": content}}},
	}
	if in != 0 || out != 0 {
		body["usage"] = map[string]int{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out}
	}
	_ = json.NewEncoder(w).Encode(body)
}

// APIError answers status with an OpenAI-style error body.
func APIError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error","code":null}}`, msg)
}

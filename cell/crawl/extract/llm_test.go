package extract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// chatServer is a local OpenAI-compatible chat-completions endpoint whose
// answers a test scripts; it records every request it gets.
type chatServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []recordedRequest
	calls    atomic.Int32
	answer   func(n int, r recordedRequest, w http.ResponseWriter) // n counts from 1
}

type recordedRequest struct {
	Path, Auth string
	Body       chatRequest
	Raw        map[string]any
}

func newChatServer(t *testing.T, answer func(n int, r recordedRequest, w http.ResponseWriter)) *chatServer {
	cs := &chatServer{answer: answer}
	cs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec := recordedRequest{Path: r.URL.Path, Auth: r.Header.Get("Authorization")}
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

func completion(w http.ResponseWriter, content string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id":      "chatcmpl-1",
		"object":  "chat.completion",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": content}}},
	})
}

func apiError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error","code":null}}`, msg)
}

// llmConfig points the openai vendor at cs with a test key.
func llmConfig(cs *chatServer) Config {
	return Config{
		Getenv:    func(k string) string { return map[string]string{"OPENAI_API_KEY": "sk-test-123456"}[k] },
		BaseURLs:  map[string]string{"openai": cs.URL + "/v1"},
		retryBase: time.Millisecond,
	}
}

func newLLMStrategy(t *testing.T, cfg Config, params string) Strategy {
	t.Helper()
	s, err := New(cfg, "llm", json.RawMessage(params))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const productSchema = `{"type":"object","properties":{"name":{"type":"string"},"price":{"type":"number"}},"required":["name"]}`

func TestLLMExtract(t *testing.T) {
	cs := newChatServer(t, func(n int, r recordedRequest, w http.ResponseWriter) {
		completion(w, "Here you are:\n```json\n{\"items\": [{\"name\": \"Ridge Tent\", \"price\": 199}, {\"name\": \"Summit Sleeping Bag\", \"price\": 89.5}]}\n```")
	})
	s := newLLMStrategy(t, llmConfig(cs), `{"provider": "openai/gpt-4o-mini", "instruction": "List the products with their prices.", "schema": `+productSchema+`}`)
	out, err := s.Extract(context.Background(), Page{URL: "http://127.0.0.1/gear", Markdown: "# Camping gear\n\nRidge Tent, $199.00\n\nSummit Sleeping Bag, $89.50"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"name":"Ridge Tent","price":199},{"name":"Summit Sleeping Bag","price":89.5}]`; out != want {
		t.Errorf("extracted\n got %s\nwant %s", out, want)
	}

	if printed := fmt.Sprintf("%v %+v %#v", s, s, s); strings.Contains(printed, "sk-test") {
		t.Errorf("printing the strategy shows the key: %s", printed)
	}
	if len(cs.requests) != 1 {
		t.Fatalf("got %d requests, want 1", len(cs.requests))
	}
	r := cs.requests[0]
	if r.Auth != "Bearer sk-test-123456" {
		t.Errorf("Authorization = %q", r.Auth)
	}
	if r.Body.Model != "gpt-4o-mini" {
		t.Errorf("model = %q, want gpt-4o-mini", r.Body.Model)
	}
	if temp, ok := r.Raw["temperature"]; !ok || temp != float64(0) {
		t.Errorf("temperature = %v (present %v), want 0", temp, ok)
	}
	if len(r.Body.Messages) != 2 || r.Body.Messages[0].Role != "system" || r.Body.Messages[1].Role != "user" {
		t.Fatalf("messages = %+v", r.Body.Messages)
	}
	if !strings.Contains(r.Body.Messages[0].Content, "JSON") {
		t.Errorf("system prompt does not ask for JSON: %q", r.Body.Messages[0].Content)
	}
	user := r.Body.Messages[1].Content
	for _, want := range []string{"List the products with their prices.", productSchema, "Ridge Tent, $199.00", "Summit Sleeping Bag, $89.50", "http://127.0.0.1/gear"} {
		if !strings.Contains(user, want) {
			t.Errorf("user message lacks %q:\n%s", want, user)
		}
	}
	rf, _ := r.Raw["response_format"].(map[string]any)
	if rf["type"] != "json_schema" {
		t.Errorf("response_format = %v, want json_schema", rf)
	}
	js, _ := rf["json_schema"].(map[string]any)
	items := fmt.Sprint(js["schema"])
	if !strings.Contains(items, "items") || !strings.Contains(items, "price") {
		t.Errorf("json_schema does not wrap the item schema: %v", js)
	}
}

func TestLLMAnswers(t *testing.T) {
	tests := []struct {
		name, content, want string
	}{
		{"bare array", `[{"a":1},{"a":2}]`, `[{"a":1},{"a":2}]`},
		{"items object", `{"items":[{"a":1}]}`, `[{"a":1}]`},
		{"single-key object", `{"products":[{"a":1}]}`, `[{"a":1}]`},
		{"plain object", `{"a":1,"b":2}`, `[{"a":1,"b":2}]`},
		{"fence without language", "```\n{\"items\":[\"x\"]}\n```", `["x"]`},
		{"prose around", "Sure! {\"items\": [{\"a\": \"}\"}]} Hope this helps.", `[{"a":"}"}]`},
		{"empty", `{"items":[]}`, `[]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cs := newChatServer(t, func(n int, r recordedRequest, w http.ResponseWriter) { completion(w, tc.content) })
			s := newLLMStrategy(t, llmConfig(cs), `{"provider": "openai/gpt-4o-mini"}`)
			out, err := s.Extract(context.Background(), Page{Markdown: "some page"})
			if err != nil {
				t.Fatal(err)
			}
			if out != tc.want {
				t.Errorf("got %s, want %s", out, tc.want)
			}
			rf := cs.requests[0].Raw["response_format"].(map[string]any)
			if rf["type"] != "json_object" {
				t.Errorf("without a schema response_format = %v, want json_object", rf)
			}
		})
	}
}

func TestLLMRetry(t *testing.T) {
	cs := newChatServer(t, func(n int, r recordedRequest, w http.ResponseWriter) {
		switch n {
		case 1:
			w.Header().Set("Retry-After", "0")
			apiError(w, http.StatusTooManyRequests, "Rate limit reached for gpt-4o-mini")
		case 2:
			apiError(w, http.StatusBadGateway, "upstream hiccup")
		default:
			completion(w, `{"items":[{"ok":true}]}`)
		}
	})
	s := newLLMStrategy(t, llmConfig(cs), `{"provider": "openai/gpt-4o-mini"}`)
	out, err := s.Extract(context.Background(), Page{Markdown: "page"})
	if err != nil {
		t.Fatal(err)
	}
	if out != `[{"ok":true}]` {
		t.Errorf("got %s", out)
	}
	if got := cs.calls.Load(); got != 3 {
		t.Errorf("got %d calls, want 3 (429, 502, 200)", got)
	}
}

func TestLLMErrors(t *testing.T) {
	tests := []struct {
		name      string
		answer    func(n int, r recordedRequest, w http.ResponseWriter)
		wantCalls int32
		status    int
		want      []string
		notWant   string
	}{
		{
			name: "401 with the message, key redacted, not retried",
			answer: func(n int, r recordedRequest, w http.ResponseWriter) {
				apiError(w, http.StatusUnauthorized, "Incorrect API key provided: sk-test-123456. You can find your API key at https://platform.openai.com/account/api-keys.")
			},
			wantCalls: 1, status: 401,
			want:    []string{"401 Unauthorized", "Incorrect API key provided", "[redacted]", `"openai/gpt-4o-mini"`},
			notWant: "sk-test-123456",
		},
		{
			name: "500 retried then surfaced",
			answer: func(n int, r recordedRequest, w http.ResponseWriter) {
				apiError(w, http.StatusInternalServerError, "The server had an error")
			},
			wantCalls: 3, status: 500,
			want: []string{"500 Internal Server Error", "The server had an error"},
		},
		{
			name: "plain-text error body",
			answer: func(n int, r recordedRequest, w http.ResponseWriter) {
				http.Error(w, "model not found", http.StatusNotFound)
			},
			wantCalls: 1, status: 404,
			want: []string{"404", "model not found"},
		},
		{
			name:      "not JSON",
			answer:    func(n int, r recordedRequest, w http.ResponseWriter) { completion(w, "I cannot help with that.") },
			wantCalls: 1,
			want:      []string{"llm answer is not JSON", "I cannot help"},
		},
		{
			name: "cut off",
			answer: func(n int, r recordedRequest, w http.ResponseWriter) {
				fmt.Fprint(w, `{"choices":[{"finish_reason":"length","message":{"content":"{\"items\":[{\"a\":"}}]}`)
			},
			wantCalls: 1,
			want:      []string{"cut off"},
		},
		{
			name:      "no choices",
			answer:    func(n int, r recordedRequest, w http.ResponseWriter) { fmt.Fprint(w, `{"choices":[]}`) },
			wantCalls: 1,
			want:      []string{"no choices"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cs := newChatServer(t, tc.answer)
			s := newLLMStrategy(t, llmConfig(cs), `{"provider": "openai/gpt-4o-mini"}`)
			_, err := s.Extract(context.Background(), Page{Markdown: "page"})
			if err == nil {
				t.Fatal("Extract succeeded")
			}
			if IsBadParams(err) {
				t.Errorf("a provider failure is not bad params: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.notWant != "" && strings.Contains(err.Error(), tc.notWant) {
				t.Errorf("error %q contains %q", err, tc.notWant)
			}
			var pe *ProviderError
			if tc.status != 0 && (!errors.As(err, &pe) || pe.StatusCode != tc.status) {
				t.Errorf("error %v is not a ProviderError with status %d", err, tc.status)
			}
			if got := cs.calls.Load(); got != tc.wantCalls {
				t.Errorf("got %d calls, want %d", got, tc.wantCalls)
			}
		})
	}
}

func TestLLMSchemaFallback(t *testing.T) {
	cs := newChatServer(t, func(n int, r recordedRequest, w http.ResponseWriter) {
		if rf := r.Raw["response_format"].(map[string]any); rf["type"] == "json_schema" {
			apiError(w, http.StatusBadRequest, "response_format json_schema is not supported by this model")
			return
		}
		completion(w, `{"items":[{"name":"x"}]}`)
	})
	s := newLLMStrategy(t, llmConfig(cs), `{"provider": "openai/gpt-4o-mini", "schema": `+productSchema+`}`)
	out, err := s.Extract(context.Background(), Page{Markdown: "page"})
	if err != nil {
		t.Fatal(err)
	}
	if out != `[{"name":"x"}]` || cs.calls.Load() != 2 {
		t.Errorf("got %s after %d calls", out, cs.calls.Load())
	}
	if !strings.Contains(cs.requests[1].Body.Messages[1].Content, productSchema) {
		t.Error("the fallback request lost the schema from the prompt")
	}
}

func TestLLMChunks(t *testing.T) {
	paraA := "Alpha " + strings.Repeat("aaaa ", 30)
	paraB := "Bravo " + strings.Repeat("bbbb ", 30)
	paraC := "Charlie " + strings.Repeat("cccc ", 30)
	cs := newChatServer(t, func(n int, r recordedRequest, w http.ResponseWriter) {
		user := r.Body.Messages[1].Content
		var names []string
		for _, w := range []string{"Alpha", "Bravo", "Charlie"} {
			if strings.Contains(user, w) {
				names = append(names, fmt.Sprintf(`{"name":%q}`, w))
			}
		}
		// Answer the first chunk last, so that order comes from the
		// chunks, not from the answers.
		if strings.Contains(user, "part 1 of") {
			time.Sleep(20 * time.Millisecond)
		}
		completion(w, `{"items":[`+strings.Join(names, ",")+`]}`)
	})
	cfg := llmConfig(cs)
	cfg.LLMChunkChars = 200
	s := newLLMStrategy(t, cfg, `{"provider": "openai/gpt-4o-mini"}`)
	out, err := s.Extract(context.Background(), Page{Markdown: paraA + "\n\n" + paraB + "\n\n" + paraC})
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"name":"Alpha"},{"name":"Bravo"},{"name":"Charlie"}]`; out != want {
		t.Errorf("got %s, want %s", out, want)
	}
	if cs.calls.Load() != 3 {
		t.Errorf("got %d calls, want 3 chunks", cs.calls.Load())
	}
	for _, r := range cs.requests {
		if !strings.Contains(r.Body.Messages[1].Content, "of 3):") {
			t.Errorf("chunk request does not say which part it is: %.200q", r.Body.Messages[1].Content)
		}
	}

	// A failing chunk fails the extraction.
	bad := newChatServer(t, func(n int, r recordedRequest, w http.ResponseWriter) {
		if strings.Contains(r.Body.Messages[1].Content, "Bravo") {
			apiError(w, http.StatusForbidden, "content policy")
			return
		}
		completion(w, `[]`)
	})
	cfg = llmConfig(bad)
	cfg.LLMChunkChars = 200
	s = newLLMStrategy(t, cfg, `{"provider": "openai/gpt-4o-mini"}`)
	if _, err := s.Extract(context.Background(), Page{Markdown: paraA + "\n\n" + paraB + "\n\n" + paraC}); err == nil || !strings.Contains(err.Error(), "chunk 2 of 3") {
		t.Errorf("got %v, want an error naming chunk 2 of 3", err)
	}
}

func TestLLMEmptyPageMakesNoCall(t *testing.T) {
	cs := newChatServer(t, func(n int, r recordedRequest, w http.ResponseWriter) { completion(w, `[]`) })
	s := newLLMStrategy(t, llmConfig(cs), `{"provider": "openai/gpt-4o-mini"}`)
	out, err := s.Extract(context.Background(), Page{Markdown: "  \n"})
	if err != nil || out != "[]" || cs.calls.Load() != 0 {
		t.Errorf("got %q, %v after %d calls", out, err, cs.calls.Load())
	}
}

func TestLLMContextCancelledDuringBackoff(t *testing.T) {
	cs := newChatServer(t, func(n int, r recordedRequest, w http.ResponseWriter) {
		w.Header().Set("Retry-After", "30")
		apiError(w, http.StatusTooManyRequests, "slow down")
	})
	s := newLLMStrategy(t, llmConfig(cs), `{"provider": "openai/gpt-4o-mini"}`)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.Extract(ctx, Page{Markdown: "page"})
		done <- err
	}()
	// Cancel once the first answer is in: the strategy is then waiting.
	deadline := time.Now().Add(10 * time.Second)
	for cs.calls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Extract kept waiting after its context was cancelled")
	}
	if cs.calls.Load() != 1 {
		t.Errorf("got %d calls, want 1", cs.calls.Load())
	}
}

func TestLLMTimeout(t *testing.T) {
	release := make(chan struct{})
	cs := newChatServer(t, func(n int, r recordedRequest, w http.ResponseWriter) {
		<-release
	})
	defer close(release)
	cfg := llmConfig(cs)
	cfg.LLMTimeout = 50 * time.Millisecond
	cfg.LLMRetries = -1
	s := newLLMStrategy(t, cfg, `{"provider": "openai/gpt-4o-mini"}`)
	_, err := s.Extract(context.Background(), Page{Markdown: "page"})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want a deadline error", err)
	}
}

func TestLLMProviders(t *testing.T) {
	cs := newChatServer(t, func(n int, r recordedRequest, w http.ResponseWriter) { completion(w, `[]`) })
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name     string
		cfg      Config
		params   string
		wantAuth string
	}{
		{
			name:     "vendor base URL from the environment",
			cfg:      Config{Getenv: env(map[string]string{"ACME_AI_API_KEY": "k1", "ACME_AI_BASE_URL": cs.URL + "/v1/"})},
			params:   `{"provider": "acme-ai/big-model"}`,
			wantAuth: "Bearer k1",
		},
		{
			name: "Config.BaseURLs wins over the environment",
			cfg: Config{
				Getenv:   env(map[string]string{"GROQ_API_KEY": "k2", "GROQ_BASE_URL": "http://127.0.0.1:1/v1"}),
				BaseURLs: map[string]string{"groq": cs.URL + "/v1"},
			},
			params:   `{"provider": "groq/llama-3.1-8b-instant"}`,
			wantAuth: "Bearer k2",
		},
		{
			name:     "ollama needs no key",
			cfg:      Config{Getenv: env(map[string]string{"OLLAMA_BASE_URL": cs.URL + "/v1"})},
			params:   `{"provider": "ollama/llama3.2"}`,
			wantAuth: "",
		},
		{
			name:     "api_token in params",
			cfg:      Config{Getenv: env(nil), BaseURLs: map[string]string{"openai": cs.URL + "/v1"}},
			params:   `{"provider": "openai/gpt-4o", "api_token": "from-request"}`,
			wantAuth: "Bearer from-request",
		},
		{
			name:     "model with slashes",
			cfg:      Config{Getenv: env(map[string]string{"OPENROUTER_API_KEY": "k3"}), BaseURLs: map[string]string{"openrouter": cs.URL + "/v1"}},
			params:   `{"provider": "openrouter/meta-llama/llama-3-8b"}`,
			wantAuth: "Bearer k3",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(cs.requests)
			s := newLLMStrategy(t, tc.cfg, tc.params)
			if _, err := s.Extract(context.Background(), Page{Markdown: "page"}); err != nil {
				t.Fatal(err)
			}
			r := cs.requests[before]
			if r.Auth != tc.wantAuth {
				t.Errorf("Authorization = %q, want %q", r.Auth, tc.wantAuth)
			}
			var p struct{ Provider string }
			_ = json.Unmarshal([]byte(tc.params), &p)
			if _, model, _ := strings.Cut(p.Provider, "/"); r.Body.Model != model {
				t.Errorf("model = %q, want %q", r.Body.Model, model)
			}
		})
	}
}

func TestLLMBadParams(t *testing.T) {
	noEnv := Config{Getenv: func(string) string { return "" }}
	keys := Config{Getenv: func(k string) string {
		if strings.HasSuffix(k, "_API_KEY") {
			return "k"
		}
		return ""
	}}
	tests := []struct {
		name   string
		cfg    Config
		params string
		want   string
	}{
		{"missing key", noEnv, `{"provider": "openai/gpt-4o-mini"}`, `llm extraction needs OPENAI_API_KEY to be set for provider "openai/gpt-4o-mini"`},
		{"missing key, vendor with a dash", Config{Getenv: func(k string) string {
			return map[string]string{"TOGETHER_AI_BASE_URL": "http://127.0.0.1:9/v1"}[k]
		}}, `{"provider": "together-ai/m"}`, "TOGETHER_AI_API_KEY"},
		{"unknown vendor", noEnv, `{"provider": "acme/model-1"}`, `llm extraction needs ACME_BASE_URL to be set for provider "acme/model-1"`},
		{"bad base URL", Config{Getenv: func(k string) string {
			return map[string]string{"ACME_BASE_URL": "ftp://x", "ACME_API_KEY": "k"}[k]
		}}, `{"provider": "acme/m"}`, "ACME_BASE_URL is not an http(s) URL"},
		{"no provider", noEnv, `{"instruction": "x"}`, "params.provider: is required"},
		{"provider without model", noEnv, `{"provider": "openai"}`, `params.provider: "openai" is not of the form`},
		{"provider without vendor", noEnv, `{"provider": "/gpt-4o"}`, "is not of the form"},
		{"provider not a string", noEnv, `{"provider": ["openai"]}`, "params.provider: must be a string"},
		{"base_url refused", noEnv, `{"provider": "openai/gpt-4o", "api_token": "k", "base_url": "http://169.254.169.254/"}`, "params.base_url: is not accepted"},
		{"schema not an object", keys, `{"provider": "openai/gpt-4o", "schema": [1]}`, "params.schema: must be a JSON object"},
		{"instruction not a string", keys, `{"provider": "openai/gpt-4o", "instruction": 5}`, "params.instruction: must be a string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, "llm", json.RawMessage(tc.params))
			if err == nil {
				t.Fatal("New succeeded")
			}
			if !IsBadParams(err) {
				t.Errorf("IsBadParams(%v) = false", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestChunkText(t *testing.T) {
	long := strings.Repeat("word ", 100) // 500 bytes, one line
	tests := []struct {
		name      string
		md        string
		size, max int
		want      int
	}{
		{"small page", "a\n\nb", 100, 10, 1},
		{"paragraph boundary", strings.Repeat("x", 60) + "\n\n" + strings.Repeat("y", 60), 100, 10, 2},
		{"long line is cut at spaces", long, 100, 10, 6},
		{"capped", long, 100, 2, 2},
		{"empty", " \n ", 100, 10, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := chunkText(tc.md, tc.size, tc.max)
			if len(got) != tc.want {
				t.Fatalf("got %d chunks, want %d: %q", len(got), tc.want, got)
			}
			for _, c := range got {
				if len(c) > tc.size {
					t.Errorf("chunk of %d bytes > %d", len(c), tc.size)
				}
			}
		})
	}
	// Multi-byte text is never cut inside a rune.
	for _, c := range chunkText(strings.Repeat("é", 500), 99, 100) {
		if !json.Valid([]byte(`"`+c+`"`)) || strings.ContainsRune(c, '\uFFFD') {
			t.Errorf("chunk cut inside a rune: %q", c)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              -1,
		"7":                             7 * time.Second,
		"-3":                            -1,
		"soon":                          -1,
		"Wed, 01 Jan 2025 12:00:09 GMT": 9 * time.Second,
		"Wed, 01 Jan 2025 11:00:00 GMT": 0,
	} {
		if got := parseRetryAfter(v, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}

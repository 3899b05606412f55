package extract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/llm"
	"github.com/trawlhq/trawl/cell/llm/llmtest"
)

// llmConfig points the openai vendor at cs with a test key.
func llmConfig(cs *llmtest.Server) Config {
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
	cs := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) {
		llmtest.Completion(w, "Here you are:\n```json\n{\"items\": [{\"name\": \"Ridge Tent\", \"price\": 199}, {\"name\": \"Summit Sleeping Bag\", \"price\": 89.5}]}\n```")
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
	if len(cs.Requests()) != 1 {
		t.Fatalf("got %d requests, want 1", len(cs.Requests()))
	}
	r := cs.Requests()[0]
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
			cs := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) { llmtest.Completion(w, tc.content) })
			s := newLLMStrategy(t, llmConfig(cs), `{"provider": "openai/gpt-4o-mini"}`)
			out, err := s.Extract(context.Background(), Page{Markdown: "some page"})
			if err != nil {
				t.Fatal(err)
			}
			if out != tc.want {
				t.Errorf("got %s, want %s", out, tc.want)
			}
			rf := cs.Requests()[0].Raw["response_format"].(map[string]any)
			if rf["type"] != "json_object" {
				t.Errorf("without a schema response_format = %v, want json_object", rf)
			}
		})
	}
}

func TestLLMErrors(t *testing.T) {
	tests := []struct {
		name      string
		answer    func(n int, r llmtest.Request, w http.ResponseWriter)
		wantCalls int32
		status    int
		want      []string
		notWant   string
	}{
		{
			name: "401 with the message, key redacted, not retried",
			answer: func(n int, r llmtest.Request, w http.ResponseWriter) {
				llmtest.APIError(w, http.StatusUnauthorized, "Incorrect API key provided: sk-test-123456. You can find your API key at https://platform.openai.com/account/api-keys.")
			},
			wantCalls: 1, status: 401,
			want:    []string{"401 Unauthorized", "Incorrect API key provided", "[redacted]", `"openai/gpt-4o-mini"`},
			notWant: "sk-test-123456",
		},
		{
			name: "500 retried then surfaced",
			answer: func(n int, r llmtest.Request, w http.ResponseWriter) {
				llmtest.APIError(w, http.StatusInternalServerError, "The server had an error")
			},
			wantCalls: 3, status: 500,
			want: []string{"500 Internal Server Error", "The server had an error"},
		},
		{
			name: "plain-text error body",
			answer: func(n int, r llmtest.Request, w http.ResponseWriter) {
				http.Error(w, "model not found", http.StatusNotFound)
			},
			wantCalls: 1, status: 404,
			want: []string{"404", "model not found"},
		},
		{
			name: "not JSON",
			answer: func(n int, r llmtest.Request, w http.ResponseWriter) {
				llmtest.Completion(w, "I cannot help with that.")
			},
			wantCalls: 1,
			want:      []string{"llm answer is not JSON", "I cannot help"},
		},
		{
			name: "cut off",
			answer: func(n int, r llmtest.Request, w http.ResponseWriter) {
				fmt.Fprint(w, `{"choices":[{"finish_reason":"length","message":{"content":"{\"items\":[{\"a\":"}}]}`)
			},
			wantCalls: 1,
			want:      []string{"cut off"},
		},
		{
			name:      "no choices",
			answer:    func(n int, r llmtest.Request, w http.ResponseWriter) { fmt.Fprint(w, `{"choices":[]}`) },
			wantCalls: 1,
			want:      []string{"no choices"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cs := llmtest.NewServer(t, tc.answer)
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
			var pe *llm.ProviderError
			if tc.status != 0 && (!errors.As(err, &pe) || pe.StatusCode != tc.status) {
				t.Errorf("error %v is not a ProviderError with status %d", err, tc.status)
			}
			if got := cs.Calls(); got != tc.wantCalls {
				t.Errorf("got %d calls, want %d", got, tc.wantCalls)
			}
		})
	}
}

func TestLLMSchemaFallback(t *testing.T) {
	cs := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) {
		if rf := r.Raw["response_format"].(map[string]any); rf["type"] == "json_schema" {
			llmtest.APIError(w, http.StatusBadRequest, "response_format json_schema is not supported by this model")
			return
		}
		llmtest.Completion(w, `{"items":[{"name":"x"}]}`)
	})
	s := newLLMStrategy(t, llmConfig(cs), `{"provider": "openai/gpt-4o-mini", "schema": `+productSchema+`}`)
	out, err := s.Extract(context.Background(), Page{Markdown: "page"})
	if err != nil {
		t.Fatal(err)
	}
	if out != `[{"name":"x"}]` || cs.Calls() != 2 {
		t.Errorf("got %s after %d calls", out, cs.Calls())
	}
	if !strings.Contains(cs.Requests()[1].Body.Messages[1].Content, productSchema) {
		t.Error("the fallback request lost the schema from the prompt")
	}
}

func TestLLMChunks(t *testing.T) {
	paraA := "Alpha " + strings.Repeat("aaaa ", 30)
	paraB := "Bravo " + strings.Repeat("bbbb ", 30)
	paraC := "Charlie " + strings.Repeat("cccc ", 30)
	cs := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) {
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
		llmtest.Completion(w, `{"items":[`+strings.Join(names, ",")+`]}`)
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
	if cs.Calls() != 3 {
		t.Errorf("got %d calls, want 3 chunks", cs.Calls())
	}
	for _, r := range cs.Requests() {
		if !strings.Contains(r.Body.Messages[1].Content, "of 3):") {
			t.Errorf("chunk request does not say which part it is: %.200q", r.Body.Messages[1].Content)
		}
	}

	// A failing chunk fails the extraction.
	bad := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) {
		if strings.Contains(r.Body.Messages[1].Content, "Bravo") {
			llmtest.APIError(w, http.StatusForbidden, "content policy")
			return
		}
		llmtest.Completion(w, `[]`)
	})
	cfg = llmConfig(bad)
	cfg.LLMChunkChars = 200
	s = newLLMStrategy(t, cfg, `{"provider": "openai/gpt-4o-mini"}`)
	if _, err := s.Extract(context.Background(), Page{Markdown: paraA + "\n\n" + paraB + "\n\n" + paraC}); err == nil || !strings.Contains(err.Error(), "chunk 2 of 3") {
		t.Errorf("got %v, want an error naming chunk 2 of 3", err)
	}
}

func TestLLMEmptyPageMakesNoCall(t *testing.T) {
	cs := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) { llmtest.Completion(w, `[]`) })
	s := newLLMStrategy(t, llmConfig(cs), `{"provider": "openai/gpt-4o-mini"}`)
	out, err := s.Extract(context.Background(), Page{Markdown: "  \n"})
	if err != nil || out != "[]" || cs.Calls() != 0 {
		t.Errorf("got %q, %v after %d calls", out, err, cs.Calls())
	}
}

func TestLLMTimeout(t *testing.T) {
	release := make(chan struct{})
	cs := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) {
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
	cs := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) { llmtest.Completion(w, `[]`) })
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
			before := len(cs.Requests())
			s := newLLMStrategy(t, tc.cfg, tc.params)
			if _, err := s.Extract(context.Background(), Page{Markdown: "page"}); err != nil {
				t.Fatal(err)
			}
			r := cs.Requests()[before]
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

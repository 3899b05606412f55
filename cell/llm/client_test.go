package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/trawlhq/trawl/cell/llm"
	"github.com/trawlhq/trawl/cell/llm/llmtest"
)

// testConfig points the openai vendor at cs with a test key.
func testConfig(cs *llmtest.Server) llm.Config {
	return llm.Config{
		Getenv:    func(k string) string { return map[string]string{"OPENAI_API_KEY": "sk-test-123456"}[k] },
		BaseURLs:  map[string]string{"openai": cs.URL + "/v1"},
		RetryBase: time.Millisecond,
	}
}

func newClient(t *testing.T, cfg llm.Config, provider string) *llm.Client {
	t.Helper()
	c, err := llm.New(cfg, provider, "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ask is a one-message JSON request.
func ask(content string) llm.Request {
	return llm.Request{Messages: []llm.Message{{Role: "user", Content: content}}, ResponseFormat: llm.JSONObject()}
}

func TestRetry(t *testing.T) {
	cs := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) {
		switch n {
		case 1:
			w.Header().Set("Retry-After", "0")
			llmtest.APIError(w, http.StatusTooManyRequests, "Rate limit reached for gpt-4o-mini")
		case 2:
			llmtest.APIError(w, http.StatusBadGateway, "upstream hiccup")
		default:
			llmtest.Completion(w, `{"items":[{"ok":true}]}`)
		}
	})
	c := newClient(t, testConfig(cs), "openai/gpt-4o-mini")
	out, err := c.CompleteJSON(context.Background(), ask("page"))
	if err != nil {
		t.Fatal(err)
	}
	if out != `{"items":[{"ok":true}]}` {
		t.Errorf("got %s", out)
	}
	if got := cs.Calls(); got != 3 {
		t.Errorf("got %d calls, want 3 (429, 502, 200)", got)
	}
}

func TestContextCancelledDuringBackoff(t *testing.T) {
	cs := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) {
		w.Header().Set("Retry-After", "30")
		llmtest.APIError(w, http.StatusTooManyRequests, "slow down")
	})
	c := newClient(t, testConfig(cs), "openai/gpt-4o-mini")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.CompleteJSON(ctx, ask("page"))
		done <- err
	}()
	// Cancel once the first answer is in: the client is then waiting.
	deadline := time.Now().Add(10 * time.Second)
	for cs.Calls() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CompleteJSON kept waiting after its context was cancelled")
	}
	if cs.Calls() != 1 {
		t.Errorf("got %d calls, want 1", cs.Calls())
	}
}

func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	cs := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) {
		<-release
	})
	defer close(release)
	cfg := testConfig(cs)
	cfg.Timeout = 50 * time.Millisecond
	cfg.Retries = -1
	c := newClient(t, cfg, "openai/gpt-4o-mini")
	_, err := c.CompleteJSON(context.Background(), ask("page"))
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want a deadline error", err)
	}
}

func TestChunk(t *testing.T) {
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
			got := llm.Chunk(tc.md, tc.size, tc.max)
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
	for _, c := range llm.Chunk(strings.Repeat("é", 500), 99, 100) {
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
		if got := llm.ParseRetryAfter(v, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestNew(t *testing.T) {
	cs := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) { llmtest.Completion(w, `[]`) })
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tc := range []struct {
		name, provider, apiKey string
		cfg                    llm.Config
		wantAuth, wantModel    string
	}{
		{"base URL from the environment", "acme-ai/big-model", "", llm.Config{Getenv: env(map[string]string{"ACME_AI_API_KEY": "k1", "ACME_AI_BASE_URL": cs.URL + "/v1/"})}, "Bearer k1", "big-model"},
		{"Config.BaseURLs wins over the environment", "groq/llama-3.1-8b-instant", "", llm.Config{
			Getenv:   env(map[string]string{"GROQ_API_KEY": "k2", "GROQ_BASE_URL": "http://127.0.0.1:1/v1"}),
			BaseURLs: map[string]string{"groq": cs.URL + "/v1"},
		}, "Bearer k2", "llama-3.1-8b-instant"},
		{"ollama needs no key", "ollama/llama3.2", "", llm.Config{Getenv: env(map[string]string{"OLLAMA_BASE_URL": cs.URL + "/v1"})}, "", "llama3.2"},
		{"the caller's key wins", "openai/gpt-4o", "from-caller", llm.Config{Getenv: env(map[string]string{"OPENAI_API_KEY": "from-env"}), BaseURLs: map[string]string{"openai": cs.URL + "/v1"}}, "Bearer from-caller", "gpt-4o"},
		{"model with slashes", "OpenRouter/meta-llama/llama-3-8b", "", llm.Config{Getenv: env(map[string]string{"OPENROUTER_API_KEY": "k3"}), BaseURLs: map[string]string{"openrouter": cs.URL + "/v1"}}, "Bearer k3", "meta-llama/llama-3-8b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := llm.New(tc.cfg, tc.provider, tc.apiKey)
			if err != nil {
				t.Fatal(err)
			}
			before := len(cs.Requests())
			if _, err := c.Complete(context.Background(), ask("hi")); err != nil {
				t.Fatal(err)
			}
			r := cs.Requests()[before]
			if r.Auth != tc.wantAuth || r.Body.Model != tc.wantModel {
				t.Errorf("Authorization %q, model %q; want %q, %q", r.Auth, r.Body.Model, tc.wantAuth, tc.wantModel)
			}
			if printed := fmt.Sprintf("%v %+v %#v", c, c, c); tc.wantAuth != "" && strings.Contains(printed, strings.TrimPrefix(tc.wantAuth, "Bearer ")) {
				t.Errorf("printing the client shows the key: %s", printed)
			}
		})
	}
}

func TestNewErrorsNameTheVariable(t *testing.T) {
	noEnv := llm.Config{Getenv: func(string) string { return "" }}
	for _, tc := range []struct {
		name, provider string
		cfg            llm.Config
		wantVar, want  string
	}{
		{"missing key", "openai/gpt-4o-mini", noEnv, "OPENAI_API_KEY", `llm client needs OPENAI_API_KEY to be set for provider "openai/gpt-4o-mini"`},
		{"missing key, vendor with a dash", "together-ai/m", llm.Config{Getenv: func(k string) string {
			return map[string]string{"TOGETHER_AI_BASE_URL": "http://127.0.0.1:9/v1"}[k]
		}}, "TOGETHER_AI_API_KEY", "TOGETHER_AI_API_KEY"},
		{"unknown vendor", "acme/model-1", noEnv, "ACME_BASE_URL", `needs ACME_BASE_URL to be set for provider "acme/model-1"`},
		{"bad base URL", "acme/m", llm.Config{Getenv: func(k string) string {
			return map[string]string{"ACME_BASE_URL": "ftp://x", "ACME_API_KEY": "k"}[k]
		}}, "ACME_BASE_URL", "ACME_BASE_URL is not an http(s) URL"},
		{"no model", "openai", noEnv, "", `"openai" is not of the form`},
		{"no vendor", "/gpt-4o", noEnv, "", "is not of the form"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := llm.New(tc.cfg, tc.provider, "")
			var ce *llm.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("New = %v; want a *ConfigError", err)
			}
			if ce.Var != tc.wantVar || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q (Var %q); want %q naming %q", err, ce.Var, tc.want, tc.wantVar)
			}
		})
	}
}

func TestCompleteJSON(t *testing.T) {
	for _, tc := range []struct{ name, content, want string }{
		{"bare", `{"items":[1]}`, `{"items":[1]}`},
		{"fence with language", "Here:\n```json\n[{\"a\":1}]\n```", `[{"a":1}]`},
		{"prose around", "Sure! {\"a\": \"}\"} Hope this helps.", `{"a": "}"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) { llmtest.Completion(w, tc.content) })
			got, err := newClient(t, testConfig(cs), "openai/gpt-4o-mini").CompleteJSON(context.Background(), ask("x"))
			if err != nil || got != tc.want {
				t.Errorf("got %s, %v; want %s", got, err, tc.want)
			}
			if temp, ok := cs.Requests()[0].Raw["temperature"]; !ok || temp != float64(0) {
				t.Errorf("temperature = %v (present %v), want 0", temp, ok)
			}
		})
	}

	// A server that does not know json_schema gets json_object instead.
	cs := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) {
		if rf := r.Raw["response_format"].(map[string]any); rf["type"] == "json_schema" {
			llmtest.APIError(w, http.StatusBadRequest, "response_format json_schema is not supported by this model")
			return
		}
		llmtest.Completion(w, `{"name":"x"}`)
	})
	req := ask("x")
	req.ResponseFormat = llm.JSONSchema("thing", json.RawMessage(`{"type":"object"}`))
	got, err := newClient(t, testConfig(cs), "openai/gpt-4o-mini").CompleteJSON(context.Background(), req)
	if err != nil || got != `{"name":"x"}` || cs.Calls() != 2 {
		t.Errorf("got %s, %v after %d calls", got, err, cs.Calls())
	}
	if rf := cs.Requests()[1].Raw["response_format"].(map[string]any); rf["type"] != "json_object" {
		t.Errorf("fallback response_format = %v", rf)
	}
}

func TestCompleteErrors(t *testing.T) {
	for _, tc := range []struct {
		name      string
		answer    func(n int, r llmtest.Request, w http.ResponseWriter)
		wantCalls int32
		status    int
		want      string
	}{
		{"401, key redacted, not retried", func(n int, r llmtest.Request, w http.ResponseWriter) {
			llmtest.APIError(w, http.StatusUnauthorized, "Incorrect API key provided: sk-test-123456.")
		}, 1, 401, "Incorrect API key provided: [redacted]"},
		{"503 retried then surfaced", func(n int, r llmtest.Request, w http.ResponseWriter) {
			llmtest.APIError(w, http.StatusServiceUnavailable, "overloaded")
		}, 3, 503, "overloaded"},
		{"refusal", func(n int, r llmtest.Request, w http.ResponseWriter) {
			fmt.Fprint(w, `{"choices":[{"finish_reason":"stop","message":{"content":null,"refusal":"I can't help with that."}}]}`)
		}, 1, 0, "llm refused: I can't help"},
		{"no content", func(n int, r llmtest.Request, w http.ResponseWriter) {
			fmt.Fprint(w, `{"choices":[{"finish_reason":"stop","message":{"content":"  "}}]}`)
		}, 1, 0, "no content"},
		{"not a completion", func(n int, r llmtest.Request, w http.ResponseWriter) { fmt.Fprint(w, `<html>`) }, 1, 0, "not a chat completion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := llmtest.NewServer(t, tc.answer)
			_, err := newClient(t, testConfig(cs), "openai/gpt-4o-mini").Complete(context.Background(), ask("x"))
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "sk-test-123456") {
				t.Errorf("error %v; want %q and no key", err, tc.want)
			}
			var pe *llm.ProviderError
			if tc.status != 0 && (!errors.As(err, &pe) || pe.StatusCode != tc.status || pe.Provider != "openai/gpt-4o-mini") {
				t.Errorf("error %v is not a ProviderError with status %d", err, tc.status)
			}
			if got := cs.Calls(); got != tc.wantCalls {
				t.Errorf("got %d calls, want %d", got, tc.wantCalls)
			}
		})
	}
}

// JSON returns the tokens the server reported, also for an answer that
// is no JSON (the tokens were spent), and says when it fell back to JSON
// mode.
func TestJSONUsage(t *testing.T) {
	cs := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) {
		if rf := r.Raw["response_format"].(map[string]any); rf["type"] == "json_schema" {
			llmtest.APIError(w, http.StatusBadRequest, "json_schema unsupported")
			return
		}
		if n == 2 {
			llmtest.CompletionUsage(w, `{"a":1}`, 120, 7)
			return
		}
		llmtest.CompletionUsage(w, `no json here`, 50, 3)
	})
	c := newClient(t, testConfig(cs), "openai/gpt-4o-mini")
	req := ask("x")
	req.ResponseFormat = llm.JSONSchema("thing", json.RawMessage(`{"type":"object"}`))
	ans, err := c.JSON(context.Background(), req)
	if err != nil || ans.Text != `{"a":1}` || ans.Usage != (llm.Usage{InTokens: 120, OutTokens: 7}) || !ans.Schemaless {
		t.Errorf("%+v, %v", ans, err)
	}
	ans, err = c.JSON(context.Background(), ask("y"))
	if err == nil || ans.Usage != (llm.Usage{InTokens: 50, OutTokens: 3}) || ans.Schemaless {
		t.Errorf("not JSON: %+v, %v", ans, err)
	}
}

// ChunkTokens: chunks of about size tokens, each after the first starting
// with the end of the one before, never cutting a UTF-8 sequence.
func TestChunkTokens(t *testing.T) {
	var b strings.Builder
	for i := range 400 {
		fmt.Fprintf(&b, "Line %d of the page, été.\n", i)
	}
	md := b.String()
	chunks := llm.ChunkTokens(md, 200, 40, 100)
	if len(chunks) < 10 {
		t.Fatalf("%d chunks", len(chunks))
	}
	for i, c := range chunks {
		if n := llm.EstimateTokens(c); n > 200+2 {
			t.Errorf("chunk %d: %d tokens", i, n)
		}
		if !utf8.ValidString(c) {
			t.Errorf("chunk %d is not UTF-8", i)
		}
		if i > 0 {
			prev := chunks[i-1]
			first := strings.SplitN(c, "\n", 2)[0]
			if !strings.Contains(prev, first) {
				t.Errorf("chunk %d does not start with the end of chunk %d: %q", i, i-1, first)
			}
		}
	}
	if got := llm.ChunkTokens(md, 200, 40, 3); len(got) != 3 {
		t.Errorf("maxChunks: %d", len(got))
	}
	if got := llm.ChunkTokens("short", 200, 40, 3); len(got) != 1 || got[0] != "short" {
		t.Errorf("%q", got)
	}
}

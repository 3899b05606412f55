package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultBaseURLs are the OpenAI-compatible endpoints of the vendors New
// knows without configuration.
var DefaultBaseURLs = map[string]string{
	"openai":     "https://api.openai.com/v1",
	"groq":       "https://api.groq.com/openai/v1",
	"deepseek":   "https://api.deepseek.com/v1",
	"mistral":    "https://api.mistral.ai/v1",
	"openrouter": "https://openrouter.ai/api/v1",
	"together":   "https://api.together.xyz/v1",
	"ollama":     "http://127.0.0.1:11434/v1",
}

// keylessVendors serve without an API key (a local model server).
var keylessVendors = map[string]bool{"ollama": true}

// Defaults of Config.
const (
	DefaultTimeout   = 2 * time.Minute
	DefaultRetries   = 2
	DefaultRetryBase = time.Second
)

const (
	maxRetryWait     = time.Minute // a longer Retry-After is not waited for
	maxResponseBytes = 8 << 20
	maxErrorMessage  = 500
)

// Config is the server-wide setup of the clients New returns: where each
// vendor is and how calls are made. It is read, never modified.
type Config struct {
	// Getenv reads <VENDOR>_API_KEY and <VENDOR>_BASE_URL; nil = os.Getenv.
	Getenv func(string) string
	// BaseURLs maps a vendor ("openai", "groq", ...) to an OpenAI-compatible
	// base URL (".../v1"); it overrides the environment and the defaults.
	BaseURLs map[string]string
	// HTTPClient sends the requests; nil = a client whose timeout is
	// Timeout.
	HTTPClient *http.Client
	// Timeout bounds one attempt of one request; 0 = DefaultTimeout.
	Timeout time.Duration
	// Retries is how many times a 429 or 5xx answer, or no answer, is
	// retried; 0 = DefaultRetries, negative = no retry.
	Retries int
	// RetryBase is the first backoff when the provider sends no
	// Retry-After (it doubles with each retry); 0 = DefaultRetryBase.
	RetryBase time.Duration
}

func (c Config) getenv(k string) string {
	if c.Getenv != nil {
		return c.Getenv(k)
	}
	return os.Getenv(k)
}

// ConfigError is a client New cannot make: the provider is malformed, or
// the server lacks a variable it needs (Var names it).
type ConfigError struct {
	// Var is the environment variable to set ("OPENAI_API_KEY",
	// "ACME_BASE_URL"), or empty.
	Var string
	// Reason completes a sentence whose subject is the client: "needs
	// OPENAI_API_KEY to be set for provider ...".
	Reason string
}

func (e *ConfigError) Error() string { return "llm client " + e.Reason }

// ProviderError is a failed chat-completions call: the provider answered
// with a non-2xx status (after the retries, for 429 and 5xx).
type ProviderError struct {
	Provider   string // "<vendor>/<model>"
	StatusCode int
	// Message is the provider's own error message (the API key, if the
	// provider echoes it, is redacted).
	Message string
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("llm provider %q answered %d %s: %s", e.Provider, e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// EnvPrefix turns a vendor into the prefix of its variables: upper case,
// anything but letters and digits as "_" ("together-ai" → "TOGETHER_AI").
func EnvPrefix(vendor string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(vendor) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// ParseProvider splits "<vendor>/<model>": the vendor lower-cased, the
// model as given (it may hold slashes). ok is false when either is empty.
func ParseProvider(provider string) (vendor, model string, ok bool) {
	vendor, model, ok = strings.Cut(strings.TrimSpace(provider), "/")
	vendor = strings.ToLower(strings.TrimSpace(vendor))
	model = strings.TrimSpace(model)
	return vendor, model, ok && vendor != "" && model != ""
}

// Client calls the chat-completions endpoint of one "<vendor>/<model>".
// It is immutable and safe for concurrent use; its key appears in no
// error and no printout.
type Client struct {
	provider  string
	model     string
	endpoint  string // {base}/chat/completions
	key       string // never logged nor put in an error
	client    *http.Client
	timeout   time.Duration
	retries   int
	retryBase time.Duration
}

// New returns the client of provider ("<vendor>/<model>"). The vendor's
// base URL is cfg.BaseURLs[vendor], else <VENDOR>_BASE_URL, else
// DefaultBaseURLs[vendor]; its key is apiKey, else <VENDOR>_API_KEY
// (a local vendor such as ollama needs none). Every error is a
// *ConfigError naming what to set.
func New(cfg Config, provider, apiKey string) (*Client, error) {
	provider = strings.TrimSpace(provider)
	vendor, model, ok := ParseProvider(provider)
	if !ok {
		return nil, &ConfigError{Reason: fmt.Sprintf(`provider %q is not of the form "<vendor>/<model>" (e.g. "openai/gpt-4o-mini")`, provider)}
	}
	env := EnvPrefix(vendor)
	c := &Client{provider: provider, model: model}

	base, source := cfg.BaseURLs[vendor], "the server's base URL for "+vendor
	if base == "" {
		base, source = cfg.getenv(env+"_BASE_URL"), env+"_BASE_URL"
	}
	if base == "" {
		base, source = DefaultBaseURLs[vendor], "the default base URL"
	}
	if base == "" {
		return nil, &ConfigError{Var: env + "_BASE_URL", Reason: fmt.Sprintf("needs %s_BASE_URL to be set for provider %q (vendor %q has no default endpoint)", env, provider, vendor)}
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &ConfigError{Var: env + "_BASE_URL", Reason: fmt.Sprintf("for provider %q: %s is not an http(s) URL", provider, source)}
	}
	c.endpoint = strings.TrimRight(base, "/") + "/chat/completions"

	c.key = strings.TrimSpace(apiKey)
	if c.key == "" {
		c.key = strings.TrimSpace(cfg.getenv(env + "_API_KEY"))
	}
	if c.key == "" && !keylessVendors[vendor] {
		return nil, &ConfigError{Var: env + "_API_KEY", Reason: fmt.Sprintf("needs %s_API_KEY to be set for provider %q", env, provider)}
	}

	c.timeout = or(cfg.Timeout, DefaultTimeout)
	c.retries = max(or(cfg.Retries, DefaultRetries), 0)
	c.retryBase = or(cfg.RetryBase, DefaultRetryBase)
	c.client = cfg.HTTPClient
	if c.client == nil {
		c.client = &http.Client{Timeout: c.timeout}
	}
	return c, nil
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Provider is "<vendor>/<model>" as given to New.
func (c *Client) Provider() string { return c.provider }

// String and GoString keep the key out of %v and %#v.
func (c *Client) String() string   { return "llm client for " + c.provider }
func (c *Client) GoString() string { return c.String() }

// Message is one message of a chat.
type Message struct {
	Role    string `json:"role"` // system, user or assistant
	Content string `json:"content"`
}

// Request is one chat-completions call; the client adds the model.
type Request struct {
	Messages    []Message
	Temperature float64
	// ResponseFormat is sent as response_format when set: JSONObject or
	// JSONSchema.
	ResponseFormat map[string]any
}

// JSONObject asks for a reply that is one JSON object.
func JSONObject() map[string]any { return map[string]any{"type": "json_object"} }

// JSONSchema asks for a reply matching schema (a JSON Schema object),
// named name; CompleteJSON falls back to JSONObject for servers that do
// not know it.
func JSONSchema(name string, schema any) map[string]any {
	return map[string]any{
		"type":        "json_schema",
		"json_schema": map[string]any{"name": name, "strict": false, "schema": schema},
	}
}

// chatRequest is the body of POST {base}/chat/completions.
type chatRequest struct {
	Model          string         `json:"model"`
	Messages       []Message      `json:"messages"`
	Temperature    float64        `json:"temperature"`
	ResponseFormat map[string]any `json:"response_format,omitempty"`
}

// Completion is the first choice of a chat-completions answer.
type Completion struct {
	Content string
	// FinishReason is the provider's: "stop", "length" (cut off)...
	FinishReason string
	// Usage is the tokens the provider says the call took.
	Usage Usage
}

// Usage is the token count a provider reports for a call (its "usage":
// prompt_tokens, completion_tokens); zero when it reports none.
type Usage struct {
	InTokens  int `json:"prompt_tokens"`
	OutTokens int `json:"completion_tokens"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{InTokens: u.InTokens + v.InTokens, OutTokens: u.OutTokens + v.OutTokens}
}

// Complete makes one call (with its retries) and returns the answer's
// first choice. An error is a *ProviderError for a non-2xx answer, the
// context's error, or says what the answer lacked (choices, content) or
// that the model refused; when the provider did answer 2xx, the
// Completion returned with such an error still carries the Usage it
// reported (the tokens were spent).
func (c *Client) Complete(ctx context.Context, req Request) (*Completion, error) {
	body, err := c.post(ctx, chatRequest{Model: c.model, Messages: req.Messages, Temperature: req.Temperature, ResponseFormat: req.ResponseFormat})
	if err != nil {
		return nil, err
	}
	var r struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
				Refusal string  `json:"refusal"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage Usage `json:"usage"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("llm answer is not a chat completion: %w", err)
	}
	if len(r.Choices) == 0 {
		return &Completion{Usage: r.Usage}, errors.New("llm answer has no choices")
	}
	ch := r.Choices[0]
	if ch.Message.Refusal != "" {
		return &Completion{Usage: r.Usage}, fmt.Errorf("llm refused: %s", truncate(ch.Message.Refusal, maxErrorMessage))
	}
	if ch.Message.Content == nil || strings.TrimSpace(*ch.Message.Content) == "" {
		return &Completion{Usage: r.Usage, FinishReason: ch.FinishReason}, errors.New("llm answer has no content")
	}
	return &Completion{Content: *ch.Message.Content, FinishReason: ch.FinishReason, Usage: r.Usage}, nil
}

// CompleteJSON is Complete for a JSON reply: it returns the JSON text of
// the answer (see JSONText). A request for JSONSchema that the server
// refuses with 400 is made again with JSONObject, which more
// OpenAI-compatible servers know (put the schema in the prompt too).
func (c *Client) CompleteJSON(ctx context.Context, req Request) (string, error) {
	ans, err := c.JSON(ctx, req)
	return ans.Text, err
}

// JSONAnswer is the answer of JSON.
type JSONAnswer struct {
	// Text is the JSON of the answer (see JSONText).
	Text string
	// Usage is the tokens the calls took, as the provider reported them;
	// set also when the call failed after the provider answered.
	Usage Usage
	// Schemaless: the server refused response_format json_schema and the
	// call was made again in JSON mode, so nothing enforced the schema.
	Schemaless bool
}

// JSON is CompleteJSON that also says what the calls cost and whether
// the schema was enforced by the server.
func (c *Client) JSON(ctx context.Context, req Request) (JSONAnswer, error) {
	var ans JSONAnswer
	comp, err := c.Complete(ctx, req)
	var pe *ProviderError
	if req.ResponseFormat["type"] == "json_schema" && errors.As(err, &pe) && pe.StatusCode == http.StatusBadRequest {
		req.ResponseFormat = JSONObject()
		ans.Schemaless = true
		comp, err = c.Complete(ctx, req)
	}
	if comp != nil {
		ans.Usage = comp.Usage
	}
	if err != nil {
		return ans, err
	}
	text, ok := JSONText(comp.Content)
	if !ok {
		if comp.FinishReason == "length" {
			return ans, errors.New("llm answer was cut off (finish_reason length) before its JSON was complete")
		}
		return ans, fmt.Errorf("llm answer is not JSON: %q", truncate(comp.Content, 200))
	}
	ans.Text = text
	return ans, nil
}

// post sends one request, retrying 429 and 5xx answers and network
// errors up to c.retries times; it returns the body of a 2xx answer.
func (c *Client) post(ctx context.Context, req chatRequest) ([]byte, error) {
	payload, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	for attempt := 0; ; attempt++ {
		body, status, retryAfter, err := c.send(ctx, payload)
		if err == nil && status/100 == 2 {
			return body, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err == nil {
			err = &ProviderError{Provider: c.provider, StatusCode: status, Message: c.errorMessage(body)}
		}
		retryable := status == 0 || status == http.StatusTooManyRequests || status >= 500 // 0: no answer
		if !retryable || attempt >= c.retries {
			return nil, err
		}
		wait := c.retryBase << attempt
		if retryAfter >= 0 {
			wait = retryAfter
		}
		if wait > maxRetryWait {
			return nil, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// send makes one attempt. status is 0 when no answer came; retryAfter is
// -1 without a usable Retry-After header.
func (c *Client) send(ctx context.Context, payload []byte) (body []byte, status int, retryAfter time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(payload))
	if err != nil {
		return nil, 0, -1, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		// The error names the URL, never the headers.
		return nil, 0, -1, fmt.Errorf("call llm provider %q: %w", c.provider, err)
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, 0, -1, fmt.Errorf("read llm provider %q answer: %w", c.provider, err)
	}
	return body, resp.StatusCode, parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()), nil
}

func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return -1
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, t.Sub(now))
	}
	return -1
}

// errorMessage digs the provider's message out of an error body
// ({"error": {"message": ...}}, {"error": "..."}, {"message": ...},
// {"detail": ...}, or plain text).
func (c *Client) errorMessage(body []byte) string {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	msg := ""
	if json.Unmarshal(body, &e) == nil {
		var inner struct {
			Message string `json:"message"`
		}
		var str string
		switch {
		case json.Unmarshal(e.Error, &inner) == nil && inner.Message != "":
			msg = inner.Message
		case json.Unmarshal(e.Error, &str) == nil && str != "":
			msg = str
		case e.Message != "":
			msg = e.Message
		case json.Unmarshal(e.Detail, &str) == nil && str != "":
			msg = str
		case len(e.Detail) > 0:
			msg = string(e.Detail)
		}
	}
	if msg == "" {
		msg = strings.TrimSpace(string(body))
	}
	if msg == "" {
		msg = "(empty body)"
	}
	if len(c.key) >= 4 {
		msg = strings.ReplaceAll(msg, c.key, "[redacted]")
	}
	return truncate(strings.Join(strings.Fields(msg), " "), maxErrorMessage)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// JSONText finds the JSON in a model's answer: the whole answer, else the
// inside of a ``` fence, else the span from the first { or [ to the last
// } or ].
func JSONText(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if json.Valid([]byte(s)) {
		return s, true
	}
	if i := strings.Index(s, "```"); i >= 0 {
		rest := s[i+3:]
		if nl := strings.IndexByte(rest, '\n'); nl >= 0 {
			rest = rest[nl+1:] // drop the language tag
		}
		if j := strings.LastIndex(rest, "```"); j >= 0 {
			rest = rest[:j]
		}
		if t := strings.TrimSpace(rest); json.Valid([]byte(t)) {
			return t, true
		}
	}
	start := strings.IndexAny(s, "{[")
	end := strings.LastIndexAny(s, "}]")
	if start >= 0 && end > start {
		if t := s[start : end+1]; json.Valid([]byte(t)) {
			return t, true
		}
	}
	return "", false
}

var (
	_ fmt.Stringer   = (*Client)(nil)
	_ fmt.GoStringer = (*Client)(nil)
	_ error          = (*ProviderError)(nil)
	_ error          = (*ConfigError)(nil)
)

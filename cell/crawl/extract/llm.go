package extract

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"
)

// DefaultBaseURLs are the OpenAI-compatible endpoints of the vendors the
// llm strategy knows without configuration.
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

const (
	maxRetryWait     = time.Minute // a longer Retry-After is not waited for
	defaultRetryBase = time.Second
	maxResponseBytes = 8 << 20
	maxErrorMessage  = 500

	defaultInstruction = `Extract the main blocks of information of the page. Each item is an object with "content" (the text of the block) and "tags" (an array of a few short topic words).`
)

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

type llmStrategy struct {
	provider    string
	model       string
	endpoint    string // {base}/chat/completions
	key         string // never logged nor put in an error
	instruction string
	schema      json.RawMessage // nil without a schema

	client      *http.Client
	timeout     time.Duration
	chunkChars  int
	maxChunks   int
	concurrency int
	retries     int
	retryBase   time.Duration
}

func (*llmStrategy) Name() string { return "llm" }

// String and GoString keep the key out of %v and %#v.
func (s *llmStrategy) String() string   { return "llm extraction with " + s.provider }
func (s *llmStrategy) GoString() string { return s.String() }

// envName turns a vendor into the prefix of its variables: upper case,
// anything but letters and digits as "_" ("together-ai" → "TOGETHER_AI").
func envName(vendor string) string {
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

func newLLM(cfg Config, p params) (Strategy, error) {
	provider, _, err := p.str("provider")
	if err != nil {
		return nil, err
	}
	provider = strings.TrimSpace(provider)
	if provider == "" {
		return nil, badParams(p.field("provider"), `is required, as "<vendor>/<model>" (e.g. "openai/gpt-4o-mini")`)
	}
	vendor, model, ok := strings.Cut(provider, "/")
	vendor = strings.ToLower(strings.TrimSpace(vendor))
	if !ok || vendor == "" || strings.TrimSpace(model) == "" {
		return nil, badParams(p.field("provider"), `%q is not of the form "<vendor>/<model>" (e.g. "openai/gpt-4o-mini")`, provider)
	}
	for _, k := range []string{"base_url", "api_base"} {
		if p.has(k) {
			return nil, badParams(p.field(k), "is not accepted: the server sends requests only to configured endpoints (set %s_BASE_URL on the server)", envName(vendor))
		}
	}
	s := &llmStrategy{provider: provider, model: strings.TrimSpace(model)}

	base, source := cfg.BaseURLs[vendor], "the server's base URL for "+vendor
	if base == "" {
		base, source = cfg.getenv(envName(vendor)+"_BASE_URL"), envName(vendor)+"_BASE_URL"
	}
	if base == "" {
		base, source = DefaultBaseURLs[vendor], "the default base URL"
	}
	if base == "" {
		return nil, &ParamError{Reason: fmt.Sprintf("llm extraction needs %s_BASE_URL to be set for provider %q (vendor %q has no default endpoint)", envName(vendor), provider, vendor)}
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &ParamError{Reason: fmt.Sprintf("llm extraction for provider %q: %s is not an http(s) URL", provider, source)}
	}
	s.endpoint = strings.TrimRight(base, "/") + "/chat/completions"

	// api_token is what Crawl4AI's examples send; the server's own key
	// variable is the way we recommend.
	token, _, err := p.str("api_token")
	if err != nil {
		return nil, err
	}
	s.key = strings.TrimSpace(token)
	if s.key == "" {
		s.key = strings.TrimSpace(cfg.getenv(envName(vendor) + "_API_KEY"))
	}
	if s.key == "" && !keylessVendors[vendor] {
		return nil, &ParamError{Reason: fmt.Sprintf("llm extraction needs %s_API_KEY to be set for provider %q", envName(vendor), provider)}
	}

	if s.instruction, _, err = p.str("instruction"); err != nil {
		return nil, err
	}
	if strings.TrimSpace(s.instruction) == "" {
		s.instruction = defaultInstruction
	}
	if raw, ok, err := p.object("schema"); err != nil {
		return nil, err
	} else if ok {
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return nil, badParams(p.field("schema"), "must be a JSON object")
		}
		s.schema = b.Bytes()
	}

	s.timeout = or(cfg.LLMTimeout, DefaultLLMTimeout)
	s.chunkChars = or(cfg.LLMChunkChars, DefaultLLMChunkChars)
	s.maxChunks = or(cfg.LLMMaxChunks, DefaultLLMMaxChunks)
	s.concurrency = or(cfg.LLMConcurrency, DefaultLLMConcurrency)
	s.retries = or(cfg.LLMRetries, DefaultLLMRetries)
	if s.retries < 0 {
		s.retries = 0
	}
	s.retryBase = or(cfg.retryBase, defaultRetryBase)
	s.client = cfg.HTTPClient
	if s.client == nil {
		s.client = &http.Client{Timeout: s.timeout}
	}
	return s, nil
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func (s *llmStrategy) Extract(ctx context.Context, p Page) (string, error) {
	chunks := chunkText(pageMarkdown(p), s.chunkChars, s.maxChunks)
	results := make([][]json.RawMessage, len(chunks))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.concurrency)
	for i, c := range chunks {
		g.Go(func() error {
			items, err := s.extractChunk(gctx, p.URL, c, i, len(chunks))
			if err != nil {
				if len(chunks) > 1 {
					err = fmt.Errorf("chunk %d of %d: %w", i+1, len(chunks), err)
				}
				return err
			}
			results[i] = items
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return "", fmt.Errorf("llm extraction: %w", err)
	}
	merged := []json.RawMessage{}
	for _, r := range results {
		merged = append(merged, r...)
	}
	return marshal(merged)
}

// chatRequest is the body of POST {base}/chat/completions.
type chatRequest struct {
	Model          string         `json:"model"`
	Messages       []chatMessage  `json:"messages"`
	Temperature    float64        `json:"temperature"`
	ResponseFormat map[string]any `json:"response_format,omitempty"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

const systemPrompt = `You extract information from web pages. Reply with a single JSON object and nothing else (no prose, no code fences): {"items": [...]}, where "items" lists, in page order, every item the instruction asks for that appears in the page content. If there is none, reply {"items": []}. Never invent content that is not in the page.`

func (s *llmStrategy) request(pageURL, chunk string, i, n int, schemaFormat bool) chatRequest {
	var u strings.Builder
	fmt.Fprintf(&u, "Instruction:\n%s\n\n", s.instruction)
	if s.schema != nil {
		fmt.Fprintf(&u, "Each item must be a JSON object matching this JSON schema:\n%s\n\n", s.schema)
	}
	if pageURL != "" {
		fmt.Fprintf(&u, "Page URL: %s\n", pageURL)
	}
	if n > 1 {
		fmt.Fprintf(&u, "Page content (Markdown, part %d of %d):\n\n%s", i+1, n, chunk)
	} else {
		fmt.Fprintf(&u, "Page content (Markdown):\n\n%s", chunk)
	}
	r := chatRequest{
		Model: s.model,
		Messages: []chatMessage{
			{Role: "system", Content: systemPrompt},
			{Role: "user", Content: u.String()},
		},
		ResponseFormat: map[string]any{"type": "json_object"},
	}
	if schemaFormat {
		r.ResponseFormat = map[string]any{
			"type": "json_schema",
			"json_schema": map[string]any{
				"name":   "extraction",
				"strict": false,
				"schema": map[string]any{
					"type":                 "object",
					"properties":           map[string]any{"items": map[string]any{"type": "array", "items": s.schema}},
					"required":             []string{"items"},
					"additionalProperties": false,
				},
			},
		}
	}
	return r
}

func (s *llmStrategy) extractChunk(ctx context.Context, pageURL, chunk string, i, n int) ([]json.RawMessage, error) {
	schemaFormat := s.schema != nil
	body, err := s.post(ctx, s.request(pageURL, chunk, i, n, schemaFormat))
	var pe *ProviderError
	if schemaFormat && errors.As(err, &pe) && pe.StatusCode == http.StatusBadRequest {
		// Many OpenAI-compatible servers know json_object but not
		// json_schema; the schema is in the prompt anyway.
		body, err = s.post(ctx, s.request(pageURL, chunk, i, n, false))
	}
	if err != nil {
		return nil, err
	}
	return parseCompletion(body)
}

// post sends one request, retrying 429 and 5xx answers and network
// errors up to s.retries times; it returns the body of a 2xx answer.
func (s *llmStrategy) post(ctx context.Context, req chatRequest) ([]byte, error) {
	payload, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	for attempt := 0; ; attempt++ {
		body, status, retryAfter, err := s.send(ctx, payload)
		if err == nil && status/100 == 2 {
			return body, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err == nil {
			err = &ProviderError{Provider: s.provider, StatusCode: status, Message: s.errorMessage(body)}
		}
		retryable := status == 0 || status == http.StatusTooManyRequests || status >= 500 // 0: no answer
		if !retryable || attempt >= s.retries {
			return nil, err
		}
		wait := s.retryBase << attempt
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
func (s *llmStrategy) send(ctx context.Context, payload []byte) (body []byte, status int, retryAfter time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(payload))
	if err != nil {
		return nil, 0, -1, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if s.key != "" {
		req.Header.Set("Authorization", "Bearer "+s.key)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		// The error names the URL, never the headers.
		return nil, 0, -1, fmt.Errorf("call llm provider %q: %w", s.provider, err)
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, 0, -1, fmt.Errorf("read llm provider %q answer: %w", s.provider, err)
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
func (s *llmStrategy) errorMessage(body []byte) string {
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
	if len(s.key) >= 4 {
		msg = strings.ReplaceAll(msg, s.key, "[redacted]")
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

// parseCompletion returns the items of a chat-completions answer.
func parseCompletion(body []byte) ([]json.RawMessage, error) {
	var r struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
				Refusal string  `json:"refusal"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("llm answer is not a chat completion: %w", err)
	}
	if len(r.Choices) == 0 {
		return nil, errors.New("llm answer has no choices")
	}
	c := r.Choices[0]
	if c.Message.Refusal != "" {
		return nil, fmt.Errorf("llm refused: %s", truncate(c.Message.Refusal, maxErrorMessage))
	}
	if c.Message.Content == nil || strings.TrimSpace(*c.Message.Content) == "" {
		return nil, errors.New("llm answer has no content")
	}
	text, ok := jsonText(*c.Message.Content)
	if !ok {
		if c.FinishReason == "length" {
			return nil, errors.New("llm answer was cut off (finish_reason length) before its JSON was complete")
		}
		return nil, fmt.Errorf("llm answer is not JSON: %q", truncate(*c.Message.Content, 200))
	}
	return items(json.RawMessage(text))
}

// jsonText finds the JSON in a model's answer: the whole answer, else the
// inside of a ``` fence, else the span from the first { or [ to the last
// } or ].
func jsonText(s string) (string, bool) {
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

// items turns an answer into a list: an array is the list; an object with
// "items" (or with a single key) holding an array gives that array; any
// other value is a list of one.
func items(v json.RawMessage) ([]json.RawMessage, error) {
	var list []json.RawMessage
	if json.Unmarshal(v, &list) == nil {
		return compactAll(list)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(v, &obj) == nil {
		inner, ok := obj["items"]
		if !ok && len(obj) == 1 {
			for _, x := range obj {
				inner = x
			}
		}
		if inner != nil && json.Unmarshal(inner, &list) == nil {
			return compactAll(list)
		}
	}
	return compactAll([]json.RawMessage{v})
}

func compactAll(list []json.RawMessage) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(list))
	for _, x := range list {
		var b bytes.Buffer
		if err := json.Compact(&b, x); err != nil {
			return nil, fmt.Errorf("llm answer: %w", err)
		}
		out = append(out, b.Bytes())
	}
	return out, nil
}

// chunkText cuts Markdown into chunks of at most size bytes, at paragraph
// breaks where it can, else at line breaks, else inside a line (never
// inside a UTF-8 sequence). It returns at most maxChunks chunks: the rest
// of a longer page is not sent.
func chunkText(md string, size, maxChunks int) []string {
	md = strings.TrimSpace(md)
	var chunks []string
	var cur strings.Builder
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			chunks = append(chunks, s)
		}
		cur.Reset()
	}
	add := func(piece, sep string) {
		if cur.Len() > 0 && cur.Len()+len(sep)+len(piece) > size {
			flush()
		}
		if cur.Len() > 0 {
			cur.WriteString(sep)
		}
		cur.WriteString(piece)
	}
	for para := range strings.SplitSeq(md, "\n\n") {
		if len(para) <= size {
			add(para, "\n\n")
			continue
		}
		for line := range strings.SplitSeq(para, "\n") {
			for len(line) > size {
				cut := size
				for cut > 0 && !utf8.RuneStart(line[cut]) {
					cut--
				}
				if sp := strings.LastIndexAny(line[:cut], " \t"); sp > size/2 {
					cut = sp
				}
				add(line[:cut], "\n")
				flush()
				line = line[cut:]
			}
			add(line, "\n")
		}
		if len(chunks) >= maxChunks {
			break
		}
	}
	flush()
	if len(chunks) > maxChunks {
		chunks = chunks[:maxChunks]
	}
	return chunks
}

var (
	_ Strategy       = (*llmStrategy)(nil)
	_ fmt.Stringer   = (*llmStrategy)(nil)
	_ fmt.GoStringer = (*llmStrategy)(nil)
	_ error          = (*ProviderError)(nil)
)

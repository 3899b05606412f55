package extract

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/trawlhq/trawl/cell/llm"
)

const defaultInstruction = `Extract the main blocks of information of the page. Each item is an object with "content" (the text of the block) and "tags" (an array of a few short topic words).`

// llmStrategy asks a model, through an llm.Client, for the items of each
// chunk of the page.
type llmStrategy struct {
	client      *llm.Client // holds the key: never printed
	instruction string
	schema      json.RawMessage // nil without a schema

	chunkChars  int
	maxChunks   int
	concurrency int
}

func (*llmStrategy) Name() string { return "llm" }

// String and GoString keep the key out of %v and %#v.
func (s *llmStrategy) String() string   { return "llm extraction with " + s.client.Provider() }
func (s *llmStrategy) GoString() string { return s.String() }

func newLLM(cfg Config, p params) (Strategy, error) {
	provider, _, err := p.str("provider")
	if err != nil {
		return nil, err
	}
	provider = strings.TrimSpace(provider)
	if provider == "" {
		provider = cfg.DefaultProvider
	}
	if provider == "" {
		return nil, badParams(p.field("provider"), `is required, as "<vendor>/<model>" (e.g. "openai/gpt-4o-mini")`)
	}
	vendor, _, ok := llm.ParseProvider(provider)
	if !ok {
		return nil, badParams(p.field("provider"), `%q is not of the form "<vendor>/<model>" (e.g. "openai/gpt-4o-mini")`, provider)
	}
	for _, k := range []string{"base_url", "api_base"} {
		if p.has(k) {
			return nil, badParams(p.field(k), "is not accepted: the server sends requests only to configured endpoints (set %s_BASE_URL on the server)", llm.EnvPrefix(vendor))
		}
	}

	// api_token is what Crawl4AI's examples send; the server's own key
	// variable is the way we recommend.
	token, _, tokenErr := p.str("api_token")
	client, err := llm.New(llm.Config{
		Getenv:     cfg.Getenv,
		BaseURLs:   cfg.BaseURLs,
		HTTPClient: cfg.HTTPClient,
		Timeout:    cfg.LLMTimeout,
		Retries:    cfg.LLMRetries,
		RetryBase:  cfg.retryBase,
	}, provider, token)
	var ce *llm.ConfigError
	if errors.As(err, &ce) && !strings.HasSuffix(ce.Var, "_API_KEY") {
		return nil, &ParamError{Reason: "llm extraction " + ce.Reason} // no endpoint: said before a bad api_token
	}
	if tokenErr != nil {
		return nil, tokenErr
	}
	if errors.As(err, &ce) {
		return nil, &ParamError{Reason: "llm extraction " + ce.Reason}
	}
	if err != nil {
		return nil, err
	}
	s := &llmStrategy{client: client}

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

	s.chunkChars = or(cfg.LLMChunkChars, DefaultLLMChunkChars)
	s.maxChunks = or(cfg.LLMMaxChunks, DefaultLLMMaxChunks)
	s.concurrency = or(cfg.LLMConcurrency, DefaultLLMConcurrency)
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
	chunks := llm.Chunk(pageMarkdown(p), s.chunkChars, s.maxChunks)
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

const systemPrompt = `You extract information from web pages. Reply with a single JSON object and nothing else (no prose, no code fences): {"items": [...]}, where "items" lists, in page order, every item the instruction asks for that appears in the page content. If there is none, reply {"items": []}. Never invent content that is not in the page.`

// request asks for the items of one chunk: as a JSON schema when the
// request has one (the client falls back to json_object for servers that
// do not know json_schema; the schema is in the prompt anyway).
func (s *llmStrategy) request(pageURL, chunk string, i, n int) llm.Request {
	var u strings.Builder
	fmt.Fprintf(&u, "Instruction:\n%s\n\n", s.instruction)
	if s.schema != nil {
		fmt.Fprintf(&u, "Each item must be a JSON object matching this JSON schema:\n%s\n\n", s.schema)
	}
	llm.WritePage(&u, pageURL, chunk, i, n, "")
	r := llm.Request{
		Messages: []llm.Message{
			{Role: "system", Content: systemPrompt},
			{Role: "user", Content: u.String()},
		},
		ResponseFormat: llm.JSONObject(),
	}
	if s.schema != nil {
		r.ResponseFormat = llm.JSONSchema("extraction", map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"items": map[string]any{"type": "array", "items": s.schema}},
			"required":             []string{"items"},
			"additionalProperties": false,
		})
	}
	return r
}

func (s *llmStrategy) extractChunk(ctx context.Context, pageURL, chunk string, i, n int) ([]json.RawMessage, error) {
	text, err := s.client.CompleteJSON(ctx, s.request(pageURL, chunk, i, n))
	if err != nil {
		return nil, err
	}
	return items(json.RawMessage(text))
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

var (
	_ Strategy       = (*llmStrategy)(nil)
	_ fmt.Stringer   = (*llmStrategy)(nil)
	_ fmt.GoStringer = (*llmStrategy)(nil)
)

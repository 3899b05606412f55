package extract

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/trawlhq/trawl/cell/llm"
)

// Defaults of ModelConfig.
const (
	DefaultChunkTokens   = 6000
	DefaultOverlapTokens = 300
	DefaultMaxChunks     = 40
	DefaultConcurrency   = 4
)

// ModelConfig configures the model path.
type ModelConfig struct {
	// Client is the operator's model (cell/llm); required.
	Client *llm.Client
	// ChunkTokens is the size of one chunk of page Markdown, in
	// estimated tokens (llm.EstimateTokens); OverlapTokens of each chunk
	// repeat the end of the one before.
	ChunkTokens   int
	OverlapTokens int
	// MaxChunks bounds the calls of one page: the rest of a longer page
	// is not read.
	MaxChunks int
	// Concurrency bounds the chunk calls in flight for one request.
	Concurrency int
}

// Model extracts through a language model.
type Model struct {
	cfg ModelConfig
}

// NewModel returns the model path of cfg.
func NewModel(cfg ModelConfig) *Model {
	if cfg.ChunkTokens <= 0 {
		cfg.ChunkTokens = DefaultChunkTokens
	}
	if cfg.OverlapTokens == 0 {
		cfg.OverlapTokens = DefaultOverlapTokens
	}
	if cfg.MaxChunks <= 0 {
		cfg.MaxChunks = DefaultMaxChunks
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	return &Model{cfg: cfg}
}

// String keeps the client's key out of printouts.
func (m *Model) String() string { return "extract model " + m.cfg.Client.Provider() }

const modelSystem = `You extract data from web pages. Reply with one JSON object and nothing else (no prose, no code fences): {"data": <value>}, where <value> matches the JSON schema you are given. Use only what the page content says: a field the content does not show is null (an array with no item is []). Never invent or guess a value. Dates in ISO 8601 (YYYY-MM-DD), numbers as JSON numbers without currency signs or separators, URLs absolute.`

// Extract asks the model for plan's data, chunk by chunk, and merges the
// answers: objects field by field (the first chunk that has a field
// wins), arrays joined without duplicates. Every answer is validated; an
// invalid one gets one repair round, and what still fails is null.
func (m *Model) Extract(ctx context.Context, pg Page, plan *Plan) (*Result, error) {
	md := pg.Markdown
	if strings.TrimSpace(md) == "" {
		var base *url.URL
		if pg.URL != "" {
			base, _ = url.Parse(pg.URL)
		}
		md = readHTML(pg.HTML, base, false).text
	}
	chunks := llm.ChunkTokens(md, m.cfg.ChunkTokens, m.cfg.OverlapTokens, m.cfg.MaxChunks)
	if len(chunks) == 0 {
		chunks = []string{""}
	}
	wrapped := json.RawMessage(`{"type":"object","properties":{"data":` + string(plan.Schema.Raw) + `},"required":["data"]}`)
	results := make([]any, len(chunks))
	var mu sync.Mutex
	var steps []Step
	record := func(s Step) {
		mu.Lock()
		steps = append(steps, s)
		mu.Unlock()
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(m.cfg.Concurrency)
	for i, c := range chunks {
		g.Go(func() error {
			v, err := m.chunk(gctx, pg.URL, c, i, len(chunks), plan, wrapped, record)
			if err != nil {
				if len(chunks) > 1 {
					return fmt.Errorf("%w: chunk %d of %d: %w", ErrModel, i+1, len(chunks), err)
				}
				return fmt.Errorf("%w: %w", ErrModel, err)
			}
			results[i] = v
			return nil
		})
	}
	err := g.Wait()
	sortSteps(steps)
	if err != nil {
		return &Result{Steps: steps}, err
	}
	merged := results[0]
	for _, r := range results[1:] {
		merged = merge(merged, r)
	}
	return &Result{Data: plan.Schema.Validate(merged), Steps: steps}, nil
}

func sortSteps(s []Step) {
	// Chunk order, then the repair after its chunk.
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && stepKey(s[j]) < stepKey(s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func stepKey(s Step) string {
	var kind string
	var i, n int
	fmt.Sscanf(s.Name, "%s %d/%d", &kind, &i, &n)
	return fmt.Sprintf("%06d %s", i, kind)
}

func (m *Model) chunk(ctx context.Context, pageURL, chunk string, i, n int, plan *Plan, wrapped json.RawMessage, record func(Step)) (any, error) {
	var u strings.Builder
	if plan.Instruction != "" {
		fmt.Fprintf(&u, "Instruction:\n%s\n\n", plan.Instruction)
	}
	if plan.Inferred == "model" {
		u.WriteString("Choose the structure of data (an object, or an array of objects) from the instruction.\n\n")
	} else {
		fmt.Fprintf(&u, "JSON schema of data:\n%s\n\n", plan.Schema.Raw)
	}
	if plan.Example != nil {
		fmt.Fprintf(&u, "Example of the structure (not of the values):\n%s\n\n", truncateText(string(plan.Example), 4<<10))
	}
	llm.WritePage(&u, pageURL, chunk, i, n, "fill what this part shows")
	req := llm.Request{
		Messages: []llm.Message{
			{Role: "system", Content: modelSystem},
			{Role: "user", Content: u.String()},
		},
		Temperature:    0,
		ResponseFormat: llm.JSONSchema("extraction", wrapped),
	}
	ans, err := m.cfg.Client.JSON(ctx, req)
	record(Step{Name: fmt.Sprintf("chunk %d/%d", i+1, n), InTokens: ans.Usage.InTokens, OutTokens: ans.Usage.OutTokens})
	var v any
	var problem string
	switch {
	case err != nil && (errors.As(err, new(*llm.ProviderError)) || ctx.Err() != nil || !answered(err)):
		return nil, err // the provider failed: no answer to repair
	case err != nil:
		problem = err.Error()
	default:
		v = unwrap(ans.Text)
		if p := plan.Schema.Problem(v); p != "" {
			problem = "it does not match the schema: " + p
		}
	}
	if problem == "" {
		return v, nil
	}
	// One repair round.
	req.Messages = append(req.Messages,
		llm.Message{Role: "assistant", Content: truncateText(ans.Text, 16<<10)},
		llm.Message{Role: "user", Content: "Your answer cannot be used: " + truncateText(problem, 2000) + `. Reply again with only the JSON object {"data": ...} matching the schema, null for what the page does not show.`})
	req.ResponseFormat = llm.JSONObject()
	ans, err = m.cfg.Client.JSON(ctx, req)
	record(Step{Name: fmt.Sprintf("repair %d/%d", i+1, n), InTokens: ans.Usage.InTokens, OutTokens: ans.Usage.OutTokens})
	if err != nil {
		if v != nil {
			return v, nil // validation drops what is wrong
		}
		return nil, err
	}
	return unwrap(ans.Text), nil
}

// answered: the provider answered 2xx but the answer was unusable.
func answered(err error) bool {
	s := err.Error()
	return strings.Contains(s, "not JSON") || strings.Contains(s, "cut off") || strings.Contains(s, "no content") || strings.Contains(s, "no choices")
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// unwrap takes data out of {"data": ...}; an answer without the wrapper
// is the data itself.
func unwrap(text string) any {
	v, err := decodeAny(text)
	if err != nil {
		return nil
	}
	if m, ok := v.(map[string]any); ok {
		if d, ok := m["data"]; ok && len(m) == 1 {
			return d
		}
	}
	return v
}

func decodeAny(text string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	var v any
	err := dec.Decode(&v)
	return v, err
}

// merge joins b into a: objects field by field (a's non-null value wins,
// nested objects merged), arrays concatenated without duplicates.
func merge(a, b any) any {
	switch x := a.(type) {
	case nil:
		return b
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return a
		}
		for k, bv := range y {
			x[k] = merge(x[k], bv)
		}
		return x
	case []any:
		y, ok := b.([]any)
		if !ok {
			return a
		}
		seen := map[string]bool{}
		out := make([]any, 0, len(x)+len(y))
		for _, v := range append(x, y...) {
			k, _ := json.Marshal(v)
			key := string(bytes.ToLower(k))
			if !seen[key] {
				seen[key] = true
				out = append(out, v)
			}
		}
		return out
	}
	return a
}

package extract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/trawlhq/trawl/cell/llm"
	"github.com/trawlhq/trawl/internal/cssschema"
)

// Page is what the crawler has after rendering.
type Page struct {
	URL      string // final URL
	HTML     string // rendered DOM (full page, UTF-8)
	Markdown string // main content as Markdown (may be empty)
}

// Config is the server-wide setup, built once in cmd/ and shared by every
// strategy New returns. It is read, never modified.
type Config struct {
	// Getenv reads <VENDOR>_API_KEY and <VENDOR>_BASE_URL; nil = os.Getenv.
	Getenv func(string) string
	// BaseURLs maps a vendor ("openai", "groq", ...) to an OpenAI-compatible
	// base URL (".../v1"); it overrides the defaults and the environment.
	BaseURLs map[string]string
	// HTTPClient sends the llm requests; nil = a client whose timeout is
	// LLMTimeout.
	HTTPClient *http.Client
	// LLMTimeout bounds one chat-completions request (one attempt for one
	// chunk); 0 = DefaultLLMTimeout.
	LLMTimeout time.Duration
	// LLMChunkChars is the size of the Markdown chunks sent to the model;
	// 0 = DefaultLLMChunkChars.
	LLMChunkChars int
	// LLMMaxChunks caps the chunks sent for one page (longer pages are
	// truncated); 0 = DefaultLLMMaxChunks.
	LLMMaxChunks int
	// LLMConcurrency is how many chunks of one page are in flight at once;
	// 0 = DefaultLLMConcurrency.
	LLMConcurrency int
	// LLMRetries is how many times a 429 or 5xx answer is retried;
	// 0 = DefaultLLMRetries, negative = no retry.
	LLMRetries int
	// DefaultProvider is the operator's model ("<vendor>/<model>", trawl's
	// --llm-provider, the one /extract uses): the provider of an llm
	// extraction whose params name none. Empty: params must name one.
	DefaultProvider string

	// retryBase is the first backoff when the provider sends no
	// Retry-After; tests shorten it.
	retryBase time.Duration
}

// Defaults of Config.
const (
	DefaultLLMTimeout     = llm.DefaultTimeout
	DefaultLLMChunkChars  = 12000
	DefaultLLMMaxChunks   = 16
	DefaultLLMConcurrency = 4
	DefaultLLMRetries     = llm.DefaultRetries
)

// Strategy turns a rendered page into the text of extracted_content.
// Strategies are immutable and safe for concurrent use.
type Strategy interface {
	// Name is the extraction_config type: basic, json_css, cosine or llm.
	Name() string
	// Extract returns the JSON text to put in extracted_content.
	Extract(ctx context.Context, p Page) (string, error)
}

// Types lists the extraction types New accepts.
var Types = []string{"basic", "json_css", "cosine", "llm"}

// New validates the params of an extraction_config and returns its
// strategy. typ is extraction_config.type; params is extraction_config.params
// (nil, empty or null mean no params).
//
// Every error New returns is a *ParamError (IsBadParams reports true): the
// request is wrong or asks for something the server is not set up for, and
// the server answers 400 before running the task.
func New(cfg Config, typ string, params json.RawMessage) (Strategy, error) {
	p, err := parseParams(params)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "basic":
		return basicStrategy{}, nil
	case "json_css":
		return newJSONCSS(p)
	case "cosine":
		return newCosine(p)
	case "llm":
		return newLLM(cfg, p)
	case "":
		return nil, badParams("extraction_config.type", "is required (one of %s)", strings.Join(Types, ", "))
	default:
		return nil, badParams("extraction_config.type", "unknown type %q (want one of %s)", typ, strings.Join(Types, ", "))
	}
}

// ParamError is a problem with an extraction_config: a missing or invalid
// field (Field is its path, e.g. "params.schema.fields[2].selector"), or a
// provider the server has no key or base URL for. It is the json_css
// compiler's error type, so a schema's errors are params errors as they
// come.
type ParamError = cssschema.Error

// IsBadParams reports whether err (or an error it wraps) is a *ParamError.
func IsBadParams(err error) bool {
	var pe *ParamError
	return errors.As(err, &pe)
}

func badParams(field, format string, args ...any) *ParamError {
	return &ParamError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// params is a decoded params object; its getters name the field in their
// errors. Unknown keys are ignored: Crawl4AI clients send options this
// server does not implement (chunk_token_threshold, verbose, ...).
type params struct {
	prefix string
	m      map[string]json.RawMessage
}

func parseParams(raw json.RawMessage) (params, error) {
	p := params{prefix: "params.", m: map[string]json.RawMessage{}}
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return p, nil
	}
	if err := json.Unmarshal(raw, &p.m); err != nil {
		return p, badParams("params", "must be a JSON object")
	}
	return p, nil
}

func (p params) has(k string) bool {
	v, ok := p.m[k]
	return ok && strings.TrimSpace(string(v)) != "null"
}

func (p params) field(k string) string { return p.prefix + k }

func (p params) str(k string) (string, bool, error) {
	if !p.has(k) {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(p.m[k], &s); err != nil {
		return "", false, badParams(p.field(k), "must be a string")
	}
	return s, true, nil
}

func (p params) float(k string) (float64, bool, error) {
	if !p.has(k) {
		return 0, false, nil
	}
	var f float64
	if err := json.Unmarshal(p.m[k], &f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false, badParams(p.field(k), "must be a number")
	}
	return f, true, nil
}

// integer accepts integral numbers written as floats (10.0): Python
// clients produce them.
func (p params) integer(k string) (int, bool, error) {
	f, ok, err := p.float(k)
	if err != nil || !ok {
		if err != nil {
			err = badParams(p.field(k), "must be an integer")
		}
		return 0, ok, err
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<31 {
		return 0, false, badParams(p.field(k), "must be an integer")
	}
	return int(f), true, nil
}

// object returns an object-valued field. A string holding a JSON object is
// accepted too: some clients send a schema pre-serialized.
func (p params) object(k string) (json.RawMessage, bool, error) {
	if !p.has(k) {
		return nil, false, nil
	}
	raw := p.m[k]
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = json.RawMessage(s)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, false, badParams(p.field(k), "must be a JSON object")
	}
	return raw, true, nil
}

func (p params) sub(k string) (params, error) {
	raw, ok, err := p.object(k)
	if err != nil {
		return params{}, err
	}
	q := params{prefix: p.field(k) + ".", m: map[string]json.RawMessage{}}
	if ok {
		_ = json.Unmarshal(raw, &q.m) // object checked it
	}
	return q, nil
}

// block is an item of the basic and cosine outputs.
type block struct {
	Index   int      `json:"index"`
	Tags    []string `json:"tags"`
	Content string   `json:"content"`
}

// marshal encodes the output of a strategy, HTML not escaped
// (cssschema.Encode).
func marshal(v any) (string, error) {
	b, err := cssschema.Encode(v)
	if err != nil {
		return "", fmt.Errorf("encode extracted content: %w", err)
	}
	return string(b), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

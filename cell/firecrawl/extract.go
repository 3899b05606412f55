package firecrawl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Bounds of an extraction (POST /v2/extract).
const (
	// ExtractMaxURLs is Firecrawl's bound on urls ("at most 10 URLs while
	// in beta").
	ExtractMaxURLs = 10
	// ExtractMaxPages bounds the pages of one extraction, the pages a
	// wildcard URL (ending in /*) expands to included.
	ExtractMaxPages = 100
	// ExtractWildcardPages is how many pages a wildcard URL expands to
	// when the request names no limit.
	ExtractWildcardPages = 10
	// extractMaxPrompt is Firecrawl's bound on prompt and systemPrompt,
	// in characters.
	extractMaxPrompt = 10000
)

// ExtractRequest is the body of POST /v2/extract, as Firecrawl's v2
// schema and its SDKs (startExtract, extract) send it. Pointers tell an
// absent field from its zero; raw members are refused when set.
type ExtractRequest struct {
	URLs               []string        `json:"urls"`
	Prompt             string          `json:"prompt"`
	SystemPrompt       string          `json:"systemPrompt"`
	Schema             json.RawMessage `json:"schema"`
	Limit              *int            `json:"limit"`
	IgnoreSitemap      *bool           `json:"ignoreSitemap"`
	IncludeSubdomains  *bool           `json:"includeSubdomains"`
	AllowExternalLinks *bool           `json:"allowExternalLinks"`
	EnableWebSearch    *bool           `json:"enableWebSearch"`
	ShowSources        *bool           `json:"showSources"`
	ScrapeOptions      *ScrapeOptions  `json:"scrapeOptions"`
	IgnoreInvalidURLs  *bool           `json:"ignoreInvalidURLs"`
	Timeout            *int64          `json:"timeout"`
	URLTrace           *bool           `json:"urlTrace"`
	Agent              json.RawMessage `json:"agent"`
	Webhook            json.RawMessage `json:"webhook"`
	ThreatProtection   *struct {
		Mode string `json:"mode"`
	} `json:"threatProtection"`
	// Firecrawl's experimental switches.
	StreamSteps      *bool  `json:"__experimental_streamSteps"`
	LLMUsage         *bool  `json:"__experimental_llmUsage"`
	ShowSourcesX     *bool  `json:"__experimental_showSources"`
	CacheKey         string `json:"__experimental_cacheKey"`
	CacheMode        string `json:"__experimental_cacheMode"`
	ShowCostTracking *bool  `json:"__experimental_showCostTracking"`
}

// ExtractPlan is an extraction request checked and translated: the URLs
// to extract from and the wildcards to expand, what to extract, and the
// scrape options each page is fetched with.
type ExtractPlan struct {
	// URLs are the request's URLs in order, each with Wildcard set when
	// it ended in /* (then URL is what was before it).
	URLs []ExtractURL
	// Schema and Prompt are what to extract; SystemPrompt is the
	// caller's guidance to a model (only with the operator's model).
	Schema       json.RawMessage
	Prompt       string
	SystemPrompt string
	// Limit is the most pages one wildcard expands to.
	Limit int
	// Subdomains and Sitemap scope a wildcard's expansion
	// (includeSubdomains, ignoreSitemap).
	Subdomains, Sitemap bool
	// Sources: the answer lists where each value came from.
	Sources bool
	// Ignore: an invalid URL is left out and listed rather than refused
	// (ignoreInvalidURLs, default true).
	Ignore bool
	// Options are the scrape options of every page: the request's
	// scrapeOptions without their formats (an extraction reads the page
	// and its Markdown), onlyMainContent false unless they say otherwise
	// (Firecrawl's default for an extraction).
	Options ScrapeOptions
	// Plan is Options compiled.
	Plan *Plan
}

// ExtractURL is one of the request's URLs.
type ExtractURL struct {
	// Index is its place in urls, Raw the URL as sent.
	Index    int
	Raw      string
	URL      string
	Wildcard bool
}

// Compile checks the request and translates it; what trawl does not
// honour is refused with UNSUPPORTED_FEATURE (docs/firecrawl.md).
func (x *ExtractRequest) Compile() (*ExtractPlan, error) {
	switch {
	case len(x.URLs) == 0 && strings.TrimSpace(x.Prompt) == "":
		return nil, BadRequest("urls", "Either 'urls' or 'prompt' must be provided.")
	case len(x.URLs) == 0:
		return nil, Unsupported("urls", "an extraction without urls finds its pages by a web search, which trawl does not do; give the pages in urls (a URL ending in /* stands for its site)")
	case len(x.URLs) > ExtractMaxURLs:
		return nil, BadRequest("urls", fmt.Sprintf("Maximum of %d URLs allowed per request while in beta.", ExtractMaxURLs))
	case utf8.RuneCountInString(x.Prompt) > extractMaxPrompt:
		return nil, BadRequest("prompt", fmt.Sprintf("prompt is at most %d characters", extractMaxPrompt))
	case utf8.RuneCountInString(x.SystemPrompt) > extractMaxPrompt:
		return nil, BadRequest("systemPrompt", fmt.Sprintf("systemPrompt is at most %d characters", extractMaxPrompt))
	case x.Limit != nil && (*x.Limit < 1 || *x.Limit > ExtractMaxPages):
		return nil, BadRequest("limit", fmt.Sprintf("limit is 1 to %d pages", ExtractMaxPages))
	case x.Timeout != nil && *x.Timeout < 1:
		return nil, BadRequest("timeout", "timeout is a positive integer")
	}
	if !isSet(x.Schema) && strings.TrimSpace(x.Prompt) == "" {
		return nil, Unsupported("schema", "an extraction with neither schema nor prompt is not supported: trawl extracts what a schema or a prompt names")
	}
	if isSet(x.Schema) && bytes.TrimSpace(x.Schema)[0] != '{' {
		return nil, BadRequest("schema", "Invalid JSON schema.")
	}
	if err := x.unhonoured(); err != nil {
		return nil, err
	}
	p := &ExtractPlan{Schema: x.Schema, Prompt: strings.TrimSpace(x.Prompt), SystemPrompt: strings.TrimSpace(x.SystemPrompt),
		Limit: ExtractWildcardPages, Subdomains: true, Sitemap: true, Ignore: true}
	if !isSet(x.Schema) {
		p.Schema = nil
	}
	if x.Limit != nil {
		p.Limit = *x.Limit
	}
	if x.IncludeSubdomains != nil {
		p.Subdomains = *x.IncludeSubdomains
	}
	if x.IgnoreSitemap != nil {
		p.Sitemap = !*x.IgnoreSitemap
	}
	p.Sources = (x.ShowSources != nil && *x.ShowSources) || (x.ShowSourcesX != nil && *x.ShowSourcesX)
	if x.IgnoreInvalidURLs != nil {
		p.Ignore = *x.IgnoreInvalidURLs
	}
	for i, u := range x.URLs {
		eu := ExtractURL{Index: i, Raw: u, URL: strings.TrimSpace(u)}
		if base, ok := strings.CutSuffix(eu.URL, "/*"); ok {
			eu.URL, eu.Wildcard = base, true
		}
		p.URLs = append(p.URLs, eu)
	}
	if x.ScrapeOptions != nil {
		p.Options = *x.ScrapeOptions
	}
	if p.Options.OnlyMainContent == nil {
		f := false
		p.Options.OnlyMainContent = &f
	}
	// The formats of scrapeOptions have no effect: an extraction answers
	// data, not documents. Markdown is what a model reads.
	p.Options.Formats = []Format{{Type: "markdown"}}
	plan, err := p.Options.Compile("scrapeOptions.")
	if err != nil {
		return nil, err
	}
	p.Plan = plan
	return p, nil
}

// unhonoured refuses what an extraction would otherwise have to ignore.
func (x *ExtractRequest) unhonoured() error {
	on := func(b *bool) bool { return b != nil && *b }
	switch {
	case on(x.EnableWebSearch):
		return Unsupported("enableWebSearch", "web search is not supported: trawl extracts from the pages in urls only")
	case on(x.AllowExternalLinks):
		return Unsupported("allowExternalLinks", "following links to other sites is not supported: a wildcard URL (/*) expands to its own site's pages only")
	case isSet(x.Agent):
		return Unsupported("agent", "Firecrawl's agent (FIRE-1) is not supported")
	case isSet(x.Webhook):
		return Unsupported("webhook", "webhooks on an extraction are not supported yet; poll its status")
	case x.ThreatProtection != nil && x.ThreatProtection.Mode != "" && x.ThreatProtection.Mode != "off":
		return Unsupported("threatProtection.mode", "threat protection scans are not supported: trawl refuses private and non-http URLs only")
	case on(x.StreamSteps):
		return Unsupported("__experimental_streamSteps", "an extraction's steps are not reported")
	case on(x.LLMUsage):
		return Unsupported("__experimental_llmUsage", "llmUsage is not reported; tokensUsed is")
	case on(x.ShowCostTracking):
		return Unsupported("__experimental_showCostTracking", "cost tracking is not reported; the receipts are in GET /v1/billing/usage")
	case x.CacheKey != "":
		return Unsupported("__experimental_cacheKey", "Firecrawl's extraction cache is not supported")
	case x.CacheMode != "" && x.CacheMode != "direct":
		return Unsupported("__experimental_cacheMode", "Firecrawl's extraction cache is not supported")
	}
	return nil
}

// ExtractStarted is the answer to POST /v2/extract.
type ExtractStarted struct {
	Success bool   `json:"success"`
	ID      string `json:"id"`
	// URLTrace is always empty, as Firecrawl's start answer has it.
	URLTrace    []any    `json:"urlTrace"`
	InvalidURLs []string `json:"invalidURLs,omitempty"`
}

// Extraction states.
const (
	ExtractProcessing = "processing"
	ExtractCompleted  = "completed"
	ExtractFailed     = "failed"
	ExtractCancelled  = "cancelled"
)

// ExtractStatus is the answer to GET /v2/extract/{id}.
type ExtractStatus struct {
	Success bool   `json:"success"`
	Status  string `json:"status"`
	// Data is the merged extraction once completed; [] before, as
	// Firecrawl answers.
	Data      any    `json:"data"`
	Error     string `json:"error,omitempty"`
	Warning   string `json:"warning,omitempty"`
	ExpiresAt string `json:"expiresAt"`
	// TokensUsed is the model tokens the extraction was charged for.
	TokensUsed int `json:"tokensUsed,omitempty"`
	// CreditsUsed is the credits the gate charged for it.
	CreditsUsed float64             `json:"creditsUsed"`
	Sources     map[string][]string `json:"sources,omitempty"`
}

// ExtractPart is what one page of an extraction produced: the job's
// result line of its URL.
type ExtractPart struct {
	// URL is the page as the job holds it (the caller's, or a
	// wildcard's expansion).
	URL       string          `json:"url"`
	Data      json.RawMessage `json:"data"`
	InTokens  int             `json:"in_tokens,omitempty"`
	OutTokens int             `json:"out_tokens,omitempty"`
}

// MergeExtract merges the pages' data, in the order of the request's
// URLs, into Firecrawl's one data, and says which URLs each value came
// from. The rule (docs/firecrawl.md): objects merge member by member;
// arrays are concatenated, an element equal to an earlier one (as JSON)
// left out; any other value is the first non-empty one (null and "" are
// empty; false and 0 are values). A page without data adds nothing. One
// page's data is its own.
//
// Sources are keyed as Firecrawl keys them: a top-level member that is
// an array by "member[i]" for its ith element, any other member by its
// name, and the elements of an array at the top by "[i]"; each lists the
// URLs whose data holds that value (an element equal to it; for an
// object, any of its members).
func MergeExtract(parts []ExtractPart) (any, map[string][]string, error) {
	values := make([]any, len(parts))
	var data any
	for i, p := range parts {
		if !isSet(p.Data) {
			continue
		}
		// Decoded twice: the merge takes one copy apart, the sources
		// read the other.
		var v any
		if err := json.Unmarshal(p.Data, &v); err != nil {
			return nil, nil, fmt.Errorf("the data of %s: %w", p.URL, err)
		}
		json.Unmarshal(p.Data, &values[i])
		data = mergeValue(data, v)
	}
	sources := map[string][]string{}
	from := func(key string, holds func(v any) bool) {
		for i, p := range parts {
			if values[i] != nil && holds(values[i]) && !contains(sources[key], p.URL) {
				sources[key] = append(sources[key], p.URL)
			}
		}
	}
	switch d := data.(type) {
	case map[string]any:
		for k, v := range d {
			if arr, ok := v.([]any); ok {
				for i, el := range arr {
					from(fmt.Sprintf("%s[%d]", k, i), func(pv any) bool { return hasElement(member(pv, k), el) })
				}
				continue
			}
			if empty(v) {
				continue
			}
			_, obj := v.(map[string]any)
			from(k, func(pv any) bool {
				m := member(pv, k)
				if obj {
					return !empty(m)
				}
				return sameJSON(m, v)
			})
		}
	case []any:
		for i, el := range d {
			from(fmt.Sprintf("[%d]", i), func(pv any) bool { return hasElement(pv, el) })
		}
	}
	if data == nil {
		data = map[string]any{}
	}
	return data, sources, nil
}

// mergeValue merges b into a (MergeExtract's rule).
func mergeValue(a, b any) any {
	switch x := a.(type) {
	case map[string]any:
		if y, ok := b.(map[string]any); ok {
			for k, v := range y {
				x[k] = mergeValue(x[k], v)
			}
		}
		return x
	case []any:
		if y, ok := b.([]any); ok {
			for _, v := range y {
				if !hasElement(x, v) {
					x = append(x, v)
				}
			}
		}
		return x
	}
	if empty(a) {
		return b
	}
	return a
}

// empty: null, "", or an array or object with nothing in it.
func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return strings.TrimSpace(x) == ""
	case []any:
		return len(x) == 0
	case map[string]any:
		for _, m := range x {
			if !empty(m) {
				return false
			}
		}
		return true
	}
	return false
}

func member(v any, k string) any {
	if m, ok := v.(map[string]any); ok {
		return m[k]
	}
	return nil
}

func hasElement(arr, el any) bool {
	a, ok := arr.([]any)
	if !ok {
		return false
	}
	for _, v := range a {
		if sameJSON(v, el) {
			return true
		}
	}
	return false
}

// sameJSON compares two decoded JSON values as JSON (object members in
// any order).
func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

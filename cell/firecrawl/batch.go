package firecrawl

import (
	"encoding/json"
	"fmt"
)

// BatchRequest is the body of POST /v2/batch/scrape: the URLs, the scrape
// options at the top level (the SDKs spread them there), and the batch's
// own fields.
type BatchRequest struct {
	URLs []string `json:"urls"`
	ScrapeOptions
	BatchOptions
}

// BatchOptions are a batch's own fields.
type BatchOptions struct {
	// IgnoreInvalidURLs: an invalid URL is left out and listed in the
	// answer's invalidURLs rather than failing the request (default true,
	// as Firecrawl's v2).
	IgnoreInvalidURLs *bool `json:"ignoreInvalidURLs,omitempty"`
	// MaxConcurrency bounds the batch's fetches at once.
	MaxConcurrency *int `json:"maxConcurrency,omitempty"`
	// Webhook is read by ParseWebhook (the cell adds the account's
	// secret).
	Webhook           json.RawMessage `json:"webhook,omitempty"`
	ZeroDataRetention *bool           `json:"zeroDataRetention,omitempty"`
	AppendToID        *string         `json:"appendToId,omitempty"`
}

// UnmarshalJSON reads the three parts of the body apart, so a field of
// the wrong type is named as the client wrote it ("formats", not
// "ScrapeOptions.formats").
func (b *BatchRequest) UnmarshalJSON(data []byte) error {
	var u struct {
		URLs []string `json:"urls"`
	}
	if err := json.Unmarshal(data, &u); err != nil {
		return err
	}
	var so ScrapeOptions
	if err := json.Unmarshal(data, &so); err != nil {
		return err
	}
	var bo BatchOptions
	if err := json.Unmarshal(data, &bo); err != nil {
		return err
	}
	b.URLs, b.ScrapeOptions, b.BatchOptions = u.URLs, so, bo
	return nil
}

// Ignore reports whether invalid URLs are left out (ignoreInvalidURLs).
func (b *BatchRequest) Ignore() bool { return b.IgnoreInvalidURLs == nil || *b.IgnoreInvalidURLs }

// Compile checks the batch's own fields and its scrape options (see
// ScrapeOptions.Compile), and refuses what a batch does not honour:
// appendToId, zero data retention, headers (the job would keep them), and
// actions and the json and summary formats (billed at the browser's level
// or per model call, which a batch charged per URL before it runs cannot
// be; docs/firecrawl.md). maxURLs bounds urls.
func (b *BatchRequest) Compile(maxURLs int) (*Plan, error) {
	switch {
	case len(b.URLs) == 0 || len(b.URLs) > maxURLs:
		return nil, BadRequest("urls", fmt.Sprintf("urls must hold 1 to %d URLs (got %d)", maxURLs, len(b.URLs)))
	case b.MaxConcurrency != nil && *b.MaxConcurrency < 1:
		return nil, BadRequest("maxConcurrency", "maxConcurrency is a positive integer")
	case b.AppendToID != nil && *b.AppendToID != "":
		return nil, Unsupported("appendToId", "appending to another batch scrape is not supported; start a new one")
	case b.ZeroDataRetention != nil && *b.ZeroDataRetention:
		return nil, Unsupported("zeroDataRetention", "zero data retention is not supported: a batch's documents are kept until it expires (expiresAt)")
	case len(b.Headers) > 0:
		// A batch keeps its options in its job record until it expires:
		// not a caller's cookies and credentials.
		return nil, Unsupported("headers", "headers are not supported in a batch scrape (the batch would keep them until it expires); use POST /v2/scrape for each page")
	case len(b.Actions) > 0:
		// A batch is charged per URL at the light level before it runs;
		// actions take the browser's.
		return nil, Unsupported("actions", "actions are not supported in a batch scrape; use POST /v2/scrape for each page")
	}
	p, err := b.ScrapeOptions.Compile("")
	if err != nil {
		return nil, err
	}
	for i, f := range b.Formats {
		if f.Type == "json" || f.Type == "summary" {
			return nil, Unsupported(fmt.Sprintf("formats.%d", i), fmt.Sprintf("the %s format is not supported in a batch scrape yet; use POST /v2/scrape for each page", f.Type))
		}
	}
	return p, nil
}

func isSet(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// BatchStarted is the answer to POST /v2/batch/scrape.
type BatchStarted struct {
	Success bool   `json:"success"`
	ID      string `json:"id"`
	// URL is the batch's status, absolute.
	URL         string   `json:"url"`
	InvalidURLs []string `json:"invalidURLs,omitempty"`
}

// BatchStatus is the answer to GET /v2/batch/scrape/{id}: a page of the
// batch's documents, in the order they finished, and the absolute URL of
// the next page when there is more than one page's worth.
type BatchStatus struct {
	Success bool `json:"success"`
	// Status is scraping, completed, failed or cancelled.
	Status string `json:"status"`
	Total  int    `json:"total"`
	// Completed counts the pages scraped successfully.
	Completed   int               `json:"completed"`
	CreditsUsed float64           `json:"creditsUsed"`
	ExpiresAt   string            `json:"expiresAt"`
	Next        string            `json:"next,omitempty"`
	Data        []json.RawMessage `json:"data"`
	// Error says why a failed crawl stopped.
	Error string `json:"error,omitempty"`
}

// Batch states.
const (
	BatchScraping  = "scraping"
	BatchCompleted = "completed"
	BatchCancelled = "cancelled"
	BatchFailed    = "failed"
)

// BatchErrors is the answer to GET /v2/batch/scrape/{id}/errors.
type BatchErrors struct {
	Errors        []BatchError `json:"errors"`
	RobotsBlocked []string     `json:"robotsBlocked"`
}

// BatchError is a URL of a batch that failed.
type BatchError struct {
	ID        string `json:"id"`
	Timestamp string `json:"timestamp,omitempty"`
	URL       string `json:"url"`
	Code      string `json:"code,omitempty"`
	Error     string `json:"error"`
}

// ActiveCrawl is a crawl of GET /v2/crawl/active.
type ActiveCrawl struct {
	ID      string          `json:"id"`
	TeamID  string          `json:"teamId"`
	URL     string          `json:"url"`
	Options json.RawMessage `json:"options"`
}

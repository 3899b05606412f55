// Package scrape turns one URL into a scrape result: cache, fetch engine,
// content pipeline and archive, behind one call that /scrape, batches and jobs
// share.
package scrape

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/trawlhq/trawl/cell/content"
)

// Options are the per-URL fields of spec 2.1 that every scrape route accepts.
type Options struct {
	Format  string     `json:"format,omitempty"`
	Proxy   string     `json:"proxy,omitempty"`
	Country string     `json:"country,omitempty"`
	Parse   ParseField `json:"parse,omitzero"`
}

// Request is the body of POST /scrape.
type Request struct {
	URL string `json:"url"`
	Options
}

// Formats.
const (
	FormatBoth     = "both"
	FormatMarkdown = "md"
	FormatHTML     = "html"
)

// Normalize fills defaults and rejects values outside the spec. It does not
// look at URLs: a bad URL inside a batch or job is that URL's error, not the
// request's.
func (o *Options) Normalize() error {
	switch o.Format {
	case "":
		o.Format = FormatBoth
	case FormatBoth, FormatMarkdown, FormatHTML:
	default:
		return BadInput(fmt.Sprintf("format must be one of both, md, html (got %q)", o.Format))
	}
	switch o.Proxy {
	case "", "none":
		o.Proxy = "none"
	case "isp", "residential":
		// Proxy pools arrive with the browser engine; until a pool is
		// configured a request for one cannot be served as asked.
		return BadInput(fmt.Sprintf("no %s proxy pool is configured on this cell", o.Proxy))
	default:
		return BadInput(fmt.Sprintf("proxy must be one of none, isp, residential (got %q)", o.Proxy))
	}
	if o.Country != "" {
		c := strings.ToLower(o.Country)
		if len(c) != 2 || c[0] < 'a' || c[0] > 'z' || c[1] < 'a' || c[1] > 'z' {
			return BadInput(fmt.Sprintf("country must be a two-letter country code (got %q)", o.Country))
		}
		o.Country = c
	}
	return nil
}

// cacheKey identifies everything that shapes the result of a URL.
func (o *Options) cacheKey(url string) string {
	p := o.Parse
	return fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%t%t%t%t", url, o.Format, o.Proxy, o.Country,
		p.Links, p.Media, p.Metadata, p.Tables)
}

// ParseField is the `parse` field: true (everything), false, or an object of
// booleans links, media, metadata, tables.
type ParseField content.ParseOptions

func (p *ParseField) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch string(b) {
	case "true":
		*p = ParseField{Links: true, Media: true, Metadata: true, Tables: true}
		return nil
	case "false", "null":
		*p = ParseField{}
		return nil
	}
	if len(b) == 0 || b[0] != '{' {
		return errors.New("parse must be true, false or an object of booleans links, media, metadata, tables")
	}
	var obj struct {
		Links, Media, Metadata, Tables bool
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&obj); err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	*p = ParseField(obj)
	return nil
}

func (p ParseField) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Links    bool `json:"links"`
		Media    bool `json:"media"`
		Metadata bool `json:"metadata"`
		Tables   bool `json:"tables"`
	}(p))
}

// Error is a refusal or failure with its HTTP status and the JSON error code
// of the API ({"error": Code, "message": Message}).
type Error struct {
	Status  int
	Code    string
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// BadInput is a 400 for a request the caller must change.
func BadInput(msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "bad_input", Message: msg}
}

// AsError maps any error to an *Error: errors that are not already one are
// internal (500).
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error", Err: err}
}

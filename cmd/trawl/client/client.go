// Package client is the trawl command's side of a gate's public HTTP API:
// the same calls any customer makes, with the customer's key, and nothing
// the gate does not offer to every caller. The index crawler fetches its
// pages through it; the terminal client (issue 34) is built on it.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Client calls one gate with one key.
type Client struct {
	// URL is the gate's base URL ("http://127.0.0.1:8080").
	URL string
	// Key is the API key, sent as a bearer token.
	Key string
	// HTTP is the transport; nil: a client with a 130 s timeout (a
	// scrape through the browser may take two minutes, spec §4).
	HTTP *http.Client
}

// maxAnswer bounds what is read of one answer.
const maxAnswer = 64 << 20

// Error is an answer other than 2xx: the gate's status, code and message.
type Error struct {
	Status  int
	Code    string
	Message string
	// RetryAfter is the answer's Retry-After (a 429, a 503), 0 when none.
	RetryAfter time.Duration
	// Actions are a 402's suggested next steps ("topup", "checkout", …).
	Actions map[string]string
	// Body is the answer's body as it came (at most 64 KiB).
	Body []byte
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("%d %s", e.Status, e.Message)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// Response is a 2xx answer read whole: its headers and body.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Receipt is a billed answer's receipt headers (docs/api.md, "Receipts").
type Receipt struct {
	// Cost is x-svc-cost, the credits this call charged ("" when absent).
	Cost string
	// Balance is x-svc-balance, what the account can still spend.
	Balance string
}

// ReceiptOf reads the receipt headers (or trailers) of h.
func ReceiptOf(h http.Header) Receipt {
	return Receipt{Cost: h.Get("X-Svc-Cost"), Balance: h.Get("X-Svc-Balance")}
}

// Do sends a JSON body (nil: none) to method path and decodes a 2xx answer
// into out (nil: discarded). Any other answer is an *Error.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	r, err := c.Call(ctx, method, path, body)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(r.Body, out)
}

// Call sends a JSON body (nil: none) to method path and reads a 2xx answer
// whole. Any other answer is an *Error.
func (c *Client) Call(ctx context.Context, method, path string, body any) (*Response, error) {
	resp, err := c.Open(ctx, method, path, body, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// Open sends a JSON body (nil: none) to method path with the extra headers
// given and returns a 2xx answer unread, for streams (a batch's NDJSON):
// the caller closes its body. Any other answer is an *Error.
func (c *Client) Open(ctx context.Context, method, path string, body any, header http.Header) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.URL, "/")+path, rd)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+c.Key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 130 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, err
	}
	return nil, ErrorOf(resp.StatusCode, resp.Header, b)
}

// ErrorOf reads an error answer: trawl's {"error": code, "message"} or
// Firecrawl's {"success": false, "error": message, "code"}.
func ErrorOf(status int, h http.Header, b []byte) *Error {
	e := &Error{Status: status, Body: b}
	var eb struct {
		Error, Message, Code string
		Actions              map[string]string
		RetryAfterS          int `json:"retry_after_s"`
	}
	switch {
	case json.Unmarshal(b, &eb) == nil && eb.Code != "" && eb.Message == "":
		e.Code, e.Message = eb.Code, eb.Error
	case eb.Error != "":
		e.Code, e.Message = eb.Error, eb.Message
	default:
		e.Message = string(bytes.TrimSpace(b[:min(len(b), 300)]))
	}
	e.Actions = eb.Actions
	if s, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After"))); err == nil && s >= 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	} else if eb.RetryAfterS > 0 {
		e.RetryAfter = time.Duration(eb.RetryAfterS) * time.Second
	}
	return e
}

// Link is a link of a scraped page.
type Link struct {
	Href string `json:"href"`
	Text string `json:"text"`
}

// Scraped is the part of a scrape's answer the client reads.
type Scraped struct {
	URL         string `json:"url"`
	FinalURL    string `json:"final_url"`
	Status      int    `json:"status"`
	Title       string `json:"title"`
	Markdown    string `json:"markdown"`
	HTML        string `json:"html"`
	ContentHash string `json:"content_hash"`
	Parsed      struct {
		Links []Link `json:"links"`
	} `json:"parsed"`
}

// ScrapeRequest is a POST /scrape body (the fields the client sets).
type ScrapeRequest struct {
	URL    string          `json:"url"`
	Format string          `json:"format,omitempty"`
	Parse  map[string]bool `json:"parse,omitempty"`
}

// Scrape scrapes one page (POST /scrape).
func (c *Client) Scrape(ctx context.Context, r ScrapeRequest) (*Scraped, error) {
	var s Scraped
	if err := c.Do(ctx, http.MethodPost, "/scrape", r, &s); err != nil {
		return nil, fmt.Errorf("scrape %s: %w", r.URL, err)
	}
	return &s, nil
}

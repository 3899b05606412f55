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
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("%d %s", e.Status, e.Message)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// Do sends a JSON body (nil: none) to method path and decodes a 2xx answer
// into out (nil: discarded). Any other answer is an *Error.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.URL, "/")+path, rd)
	if err != nil {
		return err
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
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		e := &Error{Status: resp.StatusCode}
		var eb struct{ Error, Message string }
		if json.Unmarshal(b, &eb) == nil && eb.Error != "" {
			e.Code, e.Message = eb.Error, eb.Message
		} else {
			e.Message = string(bytes.TrimSpace(b[:min(len(b), 300)]))
		}
		return e
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
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

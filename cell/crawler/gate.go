package crawler

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

// GateFetch fetches pages as scrapes through a region's gate with key
// (POST /scrape with parse.links): the cell that serves each one archives
// it, and so indexes it. client nil: a client with a 130 s timeout.
func GateFetch(gateURL, key string, client *http.Client) func(ctx context.Context, u string) (*Page, error) {
	if client == nil {
		client = &http.Client{Timeout: 130 * time.Second}
	}
	endpoint := strings.TrimSuffix(gateURL, "/") + "/scrape"
	return func(ctx context.Context, u string) (*Page, error) {
		body, _ := json.Marshal(map[string]any{"url": u, "parse": map[string]bool{"links": true}, "format": "md"})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("scrape %s: %d %s", u, resp.StatusCode, bytes.TrimSpace(b[:min(len(b), 300)]))
		}
		var r struct {
			FinalURL    string `json:"final_url"`
			ContentHash string `json:"content_hash"`
			Parsed      struct {
				Links []struct{ Href, Text string } `json:"links"`
			} `json:"parsed"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("scrape %s: %w", u, err)
		}
		p := &Page{URL: r.FinalURL, Hash: r.ContentHash}
		for _, l := range r.Parsed.Links {
			p.Links = append(p.Links, Link{Href: l.Href, Text: l.Text})
		}
		return p, nil
	}
}

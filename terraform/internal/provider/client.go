package provider

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

// client calls a gate's operator API (/operator/v1/, docs/operations.md).
type client struct {
	endpoint string // http://host:port, no trailing slash
	key      string
	http     *http.Client
}

// apiError is an answer that was not 2xx: the API's {"error","message"}.
type apiError struct {
	Status  int
	Code    string `json:"error"`
	Message string `json:"message"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("trawl operator API: %d %s: %s", e.Status, e.Code, e.Message)
}

func isStatus(err error, status int) bool {
	e, ok := err.(*apiError)
	return ok && e.Status == status
}

// do sends method path with body (JSON-encoded unless nil) and decodes a
// 2xx answer into out (unless nil).
func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.endpoint+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20)) // a recipe with its module
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		e := &apiError{Status: resp.StatusCode}
		if json.Unmarshal(b, e) != nil || e.Code == "" {
			e.Code, e.Message = "http_error", strings.TrimSpace(string(b))
		}
		return e
	}
	if out == nil || len(b) == 0 {
		return nil
	}
	return json.Unmarshal(b, out)
}

func newClient(endpoint, key string) *client {
	return &client{endpoint: strings.TrimRight(endpoint, "/"), key: key, http: &http.Client{Timeout: 60 * time.Second}}
}

// The operator API's bodies the provider reads.

type cellInfo struct {
	Name    string `json:"name"`
	API     string `json:"api"`
	Live    bool   `json:"live"`
	Drained bool   `json:"drained"`
}

type cellList struct {
	Region string     `json:"region"`
	Cells  []cellInfo `json:"cells"`
}

type apiKey struct {
	ID        string    `json:"id"`
	Account   string    `json:"account"`
	Name      string    `json:"name"`
	Prefix    string    `json:"prefix"`
	Role      string    `json:"role"`
	Kind      string    `json:"kind"`
	CreatedAt time.Time `json:"created_at"`
	Revoked   bool      `json:"revoked"`
	Key       string    `json:"key"`
}

// priceTable keeps the table as generic JSON: the provider changes the
// fields it manages and sends every other one back as it came.
type priceTable struct {
	Version uint64         `json:"version"`
	Table   map[string]any `json:"table"`
}

type plan struct {
	RatePerMinute  int64  `json:"rate_per_minute"`
	Concurrency    int64  `json:"concurrency"`
	Keys           int64  `json:"keys"`
	MonthlyCap     string `json:"monthly_cap"`
	MonthlyCredits string `json:"monthly_credits"`
}

type plans struct {
	Version uint64          `json:"version"`
	Plans   map[string]plan `json:"plans"`
}

// updatePrices reads the table, lets change edit it and writes it back
// with the version read; a concurrent change (409) is read again, up to
// five times.
func (c *client) updatePrices(ctx context.Context, change func(t map[string]any) error) error {
	var err error
	for range 5 {
		var pt priceTable
		if err = c.do(ctx, "GET", "/operator/v1/prices", nil, &pt); err != nil {
			return err
		}
		if err = change(pt.Table); err != nil {
			return err
		}
		err = c.do(ctx, "PUT", "/operator/v1/prices", pt, nil)
		if !isStatus(err, http.StatusConflict) {
			return err
		}
	}
	return err
}

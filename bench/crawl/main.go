// Command crawl measures Firecrawl's site crawl (POST /v2/crawl) beside
// the same pages as a job (POST /v2/batch/scrape, a held job the gate
// charges and releases), through a gate (`make bench`, part "crawl"):
//
//	crawl -gate URL -key KEY -start URL -limit N -urls-out FILE
//	crawl -gate URL -key KEY -urls FILE
//
// The first form crawls from start until the crawl completes (or reaches
// limit pages), timing from the POST to the status saying completed, and
// writes the URLs it scraped to urls-out. The second submits those URLs
// as one batch scrape to another, fresh trawl (so neither side finds the
// other's pages in its cache) and times it the same way. Each prints one
// JSON line: pages, seconds, pages/s. The crawl's extra work is
// discovery: reading each page's links, checking them against its scope
// and the job's set of seen URLs, robots.txt once per host.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	gate := flag.String("gate", "", "the gate's base URL")
	key := flag.String("key", "", "an API key")
	start := flag.String("start", "", "crawl: the start URL")
	limit := flag.Int("limit", 1000, "crawl: the most pages")
	out := flag.String("urls-out", "", "crawl: write the URLs crawled here")
	urls := flag.String("urls", "", "job: the file of URLs to scrape as one batch")
	flag.Parse()
	c := &client{gate: *gate, key: *key}
	var err error
	if *urls != "" {
		err = c.job(*urls)
	} else {
		err = c.crawl(*start, *limit, *out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/crawl:", err)
		os.Exit(1)
	}
}

type client struct{ gate, key string }

func (c *client) call(method, path string, body any, v any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.gate+path, rd)
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s %s: %d %.300s", method, path, resp.StatusCode, b)
	}
	return json.Unmarshal(b, v)
}

type status struct {
	Status    string `json:"status"`
	Total     int    `json:"total"`
	Completed int    `json:"completed"`
	Next      string `json:"next"`
	Data      []struct {
		Metadata struct {
			SourceURL string `json:"sourceURL"`
		} `json:"metadata"`
	} `json:"data"`
}

// wait polls path until the job ends, every 200 ms, asking each time only
// for the documents it has not seen (?skip=), so the polls cost both sides
// alike whatever their length; it returns the job's end status and the
// URLs of its documents.
func (c *client) wait(path string) (string, []string, error) {
	var got []string
	for {
		var s status
		if err := c.call("GET", fmt.Sprintf("%s?skip=%d", path, len(got)), nil, &s); err != nil {
			return "", nil, err
		}
		for _, d := range s.Data {
			got = append(got, d.Metadata.SourceURL)
		}
		switch {
		case s.Next != "":
			continue // more documents are waiting already
		case s.Status != "scraping":
			return s.Status, got, nil
		}
		time.Sleep(200 * time.Millisecond) // a client's poll interval, not a readiness wait
	}
}

func (c *client) crawl(start string, limit int, out string) error {
	t0 := time.Now()
	var r struct {
		ID string `json:"id"`
	}
	if err := c.call("POST", "/v2/crawl", map[string]any{"url": start, "limit": limit, "sitemap": "skip",
		"scrapeOptions": map[string]any{"formats": []string{"markdown"}}}, &r); err != nil {
		return err
	}
	st, got, err := c.wait("/v2/crawl/" + r.ID)
	secs := time.Since(t0).Seconds()
	if err != nil {
		return err
	}
	if st != "completed" || len(got) == 0 {
		return fmt.Errorf("crawl %s ended %s with %d pages", r.ID, st, len(got))
	}
	if err := os.WriteFile(out, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	return report("crawl", len(got), secs)
}

func (c *client) job(file string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	urls := strings.Fields(string(raw))
	if len(urls) == 0 {
		return errors.New("no URLs")
	}
	t0 := time.Now()
	var r struct {
		ID string `json:"id"`
	}
	if err := c.call("POST", "/v2/batch/scrape", map[string]any{"urls": urls, "formats": []string{"markdown"}}, &r); err != nil {
		return err
	}
	st, got, err := c.wait("/v2/batch/scrape/" + r.ID)
	secs := time.Since(t0).Seconds()
	if err != nil {
		return err
	}
	if st != "completed" {
		return fmt.Errorf("batch %s ended %s", r.ID, st)
	}
	return report("job", len(got), secs)
}

func report(side string, pages int, secs float64) error {
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"side": side, "pages": pages, "seconds": secs, "pages_per_s": float64(pages) / secs})
}

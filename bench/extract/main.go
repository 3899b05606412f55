// Command extract measures POST /extract and Firecrawl's POST /v2/scrape
// beside POST /scrape of the same cached pages, through a gate, one
// request at a time (`make bench`, part "extract"):
//
//	extract -gate URL -key KEY -urls FILE [-pages N] [-rounds N]
//
// It first scrapes each page once (the cell caches and archives it) and
// extracts it once, checking that the extract was served from that cache
// (usage.cache "hit") and filled the schema's title. Then, in every round,
// it asks for each page both ways back to back (the order alternating by
// round), and reports p50/p99 of each side and the ratio of the p50s as
// one JSON line on stdout. The extract is the deterministic one: the
// dev's cell runs no model. The /v2/scrape side is the SDKs' default call
// ({"url"}: Markdown, maxAge two days) of a page a v2 call fetched before,
// a hit of the scrape cache (checked: cacheState "hit"): the compatibility
// layer's cost is decoding the cached result and shaping it.
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
	"slices"
	"strings"
	"time"

	"github.com/trawlhq/trawl/bench/measure"
)

// The schema: what a reader of a documentation page asks for — its
// title, its headings' sections as records (a list of objects, so the
// repeated-blocks reader runs too), and a date if the page shows one.
const schema = `{"type":"object","properties":{"title":{"type":"string"},"date":{"type":"string","format":"date"},"sections":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"url":{"type":"string","format":"uri"}}}}}}`

func main() {
	gate := flag.String("gate", "", "the gate's base URL")
	key := flag.String("key", "", "an API key")
	urls := flag.String("urls", "", "file of page URLs, one a line")
	pages := flag.Int("pages", 50, "pages to use (the first N of -urls)")
	rounds := flag.Int("rounds", 5, "rounds over the pages")
	flag.Parse()
	if err := run(*gate, *key, *urls, *pages, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "bench/extract:", err)
		os.Exit(1)
	}
}

type sample struct{ scrape, extract, v2 []float64 }

func run(gate, key, urlsFile string, pages, rounds int) error {
	raw, err := os.ReadFile(urlsFile)
	if err != nil {
		return err
	}
	list := strings.Fields(string(raw))
	if len(list) > pages {
		list = list[:pages]
	}
	if len(list) == 0 {
		return errors.New("no URLs")
	}
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	post := func(path, body string) (time.Duration, []byte, error) {
		req, _ := http.NewRequest("POST", gate+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("%s: %d %.300s", path, resp.StatusCode, b)
		}
		return d, b, err
	}
	scrapeBody := func(u string) string { return `{"url":` + quote(u) + `}` }
	extractBody := func(u string) string { return `{"url":` + quote(u) + `,"schema":` + schema + `}` }

	filled := 0
	for _, u := range list {
		if _, _, err := post("/scrape", scrapeBody(u)); err != nil {
			return fmt.Errorf("warm %s: %w", u, err)
		}
		_, b, err := post("/extract", extractBody(u))
		if err != nil {
			return fmt.Errorf("warm extract %s: %w", u, err)
		}
		var a struct {
			Usage struct {
				Cache string `json:"cache"`
			} `json:"usage"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(b, &a); err != nil || a.Usage.Cache != "hit" {
			return fmt.Errorf("extract of %s is not a cache hit: %.300s", u, b)
		}
		if t, _ := a.Data["title"].(string); t != "" {
			filled++
		}
		// The SDKs' first call of a page fetches it (maxAge 0 here: the
		// warm scrape above filled the archive, which would serve it);
		// the calls after it are what is measured.
		if _, _, err := post("/v2/scrape", `{"url":`+quote(u)+`,"maxAge":0}`); err != nil {
			return fmt.Errorf("warm v2 %s: %w", u, err)
		}
		_, b, err = post("/v2/scrape", scrapeBody(u))
		if err != nil {
			return fmt.Errorf("warm v2 %s: %w", u, err)
		}
		var v struct {
			Data struct {
				Markdown string         `json:"markdown"`
				Metadata map[string]any `json:"metadata"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &v); err != nil || v.Data.Metadata["cacheState"] != "hit" || v.Data.Markdown == "" {
			return fmt.Errorf("v2 scrape of %s is not from the archive: %.300s", u, b)
		}
	}
	var s sample
	for r := range rounds {
		for _, u := range list {
			sides := []struct {
				path, body string
				into       *[]float64
			}{{"/scrape", scrapeBody(u), &s.scrape}, {"/extract", extractBody(u), &s.extract}, {"/v2/scrape", scrapeBody(u), &s.v2}}
			for i := range sides {
				side := sides[(i+r)%len(sides)] // each side first in turn
				d, _, err := post(side.path, side.body)
				if err != nil {
					return err
				}
				*side.into = append(*side.into, ms(d))
			}
		}
	}
	slices.Sort(s.scrape)
	slices.Sort(s.extract)
	slices.Sort(s.v2)
	out := map[string]any{
		"pages": len(list), "rounds": rounds, "title_filled": filled,
		"scrape":  map[string]any{"n": len(s.scrape), "p50_ms": round(measure.Percentile(s.scrape, 50)), "p99_ms": round(measure.Percentile(s.scrape, 99))},
		"extract": map[string]any{"n": len(s.extract), "p50_ms": round(measure.Percentile(s.extract, 50)), "p99_ms": round(measure.Percentile(s.extract, 99))},
		"v2":      map[string]any{"n": len(s.v2), "p50_ms": round(measure.Percentile(s.v2, 50)), "p99_ms": round(measure.Percentile(s.v2, 99))},
	}
	var buf bytes.Buffer
	json.NewEncoder(&buf).Encode(out)
	os.Stdout.Write(buf.Bytes())
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func round(x float64) float64 { return float64(int(x*100+0.5)) / 100 }

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

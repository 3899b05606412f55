package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/trawlhq/trawl/cell/crawler"
)

// runIndex is "trawl index crawl": the operator's index crawler. Each page
// is a scrape through the region's gate (billed to the operator's key),
// which a cell archives and so indexes; the frontier is in DATA/frontier.
func runIndex(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "crawl" {
		fmt.Fprint(stderr, "usage: trawl index crawl [flags] SEED_OR_SITEMAP...\n")
		return flag.ErrHelp
	}
	fs := flag.NewFlagSet("index crawl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	gateURL := fs.String("gate", "http://127.0.0.1:8080", "the region's gate")
	key := fs.String("key", os.Getenv("TRAWL_API_KEY"), "the operator's API key (default $TRAWL_API_KEY)")
	data := fs.String("data", "./data", "data directory (the frontier lives in DATA/frontier and survives restarts)")
	depth := fs.Int("depth", 3, "links followed from a seed")
	maxPages := fs.Int("max-pages", 0, "stop after this many pages (0: until the frontier is empty)")
	delay := fs.Duration("delay", time.Second, "least time between two fetches of one host")
	workers := fs.Int("workers", 4, "hosts fetched at once")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *key == "" {
		return errors.New("index crawl: no API key (--key or $TRAWL_API_KEY)")
	}
	logger, err := newLogger(stderr, *logLevel)
	if err != nil {
		return err
	}
	fetch := crawler.GateFetch(*gateURL, *key, nil)
	c, err := crawler.Open(filepath.Join(*data, "frontier"), crawler.Config{
		Fetch: fetch, MaxDepth: *depth, MaxPages: *maxPages, Delay: *delay, Workers: *workers, Logger: logger,
	})
	if err != nil {
		return err
	}
	defer c.Close()
	n, err := c.Seed(ctx, fs.Args()...)
	if err != nil {
		return err
	}
	start := time.Now()
	st, err := c.Run(ctx)
	fmt.Fprintf(stdout, "seeds queued %d; fetched %d, failed %d, refused by robots.txt %d, left in the frontier %d; %v\n",
		n, st.Fetched, st.Failed, st.Refused, st.Queued, time.Since(start).Round(time.Millisecond))
	if errors.Is(err, context.Canceled) {
		return nil // stopped: the frontier resumes next run
	}
	return err
}

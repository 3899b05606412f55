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

	"github.com/trawlhq/trawl/cmd/trawl/client"
	"github.com/trawlhq/trawl/internal/crawler"
)

// runIndex is "trawl index crawl": the operator's index crawler. Each page
// is a scrape through the region's gate (billed to the operator's key),
// which a cell archives and so indexes; the frontier is in DATA/frontier.
func runIndex(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "crawl" {
		fmt.Fprint(stderr, "usage: trawl index crawl [flags] [SEED_OR_SITEMAP...]\n")
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
	recrawl := fs.Bool("recrawl", false, "queue again the pages due for a revisit (each is revisited about as often as it was seen to change: --revisit-* bounds)")
	revInitial := fs.Duration("revisit-initial", crawler.DefaultRevisitInitial, "a page's first revisit interval")
	revMin := fs.Duration("revisit-min", crawler.DefaultRevisitMin, "the shortest revisit interval (a page that changes at every visit)")
	revMax := fs.Duration("revisit-max", crawler.DefaultRevisitMax, "the longest revisit interval (a page that never changes)")
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
	gc := &client.Client{URL: *gateURL, Key: *key}
	c, err := crawler.Open(filepath.Join(*data, "frontier"), crawler.Config{
		Fetch: gc.CrawlerFetch, MaxDepth: *depth, MaxPages: *maxPages, Delay: *delay, Workers: *workers, Logger: logger,
		Revisit: crawler.Revisit{Initial: *revInitial, Min: *revMin, Max: *revMax},
	})
	if err != nil {
		return err
	}
	defer c.Close()
	n, err := c.Seed(ctx, fs.Args()...)
	if err != nil {
		return err
	}
	if *recrawl {
		due, err := c.QueueDue(time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "pages due for a revisit queued %d\n", due)
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

package client

import (
	"context"

	"github.com/trawlhq/trawl/internal/crawler"
)

// CrawlerFetch fetches the index crawler's pages as scrapes with their
// links (POST /scrape with parse.links): the cell that serves each one
// archives it, and so indexes it.
func (c *Client) CrawlerFetch(ctx context.Context, u string) (*crawler.Page, error) {
	s, err := c.Scrape(ctx, ScrapeRequest{URL: u, Format: "md", Parse: map[string]bool{"links": true}})
	if err != nil {
		return nil, err
	}
	p := &crawler.Page{URL: s.FinalURL, Hash: s.ContentHash}
	for _, l := range s.Parsed.Links {
		p.Links = append(p.Links, crawler.Link{Href: l.Href, Text: l.Text})
	}
	return p, nil
}

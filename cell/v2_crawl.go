package cell

import "net/http"

// v2CrawlHandlers are the handlers of Firecrawl's v2 crawl routes
// (docs/firecrawl.md).
func (c *Cell) v2CrawlHandlers() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{}
}

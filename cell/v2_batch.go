package cell

import "net/http"

// v2BatchHandlers are the handlers of Firecrawl's v2 batch routes
// (docs/firecrawl.md).
func (c *Cell) v2BatchHandlers() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{}
}

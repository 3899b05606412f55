package cell

import "net/http"

// v2MapHandlers are the handlers of Firecrawl's v2 map routes
// (docs/firecrawl.md).
func (c *Cell) v2MapHandlers() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{}
}

// Package firecrawl is trawl's Firecrawl v2 compatibility layer on the
// cell: the request and answer shapes of Firecrawl's v2 API (as its SDKs
// send and read them), their translation to trawl's own scrape options,
// and the Firecrawl error envelope {success: false, error, code, details}.
// It holds no engine of its own: the cell's handlers (cell/v2.go) run the
// scrape service, the extractor and the site mapper (cell/sitemap) with
// what this package decodes, and shape their results with it.
//
// What is honoured, what is refused with a documented error, and why, is
// in docs/firecrawl.md. The rule: a field trawl cannot honour answers an
// error, never a silently different result; keys trawl does not know
// (the SDKs send origin, integration, …) are accepted and ignored.
package firecrawl

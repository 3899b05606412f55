// Package sitemap is the engine of the cell's POST /v2/map: the URLs of a
// site, from its sitemaps and its links, as Firecrawl's map returns them.
//
// The package never dials: Map fetches through a Fetcher, the cell's
// SSRF-guarded engine in production and a loopback server in tests.
//
// # Sources
//
// Sitemaps (unless Request.Sitemap is "skip"): the Sitemap lines of the
// host's robots.txt or, when it names none, /sitemap.xml and
// /sitemap_index.xml. Sitemap index files are followed (Bounds.MaxDepth
// levels, Bounds.MaxSitemaps documents in all); a document may be
// gzipped (recognised by its magic bytes, whatever its name or type), XML
// (<urlset>, <sitemapindex>, and the RSS 2.0 and Atom feeds the
// sitemaps.org protocol accepts) read with a streaming xml.Decoder, or
// plain text with one URL a line. A missing or malformed document is
// skipped, not fatal: it keeps the URLs read before the fault. A sitemap
// document may be on another host (robots.txt may name one elsewhere, an
// index may point to a CDN); the URLs it lists are kept only when they
// are in scope.
//
// Links (unless Request.Sitemap is "only"): the <a href> of the start page,
// resolved against its <base> or its URL, with their anchor text as the
// link's Title; the start URL takes the page's own <title> and meta
// description. When the sitemaps gave no URL (a site without one, or mode
// "skip"), Map goes one level further: the links of up to
// Bounds.MaxPages-1 in-scope pages linked from the start page (fetched
// Bounds.Concurrency at a time), each of which also gets its own title and
// description. A site with a sitemap costs one page fetch.
//
// # Scope and normal form
//
// A URL is kept when its host is the start URL's host (a leading "www." is
// ignored on both sides, as Firecrawl does) or, with IncludeSubdomains,
// any host under the start host's registrable domain (publicsuffix: the
// subdomains of a.example.com's example.com, but never another user's
// site under a public suffix such as github.io). The port must match too.
// Like Firecrawl's default filterByPath, when the start URL has a path
// other than "/", only URLs under that path are kept ("/docs" keeps
// "/docs/..." and "/docs-old"; "/docs/index.html" keeps "/docs/..."):
// Request.AnyPath turns this off.
//
// URLs are normalised: scheme and host lower-case, default port, fragment
// and user info dropped, the root path written without its slash
// ("https://example.com", as Firecrawl writes it) and, with
// IgnoreQueryParameters, the query dropped; duplicates are removed after
// normalisation, the first occurrence keeping its place.
//
// # Order and search
//
// Without a search, links come in discovery order: the start URL first,
// then the sitemaps' URLs in document order, then the pages' links.
//
// With a search, every link is scored and links are sorted by score; like
// Firecrawl, links that match no term are still returned, after every link
// that matches one, in discovery order (Firecrawl ranks with a cosine
// similarity and keeps the zero-score links at the end). The search and
// each link's fields are split into lower-case terms: runs of letters and
// digits, also split at camel-case boundaries ("getStarted" is "get
// started"), so a path splits on / - _ . and case changes. A link's fields
// are its URL (the path and query, percent-decoded, and the labels of its
// host left of the registrable domain other than "www"), its title and
// its description. A search term scores in a field 1 when the field has
// it as a term; when a term of the field contains it ("table" in
// "createtable") or begins it ("tutorial" for "tutorials"), the shorter
// having at least 3 letters, half the share of the longer the shorter
// covers ("table" in "createtable": 0.5 × 5/11); times the field's
// weight: URL 3, title 2, description 1. The term's score is its
// best field; a link's score is the sum over the distinct search terms.
// Links sort by the number of terms matched, then score, then fewer URL
// terms (a section's page before its children), then discovery order.
// Limit is applied after ranking.
//
// # Bounds
//
// A body is read to Bounds.MaxBodyBytes after decompression (50 MiB, the
// protocol's limit) and Bounds.MaxSitemapURLs entries (50,000); all
// documents together to Bounds.MaxTotalBytes. Map keeps at most
// Bounds.MaxCandidates distinct URLs before ranking and, without a search,
// stops reading sitemaps once it has Limit. Result.Truncated says a bound
// cut the discovery short. Time is the caller's: Map stops when ctx is
// done and returns an error wrapping ctx.Err().
package sitemap

package sitemap

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
)

// Fetcher gets one URL with GET, following redirects. status is the
// site's HTTP status (a 404 or 500 is an answer, not an error); err is for
// a fetch that got no answer (DNS, connection, TLS, timeout, a body over
// the Fetcher's own limit). contentType is the Content-Type header or
// just its media type. body is the content after Content-Encoding is
// undone (a .gz file is a gzip body, and Map unzips it); it may have been
// transcoded to UTF-8 already: a body that is valid UTF-8 is read as
// UTF-8 whatever it declares. The Fetcher should stop reading a body past
// Bounds.MaxBodyBytes; Map reads no further than that in any case. Map
// calls it from several goroutines at once (Bounds.Concurrency) and does
// not keep body after the call that parses it.
type Fetcher func(ctx context.Context, url string) (status int, contentType string, body []byte, err error)

// Sitemap modes: Request.Sitemap.
const (
	// SitemapInclude uses the sitemaps and the pages' links.
	SitemapInclude = "include"
	// SitemapSkip uses the pages' links only.
	SitemapSkip = "skip"
	// SitemapOnly uses the sitemaps only; the start page is not fetched.
	SitemapOnly = "only"
)

// Firecrawl's limits for Request.Limit.
const (
	DefaultLimit = 5000
	MaxLimit     = 100000
)

// Errors, to be tested with errors.Is.
var (
	// ErrInvalidRequest: the URL is not an http(s) URL with a host, the
	// limit is out of range, or the sitemap mode is unknown (a 400).
	ErrInvalidRequest = errors.New("invalid map request")
	// ErrNothingFound: the start page could not be fetched (no answer, or
	// a 4xx or 5xx) and no sitemap gave a URL; in mode "only", the site
	// gave no answer at all. A site that answers but has no sitemap is
	// an empty Result in mode "only", not this error.
	ErrNothingFound = errors.New("nothing found to map")
)

// Request is a map of one site. The zero values of IncludeSubdomains and
// IgnoreQueryParameters are false, while Firecrawl's defaults are true:
// start from NewRequest, or set them from the JSON body's *bool (nil is
// true). Normalize fills the other defaults.
type Request struct {
	// URL is the start URL; without a scheme it is taken as http://.
	URL string
	// Search orders the links by relevance to its terms (package doc).
	Search string
	// Limit is the most links returned: 0 means DefaultLimit; at most
	// MaxLimit.
	Limit int
	// IncludeSubdomains keeps the URLs of any host under the start host's
	// registrable domain; otherwise only the start host's.
	IncludeSubdomains bool
	// IgnoreQueryParameters drops the query of every URL (and dedups by
	// what is left).
	IgnoreQueryParameters bool
	// Sitemap is SitemapInclude (the default, ""), SitemapSkip or
	// SitemapOnly.
	Sitemap string
	// AnyPath keeps URLs outside the start URL's path (Firecrawl's
	// filterByPath: false); by default a start URL with a path maps only
	// what is under it.
	AnyPath bool
	// Bounds limit the work; zero fields take the defaults.
	Bounds Bounds
}

// NewRequest is a Request for rawURL with Firecrawl's defaults.
func NewRequest(rawURL string) Request {
	return Request{
		URL:                   rawURL,
		Limit:                 DefaultLimit,
		IncludeSubdomains:     true,
		IgnoreQueryParameters: true,
		Sitemap:               SitemapInclude,
	}
}

// Bounds limit the work of one Map. Zero fields take the defaults below.
type Bounds struct {
	// MaxSitemaps is how many sitemap documents are fetched (default 100).
	MaxSitemaps int
	// MaxDepth is how many levels of sitemap index are followed below the
	// sitemaps named by robots.txt or found at the well-known paths
	// (default 3).
	MaxDepth int
	// MaxBodyBytes is how much of one document is read, after gunzip
	// (default 50 MiB, the sitemaps.org limit).
	MaxBodyBytes int64
	// MaxSitemapURLs is how many entries of one sitemap are read (default
	// 50,000, the sitemaps.org limit).
	MaxSitemapURLs int
	// MaxTotalBytes is how much is read of all documents together
	// (default 256 MiB).
	MaxTotalBytes int64
	// MaxCandidates is how many distinct URLs are kept before ranking
	// (default MaxLimit).
	MaxCandidates int
	// MaxPages is how many HTML pages are fetched for their links: the
	// start page and, when the sitemaps gave nothing, pages it links to
	// (default 10; 1 keeps to the start page).
	MaxPages int
	// Concurrency is how many fetches run at once (default 4).
	Concurrency int
}

// Default bounds.
const (
	DefaultMaxSitemaps    = 100
	DefaultMaxDepth       = 3
	DefaultMaxBodyBytes   = 50 << 20
	DefaultMaxSitemapURLs = 50000
	DefaultMaxTotalBytes  = 256 << 20
	DefaultMaxCandidates  = MaxLimit
	DefaultMaxPages       = 10
	DefaultConcurrency    = 4
)

func (b *Bounds) fill() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&b.MaxSitemaps, DefaultMaxSitemaps)
	def(&b.MaxDepth, DefaultMaxDepth)
	def(&b.MaxSitemapURLs, DefaultMaxSitemapURLs)
	def(&b.MaxCandidates, DefaultMaxCandidates)
	def(&b.MaxPages, DefaultMaxPages)
	def(&b.Concurrency, DefaultConcurrency)
	if b.MaxBodyBytes <= 0 {
		b.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if b.MaxTotalBytes <= 0 {
		b.MaxTotalBytes = DefaultMaxTotalBytes
	}
}

// Normalize checks r and fills its defaults: the URL's scheme, Limit,
// Sitemap and Bounds. It cannot tell an unset bool from false (see
// Request). Map calls it on its own copy; calling it first lets a handler
// answer 400 before it spends anything.
func (r *Request) Normalize() error {
	raw := strings.TrimSpace(r.URL)
	if raw != "" && !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Opaque != "" {
		return fmt.Errorf("%w: url %q is not an http(s) URL", ErrInvalidRequest, r.URL)
	}
	if u.User != nil { // also "mailto:a@b", read as http://mailto:a@b
		return fmt.Errorf("%w: url %q has credentials", ErrInvalidRequest, r.URL)
	}
	r.URL = raw
	r.Search = strings.TrimSpace(r.Search)
	switch {
	case r.Limit == 0:
		r.Limit = DefaultLimit
	case r.Limit < 0 || r.Limit > MaxLimit:
		return fmt.Errorf("%w: limit %d is not within 1..%d", ErrInvalidRequest, r.Limit, MaxLimit)
	}
	switch r.Sitemap {
	case "":
		r.Sitemap = SitemapInclude
	case SitemapInclude, SitemapSkip, SitemapOnly:
	default:
		return fmt.Errorf("%w: sitemap %q is not include, skip or only", ErrInvalidRequest, r.Sitemap)
	}
	r.Bounds.fill()
	return nil
}

// Link is one URL of the map, with what Map learnt of it. Title and
// Description are empty when unknown (the JSON leaves them out).
type Link struct {
	URL         string `json:"url"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
}

// Result is a map. It owns its slices.
type Result struct {
	// Links are the site's URLs, ordered (package doc), at most Limit.
	Links []Link
	// Sitemaps is how many sitemap documents were read; Pages how many
	// HTML pages were read for their links.
	Sitemaps int
	Pages    int
	// Truncated says a bound (Bounds) cut the discovery short, so the site
	// may have more URLs than were considered. Cutting to Limit is not a
	// truncation.
	Truncated bool
}

// Map lists the URLs of req.URL's site (package doc). It returns an error
// wrapping ErrInvalidRequest, ErrNothingFound or, when ctx ends first,
// ctx.Err().
func Map(ctx context.Context, fetch Fetcher, req Request) (*Result, error) {
	if fetch == nil {
		return nil, errors.New("sitemap: nil Fetcher")
	}
	if err := req.Normalize(); err != nil {
		return nil, err
	}
	start, _ := url.Parse(req.URL)
	m := newMapper(fetch, req, start)
	startURL, _ := m.norm(start, "")
	return m.run(ctx, start, startURL)
}

// newMapper is the state of a map of the normalised req.
func newMapper(fetch Fetcher, req Request, start *url.URL) *mapper {
	m := &mapper{
		fetch: fetch,
		req:   req,
		b:     req.Bounds,
		scope: newScope(start, req.IncludeSubdomains, req.AnyPath),
		seen:  map[string]int{},
		cap:   req.Bounds.MaxCandidates,
	}
	if req.Search == "" {
		m.cap = min(m.cap, req.Limit)
	}
	return m
}

// mapper is one Map's state.
type mapper struct {
	fetch Fetcher
	req   Request
	b     Bounds
	scope scope

	mu        sync.Mutex // guards the counters below, which fetches update
	bytesRead int64
	truncated bool
	answered  bool  // some fetch got an HTTP answer
	sitemaps  int   // documents read
	pages     int   // HTML pages read
	lastErr   error // the last fetch error, for ErrNothingFound

	links []Link         // in discovery order
	seen  map[string]int // normalised URL -> index in links
	cap   int            // most links kept
}

func (m *mapper) run(ctx context.Context, start *url.URL, startURL string) (*Result, error) {
	// The start page and the sitemaps at once: the page's result waits in
	// page until the sitemaps are merged, so the order stays the same.
	var page *pageResult
	var wg sync.WaitGroup
	if m.req.Sitemap != SitemapOnly {
		wg.Go(func() { page = m.getPage(ctx, start.String()) })
	}
	var locs []string
	var smErr error
	if m.req.Sitemap != SitemapSkip {
		locs, smErr = m.collectSitemaps(ctx, start)
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("map %s: %w", m.req.URL, err)
	}
	if smErr != nil {
		return nil, smErr
	}

	if page.ok() {
		m.add(startURL, page.title, page.description, true)
	}
	for _, l := range locs {
		m.add(l, "", "", false)
	}
	if page.ok() {
		m.addLinks(page)
	}
	if len(locs) == 0 && page.ok() && m.b.MaxPages > 1 && len(m.links) < m.cap {
		if err := m.secondLevel(ctx, page, startURL); err != nil {
			return nil, err
		}
	}

	switch {
	case m.req.Sitemap == SitemapOnly && len(locs) == 0 && !m.answered:
		return nil, fmt.Errorf("%w: %s: %v", ErrNothingFound, m.req.URL, m.lastErr)
	case m.req.Sitemap != SitemapOnly && !page.ok() && len(locs) == 0:
		return nil, fmt.Errorf("%w: %s: %v", ErrNothingFound, m.req.URL, page.cause())
	}

	links := m.links
	if links == nil {
		links = []Link{} // JSON [], not null
	}
	if m.req.Search != "" {
		links = rank(links, m.req.Search)
	}
	if len(links) > m.req.Limit {
		links = links[:m.req.Limit]
	}
	return &Result{Links: links, Sitemaps: m.sitemaps, Pages: m.pages, Truncated: m.truncated}, nil
}

// norm is raw resolved against base (nil for an absolute URL) in normal
// form, and whether it is in scope.
func (m *mapper) norm(base *url.URL, raw string) (string, bool) {
	u := resolve(base, raw)
	if u == nil {
		return "", false
	}
	normalize(u, m.req.IgnoreQueryParameters)
	return u.String(), m.scope.contains(u)
}

// add records a normalised in-scope URL, or improves what is known of it:
// own is a page's own title and description, which replace anchor text.
func (m *mapper) add(u, title, description string, own bool) {
	if i, ok := m.seen[u]; ok {
		l := &m.links[i]
		if title != "" && (own || l.Title == "") {
			l.Title = title
		}
		if description != "" && (own || l.Description == "") {
			l.Description = description
		}
		return
	}
	if len(m.links) >= m.cap {
		if m.cap < m.req.Limit || m.req.Search != "" {
			m.truncated = true
		}
		return
	}
	m.seen[u] = len(m.links)
	m.links = append(m.links, Link{URL: u, Title: title, Description: description})
}

// addLinks adds a page's in-scope links with their anchor text.
func (m *mapper) addLinks(p *pageResult) {
	for _, a := range p.links {
		if u, ok := m.norm(p.base, a.href); ok {
			m.add(u, a.text, "", false)
		}
	}
}

// secondLevel reads the pages the start page links to, when the sitemaps
// gave nothing, and adds their titles and links.
func (m *mapper) secondLevel(ctx context.Context, start *pageResult, startURL string) error {
	var next []string
	picked := map[string]bool{startURL: true}
	for _, a := range start.links {
		if len(next) >= m.b.MaxPages-1 {
			break
		}
		u := resolve(start.base, a.href)
		if u == nil || !looksLikePage(u) {
			continue
		}
		normalize(u, m.req.IgnoreQueryParameters)
		s := u.String()
		if picked[s] || !m.scope.contains(u) {
			continue
		}
		picked[s] = true
		next = append(next, s)
	}
	results := make([]*pageResult, len(next))
	sem := make(chan struct{}, m.b.Concurrency)
	var wg sync.WaitGroup
	for i, u := range next {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			results[i] = m.getPage(ctx, u)
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("map %s: %w", m.req.URL, err)
	}
	for i, p := range results {
		if !p.ok() {
			continue
		}
		m.add(next[i], p.title, p.description, true)
		m.addLinks(p)
	}
	return nil
}

// get fetches u and keeps count of answers and failures.
func (m *mapper) get(ctx context.Context, u string) (int, string, []byte, error) {
	if err := ctx.Err(); err != nil {
		return 0, "", nil, err
	}
	status, ct, body, err := m.fetch(ctx, u)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.lastErr = err
		return 0, "", nil, err
	}
	m.answered = true
	return status, ct, body, nil
}

// take reserves up to n bytes of the total budget and returns how many
// it got (0 when the budget is spent). A reader that hits its reservation
// marks the map truncated.
func (m *mapper) take(n int64) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	n = max(min(n, m.b.MaxTotalBytes-m.bytesRead), 0)
	m.bytesRead += n
	return n
}

// giveBack returns what a reservation did not use.
func (m *mapper) giveBack(n int64) {
	m.mu.Lock()
	m.bytesRead -= n
	m.mu.Unlock()
}

func (m *mapper) markTruncated() {
	m.mu.Lock()
	m.truncated = true
	m.mu.Unlock()
}

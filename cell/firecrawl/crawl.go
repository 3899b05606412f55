package firecrawl

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// Crawl bounds (docs/firecrawl.md, "Crawl").
const (
	// DefaultCrawlLimit is Firecrawl's default limit, and trawl's most.
	DefaultCrawlLimit = 10000
	// MaxCrawlPatterns bounds includePaths and excludePaths together.
	MaxCrawlPatterns = 100
	// MaxCrawlDelay is the longest delay between a crawl's pages.
	MaxCrawlDelay = 60.0
)

// CrawlRequest is the body of POST /v2/crawl.
type CrawlRequest struct {
	URL                    string          `json:"url"`
	Prompt                 *string         `json:"prompt,omitempty"`
	ExcludePaths           []string        `json:"excludePaths,omitempty"`
	IncludePaths           []string        `json:"includePaths,omitempty"`
	MaxDiscoveryDepth      *int            `json:"maxDiscoveryDepth,omitempty"`
	Sitemap                *string         `json:"sitemap,omitempty"`
	IgnoreQueryParameters  bool            `json:"ignoreQueryParameters,omitempty"`
	DeduplicateSimilarURLs *bool           `json:"deduplicateSimilarURLs,omitempty"`
	Limit                  *int            `json:"limit,omitempty"`
	CrawlEntireDomain      bool            `json:"crawlEntireDomain,omitempty"`
	AllowExternalLinks     bool            `json:"allowExternalLinks,omitempty"`
	AllowSubdomains        bool            `json:"allowSubdomains,omitempty"`
	IgnoreRobotsTxt        bool            `json:"ignoreRobotsTxt,omitempty"`
	RobotsUserAgent        *string         `json:"robotsUserAgent,omitempty"`
	Delay                  *float64        `json:"delay,omitempty"`
	MaxConcurrency         *int            `json:"maxConcurrency,omitempty"`
	Webhook                json.RawMessage `json:"webhook,omitempty"`
	ScrapeOptions          *ScrapeOptions  `json:"scrapeOptions,omitempty"`
	RegexOnFullURL         bool            `json:"regexOnFullURL,omitempty"`
	ZeroDataRetention      bool            `json:"zeroDataRetention,omitempty"`
}

// CrawlPlan is a crawl request checked and translated.
type CrawlPlan struct {
	Scope CrawlScope
	// Options are the scrape options of every page, with the links
	// format added when the caller did not ask for it (the crawl needs
	// them); KeepLinks says whether the documents show them.
	Options   ScrapeOptions
	KeepLinks bool
	Scrape    *Plan
	// Limit is the most pages, MaxDepth the deepest link followed.
	Limit, MaxDepth int
	// Delay is the seconds between two pages (with it, one page at a
	// time); Concurrency bounds the pages at once (0: the cell's).
	Delay       float64
	Concurrency int
}

// CrawlScope is which links of a crawl's pages it follows. It is kept in
// the crawl's job and applied to each page's links.
type CrawlScope struct {
	// Start is the start URL, normalised.
	Start string `json:"start"`
	// Sitemap is include, skip or only.
	Sitemap      string   `json:"sitemap"`
	Include      []string `json:"include,omitempty"`
	Exclude      []string `json:"exclude,omitempty"`
	FullURL      bool     `json:"full_url,omitempty"`
	EntireDomain bool     `json:"entire_domain,omitempty"`
	Subdomains   bool     `json:"subdomains,omitempty"`
	External     bool     `json:"external,omitempty"`
	IgnoreQuery  bool     `json:"ignore_query,omitempty"`
}

// Compile checks the request and translates it; the caller checks the
// start URL's host against the cell's policy.
func (r *CrawlRequest) Compile() (*CrawlPlan, error) {
	start, err := normalizeStart(r.URL)
	if err != nil {
		return nil, err
	}
	p := &CrawlPlan{Limit: DefaultCrawlLimit, MaxDepth: DefaultCrawlLimit}
	switch {
	case r.Prompt != nil && *r.Prompt != "":
		return nil, Unsupported("prompt", "a crawl described in words is not supported; set includePaths, excludePaths, limit and maxDiscoveryDepth")
	case r.IgnoreRobotsTxt:
		return nil, Unsupported("ignoreRobotsTxt", "trawl always honours robots.txt")
	case r.RobotsUserAgent != nil && *r.RobotsUserAgent != "":
		return nil, Unsupported("robotsUserAgent", "trawl reads robots.txt as the user agent trawl")
	case r.ZeroDataRetention:
		return nil, Unsupported("zeroDataRetention", "zero data retention is not supported: a crawl's documents are kept until it expires (expiresAt)")
	case r.Limit != nil && (*r.Limit < 1 || *r.Limit > DefaultCrawlLimit):
		return nil, BadRequest("limit", fmt.Sprintf("limit is 1 to %d pages", DefaultCrawlLimit))
	case r.MaxDiscoveryDepth != nil && *r.MaxDiscoveryDepth < 0:
		return nil, BadRequest("maxDiscoveryDepth", "maxDiscoveryDepth is a non-negative integer")
	case r.MaxConcurrency != nil && *r.MaxConcurrency < 1:
		return nil, BadRequest("maxConcurrency", "maxConcurrency is a positive integer")
	case r.Delay != nil && (*r.Delay < 0 || *r.Delay > MaxCrawlDelay):
		return nil, BadRequest("delay", fmt.Sprintf("delay is 0 to %g seconds", MaxCrawlDelay))
	case len(r.IncludePaths)+len(r.ExcludePaths) > MaxCrawlPatterns:
		return nil, BadRequest("includePaths", fmt.Sprintf("includePaths and excludePaths hold at most %d patterns together", MaxCrawlPatterns))
	}
	if r.Limit != nil {
		p.Limit = *r.Limit
	}
	if r.MaxDiscoveryDepth != nil {
		p.MaxDepth = *r.MaxDiscoveryDepth
	}
	if r.MaxConcurrency != nil {
		p.Concurrency = *r.MaxConcurrency
	}
	if r.Delay != nil && *r.Delay > 0 {
		p.Delay, p.Concurrency = *r.Delay, 1
	}
	sm := SitemapInclude
	if r.Sitemap != nil {
		sm = *r.Sitemap
	}
	if sm != SitemapInclude && sm != SitemapSkip && sm != SitemapOnly {
		return nil, BadRequest("sitemap", "sitemap is include, skip or only")
	}
	for _, f := range []struct {
		name string
		pats []string
	}{{"includePaths", r.IncludePaths}, {"excludePaths", r.ExcludePaths}} {
		for i, pat := range f.pats {
			if _, err := regexp.Compile(pat); err != nil {
				return nil, BadRequest(fmt.Sprintf("%s.%d", f.name, i), fmt.Sprintf("not a regular expression: %v", err))
			}
		}
	}
	p.Scope = CrawlScope{Start: start, Sitemap: sm, Include: r.IncludePaths, Exclude: r.ExcludePaths, FullURL: r.RegexOnFullURL,
		EntireDomain: r.CrawlEntireDomain, Subdomains: r.AllowSubdomains, External: r.AllowExternalLinks, IgnoreQuery: r.IgnoreQueryParameters}
	if r.ScrapeOptions != nil {
		p.Options = *r.ScrapeOptions
	}
	if len(p.Options.Headers) > 0 {
		// As a batch's: the crawl would keep them (a cookie, a token)
		// until it expires.
		return nil, Unsupported("scrapeOptions.headers", "headers are not supported in a crawl (the crawl would keep them until it expires); use POST /v2/scrape for each page")
	}
	if p.Scrape, err = p.Options.Compile("scrapeOptions."); err != nil {
		return nil, err
	}
	for i, f := range p.Options.Formats {
		if f.Type == "json" || f.Type == "summary" {
			return nil, Unsupported(fmt.Sprintf("scrapeOptions.formats.%d", i), fmt.Sprintf("the %s format is not supported in a crawl yet; use POST /v2/scrape or /v2/extract on the pages", f.Type))
		}
	}
	p.KeepLinks = p.Scrape.Links
	if !p.KeepLinks {
		fs := slices.Clone(p.Options.Formats)
		if len(fs) == 0 {
			fs = []Format{{Type: "markdown"}} // Firecrawl's default
		}
		p.Options.Formats = append(fs, Format{Type: "links"})
		if p.Scrape, err = p.Options.Compile("scrapeOptions."); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Sitemap modes of a crawl.
const (
	SitemapInclude = "include"
	SitemapSkip    = "skip"
	SitemapOnly    = "only"
)

func normalizeStart(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", BadRequest("url", "url is required")
	}
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil {
		return "", &Error{Status: 400, Code: CodeUnsupportedURL, Message: fmt.Sprintf("url %q is not an http(s) URL", raw)}
	}
	u.Fragment = ""
	if u.Path == "" {
		u.Path = "/"
	}
	return u.String(), nil
}

// Scope is a CrawlScope ready to decide links: its patterns compiled.
type Scope struct {
	CrawlScope
	start          *url.URL
	prefix         string
	domain         string
	include, exclu []*regexp.Regexp
}

// Ready compiles s's patterns (checked by Compile when the crawl was
// started).
func (s CrawlScope) Ready() (*Scope, error) {
	u, err := url.Parse(s.Start)
	if err != nil {
		return nil, err
	}
	sc := &Scope{CrawlScope: s, start: u, prefix: pathPrefix(u.Path)}
	sc.domain, err = publicsuffix.EffectiveTLDPlusOne(u.Hostname())
	if err != nil {
		sc.domain = u.Hostname()
	}
	for _, pat := range s.Include {
		re, err := regexp.Compile(pat)
		if err != nil {
			return nil, err
		}
		sc.include = append(sc.include, re)
	}
	for _, pat := range s.Exclude {
		re, err := regexp.Compile(pat)
		if err != nil {
			return nil, err
		}
		sc.exclu = append(sc.exclu, re)
	}
	return sc, nil
}

// pathPrefix is the path a crawl without crawlEntireDomain keeps to: the
// start URL's directory ("/docs/" for "/docs/intro.html" and "/docs/").
func pathPrefix(p string) string {
	if p == "" || strings.HasSuffix(p, "/") {
		return p
	}
	if strings.Contains(path.Base(p), ".") {
		return strings.TrimSuffix(path.Dir(p), "/") + "/"
	}
	return p
}

// Canonical is link as the crawl keeps it: without its fragment, and
// without its query when the crawl ignores queries; false for a link
// that is not http(s).
func (s *Scope) Canonical(link string) (string, bool) {
	u, err := url.Parse(link)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil {
		return "", false
	}
	u.Fragment, u.RawFragment = "", ""
	if s.IgnoreQuery {
		u.RawQuery, u.ForceQuery = "", false
	}
	if u.Path == "" {
		u.Path = "/"
	}
	return u.String(), true
}

// Follow reports whether the crawl follows link (canonical): on the
// start host (or a subdomain, or any host, as the crawl allows), under
// the start path unless the crawl takes the entire domain, kept by
// includePaths and not dropped by excludePaths (on the path, or the full
// URL with regexOnFullURL).
func (s *Scope) Follow(link string) bool {
	u, err := url.Parse(link)
	if err != nil {
		return false
	}
	host, start := strings.ToLower(u.Hostname()), strings.ToLower(s.start.Hostname())
	switch {
	case host == start:
	case s.External:
	case s.Subdomains && (host == s.domain || strings.HasSuffix(host, "."+s.domain)):
	default:
		return false
	}
	internal := host == start
	if internal && !s.EntireDomain && !strings.HasPrefix(u.Path, s.prefix) {
		return false
	}
	subject := u.Path
	if s.FullURL {
		subject = link
	}
	for _, re := range s.exclu {
		if re.MatchString(subject) {
			return false
		}
	}
	if len(s.include) == 0 {
		return true
	}
	for _, re := range s.include {
		if re.MatchString(subject) {
			return true
		}
	}
	return false
}

package cell

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/firecrawl"
	"github.com/trawlhq/trawl/cell/sitemap"
	"github.com/trawlhq/trawl/internal/fcapi"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

// Firecrawl's map error codes (its MapTimeoutError and MapFailedError).
const (
	codeMapTimeout = "MAP_TIMEOUT"
	codeMapFailed  = "MAP_FAILED"
)

// Bounds of a map request.
const (
	// mapMaxTimeout is the largest timeout a map takes, as a scrape's.
	mapMaxTimeout = 300 * time.Second
	// mapDefaultTimeout bounds a map that names no timeout: within the
	// gate's wait for a cell's answer (125 s), so the caller hears the
	// 408 rather than the gate's 502.
	mapDefaultTimeout = 100 * time.Second
	// mapMaxSearch bounds search, in characters (as a search's q): every
	// term is compared with every link.
	mapMaxSearch = 512
)

// v2MapRequest is the body of POST /v2/map. Pointers tell an absent
// field from its zero (Firecrawl's booleans default to true).
type v2MapRequest struct {
	URL                   string              `json:"url"`
	Search                string              `json:"search"`
	Limit                 *int                `json:"limit"`
	IncludeSubdomains     *bool               `json:"includeSubdomains"`
	IgnoreQueryParameters *bool               `json:"ignoreQueryParameters"`
	Sitemap               string              `json:"sitemap"`
	Timeout               *int64              `json:"timeout"` // ms
	Location              *firecrawl.Location `json:"location"`
	// FilterByPath (default true) keeps a start URL with a path to the
	// URLs under it; Firecrawl's schema has it, its docs do not.
	FilterByPath *bool             `json:"filterByPath"`
	Headers      map[string]string `json:"headers"`
}

// v2MapAnswer is Firecrawl's map answer; Links is never null.
type v2MapAnswer struct {
	Success bool           `json:"success"`
	Links   []sitemap.Link `json:"links"`
}

// v2MapHandlers are the handlers of Firecrawl's v2 map routes
// (docs/firecrawl.md).
func (c *Cell) v2MapHandlers() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{"POST /v2/map": c.handleV2Map}
}

// handleV2Map serves POST /v2/map: the site's URLs from its sitemaps and
// links (cell/sitemap), fetched through the cell's HTTP engine (the SSRF
// guard, never the browser or the cache), billed as one map call.
func (c *Cell) handleV2Map(w http.ResponseWriter, r *http.Request) {
	var body v2MapRequest
	if err := fcapi.Decode(w, r, &body); err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	req, timeout, err := body.compile(c.cfg.AllowPrivateNetworks)
	if err != nil {
		firecrawl.WriteError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	if err := c.v2MapHost(ctx, req.URL); err != nil { // req.URL passed urlpolicy
		firecrawl.WriteError(w, err)
		return
	}
	var docs atomic.Int64
	res, err := sitemap.Map(ctx, c.mapFetcher(&docs), req)
	if r.Context().Err() != nil {
		return // the client is gone
	}
	if err != nil {
		firecrawl.WriteError(w, c.v2MapError(ctx, req.URL, timeout, err))
		return
	}
	links := res.Links
	if links == nil {
		links = []sitemap.Link{}
	}
	usage := metering.Usage{Kind: metering.KindMap, Engine: metering.EngineHTTP, Cache: metering.CacheMiss, Units: int(docs.Load())}
	w.Header().Set(UsageHeader, usage.String())
	httpjson.Write(w, http.StatusOK, v2MapAnswer{Success: true, Links: links})
}

// compile checks the body and translates it into the mapper's request and
// the map's deadline.
func (b *v2MapRequest) compile(allowPrivate bool) (sitemap.Request, time.Duration, error) {
	if strings.TrimSpace(b.URL) == "" {
		return sitemap.Request{}, 0, firecrawl.BadRequest("url", "url is required")
	}
	u, err := urlpolicy.Validate(b.URL, allowPrivate)
	if err != nil {
		return sitemap.Request{}, 0, &firecrawl.Error{Status: http.StatusBadRequest, Code: firecrawl.CodeUnsupportedURL, Message: err.Error()}
	}
	req := sitemap.NewRequest(u.String())
	if utf8.RuneCountInString(b.Search) > mapMaxSearch {
		return req, 0, firecrawl.BadRequest("search", fmt.Sprintf("search is at most %d characters", mapMaxSearch))
	}
	req.Search = b.Search
	if b.Limit != nil {
		if *b.Limit < 1 || *b.Limit > sitemap.MaxLimit {
			return req, 0, firecrawl.BadRequest("limit", fmt.Sprintf("limit is 1 to %d", sitemap.MaxLimit))
		}
		req.Limit = *b.Limit
	}
	if b.IncludeSubdomains != nil {
		req.IncludeSubdomains = *b.IncludeSubdomains
	}
	if b.IgnoreQueryParameters != nil {
		req.IgnoreQueryParameters = *b.IgnoreQueryParameters
	}
	if b.FilterByPath != nil {
		req.AnyPath = !*b.FilterByPath
	}
	switch b.Sitemap {
	case "":
	case sitemap.SitemapInclude, sitemap.SitemapSkip, sitemap.SitemapOnly:
		req.Sitemap = b.Sitemap
	default:
		return req, 0, firecrawl.BadRequest("sitemap", fmt.Sprintf("sitemap must be include, skip or only (got %q)", b.Sitemap))
	}
	timeout := mapDefaultTimeout
	if b.Timeout != nil {
		d := time.Duration(*b.Timeout) * time.Millisecond
		if *b.Timeout < 1 || d > mapMaxTimeout {
			return req, 0, firecrawl.BadRequest("timeout", "timeout is in milliseconds, 1 to 300000")
		}
		timeout = d
	}
	if err := b.unhonoured(); err != nil {
		return req, 0, err
	}
	if err := req.Normalize(); err != nil {
		return req, 0, firecrawl.BadRequest("", err.Error())
	}
	return req, timeout, nil
}

// unhonoured refuses what a map would otherwise have to ignore.
func (b *v2MapRequest) unhonoured() error {
	if len(b.Headers) > 0 {
		return firecrawl.Unsupported("headers", "custom request headers are not supported")
	}
	if b.Location == nil {
		return nil
	}
	if len(b.Location.Languages) > 0 {
		return firecrawl.Unsupported("location.languages", "location.languages is not supported; the site is asked in its default language")
	}
	if c := strings.ToLower(b.Location.Country); c != "" {
		if !fetch.ValidCountry(c) {
			return firecrawl.BadRequest("location.country", "location.country is an ISO 3166-1 alpha-2 code")
		}
		if c != "us" {
			// "US" is Firecrawl's default and asks for nothing.
			return firecrawl.Unsupported("location.country", "a map reads the site directly, not through a proxy of a country; location.country other than US is not supported")
		}
	}
	return nil
}

// v2MapHost refuses a start URL whose host resolves to an address that is
// not public: the engine would refuse every fetch of it at dial time, and
// the map would fail as a site that did not answer.
func (c *Cell) v2MapHost(ctx context.Context, startURL string) error {
	u, err := url.Parse(startURL)
	if err != nil {
		return firecrawl.BadRequest("url", err.Error())
	}
	if err := c.engine.CheckHost(ctx, u.Hostname()); errors.Is(err, fetch.ErrNotPublic) {
		return &firecrawl.Error{Status: http.StatusBadRequest, Code: firecrawl.CodeUnsupportedURL, Message: fetch.ErrNotPublic.Error()}
	}
	return nil
}

// mapFetcher is the mapper's Fetcher: a GET through the cell's HTTP
// engine (its SSRF guard, body limit and per-fetch deadline), counting in
// docs every document that answered.
func (c *Cell) mapFetcher(docs *atomic.Int64) sitemap.Fetcher {
	return func(ctx context.Context, u string) (int, string, []byte, error) {
		resp, err := c.engine.Fetch(ctx, &fetch.Request{URL: u})
		if err != nil {
			return 0, "", nil, err
		}
		docs.Add(1)
		return resp.Status, resp.ContentType, resp.Body, nil
	}
}

// v2MapError is a failed map in Firecrawl's envelope. Nothing is billed:
// the answer is not a 200.
func (c *Cell) v2MapError(ctx context.Context, target string, timeout time.Duration, err error) error {
	switch {
	case ctx.Err() != nil:
		return &firecrawl.Error{Status: http.StatusRequestTimeout, Code: codeMapTimeout,
			Message: fmt.Sprintf("the map did not finish within its timeout (%s); try a more specific start URL or a longer timeout", timeout)}
	case errors.Is(err, sitemap.ErrInvalidRequest):
		return firecrawl.BadRequest("", err.Error())
	case errors.Is(err, sitemap.ErrNothingFound):
		c.cfg.Logger.Info("map found nothing", "url", urlpolicy.Redact(target), "err", err)
		return &firecrawl.Error{Status: http.StatusBadGateway, Code: codeMapFailed,
			Message: "the site could not be mapped: neither its start page nor a sitemap could be read; nothing was charged"}
	default:
		c.cfg.Logger.Warn("map failed", "url", urlpolicy.Redact(target), "err", err)
		return &firecrawl.Error{Status: http.StatusInternalServerError, Code: codeMapFailed, Message: "the map failed; nothing was charged"}
	}
}

package crawl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/fetch/ladder"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

// Engines of a result (Result.Engine).
const (
	EngineHTTP    = ladder.EngineHTTP
	EngineBrowser = ladder.EngineBrowser
	EngineCache   = "cache"
)

// DefaultFreshFor is how long a page fetched without a browser is served
// from the page cache, as the cell's scrape cache does.
const DefaultFreshFor = 10 * time.Minute

// Cache modes (Crawl4AI v0.4's cache_mode). Whether a crawl reads the
// cache and whether it writes it:
var cacheModes = map[string]struct{ read, write bool }{
	"":           {true, true},
	"enabled":    {true, true},
	"disabled":   {false, false},
	"read_only":  {true, false},
	"write_only": {false, true},
	"bypass":     {false, false},
}

var pagePrefix = []byte(store.PrefixCrawlPage)

// cachedPage is a page in the page cache.
type cachedPage struct {
	URL         string      `json:"url"`
	Status      int         `json:"status"`
	Header      http.Header `json:"header"`
	Body        []byte      `json:"body"`
	ContentType string      `json:"content_type"`
	Charset     string      `json:"charset"`
	Engine      string      `json:"engine"`
}

func pageKey(u string) []byte {
	sum := sha256.Sum256([]byte(u))
	return append(append([]byte{}, pagePrefix...), hex.EncodeToString(sum[:16])...)
}

// fetchPlain fetches a page that needs no browser: from the page cache,
// else through the engine ladder (plain HTTP first; the permanent browser
// when HTTP gets a JavaScript shell or a bot wall; a proxy of the
// configured kind as the last step). It returns the engine that served it.
func (s *Server) fetchPlain(ctx context.Context, p *plan, u *url.URL) (*fetch.Response, string, error) {
	key := pageKey(u.String())
	if p.cacheRead && s.cfg.FreshFor > 0 {
		if b, _, err := s.st.GetLive(nil, key, s.cfg.Now()); err == nil {
			var c cachedPage
			if json.Unmarshal(b, &c) == nil {
				return &fetch.Response{URL: c.URL, Status: c.Status, Header: c.Header, Body: c.Body, ContentType: c.ContentType,
					Charset: c.Charset, Engine: c.Engine}, EngineCache, nil
			}
		} else if !errors.Is(err, store.ErrNotFound) {
			s.log.Warn("crawl: page cache read", "url", urlpolicy.Redact(u.String()), "err", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	lr, err := s.ladder.Fetch(ctx, &ladder.Request{URL: u})
	if err != nil {
		return nil, "", err
	}
	resp := lr.Response
	if p.cacheWrite && s.cfg.FreshFor > 0 && resp.Status < 500 {
		b, err := json.Marshal(cachedPage{URL: resp.URL, Status: resp.Status, Header: resp.Header, Body: resp.Body,
			ContentType: resp.ContentType, Charset: resp.Charset, Engine: lr.Engine})
		if err == nil {
			err = s.st.SetExpiring(key, b, s.cfg.Now().Add(s.cfg.FreshFor), store.NoSync)
		}
		if err != nil {
			s.log.Warn("crawl: page cache write", "url", urlpolicy.Redact(u.String()), "err", err)
		}
	}
	return resp, lr.Engine, nil
}

// permanentEngine is the browser rung of the crawl server's ladder: a
// page on the permanent browser, in the default viewport.
type permanentEngine struct{ s *Server }

func (e permanentEngine) Fetch(ctx context.Context, req *fetch.Request) (*fetch.Response, error) {
	l, err := e.s.pool.Acquire(ctx, "")
	if err != nil {
		return nil, err
	}
	defer l.Release()
	if req.Browser != nil && req.Browser.Viewport == (fetch.Viewport{}) {
		o := *req.Browser
		o.Viewport = e.s.cfg.DefaultViewport
		r := *req
		r.Browser = &o
		req = &r
	}
	return l.Engine().Fetch(ctx, req)
}

// ladderError is the message of a page the ladder could not fetch.
func ladderError(err error) error {
	var be *ladder.BlockedError
	if errors.As(err, &be) {
		return fmt.Errorf("blocked: %v", be)
	}
	return pageError(err)
}

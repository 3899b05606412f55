package search

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/trawlhq/trawl/internal/fcapi"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/searchapi"
)

// Firecrawl's POST /v2/search (docs/firecrawl.md) over the same gathering
// and merging as GET /search, billed as it: one search, half when the same
// request was answered in the last minutes. With scrapeOptions.formats,
// each result is also scraped as POST /v2/scrape, each scrape the
// caller's own call through the gate, billed as one (fcscrape.go).

// Bounds of a Firecrawl search.
const (
	fcDefaultLimit = 5
	fcMaxLimit     = 100
	fcPerCell      = 50 // a cell's most results at searchapi.LocalPath
)

// fcSearchRequest is the body of POST /v2/search; keys it does not have
// (origin, integration, highlights, …) are ignored.
type fcSearchRequest struct {
	Query             string            `json:"query"`
	Limit             *int              `json:"limit"`
	Sources           []json.RawMessage `json:"sources"`
	Categories        []json.RawMessage `json:"categories"`
	IncludeDomains    []string          `json:"includeDomains"`
	ExcludeDomains    []string          `json:"excludeDomains"`
	Tbs               string            `json:"tbs"`
	Location          string            `json:"location"`
	Country           string            `json:"country"`
	Timeout           *int              `json:"timeout"`
	IgnoreInvalidURLs *bool             `json:"ignoreInvalidURLs"`
	Enterprise        []string          `json:"enterprise"`
	// ScrapeOptions are /v2/scrape's options, forwarded as sent: the
	// cell checks them as it checks a scrape's.
	ScrapeOptions map[string]json.RawMessage `json:"scrapeOptions"`
}

// fcWeb is an item of data.web.
type fcWeb struct {
	URL         string `json:"url"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Position    int    `json:"position"`
	// doc is the page's scraped document (or its failure's metadata),
	// with scrapeOptions: its members follow the result's own.
	doc []member
}

// MarshalJSON is the result, then its document's members.
func (x fcWeb) MarshalJSON() ([]byte, error) {
	type plain fcWeb
	return withDocument(marshal(plain(x)), x.doc), nil
}

// fcNews is an item of data.news.
type fcNews struct {
	URL      string `json:"url"`
	Title    string `json:"title"`
	Snippet  string `json:"snippet"`
	Date     string `json:"date,omitempty"`
	Position int    `json:"position"`
	doc      []member
}

// MarshalJSON is the result, then its document's members.
func (x fcNews) MarshalJSON() ([]byte, error) {
	type plain fcNews
	return withDocument(marshal(plain(x)), x.doc), nil
}

// withDocument adds doc's members to the JSON object obj, as Firecrawl
// merges a result's document into it; a member the result has already
// (url, title) stays the result's.
func withDocument(obj []byte, doc []member) []byte {
	if len(doc) == 0 {
		return obj
	}
	var own map[string]json.RawMessage
	json.Unmarshal(obj, &own)
	out := bytes.TrimSuffix(obj, []byte("}"))
	for _, m := range doc {
		if _, ok := own[m.key]; ok {
			continue
		}
		out = append(out, ',')
		out = append(out, marshal(m.key)...)
		out = append(out, ':')
		out = append(out, m.raw...)
	}
	return append(out, '}')
}

type fcSearchData struct {
	Web  []fcWeb  `json:"web,omitzero"`
	News []fcNews `json:"news,omitzero"`
}

type fcSearchAnswer struct {
	Success bool         `json:"success"`
	Data    fcSearchData `json:"data"`
}

// fcPlan is a checked request.
type fcPlan struct {
	q          string
	limit      int
	web, news  bool
	timeout    time.Duration
	archiveKey string
	// scrape: the results are scraped with these options (scrapeOptions
	// with formats).
	scrape map[string]json.RawMessage
}

func (s *server) v2Search(w http.ResponseWriter, r *http.Request) {
	var req fcSearchRequest
	if err := fcapi.Decode(w, r, &req); err != nil {
		fcapi.WriteError(w, err)
		return
	}
	p, err := req.plan()
	if err != nil {
		fcapi.WriteError(w, err)
		return
	}
	var pipeline http.Handler
	if p.scrape != nil {
		if pipeline = s.cfg.Pipeline(r.Context()); pipeline == nil {
			fcapi.WriteError(w, &fcapi.Error{Status: http.StatusInternalServerError, Code: fcapi.CodeInternal, Message: "this gate cannot scrape search results: its pipeline is not available; nothing was charged"})
			return
		}
	}
	ctx := r.Context()
	deadline := p.timeout
	if deadline == 0 && p.scrape != nil {
		deadline = fcScrapeDeadline
	}
	if deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, deadline)
		defer cancel()
	}
	cache := metering.CacheArchive
	body, ok := s.archive.get(p.archiveKey, s.cfg.Now())
	if ok {
		s.popular.record(p.q, s.cfg.Account(r), s.cfg.Now())
	} else {
		cache = metering.CacheMiss
		if body, err = s.v2Results(ctx, r, p); err != nil {
			if p.timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) && r.Context().Err() == nil {
				fcapi.WriteError(w, &fcapi.Error{Status: http.StatusRequestTimeout, Code: fcapi.CodeScrapeTimeout, Message: fmt.Sprintf("the search took longer than its timeout of %d ms; nothing was charged", p.timeout.Milliseconds())})
				return
			}
			s.cfg.Logger.Warn("search: no cell answered", "err", err)
			fcapi.WriteError(w, &fcapi.Error{Status: http.StatusServiceUnavailable, Code: "cell_unavailable", Message: "no cell of this region could answer the search; nothing was charged, repeat it in a few seconds"})
			return
		}
	}
	if p.scrape == nil {
		s.write(w, metering.KindSearch, cache, 0, 0, body)
		return
	}
	var ans fcSearchAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		fcapi.WriteError(w, err)
		return
	}
	s.v2Scrape(ctx, w, r, pipeline, p, &ans, cache)
}

// v2Results gathers the cells' results and answers them in Firecrawl's
// shape, archived when there are any.
func (s *server) v2Results(ctx context.Context, r *http.Request, p *fcPlan) ([]byte, error) {
	// A cell answers at most fcPerCell of its best pages: a region of
	// one cell answers at most that many.
	n := min(max(p.limit, 10), fcPerCell)
	locals, err := s.gather(ctx, r, p.q, searchapi.Options{N: n})
	if err != nil {
		return nil, err
	}
	all := merge(locals, n*len(locals))
	var data fcSearchData
	if p.web {
		data.Web = []fcWeb{}
		for i, h := range all[:min(len(all), p.limit)] {
			data.Web = append(data.Web, fcWeb{URL: h.URL, Title: h.Title, Description: h.Snippet, Position: i + 1})
		}
	}
	if p.news {
		data.News = []fcNews{}
		for _, h := range all {
			if len(data.News) == p.limit {
				break
			}
			if searchapi.Kind(h.Type) != "news" {
				continue
			}
			n := fcNews{URL: h.URL, Title: h.Title, Snippet: h.Snippet, Position: len(data.News) + 1}
			if !h.Date.IsZero() {
				n.Date = h.Date.UTC().Format(time.RFC3339)
			}
			data.News = append(data.News, n)
		}
	}
	body := marshal(fcSearchAnswer{Success: true, Data: data})
	if len(all) > 0 {
		s.popular.record(p.q, s.cfg.Account(r), s.cfg.Now())
		s.archive.put(p.archiveKey, body, s.cfg.Now().Add(s.cfg.Archive))
	}
	return body, nil
}

// v2Scrape scrapes the results of ans (each distinct URL once, within
// ctx) and answers them with their documents. The first result is
// scraped alone: its scrape refusing the options is the search's 400, and
// nothing is charged. Then the search's answer starts, so the search is
// charged before the other scrapes are: their charges cannot use up the
// credit the search's own needs, which would have the meter answer 402
// in place of the documents already paid for (only the first scrape's
// comes before it). They run at most s.cfg.Scrapes at once. A result whose scrape fails keeps its
// search fields and gets Firecrawl's metadata of a failed scrape.
func (s *server) v2Scrape(ctx context.Context, w http.ResponseWriter, r *http.Request, pipeline http.Handler, p *fcPlan, ans *fcSearchAnswer, cache string) {
	urls := scrapeTargets(&ans.Data)
	if len(urls) == 0 {
		s.write(w, metering.KindSearch, cache, 0, 0, marshal(ans))
		return
	}
	sc := newScraper(pipeline, callerOf(r), p.scrape, s.cfg.Scrapes)
	out := make([]*fcScraped, len(urls))
	out[0] = sc.scrape(ctx, urls[0])
	if ref := out[0].optionsRefusal(); ref != nil {
		fcapi.WriteError(w, ref)
		return
	}
	s.start(w, metering.KindSearch, cache, 0, 0)
	if len(urls) > 1 {
		sc.all(ctx, urls[1:], out[1:])
	}
	docs := make(map[string][]member, len(urls))
	for i, u := range urls {
		docs[u] = out[i].document()
	}
	for i := range ans.Data.Web {
		ans.Data.Web[i].doc = docs[ans.Data.Web[i].URL]
	}
	for i := range ans.Data.News {
		ans.Data.News[i].doc = docs[ans.Data.News[i].URL]
	}
	w.Write(marshal(ans))
	w.Write([]byte("\n"))
}

// plan checks the request: a wrong value is BAD_REQUEST, a feature trawl's
// index does not have is UNSUPPORTED_FEATURE, never a different result.
func (req *fcSearchRequest) plan() (*fcPlan, error) {
	p := &fcPlan{q: strings.TrimSpace(req.Query), limit: fcDefaultLimit}
	if p.q == "" {
		return nil, fcapi.BadRequest("query", "query is required")
	}
	if err := searchapi.CheckQuery(p.q); err != nil {
		return nil, fcapi.BadRequest("query", strings.Replace(err.Error(), "q ", "query ", 1))
	}
	if req.Limit != nil {
		if *req.Limit < 1 || *req.Limit > fcMaxLimit {
			return nil, fcapi.BadRequest("limit", fmt.Sprintf("limit must be between 1 and %d", fcMaxLimit))
		}
		p.limit = *req.Limit
	}
	if req.Timeout != nil {
		if *req.Timeout < 1 || *req.Timeout > 300000 {
			return nil, fcapi.BadRequest("timeout", "timeout must be between 1 and 300000 milliseconds")
		}
		p.timeout = time.Duration(*req.Timeout) * time.Millisecond
	}
	if len(req.Sources) == 0 {
		p.web = true
	}
	for i, raw := range req.Sources {
		var name string
		if json.Unmarshal(raw, &name) != nil {
			var obj struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(raw, &obj) != nil || obj.Type == "" {
				return nil, fcapi.BadRequest(fmt.Sprintf("sources.%d", i), "a source is \"web\", \"news\", \"images\" or {\"type\": one of them}")
			}
			name = obj.Type
		}
		switch name {
		case "web":
			p.web = true
		case "news":
			p.news = true
		case "images", "alexandria":
			return nil, fcapi.Unsupported(fmt.Sprintf("sources.%d", i), "source "+name+" is not served: trawl's index has web pages and news articles only")
		default:
			return nil, fcapi.BadRequest(fmt.Sprintf("sources.%d", i), fmt.Sprintf("unknown source %q", name))
		}
	}
	switch {
	case len(req.Categories) > 0:
		return nil, fcapi.Unsupported("categories", "categories are not served: trawl's index does not filter by category")
	case len(req.IncludeDomains) > 0:
		return nil, fcapi.Unsupported("includeDomains", "includeDomains is not served")
	case len(req.ExcludeDomains) > 0:
		return nil, fcapi.Unsupported("excludeDomains", "excludeDomains is not served")
	case req.Tbs != "":
		return nil, fcapi.Unsupported("tbs", "tbs (a time range) is not served: trawl's index does not filter by date")
	case req.Location != "":
		return nil, fcapi.Unsupported("location", "location is not served: trawl's index is not localized")
	case req.Country != "" && !strings.EqualFold(req.Country, "US"):
		return nil, fcapi.Unsupported("country", "country other than US is not served: trawl's index is not localized")
	case len(req.Enterprise) > 0:
		return nil, fcapi.Unsupported("enterprise", "enterprise search options are not served")
	}
	// Firecrawl scrapes the results when formats lists any; without,
	// the options are not used.
	if raw, ok := req.ScrapeOptions["formats"]; ok && string(raw) != "null" {
		var formats []json.RawMessage
		if json.Unmarshal(raw, &formats) != nil {
			return nil, fcapi.BadRequest("scrapeOptions.formats", "scrapeOptions.formats must be an array of formats")
		}
		if len(formats) > 0 {
			p.scrape = req.ScrapeOptions
		}
	}
	p.archiveKey = fmt.Sprintf("f%d\x00%v%v\x00%s", p.limit, p.web, p.news, strings.ToLower(p.q))
	return p, nil
}

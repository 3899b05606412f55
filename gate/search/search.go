// Package search is the gate's GET /search and GET /answer: it asks every
// live cell of its region for its best pages (the cell route
// GET /search/local, signed with the region's key like every request to a
// cell; an answer not signed over the request's nonce is not used),
// merges them by score, collapses near-duplicates across cells, builds
// the rich block and the answer, and reports the call's usage in the
// usage header (internal/metering) for the meter, which bills it: a live
// search, or half when the same query was answered in the last minutes
// (the gate's archive of results, cache "archive").
//
// docs/search.md says why the gate gathers (each cell indexes what it
// archived, so a query must reach them all) and what a cell's loss costs.
package search

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/members"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/internal/searchapi"
)

// EngineIndex names the search index on usage lines (§2.8 engine).
const EngineIndex = "index"

// Model writes an answer from passages only (the operator's model): its
// text ("" when the passages do not answer), the passages it cited and
// the tokens it used (billed even when it fails).
type Model func(ctx context.Context, q string, passages []searchapi.Passage) (*searchapi.Generated, error)

// errNoModel: no cell of the region has a model.
var errNoModel = errors.New("no model")

// Config configures the handler.
type Config struct {
	// Cells are the region's live cells.
	Cells func() []members.Meta
	// Keys sign the requests to cells and check their answers.
	Keys *regionauth.Keys
	// Account is the caller's account id.
	Account func(*http.Request) string
	// Private is the region's policy on private networks (the cells
	// refuse a request that does not say what they allow).
	Private bool
	// Client reaches the cells; default a client with a 3 s timeout.
	Client *http.Client
	// Model writes deep answers; nil: the operator's model of the
	// region's cells (--llm-provider), asked at POST /search/generate of a
	// live cell; a region whose cells have none quotes.
	Model Model
	// Archive is how long a query's results are served again at the
	// archive price (default 1 minute; negative: never); an answer
	// without results is not kept.
	Archive time.Duration
	// Pipeline returns the gate's handler chain for a request's context
	// (the gate's whole pipeline, from trawl_trace): POST /v2/search with
	// scrapeOptions.formats scrapes each result through it as the
	// caller's POST /v2/scrape. nil, or nil returned: such a search is
	// refused (500).
	Pipeline func(context.Context) http.Handler
	// Scrapes is how many results of one search are scraped at once
	// (default 4).
	Scrapes int
	Now     func() time.Time
	Logger  *slog.Logger
}

// Handlers are the search's handlers by their row of the route table
// (internal/routes, service search): GET /search, GET /answer and
// Firecrawl's POST /v2/search (firecrawl.go).
func Handlers(cfg Config) routes.Handlers {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 3 * time.Second}
	}
	if cfg.Archive == 0 {
		cfg.Archive = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Account == nil {
		cfg.Account = func(*http.Request) string { return "" }
	}
	if cfg.Pipeline == nil {
		cfg.Pipeline = func(context.Context) http.Handler { return nil }
	}
	if cfg.Scrapes <= 0 {
		cfg.Scrapes = 4
	}
	s := &server{cfg: cfg, archive: newLRU(1024), popular: newPopular()}
	if s.cfg.Model == nil {
		s.cfg.Model = s.cellModel
	}
	return routes.Handlers{
		"GET /search": http.HandlerFunc(s.search),
		"GET /answer": http.HandlerFunc(s.answer),
		// Firecrawl's v2 search over the same gathering and billing.
		"POST /v2/search": http.HandlerFunc(s.v2Search),
	}
}

type server struct {
	cfg     Config
	archive *lru
	popular *popular // what callers searched, for related queries

	mu          sync.Mutex
	noModelTill time.Time // the cells said they have no model: not asked again until then
	next        int       // the cell asked next (round robin)
}

// Result is an item of results (docs/spec/hosted-api.md §2.3).
type Result struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Snippet string `json:"snippet"`
}

// Response is GET /search's answer.
type Response struct {
	Results []Result        `json:"results"`
	Rich    *searchapi.Rich `json:"rich,omitempty"`
}

// AnswerResponse is GET /answer's (§2.4).
type AnswerResponse struct {
	Answered     bool              `json:"answered"`
	Answer       *searchapi.Answer `json:"answer,omitempty"`
	Experimental bool              `json:"experimental"`
}

// flag reads a 0/1 parameter.
func flag(v url.Values, name string, def bool) (bool, error) {
	switch v.Get(name) {
	case "":
		return def, nil
	case "0":
		return false, nil
	case "1":
		return true, nil
	}
	return false, fmt.Errorf("%s must be 0 or 1", name)
}

func (s *server) search(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q := strings.TrimSpace(v.Get("q"))
	rich, err := flag(v, "rich", false)
	if err == nil {
		err = searchapi.CheckQuery(q)
	}
	if err != nil {
		httpjson.Error(w, http.StatusBadRequest, "bad_input", err.Error())
		return
	}
	key := fmt.Sprintf("s%v\x00%s", rich, strings.ToLower(q))
	if body, ok := s.archive.get(key, s.cfg.Now()); ok {
		s.popular.record(q, s.cfg.Account(r), s.cfg.Now()) // kept only with results
		s.write(w, metering.KindSearch, metering.CacheArchive, 0, 0, body)
		return
	}
	resp, err := s.run(r.Context(), r, q, rich)
	if err != nil {
		s.unavailable(w, err)
		return
	}
	if len(resp.Results) > 0 {
		s.popular.record(q, s.cfg.Account(r), s.cfg.Now())
	}
	body := marshal(resp)
	if len(resp.Results) > 0 {
		// An empty answer is not kept: the pages may be being indexed.
		s.archive.put(key, body, s.cfg.Now().Add(s.cfg.Archive))
	}
	s.write(w, metering.KindSearch, metering.CacheMiss, 0, 0, body)
}

// run gathers, merges and (rich) corrects and enriches.
func (s *server) run(ctx context.Context, r *http.Request, q string, rich bool) (*Response, error) {
	opts := searchapi.Options{N: 10, Rich: rich, Spell: rich}
	locals, err := s.gather(ctx, r, q, opts)
	if err != nil {
		return nil, err
	}
	resp := &Response{}
	var dym string
	if rich {
		if c := bestCorrection(locals); c != nil {
			// The query run corrected.
			dym = c.Query
			opts.Spell = false
			if again, err := s.gather(ctx, r, c.Query, opts); err == nil {
				locals, q = again, c.Query
			} else {
				dym = ""
			}
		}
	}
	hits := merge(locals, 10)
	resp.Results = make([]Result, len(hits))
	for i, h := range hits {
		resp.Results[i] = Result{Title: h.Title, URL: h.URL, Snippet: h.Snippet}
	}
	if rich {
		resp.Rich = richBlock(locals, hits, q)
		resp.Rich.DidYouMean = dym
		// What other callers searched first (k-anonymous), then the
		// words of the top pages.
		if pop := s.popular.related(q, 5, s.cfg.Now()); len(pop) > 0 {
			seen := map[string]bool{}
			var rq []string
			for _, x := range append(pop, resp.Rich.RelatedQueries...) {
				if !seen[x] && len(rq) < 8 {
					seen[x] = true
					rq = append(rq, x)
				}
			}
			resp.Rich.RelatedQueries = rq
		}
		if isEmpty(resp.Rich) {
			resp.Rich = &searchapi.Rich{}
		}
	}
	return resp, nil
}

func isEmpty(r *searchapi.Rich) bool {
	b, _ := json.Marshal(r)
	return string(b) == "{}"
}

func (s *server) answer(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q := strings.TrimSpace(v.Get("q"))
	deep, err := flag(v, "deep", true)
	if err == nil {
		err = searchapi.CheckQuery(q)
	}
	if err != nil {
		httpjson.Error(w, http.StatusBadRequest, "bad_input", err.Error())
		return
	}
	key := fmt.Sprintf("a%v\x00%s", deep, strings.ToLower(q))
	if body, ok := s.archive.get(key, s.cfg.Now()); ok {
		s.write(w, metering.KindAnswer, metering.CacheArchive, 0, 0, body)
		return
	}
	locals, err := s.gather(r.Context(), r, q, searchapi.Options{N: 10, Rich: !deep, Passages: deep})
	if err != nil {
		s.unavailable(w, err)
		return
	}
	out := AnswerResponse{Experimental: true}
	var in, outTok int
	hits := merge(locals, 10)
	if deep {
		ps := passages(locals, hits)
		if len(ps) > 0 {
			use := ps[:min(len(ps), 5)]
			g, err := s.cfg.Model(r.Context(), q, use)
			if g != nil {
				in, outTok = g.InTokens, g.OutTokens
			}
			switch {
			case err == nil && strings.TrimSpace(g.Text) != "":
				src := use
				if len(g.Cited) > 0 {
					src = nil
					for _, i := range g.Cited {
						if i >= 0 && i < len(use) {
							src = append(src, use[i])
						}
					}
				}
				out.Answer = &searchapi.Answer{Kind: "generated", Text: strings.TrimSpace(g.Text), Sources: sources(src)}
			case err != nil && !errors.Is(err, errNoModel):
				s.cfg.Logger.Warn("search: the model did not answer; quoting instead", "err", err)
			}
		}
		if out.Answer == nil {
			out.Answer = searchapi.Quote(ps)
		}
	} else {
		out.Answer = richBlock(locals, hits, q).Answer
	}
	out.Answered = out.Answer != nil
	body := marshal(out)
	if len(hits) > 0 {
		s.archive.put(key, body, s.cfg.Now().Add(s.cfg.Archive))
	}
	s.write(w, metering.KindAnswer, metering.CacheMiss, in, outTok, body)
}

func sources(ps []searchapi.Passage) []searchapi.Link {
	var out []searchapi.Link
	seen := map[string]bool{}
	for _, p := range ps {
		if !seen[p.URL] {
			seen[p.URL] = true
			out = append(out, searchapi.Link{Title: p.Title, URL: p.URL})
		}
	}
	return out
}

// marshal is v as JSON without escaping the snippets' marks (<b>).
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// write answers body with the call's usage report.
func (s *server) write(w http.ResponseWriter, kind, cache string, in, out int, body []byte) {
	s.start(w, kind, cache, in, out)
	w.Write(body)
	w.Write([]byte("\n"))
}

// start starts a 200 answer with the call's usage report: the meter
// charges the call as the answer starts.
func (s *server) start(w http.ResponseWriter, kind, cache string, in, out int) {
	u := metering.Usage{Kind: kind, Engine: EngineIndex, Cache: cache, InTokens: in, OutTokens: out, Boxes: []string{EngineIndex}}
	h := w.Header()
	h.Set(metering.Header, u.String())
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
}

func (s *server) unavailable(w http.ResponseWriter, err error) {
	s.cfg.Logger.Warn("search: no cell answered", "err", err)
	httpjson.Error(w, http.StatusServiceUnavailable, "cell_unavailable", "no cell of this region could answer the search; nothing was charged, repeat it in a few seconds")
}

// gather asks every live cell; it fails only when none answers.
func (s *server) gather(ctx context.Context, r *http.Request, q string, o searchapi.Options) ([]*searchapi.Local, error) {
	cells := s.cfg.Cells()
	if len(cells) == 0 {
		return nil, fmt.Errorf("no live cell")
	}
	v := url.Values{"q": {q}, "n": {fmt.Sprint(o.N)}}
	for name, on := range map[string]bool{"rich": o.Rich, "spell": o.Spell, "passages": o.Passages} {
		if on {
			v.Set(name, "1")
		}
	}
	account := s.cfg.Account(r)
	out := make([]*searchapi.Local, len(cells))
	errs := make([]error, len(cells))
	var wg sync.WaitGroup
	for i, c := range cells {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = s.ask(ctx, c, v, account)
		}()
	}
	wg.Wait()
	var got []*searchapi.Local
	var firstErr error
	for i := range out {
		if errs[i] != nil {
			s.cfg.Logger.Warn("search: a cell did not answer; its pages are missing from this answer", "cell", cells[i].Name, "err", errs[i])
			firstErr = cmpErr(firstErr, errs[i])
			continue
		}
		got = append(got, out[i])
	}
	if len(got) == 0 {
		return nil, firstErr
	}
	return got, nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// ask sends one cell the query, signed, and checks its signed answer.
func (s *server) ask(ctx context.Context, c members.Meta, v url.Values, account string) (*searchapi.Local, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.API+searchapi.LocalPath+"?"+v.Encode(), nil)
	if err != nil {
		return nil, err
	}
	a, err := s.cfg.Keys.Do(s.cfg.Client, req, regionauth.Claims{Account: account, Private: s.cfg.Private}, s.cfg.Now(), searchapi.MaxLocal)
	if err == nil {
		err = a.OK()
	}
	if err != nil {
		return nil, fmt.Errorf("cell %s: %w", c.Name, err)
	}
	var l searchapi.Local
	if err := json.Unmarshal(a.Body, &l); err != nil {
		return nil, fmt.Errorf("cell %s: %w", c.Name, err)
	}
	return &l, nil
}

// cellModel is the default Model: a live cell's operator model, at
// POST /search/generate (signed like every request to a cell, its answer
// signed over the nonce; the tokens come from its signed usage report).
// Cells without a model answer 501: the gate then quotes, and does not ask
// again for a minute.
func (s *server) cellModel(ctx context.Context, q string, ps []searchapi.Passage) (*searchapi.Generated, error) {
	now := s.cfg.Now()
	s.mu.Lock()
	skip := now.Before(s.noModelTill)
	s.next++
	n := s.next
	s.mu.Unlock()
	cells := s.cfg.Cells()
	if skip || len(cells) == 0 {
		return nil, errNoModel
	}
	c := cells[n%len(cells)]
	body, _ := json.Marshal(searchapi.GenerateRequest{Q: q, Passages: ps})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+c.API+searchapi.GeneratePath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	// The model may take longer than a search: its own deadline.
	client := *s.cfg.Client
	client.Timeout = 60 * time.Second
	a, err := s.cfg.Keys.Do(&client, req, regionauth.Claims{Private: s.cfg.Private}, now, searchapi.MaxGenerated)
	if err != nil {
		return nil, fmt.Errorf("cell %s: %w", c.Name, err)
	}
	var u metering.Usage
	if a.Usage != "" {
		if err := json.Unmarshal([]byte(a.Usage), &u); err != nil {
			return nil, fmt.Errorf("cell %s: usage report: %w", c.Name, err)
		}
	}
	g := &searchapi.Generated{InTokens: u.InTokens, OutTokens: u.OutTokens}
	if a.Status == http.StatusNotImplemented {
		s.mu.Lock()
		s.noModelTill = now.Add(time.Minute)
		s.mu.Unlock()
		return nil, errNoModel
	}
	if err := a.OK(); err != nil {
		return g, fmt.Errorf("cell %s: %w", c.Name, err)
	}
	var ans searchapi.Generated
	if err := json.Unmarshal(a.Body, &ans); err != nil {
		return g, fmt.Errorf("cell %s: %w", c.Name, err)
	}
	g.Text, g.Cited = ans.Text, ans.Cited
	return g, nil
}

// merge is the cells' results by score, one a URL (two cells index each
// page, cell/pages.go), near-duplicates collapsed, the best n.
func merge(locals []*searchapi.Local, n int) []searchapi.Hit {
	var all []searchapi.Hit
	for _, l := range locals {
		all = append(all, l.Results...)
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].Score != all[j].Score {
			return all[i].Score > all[j].Score
		}
		return all[i].URL < all[j].URL
	})
	seen := map[string]bool{}
	all = slices.DeleteFunc(all, func(h searchapi.Hit) bool {
		dup := seen[h.URL]
		seen[h.URL] = true
		return dup
	})
	all = searchapi.Collapse(all)
	if len(all) > n {
		all = all[:n]
	}
	return all
}

// bestCorrection is the correction the most attested across cells.
func bestCorrection(locals []*searchapi.Local) *searchapi.Correction {
	var best *searchapi.Correction
	for _, l := range locals {
		if c := l.Correction; c != nil && (best == nil || c.Freq > best.Freq) {
			best = c
		}
	}
	return best
}

// passages are the cells' passages of the merged results, ranked by their
// result's place in the merged list.
func passages(locals []*searchapi.Local, hits []searchapi.Hit) []searchapi.Passage {
	rank := map[string]int{}
	for i, h := range hits {
		rank[h.URL] = i
	}
	var ps []searchapi.Passage
	seen := map[[2]string]bool{} // the same passage from both cells that index its page
	for _, l := range locals {
		for _, p := range l.Passages {
			if i, ok := rank[p.URL]; ok && !seen[[2]string{p.URL, p.Text}] {
				seen[[2]string{p.URL, p.Text}] = true
				p.Rank = i
				ps = append(ps, p)
			}
		}
	}
	searchapi.SortPassages(ps)
	return ps
}

// richBlock builds the rich block from the cells' parts: entity and
// follow-up questions from the cell holding the best result, related
// queries from all, news, videos and discussions from the results' types,
// and the quoted answer when one is confident.
func richBlock(locals []*searchapi.Local, hits []searchapi.Hit, q string) *searchapi.Rich {
	rb := &searchapi.Rich{}
	if len(hits) == 0 {
		return rb
	}
	top := hits[0].URL
	seen := map[string]bool{}
	for _, l := range locals {
		if l.Rich == nil {
			continue
		}
		if len(l.Results) > 0 && l.Results[0].URL == top {
			rb.Entity = l.Rich.Entity
			rb.FollowUpQuestions = l.Rich.FollowUpQuestions
		}
		for _, rq := range l.Rich.RelatedQueries {
			if !seen[rq] && len(rb.RelatedQueries) < 8 {
				seen[rq] = true
				rb.RelatedQueries = append(rb.RelatedQueries, rq)
			}
		}
	}
	for _, h := range hits {
		link := searchapi.Link{Title: h.Title, URL: h.URL}
		switch searchapi.Kind(h.Type) {
		case "news":
			rb.News = append(rb.News, link)
		case "videos":
			rb.Videos = append(rb.Videos, link)
		case "discussions":
			rb.Discussions = append(rb.Discussions, link)
		}
	}
	rb.Answer = searchapi.Quote(passages(locals, hits))
	return rb
}

// lru is the archive of results: a query's answer body until it expires.
type lru struct {
	mu    sync.Mutex
	max   int
	order *list.List
	items map[string]*list.Element
}

type entry struct {
	key     string
	body    []byte
	expires time.Time
}

func newLRU(n int) *lru { return &lru{max: n, order: list.New(), items: map[string]*list.Element{}} }

func (c *lru) get(key string, now time.Time) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[key]
	if !ok {
		return nil, false
	}
	en := e.Value.(*entry)
	if now.After(en.expires) {
		c.order.Remove(e)
		delete(c.items, key)
		return nil, false
	}
	c.order.MoveToFront(e)
	return en.body, true
}

func (c *lru) put(key string, body []byte, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		e.Value = &entry{key, body, expires}
		c.order.MoveToFront(e)
		return
	}
	c.items[key] = c.order.PushFront(&entry{key, body, expires})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*entry).key)
	}
}

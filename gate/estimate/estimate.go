// Package estimate answers POST /v1/estimate (docs/spec/hosted-api.md §2.10): what a call
// would cost before it is made. Every number comes from the price table
// (billing.Prices.Quote); what is not known in advance (the effort level a
// site needs, how many model tokens a call uses) is a band drawn from what
// the Observer saw cells do on real traffic.
//
// An estimate is never billed. It assumes live work: a cached page costs
// nothing and an archived one a part of the price (archive_percent).
package estimate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/urlpolicy"
	"github.com/trawlhq/trawl/ledger"
)

// Limits of a request (docs/spec/hosted-api.md §4, §8).
const (
	MaxBatchURLs = 50
	MaxJobURLs   = 10_000
	MaxUnits     = 100_000 // recipe units in one estimate
)

// MonitorPeriod is what a monitor estimate covers.
const MonitorPeriod = 30 * 24 * time.Hour

// minTokenCalls is how many calls of a kind must have been seen before
// their band replaces the default one.
const minTokenCalls = 20

// defaultTokenBands are assumed for a kind with tokens before
// minTokenCalls calls of it were seen: a short page to a long one, a few
// records to many. docs/api.md lists them.
var defaultTokenBands = map[string]TokenBand{
	billing.KindExtract: {InMin: 1_000, InMax: 20_000, OutMin: 100, OutMax: 2_000},
	billing.KindAnswer:  {InMin: 2_000, InMax: 30_000, OutMin: 100, OutMax: 1_500},
}

// defaultTokenBand is for a kind the table gives tokens and the map above
// does not know.
var defaultTokenBand = TokenBand{InMin: 1_000, InMax: 20_000, OutMin: 100, OutMax: 2_000}

// Endpoints names the endpoints an estimate prices, with their billing
// kind.
var Endpoints = []string{"scrape", "batch", "jobs", "extract", "map", "crawl", "search", "answer", "recipe", "monitor"}

var endpointKind = map[string]string{
	"scrape":  billing.KindScrape,
	"batch":   billing.KindBatch,
	"jobs":    billing.KindJob,
	"extract": billing.KindExtract,
	"map":     billing.KindMap,
	"crawl":   billing.KindCrawl,
	"search":  billing.KindSearch,
	"answer":  billing.KindAnswer,
	"recipe":  billing.KindRecipe,
	"monitor": billing.KindMonitorCheck,
}

// endpointAlias accepts the route's own spelling too.
var endpointAlias = map[string]string{
	"scrape/batch": "batch",
	"scrape/jobs":  "jobs",
	"job":          "jobs",
	"recipes":      "recipe",
	"monitors":     "monitor",
	"v2/map":       "map",
}

// Request is the body of POST /v1/estimate: the body of the call being
// priced plus endpoint. Fields of that call an estimate does not need
// (format, proxy, schema, q, recipe inputs …) are accepted and ignored.
type Request struct {
	// Endpoint is one of Endpoints.
	Endpoint string `json:"endpoint"`
	// URL is the page of scrape, extract and monitor, and the site of
	// map.
	URL string `json:"url"`
	// URLs are the pages of batch (at most 50) and jobs (at most 10,000).
	URLs []string `json:"urls"`
	// Content is extract's own text, instead of url: nothing is fetched.
	Content string `json:"content"`
	// Every is a monitor's interval (4m, 15m, 1h, 6h, 1d, 1w; default 1d).
	Every string `json:"every"`
	// Units is how many units of a recipe run to price (default 1; a
	// recipe's cost hint says how many a run takes).
	Units int `json:"units"`
	// Limit is the most pages a crawl of url scrapes (Firecrawl's limit;
	// default MaxCrawlPages).
	Limit int `json:"limit"`
}

// Estimate is the body of a priced estimate (docs/spec/hosted-api.md §2.10).
type Estimate struct {
	// Endpoint is the endpoint priced, Kind its billing kind.
	Endpoint string `json:"endpoint"`
	Kind     string `json:"kind"`
	// Count is how many of the kind's unit the fixed part covers (pages,
	// calls, recipe units, monitor checks).
	Count int `json:"count"`
	// Min and Max bound the cost, live: the sums of the parts.
	Min billing.Amount `json:"min"`
	Max billing.Amount `json:"max"`
	// Text says the same in sentences a person can read.
	Text string `json:"text"`
	// Parts: fixed first (exact), then effort, tokens, changes (bands).
	Parts []Part `json:"parts"`
}

// Part is one component of an estimate.
type Part struct {
	// Name is fixed, effort, tokens or changes.
	Name  string         `json:"name"`
	Min   billing.Amount `json:"min"`
	Max   billing.Amount `json:"max"`
	Exact bool           `json:"exact"`
	// Basis says where the numbers come from.
	Basis string `json:"basis"`
	// Domains (effort) are the sites of the URLs, in the order of first
	// appearance, with what was seen on each.
	Domains []DomainBand `json:"domains,omitempty"`
	// Tokens (tokens) is the band of model tokens per call assumed.
	Tokens *TokenRange `json:"tokens,omitempty"`
}

// DomainBand is what an estimate assumes for one site.
type DomainBand struct {
	Domain string `json:"domain"`
	// URLs is how many of the request's URLs are on it.
	URLs int `json:"urls"`
	// Seen counts the fetches seen per level; all 0 for a site not seen.
	Seen LevelCounts `json:"seen"`
	// MinLevel and MaxLevel are the lowest and highest level seen, or
	// light and browser_proxy for a site not seen.
	MinLevel string `json:"min_level"`
	MaxLevel string `json:"max_level"`
}

// TokenRange is the band of model tokens per call an estimate assumes.
type TokenRange struct {
	TokenBand
	// Default is true when too few calls were seen (under 20) and the
	// band is the default one of the kind.
	Default bool `json:"default"`
}

// BadInputError is a request the estimate refuses (400 bad_input); its
// message is safe to show.
type BadInputError struct{ Message string }

// Error returns the message.
func (e *BadInputError) Error() string { return e.Message }

func badInput(format string, args ...any) error {
	return &BadInputError{Message: fmt.Sprintf(format, args...)}
}

// Compute prices req with prices and what obs saw (obs may be nil:
// nothing seen). A refused request is a *BadInputError; any other error is
// a price table that cannot price a kind.
func Compute(prices *billing.Prices, obs *Observer, req *Request) (*Estimate, error) {
	ep := strings.ToLower(strings.Trim(strings.TrimSpace(req.Endpoint), "/"))
	if a, ok := endpointAlias[ep]; ok {
		ep = a
	}
	kind, ok := endpointKind[ep]
	if !ok {
		if ep == "" {
			return nil, badInput("endpoint is required: one of %s", strings.Join(Endpoints, ", "))
		}
		shown := req.Endpoint
		if len(shown) > 40 {
			shown = shown[:40] + "…"
		}
		return nil, badInput("unknown endpoint %q: use one of %s", shown, strings.Join(Endpoints, ", "))
	}
	c := &calc{prices: prices, obs: obs, ep: ep, kind: kind, est: &Estimate{Endpoint: ep, Kind: kind}}
	var err error
	switch ep {
	case "scrape":
		err = c.pages(req, 1, 1)
	case "batch":
		err = c.pages(req, 1, MaxBatchURLs)
	case "jobs":
		err = c.pages(req, 1, MaxJobURLs)
	case "extract":
		err = c.extract(req)
	case "map":
		err = c.mapSite(req)
	case "crawl":
		err = c.crawl(req)
	case "search", "answer":
		err = c.call()
	case "recipe":
		err = c.recipe(req)
	case "monitor":
		err = c.monitor(req)
	}
	if err != nil {
		return nil, err
	}
	for _, p := range c.est.Parts {
		c.est.Min += p.Min
		c.est.Max += p.Max
	}
	c.est.Text = c.text()
	return c.est, nil
}

// calc builds one estimate.
type calc struct {
	prices *billing.Prices
	obs    *Observer
	ep     string
	kind   string
	est    *Estimate
	// for the text
	sites   []string // the first few distinct domains
	nSites  int
	domains []DomainBand
	content bool
	every   string
	tokens  *TokenRange
	// changeOne is the price of one monitor change.
	changeOne  billing.Amount
	changeMost int
	checks     int
}

func (c *calc) quote(u billing.Usage) (ledger.MC, error) {
	u.Kind = c.kind
	v, err := c.prices.Quote(u)
	if err != nil {
		return 0, fmt.Errorf("estimate %s: %w", c.ep, err)
	}
	return v, nil
}

func (c *calc) callPrice() billing.CallPrice { return c.prices.Calls[c.kind] }

// checkURL validates one URL of the request the way the call itself
// would, and returns its domain.
func checkURL(field, raw string) (string, error) {
	u, err := urlpolicy.Validate(raw, false)
	if err != nil {
		return "", badInput("%s: %v", field, err)
	}
	return Domain(u.String()), nil
}

// pages prices scrape (url), batch and jobs (urls).
func (c *calc) pages(req *Request, minURLs, maxURLs int) error {
	var urls []string
	field := "urls"
	switch {
	case c.ep == "scrape":
		if len(req.URLs) > 0 {
			return badInput("scrape takes one url; use batch (up to %d urls) or jobs (up to %s) for urls", MaxBatchURLs, commas(MaxJobURLs))
		}
		if strings.TrimSpace(req.URL) == "" {
			return badInput("url is required: the page to scrape")
		}
		urls, field = []string{req.URL}, "url"
	case req.URLs == nil && req.URL != "":
		return badInput("%s takes urls, an array of 1 to %s URLs", c.ep, commas(maxURLs))
	case len(req.URLs) < minURLs:
		return badInput("urls is required: an array of 1 to %s URLs", commas(maxURLs))
	case len(req.URLs) > maxURLs && c.ep == "batch":
		return badInput("batch takes at most %d urls (got %s); use jobs for up to %s", MaxBatchURLs, commas(len(req.URLs)), commas(MaxJobURLs))
	case len(req.URLs) > maxURLs:
		return badInput("jobs take at most %s urls (got %s)", commas(MaxJobURLs), commas(len(req.URLs)))
	default:
		urls = req.URLs
	}
	var doms []string
	for i, raw := range urls {
		f := field
		if field == "urls" {
			f = "urls[" + strconv.Itoa(i) + "]"
		}
		d, err := checkURL(f, raw)
		if err != nil {
			return err
		}
		doms = append(doms, d)
		if !slices.Contains(c.sites, d) && len(c.sites) < 4 {
			c.sites = append(c.sites, d)
		}
	}
	c.nSites = countDistinct(doms)
	if err := c.fixed(len(urls)); err != nil {
		return err
	}
	return c.effort(doms)
}

// fixed adds the exact part: the base price, live at the light level,
// times n.
func (c *calc) fixed(n int) error {
	c.est.Count = n
	unit, err := c.quote(billing.Usage{Level: billing.LevelLight, Count: 1})
	if err != nil {
		return err
	}
	total, err := c.quote(billing.Usage{Level: billing.LevelLight, Count: n})
	if err != nil {
		return err
	}
	cp := c.callPrice()
	basis := fmt.Sprintf("%s %s × %s per %s", commas(n), plural(cp.Per, n), unit, cp.Per)
	switch {
	case c.kind == billing.KindMonitorCheck:
		basis += fmt.Sprintf(", one check every %s for %d days", c.every, int(MonitorPeriod.Hours()/24))
	case cp.Effort:
		basis += ", live at the light level"
	case c.kind == billing.KindJob:
		basis += ", live; jobs are billed at the light level whatever a page needs"
	case c.kind == billing.KindMap:
		basis += ", however many sitemaps and pages the map reads"
	case cp.Cache:
		basis += ", live"
	}
	if cp.Tokens {
		basis += "; model tokens are extra"
	}
	c.est.Parts = append(c.est.Parts, Part{Name: "fixed", Min: billing.Amount(total), Max: billing.Amount(total), Exact: true, Basis: basis})
	return nil
}

var levelOrder = billing.Levels // light, browser, browser_proxy

// effort adds the band of the effort level for pages on doms (one entry
// per page), when the kind has effort and there are pages.
func (c *calc) effort(doms []string) error {
	if !c.callPrice().Effort || len(doms) == 0 {
		return nil
	}
	idx := map[string]int{}
	var bands []DomainBand
	for _, d := range doms {
		i, ok := idx[d]
		if !ok {
			i = len(bands)
			idx[d] = i
			bands = append(bands, DomainBand{Domain: d})
		}
		bands[i].URLs++
	}
	var lo, hi ledger.MC
	for i := range bands {
		b := &bands[i]
		b.Seen = c.obs.Levels(b.Domain)
		b.MinLevel, b.MaxLevel = levelOrder[0], levelOrder[len(levelOrder)-1]
		if b.Seen.Total() > 0 {
			n := b.Seen.levels()
			first, last := -1, 0
			for l, v := range n {
				if v > 0 {
					if first < 0 {
						first = l
					}
					last = l
				}
			}
			b.MinLevel, b.MaxLevel = levelOrder[first], levelOrder[last]
		}
		base, err := c.quote(billing.Usage{Level: billing.LevelLight, Count: b.URLs})
		if err != nil {
			return err
		}
		min, err := c.quote(billing.Usage{Level: b.MinLevel, Count: b.URLs})
		if err != nil {
			return err
		}
		max, err := c.quote(billing.Usage{Level: b.MaxLevel, Count: b.URLs})
		if err != nil {
			return err
		}
		lo += min - base
		hi += max - base
	}
	c.domains = bands
	var mult []string
	for _, l := range levelOrder {
		mult = append(mult, l+" ×"+factor(c.prices.Effort[l]))
	}
	c.est.Parts = append(c.est.Parts, Part{
		Name: "effort", Min: billing.Amount(lo), Max: billing.Amount(hi), Exact: lo == hi,
		Basis: "the level a page needs multiplies its price (" + strings.Join(mult, ", ") +
			"); per site, the band runs from the lowest to the highest level seen there, and from light to browser_proxy on a site not seen yet",
		Domains: bands,
	})
	return nil
}

// extract prices one extract of url or of the caller's content.
func (c *calc) extract(req *Request) error {
	var doms []string
	switch {
	case strings.TrimSpace(req.URL) != "":
		d, err := checkURL("url", req.URL)
		if err != nil {
			return err
		}
		doms = []string{d}
		c.sites, c.nSites = doms, 1
	case req.Content != "":
		c.content = true
	default:
		return badInput("url or content is required: the page to read, or your own text")
	}
	if err := c.fixed(1); err != nil {
		return err
	}
	if err := c.effort(doms); err != nil {
		return err
	}
	return c.modelTokens()
}

// mapSite prices one map of the site of url: one call, whatever it
// reads.
func (c *calc) mapSite(req *Request) error {
	if strings.TrimSpace(req.URL) == "" {
		return badInput("url is required: the site to map")
	}
	d, err := checkURL("url", req.URL)
	if err != nil {
		return err
	}
	c.sites, c.nSites = []string{d}, 1
	return c.fixed(1)
}

// MaxCrawlPages is the most pages one crawl scrapes (docs/firecrawl.md).
const MaxCrawlPages = 10_000

// crawl prices a site crawl of up to req.Limit pages of url's site: each
// page as a page of that site would be (its effort band), were the crawl
// to reach the limit. A crawl is charged per page it scrapes, so the
// estimate is its most.
func (c *calc) crawl(req *Request) error {
	if strings.TrimSpace(req.URL) == "" {
		return badInput("url is required: the page the crawl starts from")
	}
	n := req.Limit
	switch {
	case n == 0:
		n = MaxCrawlPages
	case n < 0 || n > MaxCrawlPages:
		return badInput("limit is 1 to %s pages (got %d)", commas(MaxCrawlPages), req.Limit)
	}
	d, err := checkURL("url", req.URL)
	if err != nil {
		return err
	}
	c.sites, c.nSites = []string{d}, 1
	if err := c.fixed(n); err != nil {
		return err
	}
	doms := make([]string, n)
	for i := range doms {
		doms[i] = d
	}
	return c.effort(doms)
}

// call prices one search or answer.
func (c *calc) call() error {
	if err := c.fixed(1); err != nil {
		return err
	}
	return c.modelTokens()
}

// modelTokens adds the band of model tokens, when the kind has tokens.
func (c *calc) modelTokens() error {
	if !c.callPrice().Tokens {
		return nil
	}
	r := &TokenRange{TokenBand: c.obs.Tokens(c.kind)}
	if r.Calls < minTokenCalls {
		calls := r.Calls
		b, ok := defaultTokenBands[c.kind]
		if !ok {
			b = defaultTokenBand
		}
		r.TokenBand, r.Default = b, true
		r.Calls = calls
	}
	base, err := c.quote(billing.Usage{Level: billing.LevelLight})
	if err != nil {
		return err
	}
	lo, err := c.quote(billing.Usage{Level: billing.LevelLight, InTokens: r.InMin, OutTokens: r.OutMin})
	if err != nil {
		return err
	}
	hi, err := c.quote(billing.Usage{Level: billing.LevelLight, InTokens: r.InMax, OutTokens: r.OutMax})
	if err != nil {
		return err
	}
	t := c.prices.Tokens
	basis := fmt.Sprintf("per block of %s tokens: %s in, %s out (a part block costs a whole one); ", commas(t.Per), t.Input, t.Output)
	if r.Default {
		basis += fmt.Sprintf("%s to %s tokens in and %s to %s out assumed (fewer than %d %s calls seen)",
			commas(r.InMin), commas(r.InMax), commas(r.OutMin), commas(r.OutMax), minTokenCalls, c.kind)
	} else {
		basis += fmt.Sprintf("%s to %s tokens in and %s to %s out: the 5th to 95th percentile of %s %s calls seen",
			commas(r.InMin), commas(r.InMax), commas(r.OutMin), commas(r.OutMax), commas(int(r.Calls)), c.kind)
	}
	c.tokens = r
	c.est.Parts = append(c.est.Parts, Part{
		Name: "tokens", Min: billing.Amount(lo - base), Max: billing.Amount(hi - base), Exact: false, Basis: basis, Tokens: r,
	})
	return nil
}

// recipe prices units of a recipe run.
func (c *calc) recipe(req *Request) error {
	n := req.Units
	switch {
	case n == 0:
		n = 1
	case n < 0 || n > MaxUnits:
		return badInput("units must be a whole number from 1 to %s", commas(MaxUnits))
	}
	return c.fixed(n)
}

// monitor prices a monitor's checks over MonitorPeriod and a band of
// matched changes.
func (c *calc) monitor(req *Request) error {
	if strings.TrimSpace(req.URL) == "" {
		return badInput("url is required: the page to watch")
	}
	d, err := checkURL("url", req.URL)
	if err != nil {
		return err
	}
	c.sites, c.nSites = []string{d}, 1
	every, name, err := parseEvery(req.Every)
	if err != nil {
		return err
	}
	c.every = name
	checks := int((MonitorPeriod + every - 1) / every)
	if err := c.fixed(checks); err != nil {
		return err
	}
	// Changes: a change is confirmed on a check, so there are at most as
	// many as checks; the band assumes at most one a day.
	days := int(MonitorPeriod.Hours() / 24)
	most := min(checks, days)
	saved := c.kind
	c.kind = billing.KindMonitorChange
	defer func() { c.kind = saved }()
	one, err := c.quote(billing.Usage{Count: 1})
	if err != nil {
		return err
	}
	hi, err := c.quote(billing.Usage{Count: most})
	if err != nil {
		return err
	}
	c.changeOne, c.changeMost, c.checks = billing.Amount(one), most, checks
	c.est.Parts = append(c.est.Parts, Part{
		Name: "changes", Min: 0, Max: billing.Amount(hi), Exact: false,
		Basis: fmt.Sprintf("%s per confirmed change that matched; 0 to %d %s assumed (at most one a day, and one per check); a change that matched nothing and a blocked or failed check cost nothing",
			one, most, plural("change", most)),
	})
	return nil
}

// parseEvery reads a monitor interval: 4m, 15m, 1h, 6h, 1d, 1w (any whole
// number of m, h, d, w) or a Go duration; default 1d, minimum 4m. The name
// is for sentences: "hour", "15 minutes".
func parseEvery(s string) (time.Duration, string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		s = "1d"
	}
	var d time.Duration
	var name string
	if n, err := strconv.Atoi(s[:len(s)-1]); err == nil && n > 0 && n < 100_000 {
		unit := map[byte]struct {
			d    time.Duration
			name string
		}{
			'm': {time.Minute, "minute"}, 'h': {time.Hour, "hour"},
			'd': {24 * time.Hour, "day"}, 'w': {7 * 24 * time.Hour, "week"},
		}[s[len(s)-1]]
		if unit.d != 0 {
			d = time.Duration(n) * unit.d
			name = unit.name
			if n > 1 {
				name = commas(n) + " " + plural(unit.name, n)
			}
		}
	}
	if d == 0 {
		var err error
		if d, err = time.ParseDuration(s); err != nil || d <= 0 {
			return 0, "", badInput("every must be an interval like 4m, 15m, 1h, 6h, 1d or 1w")
		}
		name = d.String()
	}
	if d < 4*time.Minute {
		return 0, "", badInput("every must be at least 4m")
	}
	return d, name, nil
}

// factor writes an effort multiplier as the table does: 5, 2.5.
func factor(f billing.Factor) string {
	s := ledger.MC(f).String()
	return strings.TrimRight(strings.TrimRight(s, "0"), ".")
}

// commas writes n with thousands separators: 10,000.
func commas(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + commas(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// plural is word for n things: "url"/"urls", "page"/"pages".
func plural(word string, n int) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func countDistinct(s []string) int {
	seen := make(map[string]struct{}, min(len(s), 64))
	for _, v := range s {
		seen[v] = struct{}{}
	}
	return len(seen)
}

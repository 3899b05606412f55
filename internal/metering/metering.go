// Package metering is the usage contract between a cell and its gate: the
// header a cell writes on every answer it wants billed (Header), the shape
// of that report (Usage), and the names both sides use for what was done
// (call kinds, effort levels, engines, cache outcomes). The cell never
// prices; the gate's meter (caddy-modules/meter) reads the report, prices it
// with the price table (gate/billing), charges it and removes the header
// before the client sees the answer.
//
// It is not the usage history of receipts (gate/usage) nor the public usage
// object of docs/spec/hosted-api.md §2.8, which the gate builds from this
// report and the price it charged. The package imports nothing heavy, so
// the cell links it without the gate.
package metering

import (
	"encoding/json"
	"strconv"
)

// Header carries a cell's usage report to the gate; the gate removes it.
const Header = "Trawl-Usage"

// Call kinds: what one usage line (one receipt) is for. The price table
// (gate/billing) prices each.
const (
	KindScrape        = "scrape"         // POST /scrape, per call
	KindBatch         = "batch"          // POST /scrape/batch, per URL
	KindJob           = "job"            // /scrape/jobs, per URL, at the light level
	KindSearch        = "search"         // GET /search, per live search
	KindAnswer        = "answer"         // GET /answer, the search part (tokens extra)
	KindExtract       = "extract"        // POST /extract, the fetch part (tokens extra)
	KindRecipe        = "recipe"         // POST /recipes/{name}, per unit of a run
	KindMap           = "map"            // POST /v2/map, per call (Units: the documents it fetched)
	KindCrawl         = "crawl"          // POST /v2/crawl, per page, charged in the background as each is scraped
	KindMonitorCheck  = "monitor_check"  // one check per `every` interval
	KindMonitorChange = "monitor_change" // one confirmed change that matched
)

// Kinds lists every call kind.
var Kinds = []string{KindScrape, KindBatch, KindJob, KindSearch, KindAnswer, KindExtract, KindRecipe, KindMap, KindCrawl, KindMonitorCheck, KindMonitorChange}

// Effort levels: how much work a page needed. "http" and "" are the light
// level.
const (
	LevelLight        = "light"
	LevelHTTP         = "http"
	LevelBrowser      = "browser"
	LevelBrowserProxy = "browser_proxy"
)

// Levels lists the effort levels a price table must have.
var Levels = []string{LevelLight, LevelBrowser, LevelBrowserProxy}

// Engines: what produced a page.
const (
	EngineCache        = "cache"
	EngineHTTP         = "http"
	EngineBrowser      = "browser"
	EngineBrowserProxy = "browser_proxy"
)

// Cache outcomes (docs/spec/hosted-api.md §2.8); "" is a miss.
const (
	CacheMiss    = "miss"
	CacheHit     = "hit"
	CacheArchive = "archive"
)

// Usage is a cell's report of how it produced an answer. The field order is
// the wire order; AppendJSON writes exactly what encoding/json would.
//
// Kind and Count may be left out: the gate then bills the kind and count of
// the call as its route table names them. A present Count of 0 bills
// nothing (no URL of the call could be fetched).
type Usage struct {
	// Kind is the billed call kind; "" is the call's own (its route's kind).
	Kind string `json:"kind,omitempty"`
	// Engine produced the page: cache, http, browser (an Engine constant).
	Engine string `json:"engine"`
	// Level is the effort level; "" means the one Engine implies.
	Level string `json:"level,omitempty"`
	// Proxy is the proxy kind a fetch went through (isp, residential).
	// Informational: Level already prices it.
	Proxy string `json:"proxy,omitempty"`
	// Cache is hit, miss or archive.
	Cache string `json:"cache"`
	// Units is the pages this answer fetched itself: 1 on a miss, 0 on a
	// hit or for a call billed by Count; for a map, every document it
	// fetched (robots.txt, sitemaps, pages). Informational (traces); the
	// gate prices Count.
	Units int `json:"units"`
	// Count is how many of the kind's units to bill (URLs of a batch or a
	// job, units of a recipe run); nil: the call's own count.
	Count *int `json:"count,omitempty"`
	// InTokens and OutTokens are language-model tokens, for kinds that
	// price them (answer, extract).
	InTokens  int `json:"in_tokens,omitempty"`
	OutTokens int `json:"out_tokens,omitempty"`
	// Boxes name the components that did the work (§2.8 boxes).
	Boxes []string `json:"boxes,omitempty"`
	// Lines are the inner calls of a call that makes several (§2.8 lines):
	// each becomes its own receipt line.
	Lines []Line `json:"lines,omitempty"`
	// Job and Hold name a job submission or retry the cell keeps held
	// (recorded, not started) until the gate, having charged this report,
	// releases it: POST /scrape/jobs/{Job}/release with HoldHeader = Hold.
	// A hold never released expires and nothing of it runs.
	Job  string `json:"job,omitempty"`
	Hold string `json:"hold,omitempty"`
	// PerLine says the answer is NDJSON whose every line begins with its
	// own signed usage report (LinePrefix): the gate charges each line as
	// it passes and nothing for a line it does not receive. The header's
	// own report then bills nothing.
	PerLine bool `json:"per_line,omitempty"`
}

// HoldHeader carries a hold's token on the gate's release call.
const HoldHeader = "Trawl-Hold"

// ChargedHeader carries, on a release, the credits the gate charged for
// the hold ("3.000"): a Firecrawl batch answers them as its creditsUsed.
const ChargedHeader = "Trawl-Charged"

// ReleasePath is the cell route that releases a held job or retry.
const ReleasePath = "/release"

// Per-line usage (Usage.PerLine): a line of the cell's NDJSON starts with
// LinePrefix, the line's Usage, LineSig and the signature of that usage
// (regionauth.Keys.SignAnswer over LineNonce(nonce, i), status 200 and
// the usage's JSON), then the line's own fields:
//
//	{"usage":{…},"usage_sig":"<hex>","url":…}
//
// The gate replaces the two by the public usage object (docs/spec/hosted-api.md §2.8).
const (
	LinePrefix = `{"usage":`
	LineSig    = `,"usage_sig":"`
)

// LineNonce is what line i (from 0) of the answer to the request with
// nonce is signed over.
func LineNonce(nonce string, i int) string { return nonce + "/line/" + strconv.Itoa(i) }

// Line is one inner call of a usage report: a page fetch (Call scrape,
// with URL) or a model call (Call extract, with Step).
type Line struct {
	Call      string `json:"call"`
	URL       string `json:"url,omitempty"`
	Step      string `json:"step,omitempty"`
	Engine    string `json:"engine,omitempty"`
	Level     string `json:"level,omitempty"`
	Cache     string `json:"cache,omitempty"`
	Count     int    `json:"count,omitempty"`
	InTokens  int    `json:"in_tokens,omitempty"`
	OutTokens int    `json:"out_tokens,omitempty"`
}

// Count returns a pointer to n, for Usage.Count.
func Count(n int) *int { return &n }

// Hit is the report of an answer served from the cache.
var Hit = Usage{Engine: EngineCache, Cache: CacheHit}

const hitJSON = `{"engine":"cache","cache":"hit","units":0}`

// PerURL is the report of a call billed per URL at the light level
// (batches, job submissions and retries), known before any page is
// fetched.
func PerURL(kind string, count int) Usage {
	return Usage{Kind: kind, Engine: EngineHTTP, Cache: CacheMiss, Count: Count(count)}
}

func (u *Usage) isHit() bool {
	return u.Kind == "" && u.Engine == EngineCache && u.Level == "" && u.Proxy == "" && u.Cache == CacheHit &&
		u.Units == 0 && u.Count == nil && u.InTokens == 0 && u.OutTokens == 0 && u.Boxes == nil && u.Lines == nil &&
		u.Job == "" && u.Hold == "" && !u.PerLine
}

// String is the header value. A cache hit costs no allocation.
func (u Usage) String() string {
	if u.isHit() {
		return hitJSON
	}
	var buf [160]byte
	return string(u.AppendJSON(buf[:0]))
}

// AppendJSON appends the JSON form of u to dst.
func (u *Usage) AppendJSON(dst []byte) []byte {
	if u.Boxes != nil || u.Lines != nil || u.Job != "" || u.Hold != "" || u.PerLine || !plain(u.Kind, u.Engine, u.Level, u.Proxy, u.Cache) {
		v := *u                 // a copy, so u itself does not escape
		b, _ := json.Marshal(v) // rare: inner lines, or text that needs escaping
		return append(dst, b...)
	}
	dst = append(dst, '{')
	if u.Kind != "" {
		dst = append(append(append(dst, `"kind":"`...), u.Kind...), `",`...)
	}
	dst = append(append(append(dst, `"engine":"`...), u.Engine...), '"')
	if u.Level != "" {
		dst = append(append(append(dst, `,"level":"`...), u.Level...), '"')
	}
	if u.Proxy != "" {
		dst = append(append(append(dst, `,"proxy":"`...), u.Proxy...), '"')
	}
	dst = append(append(append(dst, `,"cache":"`...), u.Cache...), '"')
	dst = strconv.AppendInt(append(dst, `,"units":`...), int64(u.Units), 10)
	if u.Count != nil {
		dst = strconv.AppendInt(append(dst, `,"count":`...), int64(*u.Count), 10)
	}
	if u.InTokens != 0 {
		dst = strconv.AppendInt(append(dst, `,"in_tokens":`...), int64(u.InTokens), 10)
	}
	if u.OutTokens != 0 {
		dst = strconv.AppendInt(append(dst, `,"out_tokens":`...), int64(u.OutTokens), 10)
	}
	return append(dst, '}')
}

// plain reports whether every s is JSON-safe as it stands (no character
// encoding/json would escape).
func plain(ss ...string) bool {
	for _, s := range ss {
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return false
			}
		}
	}
	return true
}

// Parse reads a usage header. Unknown fields are ignored, so a newer cell
// may report more than an older gate reads.
func Parse(raw string) (Usage, error) {
	var u Usage
	err := json.Unmarshal([]byte(raw), &u)
	return u, err
}

// EffectiveLevel is the effort level of u: named by the cell, or implied by
// its engine.
func (u *Usage) EffectiveLevel() string {
	if u.Level != "" {
		return u.Level
	}
	switch u.Engine {
	case EngineBrowser:
		return LevelBrowser
	case EngineBrowserProxy:
		return LevelBrowserProxy
	}
	return LevelLight
}

package recipe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/andybalholm/cascadia"
	"golang.org/x/net/html"

	"github.com/trawlhq/trawl/cell/content"
	"github.com/trawlhq/trawl/cell/extract"
	"github.com/trawlhq/trawl/internal/cssschema"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/recipespec"
)

// recipespec.Limits of one run.
const (
	// RunTimeout is the longest a run may take (§8).
	RunTimeout = 300 * time.Second
	// MaxRows bounds the rows of a run.
	MaxRows = 10000
	// maxNodes bounds the elements a module or script holds at once.
	maxNodes = 200000
	// maxWarnings bounds meta.warnings.
	maxWarnings = 100
	maxLogLine  = 2000
)

// Fetched is a page a Fetcher got.
type Fetched struct {
	URL         string // final URL
	Status      int
	ContentType string // media type, lower case
	Body        []byte
	Engine      string // http, browser
	Level       string // effort level (metering)
}

// Fetcher fetches pages for runs: through the cell's engine ladder, never
// its cache or archive. session, when set, is one Cookie header line to
// send with this request only; the fetcher must not store or log it.
type Fetcher interface {
	Fetch(ctx context.Context, rawURL, session string) (*Fetched, error)
}

// ErrBlocked is what a Fetcher returns (wrapped) when the site answered
// every engine with its block page.
var ErrBlocked = errors.New("blocked")

// Units of a page by effort level: a unit is a plain page; a page that
// needed the browser is 5, through a proxy 10 (the default price table's
// effort multipliers, docs/billing.md).
var levelUnits = map[string]int{metering.LevelLight: 1, metering.LevelHTTP: 1, "": 1, metering.LevelBrowser: 5, metering.LevelBrowserProxy: 10}

// Meta is a run's meta object (§2.7).
type Meta struct {
	PagesFetched int      `json:"pages_fetched"`
	LLMCalls     int      `json:"llm_calls"`
	ElapsedMS    int64    `json:"elapsed_ms"`
	FromCache    bool     `json:"from_cache"`
	Warnings     []string `json:"warnings"`
	Blocked      *string  `json:"blocked"`
}

// Result is a run: its rows (values in output order) and what it took.
type Result struct {
	Recipe  string
	Version int
	Fields  []string
	Rows    [][]any
	Meta    Meta
	// Lines are the inner calls: a page fetch each (call scrape, with url)
	// and a model call each (call extract, with step).
	Lines []metering.Line
	// Units is what the run bills: its pages by effort level.
	Units     int
	InTokens  int
	OutTokens int
	Engine    string // the highest engine used
	Level     string
}

// MarshalJSON writes the rows as objects with exactly the output fields,
// in order.
func (res *Result) rowsJSON() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, row := range res.Rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('{')
		for j, f := range res.Fields {
			if j > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(f)
			b.Write(k)
			b.WriteByte(':')
			var v any
			if j < len(row) {
				v = row[j]
			}
			vb, err := json.Marshal(v)
			if err != nil {
				vb = []byte("null")
			}
			b.Write(vb)
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.Bytes()
}

// Usage is the run's usage report for the gate.
func (res *Result) Usage(kindBox string) metering.Usage {
	if res.Meta.FromCache {
		return metering.Usage{Kind: metering.KindRecipe, Engine: metering.EngineCache, Cache: metering.CacheHit,
			Count: metering.Count(1), Boxes: []string{"recipe"}}
	}
	engine := res.Engine
	if engine == "" {
		engine = metering.EngineHTTP
	}
	boxes := []string{"recipe", kindBox}
	if res.Meta.PagesFetched > 0 {
		boxes = append(boxes, engine)
	}
	if res.Meta.LLMCalls > 0 {
		boxes = append(boxes, "llm")
	}
	return metering.Usage{Kind: metering.KindRecipe, Engine: engine, Cache: metering.CacheMiss, Units: res.Meta.PagesFetched,
		Count: metering.Count(res.Units), InTokens: res.InTokens, OutTokens: res.OutTokens, Boxes: boxes, Lines: res.Lines}
}

// run is one run's state: the host API every kind goes through.
type run struct {
	rc      *Recipe
	vals    Values
	session string
	hosts   []string // allowed: exact names, "*.suffix"
	fetcher Fetcher
	extr    *extract.Extractor
	start   time.Time

	mu       sync.Mutex
	res      *Result
	nodes    []*html.Node
	pageOf   map[int]*pageRec // node id of a page's document → page
	warnings []string
	fatal    error // a host call that ends the run (host_refused, page_budget, bad session)
	xml      *bool // a json recipe's "xml": read every page as XML (true) or HTML (false)
	modules  *compiled
}

type pageRec struct {
	url   string
	ctype string
	body  []byte
}

func newRun(rc *Recipe, vals Values, f Fetcher, ex *extract.Extractor, mods *compiled) (*run, error) {
	r := &run{rc: rc, vals: vals, fetcher: f, extr: ex, modules: mods, start: time.Now(), pageOf: map[int]*pageRec{},
		res: &Result{Recipe: rc.Name, Version: rc.Version, Fields: rc.Outputs, Rows: [][]any{}}}
	if rc.JSON != nil {
		r.xml = rc.JSON.XML
	}
	if s, ok := vals[recipespec.SessionInput].(string); ok {
		r.session = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "Cookie:"))
	}
	for _, h := range rc.Hosts {
		if name, ok := strings.CutPrefix(h, "{"); ok {
			name = strings.TrimSuffix(name, "}")
			s, _ := vals[name].(string)
			if s == "" {
				continue // an optional input not given
			}
			u, err := url.Parse(strings.TrimSpace(s))
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
				return nil, badInput(fmt.Sprintf("input %s: must be an http or https URL", name))
			}
			r.hosts = append(r.hosts, strings.ToLower(u.Hostname()))
			continue
		}
		r.hosts = append(r.hosts, strings.ToLower(h))
	}
	return r, nil
}

func (r *run) allowed(host string) bool {
	host = strings.ToLower(host)
	for _, h := range r.hosts {
		if suffix, ok := strings.CutPrefix(h, "*."); ok {
			if host == suffix || strings.HasSuffix(host, "."+suffix) {
				return true
			}
		} else if host == h {
			return true
		}
	}
	return false
}

// warn adds a line to meta.warnings.
func (r *run) warn(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.warnings) < maxWarnings {
		if len(s) > maxLogLine {
			s = s[:maxLogLine]
		}
		r.warnings = append(r.warnings, s)
	}
}

// setFatal records the error that ends the run and returns it.
func (r *run) setFatal(err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fatal == nil {
		r.fatal = err
	}
	return r.fatal
}

func (r *run) fatalErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fatal
}

var loginPath = regexp.MustCompile(`(?i)(^|/)(login|log-in|signin|sign-in|sign_in|auth|account/login)(/|\.|$|\?)`)

// fetch fetches a page for the recipe: only from an allowed host, within
// the page budget; with the caller's session when given.
func (r *run) fetch(ctx context.Context, raw string) (int, *pageRec, int, error) {
	if err := r.fatalErr(); err != nil {
		return 0, nil, 0, err
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return 0, nil, 0, fetchFailed("%q is not an http or https URL", raw)
	}
	if !r.allowed(u.Hostname()) {
		return 0, nil, 0, r.setFatal(hostRefused(u.Hostname()))
	}
	r.mu.Lock()
	if r.res.Meta.PagesFetched >= r.rc.PageBudget {
		r.mu.Unlock()
		return 0, nil, 0, r.setFatal(pageBudget(r.rc.PageBudget))
	}
	r.res.Meta.PagesFetched++ // counted before the fetch: a budget holds for concurrent calls
	r.mu.Unlock()
	f, err := r.fetcher.Fetch(ctx, u.String(), r.session)
	if err != nil {
		r.mu.Lock()
		r.res.Meta.PagesFetched--
		r.mu.Unlock()
		if ctx.Err() != nil {
			return 0, nil, 0, ctx.Err()
		}
		if r.session != "" && errors.Is(err, ErrBlocked) {
			return 0, nil, 0, r.badSession(u.Hostname())
		}
		if errors.Is(err, ErrBlocked) {
			return 0, nil, 0, r.setFatal(fetchFailed("%s answered every engine with its block page", u.Hostname()))
		}
		return 0, nil, 0, r.setFatal(fetchFailed("%s could not be fetched: %v", redact(u), err))
	}
	level := f.Level
	if level == "" {
		level = metering.LevelLight
	}
	r.mu.Lock()
	r.res.Units += levelUnits[level]
	r.res.Lines = append(r.res.Lines, metering.Line{Call: metering.KindScrape, URL: redact(u), Engine: f.Engine, Level: level, Cache: metering.CacheMiss, Count: 1})
	if rank(level) >= rank(r.res.Level) {
		r.res.Level, r.res.Engine = level, f.Engine
	}
	r.mu.Unlock()
	if r.session != "" && r.loginWall(u, f) {
		return 0, nil, 0, r.badSession(u.Hostname())
	}
	p := &pageRec{url: f.URL, ctype: f.ContentType, body: f.Body}
	if p.url == "" {
		p.url = u.String()
	}
	id, err := r.addPage(p)
	if err != nil {
		return 0, nil, 0, err
	}
	return id, p, f.Status, nil
}

func rank(level string) int {
	switch level {
	case metering.LevelBrowser:
		return 2
	case metering.LevelBrowserProxy:
		return 3
	case "":
		return 0
	}
	return 1
}

// loginWall: the site refused the session (401, 403), sent the reader
// to a login page, or showed a password form.
func (r *run) loginWall(asked *url.URL, f *Fetched) bool {
	if f.Status == http.StatusUnauthorized || f.Status == http.StatusForbidden {
		return true
	}
	if fu, err := url.Parse(f.URL); err == nil && fu.Path != asked.Path && loginPath.MatchString(fu.Path) && !loginPath.MatchString(asked.Path) {
		return true
	}
	if strings.Contains(f.ContentType, "html") {
		low := bytes.ToLower(f.Body)
		if bytes.Contains(low, []byte(`type="password"`)) || bytes.Contains(low, []byte(`type=password`)) || bytes.Contains(low, []byte(`type='password'`)) {
			return true
		}
	}
	return false
}

func (r *run) badSession(host string) error {
	r.mu.Lock()
	if r.res.Meta.Blocked == nil {
		h := host
		r.res.Meta.Blocked = &h
	}
	r.mu.Unlock()
	return r.setFatal(errBadSession)
}

// redact is u without its query's values' secrets: user info dropped.
func redact(u *url.URL) string {
	c := *u
	c.User = nil
	c.Fragment = ""
	return c.String()
}

// addPage parses a page and registers its document as a node.
func (r *run) addPage(p *pageRec) (int, error) {
	doc, err := parseDoc(p, r.xml)
	if err != nil {
		return 0, fetchFailed("%s could not be read: %v", p.url, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.nodes) >= maxNodes {
		return 0, r.setFatalLocked(moduleLimit("more than %d elements held at once", maxNodes))
	}
	r.nodes = append(r.nodes, doc)
	id := len(r.nodes) - 1
	r.pageOf[id] = p
	return id, nil
}

func (r *run) setFatalLocked(err error) error {
	if r.fatal == nil {
		r.fatal = err
	}
	return r.fatal
}

// isXML: feeds and sitemaps.
func isXML(ctype string, body []byte) bool {
	mt, _, _ := mime.ParseMediaType(ctype)
	if mt == "" {
		mt = ctype
	}
	switch {
	case strings.Contains(mt, "html"): // XHTML too: the HTML parser reads it best
		return false
	case strings.HasSuffix(mt, "/xml"), strings.HasSuffix(mt, "+xml"):
		return true
	}
	return bytes.HasPrefix(bytes.TrimSpace(body), []byte("<?xml"))
}

func parseDoc(p *pageRec, force *bool) (*html.Node, error) {
	if force != nil && *force || force == nil && isXML(p.ctype, p.body) {
		return parseXML(p.body)
	}
	return html.Parse(bytes.NewReader(p.body))
}

// Element is what select returns of a matched element.
type Element struct {
	ID    int               `json:"id"`
	Tag   string            `json:"tag"`
	Text  string            `json:"text"`
	Attrs map[string]string `json:"attrs"`
}

var selCache sync.Map // selector text → cascadia.Selector

func compileSel(css string) (cascadia.Selector, error) {
	if s, ok := selCache.Load(css); ok {
		return s.(cascadia.Selector), nil
	}
	s, err := cssschema.Selector(css)
	if err != nil {
		return nil, err
	}
	selCache.Store(css, s)
	return s, nil
}

// selectAll matches css under node id.
func (r *run) selectAll(id int, css string) ([]Element, error) {
	sel, err := compileSel(css)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if id < 0 || id >= len(r.nodes) {
		return nil, fmt.Errorf("no element %d", id)
	}
	var out []Element
	for _, n := range sel.MatchAll(r.nodes[id]) {
		if len(r.nodes) >= maxNodes {
			return nil, r.setFatalLocked(moduleLimit("more than %d elements held at once", maxNodes))
		}
		r.nodes = append(r.nodes, n)
		el := Element{ID: len(r.nodes) - 1, Tag: n.Data, Text: nodeText(n), Attrs: map[string]string{}}
		for _, a := range n.Attr {
			el.Attrs[a.Key] = a.Val
		}
		out = append(out, el)
	}
	if out == nil {
		out = []Element{}
	}
	return out, nil
}

// extractFrom fills a JSON schema from a page with the extract service's
// extractor (deterministic, or the operator's model).
func (r *run) extractFrom(ctx context.Context, id int, schema json.RawMessage) (any, error) {
	r.mu.Lock()
	p := r.pageOf[id]
	r.mu.Unlock()
	if p == nil {
		return nil, fmt.Errorf("extract: %d is not a fetched page", id)
	}
	req := extract.Request{URL: p.url, Schema: schema}
	plan, err := req.CheckFor(r.extr)
	if err != nil {
		return nil, fmt.Errorf("extract: %v", err)
	}
	pg := extract.Page{URL: p.url, HTML: string(p.body)}
	if isXML(p.ctype, p.body) {
		pg.HTML = ""
	}
	res, err := r.extr.Extract(ctx, pg, plan)
	if err != nil {
		return nil, fmt.Errorf("extract: %v", err)
	}
	r.mu.Lock()
	for _, s := range res.Steps {
		r.res.Meta.LLMCalls++
		r.res.InTokens += s.InTokens
		r.res.OutTokens += s.OutTokens
		r.res.Lines = append(r.res.Lines, metering.Line{Call: metering.KindExtract, Step: s.Name, InTokens: s.InTokens, OutTokens: s.OutTokens})
	}
	r.mu.Unlock()
	return plan.Schema.Ordered(res.Data), nil
}

// Content is a page's main content (cell/content).
type Content struct {
	Title    string `json:"title"`
	Markdown string `json:"markdown"`
}

// mainContent is the main content of fetched page id.
func (r *run) mainContent(id int) (*Content, error) {
	r.mu.Lock()
	p := r.pageOf[id]
	r.mu.Unlock()
	if p == nil {
		return nil, fmt.Errorf("content: %d is not a fetched page", id)
	}
	u, _ := url.Parse(p.url)
	d, err := content.Process(p.body, u, content.Options{})
	if err != nil {
		return nil, fmt.Errorf("content: %v", err)
	}
	return &Content{Title: d.Title, Markdown: d.Markdown}, nil
}

// pageInfo is what a script or module sees of a fetched page.
type pageInfo struct {
	ID          int    `json:"id"`
	URL         string `json:"url"`
	Status      int    `json:"status"`
	ContentType string `json:"content_type"`
	Text        string `json:"text"`
}

// addRows turns objects into rows of the output fields, in order.
func (r *run) addRows(objs []map[string]any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.res.Rows)+len(objs) > MaxRows {
		return r.setFatalLocked(moduleLimit("more than %d rows", MaxRows))
	}
	for _, o := range objs {
		row := make([]any, len(r.rc.Outputs))
		for i, f := range r.rc.Outputs {
			row[i] = o[f]
		}
		r.res.Rows = append(r.res.Rows, row)
	}
	return nil
}

// finish completes the result: warnings for empty fields, elapsed time.
// A run that failed has no rows.
func (r *run) finish(err error) (*Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.res
	res.Meta.ElapsedMS = time.Since(r.start).Milliseconds()
	if err == nil {
		err = r.fatal
	}
	if errors.Is(err, errBadSession) {
		res.Rows = [][]any{}
		res.Meta.Warnings = append([]string{"bad_session"}, r.warnings...)
		return res, nil
	}
	if err != nil {
		res.Rows = [][]any{}
		res.Meta.Warnings = r.warnings
		if res.Meta.Warnings == nil {
			res.Meta.Warnings = []string{}
		}
		return res, err
	}
	for i, f := range res.Fields {
		empty := 0
		for _, row := range res.Rows {
			if row[i] == nil || row[i] == "" {
				empty++
			}
		}
		if empty > 0 {
			r.warnings = append(r.warnings, fmt.Sprintf("empty field %s in %d of %d rows", f, empty, len(res.Rows)))
		}
	}
	res.Meta.Warnings = r.warnings
	if res.Meta.Warnings == nil {
		res.Meta.Warnings = []string{}
	}
	return res, nil
}

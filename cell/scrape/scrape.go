package scrape

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/trawlhq/trawl/cell/content"
	"github.com/trawlhq/trawl/cell/content/pdftext"
	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/fetch/browser"
	"github.com/trawlhq/trawl/cell/fetch/ladder"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

// Key prefixes owned by this package.
var (
	prefixCache   = []byte(store.PrefixCache)
	prefixArchive = []byte(store.PrefixArchive)
)

// Config configures a Service.
type Config struct {
	// FreshFor is how long a result is served from cache for the same URL and
	// options. Default 10 minutes; negative disables the cache.
	FreshFor time.Duration
	// AllowPrivateNetworks lets URLs name loopback and private hosts (local
	// use and tests only; the fetch engine enforces the same at dial time).
	AllowPrivateNetworks bool
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger; default slog.Default.
	Logger *slog.Logger
	// Archived, when set, is told of every page archived that search may
	// index (not a caller's private fetch), with its content (links and
	// metadata included) when it is HTML or text (the search
	// index, cell/search); it must not block; body is not modified after.
	Archived func(url, contentType string, body []byte, doc *content.Document, fetched time.Time)
	// PDF bounds the conversion of PDFs (time, size, how many at once);
	// zero fields take pdftext's defaults.
	PDF pdftext.Config
}

// Service scrapes URLs. It is safe for concurrent use.
type Service struct {
	cfg    Config
	store  *store.Store
	ladder *ladder.Ladder
	pdf    *pdftext.Converter
	flight singleflight.Group

	// Shared fetches outlive their callers; they run on ctx and Close waits
	// for them, so none writes to a closed store.
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// ErrClosed is returned by Scrape after Close.
var ErrClosed = &httpjson.HTTPError{Status: http.StatusServiceUnavailable, Code: "shutting_down", Message: "the cell is shutting down"}

// New builds a Service over a store and the engine ladder.
func New(st *store.Store, l *ladder.Ladder, cfg Config) *Service {
	if cfg.FreshFor == 0 {
		cfg.FreshFor = 10 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Service{cfg: cfg, store: st, ladder: l, pdf: pdftext.New(cfg.PDF), ctx: ctx, cancel: cancel}
}

// Close cancels fetches in flight and waits for them to finish.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

func (s *Service) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// Result is the scrape response of docs/spec/hosted-api.md §2.2 (without `ok` and `ms`, which the
// encoder adds). Its JSON shape is documented in docs/api.md.
type Result struct {
	URL         string          `json:"url"`
	FinalURL    string          `json:"final_url"`
	Status      int             `json:"status"`
	ContentType string          `json:"content_type"`
	Title       string          `json:"title"`
	Markdown    *string         `json:"markdown,omitempty"`
	HTML        *string         `json:"html,omitempty"`
	ContentHash string          `json:"content_hash"`
	Parsed      *content.Parsed `json:"parsed,omitempty"`
	// Pages is a PDF's page count (also when fewer were converted).
	Pages int `json:"pages,omitempty"`
	// Screenshot is the full-page PNG asked for with `screenshot`; JSON
	// carries it in base64.
	Screenshot []byte    `json:"screenshot,omitempty"`
	FetchedAt  time.Time `json:"fetched_at"`
	// Actions is what Options.Actions produced. Not in the JSON: a
	// scrape with actions is never cached, so its Outcome always holds
	// the Result itself.
	Actions *fetch.ActionResults `json:"-"`
}

// Usage says how a result was produced, for the gate to price (the cell
// never prices): the usage contract of internal/metering.
type Usage = metering.Usage

// Outcome is a scrape result, already encoded: Body is the JSON object of
// docs/spec/hosted-api.md §2.2 up to but excluding the final `"ms":N}`; AppendJSON completes it.
// Encoding once lets a cache hit be served by copying bytes.
type Outcome struct {
	Body  []byte
	Usage Usage
	// result is what Body encodes, when this scrape fetched the page
	// (a cache hit has only the bytes).
	result *Result
	// page is the page as fetched, when this scrape fetched it.
	page *ArchivedPage
}

// Fetched is the page as this scrape fetched it (its archive record); nil
// for a cache hit, whose page is in the archive (Archived). Callers must
// not modify it.
func (o *Outcome) Fetched() *ArchivedPage { return o.page }

// Result is the outcome as a value: the result just fetched, or a cache
// hit's decoded. Callers must not modify it (concurrent callers of one
// fetch share it).
func (o *Outcome) Result() (*Result, error) {
	if o.result != nil {
		return o.result, nil
	}
	var r Result
	if err := json.Unmarshal(o.AppendJSON(nil, 0), &r); err != nil {
		return nil, fmt.Errorf("decode scrape result: %w", err)
	}
	return &r, nil
}

// AppendJSON appends the complete response object with the elapsed time.
func (o *Outcome) AppendJSON(dst []byte, elapsed time.Duration) []byte {
	return o.AppendTail(append(dst, o.Body...), elapsed)
}

// AppendTail appends what follows Body to complete the object: the elapsed
// time and the closing brace.
func (o *Outcome) AppendTail(dst []byte, elapsed time.Duration) []byte {
	dst = append(dst, `,"ms":`...)
	dst = strconv.AppendInt(dst, elapsed.Milliseconds(), 10)
	return append(dst, '}')
}

// Scrape returns the result for one URL. Errors are *httpjson.HTTPError
// values with the status the API answers.
func (s *Service) Scrape(ctx context.Context, rawURL string, opts Options) (*Outcome, error) {
	return s.ScrapeAppend(ctx, nil, rawURL, opts)
}

// ScrapeAppend is Scrape for callers with a reusable buffer: a cache hit's
// body is appended to buf (the Outcome's Body then aliases it).
func (s *Service) ScrapeAppend(ctx context.Context, buf []byte, rawURL string, opts Options) (*Outcome, error) {
	u, err := urlpolicy.Validate(rawURL, s.cfg.AllowPrivateNetworks)
	if err != nil {
		return nil, urlError(err)
	}
	target := u.String()
	key := cacheKey(opts.cacheKey(target))
	if s.cfg.FreshFor > 0 && !opts.BypassCache && opts.Shared() {
		if body, _, err := s.store.GetLive(buf[:0], key, s.cfg.Now()); err == nil {
			return &Outcome{Body: body, Usage: metering.Hit}, nil
		} else if !errors.Is(err, store.ErrNotFound) {
			s.cfg.Logger.Warn("cache read failed", "url", urlpolicy.Redact(target), "err", err)
		}
	}
	// Identical requests in flight share one fetch. The shared fetch runs on
	// the service's context, not any single caller's, so one caller giving up
	// does not fail the others; it still has the engine's own deadline.
	flight := string(key)
	if !opts.Shared() {
		flight += "\x00nostore" // never joins a fetch that stores, nor lets one join it
	}
	ch := s.flight.DoChan(flight, func() (any, error) {
		if !s.enter() {
			return nil, ErrClosed
		}
		defer s.wg.Done()
		return s.fetchAndStore(s.ctx, u, key, opts)
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*Outcome), nil
	}
}

// Cached is the cache's copy of a scrape of rawURL with opts, fresh within
// the cache's window, without fetching: store.ErrNotFound when there is
// none (or the cache is off, or opts bypass it).
func (s *Service) Cached(rawURL string, opts Options) (*Outcome, error) {
	u, err := urlpolicy.Validate(rawURL, s.cfg.AllowPrivateNetworks)
	if err != nil {
		return nil, urlError(err)
	}
	if s.cfg.FreshFor <= 0 || opts.BypassCache || !opts.Shared() {
		return nil, store.ErrNotFound
	}
	body, _, err := s.store.GetLive(nil, cacheKey(opts.cacheKey(u.String())), s.cfg.Now())
	if err != nil {
		return nil, err
	}
	return &Outcome{Body: body, Usage: metering.Hit}, nil
}

// ladderRequest is the ladder's form of a scrape of u.
func ladderRequest(u *url.URL, opts *Options) *ladder.Request {
	return &ladder.Request{URL: u, Proxy: opts.Proxy, Country: opts.Country, Browser: opts.browserOptions(), Header: opts.Header}
}

// Check refuses options this cell cannot serve as asked: a proxy kind and
// country it has no pool for, or browser fields without a browser. The
// routes call it once per request (a batch or job as a whole), after
// Normalize; Scrape checks again.
func (s *Service) Check(opts Options) error {
	if err := s.ladder.Check(&ladder.Request{Proxy: opts.Proxy, Country: opts.Country, Browser: opts.browserOptions()}); err != nil {
		return fetchError(err)
	}
	return nil
}

func (s *Service) fetchAndStore(ctx context.Context, u *url.URL, key []byte, opts Options) (*Outcome, error) {
	lr, err := s.ladder.Fetch(ctx, ladderRequest(u, &opts))
	if err != nil {
		return nil, fetchError(err)
	}
	resp := lr.Response
	now := s.cfg.Now()
	// A page fetched with what the caller ran in it (its script: it may
	// sign in, fill a form) is the caller's: archived for reuse, never
	// indexed for search. The same holds for cookies or a session, when
	// a scrape carries them.
	private := opts.JS != ""
	index := s.cfg.Archived != nil && !private && resp.Status < 400
	res, doc, err := s.buildResult(ctx, u.String(), resp, opts, now, index)
	if err != nil {
		return nil, err
	}
	if opts.Screenshot {
		res.Screenshot = resp.Screenshot
	}
	res.Actions = resp.Actions
	// Markdown is full of < > &: keep them readable rather than \u003c.
	var buf bytes.Buffer
	buf.WriteString(`{"ok":true,`)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	// {"ok":true,{"url":...}\n → {"ok":true,"url":...  (ms closes it)
	raw := buf.Bytes()
	body := append(raw[:len(`{"ok":true,`)], raw[len(`{"ok":true,`)+1:len(raw)-2]...)

	if opts.Shared() {
		b := s.store.NewBatch()
		if s.cfg.FreshFor > 0 && resp.Status < 500 {
			b.SetExpiring(key, body, now.Add(s.cfg.FreshFor))
		}
		b.Set(ArchiveKey(u.String()), encodeArchive(resp, now, private))
		if err := b.Commit(store.NoSync); err != nil {
			// The caller still gets the page; only reuse is lost.
			s.cfg.Logger.Warn("cache/archive write failed", "url", urlpolicy.Redact(u.String()), "err", err)
		} else if index && doc != nil {
			s.cfg.Archived(resp.URL, resp.ContentType, resp.Body, doc, now)
		}
	}
	page := &ArchivedPage{URL: resp.URL, Status: resp.Status, ContentType: resp.ContentType, Engine: resp.Engine, FetchedAt: now.UTC(), Private: private, Body: resp.Body}
	return &Outcome{Body: body, Usage: Usage{Engine: lr.Engine, Level: lr.Level, Proxy: lr.Proxy, Cache: metering.CacheMiss, Units: 1}, result: res, page: page}, nil
}

// buildResult is the response of a fetched page, and the page's content
// (with links and metadata also when index: what the search index needs,
// so it does not convert the page again); no content for a PDF, which is
// not indexed.
func (s *Service) buildResult(ctx context.Context, requested string, resp *fetch.Response, opts Options, now time.Time, index bool) (*Result, *content.Document, error) {
	final, err := url.Parse(resp.URL)
	if err != nil {
		return nil, nil, &httpjson.HTTPError{Status: http.StatusBadGateway, Code: "fetch_failed", Message: "the site redirected to an invalid url", Err: err}
	}
	res := &Result{
		URL:         requested,
		FinalURL:    resp.URL,
		Status:      resp.Status,
		ContentType: resp.ContentType,
		FetchedAt:   now.UTC(),
	}
	var doc *content.Document
	switch mediaKind(resp.ContentType, resp.Body) {
	case kindHTML:
		po := content.ParseOptions(opts.Parse)
		if index {
			po.Links, po.Metadata = true, true
		}
		doc, err = content.Process(resp.Body, final, content.Options{Parse: po})
		if err != nil {
			return nil, nil, &httpjson.HTTPError{Status: http.StatusUnprocessableEntity, Code: "unsupported_content", Message: "the page could not be read as HTML", Err: err, Private: true}
		}
	case kindText:
		text := string(resp.Body)
		doc = &content.Document{Markdown: text, HTML: "<pre>" + html.EscapeString(text) + "</pre>"}
		if opts.Parse != (ParseField{}) {
			doc.Parsed = &content.Parsed{}
		}
	case kindPDF:
		return s.pdfResult(ctx, res, resp.Body, opts)
	default:
		return nil, nil, &httpjson.HTTPError{Status: http.StatusUnprocessableEntity, Code: "unsupported_content",
			Message: fmt.Sprintf("content type %q is not supported (HTML, plain text and PDF are)", resp.ContentType)}
	}
	res.Title = doc.Title
	res.ContentHash = content.Hash(doc.Markdown)
	res.Parsed = doc.Parsed
	if p := doc.Parsed; p != nil && index && !(opts.Parse.Links && opts.Parse.Metadata) {
		// Only the parse data asked for.
		if opts.Parse == (ParseField{}) {
			res.Parsed = nil
		} else {
			asked := *p
			if !opts.Parse.Links {
				asked.Links = nil
			}
			if !opts.Parse.Metadata {
				asked.Metadata = nil
			}
			res.Parsed = &asked
		}
	}
	if opts.Format != FormatHTML {
		res.Markdown = &doc.Markdown
	}
	if opts.Format != FormatMarkdown {
		res.HTML = &doc.HTML
	}
	return res, doc, nil
}

type kind int

const (
	kindOther kind = iota
	kindHTML
	kindText
	kindPDF
)

// mediaKind is what a page is: its declared type, but a PDF by its first
// bytes whatever the type (sites serve PDFs as application/octet-stream,
// or without a type).
func mediaKind(contentType string, body []byte) kind {
	if pdftext.Looks(body) {
		return kindPDF
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	switch mt {
	case PDFType:
		return kindPDF
	case "text/html", "application/xhtml+xml":
		return kindHTML
	case "text/plain", "text/markdown":
		return kindText
	case "":
		// No declared type: sniff the way browsers do.
		if mt, _, _ := mime.ParseMediaType(http.DetectContentType(body)); mt == "text/html" {
			return kindHTML
		} else if mt == "text/plain" {
			return kindText
		}
	}
	return kindOther
}

func cacheKey(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return append(bytes.Clone(prefixCache), sum[:]...)
}

// ArchiveKey is where the last fetched copy of a URL is kept.
func ArchiveKey(u string) []byte {
	return append(bytes.Clone(prefixArchive), u...)
}

// ArchivedPage is the archive record of one fetched page.
type ArchivedPage struct {
	URL         string    `json:"url"`
	Status      int       `json:"status"`
	ContentType string    `json:"content_type"`
	Engine      string    `json:"engine"`
	FetchedAt   time.Time `json:"fetched_at"`
	// Private marks a page fetched with what a caller ran in it or sent
	// (its script; cookies or a session when a scrape carries them): it is
	// never indexed for search, nor by a rebuild from the archive.
	Private bool   `json:"private,omitempty"`
	Body    []byte `json:"-"`
}

// Archive record: a JSON header line, a newline, then the body bytes as
// fetched (decoded to UTF-8).
func encodeArchive(resp *fetch.Response, now time.Time, private bool) []byte {
	return EncodeArchived(&ArchivedPage{URL: resp.URL, Status: resp.Status, ContentType: resp.ContentType, Engine: resp.Engine, FetchedAt: now.UTC(), Private: private, Body: resp.Body})
}

// EncodeArchived is p as an archive record (the record a cell copies to
// the cell that indexes its pages beside it, cell/pages.go).
func EncodeArchived(p *ArchivedPage) []byte {
	hdr, _ := json.Marshal(p)
	out := make([]byte, 0, len(hdr)+1+len(p.Body))
	out = append(out, hdr...)
	out = append(out, '\n')
	return append(out, p.Body...)
}

// ParseArchived reads an archive record; the page's Body is v's.
func ParseArchived(v []byte) (*ArchivedPage, error) {
	i := bytes.IndexByte(v, '\n')
	if i < 0 {
		return nil, errors.New("no header line")
	}
	var p ArchivedPage
	if err := json.Unmarshal(v[:i], &p); err != nil {
		return nil, err
	}
	p.Body = v[i+1:]
	return &p, nil
}

// Archived reads the archived copy of a URL (as urlpolicy.Validate normalises it).
func (s *Service) Archived(u string) (*ArchivedPage, error) {
	v, err := s.store.Get(ArchiveKey(u))
	if err != nil {
		return nil, err
	}
	p, err := ParseArchived(v)
	if err != nil {
		return nil, fmt.Errorf("archive record of %q: %w", u, err)
	}
	return p, nil
}

// ScanArchive calls fn with each archived page until it returns false
// (the search index's rebuild). The page's Body is valid during the call
// only.
func (s *Service) ScanArchive(fn func(p *ArchivedPage) bool) error {
	return ScanArchived(s.store, prefixArchive, fn)
}

// ScanArchived calls fn with each archive record under prefix of st
// until it returns false, skipping records it cannot read. The page's
// Body is valid during the call only.
func ScanArchived(st *store.Store, prefix []byte, fn func(p *ArchivedPage) bool) error {
	return st.Scan(prefix, nil, func(_, v []byte) (bool, error) {
		p, err := ParseArchived(v)
		if err != nil {
			return true, nil
		}
		return fn(p), nil
	})
}

// SweepCache drops expired cache entries.
func (s *Service) SweepCache() (int, error) {
	return s.store.SweepExpired(prefixCache, s.cfg.Now())
}

func urlError(err error) *httpjson.HTTPError {
	switch {
	case errors.Is(err, fetch.ErrScheme):
		return BadInput(fetch.ErrScheme.Error())
	case errors.Is(err, fetch.ErrNotPublic):
		return BadInput(fetch.ErrNotPublic.Error())
	default:
		return BadInput(fetch.ErrInvalidURL.Error())
	}
}

func fetchError(err error) error {
	switch {
	case errors.Is(err, context.Canceled):
		return err
	case errors.As(err, new(*fetch.NoProxyError)), errors.Is(err, ladder.ErrNeedsBrowser):
		return BadInput(err.Error())
	case errors.Is(err, ladder.ErrBlocked):
		return &httpjson.HTTPError{Status: http.StatusForbidden, Code: "blocked",
			Message: err.Error() + "; nothing was charged"}
	case errors.Is(err, fetch.ErrFleetBusy):
		return &httpjson.HTTPError{Status: http.StatusServiceUnavailable, Code: "fleet-busy",
			Message: "no browser is free right now; nothing was charged, repeat the same request in a few seconds", Err: err, Private: true,
			RetryAfter: 5 * time.Second}
	case errors.Is(err, browser.ErrOptions):
		return &httpjson.HTTPError{Status: http.StatusBadRequest, Code: "bad_input", Message: "the browser could not use these options: " + err.Error()}
	case errors.Is(err, browser.ErrWaitFor):
		return &httpjson.HTTPError{Status: http.StatusUnprocessableEntity, Code: "wait_for_failed",
			Message: "the wait_for condition did not hold before the page's deadline; nothing was charged", Err: err, Private: true}
	case errors.Is(err, browser.ErrAction):
		return &httpjson.HTTPError{Status: http.StatusUnprocessableEntity, Code: "action_failed",
			Message: "a page action failed; nothing was charged: " + err.Error(), Err: err, Private: true}
	case errors.Is(err, browser.ErrScript):
		return &httpjson.HTTPError{Status: http.StatusUnprocessableEntity, Code: "script_failed",
			Message: "the js option threw or did not finish; nothing was charged: " + err.Error()}
	case errors.Is(err, browser.ErrCrashed):
		return &httpjson.HTTPError{Status: http.StatusBadGateway, Code: "fetch_failed", Message: "the browser crashed on this page twice", Err: err}
	case errors.Is(err, browser.ErrClosed):
		return ErrClosed
	case errors.Is(err, fetch.ErrProxy):
		// The cause names the proxy's address: logged, not shown.
		return &httpjson.HTTPError{Status: http.StatusBadGateway, Code: "fetch_failed",
			Message: "the cell's proxy did not answer or refused the cell; nothing was charged, repeat the request", Err: err, Private: true}
	case errors.Is(err, fetch.ErrNotPublic):
		// Reached only through a redirect or DNS answer: the URL itself passed.
		return &httpjson.HTTPError{Status: http.StatusBadRequest, Code: "bad_input", Message: fetch.ErrNotPublic.Error(), Err: err, Private: true}
	case errors.Is(err, fetch.ErrTooLarge):
		return &httpjson.HTTPError{Status: http.StatusBadGateway, Code: "fetch_failed", Message: "the page is larger than this cell accepts", Err: err}
	case errors.Is(err, fetch.ErrTooManyRedirects):
		return &httpjson.HTTPError{Status: http.StatusBadGateway, Code: "fetch_failed", Message: "the site redirected too many times", Err: err}
	case errors.Is(err, fetch.ErrUnreachable), errors.Is(err, context.DeadlineExceeded):
		return &httpjson.HTTPError{Status: http.StatusBadGateway, Code: "fetch_failed", Message: "the site did not answer", Err: err}
	default:
		return &httpjson.HTTPError{Status: http.StatusBadGateway, Code: "fetch_failed", Message: "the page could not be fetched", Err: err}
	}
}

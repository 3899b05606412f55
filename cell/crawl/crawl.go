package crawl

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/PuerkitoBio/goquery"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/trawlhq/trawl/cell/content"
	"github.com/trawlhq/trawl/cell/crawl/extract"
	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/fetch/browser"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

// Result is one crawled URL, as in a task's result or results and in a
// stream's lines. The field names are Crawl4AI's.
type Result struct {
	URL              string            `json:"url"`
	RedirectedURL    nullString        `json:"redirected_url"`
	Success          bool              `json:"success"`
	StatusCode       nullInt           `json:"status_code"`
	HTML             string            `json:"html"`
	CleanedHTML      string            `json:"cleaned_html"`
	Markdown         string            `json:"markdown"`
	FitMarkdown      string            `json:"fit_markdown"`
	Links            Links             `json:"links"`
	Media            MediaSet          `json:"media"`
	Metadata         map[string]any    `json:"metadata"`
	Screenshot       nullString        `json:"screenshot"`
	PDF              nullString        `json:"pdf"`
	DownloadedFiles  []string          `json:"downloaded_files"`
	ExtractedContent *string           `json:"extracted_content"`
	ErrorMessage     nullString        `json:"error_message"`
	SessionID        nullString        `json:"session_id"`
	ResponseHeaders  map[string]string `json:"response_headers"`
	// Engine says what served the page: "http" (plain HTTP, no browser),
	// "browser" (rendered in Chromium) or "cache" (the page cache).
	Engine     string `json:"engine"`
	BrowserID  string `json:"browser_id,omitempty"`
	DurationMS Number `json:"duration_ms"`
	// scripts are the values of /execute_js's scripts (not stored).
	scripts []fetch.ScriptResult
}

// Links are the page's links, split as Crawl4AI does.
type Links struct {
	Internal []Link `json:"internal"`
	External []Link `json:"external"`
}

// Link is a hyperlink of the page.
type Link struct {
	Href string `json:"href"`
	Text string `json:"text"`
}

// MediaSet is the page's media by kind.
type MediaSet struct {
	Images []MediaItem `json:"images"`
	Videos []MediaItem `json:"videos"`
	Audios []MediaItem `json:"audios"`
}

// MediaItem is one image, video or audio element.
type MediaItem struct {
	Src    string `json:"src"`
	Alt    string `json:"alt,omitempty"`
	Title  string `json:"title,omitempty"`
	Poster string `json:"poster,omitempty"`
	Type   string `json:"type"`
}

// crawlAll crawls the plan's URLs, at most plan.semaphore at a time, and
// calls each (from any goroutine, one call at a time) with every result as
// it completes. It returns the results in the order of the URLs.
func (s *Server) crawlAll(ctx context.Context, p *plan, taskID string, each func(*Result)) []*Result {
	out := make([]*Result, len(p.urls))
	s.pool.Use(p.sig)
	sem := make(chan struct{}, p.semaphore)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, u := range p.urls {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			out[i] = failed(u.String(), ctx.Err())
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			r := s.crawlOne(ctx, p, u, taskID)
			mu.Lock()
			out[i] = r
			if each != nil {
				each(r)
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// emptyResult is a result for u with empty (not null) lists and maps.
func emptyResult(u string) *Result {
	return &Result{URL: u, Links: Links{Internal: []Link{}, External: []Link{}},
		Media: MediaSet{Images: []MediaItem{}, Videos: []MediaItem{}, Audios: []MediaItem{}}, Metadata: map[string]any{}}
}

func failed(u string, err error) *Result {
	r := emptyResult(u)
	r.ErrorMessage = nullString(err.Error())
	return r
}

// crawlOne renders one URL in the pool and turns the page into a result.
// A page lost to a browser killed or crashed under it is retried once on
// another browser.
func (s *Server) crawlOne(ctx context.Context, p *plan, u *url.URL, taskID string) *Result {
	start := s.cfg.Now()
	r := s.render(ctx, p, u)
	r.DurationMS = round1(float64(s.cfg.Now().Sub(start).Microseconds()) / 1000)
	if !r.Success && ctx.Err() == nil {
		s.mon.logError(ErrorEntry{Timestamp: unixSeconds(s.cfg.Now()), Message: string(r.ErrorMessage), Endpoint: "crawl", URL: r.URL, TaskID: taskID, Status: int(r.StatusCode)})
	}
	return r
}

func (s *Server) render(ctx context.Context, p *plan, u *url.URL) *Result {
	if !p.needsBrowser {
		resp, engine, err := s.fetchPlain(ctx, p, u)
		if err != nil {
			r := failed(u.String(), ladderError(err))
			r.Engine = EngineHTTP
			return r
		}
		r := s.toResult(ctx, p, u, resp)
		r.Engine = engine
		if engine == EngineBrowser {
			r.BrowserID = "permanent"
		}
		return r
	}
	var resp *fetch.Response
	var err error
	var browserID string
	for attempt := 0; attempt < 2; attempt++ {
		var l *lease
		if p.session != "" {
			l, err = s.pool.AcquireSession(ctx, p.sig, p.session)
		} else {
			l, err = s.pool.Acquire(ctx, p.sig)
		}
		if err != nil {
			break
		}
		browserID = l.BrowserID()
		opts := p.opts
		resp, err = l.Engine().Fetch(ctx, &fetch.Request{URL: u.String(), Header: p.header.Clone(), Browser: &opts})
		l.Release()
		if !errors.Is(err, browser.ErrClosed) && !errors.Is(err, browser.ErrCrashed) && !errors.Is(err, browser.ErrSessionClosed) || ctx.Err() != nil {
			break
		}
		s.log.Info("crawl: browser went away under a page; retrying", "browser_id", browserID, "url", urlpolicy.Redact(u.String()))
	}
	if err != nil {
		r := failed(u.String(), pageError(err))
		r.BrowserID = browserID
		r.Engine = EngineBrowser
		r.SessionID = nullString(p.session)
		return r
	}
	r := s.toResult(ctx, p, u, resp)
	r.BrowserID = browserID
	r.Engine = EngineBrowser
	r.SessionID = nullString(p.session)
	return r
}

// pageError is the message a caller sees for a failed page.
func pageError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("page timed out: %v", err)
	}
	return err
}

// toResult processes a rendered page: selector, Markdown, links, media,
// metadata, screenshot and extraction.
func (s *Server) toResult(ctx context.Context, p *plan, u *url.URL, resp *fetch.Response) *Result {
	r := emptyResult(u.String())
	r.StatusCode = nullInt(resp.Status)
	if resp.URL != "" && resp.URL != u.String() {
		r.RedirectedURL = nullString(resp.URL)
	}
	final := u
	if fu, err := url.Parse(resp.URL); err == nil && resp.URL != "" {
		final = fu
	}
	r.ResponseHeaders = map[string]string{}
	for k, v := range resp.Header {
		r.ResponseHeaders[strings.ToLower(k)] = strings.Join(v, ", ")
	}
	if resp.Actions != nil {
		r.scripts = resp.Actions.Scripts
	}
	if len(resp.Screenshot) > 0 {
		r.Screenshot = nullString(base64.StdEncoding.EncodeToString(resp.Screenshot))
	}
	if len(resp.PDF) > 0 {
		r.PDF = nullString(base64.StdEncoding.EncodeToString(resp.PDF))
	}
	page := resp.Body
	r.HTML = string(page)
	scoped := page
	if p.selector != "" {
		sel, n, err := selectHTML(page, p.selector)
		if err != nil {
			r.ErrorMessage = nullString(fmt.Sprintf("css_selector %q: %v", p.selector, err))
			return r
		}
		if n == 0 {
			r.ErrorMessage = nullString(fmt.Sprintf("css_selector %q matched no element of the page", p.selector))
			return r
		}
		scoped = sel
	}
	full, err := content.Process(scoped, final, content.Options{KeepBoilerplate: true,
		Parse: content.ParseOptions{Links: true, Media: true, Metadata: true}})
	if err != nil {
		r.ErrorMessage = nullString("the page could not be parsed: " + err.Error())
		return r
	}
	r.CleanedHTML = full.HTML
	r.Markdown = full.Markdown
	if p.selector == "" {
		if fit, err := content.Process(page, final, content.Options{}); err == nil {
			r.FitMarkdown = fit.Markdown
		}
	} else {
		r.FitMarkdown = full.Markdown
	}
	if p.minWords > 0 {
		r.Markdown = dropShortBlocks(r.Markdown, p.minWords)
		r.FitMarkdown = dropShortBlocks(r.FitMarkdown, p.minWords)
	}
	if p.onlyText {
		r.Markdown = plainText(r.CleanedHTML)
		r.FitMarkdown = r.Markdown
	}
	if pd := full.Parsed; pd != nil {
		for _, l := range pd.Links {
			if l.Internal {
				r.Links.Internal = append(r.Links.Internal, Link{Href: l.Href, Text: l.Text})
			} else {
				r.Links.External = append(r.Links.External, Link{Href: l.Href, Text: l.Text})
			}
		}
		for _, m := range pd.Media {
			it := MediaItem{Src: m.Src, Alt: m.Alt, Title: m.Title, Poster: m.Poster, Type: m.Kind}
			switch m.Kind {
			case "video":
				r.Media.Videos = append(r.Media.Videos, it)
			case "audio":
				r.Media.Audios = append(r.Media.Audios, it)
			default:
				r.Media.Images = append(r.Media.Images, it)
			}
		}
		if md := pd.Metadata; md != nil {
			put := func(k, v string) {
				if v != "" {
					r.Metadata[k] = v
				}
			}
			put("title", md.Title)
			put("description", md.Description)
			put("language", md.Language)
			put("canonical", md.Canonical)
			for k, v := range md.OpenGraph {
				put("og:"+k, v)
			}
			for k, v := range md.Twitter {
				put("twitter:"+k, v)
			}
			if len(md.JSONLD) > 0 {
				r.Metadata["json_ld"] = md.JSONLD
			}
		}
	}
	if _, ok := r.Metadata["title"]; !ok && full.Title != "" {
		r.Metadata["title"] = full.Title
	}
	r.Success = resp.Status < 400
	if !r.Success {
		r.ErrorMessage = nullString(fmt.Sprintf("the site answered HTTP %d", resp.Status))
	}
	if p.strategy != nil {
		out, err := p.strategy.Extract(ctx, extract.Page{URL: final.String(), HTML: string(scoped), Markdown: r.Markdown})
		if err != nil {
			r.Success = false
			r.ErrorMessage = nullString(fmt.Sprintf("%s extraction failed: %v", p.strategy.Name(), err))
		} else {
			r.ExtractedContent = &out
		}
	}
	return r
}

// selectHTML keeps the elements matching sel, in a document with the
// page's <head> (its <base>, title and metadata still apply).
func selectHTML(page []byte, sel string) ([]byte, int, error) {
	doc, err := goquery.NewDocumentFromReader(bytes.NewReader(page))
	if err != nil {
		return nil, 0, err
	}
	found := doc.Find(sel)
	if found.Length() == 0 {
		return nil, 0, nil
	}
	var b bytes.Buffer
	b.WriteString("<!DOCTYPE html><html>")
	if head, err := goquery.OuterHtml(doc.Find("head").First()); err == nil {
		b.WriteString(head)
	}
	b.WriteString("<body>")
	found.Each(func(_ int, el *goquery.Selection) {
		if h, err := goquery.OuterHtml(el); err == nil {
			b.WriteString(h)
		}
	})
	b.WriteString("</body></html>")
	return b.Bytes(), found.Length(), nil
}

// dropShortBlocks removes paragraphs of fewer than min words from
// Markdown; headings, list items, tables and code stay.
func dropShortBlocks(md string, min int) string {
	blocks := strings.Split(md, "\n\n")
	kept := blocks[:0]
	for _, b := range blocks {
		t := strings.TrimSpace(b)
		if t == "" {
			continue
		}
		switch t[0] {
		case '#', '-', '*', '|', '>', '`', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			kept = append(kept, b)
			continue
		}
		if len(strings.Fields(t)) >= min {
			kept = append(kept, b)
		}
	}
	return strings.Join(kept, "\n\n")
}

// blockTags end a line of plain text.
var blockTags = map[string]bool{"p": true, "div": true, "br": true, "li": true, "tr": true, "h1": true, "h2": true,
	"h3": true, "h4": true, "h5": true, "h6": true, "section": true, "article": true, "pre": true, "blockquote": true,
	"table": true, "ul": true, "ol": true, "header": true, "footer": true, "dd": true, "dt": true, "figcaption": true}

// plainText is the text of an HTML fragment, a line per block.
func plainText(fragment string) string {
	nodes, err := html.ParseFragment(strings.NewReader(fragment), &html.Node{Type: html.ElementNode, Data: "body", DataAtom: atom.Body})
	if err != nil {
		return ""
	}
	var b strings.Builder
	var last byte // the last byte written, 0 at the start
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		switch n.Type {
		case html.TextNode:
			words := strings.Fields(n.Data)
			if len(words) == 0 {
				break
			}
			if last != 0 && last != ' ' && last != '\n' && strings.TrimLeftFunc(n.Data, unicode.IsSpace) != n.Data {
				b.WriteByte(' ')
			}
			b.WriteString(strings.Join(words, " "))
			last = 'x'
			if strings.TrimRightFunc(n.Data, unicode.IsSpace) != n.Data {
				b.WriteByte(' ')
				last = ' '
			}
		case html.ElementNode:
			if n.Data == "script" || n.Data == "style" {
				return
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
		if n.Type == html.ElementNode && blockTags[n.Data] {
			b.WriteByte('\n')
			last = '\n'
		}
	}
	for _, n := range nodes {
		walk(n)
	}
	lines := strings.Split(b.String(), "\n")
	out := lines[:0]
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// deadlineFor is how long a task may run: every page's timeout, in
// batches of the semaphore, with room for the queue of pages in a
// browser.
func deadlineFor(p *plan) time.Duration {
	rounds := (len(p.urls) + p.semaphore - 1) / p.semaphore
	return time.Duration(rounds+1)*(p.opts.Timeout+p.opts.Delay) + time.Minute
}

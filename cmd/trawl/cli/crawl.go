package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// crawlState is DIR/.trawl-crawl.json: the crawl a directory is being
// filled from, so that running the same command again follows that crawl
// (while the gate keeps it) instead of paying for a new one.
type crawlState struct {
	ID    string `json:"id"`
	URL   string `json:"url"`
	Limit int    `json:"limit"`
}

const crawlStateFile = ".trawl-crawl.json"

// crawlStatus is GET /v2/crawl/{id} (docs/firecrawl.md, "Crawl").
type crawlStatus struct {
	Status      string  `json:"status"`
	Total       int     `json:"total"`
	Completed   int     `json:"completed"`
	CreditsUsed float64 `json:"creditsUsed"`
	Error       string  `json:"error"`
	Next        string  `json:"next"`
	Data        []struct {
		Markdown string `json:"markdown"`
		Metadata struct {
			SourceURL  string `json:"sourceURL"`
			URL        string `json:"url"`
			StatusCode int    `json:"statusCode"`
		} `json:"metadata"`
	} `json:"data"`
}

// crawlErrors is GET /v2/crawl/{id}/errors.
type crawlErrors struct {
	Errors []struct {
		URL   string `json:"url"`
		Code  string `json:"code"`
		Error string `json:"error"`
	} `json:"errors"`
	RobotsBlocked []string `json:"robotsBlocked"`
}

func (a *app) crawlCmd() *cobra.Command {
	var limit, depth int
	var out string
	var include, exclude []string
	var entire, fresh bool
	cmd := &cobra.Command{
		Use:   "crawl URL -o DIR",
		Short: "crawl a site into DIR, one Markdown file a page, paths mirrored",
		Long: `crawl starts a site crawl from URL (Firecrawl's POST /v2/crawl: links under the
start URL's directory, the site's sitemap, robots.txt honoured; each page
charged as it is scraped) and writes each page's Markdown to DIR, its URL
path mirrored: /docs/intro.html → DIR/docs/intro.md, /docs/ → DIR/docs/index.md
(a page of another host goes under DIR/HOST/).

A file already in DIR is never written again. The crawl's id is kept in
DIR/.trawl-crawl.json: Ctrl-C stops watching (the crawl runs on), and the same
command again follows that crawl while the gate keeps it (7 days), writing the
pages not yet written; --new starts a new crawl.

"trawl crawl" without a URL is the self-hosted crawl server (trawl crawl -h).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usagef("give the directory to write to: -o DIR")
			}
			body := map[string]any{"url": args[0], "limit": limit,
				"scrapeOptions": map[string]any{"formats": []string{"markdown"}}}
			if depth > 0 {
				body["maxDiscoveryDepth"] = depth
			}
			if len(include) > 0 {
				body["includePaths"] = include
			}
			if len(exclude) > 0 {
				body["excludePaths"] = exclude
			}
			if entire {
				body["crawlEntireDomain"] = true
			}
			return a.crawl(cmd.Context(), args[0], out, limit, body, fresh)
		},
	}
	f := cmd.Flags()
	f.IntVar(&limit, "limit", 100, "most pages to crawl (1 to 10,000)")
	f.StringVarP(&out, "output", "o", "", "directory to write the pages to (made if missing)")
	f.IntVar(&depth, "depth", 0, "follow links at most this deep (the start page is 0; 0: no bound)")
	f.StringSliceVar(&include, "include", nil, "only URL paths matching these regular expressions")
	f.StringSliceVar(&exclude, "exclude", nil, "leave out URL paths matching these regular expressions")
	f.BoolVar(&entire, "entire-domain", false, "follow the whole host, not only the start URL's directory")
	f.BoolVar(&fresh, "new", false, "start a new crawl even when DIR names one the gate still keeps")
	cmd.MarkFlagDirname("output")
	return cmd
}

func (a *app) crawl(ctx context.Context, start, dir string, limit int, body map[string]any, fresh bool) error {
	if err := a.connect(); err != nil {
		return err
	}
	startURL, err := url.Parse(start)
	if err != nil || startURL.Host == "" {
		return usagef("not a URL: %q", start)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	statePath := filepath.Join(dir, crawlStateFile)
	var st crawlState
	if b, err := os.ReadFile(statePath); err == nil && !fresh {
		json.Unmarshal(b, &st)
		if st.URL != start || st.Limit != limit {
			st = crawlState{}
		}
	}
	resumed := false
	if st.ID != "" {
		// The crawl named there: followed if the gate still has it and it
		// did not fail.
		var s crawlStatus
		r, err := a.call(ctx, "GET", "/v2/crawl/"+url.PathEscape(st.ID)+"?skip=0", nil)
		if err == nil && json.Unmarshal(r.Body, &s) == nil && (s.Status == "scraping" || s.Status == "completed") {
			resumed = true
			a.note("following crawl %s again (from %s); files already in %s are skipped", st.ID, statePath, dir)
		} else if ce := asClientError(err); err != nil && (ce == nil || ce.Status != 404) {
			return err
		}
	}
	if !resumed {
		r, err := a.call(ctx, "POST", "/v2/crawl", body)
		if err != nil {
			return err
		}
		var s struct{ ID string }
		if err := json.Unmarshal(r.Body, &s); err != nil || s.ID == "" {
			return fmt.Errorf("the gate's answer holds no crawl id: %.200s", r.Body)
		}
		st = crawlState{ID: s.ID, URL: start, Limit: limit}
		b, _ := json.Marshal(st)
		if err := os.WriteFile(statePath, b, 0o644); err != nil {
			return err
		}
		a.note("crawl %s started", st.ID)
	}

	pr := a.newProgress("crawl " + st.ID)
	var written, skipped, failedWrites int
	files := []string{} // the files written this run; [] in JSON when none
	var s crawlStatus
	skip := 0
	for {
		r, err := a.call(ctx, "GET", fmt.Sprintf("/v2/crawl/%s?skip=%d", url.PathEscape(st.ID), skip), nil)
		if err != nil {
			if ctx.Err() != nil {
				return a.crawlInterrupted(pr, start, dir, written, skipped)
			}
			if ce := asClientError(err); ce != nil && (ce.Status == 429 || ce.Status == 503) {
				if !sleepCtx(ctx, max(ce.RetryAfter, time.Second)) {
					return a.crawlInterrupted(pr, start, dir, written, skipped)
				}
				continue
			}
			pr.stop()
			return err
		}
		s = crawlStatus{}
		if err := json.Unmarshal(r.Body, &s); err != nil {
			pr.stop()
			return err
		}
		for _, d := range s.Data {
			u := first(d.Metadata.SourceURL, d.Metadata.URL)
			rel, err := mirrorPath(startURL, u)
			if err != nil {
				failedWrites++
				continue
			}
			p := filepath.Join(dir, rel)
			if _, err := os.Stat(p); err == nil {
				skipped++
				continue
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				pr.stop()
				return err
			}
			if err := writeNew(p, []byte(d.Markdown)); err != nil {
				pr.stop()
				return err
			}
			written++
			files = append(files, rel)
		}
		skip += len(s.Data)
		// completed counts the pages scraped; total the URLs found so far.
		pending := max(s.Total-s.Completed, 0)
		ended := s.Status != "scraping"
		if ended {
			pending = 0
		}
		// URLs found that gave no page are counted as errors at the end,
		// from the crawl's errors (robots.txt's refusals are not errors).
		pr.update(counts{Total: max(s.Total, s.Completed), Done: s.Completed, Pending: pending,
			Credits: fmt.Sprintf("%.3f", s.CreditsUsed)})
		if s.Next != "" {
			continue // more documents are waiting now
		}
		if ended {
			break
		}
		if !sleepCtx(ctx, pollInterval(r.Header)) {
			return a.crawlInterrupted(pr, start, dir, written, skipped)
		}
	}
	// The URLs that gave no page: failed, or kept out by robots.txt.
	var ce crawlErrors
	if r, err := a.call(ctx, "GET", "/v2/crawl/"+url.PathEscape(st.ID)+"/errors", nil); err == nil {
		json.Unmarshal(r.Body, &ce)
	}
	extra := fmt.Sprintf("%d files written, %d already there", written, skipped)
	if len(ce.RobotsBlocked) > 0 {
		extra += fmt.Sprintf(", %d URLs kept out by robots.txt", len(ce.RobotsBlocked))
	}
	c := pr.counts()
	c.Error, c.Pending = len(ce.Errors), 0
	c.Total = c.Done + c.Error // robots.txt's refusals were never the crawl's
	pr.update(c)
	pr.summary(extra)
	out := map[string]any{"id": st.ID, "status": s.Status, "dir": dir, "pages": s.Completed, "written": written,
		"skipped": skipped, "credits": s.CreditsUsed, "files": files,
		"errors": ce.Errors, "robots_blocked": ce.RobotsBlocked}
	if s.Error != "" {
		out["error"] = s.Error
	}
	if a.human() {
		fmt.Fprintf(a.stdout, "crawl %s %s: %d pages, %d files written to %s, %d already there\n", st.ID, s.Status, s.Completed, written, dir, skipped)
	} else if err := a.printValue(out); err != nil {
		return err
	}
	switch {
	case s.Status == "failed" && strings.Contains(s.Error, "(402)"):
		// The gate could not charge a page: no credit, or the spend cap.
		return &exitError{code: ExitPayment, msg: "the crawl stopped: " + s.Error +
			"\n  top up (POST /v1/billing/topup?amount=…, the packs: GET /v1/prices) or raise the spend cap, then run the same command: a new crawl, the files written skipped"}
	case s.Status == "failed":
		return &exitError{code: ExitError, msg: "the crawl failed: " + s.Error}
	case failedWrites > 0:
		return &exitError{code: ExitPartial, msg: fmt.Sprintf("%d pages had no usable URL", failedWrites)}
	}
	return nil
}

func (a *app) crawlInterrupted(pr *progress, start, dir string, written, skipped int) error {
	pr.summary(fmt.Sprintf("%d files written", written))
	return &exitError{code: ExitInterrupted, msg: fmt.Sprintf("stopped watching; the crawl runs on. Continue (files already written are skipped): trawl crawl %s -o %s", start, dir)}
}

// writeNew writes a file through a temporary one, so a file that exists
// is always whole (a crawl picked up again skips it).
func writeNew(p string, b []byte) error {
	tmp := p + ".part"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// mirrorPath is the file of a page's URL under the output directory: its
// path with .md for .html (index.md for a directory), a query folded into
// the name, and pages of another host than the start's under HOST/.
func mirrorPath(start *url.URL, raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("not a page URL: %q", raw)
	}
	p := u.EscapedPath()
	if p == "" || strings.HasSuffix(p, "/") {
		p += "index"
	}
	p, err = url.PathUnescape(p)
	if err != nil {
		return "", err
	}
	p = path.Clean("/" + p)
	ext := path.Ext(p)
	switch strings.ToLower(ext) {
	case ".html", ".htm", ".php", ".asp", ".aspx", ".md":
		p = strings.TrimSuffix(p, ext)
	}
	if u.RawQuery != "" {
		p += "_" + u.RawQuery
	}
	p += ".md"
	if !strings.EqualFold(u.Host, start.Host) {
		p = "/" + u.Host + p
	}
	// One name per path segment, nothing a file system reads specially.
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, s := range segs {
		s = strings.Map(func(r rune) rune {
			if r < 0x20 || strings.ContainsRune(`\:*?"<>|`, r) {
				return '_'
			}
			return r
		}, s)
		if s == "" || s == "." || s == ".." {
			return "", errors.New("empty path segment")
		}
		segs[i] = s
	}
	return filepath.Join(segs...), nil
}

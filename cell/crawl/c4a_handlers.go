package crawl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/llm"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

// Crawl4AI 0.5+'s API (deploy/docker/server.py of 0.7.7), served beside
// the task API: the synchronous /crawl and /crawl/stream for bodies with
// typed configurations (bodyShape), /crawl/job, /md, /html, /screenshot,
// /pdf, /execute_js, /llm/{url}, /token, /schema, /ask and /config/dump.

// c4aBad writes a configuration's error: 422 for an empty urls list (as
// Crawl4AI's validation), 400 for anything else.
func c4aBad(w http.ResponseWriter, err error) {
	if errors.Is(err, errEmptyURLs) {
		writeError(w, http.StatusUnprocessableEntity, "bad_input", err.Error())
		return
	}
	writeError(w, http.StatusBadRequest, "bad_input", err.Error())
}

// inSlot runs fn in a slot of the task workers (MAX_CONCURRENT_TASKS
// bounds synchronous crawls as it bounds tasks) and waits for it. False:
// the 503 was written, or the client left while it waited.
func (s *Server) inSlot(w http.ResponseWriter, r *http.Request, fn func()) bool {
	done := make(chan struct{})
	q := &queued{priority: DefaultPriority, run: func() { defer close(done); fn() }}
	if err := s.sched.push(q, false); err != nil {
		refused.Add(context.Background(), 1) // cell/crawl/metrics.go
		writeError(w, http.StatusServiceUnavailable, "no_slots", err.Error())
		return false
	}
	select {
	case <-done:
	case <-r.Context().Done():
		if s.sched.remove(q) {
			return false
		}
		<-done
	}
	return true
}

// c4aDeadline bounds a Crawl4AI request's crawl.
func c4aDeadline(cp *c4aPlan) time.Duration {
	d := deadlineFor(cp.p)
	if cp.deep != nil {
		rounds := (cp.deep.maxPages + cp.p.semaphore - 1) / cp.p.semaphore
		d = time.Duration(rounds+1)*(cp.p.opts.Timeout+cp.p.opts.Delay) + time.Minute
		if d > 30*time.Minute {
			d = 30 * time.Minute
		}
	}
	return d
}

// c4aRun crawls a Crawl4AI request: its invalid URLs are failed results
// (as Crawl4AI answers them), the others are crawled, or deep-crawled.
// each (nil: none) sees every result as it completes; the return is every
// result, in the order of urls (deep crawls: in crawl order).
func (s *Server) c4aRun(ctx context.Context, cp *c4aPlan, taskID string, each func(*Result)) []*Result {
	var bad []*Result
	nValid := 0
	for i, e := range cp.urlErr {
		if e != "" {
			r := failed(cp.urls[i], errors.New(e))
			bad = append(bad, r)
			if each != nil {
				each(r)
			}
		} else {
			nValid++
		}
	}
	if nValid == 0 {
		return bad
	}
	var crawled []*Result
	if cp.deep != nil {
		crawled = s.deepCrawl(ctx, cp, taskID, each)
		return append(crawled, bad...)
	}
	crawled = s.crawlAll(ctx, cp.p, taskID, each)
	out := make([]*Result, 0, len(cp.urls))
	ci, bi := 0, 0
	for _, e := range cp.urlErr {
		if e != "" {
			out = append(out, bad[bi])
			bi++
		} else {
			out = append(out, crawled[ci])
			ci++
		}
	}
	return out
}

// c4aCrawl answers Crawl4AI's POST /crawl (stream false) and
// /crawl/stream (or a crawler_config with stream: true).
func (s *Server) c4aCrawl(w http.ResponseWriter, r *http.Request, body []byte, stream bool) (bool, string) {
	cp, err := s.compileC4A(body)
	if err != nil {
		c4aBad(w, err)
		return true, ""
	}
	stream = stream || cp.stream
	okAll := true
	ran := s.inSlot(w, r, func() {
		ctx, cancel := context.WithTimeout(r.Context(), c4aDeadline(cp))
		defer cancel()
		stop := context.AfterFunc(s.life, cancel)
		defer stop()
		if stream {
			sw, _ := w.(*statusWriter)
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("Cache-Control", "no-cache")
			w.Header().Set("X-Stream-Status", "active")
			w.WriteHeader(http.StatusOK)
			flush := func() {
				if f, ok := w.(http.Flusher); ok {
					f.Flush()
				} else if sw != nil {
					sw.Flush()
				}
			}
			flush()
			enc := json.NewEncoder(w)
			s.c4aRun(ctx, cp, "", func(res *Result) {
				okAll = okAll && res.Success
				out := cp.toC4A(res)
				mem := Number(round1(mbOf(s.refreshSample().MemoryBytes)))
				out.ServerMemoryMB = &mem
				enc.Encode(out)
				flush()
			})
			status := StatusCompleted
			if ctx.Err() != nil {
				status = StatusFailed
			}
			enc.Encode(map[string]string{"status": status})
			flush()
			return
		}
		start := time.Now()
		mem0 := mbOf(s.refreshSample().MemoryBytes)
		results := s.c4aRun(ctx, cp, "", nil)
		if r.Context().Err() != nil {
			return
		}
		mem1 := mbOf(s.refreshSample().MemoryBytes)
		okAll = s.writeC4AResults(w, cp, results, time.Since(start), mem1-mem0, max(mem0, mem1))
	})
	if !ran {
		return false, "not run"
	}
	return okAll, ""
}

// writeC4AResults writes Crawl4AI's answer to a batch crawl: {success,
// results, server_processing_time_s, server_memory_delta_mb,
// server_peak_memory_mb}; 500 "Crawl request failed: ..." when no page
// succeeded, as Crawl4AI.
func (s *Server) writeC4AResults(w http.ResponseWriter, cp *c4aPlan, results []*Result, took time.Duration, delta, peak float64) bool {
	out := make([]*c4aResult, len(results))
	anyOK := false
	for i, r := range results {
		out[i] = cp.toC4A(r)
		anyOK = anyOK || r.Success
	}
	if !anyOK {
		msg := "no URL was crawled"
		if len(results) > 0 {
			msg = string(results[0].ErrorMessage)
		}
		writeError(w, http.StatusInternalServerError, "crawl_failed", "Crawl request failed: "+msg)
		return false
	}
	writeJSON(w, http.StatusOK, c4aAnswer(out, took, delta, peak))
	return true
}

func c4aAnswer(out []*c4aResult, took time.Duration, delta, peak float64) map[string]any {
	return map[string]any{"success": true, "results": out,
		"server_processing_time_s": Number(took.Seconds()),
		"server_memory_delta_mb":   Number(round1(delta)), "server_peak_memory_mb": Number(round1(peak))}
}

// handleCrawlJob is POST /crawl/job: the request is stored as a task (in
// Pebble, synced: it survives a restart, which Crawl4AI's Redis jobs do
// not) and answered 202 {task_id}; GET /crawl/job/{task_id} answers it.
func (s *Server) handleCrawlJob(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	cp, err := s.compileC4A(body)
	if err != nil {
		c4aBad(w, err)
		return
	}
	t, ok := s.submitAPI(w, cp.p, body, apiC4A)
	if !ok {
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"task_id": t.ID, "status": t.Status})
}

// handleCrawlJobStatus is GET /crawl/job/{task_id}, in Crawl4AI's shape:
// {task_id, status, created_at, url, result: {success, results, ...}} or
// error.
func (s *Server) handleCrawlJobStatus(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("task_id")
	t, err := s.tasks.get(id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (t.API != apiC4A || t.ExpiresAt > 0 && t.ExpiresAt <= unixSeconds(s.cfg.Now()))) {
		if status, code, msg := s.unknownTask(id); status != http.StatusNotFound {
			writeError(w, status, code, msg)
			return
		}
		writeError(w, http.StatusNotFound, "not_found", "Task not found")
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "the task could not be read")
		return
	}
	urls, _ := json.Marshal(t.URLs)
	out := map[string]any{"task_id": t.ID, "status": t.Status,
		"created_at": time.UnixMilli(int64(float64(t.CreatedAt) * 1000)).UTC().Format("2006-01-02T15:04:05.000000"),
		"url":        string(urls)}
	switch t.Status {
	case StatusCompleted:
		cp, err := s.compileC4A(t.Request)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "internal", "the stored request no longer compiles: "+err.Error())
			return
		}
		res := make([]*c4aResult, len(t.Results))
		for i, x := range t.Results {
			res[i] = cp.toC4A(x)
		}
		out["result"] = c4aAnswer(res, time.Duration((float64(t.FinishedAt)-float64(t.StartedAt))*float64(time.Second)), 0, 0)
	case StatusFailed:
		out["error"] = t.Error
	}
	writeJSON(w, http.StatusOK, out)
}

// oneURL reads the {url} of /md, /html, /screenshot, /pdf and /execute_js.
type oneURL struct {
	URL               string   `json:"url"`
	F                 string   `json:"f"`
	Q                 *string  `json:"q"`
	C                 *string  `json:"c"`
	Provider          string   `json:"provider"`
	ScreenshotWaitFor *float64 `json:"screenshot_wait_for"`
	OutputPath        string   `json:"output_path"`
	Scripts           []string `json:"scripts"`
}

func readOneURL(w http.ResponseWriter, r *http.Request) (*oneURL, bool) {
	body, ok := readBody(w, r)
	if !ok {
		return nil, false
	}
	var in oneURL
	if err := json.Unmarshal(body, &in); err != nil {
		writeError(w, http.StatusUnprocessableEntity, "bad_input", "request body: "+err.Error())
		return nil, false
	}
	if in.URL == "" {
		writeError(w, http.StatusUnprocessableEntity, "bad_input", "url is required")
		return nil, false
	}
	if in.OutputPath != "" {
		writeError(w, http.StatusBadRequest, "bad_input", "output_path is not supported: the server writes nothing to its disk for a caller; the file comes back in the answer")
		return nil, false
	}
	return &in, true
}

// crawlOnePage crawls one URL with req's options (its urls are set
// here) and returns the result; a URL that cannot be crawled (not http or
// https, a private address) is a failed result, as Crawl4AI answers it
// (500 from these routes).
func (s *Server) crawlOnePage(ctx context.Context, raw string, req *Request, tweak func(*plan)) (*Result, error) {
	if _, err := urlpolicy.Validate(raw, s.cfg.AllowPrivateNetworks); err != nil {
		return failed(raw, fmt.Errorf("invalid URL %q: %v", raw, err)), nil
	}
	req.URLs = stringOrList{raw}
	p, err := s.compile(req)
	if err != nil {
		return nil, err
	}
	if tweak != nil {
		tweak(p)
	}
	ctx, cancel := context.WithTimeout(ctx, deadlineFor(p))
	defer cancel()
	stop := context.AfterFunc(s.life, cancel)
	defer stop()
	return s.crawlAll(ctx, p, "", nil)[0], nil
}

// pageOr500 runs one page in a slot and answers 500 {detail} when it
// failed; nil means the answer was written.
func (s *Server) pageOr500(w http.ResponseWriter, r *http.Request, raw string, req *Request, tweak func(*plan)) *Result {
	var res *Result
	var err error
	if !s.inSlot(w, r, func() { res, err = s.crawlOnePage(r.Context(), raw, req, tweak) }) {
		return nil
	}
	if err != nil {
		c4aBad(w, err)
		return nil
	}
	if r.Context().Err() != nil {
		return nil
	}
	if !res.Success {
		writeError(w, http.StatusInternalServerError, "crawl_failed", string(res.ErrorMessage))
		return nil
	}
	return res
}

// handleMD is POST /md: {url, f: fit|raw|bm25|llm, q, c}.
func (s *Server) handleMD(w http.ResponseWriter, r *http.Request) {
	in, ok := readOneURL(w, r)
	if !ok {
		return
	}
	if !strings.HasPrefix(in.URL, "http://") && !strings.HasPrefix(in.URL, "https://") {
		writeError(w, http.StatusBadRequest, "bad_input", "Invalid URL format. Must start with http:// or https://")
		return
	}
	s.markdown(w, r, in)
}

// handleMDGet is Crawl4AI 0.5's GET /md/{url}?f=&q=&c= (its REST example
// still calls it): a URL without a scheme gets https://, as there.
func (s *Server) handleMDGet(w http.ResponseWriter, r *http.Request) {
	qv := r.URL.Query()
	in := &oneURL{URL: strings.TrimPrefix(r.URL.Path, "/md/"), F: qv.Get("f"), Provider: qv.Get("provider")}
	if !strings.HasPrefix(in.URL, "http://") && !strings.HasPrefix(in.URL, "https://") {
		in.URL = "https://" + in.URL
	}
	if qv.Has("q") {
		q := qv.Get("q")
		in.Q = &q
	}
	if qv.Has("c") {
		c := qv.Get("c")
		in.C = &c
	}
	s.markdown(w, r, in)
}

func (s *Server) markdown(w http.ResponseWriter, r *http.Request, in *oneURL) {
	f := strings.ToLower(in.F)
	if f == "" {
		f = "fit"
	}
	q := ""
	if in.Q != nil {
		q = *in.Q
	}
	var client *llm.Client
	switch f {
	case "fit", "raw", "bm25":
	case "llm":
		var err error
		if client, err = s.operatorModel(in.Provider); err != nil {
			writeError(w, http.StatusBadRequest, "bad_input", "f=llm: "+err.Error())
			return
		}
	default:
		writeError(w, http.StatusUnprocessableEntity, "bad_input", fmt.Sprintf("f must be fit, raw, bm25 or llm, got %q", in.F))
		return
	}
	res := s.pageOr500(w, r, in.URL, &Request{}, nil)
	if res == nil {
		return
	}
	var md string
	switch f {
	case "raw":
		md = res.Markdown
	case "fit":
		md = res.FitMarkdown
	case "bm25":
		md = bm25Filter(res.Markdown, q, 1.0)
	case "llm":
		instr := q
		if instr == "" {
			instr = "Extract main content"
		}
		c, err := client.Complete(r.Context(), llm.Request{Messages: []llm.Message{
			{Role: "system", Content: "You rewrite a web page's Markdown as the instruction asks and answer with Markdown only."},
			{Role: "user", Content: "Instruction: " + instr + "\n\nPage (" + res.URL + "):\n\n" + res.Markdown}}})
		if err != nil {
			writeError(w, http.StatusInternalServerError, "llm_failed", "the model failed: "+err.Error())
			return
		}
		md = c.Content
	}
	var qv, cv any
	if in.Q != nil {
		qv = *in.Q
	}
	cv = "0"
	if in.C != nil {
		cv = *in.C
	}
	writeJSON(w, http.StatusOK, map[string]any{"url": in.URL, "filter": f, "query": qv, "cache": cv, "markdown": md, "success": true})
}

// operatorModel is the model the operator configured (trawl's
// --llm-provider and its vendor's key); provider, when set, picks another
// of the operator's vendors.
func (s *Server) operatorModel(provider string) (*llm.Client, error) {
	if provider == "" {
		provider = s.cfg.Extract.DefaultProvider
	}
	if provider == "" {
		return nil, errors.New("no model is configured on this server (trawl crawl --llm-provider <vendor>/<model> and the vendor's key)")
	}
	return llm.New(llm.Config{Getenv: s.cfg.Extract.Getenv, BaseURLs: s.cfg.Extract.BaseURLs, HTTPClient: s.cfg.Extract.HTTPClient,
		Timeout: s.cfg.Extract.LLMTimeout}, provider, "")
}

// handleHTML is POST /html: the rendered page without scripts and styles,
// classes and ids kept, for building schemas (schemaHTML).
func (s *Server) handleHTML(w http.ResponseWriter, r *http.Request) {
	in, ok := readOneURL(w, r)
	if !ok {
		return
	}
	if res := s.pageOr500(w, r, in.URL, &Request{}, nil); res != nil {
		writeJSON(w, http.StatusOK, map[string]any{"html": schemaHTML(res.HTML), "url": in.URL, "success": true})
	}
}

// handleScreenshot is POST /screenshot: a full-page PNG, base64, taken
// screenshot_wait_for seconds (default 2) after the page loaded.
func (s *Server) handleScreenshot(w http.ResponseWriter, r *http.Request) {
	in, ok := readOneURL(w, r)
	if !ok {
		return
	}
	wait := 2.0
	if in.ScreenshotWaitFor != nil {
		wait = *in.ScreenshotWaitFor
	}
	if wait < 0 || wait > maxDelay.Seconds() {
		writeError(w, http.StatusBadRequest, "bad_input", fmt.Sprintf("screenshot_wait_for is in seconds, from 0 to %d", int(maxDelay.Seconds())))
		return
	}
	req := &Request{Screenshot: true, Extra: &Extra{DelayBeforeReturnHTML: &wait}}
	if res := s.pageOr500(w, r, in.URL, req, nil); res != nil {
		writeJSON(w, http.StatusOK, map[string]any{"success": true, "screenshot": res.Screenshot})
	}
}

// handlePDF is POST /pdf: the page printed by Chromium (backgrounds
// included), base64, as Crawl4AI's.
func (s *Server) handlePDF(w http.ResponseWriter, r *http.Request) {
	in, ok := readOneURL(w, r)
	if !ok {
		return
	}
	if res := s.pageOr500(w, r, in.URL, &Request{PDF: true}, nil); res != nil {
		writeJSON(w, http.StatusOK, map[string]any{"success": true, "pdf": res.PDF})
	}
}

// handleExecuteJS is POST /execute_js: {url, scripts}; each script runs in
// order after the page loaded and its value is in js_execution_result
// ({success, results}); the answer is the whole CrawlResult.
func (s *Server) handleExecuteJS(w http.ResponseWriter, r *http.Request) {
	in, ok := readOneURL(w, r)
	if !ok {
		return
	}
	if len(in.Scripts) == 0 {
		writeError(w, http.StatusUnprocessableEntity, "bad_input", "scripts is required: a list of JavaScript snippets")
		return
	}
	if len(in.Scripts) > MaxJSSnippets {
		writeError(w, http.StatusBadRequest, "bad_input", fmt.Sprintf("scripts has %d snippets; at most %d", len(in.Scripts), MaxJSSnippets))
		return
	}
	var scripts []fetch.ScriptResult
	var res *Result
	var err error
	tweak := func(p *plan) {
		p.needsBrowser = true
		for _, sc := range in.Scripts {
			p.opts.Actions = append(p.opts.Actions, fetch.Action{Type: fetch.ActionScript, Script: sc})
		}
	}
	if !s.inSlot(w, r, func() {
		res, err = s.crawlOnePage(r.Context(), in.URL, &Request{}, tweak)
		if res != nil {
			scripts = res.scripts
		}
	}) {
		return
	}
	if err != nil {
		c4aBad(w, err)
		return
	}
	if !res.Success {
		writeError(w, http.StatusInternalServerError, "crawl_failed", string(res.ErrorMessage))
		return
	}
	out := (&c4aPlan{}).toC4A(res)
	vals := make([]any, 0, len(scripts))
	for _, sr := range scripts {
		var v any
		if json.Unmarshal(sr.Value, &v) != nil {
			v = string(sr.Value)
		}
		vals = append(vals, v)
	}
	out.JSExecutionResult = map[string]any{"success": true, "results": vals}
	writeJSON(w, http.StatusOK, out)
}

// handleLLM is GET /llm/{url}?q=: the page's Markdown and the question,
// answered by the operator's model.
func (s *Server) handleLLM(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("q")
	if q == "" {
		writeError(w, http.StatusUnprocessableEntity, "bad_input", "query parameter q is required")
		return
	}
	raw := strings.TrimPrefix(r.URL.Path, "/llm/")
	if !strings.HasPrefix(raw, "http://") && !strings.HasPrefix(raw, "https://") {
		raw = "https://" + raw
	}
	client, merr := s.operatorModel("")
	res := s.pageOr500(w, r, raw, &Request{}, nil)
	if res == nil {
		return
	}
	if merr != nil {
		writeError(w, http.StatusServiceUnavailable, "no_model", merr.Error())
		return
	}
	content := res.FitMarkdown
	if content == "" {
		content = res.Markdown
	}
	c, err := client.Complete(r.Context(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "Use the following content as context to answer the question.\n    Content:\n    " +
		content + "\n\n    Question: " + q + "\n\n    Answer:"}}})
	if err != nil {
		writeError(w, http.StatusInternalServerError, "llm_failed", "the model failed: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"answer": c.Content})
}

// handleToken is POST /token {email}. The server has one token
// (SERVICE_API_TOKEN); it is never handed to a caller who does not hold
// it (the route is behind the token like every other), so a client that
// authenticates gets back the token it sent, in Crawl4AI's shape. Without
// a token the server is open and the answer's access_token is
// openServerToken, which says so (Crawl4AI's client sends it back as a
// bearer; an empty one is an illegal header to it).
func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var in struct {
		Email string `json:"email"`
	}
	if err := json.Unmarshal(body, &in); err != nil || !strings.Contains(in.Email, "@") {
		writeError(w, http.StatusUnprocessableEntity, "bad_input", "want {\"email\": \"you@example.org\"}")
		return
	}
	tok := s.cfg.Token
	if tok == "" {
		// An open server accepts any bearer; clients refuse an empty one.
		tok = openServerToken
	}
	writeJSON(w, http.StatusOK, map[string]any{"email": in.Email, "access_token": tok, "token_type": "bearer"})
}

// openServerToken is /token's answer when the server has no token.
const openServerToken = "open-server-no-token-needed"

// handleSchema is GET /schema: the configurations' defaults as this
// server reads them, in Crawl4AI's serialized form, and the types it
// builds.
func (s *Server) handleSchema(w http.ResponseWriter, r *http.Request) {
	vp := s.cfg.DefaultViewport
	writeJSON(w, http.StatusOK, map[string]any{
		"browser": map[string]any{"type": "BrowserConfig", "params": map[string]any{"browser_type": "chromium", "headless": true,
			"viewport_width": vp.Width, "viewport_height": vp.Height}},
		"crawler": map[string]any{"type": "CrawlerRunConfig", "params": map[string]any{"cache_mode": map[string]any{"type": "CacheMode", "params": "enabled"},
			"word_count_threshold": 1, "page_timeout": defaultPageTimeout.Milliseconds(), "semaphore_count": DefaultSemaphore, "stream": false,
			"screenshot": false, "pdf": false}},
		"types": strings.Split(c4aTypeList(), ", "),
	})
}

// handleAsk is GET /ask: Crawl4AI answers questions about its own library
// from documentation files it ships. Its parameters are checked as there
// (422); this server ships no such files (404, as Crawl4AI without them).
func (s *Server) handleAsk(w http.ResponseWriter, r *http.Request) {
	qv := r.URL.Query()
	if ct := qv.Get("context_type"); ct != "" && ct != "code" && ct != "doc" && ct != "all" {
		writeError(w, http.StatusUnprocessableEntity, "bad_input", "context_type must be code, doc or all")
		return
	}
	if v := qv.Get("score_ratio"); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err != nil || f < 0 || f > 1 {
			writeError(w, http.StatusUnprocessableEntity, "bad_input", "score_ratio must be a number from 0 to 1")
			return
		}
	}
	if v := qv.Get("max_results"); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			writeError(w, http.StatusUnprocessableEntity, "bad_input", "max_results must be an integer of at least 1")
			return
		}
	}
	writeError(w, http.StatusNotFound, "not_found", "Context files not found: this server ships no Crawl4AI library documentation")
}

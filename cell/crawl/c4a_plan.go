package crawl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

// c4aBody is the body of Crawl4AI 0.5+'s POST /crawl, /crawl/stream and
// /crawl/job: urls and the two typed configurations.
type c4aBody struct {
	URLs          json.RawMessage `json:"urls"`
	BrowserConfig json.RawMessage `json:"browser_config"`
	CrawlerConfig json.RawMessage `json:"crawler_config"`
	Hooks         json.RawMessage `json:"hooks"`
	// CrawlerConfigs is Crawl4AI 0.8+'s per-URL list: refused (400).
	CrawlerConfigs json.RawMessage `json:"crawler_configs"`
	WebhookConfig  *WebhookConfig  `json:"webhook_config"`
}

// legacyMarkers are the top-level fields only the task API's bodies have:
// a body with one of them keeps the task API.
var legacyMarkers = []string{"crawler_params", "extra", "priority", "ttl", "extraction_config",
	"css_selector", "js_code", "wait_for", "screenshot", "session_id", "cache_mode", "magic", "word_count_threshold"}

// bodyShape tells a Crawl4AI 0.5+ body ("c4a") from a task-API body
// ("legacy"). A body with a legacy field is legacy; one with crawler_config,
// hooks or a typed browser_config is c4a; any other (urls alone, or with
// the task API's untyped browser_config) stays legacy, so old clients are
// answered as before.
func bodyShape(body []byte) string {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return "legacy" // the legacy decoder says what is wrong
	}
	for _, k := range legacyMarkers {
		if _, ok := top[k]; ok {
			return "legacy"
		}
	}
	if _, ok := top["crawler_config"]; ok {
		return "c4a"
	}
	for _, k := range []string{"hooks", "crawler_configs"} {
		if _, ok := top[k]; ok {
			return "c4a"
		}
	}
	if bc, ok := top["browser_config"]; ok {
		var probe struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(bc, &probe) == nil && probe.Type != "" {
			return "c4a"
		}
	}
	if u := bytes.TrimSpace(top["urls"]); bytes.Equal(u, []byte("[]")) {
		return "c4a" // refused the same either way; 422 as Crawl4AI
	}
	return "legacy"
}

// c4aPlan is a validated Crawl4AI 0.5+ request.
type c4aPlan struct {
	// p runs the valid URLs (p.urls); urls are all the URLs as asked (a
	// URL without a scheme gets https://, as Crawl4AI does) and urlErr[i]
	// says why urls[i] is not crawled ("" when it is p.urls[valid[i]]).
	p      *plan
	urls   []string
	urlErr []string
	stream bool
	// fit is the markdown generator's content filter: "" (none: no
	// fit_markdown, as Crawl4AI), "pruning" or "bm25".
	// captureJS: js_code's values are read back after the page ran them,
	// for js_execution_result.
	captureJS     bool
	fit           string
	bm25Query     string
	bm25Threshold float64
	deep          *deepPlan
}

// compileC4A validates a Crawl4AI 0.5+ body into a plan. Every error is a
// *BadRequest; empty urls is errEmptyURLs (422, as Crawl4AI).
func (s *Server) compileC4A(body []byte) (*c4aPlan, error) {
	var b c4aBody
	if err := json.Unmarshal(body, &b); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, bad("field %s: want %s, got %s", te.Field, jsonType(te.Type.String()), te.Value)
		}
		return nil, bad("request body is not valid JSON: %v", err)
	}
	var urls []string
	if len(bytes.TrimSpace(b.URLs)) == 0 || json.Unmarshal(b.URLs, &urls) != nil {
		var one string
		if json.Unmarshal(b.URLs, &one) != nil || one == "" {
			return nil, bad("urls is required: a list of URLs")
		}
		urls = []string{one}
	}
	if len(urls) == 0 {
		return nil, errEmptyURLs
	}
	if len(urls) > MaxURLs {
		return nil, bad("urls has %d entries; at most %d per request", len(urls), MaxURLs)
	}
	if len(bytes.TrimSpace(b.Hooks)) > 0 && !bytes.Equal(bytes.TrimSpace(b.Hooks), []byte("null")) {
		return nil, bad("hooks are Python code run on the server; this server runs none (use js_code, wait_for or the session_id of CrawlerRunConfig)")
	}
	if c := bytes.TrimSpace(b.CrawlerConfigs); len(c) > 0 && !bytes.Equal(c, []byte("null")) {
		return nil, bad("crawler_configs (per-URL configurations, Crawl4AI 0.8+) is not supported: send one crawler_config")
	}
	bc, err := parseConfig(b.BrowserConfig, "browser_config", "BrowserConfig")
	if err != nil {
		return nil, err
	}
	cc, err := parseConfig(b.CrawlerConfig, "crawler_config", "CrawlerRunConfig")
	if err != nil {
		return nil, err
	}
	req := &Request{CrawlerParams: &CrawlerParams{}, Extra: &Extra{}, BrowserConfig: &BrowserConfig{}, WebhookConfig: b.WebhookConfig}
	cp := &c4aPlan{}
	if err := browserParams(req, bc); err != nil {
		return nil, err
	}
	if err := crawlerParams(req, cp, cc); err != nil {
		return nil, err
	}
	var valid []string
	for _, raw := range urls {
		u := strings.TrimSpace(raw)
		if u != "" && !strings.Contains(u, "://") && !strings.HasPrefix(u, "raw:") {
			u = "https://" + u
		}
		cp.urls = append(cp.urls, u)
		if _, err := urlpolicy.Validate(u, s.cfg.AllowPrivateNetworks); err != nil {
			cp.urlErr = append(cp.urlErr, fmt.Sprintf("invalid URL %q: %v", raw, err))
			continue
		}
		cp.urlErr = append(cp.urlErr, "")
		valid = append(valid, u)
	}
	if len(valid) == 0 {
		valid = []string{"https://example.org/"} // compiled for its checks only; nothing is crawled
	}
	req.URLs = valid
	req.urlList = true
	p, err := s.compile(req)
	if err != nil {
		// The task API's field names, in this API's terms.
		msg := err.Error()
		for old, new := range map[string]string{"extraction_config: ": "crawler_config.extraction_strategy: ",
			"crawler_params.": "", "extra.": "", "browser_config.": "BrowserConfig."} {
			if strings.HasPrefix(msg, old) {
				msg = new + strings.TrimPrefix(msg, old)
				break
			}
		}
		return nil, bad("%s", msg)
	}
	cp.p = p
	captureJS(cp, req)
	if cp.deep != nil {
		p.urlList = true
	}
	return cp, nil
}

// errEmptyURLs is Crawl4AI's "At least one URL required" (a 422 there).
var errEmptyURLs = &BadRequest{Message: "At least one URL required: urls is an empty list"}

// browserParams maps BrowserConfig's params onto the task API's request.
// Params that change nothing here (headless, verbose, extra_args, ...) are
// accepted and ignored, as unknown params are.
func browserParams(req *Request, bc *c4aObject) error {
	bt, _, err := bc.str("browser_type")
	if err != nil {
		return err
	}
	req.BrowserConfig.BrowserType = bt
	if req.BrowserConfig.UserAgent, _, err = bc.str("user_agent"); err != nil {
		return err
	}
	w, okW, err := bc.num("viewport_width")
	if err != nil {
		return err
	}
	h, okH, err := bc.num("viewport_height")
	if err != nil {
		return err
	}
	if vp, ok := bc.Params["viewport"].(map[string]any); ok {
		// {"width": 1200} alone keeps the default height, as Crawl4AI.
		if vw, ok := vp["width"].(float64); ok {
			w, okW = vw, true
		}
		if vh, ok := vp["height"].(float64); ok {
			h, okH = vh, true
		}
	}
	if okW || okH {
		if !okW {
			w = 1080
		}
		if !okH {
			h = 600
		}
		req.BrowserConfig.Viewport = &Viewport{Width: int(w), Height: int(h)}
	}
	if hv, ok := bc.Params["headers"]; ok && hv != nil {
		m, ok := hv.(map[string]any)
		if !ok {
			return bad("BrowserConfig.headers must be an object of strings")
		}
		req.CrawlerParams.Headers = map[string]string{}
		for k, v := range m {
			s, ok := v.(string)
			if !ok {
				return bad("BrowserConfig.headers.%s must be a string", k)
			}
			req.CrawlerParams.Headers[k] = s
		}
	}
	if req.CrawlerParams.Proxy, _, err = bc.str("proxy"); err != nil {
		return err
	}
	if pc, err := bc.object("proxy_config", "ProxyConfig"); err != nil {
		return err
	} else if pc != nil {
		server, _, err := pc.str("server")
		if err != nil {
			return err
		}
		user, _, _ := pc.str("username")
		pass, _, _ := pc.str("password")
		if u, err := url.Parse(server); err == nil && user != "" {
			u.User = url.UserPassword(user, pass)
			server = u.String()
		}
		req.CrawlerParams.Proxy = server
	} else if m, ok := bc.Params["proxy_config"].(map[string]any); ok {
		server, _ := m["server"].(string)
		req.CrawlerParams.Proxy = server
	}
	if req.CrawlerParams.UserDataDir, _, err = bc.str("user_data_dir"); err != nil {
		return err
	}
	if req.CrawlerParams.UseManagedBrowser, err = bc.boolean("use_managed_browser"); err != nil {
		return err
	}
	return nil
}

// crawlerParams maps CrawlerRunConfig's params onto the task API's
// request and the plan's own fields (stream, pdf, the markdown filter,
// the deep crawl).
func crawlerParams(req *Request, cp *c4aPlan, cc *c4aObject) error {
	var err error
	if cp.stream, err = cc.boolean("stream"); err != nil {
		return err
	}
	if req.PDF, err = cc.boolean("pdf"); err != nil {
		return err
	}
	if req.Screenshot, err = cc.boolean("screenshot"); err != nil {
		return err
	}
	if req.CacheMode, _, err = cc.str("cache_mode"); err != nil {
		return err
	}
	if js, err := cc.strings("js_code"); err != nil {
		return err
	} else {
		req.JSCode = js
	}
	for _, f := range []struct {
		k   string
		dst *string
	}{{"wait_for", &req.WaitFor}, {"css_selector", &req.CSSSelector}, {"session_id", &req.SessionID},
		{"screenshot_wait_for", &req.CrawlerParams.ScreenshotWaitFor}, {"user_agent", &req.CrawlerParams.UserAgent}} {
		v, _, err := cc.str(f.k)
		if err != nil {
			if f.k == "screenshot_wait_for" { // Crawl4AI also takes seconds here
				if secs, ok, _ := cc.num(f.k); ok {
					d := secs
					req.Extra.DelayBeforeReturnHTML = &d
					continue
				}
			}
			return err
		}
		*f.dst = v
	}
	if v, ok, err := cc.num("word_count_threshold"); err != nil {
		return err
	} else if ok && v > 1 { // Crawl4AI's default threshold is 1: no filtering
		n := int(v)
		req.Extra.WordCountThreshold = &n
	}
	if req.Extra.OnlyText, err = cc.boolean("only_text"); err != nil {
		return err
	}
	if req.Extra.ProcessIframes, err = cc.boolean("process_iframes"); err != nil {
		return err
	}
	if req.CrawlerParams.RemoveOverlayElements, err = cc.boolean("remove_overlay_elements"); err != nil {
		return err
	}
	if v, ok, err := cc.num("page_timeout"); err != nil {
		return err
	} else if ok {
		req.CrawlerParams.PageTimeout = &v
	}
	if v, ok, err := cc.num("delay_before_return_html"); err != nil {
		return err
	} else if ok && v > 0.1 { // Crawl4AI's default is 0.1 s: no browser needed for it
		req.Extra.DelayBeforeReturnHTML = &v
	}
	if v, ok, err := cc.num("semaphore_count"); err != nil {
		return err
	} else if ok {
		n := int(v)
		req.CrawlerParams.SemaphoreCount = &n
	}
	if err := markdownGenerator(cp, cc); err != nil {
		return err
	}
	if err := extractionStrategy(req, cc); err != nil {
		return err
	}
	ds, err := cc.object("deep_crawl_strategy", "BFSDeepCrawlStrategy", "DFSDeepCrawlStrategy", "BestFirstCrawlingStrategy")
	if err != nil {
		return err
	}
	if ds != nil {
		if cp.deep, err = compileDeep(ds); err != nil {
			return err
		}
	}
	return nil
}

// markdownGenerator reads DefaultMarkdownGenerator's content_filter:
// PruningContentFilter makes fit_markdown the page's main content (trawl's
// readability pass; its threshold params are accepted), BM25ContentFilter
// the blocks that match user_query (c4a_filter.go).
func markdownGenerator(cp *c4aPlan, cc *c4aObject) error {
	mg, err := cc.object("markdown_generator", "DefaultMarkdownGenerator")
	if err != nil || mg == nil {
		return err
	}
	cf, err := mg.object("content_filter", "PruningContentFilter", "BM25ContentFilter")
	if err != nil || cf == nil {
		return err
	}
	switch cf.Type {
	case "PruningContentFilter":
		cp.fit = "pruning"
	case "BM25ContentFilter":
		cp.fit = "bm25"
		if cp.bm25Query, _, err = cf.str("user_query"); err != nil {
			return err
		}
		cp.bm25Threshold = 1.0
		if v, ok, err := cf.num("bm25_threshold"); err != nil {
			return err
		} else if ok {
			cp.bm25Threshold = v
		}
	}
	return nil
}

// extractionStrategy maps the typed strategies onto the task API's
// extraction_config (package extract runs them).
func extractionStrategy(req *Request, cc *c4aObject) error {
	es, err := cc.object("extraction_strategy", "JsonCssExtractionStrategy", "LLMExtractionStrategy", "CosineStrategy", "NoExtractionStrategy")
	if err != nil || es == nil || es.Type == "NoExtractionStrategy" {
		return err
	}
	params := map[string]any{}
	var typ string
	switch es.Type {
	case "JsonCssExtractionStrategy":
		typ = "json_css"
		params["schema"] = es.Params["schema"]
	case "CosineStrategy":
		typ = "cosine"
		for _, k := range []string{"semantic_filter", "word_count_threshold", "max_dist", "linkage_method", "top_k", "sim_threshold"} {
			if v, ok := es.Params[k]; ok {
				params[k] = v
			}
		}
	case "LLMExtractionStrategy":
		typ = "llm"
		for _, k := range []string{"instruction", "schema", "provider", "api_token"} {
			if v, ok := es.Params[k]; ok && v != nil {
				params[k] = v
			}
		}
		lc, err := es.object("llm_config", "LLMConfig")
		if err != nil {
			return err
		}
		if lc != nil {
			for _, k := range []string{"provider", "api_token", "base_url"} {
				if v, ok := lc.Params[k]; ok && v != nil {
					params[k] = v
				}
			}
		}
	}
	raw, err := plainJSON(params, es.Type)
	if err != nil {
		return err
	}
	req.ExtractionConfig = &ExtractionConfig{Type: typ, Params: raw}
	return nil
}

// captureJS rebuilds the page script of a request with js_code so that
// each snippet's value (what it returns, as in Crawl4AI, which runs each
// in an async function too) is kept in the page, and adds an action that
// reads them back: js_execution_result {success, results}. The snippets
// run where the task API runs them (after load, before wait_for).
func captureJS(cp *c4aPlan, req *Request) {
	var code []string
	for _, c := range req.JSCode {
		if strings.TrimSpace(c) != "" {
			code = append(code, c)
		}
	}
	if len(code) == 0 {
		return
	}
	var js []string
	if req.CrawlerParams.RemoveOverlayElements {
		js = append(js, removeOverlaysJS)
	}
	js = append(js, "window.__trawlJS = [];")
	for _, c := range code {
		js = append(js, "const v = await (async () => {\n"+c+"\n})();\nwindow.__trawlJS.push(v === undefined ? null : v);")
	}
	if req.Extra.ProcessIframes {
		js = append(js, inlineIframesJS)
	}
	cp.p.opts.JS = joinScripts(js)
	cp.p.opts.Actions = append(cp.p.opts.Actions, fetch.Action{Type: fetch.ActionScript, Script: "() => window.__trawlJS || []"})
	cp.captureJS = true
}

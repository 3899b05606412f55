package crawl

import (
	"container/heap"
	"context"
	"math"
	"mime"
	"net/url"
	"path"
	"regexp"
	"strings"

	"github.com/temoto/robotstxt"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

// Deep crawls (Crawl4AI's BFSDeepCrawlStrategy, DFSDeepCrawlStrategy and
// BestFirstCrawlingStrategy): from each start URL, follow the links of
// every page crawled, up to max_depth links away and max_pages pages,
// through the strategy's filter chain and (best-first) its scorer, on the
// browser pool and the engine ladder as any crawl; robots.txt is honoured
// for every page past the start.

// MaxDeepPages bounds a deep crawl whose max_pages is unset (Crawl4AI's
// default is unbounded).
const MaxDeepPages = 500

// robotsAgent is the user-agent name looked up in robots.txt.
const robotsAgent = "trawl"

type deepPlan struct {
	kind            string // bfs, dfs, best
	maxDepth        int
	maxPages        int
	includeExternal bool
	threshold       float64 // pages scoring below are not queued (-Inf: none)
	filters         []urlFilter
	scorer          urlScorer
}

type urlFilter func(u *url.URL) bool
type urlScorer func(u *url.URL) float64

func compileDeep(ds *c4aObject) (*deepPlan, error) {
	d := &deepPlan{kind: map[string]string{"BFSDeepCrawlStrategy": "bfs", "DFSDeepCrawlStrategy": "dfs",
		"BestFirstCrawlingStrategy": "best"}[ds.Type], maxPages: MaxDeepPages, threshold: math.Inf(-1)}
	v, ok, err := ds.num("max_depth")
	if err != nil {
		return nil, err
	}
	if !ok || v < 0 || v > 10 {
		return nil, bad("%s.max_depth is required, from 0 to 10", ds.Type)
	}
	d.maxDepth = int(v)
	if v, ok, err := ds.num("max_pages"); err != nil {
		return nil, err
	} else if ok {
		if v < 1 || v > MaxDeepPages {
			return nil, bad("%s.max_pages must be from 1 to %d", ds.Type, MaxDeepPages)
		}
		d.maxPages = int(v)
	}
	if d.includeExternal, err = ds.boolean("include_external"); err != nil {
		return nil, err
	}
	if v, ok, err := ds.num("score_threshold"); err != nil {
		return nil, err
	} else if ok {
		d.threshold = v
	}
	fc, err := ds.object("filter_chain", "FilterChain")
	if err != nil {
		return nil, err
	}
	if fc != nil {
		fs, err := fc.objects("filters", "DomainFilter", "URLPatternFilter", "ContentTypeFilter")
		if err != nil {
			return nil, err
		}
		for _, f := range fs {
			uf, err := compileFilter(f)
			if err != nil {
				return nil, err
			}
			d.filters = append(d.filters, uf)
		}
	}
	sc, err := ds.object("url_scorer", "CompositeScorer", "KeywordRelevanceScorer", "PathDepthScorer")
	if err != nil {
		return nil, err
	}
	if sc != nil {
		if d.scorer, err = compileScorer(sc, 0); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func compileFilter(f *c4aObject) (urlFilter, error) {
	switch f.Type {
	case "DomainFilter":
		allowed, err := f.strings("allowed_domains")
		if err != nil {
			return nil, err
		}
		blocked, err := f.strings("blocked_domains")
		if err != nil {
			return nil, err
		}
		in := func(host string, list []string) bool {
			for _, d := range list {
				d = strings.ToLower(strings.TrimPrefix(strings.TrimSpace(d), "."))
				if host == d || strings.HasSuffix(host, "."+d) {
					return true
				}
			}
			return false
		}
		return func(u *url.URL) bool {
			h := strings.ToLower(u.Hostname())
			return !in(h, blocked) && (len(allowed) == 0 || in(h, allowed))
		}, nil
	case "URLPatternFilter":
		pats, err := f.strings("patterns")
		if err != nil {
			return nil, err
		}
		reverse, err := f.boolean("reverse")
		if err != nil {
			return nil, err
		}
		var res []*regexp.Regexp
		for _, p := range pats {
			re, err := globRegexp(p)
			if err != nil {
				return nil, bad("URLPatternFilter.patterns: %q: %v", p, err)
			}
			res = append(res, re)
		}
		return func(u *url.URL) bool {
			s := u.String()
			for _, re := range res {
				if re.MatchString(s) {
					return !reverse
				}
			}
			return reverse
		}, nil
	case "ContentTypeFilter":
		types, err := f.strings("allowed_types")
		if err != nil {
			return nil, err
		}
		return func(u *url.URL) bool {
			ext := strings.ToLower(path.Ext(u.Path))
			if ext == "" || ext == ".html" || ext == ".htm" || ext == ".php" || ext == ".asp" || ext == ".aspx" {
				ext = ".html" // a page, as Crawl4AI assumes
			}
			mt := mime.TypeByExtension(ext)
			mt, _, _ = strings.Cut(mt, ";")
			for _, t := range types {
				t = strings.ToLower(strings.TrimSpace(t))
				if mt == t || strings.HasPrefix(mt, strings.TrimSuffix(t, "*")) && strings.HasSuffix(t, "*") || ext == "."+t {
					return true
				}
			}
			return false
		}, nil
	}
	return nil, bad("%s is not a URL filter", f.Type)
}

// globRegexp reads a URL pattern: a glob (* any text, ? one character),
// or a regular expression when it starts with ^ (as Crawl4AI's).
func globRegexp(p string) (*regexp.Regexp, error) {
	if strings.HasPrefix(p, "^") {
		return regexp.Compile(p)
	}
	var b strings.Builder
	for _, r := range p {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	if !strings.ContainsAny(p, "*?") {
		return regexp.Compile(regexp.QuoteMeta(p)) // a plain substring
	}
	return regexp.Compile("^" + b.String() + "$")
}

func compileScorer(sc *c4aObject, depth int) (urlScorer, error) {
	weight := 1.0
	if v, ok, err := sc.num("weight"); err != nil {
		return nil, err
	} else if ok {
		weight = v
	}
	switch sc.Type {
	case "KeywordRelevanceScorer":
		kws, err := sc.strings("keywords")
		if err != nil {
			return nil, err
		}
		cs, err := sc.boolean("case_sensitive")
		if err != nil {
			return nil, err
		}
		return func(u *url.URL) float64 {
			if len(kws) == 0 {
				return 0
			}
			s := u.String()
			if !cs {
				s = strings.ToLower(s)
			}
			n := 0
			for _, k := range kws {
				if !cs {
					k = strings.ToLower(k)
				}
				if strings.Contains(s, k) {
					n++
				}
			}
			return weight * float64(n) / float64(len(kws))
		}, nil
	case "PathDepthScorer":
		optimal := 3.0
		if v, ok, err := sc.num("optimal_depth"); err != nil {
			return nil, err
		} else if ok {
			optimal = v
		}
		return func(u *url.URL) float64 {
			n := 0
			for _, s := range strings.Split(u.Path, "/") {
				if s != "" {
					n++
				}
			}
			return weight / (1 + math.Abs(float64(n)-optimal))
		}, nil
	case "CompositeScorer":
		if depth > 4 {
			return nil, bad("CompositeScorer nested too deep")
		}
		subs, err := sc.objects("scorers", "CompositeScorer", "KeywordRelevanceScorer", "PathDepthScorer")
		if err != nil {
			return nil, err
		}
		normalize, err := sc.boolean("normalize")
		if err != nil {
			return nil, err
		}
		var fs []urlScorer
		for _, s := range subs {
			f, err := compileScorer(s, depth+1)
			if err != nil {
				return nil, err
			}
			fs = append(fs, f)
		}
		return func(u *url.URL) float64 {
			var t float64
			for _, f := range fs {
				t += f(u)
			}
			if normalize && len(fs) > 0 {
				t /= float64(len(fs))
			}
			return t
		}, nil
	}
	return nil, bad("%s is not a URL scorer", sc.Type)
}

// deepItem is a page waiting in a deep crawl's frontier.
type deepItem struct {
	u      *url.URL
	depth  int
	parent string
	score  float64
	seq    int
}

// frontier orders the pages to crawl: best-first by score (then found
// first), else by discovery.
type frontier []*deepItem

func (f frontier) Len() int { return len(f) }
func (f frontier) Less(i, j int) bool {
	if f[i].score != f[j].score {
		return f[i].score > f[j].score
	}
	return f[i].seq < f[j].seq
}
func (f frontier) Swap(i, j int) { f[i], f[j] = f[j], f[i] }
func (f *frontier) Push(x any)   { *f = append(*f, x.(*deepItem)) }
func (f *frontier) Pop() any {
	old := *f
	it := old[len(old)-1]
	*f = old[:len(old)-1]
	return it
}

// deepCrawl runs the plan's deep crawl from its start URLs, calling each
// with every result as it completes (nil: none), and returns them all in
// crawl order. Each result's metadata has depth, parent_url and score.
func (s *Server) deepCrawl(ctx context.Context, cp *c4aPlan, taskID string, each func(*Result)) []*Result {
	d := cp.deep
	seen := map[string]bool{}
	robots := map[string]*robotstxt.RobotsData{}
	var queue []*deepItem // bfs: FIFO; dfs: LIFO
	var best frontier
	seq := 0
	push := func(it *deepItem) {
		seq++
		it.seq = seq
		if d.kind == "best" {
			heap.Push(&best, it)
		} else {
			queue = append(queue, it)
		}
	}
	for _, u := range cp.p.urls {
		k := deepKey(u)
		if !seen[k] {
			seen[k] = true
			push(&deepItem{u: u})
		}
	}
	var out []*Result
	for len(out) < d.maxPages && ctx.Err() == nil {
		var batch []*deepItem
		switch d.kind {
		case "bfs": // one level at a time
			lvl := -1
			for len(queue) > 0 && (lvl < 0 || queue[0].depth == lvl) && len(batch) < d.maxPages-len(out) {
				lvl = queue[0].depth
				batch = append(batch, queue[0])
				queue = queue[1:]
			}
		case "dfs":
			if n := len(queue); n > 0 {
				batch = append(batch, queue[n-1])
				queue = queue[:n-1]
			}
		default:
			for best.Len() > 0 && len(batch) < cp.p.semaphore && len(batch) < d.maxPages-len(out) {
				batch = append(batch, heap.Pop(&best).(*deepItem))
			}
		}
		if len(batch) == 0 {
			break
		}
		pc := *cp.p
		pc.urls = nil
		for _, it := range batch {
			pc.urls = append(pc.urls, it.u)
		}
		results := s.crawlAll(ctx, &pc, taskID, nil)
		var children []*deepItem
		for i, r := range results {
			it := batch[i]
			if r.Metadata == nil {
				r.Metadata = map[string]any{}
			}
			r.Metadata["depth"] = it.depth
			if it.parent != "" {
				r.Metadata["parent_url"] = it.parent
			} else {
				r.Metadata["parent_url"] = nil
			}
			if d.scorer != nil {
				r.Metadata["score"] = it.score
			}
			out = append(out, r)
			if each != nil {
				each(r)
			}
			if !r.Success || it.depth >= d.maxDepth {
				continue
			}
			links := r.Links.Internal
			if d.includeExternal {
				links = append(append([]Link{}, links...), r.Links.External...)
			}
			for _, l := range links {
				lu, err := url.Parse(l.Href)
				if err != nil || (lu.Scheme != "http" && lu.Scheme != "https") {
					continue
				}
				lu.Fragment = ""
				k := deepKey(lu)
				if seen[k] || !d.passes(lu) {
					continue
				}
				if _, err := urlpolicy.Validate(lu.String(), s.cfg.AllowPrivateNetworks); err != nil {
					continue // a page may link anywhere; the server fetches only what it may
				}
				seen[k] = true
				if !s.robotsAllow(ctx, robots, lu) {
					continue
				}
				child := &deepItem{u: lu, depth: it.depth + 1, parent: r.URL}
				if d.scorer != nil {
					child.score = d.scorer(lu)
					if child.score < d.threshold {
						continue
					}
				}
				children = append(children, child)
			}
		}
		if d.kind == "dfs" { // the first link is crawled first
			for i := len(children) - 1; i >= 0; i-- {
				push(children[i])
			}
		} else {
			for _, c := range children {
				push(c)
			}
		}
	}
	return out
}

func (d *deepPlan) passes(u *url.URL) bool {
	for _, f := range d.filters {
		if !f(u) {
			return false
		}
	}
	return true
}

// deepKey is a URL as a deep crawl dedupes it: no fragment, no trailing
// slash on the path.
func deepKey(u *url.URL) string {
	c := *u
	c.Fragment = ""
	c.Path = strings.TrimSuffix(c.Path, "/")
	return c.String()
}

// robotsAllow reads a host's robots.txt once per deep crawl (missing:
// everything allowed; unreadable or 5xx: nothing, as internal/crawler).
func (s *Server) robotsAllow(ctx context.Context, cache map[string]*robotstxt.RobotsData, u *url.URL) bool {
	root := u.Scheme + "://" + u.Host
	rd, ok := cache[root]
	if !ok {
		resp, err := s.http.Fetch(ctx, &fetch.Request{URL: root + "/robots.txt"})
		if err == nil {
			rd, err = robotstxt.FromStatusAndBytes(resp.Status, resp.Body)
		}
		if err != nil {
			s.log.Info("crawl: robots.txt unreadable; the host's pages are skipped", "host", u.Host, "err", err)
			rd = nil
		}
		cache[root] = rd
	}
	if rd == nil {
		return false
	}
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return rd.TestAgent(p, robotsAgent)
}

// Package crawler is the frontier of the operator's index crawler (trawl index
// crawl), fetch-agnostic: the trawl command fetches through a gate (its
// client package), and the cell's site crawl can run on it too. It
// grows a region's search index by fetching pages through the product's
// own path (each page a scrape the cells archive, and so index), from
// seeds and sitemaps, following links within the seeds' hosts and a depth
// limit. It honours robots.txt (github.com/temoto/robotstxt, the agent
// "trawl"), waits Delay between two fetches of one host and fetches one
// page of a host at a time, and keeps its frontier in a Pebble store, so
// a crawler stopped at any point resumes where it was: a URL leaves the
// frontier only once its fetch is done. Anchor text travels with the
// pages: the cells index each link's text with the page it points to.
package crawler

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/temoto/robotstxt"

	"github.com/trawlhq/trawl/internal/store"
)

// Agent is the crawler's user agent name in robots.txt.
const Agent = "trawl"

// Link is a link of a fetched page.
type Link struct{ Href, Text string }

// Page is what a fetch returns.
type Page struct {
	URL   string // final
	Links []Link
	// Hash identifies the page's content (its main content: a page whose
	// hash changed between two visits changed); "" when unknown.
	Hash string
}

// Config configures a Crawler.
type Config struct {
	// Fetch fetches a page through the product (a scrape through the
	// gate: the cell archives and indexes it) and returns its links.
	Fetch func(ctx context.Context, u string) (*Page, error)
	// Get reads robots.txt and sitemaps directly; default http.Get with
	// a 10 s timeout.
	Get func(ctx context.Context, u string) (status int, body []byte, err error)
	// MaxDepth is how many links from a seed are followed (default 3);
	// MaxPages stops the run after that many fetches (0: no limit).
	MaxDepth int
	MaxPages int
	// Delay is the least time between two fetches of one host (default
	// 1 s); Workers the hosts fetched at once (default 4).
	Delay   time.Duration
	Workers int
	Logger  *slog.Logger
	// Revisit is the recrawl policy (QueueDue); zero fields take the
	// defaults.
	Revisit Revisit
	// Now is the clock of revisits (default time.Now).
	Now func() time.Time
}

// Revisit is the recrawl policy: a page is due again Initial after its
// first fetch; each later visit halves its interval when the page changed
// since the visit before and doubles it when it did not, within [Min,
// Max]. So a page is revisited about as often as it is seen to change.
type Revisit struct {
	Initial, Min, Max time.Duration
}

// Default revisit policy.
const (
	DefaultRevisitInitial = 24 * time.Hour
	DefaultRevisitMin     = time.Hour
	DefaultRevisitMax     = 30 * 24 * time.Hour
)

// Visit is a fetched URL's revisit state (PrefixFrontierVisit).
type Visit struct {
	URL      string        `json:"url"`
	Depth    int           `json:"depth"`
	Hash     string        `json:"hash,omitempty"`
	Visits   int           `json:"visits"`
	Changes  int           `json:"changes"` // visits that found it changed
	Interval time.Duration `json:"interval"`
	Next     time.Time     `json:"next"`
	Queued   bool          `json:"queued,omitempty"` // queued again, not yet visited
}

// Crawler is a crawl with its frontier.
type Crawler struct {
	cfg   Config
	st    *store.Store
	mu    sync.Mutex
	seq   uint64
	hosts map[string]bool // hosts of the seeds: links are followed within them
	robot map[string]*robotstxt.RobotsData
}

// Stats are a run's counts.
type Stats struct {
	Fetched, Failed, Refused, Queued int
}

type item struct {
	URL   string `json:"url"`
	Depth int    `json:"depth"`
}

// Open opens the frontier in dir.
func Open(dir string, cfg Config) (*Crawler, error) {
	if cfg.Fetch == nil {
		return nil, errors.New("crawler: no Fetch")
	}
	if cfg.MaxDepth == 0 {
		cfg.MaxDepth = 3
	}
	if cfg.Delay == 0 {
		cfg.Delay = time.Second
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Revisit.Initial <= 0 {
		cfg.Revisit.Initial = DefaultRevisitInitial
	}
	if cfg.Revisit.Min <= 0 {
		cfg.Revisit.Min = DefaultRevisitMin
	}
	if cfg.Revisit.Max <= 0 {
		cfg.Revisit.Max = DefaultRevisitMax
	}
	if cfg.Get == nil {
		client := &http.Client{Timeout: 10 * time.Second}
		cfg.Get = func(ctx context.Context, u string) (int, []byte, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			if err != nil {
				return 0, nil, err
			}
			req.Header.Set("User-Agent", Agent)
			resp, err := client.Do(req)
			if err != nil {
				return 0, nil, err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
			return resp.StatusCode, b, err
		}
	}
	st, err := store.Open(dir, nil)
	if err != nil {
		return nil, err
	}
	c := &Crawler{cfg: cfg, st: st, hosts: map[string]bool{}, robot: map[string]*robotstxt.RobotsData{}}
	// The sequence continues after the frontier's last item, and the
	// seeds' hosts are those of the URLs queued so far.
	err = st.Scan([]byte(store.PrefixFrontier), nil, func(k, v []byte) (bool, error) {
		if len(k) == len(store.PrefixFrontier)+8 {
			c.seq = max(c.seq, binary.BigEndian.Uint64(k[len(store.PrefixFrontier):]))
		}
		return true, nil
	})
	if err == nil {
		err = st.Scan([]byte(store.PrefixFrontierSeen), nil, func(k, v []byte) (bool, error) {
			if string(v) == "seed" {
				if u, err := url.Parse(string(k[len(store.PrefixFrontierSeen):])); err == nil {
					c.hosts[u.Host] = true
				}
			}
			return true, nil
		})
	}
	if err != nil {
		st.Close()
		return nil, err
	}
	return c, nil
}

// Close closes the frontier.
func (c *Crawler) Close() error { return c.st.Close() }

// Seed queues seeds: pages, or sitemaps (a URL ending in .xml, whose
// <loc> entries are queued as seeds).
func (c *Crawler) Seed(ctx context.Context, seeds ...string) (int, error) {
	n := 0
	for _, s := range seeds {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return n, fmt.Errorf("crawler: seed %q is not an http(s) URL", s)
		}
		if strings.HasSuffix(u.Path, ".xml") {
			locs, err := c.sitemap(ctx, s)
			if err != nil {
				return n, err
			}
			for _, l := range locs {
				if ok, err := c.queue(l, 0, true); err != nil {
					return n, err
				} else if ok {
					n++
				}
			}
			continue
		}
		if ok, err := c.queue(s, 0, true); err != nil {
			return n, err
		} else if ok {
			n++
		}
	}
	return n, nil
}

var locRE = regexp.MustCompile(`<loc>\s*([^<\s]+)\s*</loc>`)

func (c *Crawler) sitemap(ctx context.Context, u string) ([]string, error) {
	status, b, err := c.cfg.Get(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("crawler: sitemap %s: %w", u, err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("crawler: sitemap %s: status %d", u, status)
	}
	var out []string
	for _, m := range locRE.FindAllSubmatch(b, -1) {
		out = append(out, strings.TrimSpace(string(m[1])))
	}
	return out, nil
}

// queue adds u at depth unless it was queued before.
func (c *Crawler) queue(raw string, depth int, seed bool) (bool, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false, nil
	}
	u.Fragment = ""
	s := u.String()
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := []byte(store.PrefixFrontierSeen + s)
	if _, err := c.st.Get(seen); err == nil {
		return false, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	if seed {
		c.hosts[u.Host] = true
	} else if !c.hosts[u.Host] {
		return false, nil
	}
	b := c.st.NewBatch()
	mark := "1"
	if seed {
		mark = "seed"
	}
	b.Set(seen, []byte(mark))
	c.enqueueLocked(b, s, depth)
	return true, b.Commit(store.Sync)
}

// enqueueLocked adds u at depth to the queue in b (c.mu held).
func (c *Crawler) enqueueLocked(b *store.Batch, u string, depth int) {
	c.seq++
	k := binary.BigEndian.AppendUint64([]byte(store.PrefixFrontier), c.seq)
	v, _ := json.Marshal(item{URL: u, Depth: depth})
	b.Set(k, v)
}

// QueueDue queues again every fetched page whose revisit is due at now
// (Revisit), once, and returns how many it queued. Its links are followed
// again within the depth it was first found at, but only to URLs never
// queued before.
func (c *Crawler) QueueDue(now time.Time) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.st.NewBatch()
	n := 0
	err := c.st.Scan([]byte(store.PrefixFrontierVisit), nil, func(k, v []byte) (bool, error) {
		var r Visit
		if json.Unmarshal(v, &r) != nil || r.Queued || r.Next.After(now) {
			return true, nil
		}
		r.Queued = true
		nv, _ := json.Marshal(r)
		b.Set(append([]byte(nil), k...), nv)
		c.enqueueLocked(b, r.URL, r.Depth)
		n++
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	return n, b.Commit(store.Sync)
}

// Visits are the revisit records of the pages fetched, by URL.
func (c *Crawler) Visits() (map[string]Visit, error) {
	out := map[string]Visit{}
	err := c.st.Scan([]byte(store.PrefixFrontierVisit), nil, func(k, v []byte) (bool, error) {
		var r Visit
		if err := json.Unmarshal(v, &r); err != nil {
			return false, err
		}
		out[r.URL] = r
		return true, nil
	})
	return out, err
}

// missed records that a revisit of it failed or was refused: it leaves
// the queue, so it is due again one interval on (not queued for ever).
func (c *Crawler) missed(it item) {
	k := []byte(store.PrefixFrontierVisit + it.URL)
	c.mu.Lock()
	defer c.mu.Unlock()
	v, err := c.st.Get(k)
	if err != nil {
		return // a first fetch: no record
	}
	var r Visit
	if json.Unmarshal(v, &r) != nil || !r.Queued {
		return
	}
	r.Queued = false
	r.Next = c.cfg.Now().Add(r.Interval)
	v, _ = json.Marshal(r)
	if err := c.st.Set(k, v, store.Sync); err != nil {
		c.cfg.Logger.Warn("crawler: frontier write failed", "err", err)
	}
}

// visited records a fetch of it that returned hash: the page's next
// revisit, sooner if it changed since the last visit, later if not.
func (c *Crawler) visited(it item, hash string) error {
	k := []byte(store.PrefixFrontierVisit + it.URL)
	c.mu.Lock()
	defer c.mu.Unlock()
	r := Visit{URL: it.URL, Depth: it.Depth, Interval: c.cfg.Revisit.Initial}
	if v, err := c.st.Get(k); err == nil {
		var old Visit
		if json.Unmarshal(v, &old) == nil {
			r = old
			r.Depth = min(r.Depth, it.Depth)
			if hash != "" && old.Hash != "" && hash != old.Hash {
				r.Changes++
				r.Interval /= 2
			} else {
				r.Interval *= 2
			}
			r.Interval = min(max(r.Interval, c.cfg.Revisit.Min), c.cfg.Revisit.Max)
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	r.Visits++
	if hash != "" {
		r.Hash = hash
	}
	r.Queued = false
	r.Next = c.cfg.Now().Add(r.Interval)
	v, _ := json.Marshal(r)
	return c.st.Set(k, v, store.Sync)
}

// Pending is how many URLs wait in the frontier.
func (c *Crawler) Pending() (int, error) {
	n := 0
	err := c.st.Scan([]byte(store.PrefixFrontier), nil, func(k, v []byte) (bool, error) {
		n++
		return true, nil
	})
	return n, err
}

// Run fetches the frontier until it is empty, MaxPages were fetched, or
// ctx ends (the frontier keeps what is left).
func (c *Crawler) Run(ctx context.Context) (Stats, error) {
	var st Stats
	var smu sync.Mutex
	busy := map[string]bool{}      // hosts being fetched
	last := map[string]time.Time{} // last fetch per host
	inflight := map[string]bool{}  // frontier keys being fetched
	wake := make(chan struct{}, 1)
	var wg sync.WaitGroup
	sem := make(chan struct{}, c.cfg.Workers)
	for {
		if ctx.Err() != nil {
			break
		}
		smu.Lock()
		done := c.cfg.MaxPages > 0 && st.Fetched+st.Failed >= c.cfg.MaxPages
		smu.Unlock()
		if done {
			break
		}
		// The first queued URL whose host is free and rested.
		var key []byte
		var it item
		var wait time.Duration = -1
		now := time.Now()
		smu.Lock()
		err := c.st.Scan([]byte(store.PrefixFrontier), nil, func(k, v []byte) (bool, error) {
			if inflight[string(k)] {
				return true, nil
			}
			var x item
			if json.Unmarshal(v, &x) != nil {
				return true, nil
			}
			u, _ := url.Parse(x.URL)
			if busy[u.Host] {
				return true, nil
			}
			if d := c.cfg.Delay - now.Sub(last[u.Host]); d > 0 {
				if wait < 0 || d < wait {
					wait = d
				}
				return true, nil
			}
			key, it = append([]byte(nil), k...), x
			return false, nil
		})
		if key != nil {
			u, _ := url.Parse(it.URL)
			busy[u.Host], inflight[string(key)] = true, true
		}
		empty := key == nil && wait < 0 && len(inflight) == 0
		smu.Unlock()
		if err != nil {
			return st, err
		}
		if empty {
			break
		}
		if key == nil {
			// Nothing ready: wait for a fetch to end or a host to rest.
			var t <-chan time.Time
			if wait > 0 {
				t = time.After(wait)
			}
			select {
			case <-wake:
			case <-t:
			case <-ctx.Done():
			}
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res := c.visit(ctx, it)
			u, _ := url.Parse(it.URL)
			smu.Lock()
			switch res {
			case visitFetched:
				st.Fetched++
			case visitFailed:
				st.Failed++
			case visitRefused:
				st.Refused++
			}
			if res != visitStopped {
				c.st.Delete(key, store.Sync)
			}
			delete(busy, u.Host)
			delete(inflight, string(key))
			if res != visitRefused {
				last[u.Host] = time.Now()
			}
			smu.Unlock()
			select {
			case wake <- struct{}{}:
			default:
			}
		}()
	}
	wg.Wait()
	n, _ := c.Pending()
	st.Queued = n
	return st, ctx.Err()
}

type visitResult int

const (
	visitFetched visitResult = iota
	visitFailed
	visitRefused // robots.txt
	visitStopped // ctx ended: stays in the frontier
)

func (c *Crawler) visit(ctx context.Context, it item) visitResult {
	u, err := url.Parse(it.URL)
	if err != nil {
		return visitFailed
	}
	if !c.allowed(ctx, u) {
		c.cfg.Logger.Info("crawler: robots.txt refuses", "url", it.URL)
		c.missed(it)
		return visitRefused
	}
	p, err := c.cfg.Fetch(ctx, it.URL)
	if ctx.Err() != nil {
		return visitStopped
	}
	if err != nil {
		c.cfg.Logger.Warn("crawler: fetch failed", "url", it.URL, "err", err)
		c.missed(it)
		return visitFailed
	}
	if err := c.visited(it, p.Hash); err != nil {
		c.cfg.Logger.Warn("crawler: frontier write failed", "err", err)
	}
	if it.Depth < c.cfg.MaxDepth {
		for _, l := range p.Links {
			if _, err := c.queue(l.Href, it.Depth+1, false); err != nil {
				c.cfg.Logger.Warn("crawler: frontier write failed", "err", err)
			}
		}
	}
	return visitFetched
}

// robotsSitemaps queues the pages of the sitemaps a host's robots.txt
// names (on the seeds' hosts, at depth 0), once per run.
func (c *Crawler) robotsSitemaps(ctx context.Context, root string, sitemaps []string) {
	for _, sm := range sitemaps {
		locs, err := c.sitemap(ctx, sm)
		if err != nil {
			c.cfg.Logger.Warn("crawler: a sitemap of robots.txt", "robots", root+"/robots.txt", "err", err)
			continue
		}
		for _, l := range locs {
			if _, err := c.queue(l, 0, false); err != nil {
				c.cfg.Logger.Warn("crawler: frontier write failed", "err", err)
			}
		}
	}
}

// allowed reads the host's robots.txt once per run (a missing one allows
// everything; an unreadable one, or a 5xx, refuses for this run).
func (c *Crawler) allowed(ctx context.Context, u *url.URL) bool {
	root := u.Scheme + "://" + u.Host
	c.mu.Lock()
	rd, ok := c.robot[root]
	c.mu.Unlock()
	if !ok {
		status, body, err := c.cfg.Get(ctx, root+"/robots.txt")
		if err == nil {
			rd, err = robotstxt.FromStatusAndBytes(status, body)
		}
		if err != nil {
			rd = nil
		}
		c.mu.Lock()
		c.robot[root] = rd
		c.mu.Unlock()
		if rd != nil {
			c.robotsSitemaps(ctx, root, rd.Sitemaps)
		}
	}
	if rd == nil {
		return false
	}
	path := u.EscapedPath()
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	return rd.TestAgent(path, Agent)
}

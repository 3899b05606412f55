package search

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// The link-authority prior: PageRank over the link graph of the pages the
// cell archived (each page's links to other pages, as indexed). The graph
// is kept in memory and written beside the index (search.graph.json) when
// the ranks are computed again; a page indexed again replaces its links.
// Ranks are computed again at most every RankEvery while pages are being
// added, off the query path, and read by queries from an immutable map.

// RankEvery is the least time between two computations of the ranks.
var RankEvery = 10 * time.Second

type graph struct {
	mu    sync.Mutex
	out   map[string][]string // page → the pages it links to
	dirty bool
	path  string // "" in memory

	ranks    sync.Map // "r" → map[string]float64, prior in [0,1] by URL
	computed time.Time
	busy     bool
}

func newGraph(path string) *graph {
	g := &graph{out: map[string][]string{}, path: path}
	if path != "" {
		if b, err := os.ReadFile(path); err == nil {
			json.Unmarshal(b, &g.out)
		}
	}
	g.compute()
	return g
}

// add records docs' links (distinct, not to themselves).
func (g *graph) add(docs []*Doc) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, d := range docs {
		seen := map[string]bool{}
		var out []string
		for _, l := range d.Links {
			if l.Href != d.URL && !seen[l.Href] && (len(l.Href) > 7 && (l.Href[:7] == "http://" || l.Href[:8] == "https://")) {
				seen[l.Href] = true
				out = append(out, l.Href)
			}
		}
		g.out[d.URL] = out
		g.dirty = true
	}
}

// maybeCompute computes the ranks again in the background when pages were
// added and the last computation is RankEvery old.
func (g *graph) maybeCompute() {
	g.mu.Lock()
	if !g.dirty || g.busy || time.Since(g.computed) < RankEvery {
		g.mu.Unlock()
		return
	}
	g.busy = true
	g.mu.Unlock()
	go func() {
		g.compute()
		g.mu.Lock()
		g.busy = false
		g.mu.Unlock()
	}()
}

// compute runs PageRank (damping 0.85, 30 iterations, the rank of pages
// without links spread over all) and turns each page's rank into a prior
// in [0,1]: log(1 + rank·N) / log(1 + maxRank·N).
func (g *graph) compute() {
	g.mu.Lock()
	ids := map[string]int{}
	var names []string
	id := func(u string) int {
		if i, ok := ids[u]; ok {
			return i
		}
		ids[u] = len(names)
		names = append(names, u)
		return len(names) - 1
	}
	type edge struct{ from, to int }
	var edges []edge
	for u, outs := range g.out {
		f := id(u)
		for _, v := range outs {
			edges = append(edges, edge{f, id(v)})
		}
	}
	var snapshot []byte
	if g.path != "" && g.dirty {
		snapshot, _ = json.Marshal(g.out)
	}
	g.dirty = false
	g.computed = time.Now()
	g.mu.Unlock()

	n := len(names)
	ranks := map[string]float64{}
	if n > 0 {
		deg := make([]int, n)
		for _, e := range edges {
			deg[e.from]++
		}
		pr := make([]float64, n)
		next := make([]float64, n)
		for i := range pr {
			pr[i] = 1 / float64(n)
		}
		const d = 0.85
		for range 30 {
			dangling := 0.0
			for i, p := range pr {
				if deg[i] == 0 {
					dangling += p
				}
			}
			base := (1-d)/float64(n) + d*dangling/float64(n)
			for i := range next {
				next[i] = base
			}
			for _, e := range edges {
				next[e.to] += d * pr[e.from] / float64(deg[e.from])
			}
			pr, next = next, pr
		}
		top := 0.0
		for _, p := range pr {
			top = max(top, p)
		}
		den := math.Log1p(top * float64(n))
		for i, p := range pr {
			if den > 0 {
				ranks[names[i]] = math.Log1p(p*float64(n)) / den
			}
		}
	}
	g.ranks.Store("r", ranks)
	if snapshot != nil {
		tmp := g.path + ".tmp"
		if os.WriteFile(tmp, snapshot, 0o644) == nil {
			os.Rename(tmp, g.path)
		}
	}
}

// prior is a page's link authority in [0,1] (0 for a page no link
// reaches and that links nowhere).
func (g *graph) prior(u string) float64 {
	r, _ := g.ranks.Load("r")
	m, _ := r.(map[string]float64)
	return m[u]
}

func graphPath(dir string) string {
	if dir == "" {
		return ""
	}
	return filepath.Clean(dir) + ".graph.json"
}

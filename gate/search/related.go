package search

import (
	"container/list"
	"crypto/sha256"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/trawlhq/trawl/internal/searchapi"
)

// Related queries from what other callers searched, without leaking any
// caller's query: a query is offered to others only once KAnonymity
// distinct accounts have searched it (with results) within
// PopularWindow; until then it is nobody's business but its caller's. A
// query is normalised (lower case, single spaces) and is never kept when
// it could carry something personal: longer than 60 characters or 6
// words, or with an @, a URL, or a run of 5 digits or more. Accounts are
// kept as hashes, at most kMax a query, and the gate keeps at most
// maxTracked queries (the least recently searched go first), in memory:
// a gate that restarts starts counting again.
const (
	KAnonymity    = 5
	PopularWindow = 30 * 24 * time.Hour
	maxTracked    = 50000
	kMax          = 16
)

type popular struct {
	mu    sync.Mutex
	order *list.List               // of *tracked, most recent first
	items map[string]*list.Element // normalised query → element
}

type tracked struct {
	q     string
	stems []string
	seen  map[[8]byte]time.Time // account hash → last search
}

func newPopular() *popular { return &popular{order: list.New(), items: map[string]*list.Element{}} }

// normQuery is q as the counts key it, or "" when it must not be kept.
func normQuery(q string) string {
	n := strings.Join(strings.Fields(strings.ToLower(q)), " ")
	if n == "" || len(n) > 60 || len(strings.Fields(n)) > 6 || strings.ContainsAny(n, "@/\\") || strings.Contains(n, "http") {
		return ""
	}
	digits := 0
	for _, r := range n {
		if unicode.IsDigit(r) {
			if digits++; digits >= 5 {
				return ""
			}
		} else {
			digits = 0
		}
	}
	return n
}

// record counts account's search for q at now.
func (p *popular) record(q, account string, now time.Time) {
	n := normQuery(q)
	if n == "" || account == "" {
		return
	}
	h := sha256.Sum256([]byte("trawl-related-v1\x00" + account))
	var key [8]byte
	copy(key[:], h[:8])
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.items[n]
	if !ok {
		e = p.order.PushFront(&tracked{q: n, stems: searchapi.Stems(n), seen: map[[8]byte]time.Time{}})
		p.items[n] = e
		for p.order.Len() > maxTracked {
			last := p.order.Back()
			p.order.Remove(last)
			delete(p.items, last.Value.(*tracked).q)
		}
	} else {
		p.order.MoveToFront(e)
	}
	t := e.Value.(*tracked)
	if _, ok := t.seen[key]; !ok && len(t.seen) >= kMax {
		// Enough to tell: forget the oldest.
		var oldK [8]byte
		var oldT time.Time
		for k, at := range t.seen {
			if oldT.IsZero() || at.Before(oldT) {
				oldK, oldT = k, at
			}
		}
		delete(t.seen, oldK)
	}
	t.seen[key] = now
}

// related are up to n queries that KAnonymity accounts or more searched
// within PopularWindow before now, sharing a meaningful word with q and
// not q itself; the most searched first.
func (p *popular) related(q string, n int, now time.Time) []string {
	self := normQuery(q)
	want := map[string]bool{}
	for _, s := range searchapi.Stems(q) {
		want[s] = true
	}
	type cand struct {
		q string
		k int
	}
	var out []cand
	p.mu.Lock()
	for e := p.order.Front(); e != nil; e = e.Next() {
		t := e.Value.(*tracked)
		if t.q == self {
			continue
		}
		share := false
		for _, s := range t.stems {
			if want[s] {
				share = true
				break
			}
		}
		if !share {
			continue
		}
		k := 0
		for _, at := range t.seen {
			if now.Sub(at) <= PopularWindow {
				k++
			}
		}
		if k >= KAnonymity {
			out = append(out, cand{t.q, k})
		}
	}
	p.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].k > out[j].k })
	var qs []string
	for i := 0; i < len(out) && i < n; i++ {
		qs = append(qs, out[i].q)
	}
	return qs
}

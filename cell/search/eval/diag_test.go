package eval

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestFailures prints the queries trawl misses and FTS5 finds (the
// failure analysis of docs/search.md):
//
//	TRAWL_SEARCH_DIAG=postgresql go test ./cell/search/eval -run TestFailures -v
func TestFailures(t *testing.T) {
	name := os.Getenv("TRAWL_SEARCH_DIAG")
	if name == "" {
		t.Skip("set TRAWL_SEARCH_DIAG=postgresql")
	}
	c := load(t, name)
	qs := Sample(c.Queries, 400)
	ix := index(t, c)
	fts, err := NewFTS5(t.TempDir(), c.Docs)
	if err != nil {
		t.Fatal(err)
	}
	defer fts.Close()
	v, _, _, err := fts.Best(qs)
	if err != nil {
		t.Fatal(err)
	}
	fr := fts.Ranker(v)
	shown := 0
	// all: every query we do not rank first, not only those FTS5 ranks
	// better (TRAWL_SEARCH_DIAG_ALL=1).
	all := os.Getenv("TRAWL_SEARCH_DIAG_ALL") != ""
	var hist [12]int
	for _, q := range qs {
		res, err := ix.Search(context.Background(), q.Text, 80)
		if err != nil {
			t.Fatal(err)
		}
		ours := -1
		for i, h := range res.Hits {
			if q.Relevant[h.URL] {
				ours = i
				break
			}
		}
		base, _ := fr(q.Text)
		theirs := -1
		for i, u := range base {
			if q.Relevant[u] {
				theirs = i
				break
			}
		}
		hist[min(ours+1, 11)]++ // 0: not in our 80, 11: beyond 10
		show := theirs >= 0 && (ours < 0 || ours > theirs+2)
		if all {
			show = ours != 0
		}
		if show && shown < 80 {
			shown++
			var top []string
			for i := 0; i < 3 && i < len(res.Hits); i++ {
				top = append(top, strings.TrimPrefix(res.Hits[i].URL, Base)+" "+res.Hits[i].Title)
			}
			var rel []string
			for u := range q.Relevant {
				rel = append(rel, strings.TrimPrefix(u, Base))
			}
			t.Logf("%q: ours %d fts %d; relevant %v; our top %q", q.Text, ours, theirs, rel, top)
		}
	}
	t.Logf("our rank of the first relevant page: missing %d, 1..10: %v, beyond 10: %d", hist[0], hist[1:11], hist[11])
}

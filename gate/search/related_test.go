package search

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestRelatedQueriesAreKAnonymous(t *testing.T) {
	p := newPopular()
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	// One account searching a query many times never makes it public.
	for range 20 {
		p.record("volcano eruption 1883", "acct_alone", now)
	}
	// KAnonymity-1 accounts: still private.
	for i := range KAnonymity - 1 {
		p.record("Volcano  Eruption", fmt.Sprintf("acct_%d", i), now)
	}
	if got := p.related("volcano", 5, now); len(got) != 0 {
		t.Fatalf("offered below the threshold: %q", got)
	}
	p.record("volcano eruption", "acct_last", now)
	if got := p.related("volcanoes", 5, now); !slices.Equal(got, []string{"volcano eruption"}) {
		t.Fatalf("related at the threshold: %q", got)
	}
	// Not the query itself, nor one sharing no word.
	if got := p.related("volcano eruption", 5, now); len(got) != 0 {
		t.Errorf("the query itself: %q", got)
	}
	if got := p.related("glacier", 5, now); len(got) != 0 {
		t.Errorf("no shared word: %q", got)
	}
	// Old searches stop counting.
	if got := p.related("volcano", 5, now.Add(PopularWindow+time.Hour)); len(got) != 0 {
		t.Errorf("after the window: %q", got)
	}
	// What may be personal is never kept, however many search it.
	for i := range 2 * KAnonymity {
		a := fmt.Sprintf("acct_%d", i)
		p.record("volcano alice@example.com", a, now)
		p.record("volcano order 123456", a, now)
		p.record("volcano http://x.test/a", a, now)
		p.record("", a, now)
	}
	if got := p.related("volcano", 5, now); !slices.Equal(got, []string{"volcano eruption"}) {
		t.Errorf("personal queries kept: %q", got)
	}
}

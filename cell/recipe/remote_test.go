package recipe

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/trawlhq/trawl/internal/recipestore"
)

type nopFetcher struct{}

func (nopFetcher) Fetch(context.Context, string, string) (*Fetched, error) {
	return nil, errors.New("no fetches here")
}

// fakeRemote is a gate's recipe store in memory.
type fakeRemote struct {
	mu       sync.Mutex
	version  uint64
	recipes  map[string]string // name → manifest
	gets     map[string]int
	failGets bool
	failList bool
}

func (f *fakeRemote) List(_ context.Context, since uint64) (uint64, []recipestore.Ref, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failList {
		return 0, nil, false, errors.New("gate away")
	}
	if since == f.version {
		return f.version, nil, false, nil
	}
	var refs []recipestore.Ref
	for name, m := range f.recipes {
		r, err := Parse([]byte(m), nil)
		hash := "bad-" + name
		if err == nil {
			hash = r.Hash
		}
		refs = append(refs, recipestore.Ref{Name: name, Hash: hash})
	}
	return f.version, refs, true, nil
}

func (f *fakeRemote) Get(_ context.Context, name string) ([]byte, map[string][]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failGets {
		return nil, nil, errors.New("gate away")
	}
	f.gets[name]++
	return []byte(f.recipes[name]), nil, nil
}

func manifestNamed(name string, version int) string {
	return strings.Replace(strings.Replace(okManifest, `"name":"t"`, `"name":"`+name+`"`, 1), `"version":1`, `"version":`+strconv.Itoa(version), 1)
}

// The replicated recipes: loaded beside the built-ins, fetched again only
// when their hash changes, a bad or misnamed one left out, a gate that
// does not answer leaves the set as it is, a built-in's name never taken.
func TestSyncRemote(t *testing.T) {
	f := &fakeRemote{version: 1, gets: map[string]int{}, recipes: map[string]string{
		"ours":       manifestNamed("ours", 1),
		"misnamed":   manifestNamed("other", 1),
		"broken":     `{"name":"broken"}`,
		"page-links": manifestNamed("page-links", 1), // a built-in's name
	}}
	s, err := New(Config{Fetcher: nopFetcher{}, Remote: f, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if !s.syncRemote(ctx) {
		t.Fatal("the first sync changed nothing")
	}
	if r, ok := s.Get("ours"); !ok || r.Version != 1 || r.Builtin {
		t.Fatalf("ours: %+v %v", r, ok)
	}
	for _, name := range []string{"misnamed", "other", "broken"} {
		if _, ok := s.Get(name); ok {
			t.Errorf("%s was loaded", name)
		}
	}
	if r, _ := s.Get("page-links"); !r.Builtin {
		t.Error("a replicated recipe replaced a built-in")
	}
	// Unchanged version: no listing, no fetch.
	if s.syncRemote(ctx) {
		t.Error("a sync at the same version changed the set")
	}
	// A new recipe: only it is fetched.
	f.mu.Lock()
	f.version, f.recipes["more"] = 2, manifestNamed("more", 1)
	f.mu.Unlock()
	if !s.syncRemote(ctx) || f.gets["ours"] != 1 || f.gets["more"] != 1 {
		t.Fatalf("second sync: fetches %v", f.gets)
	}
	// The gate away: the set stays.
	f.mu.Lock()
	f.version, f.recipes["ours"], f.failGets = 3, manifestNamed("ours", 2), true
	f.mu.Unlock()
	if s.syncRemote(ctx) {
		t.Error("a sync whose fetch failed changed the set")
	}
	if r, ok := s.Get("ours"); !ok || r.Version != 1 {
		t.Errorf("ours after a failed fetch: %+v %v", r, ok)
	}
	f.mu.Lock()
	f.failGets = false
	f.mu.Unlock()
	if !s.syncRemote(ctx) {
		t.Fatal("the sync after the gate came back changed nothing")
	}
	if r, _ := s.Get("ours"); r.Version != 2 {
		t.Errorf("ours: version %d, want 2", r.Version)
	}
	// Removed at the gate: removed here.
	f.mu.Lock()
	f.version = 4
	delete(f.recipes, "more")
	f.mu.Unlock()
	s.syncRemote(ctx)
	if _, ok := s.Get("more"); ok {
		t.Error("a recipe removed at the gate is still loaded")
	}
}

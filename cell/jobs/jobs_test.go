package jobs

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/internal/store"
)

func TestIDsNameTheOwner(t *testing.T) {
	st, err := store.Open("db", &store.Options{FS: vfs.NewMem(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	never := func(context.Context, string, scrape.Options) (*scrape.Outcome, error) {
		return nil, scrape.BadInput("not scraped in this test")
	}
	for _, c := range []struct{ region, cell string }{{"", "c1"}, {"eu", ""}, {"EU", "c1"}, {"eu", "c.1"}} {
		if _, err := NewManager(st, never, Config{Region: c.region, Cell: c.cell}); err == nil {
			t.Errorf("region %q cell %q: accepted", c.region, c.cell)
		}
	}
	m, err := NewManager(st, never, Config{Region: "sin", Cell: "c2"})
	if err != nil {
		t.Fatal(err)
	}
	id, err := m.Submit([]string{"http://a.example/"}, scrape.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if region, cell, ok := ParseJobID(id); !ok || region != "sin" || cell != "c2" {
		t.Fatalf("ParseJobID(%q) = %q, %q, %v; want sin, c2, true", id, region, cell, ok)
	}
}

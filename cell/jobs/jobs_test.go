package jobs

import (
	"context"
	"errors"
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
	id, err := m.Submit("acct_1", []string{"http://a.example/"}, scrape.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if region, cell, ok := ParseJobID(id); !ok || region != "sin" || cell != "c2" {
		t.Fatalf("ParseJobID(%q) = %q, %q, %v; want sin, c2, true", id, region, cell, ok)
	}
}

// A job belongs to the account that submitted it: any other account (or
// a call with none) is told there is no such job, the answer an id that
// does not exist gets.
func TestJobsBelongToTheirAccount(t *testing.T) {
	st, err := store.Open("db", &store.Options{FS: vfs.NewMem(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fail := func(context.Context, string, scrape.Options) (*scrape.Outcome, error) {
		return nil, scrape.BadInput("not scraped in this test")
	}
	m, err := NewManager(st, fail, Config{Region: "eu", Cell: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Submit("", []string{"http://a.example/"}, scrape.Options{}); err == nil {
		t.Fatal("a job without an owner was accepted")
	}
	id, err := m.Submit("acct_a", []string{"http://a.example/"}, scrape.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"acct_b", "", "acct_a "} {
		if _, err := m.Status(id, who, true); !errors.Is(err, ErrNoJob) {
			t.Errorf("status by %q: %v, want ErrNoJob", who, err)
		}
		if _, err := m.Results(id, who, 0, io.Discard); !errors.Is(err, ErrNoJob) {
			t.Errorf("results by %q: %v, want ErrNoJob", who, err)
		}
		if _, err := m.Retry(id, who); !errors.Is(err, ErrNoJob) {
			t.Errorf("retry by %q: %v, want ErrNoJob", who, err)
		}
	}
	if s, err := m.Status(id, "acct_a", true); err != nil || s.Total != 1 {
		t.Fatalf("status by the owner: %+v, %v", s, err)
	}
}

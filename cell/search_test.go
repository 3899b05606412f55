package cell

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/scrape"
	"github.com/trawlhq/trawl/internal/store"
)

func searchURLs(t *testing.T, c *Cell, q string) []string {
	t.Helper()
	res, err := c.index.Search(context.Background(), q, 10)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, h := range res.Hits {
		out = append(out, h.URL)
	}
	return out
}

// A page in the archive marked private (fetched with what a caller ran or
// sent) is never indexed, not even by a rebuild; pages the index lost (a
// crash between a batch being searchable and written) come back from the
// archive when the cell starts again.
func TestSearchPrivatePagesAndCatchUp(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><head><title>%[1]s</title></head><body><main><h1>%[1]s</h1><p>The %[1]s page is about the %[1]s topic and nothing else, in many plain words.</p></main></body></html>`, strings.Trim(r.URL.Path, "/"))
	}))
	defer site.Close()
	dir := t.TempDir()
	open := func() *Cell {
		c, err := New(Config{DataDir: dir, AllowPrivateNetworks: true, RegionKeys: testKeys, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := open()
	for _, p := range []string{"/walrus", "/narwhal"} {
		if _, err := c.scrape.Scrape(context.Background(), site.URL+p, scrape.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); c.Indexed() < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("indexed %d of 2", c.Indexed())
		}
	}
	// A caller's private fetch, archived as such (as a scrape with the
	// caller's script writes it).
	fetched := time.Now().Add(time.Minute)
	hdr := fmt.Sprintf(`{"url":%q,"status":200,"content_type":"text/html","engine":"browser","fetched_at":%q,"private":true}`, site.URL+"/secret", fetched.UTC().Format(time.RFC3339Nano))
	body := `<html><head><title>secret</title></head><body><main><h1>secret</h1><p>The secret account page of a signed-in caller, with words.</p></main></body></html>`
	if err := c.store.Set(scrape.ArchiveKey(site.URL+"/secret"), []byte(hdr+"\n"+body), store.Sync); err != nil {
		t.Fatal(err)
	}
	// And a page the index lost: archived after the index's watermark,
	// not indexed.
	hdr = fmt.Sprintf(`{"url":%q,"status":200,"content_type":"text/html","engine":"http","fetched_at":%q}`, site.URL+"/dugong", fetched.UTC().Format(time.RFC3339Nano))
	body = `<html><head><title>dugong</title></head><body><main><h1>dugong</h1><p>The dugong page is about the dugong topic and nothing else, in many plain words.</p></main></body></html>`
	if err := c.store.Set(scrape.ArchiveKey(site.URL+"/dugong"), []byte(hdr+"\n"+body), store.Sync); err != nil {
		t.Fatal(err)
	}
	if u := searchURLs(t, c, "dugong"); len(u) != 0 {
		t.Fatalf("dugong indexed before the restart: %v", u)
	}
	c.Close()

	c = open()
	defer c.Close()
	<-c.rebuilt
	if u := searchURLs(t, c, "dugong"); len(u) != 1 || !strings.HasSuffix(u[0], "/dugong") {
		t.Errorf("the lost page is not caught up: %v", u)
	}
	if u := searchURLs(t, c, "walrus"); len(u) != 1 {
		t.Errorf("walrus: %v", u)
	}
	if u := searchURLs(t, c, "secret account"); len(u) != 0 {
		t.Errorf("a private page is indexed: %v", u)
	}

	// A lost index: rebuilt from the archive, the private page still out.
	c.Close()
	if err := os.RemoveAll(dir + "/search"); err != nil {
		t.Fatal(err)
	}
	c2 := open()
	defer c2.Close()
	<-c2.rebuilt
	if u := searchURLs(t, c2, "narwhal"); len(u) != 1 {
		t.Errorf("rebuilt index: narwhal %v", u)
	}
	if u := searchURLs(t, c2, "secret account"); len(u) != 0 {
		t.Errorf("a private page is indexed by the rebuild: %v", u)
	}
}

// The scrape's conversion goes to the index with links and metadata, but
// its answer holds only the parse data the caller asked for.
func TestScrapeForIndexKeepsParsedAsAsked(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html lang="en"><head><title>Otters</title><meta name="description" content="About otters"></head><body><main><h1>Otters</h1><p>Otters are playful animals that live near water and eat fish, in many plain words. See <a href="/seals">seals</a>.</p></main></body></html>`)
	}))
	defer site.Close()
	c, err := New(Config{DataDir: t.TempDir(), AllowPrivateNetworks: true, RegionKeys: testKeys, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, err := c.scrape.Scrape(context.Background(), site.URL+"/otters", scrape.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out.Body), `"parsed"`) {
		t.Errorf("parse data nobody asked for: %s", out.Body)
	}
	out, err = c.scrape.Scrape(context.Background(), site.URL+"/otters?x=1", scrape.Options{Parse: scrape.ParseField{Metadata: true}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out.Body), `"metadata"`) || strings.Contains(string(out.Body), `"links"`) {
		t.Errorf("metadata only was asked for: %s", out.Body)
	}
	for deadline := time.Now().Add(10 * time.Second); c.Indexed() < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("indexed %d of 2", c.Indexed())
		}
	}
	// The index got the links: the anchor text names the linked page.
	if u := searchURLs(t, c, "otters"); len(u) == 0 {
		t.Fatalf("otters not found")
	}
	raw, err := c.index.AnchorText(site.URL + "/seals")
	if err != nil || len(raw) != 1 || raw[0] != "seals" {
		t.Errorf("anchor text of /seals: %q %v", raw, err)
	}
}

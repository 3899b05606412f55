package regiontest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cmd/trawl/client"
	"github.com/trawlhq/trawl/internal/crawler"
	"github.com/trawlhq/trawl/ledger"
)

// docsSite serves a few pages about different things on loopback.
func docsSite(t *testing.T) *httptest.Server {
	t.Helper()
	pages := map[string][2]string{
		"/volcano":    {"Volcanoes", "A volcano is a rupture in the crust of a planet where lava, ash and gases escape. Magma chambers lie beneath most volcanoes and feed their eruptions."},
		"/glacier":    {"Glaciers", "A glacier is a persistent body of dense ice that moves under its own weight. Glaciers carve valleys as they slide downhill over centuries."},
		"/desert":     {"Deserts", "A desert is a barren area of landscape where little precipitation occurs. Deserts cover about one third of the land surface of the earth."},
		"/rainforest": {"Rainforests", "Rainforests are forests with heavy rainfall all year. The Amazon rainforest holds a great share of the species of the planet."},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			fmt.Fprint(w, "User-agent: *\nDisallow: /desert\n")
			return
		case "/":
			// The site's index page: its links' text is anchor text.
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, `<!doctype html><html><head><title>Encyclopedia</title></head><body><main><h1>Encyclopedia of landforms</h1>
<p>The pages of this small encyclopedia, one per landform, in plain words for every reader.</p><ul>
<li><a href="/volcano">Volcanoes</a></li><li><a href="/glacier">the frozen highway</a></li>
<li><a href="/desert">Deserts</a></li><li><a href="/rainforest">Rainforests</a></li></ul></main></body></html>`)
			return
		}
		p, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html lang="en"><head><title>%[1]s</title></head><body><main><h1>%[1]s</h1>
<p>%[2]s</p><h2>See also</h2><p>Other pages of this small encyclopedia describe landforms and climates in the same plain words.</p></main></body></html>`, p[0], p[1])
	}))
	t.Cleanup(srv.Close)
	return srv
}

type searchReply struct {
	Usage struct {
		Units string `json:"units"`
		Cache string `json:"cache"`
	} `json:"usage"`
	Results []struct {
		Title, URL, Snippet string
	} `json:"results"`
	Rich map[string]json.RawMessage `json:"rich"`
}

func TestSearchThroughGate(t *testing.T) {
	g := Start(t, Options{Cells: 2})
	site := docsSite(t)
	// Supporter: the free plan's 20 calls a minute would stop the polling.
	key := g.Account(t, ledger.PlanSupporter, 1000)
	for _, p := range []string{"/volcano", "/glacier", "/desert", "/rainforest"} {
		if r := call(t, "POST", g.URL+"/scrape", key, `{"url":"`+site.URL+p+`"}`); r.status != 200 {
			t.Fatalf("scrape %s: %d %s", p, r.status, r.body)
		}
	}
	search := func(q string, extra string) (reply, searchReply) {
		t.Helper()
		r := call(t, "GET", g.URL+"/search?q="+url.QueryEscape(q)+extra, key, "")
		var sr searchReply
		if r.status == 200 {
			if err := json.Unmarshal([]byte(r.body), &sr); err != nil {
				t.Fatalf("%s: %v", r.body, err)
			}
		}
		return r, sr
	}
	// Every page is searchable within seconds of being archived, whichever
	// cell archived it.
	// (Polled every 200 ms: each search is billed.)
	deadline := time.Now().Add(10 * time.Second)
	for _, q := range []string{"volcano magma", "glacier ice", "desert precipitation", "amazon rainforest"} {
		for {
			r, sr := search(q, "")
			if len(sr.Results) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not found within 10 s: %d %s", q, r.status, r.body)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	bal := func() string { return call(t, "GET", g.URL+"/v1/billing/balance", key, "").header.Get("X-Svc-Balance") }
	r, sr := search("glacier ice valleys", "")
	if r.status != 200 || len(sr.Results) == 0 || !strings.HasSuffix(sr.Results[0].URL, "/glacier") {
		t.Fatalf("search: %d %s", r.status, r.body)
	}
	if s := sr.Results[0].Snippet; !strings.Contains(s, "<b>ice</b>") || !strings.Contains(s, "<b>valleys</b>") {
		t.Errorf("snippet: %q", s)
	}
	if sr.Usage.Units != "2.000" || sr.Usage.Cache != "miss" || r.header.Get("X-Svc-Cost") != "2.000" {
		t.Errorf("billing of a live search: %+v cost %s", sr.Usage, r.header.Get("X-Svc-Cost"))
	}
	// The same query again: served from the archive of results, half.
	r, sr = search("glacier ice valleys", "")
	if sr.Usage.Cache != "archive" || r.header.Get("X-Svc-Cost") != "1.000" {
		t.Errorf("billing of an archived search: %+v cost %s", sr.Usage, r.header.Get("X-Svc-Cost"))
	}

	// No result: 200 and an empty list.
	r, sr = search("zzyzx", "")
	if r.status != 200 || sr.Results == nil || len(sr.Results) != 0 {
		t.Errorf("no result: %d %s", r.status, r.body)
	}

	// Bad input: 400 JSON, nothing charged.
	for _, q := range []string{"", strings.Repeat("a", 513)} {
		b0 := bal()
		r = call(t, "GET", g.URL+"/search?q="+q, key, "")
		if r.status != 400 || !strings.Contains(r.body, `"bad_input"`) || r.header.Get("X-Svc-Cost") != "0.000" || bal() != b0 {
			t.Errorf("q of %d chars: %d %s cost %s", len(q), r.status, r.body, r.header.Get("X-Svc-Cost"))
		}
	}
	r = call(t, "GET", g.URL+"/search?q=ice&rich=2", key, "")
	if r.status != 400 || r.header.Get("X-Svc-Cost") != "0.000" {
		t.Errorf("rich=2: %d %s", r.status, r.body)
	}

	// rich=1 corrects a typo from the index's own words and runs the
	// corrected query.
	r, sr = search("volcanoes magmma", "&rich=1")
	var dym string
	json.Unmarshal(sr.Rich["did_you_mean"], &dym)
	if r.status != 200 || dym != "volcanoes magma" || len(sr.Results) == 0 || !strings.HasSuffix(sr.Results[0].URL, "/volcano") {
		t.Errorf("did_you_mean: %d %s", r.status, r.body)
	}

	// An answer quoted from the best passage, attributed.
	r = call(t, "GET", g.URL+"/answer?q="+url.QueryEscape("what do magma chambers feed"), key, "")
	var ar struct {
		Answered     bool `json:"answered"`
		Experimental bool `json:"experimental"`
		Answer       struct {
			Kind    string `json:"kind"`
			Text    string `json:"text"`
			Sources []struct{ Title, URL string }
		} `json:"answer"`
	}
	if strings.Contains(r.body, `\u003c`) {
		t.Errorf("marks escaped: %s", r.body)
	}
	if err := json.Unmarshal([]byte(r.body), &ar); err != nil || r.status != 200 || !ar.Answered || !ar.Experimental ||
		!strings.Contains(ar.Answer.Text, "Magma chambers lie beneath") || len(ar.Answer.Sources) != 1 || !strings.HasSuffix(ar.Answer.Sources[0].URL, "/volcano") {
		t.Errorf("answer: %d %s", r.status, r.body)
	}
	// Not confident: answered false.
	r = call(t, "GET", g.URL+"/answer?q="+url.QueryEscape("price of tea in china"), key, "")
	if r.status != 200 || !strings.Contains(r.body, `"answered":false`) {
		t.Errorf("unanswerable: %d %s", r.status, r.body)
	}
}

// The operator's crawler grows the index from a site's index page through
// the gate: robots.txt honoured, anchor text indexed with the page it
// names.
func TestCrawlThenSearch(t *testing.T) {
	g := Start(t, Options{})
	site := docsSite(t)
	key := g.Account(t, ledger.PlanSupporter, 1000)
	c, err := crawler.Open(t.TempDir(), crawler.Config{Fetch: (&client.Client{URL: g.URL, Key: key}).CrawlerFetch, Delay: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Seed(context.Background(), site.URL+"/"); err != nil {
		t.Fatal(err)
	}
	st, err := c.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Fetched != 4 || st.Refused != 1 {
		t.Fatalf("crawl: %+v (want the index page and three pages; /desert refused by robots.txt)", st)
	}
	// Each page fetched has its revisit record, with the hash of its
	// main content as the scrape gave it: due again after a day.
	if n, err := c.QueueDue(time.Now().Add(time.Hour)); err != nil || n != 0 {
		t.Fatalf("due within the hour: %d %v", n, err)
	}
	if n, err := c.QueueDue(time.Now().Add(25 * time.Hour)); err != nil || n != 4 {
		t.Fatalf("due after a day: %d %v, want 4", n, err)
	}
	visits, err := c.Visits()
	if err != nil || len(visits) != 4 {
		t.Fatalf("visits %v %v", visits, err)
	}
	for u, v := range visits {
		if v.Hash == "" || v.Visits != 1 {
			t.Errorf("%s: %+v (want the content's hash, one visit)", u, v)
		}
	}
	find := func(q string) []string {
		r := call(t, "GET", g.URL+"/search?q="+url.QueryEscape(q), key, "")
		var sr searchReply
		json.Unmarshal([]byte(r.body), &sr)
		var out []string
		for _, x := range sr.Results {
			out = append(out, strings.TrimPrefix(x.URL, site.URL))
		}
		return out
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := find("frozen highway")
		if slices.Contains(got, "/glacier") {
			break // only the anchor text of /glacier has these words (and the index page itself)
		}
		if time.Now().After(deadline) {
			t.Fatalf("anchor text search: %q", got)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := find("barren precipitation"); len(got) != 0 {
		t.Errorf("a page robots.txt refuses was indexed: %q", got)
	}
}

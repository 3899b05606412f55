package search

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/members"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/internal/searchapi"
)

// fakeCell is a cell of the region at searchapi.LocalPath: it checks the
// gate's signature and signs its answer, as a real cell does.
func fakeCell(t *testing.T, keys *regionauth.Keys, hits []searchapi.Hit, asked *atomic.Int32) members.Meta {
	t.Helper()
	v := regionauth.NewVerifier(keys, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := v.Verify(r)
		if err != nil || r.URL.Path != searchapi.LocalPath {
			http.Error(w, "refused", http.StatusForbidden)
			return
		}
		asked.Add(1)
		n := 10
		fmt.Sscan(r.URL.Query().Get("n"), &n)
		out := searchapi.Local{Results: hits[:min(n, len(hits))]}
		b, _ := json.Marshal(out)
		w.Header().Set(regionauth.HeaderUsageSig, keys.SignAnswer(c.Nonce, http.StatusOK, ""))
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return members.Meta{Role: members.RoleCell, Region: "eu", Name: srv.URL[len(srv.URL)-5:], API: strings.TrimPrefix(srv.URL, "http://")}
}

func TestFirecrawlSearch(t *testing.T) {
	keys, err := regionauth.ParseKeys(regionauth.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	// Distinct pages: simhashes far apart (Collapse keeps them all).
	var a, b []searchapi.Hit
	for i := range 8 {
		a = append(a, searchapi.Hit{Title: fmt.Sprintf("A%d", i), URL: fmt.Sprintf("https://a.test/%d", i), Snippet: fmt.Sprintf("about <b>tea</b> %d", i), Score: float64(20 - 2*i), Sim: uint64(i+1) * 0x9E3779B97F4A7C15})
		b = append(b, searchapi.Hit{Title: fmt.Sprintf("B%d", i), URL: fmt.Sprintf("https://b.test/%d", i), Snippet: "b", Score: float64(19 - 2*i), Sim: uint64(i+101) * 0x9E3779B97F4A7C15})
	}
	b[1].Type, b[1].Date = "NewsArticle", time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	var asked atomic.Int32
	cells := []members.Meta{fakeCell(t, keys, a, &asked), fakeCell(t, keys, b, &asked)}
	hs := Handlers(Config{Cells: func() []members.Meta { return cells }, Keys: keys, Account: func(*http.Request) string { return "acct_1" }})
	mux, err := routes.Mux(routes.Default().Service("search"), hs, routes.MuxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gate := httptest.NewServer(mux)
	defer gate.Close()

	post := func(body string) (int, http.Header, map[string]any) {
		t.Helper()
		resp, err := http.Post(gate.URL+"/v2/search", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, m
	}
	usage := func(h http.Header) metering.Usage {
		t.Helper()
		var u metering.Usage
		if err := json.Unmarshal([]byte(h.Get(metering.Header)), &u); err != nil {
			t.Fatalf("usage header %q: %v", h.Get(metering.Header), err)
		}
		return u
	}

	// The default: five web results by score across cells, positions from 1,
	// billed as one search; unknown keys ignored.
	st, h, m := post(`{"query":"tea","origin":"js-sdk","highlights":true,"country":"us","ignoreInvalidURLs":true,"scrapeOptions":{}}`)
	if st != 200 || m["success"] != true {
		t.Fatalf("%d %v", st, m)
	}
	data := m["data"].(map[string]any)
	web := data["web"].([]any)
	var urls []string
	for i, x := range web {
		r := x.(map[string]any)
		urls = append(urls, r["url"].(string))
		if r["position"] != float64(i+1) || r["title"] == "" || r["description"] == nil {
			t.Errorf("web[%d] %v", i, r)
		}
	}
	if want := "https://a.test/0 https://b.test/0 https://a.test/1 https://b.test/1 https://a.test/2"; strings.Join(urls, " ") != want {
		t.Errorf("web %q, want %s", urls, want)
	}
	if web[0].(map[string]any)["description"] != "about <b>tea</b> 0" {
		t.Errorf("description is the snippet: %v", web[0])
	}
	if _, ok := data["news"]; ok {
		t.Errorf("news not asked: %v", data)
	}
	if u := usage(h); u.Kind != metering.KindSearch || u.Cache != metering.CacheMiss || u.Engine != EngineIndex {
		t.Errorf("usage %+v", u)
	}
	// Asked again: the archive, at GET /search's archive price, no cell asked.
	before := asked.Load()
	if st, h, _ := post(`{"query":"tea"}`); st != 200 || usage(h).Cache != metering.CacheArchive || asked.Load() != before {
		t.Errorf("again: %d %+v, cells asked %d times", st, usage(h), asked.Load()-before)
	}

	// limit, and news with web.
	st, _, m = post(`{"query":"tea","limit":12,"sources":["web",{"type":"news"}]}`)
	if st != 200 {
		t.Fatalf("%d %v", st, m)
	}
	data = m["data"].(map[string]any)
	if n := len(data["web"].([]any)); n != 12 {
		t.Errorf("limit 12: %d web results", n)
	}
	news := data["news"].([]any)
	if len(news) != 1 || news[0].(map[string]any)["url"] != "https://b.test/1" || news[0].(map[string]any)["date"] != "2026-05-01T00:00:00Z" {
		t.Errorf("news %v", news)
	}
	st, _, m = post(`{"query":"tea","limit":1}`)
	if st != 200 || len(m["data"].(map[string]any)["web"].([]any)) != 1 {
		t.Errorf("limit 1: %d %v", st, m)
	}

	// Refusals in Firecrawl's envelope, and never billed.
	for _, c := range []struct {
		body, code, path string
	}{
		{`{"query":"tea","limit":"3"}`, "BAD_REQUEST", "limit"},
		{`{"query":42}`, "BAD_REQUEST", "query"},
		{`{"query":"tea","scrapeOptions":{"formats":7}}`, "BAD_REQUEST", "scrapeOptions.formats"},
		{`{"query":"  "}`, "BAD_REQUEST", "query"},
		{`{"query":"tea","limit":101}`, "BAD_REQUEST", "limit"},
		{`{"query":"tea","limit":0}`, "BAD_REQUEST", "limit"},
		{`{"query":"tea","sources":["videos"]}`, "BAD_REQUEST", "sources.0"},
		{`{"query":"tea","sources":["web","images"]}`, "UNSUPPORTED_FEATURE", "sources.1"},
		{`{"query":"tea","sources":[{"type":"images"}]}`, "UNSUPPORTED_FEATURE", "sources.0"},
		{`{"query":"tea","tbs":"qdr:d"}`, "UNSUPPORTED_FEATURE", "tbs"},
		{`{"query":"tea","location":"Berlin,Germany"}`, "UNSUPPORTED_FEATURE", "location"},
		{`{"query":"tea","country":"DE"}`, "UNSUPPORTED_FEATURE", "country"},
		{`{"query":"tea","categories":["github"]}`, "UNSUPPORTED_FEATURE", "categories"},
		{`{"query":"tea","scrapeOptions":{"formats":["markdown"]}}`, "UNSUPPORTED_FEATURE", "scrapeOptions.formats"},
	} {
		st, h, m := post(c.body)
		if st != 400 || m["success"] != false || m["code"] != c.code || h.Get(metering.Header) != "" {
			t.Errorf("%s: %d %v (usage %q)", c.body, st, m, h.Get(metering.Header))
			continue
		}
		d, _ := m["details"].([]any)
		if len(d) != 1 || fmt.Sprint(d[0].(map[string]any)["path"]) != fmt.Sprint(strings.Split(c.path, ".")) {
			t.Errorf("%s: details %v, want path %s", c.body, m["details"], c.path)
		}
	}
}

package cell

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/llm/llmtest"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/recipespec"
)

// recipeSite serves the recipe test pages from loopback: the files of
// cell/recipe/testdata/site, a paged shop list with detail pages, a slow
// page, and a members' area behind a session cookie.
type recipeSite struct {
	*httptest.Server
	hits   atomic.Int64
	cookie string // the session value /members accepts
}

func newRecipeSite(t *testing.T) *recipeSite {
	t.Helper()
	s := &recipeSite{cookie: "sid-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-c0ffee"}
	files := map[string]string{"/sitemap.xml": "application/xml", "/feed.rss": "application/rss+xml", "/feed.atom": "application/atom+xml",
		"/tables.html": "text/html", "/article.html": "text/html", "/product.html": "text/html"}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		ct, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		b, err := os.ReadFile(filepath.Join("recipe/testdata/site", r.URL.Path))
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Header().Set("Content-Type", ct+"; charset=utf-8")
		w.Write(b)
	})
	// /shop?page=N: three pages of two items, each linking its detail page.
	mux.HandleFunc("/shop", func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		if page < 1 {
			page = 1
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html><body><h1>Shop, page %d</h1><ul>", page)
		for i := 1; i <= 2; i++ {
			n := (page-1)*2 + i
			fmt.Fprintf(w, `<li class="item"><a href="/item/%d">Tea %d</a> <span class="price">%d.00</span></li>`, n, n, n*3)
		}
		fmt.Fprint(w, "</ul>")
		if page < 3 {
			fmt.Fprintf(w, `<a class="next" href="/shop?page=%d">next</a>`, page+1)
		}
		fmt.Fprint(w, "</body></html>")
	})
	mux.HandleFunc("/item/{n}", func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		n := r.PathValue("n")
		if n == "5" {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<html><body><p>Sold out.</p></body></html>")
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><body><h1>Tea %s</h1><p class="origin">Origin: Uji %s</p></body></html>`, n, n)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	mux.HandleFunc("/members/orders", func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		c, err := r.Cookie("sid")
		if err != nil || c.Value != s.cookie {
			http.Redirect(w, r, "/login?next=/members/orders", http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><body><h1>Your orders</h1><table><tr><th>Order</th><th>Tea</th></tr><tr><td>A-1</td><td>Sencha</td></tr><tr><td>A-2</td><td>Assam</td></tr></table></body></html>`)
	})
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><body><form method="post"><input name="user"><input type="password" name="pw"></form></body></html>`)
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// writeRecipe writes an operator recipe directory under root.
func writeRecipe(t *testing.T, root, name, manifest string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, recipespec.ManifestFile), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	for f, body := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

type recipeAnswer struct {
	Recipe  string           `json:"recipe"`
	Version int              `json:"version"`
	Rows    []map[string]any `json:"rows"`
	RawRows []json.RawMessage
	Meta    struct {
		PagesFetched int      `json:"pages_fetched"`
		LLMCalls     int      `json:"llm_calls"`
		ElapsedMS    *int64   `json:"elapsed_ms"`
		FromCache    bool     `json:"from_cache"`
		Warnings     []string `json:"warnings"`
		Blocked      *string  `json:"blocked"`
	} `json:"meta"`
	Error   string `json:"error"`
	Message string `json:"message"`
}

func (tc *testCell) runRecipe(t *testing.T, name, body string) (*http.Response, recipeAnswer, metering.Usage) {
	t.Helper()
	resp, b := tc.post(t, "/recipes/"+name, body)
	var a recipeAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("%s: %d %s", name, resp.StatusCode, b)
	}
	var raw struct {
		Rows []json.RawMessage `json:"rows"`
	}
	json.Unmarshal(b, &raw)
	a.RawRows = raw.Rows
	var u metering.Usage
	if h := resp.Header.Get(metering.Header); h != "" {
		var err error
		if u, err = metering.Parse(h); err != nil {
			t.Fatal(err)
		}
	}
	return resp, a, u
}

func js2(v any) string { b, _ := json.Marshal(v); return string(b) }

// The catalog has every field of §2.7 for each built-in.
func TestRecipeCatalog(t *testing.T) {
	tc := newTestCell(t, nil)
	resp, b := tc.get(t, "/recipes")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if resp.Header.Get(metering.Header) != "" {
		t.Errorf("the catalog reports usage: %s", resp.Header.Get(metering.Header))
	}
	var cat struct {
		Recipes []map[string]json.RawMessage `json:"recipes"`
	}
	if err := json.Unmarshal(b, &cat); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, e := range cat.Recipes {
		var name string
		json.Unmarshal(e["name"], &name)
		names[name] = true
		for _, f := range []string{"name", "version", "title", "stage", "health", "kind", "inputs", "outputs", "fresh_for_s", "tags", "cost_hint", "run", "description"} {
			if _, ok := e[f]; !ok {
				t.Errorf("%s: no %s", name, f)
			}
		}
		var h map[string]any
		json.Unmarshal(e["health"], &h)
		for _, f := range []string{"status", "rows", "at", "error"} {
			if _, ok := h[f]; !ok {
				t.Errorf("%s: health has no %s", name, f)
			}
		}
		var ins []map[string]any
		json.Unmarshal(e["inputs"], &ins)
		for _, in := range ins {
			for _, f := range []string{"name", "type", "default", "required", "secret"} {
				if _, ok := in[f]; !ok {
					t.Errorf("%s: input %v has no %s", name, in["name"], f)
				}
			}
		}
	}
	for _, n := range []string{"sitemap-urls", "feed-items", "table-rows", "page-links", "article", "product"} {
		if !names[n] {
			t.Errorf("the catalog lacks %s", n)
		}
	}
}

// Each built-in against pages served from loopback.
func TestRecipeBuiltins(t *testing.T) {
	tc := newTestCell(t, nil)
	site := newRecipeSite(t)
	cases := []struct {
		name, body string
		want       []string // JSON of the rows, in order
	}{
		{"sitemap-urls", `{"url":"` + site.URL + `/sitemap.xml"}`, []string{
			`{"loc":"https://tea.example/","lastmod":"2026-11-01","changefreq":"daily","priority":"1.0"}`,
			`{"loc":"https://tea.example/green","lastmod":"2026-10-12","changefreq":"weekly","priority":"0.8"}`,
			`{"loc":"https://tea.example/black","lastmod":null,"changefreq":null,"priority":null}`}},
		{"feed-items", `{"url":"` + site.URL + `/feed.rss"}`, []string{
			`{"title":"Brewing green tea","link":"https://tea.example/green","published":"Mon, 02 Nov 2026 09:00:00 GMT","author":"Ann Leaf","summary":"Cooler water, \u003cb\u003eshorter\u003c/b\u003e steep."}`,
			`{"title":"Why black tea needs boiling water","link":"https://tea.example/black","published":"Sun, 01 Nov 2026 09:00:00 GMT","author":null,"summary":"Full boil, four minutes."}`}},
		{"feed-items", `{"url":"` + site.URL + `/feed.atom","limit":5}`, []string{
			`{"title":"Oolong, slowly","link":"` + site.URL + `/oolong","published":"2026-11-03T10:00:00Z","author":"Bo Chen","summary":"Rinse, then steep many times."}`}},
		{"table-rows", `{"url":"` + site.URL + `/tables.html"}`, []string{
			`{"row":0,"cells":{"Minutes":"2","Tea":"Green","Water":"80 °C"}}`,
			`{"row":1,"cells":{"Minutes":"4","Tea":"Black","Water":"100 °C"}}`}},
		{"table-rows", `{"url":"` + site.URL + `/tables.html","caption":"prices"}`, []string{
			`{"row":0,"cells":{"Price":"€9.50","Tea":"Sencha"}}`,
			`{"row":1,"cells":{"Price":"€7.00","Tea":"Assam"}}`,
			`{"row":2,"cells":{"Price":"€14.00","Tea":"Oolong"}}`}},
		{"product", `{"url":"` + site.URL + `/product.html"}`, []string{
			`{"name":"Sencha Kabuse","brand":"Hoshino","sku":"SK-100","price":9.5,"currency":"EUR","availability":"https://schema.org/InStock","rating":4.6,"review_count":128,"image":"https://tea.example/img/sencha.jpg","description":"A shaded green tea from Shizuoka."}`}},
	}
	for _, c := range cases {
		resp, a, u := tc.runRecipe(t, c.name, c.body)
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %s %s", c.name, resp.StatusCode, a.Error, a.Message)
			continue
		}
		if a.Recipe != c.name || a.Version != 1 || a.Meta.PagesFetched != 1 || a.Meta.FromCache || a.Meta.ElapsedMS == nil {
			t.Errorf("%s: answer %+v", c.name, a)
		}
		var got []string
		for _, r := range a.RawRows {
			got = append(got, string(r))
		}
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s %s:\n got %s\nwant %s", c.name, c.body, strings.Join(got, "\n     "), strings.Join(c.want, "\n     "))
		}
		if u.Kind != metering.KindRecipe || u.Count == nil || *u.Count != 1 || len(u.Lines) != 1 || u.Lines[0].Call != metering.KindScrape || u.Cache != metering.CacheMiss {
			t.Errorf("%s: usage %+v", c.name, u)
		}
	}

	// page-links: absolute URLs, in page order.
	_, a, _ := tc.runRecipe(t, "page-links", `{"url":"`+site.URL+`/article.html"}`)
	if len(a.Rows) != 2 || a.Rows[0]["text"] != "Home" || a.Rows[0]["url"] != site.URL+"/" || a.Rows[1]["url"] != site.URL+"/about" {
		t.Errorf("page-links: %+v", a.Rows)
	}
	// article: headline, author and date from the structured data, the
	// text from the main content.
	_, a, _ = tc.runRecipe(t, "article", `{"url":"`+site.URL+`/article.html"}`)
	if len(a.Rows) != 1 {
		t.Fatalf("article: %+v", a)
	}
	art := a.Rows[0]
	text, _ := art["text"].(string)
	if art["headline"] != "Brewing a pot of tea" || art["author"] != "Ann Leaf" || art["date"] != "2026-11-02" ||
		!strings.Contains(text, "three things: fresh water") || !strings.Contains(text, "second steep") || strings.Contains(text, "© Tea notes") {
		t.Errorf("article: %s", js2(art))
	}
}

// A repeat inside fresh_for_s is a cache hit (units 0); bypass_cache runs
// again; a different input is another entry; past fresh_for_s it runs.
func TestRecipeCache(t *testing.T) {
	tc := newTestCell(t, nil)
	site := newRecipeSite(t)
	body := `{"url":"` + site.URL + `/sitemap.xml"}`
	_, first, u := tc.runRecipe(t, "sitemap-urls", body)
	if first.Meta.FromCache || u.Cache != metering.CacheMiss || *u.Count != 1 {
		t.Fatalf("first: %+v %+v", first.Meta, u)
	}
	hits := site.hits.Load()
	_, again, u := tc.runRecipe(t, "sitemap-urls", body)
	if !again.Meta.FromCache || u.Cache != metering.CacheHit || u.Engine != metering.EngineCache || again.Meta.PagesFetched != 0 || js2(again.Rows) != js2(first.Rows) {
		t.Errorf("repeat: %+v %+v", again.Meta, u)
	}
	if site.hits.Load() != hits {
		t.Errorf("a cache hit fetched the page")
	}
	_, by, u := tc.runRecipe(t, "sitemap-urls", `{"url":"`+site.URL+`/sitemap.xml","bypass_cache":true}`)
	if by.Meta.FromCache || u.Cache != metering.CacheMiss || site.hits.Load() != hits+1 {
		t.Errorf("bypass: %+v %+v", by.Meta, u)
	}
	tc.advance(3601 * time.Second)
	_, late, _ := tc.runRecipe(t, "sitemap-urls", body)
	if late.Meta.FromCache {
		t.Errorf("a result past fresh_for_s came from cache")
	}
}

// §7's recipe errors, each with its status; a refused request reports no
// usage, a failed run the pages it fetched, never rows.
func TestRecipeErrors(t *testing.T) {
	dir := t.TempDir()
	site := newRecipeSite(t)
	writeRecipe(t, dir, "shop", `{"name":"shop","version":3,"title":"Shop","kind":"json","outputs":["name","price","url","origin"],
		"inputs":[{"name":"pages","type":"integer","default":3},{"name":"since","type":"date"},{"name":"all","type":"boolean","default":false}],
		"hosts":["127.0.0.1"],"page_budget":9,"fresh_for_s":60,
		"json":{"urls":["`+site.URL+`/shop?page=1"],"max_pages":3,"next":"a.next",
			"rows":{"baseSelector":"li.item","fields":[{"name":"name","selector":"a","type":"text"},{"name":"price","selector":".price","type":"text"},{"name":"url","selector":"a","type":"attribute","attribute":"href"}]},
			"detail":{"link":"url","fields":[{"name":"origin","selector":".origin","type":"regex","pattern":"Origin: (.*)"}]},
			"url_fields":["url"]}}`, nil)
	writeRecipe(t, dir, "tight", `{"name":"tight","version":1,"title":"Tight budget","kind":"json","outputs":["name"],"hosts":["127.0.0.1"],"page_budget":2,
		"json":{"urls":["`+site.URL+`/shop"],"max_pages":5,"next":"a.next","rows":{"baseSelector":"li.item","fields":[{"name":"name","selector":"a","type":"text"}]}}}`, nil)
	writeRecipe(t, dir, "gone", `{"name":"gone","version":1,"title":"Missing page","kind":"json","outputs":["name"],"hosts":["127.0.0.1"],
		"json":{"urls":["`+site.URL+`/shop","`+site.URL+`/nowhere"],"rows":{"baseSelector":"li.item","fields":[{"name":"name","selector":"a","type":"text"}]}}}`, nil)
	writeRecipe(t, dir, "wander", `{"name":"wander","version":1,"title":"Wanders off","kind":"script","outputs":["x"],"hosts":["127.0.0.1"]}`,
		map[string]string{"script.js": `function run(input) { fetch("` + site.URL + `/shop"); try { fetch("http://localhost:` + strings.TrimPrefix(site.URL, "http://127.0.0.1:") + `/shop"); } catch (e) {} return [{x: 1}]; }`})
	writeRecipe(t, dir, "slow", `{"name":"slow","version":1,"title":"Slow","kind":"json","outputs":["name"],"hosts":["127.0.0.1"],
		"json":{"urls":["`+site.URL+`/shop","`+site.URL+`/slow"],"rows":{"baseSelector":"li.item","fields":[{"name":"name","selector":"a","type":"text"}]}}}`, nil)
	tc := newTestCell(t, func(c *Config) { c.Recipes = RecipeConfig{Dir: dir, Timeout: time.Second} })

	// The json kind: three list pages joined with their detail pages.
	resp, a, u := tc.runRecipe(t, "shop", `{}`)
	if resp.StatusCode != 200 || a.Version != 3 || len(a.Rows) != 6 || a.Meta.PagesFetched != 9 || *u.Count != 9 || len(u.Lines) != 9 {
		t.Fatalf("shop: %d %+v usage %+v", resp.StatusCode, a, u)
	}
	if js2(a.RawRows[0]) != `{"name":"Tea 1","price":"3.00","url":"`+site.URL+`/item/1","origin":"Uji 1"}` || a.Rows[4]["origin"] != nil {
		t.Errorf("shop rows: %s", js2(a.RawRows))
	}
	if !contains(a.Meta.Warnings, "unmatched join: nothing found on "+site.URL+"/item/5") || !contains(a.Meta.Warnings, "empty field origin in 1 of 6 rows") {
		t.Errorf("shop warnings: %q", a.Meta.Warnings)
	}

	for _, c := range []struct {
		name, body string
		status     int
		code       string
		pages      int // billed pages; -1: no usage at all
	}{
		{"shop", `{"colour":"red"}`, 400, "bad_input", -1},
		{"shop", `{"pages":"three"}`, 400, "bad_input", -1},
		{"shop", `{"pages":2.5}`, 400, "bad_input", -1},
		{"shop", `{"since":"last week"}`, 400, "bad_input", -1},
		{"shop", `{"all":"yes"}`, 400, "bad_input", -1},
		{"shop", `{"bypass_cache":1}`, 400, "bad_input", -1},
		{"shop", `[1,2]`, 400, "bad_input", -1},
		{"page-links", `{}`, 400, "bad_input", -1},
		{"page-links", `{"url":"ftp://x"}`, 400, "bad_input", -1},
		{"no-such-recipe", `{}`, 404, "unknown_recipe", -1},
		{"wander", `{}`, 403, "host_refused", 1},
		{"tight", `{}`, 422, "page_budget", 2},
		{"gone", `{}`, 502, "fetch_failed", 2},
		{"slow", `{}`, 504, "timeout", 1},
	} {
		resp, a, u := tc.runRecipe(t, c.name, c.body)
		if resp.StatusCode != c.status || a.Error != c.code || a.Message == "" {
			t.Errorf("%s %s: %d %s %q, want %d %s", c.name, c.body, resp.StatusCode, a.Error, a.Message, c.status, c.code)
			continue
		}
		if a.Rows != nil {
			t.Errorf("%s %s: a failed run has rows: %v", c.name, c.body, a.Rows)
		}
		h := resp.Header.Get(metering.Header)
		if c.pages < 0 {
			if h != "" {
				t.Errorf("%s %s: a refused request reports usage %s", c.name, c.body, h)
			}
			continue
		}
		if u.Kind != metering.KindRecipe || u.Count == nil || *u.Count != c.pages || len(u.Lines) != c.pages || a.Meta.PagesFetched != c.pages {
			t.Errorf("%s: usage %s, meta %+v; want %d pages billed", c.name, h, a.Meta, c.pages)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

type catalogEntry struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	Stage   string `json:"stage"`
	Health  struct {
		Status string  `json:"status"`
		Rows   *int    `json:"rows"`
		Error  *string `json:"error"`
	} `json:"health"`
}

func (tc *testCell) catalog(t *testing.T) map[string]catalogEntry {
	t.Helper()
	_, b := tc.get(t, "/recipes")
	var cat struct{ Recipes []catalogEntry }
	if err := json.Unmarshal(b, &cat); err != nil {
		t.Fatal(err)
	}
	out := map[string]catalogEntry{}
	for _, e := range cat.Recipes {
		out[e.Name] = e
	}
	return out
}

// An operator recipe is staged when it appears, checked at once and every
// 6 hours on the cell's clock, and promoted after two passing checks; a
// failing one stays staged with health fail; a changed recipe is staged
// again; built-ins are published. /recipes/health shows the checks.
func TestRecipeHealthPromotes(t *testing.T) {
	site := newRecipeSite(t)
	dir := t.TempDir()
	good := `{"name":"shop-names","version":1,"title":"Shop names","kind":"json","outputs":["name"],"hosts":["127.0.0.1"],
		"inputs":[{"name":"page","type":"integer","required":true}],"health":{"inputs":{"page":2},"min_rows":2},
		"json":{"urls":["` + site.URL + `/shop?page={page}"],"rows":{"baseSelector":"li.item","fields":[{"name":"name","selector":"a","type":"text"}]}}}`
	writeRecipe(t, dir, "shop-names", good, nil)
	writeRecipe(t, dir, "broken-link", `{"name":"broken-link","version":1,"title":"Broken","kind":"json","outputs":["name"],"hosts":["127.0.0.1"],
		"health":{"inputs":{}},"json":{"urls":["`+site.URL+`/gone"],"rows":{"baseSelector":"li","fields":[{"name":"name","type":"text"}]}}}`, nil)
	writeRecipe(t, dir, "unchecked", `{"name":"unchecked","version":1,"title":"No health inputs","kind":"json","outputs":["name"],"hosts":["127.0.0.1"],
		"json":{"urls":["`+site.URL+`/shop"],"rows":{"baseSelector":"li","fields":[{"name":"name","type":"text"}]}}}`, nil)
	tc := newTestCell(t, func(c *Config) {
		c.Recipes = RecipeConfig{Dir: dir, CheckTick: time.Hour, ReloadEvery: 20 * time.Millisecond}
	})
	// The loop checks what is due as it starts.
	deadline := time.Now().Add(10 * time.Second)
	for tc.catalog(t)["broken-link"].Health.Status == "unknown" || tc.catalog(t)["shop-names"].Health.Status == "unknown" {
		if time.Now().After(deadline) {
			t.Fatal("no first check")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cat := tc.catalog(t)
	if e := cat["shop-names"]; e.Stage != "staged" || e.Health.Status != "ok" || *e.Health.Rows != 2 {
		t.Errorf("after one check: %+v", e)
	}
	if e := cat["broken-link"]; e.Stage != "staged" || e.Health.Status != "fail" || !strings.Contains(*e.Health.Error, "fetch_failed") {
		t.Errorf("broken: %+v", e)
	}
	if e := cat["unchecked"]; e.Stage != "staged" || e.Health.Status != "unknown" {
		t.Errorf("unchecked: %+v", e)
	}
	if e := cat["page-links"]; e.Stage != "published" {
		t.Errorf("built-in: %+v", e)
	}
	// A staged recipe runs.
	if resp, a, _ := tc.runRecipe(t, "shop-names", `{"page":1}`); resp.StatusCode != 200 || len(a.Rows) != 2 {
		t.Errorf("staged run: %d %+v", resp.StatusCode, a)
	}
	// Nothing is due before 6 hours.
	tc.advance(5 * time.Hour)
	if n := tc.Recipes().CheckDue(t.Context()); n != 0 {
		t.Errorf("%d checks before 6 h", n)
	}
	tc.advance(time.Hour)
	if n := tc.Recipes().CheckDue(t.Context()); n != 2 {
		t.Errorf("%d checks at 6 h, want 2", n)
	}
	cat = tc.catalog(t)
	if e := cat["shop-names"]; e.Stage != "published" || e.Health.Status != "ok" {
		t.Errorf("after two passing checks: %+v", e)
	}
	if e := cat["broken-link"]; e.Stage != "staged" || e.Health.Status != "fail" {
		t.Errorf("broken after two checks: %+v", e)
	}
	_, b := tc.get(t, "/recipes/health/local")
	var rep struct {
		Region      string `json:"region"`
		CheckEveryS int    `json:"check_every_s"`
		Recipes     []struct {
			Name   string `json:"name"`
			Checks []struct {
				OK     bool   `json:"ok"`
				Rows   int    `json:"rows"`
				Region string `json:"region"`
				At     time.Time
			} `json:"checks"`
		} `json:"recipes"`
	}
	json.Unmarshal(b, &rep)
	for _, r := range rep.Recipes {
		if r.Name == "shop-names" && (len(r.Checks) != 2 || !r.Checks[1].OK || r.Checks[1].Rows != 2 || r.Checks[1].Region != "eu" || r.Checks[1].At.Sub(r.Checks[0].At) != 6*time.Hour) {
			t.Errorf("health checks: %s", b)
		}
	}
	if rep.Region != "eu" || rep.CheckEveryS != 21600 {
		t.Errorf("health: %s", b)
	}

	// A changed recipe is staged again, and published after two passes.
	writeRecipe(t, dir, "shop-names", strings.Replace(good, `"version":1`, `"version":2`, 1), nil)
	deadline = time.Now().Add(10 * time.Second)
	for e := tc.catalog(t)["shop-names"]; e.Version != 2 || e.Health.Status == "unknown"; e = tc.catalog(t)["shop-names"] {
		if time.Now().After(deadline) {
			t.Fatalf("the changed recipe was not reloaded and checked: %+v", e)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if e := tc.catalog(t)["shop-names"]; e.Stage != "staged" {
		t.Errorf("changed: %+v", e)
	}
	tc.advance(6 * time.Hour)
	tc.Recipes().CheckDue(t.Context())
	if e := tc.catalog(t)["shop-names"]; e.Stage != "published" || e.Version != 2 {
		t.Errorf("changed, after two passes: %+v", e)
	}
}

// A recipe declared run: job answers 202 with a job reference; the job's
// status, then its rows, are read at /recipes/jobs/{id} (another account
// gets 404); its units wait as a background charge for the gate, with the
// monitors' charges, until acknowledged.
func TestRecipeJob(t *testing.T) {
	site := newRecipeSite(t)
	dir := t.TempDir()
	writeRecipe(t, dir, "shop-all", `{"name":"shop-all","version":1,"title":"Whole shop","kind":"json","outputs":["name"],"hosts":["127.0.0.1"],"run":"job",
		"json":{"urls":["`+site.URL+`/shop"],"next":"a.next","rows":{"baseSelector":"li.item","fields":[{"name":"name","selector":"a","type":"text"}]}}}`, nil)
	tc := newTestCell(t, func(c *Config) { c.Recipes = RecipeConfig{Dir: dir} })
	resp, b := tc.post(t, "/recipes/shop-all", `{}`)
	var ref struct {
		JobID   string `json:"job_id"`
		Status  string `json:"status"`
		Results string `json:"results"`
	}
	json.Unmarshal(b, &ref)
	if resp.StatusCode != 202 || !strings.HasPrefix(ref.JobID, "j_eu.c1.") || ref.Results != "/recipes/jobs/"+ref.JobID || resp.Header.Get(metering.Header) != "" {
		t.Fatalf("submit: %d %s usage %q", resp.StatusCode, b, resp.Header.Get(metering.Header))
	}
	var job struct {
		Status string           `json:"status"`
		Rows   []map[string]any `json:"rows"`
		Units  int              `json:"units"`
		Meta   struct {
			PagesFetched int `json:"pages_fetched"`
		} `json:"meta"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for job.Status != "done" {
		if time.Now().After(deadline) {
			t.Fatalf("job not done: %+v", job)
		}
		time.Sleep(10 * time.Millisecond)
		resp, b = tc.get(t, ref.Results)
		if resp.StatusCode != 200 {
			t.Fatalf("job: %d %s", resp.StatusCode, b)
		}
		json.Unmarshal(b, &job)
	}
	if len(job.Rows) != 6 || job.Rows[5]["name"] != "Tea 6" || job.Units != 3 || job.Meta.PagesFetched != 3 {
		t.Errorf("job: %s", b)
	}
	req, _ := http.NewRequest("GET", tc.srv.URL+ref.Results, nil)
	req.Header.Set(testAccountHeader, "someone-else")
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != 404 {
		t.Errorf("another account: %v %v", r.StatusCode, err)
	}
	req, _ = http.NewRequest("GET", tc.srv.URL+"/monitor-charges", nil)
	req.Header.Set(testAccountHeader, "")
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var charges struct {
		Charges []struct {
			ID, Account string
			Usage       metering.Usage
		}
	}
	json.NewDecoder(r.Body).Decode(&charges)
	r.Body.Close()
	if len(charges.Charges) != 1 || charges.Charges[0].ID != "rj-"+ref.JobID || charges.Charges[0].Account != testAccount ||
		charges.Charges[0].Usage.Kind != metering.KindRecipe || *charges.Charges[0].Usage.Count != 3 {
		t.Fatalf("charges: %+v", charges)
	}
	req, _ = http.NewRequest("POST", tc.srv.URL+"/monitor-charges/ack", strings.NewReader(`{"ids":["rj-`+ref.JobID+`"]}`))
	req.Header.Set(testAccountHeader, "")
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != 200 {
		t.Fatalf("ack: %v", err)
	}
	if n, _ := tc.Recipes().Charges(10); len(n) != 0 {
		t.Errorf("charges after the ack: %+v", n)
	}
}

// With the operator's model configured, a recipe's extract calls it: the
// run's meta counts the calls, usage has a line per model call with its
// tokens, and the tokens are billed.
func TestRecipeModelCalls(t *testing.T) {
	srv := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) {
		llmtest.CompletionUsage(w, `{"data":{"name":"Sencha Kabuse","brand":"Hoshino","sku":"SK-100","price":9.5,"price_currency":"EUR","availability":"in stock","rating_value":4.6,"review_count":128,"image":null,"description":"Shaded."}}`, 500, 40)
	})
	tc := modelCell(t, srv, nil)
	site := newRecipeSite(t)
	resp, a, u := tc.runRecipe(t, "product", `{"url":"`+site.URL+`/product.html"}`)
	if resp.StatusCode != 200 || len(a.Rows) != 1 || a.Rows[0]["name"] != "Sencha Kabuse" || a.Rows[0]["availability"] != "in stock" || a.Meta.LLMCalls != 1 {
		t.Fatalf("%d %+v", resp.StatusCode, a)
	}
	if u.InTokens != 500 || u.OutTokens != 40 || len(u.Lines) != 2 || u.Lines[0].Call != metering.KindScrape || u.Lines[1].Call != metering.KindExtract ||
		u.Lines[1].Step != "chunk 1/1" || u.Lines[1].InTokens != 500 || *u.Count != 1 || !contains(u.Boxes, "llm") {
		t.Errorf("usage %+v", u)
	}
	if len(srv.Requests()) != 1 {
		t.Errorf("%d model calls", len(srv.Requests()))
	}
}

// A json recipe's "xml": true reads a sitemap served as text/plain.
func TestRecipeXMLFlag(t *testing.T) {
	b, err := os.ReadFile("recipe/testdata/site/sitemap.xml")
	if err != nil {
		t.Fatal(err)
	}
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(b)
	}))
	t.Cleanup(plain.Close)
	tc := newTestCell(t, nil)
	_, a, _ := tc.runRecipe(t, "sitemap-urls", `{"url":"`+plain.URL+`/sitemap.txt"}`)
	if len(a.Rows) != 3 || a.Rows[2]["loc"] != "https://tea.example/black" {
		t.Errorf("%+v", a)
	}
}

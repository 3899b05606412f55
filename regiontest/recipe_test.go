package regiontest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/syncbuf"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/trawlhq/trawl/cell"
	"github.com/trawlhq/trawl/internal/telemetry"
	"github.com/trawlhq/trawl/internal/testwait"
	"github.com/trawlhq/trawl/ledger"
)

type recipeReply struct {
	Recipe  string           `json:"recipe"`
	Version int              `json:"version"`
	Rows    []map[string]any `json:"rows"`
	Usage   map[string]any   `json:"usage"`
	Meta    struct {
		PagesFetched int      `json:"pages_fetched"`
		FromCache    bool     `json:"from_cache"`
		Warnings     []string `json:"warnings"`
		Blocked      *string  `json:"blocked"`
	} `json:"meta"`
	Error string `json:"error"`
}

func runRecipe(t *testing.T, g *Gate, key, name, body string) (reply, recipeReply) {
	t.Helper()
	r := call(t, "POST", g.URL+"/recipes/"+name, key, body)
	var a recipeReply
	if err := json.Unmarshal([]byte(r.body), &a); err != nil {
		t.Fatalf("%s: %d %s", name, r.status, r.body)
	}
	return r, a
}

func writeRecipeDir(t *testing.T, root, name, manifest string) {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "recipe.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Issue 19 through the gate: the catalog is free, health needs no key,
// a run bills its pages with the usage object (a line per page), a
// repeat from the cache costs 0, a failed run bills the pages it fetched
// and shows its usage, a refused request costs nothing.
func TestRecipesBilledThroughTheGate(t *testing.T) {
	pages := site(t)
	dir := t.TempDir()
	writeRecipeDir(t, dir, "two-pages", `{"name":"two-pages","version":1,"title":"Two pages","kind":"json","outputs":["title"],"hosts":["127.0.0.1"],
		"fresh_for_s":60,"json":{"urls":["`+pages.URL+`/a","`+pages.URL+`/b"],"rows":{"baseSelector":"h1","fields":[{"name":"title","type":"text"}]}}}`)
	writeRecipeDir(t, dir, "half-way", `{"name":"half-way","version":1,"title":"Fails on its second page","kind":"json","outputs":["title"],"hosts":["127.0.0.1"],
		"json":{"urls":["`+pages.URL+`/a","http://127.0.0.1:1/closed"],"rows":{"baseSelector":"h1","fields":[{"name":"title","type":"text"}]}}}`)
	writeRecipeDir(t, dir, "in-background", `{"name":"in-background","version":1,"title":"A job","kind":"json","outputs":["title"],"hosts":["127.0.0.1"],"run":"job",
		"json":{"urls":["`+pages.URL+`/x","`+pages.URL+`/y","`+pages.URL+`/z"],"rows":{"baseSelector":"h1","fields":[{"name":"title","type":"text"}]}}}`)
	g := Start(t, Options{Cell: func(c *cell.Config) { c.Recipes.Dir = dir }})
	key := g.Account(t, ledger.PlanFree, 100)

	r := call(t, "GET", g.URL+"/recipes", key, "")
	if r.status != 200 || r.header.Get("X-Svc-Cost") != "0.000" || !strings.Contains(r.body, `"name":"two-pages"`) || !strings.Contains(r.body, `"name":"page-links"`) {
		t.Errorf("catalog: %d %s %.300s", r.status, r.header.Get("X-Svc-Cost"), r.body)
	}
	if r := call(t, "GET", g.URL+"/recipes", "", ""); r.status != 401 {
		t.Errorf("catalog without a key: %d", r.status)
	}
	r = call(t, "GET", g.URL+"/recipes/health", "", "")
	if r.status != 200 || !strings.Contains(r.body, `"region":"eu"`) || !strings.Contains(r.body, `"name":"two-pages"`) {
		t.Errorf("health without a key: %d %.300s", r.status, r.body)
	}

	r, a := runRecipe(t, g, key, "two-pages", `{}`)
	lines, _ := a.Usage["lines"].([]any)
	if r.status != 200 || len(a.Rows) != 2 || a.Rows[0]["title"] != "Page /a" || a.Usage["units"] != "2.000" || r.header.Get("X-Svc-Cost") != "2.000" ||
		a.Usage["cache"] != "miss" || len(lines) != 2 || !strings.Contains(fmt.Sprint(lines[1]), "url:"+pages.URL+"/b") {
		t.Errorf("run: %d %s", r.status, r.body)
	}
	sameAsHistory(t, "recipe run", a.Usage, usageLines(t, g, key))
	r, a = runRecipe(t, g, key, "two-pages", `{}`)
	if r.status != 200 || !a.Meta.FromCache || a.Usage["units"] != "0.000" || a.Usage["cache"] != "hit" || r.header.Get("X-Svc-Cost") != "0.000" || len(a.Rows) != 2 {
		t.Errorf("repeat: %d %s", r.status, r.body)
	}
	r, a = runRecipe(t, g, key, "two-pages", `{"bypass_cache":true}`)
	if r.status != 200 || a.Meta.FromCache || r.header.Get("X-Svc-Cost") != "2.000" {
		t.Errorf("bypass: %d %s", r.status, r.body)
	}

	// A run that fails on its second page: 502, its first page billed
	// and listed, no rows.
	r, a = runRecipe(t, g, key, "half-way", `{}`)
	lines, _ = a.Usage["lines"].([]any)
	if r.status != 502 || a.Error != "fetch_failed" || a.Rows != nil || r.header.Get("X-Svc-Cost") != "1.000" || a.Usage["units"] != "1.000" || len(lines) != 1 {
		t.Errorf("failed run: %d %s cost %s", r.status, r.body, r.header.Get("X-Svc-Cost"))
	}
	// A job: free to submit, its units charged when the gate collects
	// them; another account cannot read it.
	r = call(t, "POST", g.URL+"/recipes/in-background", key, `{}`)
	var ref struct {
		JobID   string `json:"job_id"`
		Results string `json:"results"`
	}
	json.Unmarshal([]byte(r.body), &ref)
	if r.status != 202 || r.header.Get("X-Svc-Cost") != "0.000" || ref.JobID == "" {
		t.Fatalf("job: %d %s", r.status, r.body)
	}
	testwait.Until(t, 10*time.Second, "the job done", func() bool {
		r := call(t, "GET", g.URL+ref.Results, key, "")
		return r.status == 200 && strings.Contains(r.body, `"status":"done"`) && strings.Contains(r.body, `{"title":"Page /z"}`)
	})

	other := g.Account(t, ledger.PlanFree, 10)
	if r := call(t, "GET", g.URL+ref.Results, other, ""); r.status != 404 {
		t.Errorf("another account's job: %d %s", r.status, r.body)
	}
	if n, err := g.Runtime.CollectMonitorCharges(t.Context()); n != 1 || err != nil {
		t.Errorf("collected %d charges: %v", n, err)
	}
	found := false
	for _, l := range usageLines(t, g, key) {
		if l["call"] == "recipe" && l["units"] == "3.000" && fmt.Sprint(l["count"]) == "3" {
			found = true
		}
	}
	if !found {
		t.Errorf("no 3-unit recipe line in the usage history: %v", usageLines(t, g, key))
	}

	for _, c := range []struct{ name, body, code string }{
		{"two-pages", `{"nope":1}`, "bad_input"},
		{"page-links", `{}`, "bad_input"},
		{"missing", `{}`, "unknown_recipe"},
	} {
		r, a := runRecipe(t, g, key, c.name, c.body)
		if a.Error != c.code || r.header.Get("X-Svc-Cost") != "0.000" || a.Usage != nil {
			t.Errorf("%s %s: %d %s cost %s", c.name, c.body, r.status, r.body, r.header.Get("X-Svc-Cost"))
		}
	}
}

// Issue 19: a recipe run with the caller's session (a unique cookie value)
// against a loopback site that needs it leaves no trace of the value: not
// in any file under the gate's and the cell's data directories (archive,
// cache, index, jobs, usage lines, stores), not in any log line at debug
// level, not in any span, not in any answer. A wrong session gives
// rows [], bad_session and the blocked site, and its page is charged.
func TestRecipeSessionLeavesNoTrace(t *testing.T) {
	traceOnce.Do(func() {
		otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(traceExp)))
		if _, err := telemetry.Setup(context.Background(), "test"); err != nil {
			t.Fatal(err)
		}
	})
	traceExp.Reset()
	logs := &syncbuf.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	prev := slog.Default()
	slog.SetDefault(logger)
	t.Cleanup(func() { slog.SetDefault(prev) })

	secret := make([]byte, 16)
	rand.Read(secret)
	value := "s3ss10n" + hex.EncodeToString(secret)
	var hits, withCookie atomic.Int64
	members := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/orders":
			c, err := r.Cookie("sid")
			if err != nil || c.Value != value {
				// The login page is on another host name: the session
				// must not follow the redirect there.
				http.Redirect(w, r, "http://localhost:"+r.Host[strings.LastIndex(r.Host, ":")+1:]+"/login?next=/orders", http.StatusFound)
				return
			}
			withCookie.Add(1)
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<html><head><title>Your orders</title></head><body><h1>Your orders</h1><table><tr><th>Order</th><th>Tea</th></tr>
<tr><td>A-1</td><td>Sencha</td></tr><tr><td>A-2</td><td>Assam</td></tr></table></body></html>`)
		case "/login":
			if r.Header.Get("Cookie") != "" {
				t.Errorf("the session followed the redirect to another host's login page")
			}
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<html><body><h1>Sign in</h1><form method="post"><input name="user"><input type="password" name="pw"></form></body></html>`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(members.Close)
	dir := t.TempDir()
	writeRecipeDir(t, dir, "my-orders", `{"name":"my-orders","version":1,"title":"My orders","kind":"json","outputs":["order","tea"],
		"inputs":[{"name":"session","type":"string","need":"required"}],"hosts":["127.0.0.1"],"fresh_for_s":600,
		"json":{"urls":["`+members.URL+`/orders"],"rows":{"baseSelector":"tr:has(td)","fields":[{"name":"order","selector":"td:nth-child(1)","type":"text"},{"name":"tea","selector":"td:nth-child(2)","type":"text"}]}}}`)
	var cellDirs []string
	g := Start(t, Options{Cell: func(c *cell.Config) {
		c.Recipes.Dir = dir
		c.Logger = logger
		cellDirs = append(cellDirs, c.DataDir)
	}})
	key := g.Account(t, ledger.PlanFree, 100)
	var answers []string

	r, a := runRecipe(t, g, key, "my-orders", `{"session":"sid=`+value+`; theme=dark"}`)
	answers = append(answers, r.body, fmt.Sprint(r.header))
	if r.status != 200 || len(a.Rows) != 2 || a.Rows[1]["tea"] != "Assam" || a.Meta.FromCache || r.header.Get("X-Svc-Cost") != "1.000" || withCookie.Load() != 1 {
		t.Fatalf("with the session: %d %s", r.status, r.body)
	}
	// Never cached: the same call fetches again.
	r, a = runRecipe(t, g, key, "my-orders", `{"session":"Cookie: sid=`+value+`"}`)
	answers = append(answers, r.body, fmt.Sprint(r.header))
	if r.status != 200 || a.Meta.FromCache || len(a.Rows) != 2 || withCookie.Load() != 2 {
		t.Errorf("again: %d %s", r.status, r.body)
	}
	// A wrong session: the login wall.
	r, a = runRecipe(t, g, key, "my-orders", `{"session":"sid=expired`+value[:6]+`"}`)
	answers = append(answers, r.body, fmt.Sprint(r.header))
	if r.status != 200 || a.Rows == nil || len(a.Rows) != 0 || len(a.Meta.Warnings) == 0 || a.Meta.Warnings[0] != "bad_session" ||
		a.Meta.Blocked == nil || *a.Meta.Blocked != "127.0.0.1" || r.header.Get("X-Svc-Cost") != "1.000" {
		t.Errorf("wrong session: %d %s cost %s", r.status, r.body, r.header.Get("X-Svc-Cost"))
	}
	// The session is required; a bad one is refused without an echo.
	r, _ = runRecipe(t, g, key, "my-orders", `{"session":["sid=`+value+`"]}`)
	answers = append(answers, r.body)
	if r.status != 400 {
		t.Errorf("session of the wrong type: %d %s", r.status, r.body)
	}
	answers = append(answers, call(t, "GET", g.URL+"/v1/billing/usage", key, "").body, call(t, "GET", g.URL+"/recipes/health", "", "").body)

	// Let the gate's spans end, then close the cells so every store is on
	// disk.
	testwait.Until(t, 5*time.Second, "the gate's spans", func() bool {
		n := 0
		for _, s := range traceExp.GetSpans().Snapshots() {
			if strings.HasPrefix(s.Name(), "cell POST /recipes/") {
				n++
			}
		}
		return n >= 4
	})

	for _, c := range g.Cells {
		c.Stop()
	}
	for _, s := range traceExp.GetSpans().Snapshots() {
		var b strings.Builder
		fmt.Fprint(&b, s.Name(), s.Attributes(), s.Events(), s.Status(), s.Links())
		if strings.Contains(b.String(), value) {
			t.Errorf("span %s holds the session: %s", s.Name(), b.String())
		}
	}
	if strings.Contains(logs.String(), value) {
		t.Errorf("a log line holds the session")
	}
	if !strings.Contains(logs.String(), "recipe") && logs.String() == "" {
		t.Errorf("nothing was logged: the search proves nothing")
	}
	for _, ans := range answers {
		if strings.Contains(ans, value) {
			t.Errorf("an answer holds the session: %.300s", ans)
		}
	}
	files := 0
	for _, root := range append(cellDirs, g.DataDir, dir) {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil // a lock file of the running gate
			}
			files++
			if bytes.Contains(b, []byte(value)) {
				t.Errorf("%s holds the session", p)
			}
			return nil
		})
	}
	if files < 10 {
		t.Errorf("only %d files searched", files)
	}
}

// GET /recipes/health through the gate of a region with two cells: each
// cell checks the recipe on its own, the gate merges both reports; with
// one cell gone, the other's still answers.
func TestRecipeHealthMergesCells(t *testing.T) {
	pages := site(t)
	dir := t.TempDir()
	writeRecipeDir(t, dir, "heading", `{"name":"heading","version":1,"title":"Heading","kind":"json","outputs":["title"],"hosts":["127.0.0.1"],
		"health":{"inputs":{}},"json":{"urls":["`+pages.URL+`/h"],"rows":{"baseSelector":"h1","fields":[{"name":"title","type":"text"}]}}}`)
	g := Start(t, Options{Cells: 2, Cell: func(c *cell.Config) { c.Recipes.Dir = dir }})
	type report struct {
		Region  string   `json:"region"`
		Cells   []string `json:"cells"`
		Recipes []struct {
			Name   string
			Stage  string
			Health struct{ Status string }
			Checks []struct{ Cell string }
		} `json:"recipes"`
	}
	var rep report
	testwait.Until(t, 10*time.Second, "both cells' checks", func() bool {
		r := call(t, "GET", g.URL+"/recipes/health", "", "")
		rep = report{}
		json.Unmarshal([]byte(r.body), &rep)
		for _, e := range rep.Recipes {
			if e.Name == "heading" {
				return r.status == 200 && len(e.Checks) == 2
			}
		}
		return false
	})

	for _, e := range rep.Recipes {
		if e.Name == "heading" && (e.Health.Status != "ok" || e.Stage != "staged" || e.Checks[0].Cell == e.Checks[1].Cell) {
			t.Errorf("heading: %+v", e)
		}
	}
	if rep.Region != "eu" || len(rep.Cells) != 2 {
		t.Errorf("report: %+v", rep)
	}
	g.Cells[1].Stop()
	testwait.Until(t, 10*time.Second, "one cell's report", func() bool {
		r := call(t, "GET", g.URL+"/recipes/health", "", "")
		rep = report{}
		json.Unmarshal([]byte(r.body), &rep)
		return r.status == 200 && len(rep.Cells) == 1
	})

}

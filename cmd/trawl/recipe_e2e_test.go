package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/testwait"
)

// recipeTestSite serves cell/recipe/testdata/site and a members' page
// that needs the session cookie value.
func recipeTestSite(t *testing.T, session string) *httptest.Server {
	t.Helper()
	files := http.FileServer(http.Dir("../../cell/recipe/testdata/site"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/members":
			if c, err := r.Cookie("sid"); err != nil || c.Value != session {
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprint(w, "<html><body>Sign in first.</body></html>")
				return
			}
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<html><body><h1>Members</h1><a href="/orders/1">Order 1</a><a href="/orders/2">Order 2</a></body></html>`)
		case "/sitemap.xml":
			w.Header().Set("Content-Type", "application/xml")
			files.ServeHTTP(w, r)
		default:
			files.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

type devRecipeRun struct {
	Rows  []map[string]any `json:"rows"`
	Usage map[string]any   `json:"usage"`
	Meta  struct {
		PagesFetched int      `json:"pages_fetched"`
		FromCache    bool     `json:"from_cache"`
		Warnings     []string `json:"warnings"`
		Blocked      *string  `json:"blocked"`
	} `json:"meta"`
	Error   string `json:"error"`
	Message string `json:"message"`
}

func devRecipe(t *testing.T, base, name, body string) (answer, devRecipeRun) {
	t.Helper()
	a := gateCall(t, "POST", base+"/recipes/"+name, body)
	var r devRecipeRun
	if err := json.Unmarshal(a.body, &r); err != nil {
		t.Fatalf("%s: %d %s", name, a.status, a.body)
	}
	return a, r
}

// Issue 19 through `trawl dev`: the catalog lists the built-ins and each
// runs against a local site; a module built from Go source and a script
// run with their limits enforced; a session run leaves no trace in the
// data directory or the process's log; a staged operator recipe is
// promoted by its health checks (every 2 s here instead of 6 h); `trawl
// recipe new` and `trawl recipe run` work on a directory.
func TestRecipesThroughDev(t *testing.T) {
	secret := make([]byte, 12)
	rand.Read(secret)
	session := "v" + hex.EncodeToString(secret)
	site := recipeTestSite(t, session)

	recipes := t.TempDir()
	probe := filepath.Join(recipes, "probe")
	os.MkdirAll(probe, 0o755)
	os.WriteFile(filepath.Join(probe, "recipe.json"), []byte(`{"name":"probe","version":1,"title":"Probe","kind":"module",
		"inputs":[{"name":"mode","type":"string","required":true},{"name":"url","type":"string","default":"`+site.URL+`/article.html"}],
		"outputs":["text","href"],"hosts":["{url}"],"limits":{"time_ms":2000,"memory_mib":48}}`), 0o644)
	build := exec.Command("go", "build", "-o", filepath.Join(probe, "module.wasm"), "../../cell/recipe/testdata/modules/probe")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the module: %v\n%s", err, out)
	}
	spin := filepath.Join(recipes, "spin")
	os.MkdirAll(spin, 0o755)
	os.WriteFile(filepath.Join(spin, "recipe.json"), []byte(`{"name":"spin","version":1,"title":"Spins","kind":"script","outputs":["x"],"hosts":["127.0.0.1"],"limits":{"time_ms":500}}`), 0o644)
	os.WriteFile(filepath.Join(spin, "script.js"), []byte(`function run(input) { for (;;) {} }`), 0o644)
	members := filepath.Join(recipes, "members")
	os.MkdirAll(members, 0o755)
	os.WriteFile(filepath.Join(members, "recipe.json"), []byte(`{"name":"members","version":1,"title":"Members' orders","kind":"json","outputs":["order","url"],
		"inputs":[{"name":"session","type":"string","need":"required"}],"hosts":["127.0.0.1"],
		"health":{"inputs":{"session":"sid=nobody"}},
		"json":{"urls":["`+site.URL+`/members"],"rows":{"baseSelector":"a","fields":[{"name":"order","type":"text"},{"name":"url","type":"attribute","attribute":"href"}]},"url_fields":["url"]}}`), 0o644)
	staged := filepath.Join(recipes, "headings")
	os.MkdirAll(staged, 0o755)
	os.WriteFile(filepath.Join(staged, "recipe.json"), []byte(`{"name":"headings","version":1,"title":"Headings","kind":"json","outputs":["text"],
		"inputs":[{"name":"url","type":"string","required":true}],"hosts":["{url}"],"health":{"inputs":{"url":"`+site.URL+`/tables.html"}},
		"json":{"urls":["{url}"],"rows":{"baseSelector":"h1","fields":[{"name":"text","type":"text"}]}}}`), 0o644)

	data := t.TempDir()
	dev := launch(t, []string{"TRAWL_DEV_KEY=" + e2eKey}, "gate serving", "dev",
		"--listen", fmt.Sprintf("127.0.0.1:%d", freeRun(t, 1)), "--ledger-raft", fmt.Sprintf("127.0.0.1:%d", freeRun(t, 1)),
		"--data", data, "--allow-private-networks", "--browsers", "0", "--prices", pricesFile(t, 100000), "--log-level", "debug",
		"--recipes", recipes, "--recipe-check-every", "2s", "--recipe-check-tick", "100ms")

	a := gateCall(t, "GET", dev.base+"/recipes", "")
	for _, n := range []string{"sitemap-urls", "feed-items", "table-rows", "page-links", "article", "product", "probe", "spin", "members", "headings"} {
		if !strings.Contains(string(a.body), `"name":"`+n+`"`) {
			t.Errorf("the catalog lacks %s", n)
		}
	}
	for _, c := range []struct{ name, body, want string }{
		{"sitemap-urls", `{"url":"` + site.URL + `/sitemap.xml"}`, "https://tea.example/green"},
		{"feed-items", `{"url":"` + site.URL + `/feed.atom"}`, "Oolong, slowly"},
		{"table-rows", `{"url":"` + site.URL + `/tables.html","caption":"Prices"}`, "Assam"},
		{"page-links", `{"url":"` + site.URL + `/article.html"}`, site.URL + "/about"},
		{"article", `{"url":"` + site.URL + `/article.html"}`, "Ann Leaf"},
		{"product", `{"url":"` + site.URL + `/product.html"}`, "Hoshino"},
		{"probe", `{"mode":"links"}`, site.URL + "/article.html"},
	} {
		a, r := devRecipe(t, dev.base, c.name, c.body)
		if a.status != 200 || len(r.Rows) == 0 || !strings.Contains(string(a.body), c.want) || r.Usage["units"] != "1.000" || a.header.Get("X-Svc-Cost") != "1.000" {
			t.Errorf("%s: %d %s", c.name, a.status, a.body)
		}
	}
	if a, r := devRecipe(t, dev.base, "probe", `{"mode":"spin"}`); a.status != 422 || r.Error != "module_limit" {
		t.Errorf("module spin: %d %s", a.status, a.body)
	}
	if a, r := devRecipe(t, dev.base, "probe", `{"mode":"grow"}`); a.status != 422 || r.Error != "module_limit" {
		t.Errorf("module grow: %d %s", a.status, a.body)
	}
	if a, r := devRecipe(t, dev.base, "spin", `{}`); a.status != 422 || r.Error != "module_limit" {
		t.Errorf("script spin: %d %s", a.status, a.body)
	}

	// The session: rows with it, bad_session without, no trace anywhere.
	a, r := devRecipe(t, dev.base, "members", `{"session":"sid=`+session+`"}`)
	if a.status != 200 || len(r.Rows) != 2 || r.Rows[1]["url"] != site.URL+"/orders/2" {
		t.Errorf("members: %d %s", a.status, a.body)
	}
	a, r = devRecipe(t, dev.base, "members", `{"session":"sid=wrong"}`)
	if a.status != 200 || len(r.Rows) != 0 || len(r.Meta.Warnings) == 0 || r.Meta.Warnings[0] != "bad_session" || r.Meta.Blocked == nil || a.header.Get("X-Svc-Cost") != "1.000" {
		t.Errorf("members, wrong session: %d %s", a.status, a.body)
	}

	// The staged recipe is published after two passing checks; the one
	// whose health session is refused is not.
	testwait.Until(t, 30*time.Second, "headings published", func() bool {
		a := gateCall(t, "GET", dev.base+"/recipes/health", "")
		var rep struct {
			Recipes []struct {
				Name, Stage string
				Health      struct{ Status string }
			}
		}
		json.Unmarshal(a.body, &rep)
		for _, e := range rep.Recipes {
			if e.Name == "headings" {
				return e.Stage == "published" && e.Health.Status == "ok"
			}
		}
		return false
	})

	h := gateCall(t, "GET", dev.base+"/recipes/health", "")
	if !strings.Contains(string(h.body), `"name":"members","version":1,"stage":"staged","health":{"status":"fail"`) {
		t.Errorf("members' health: %s", h.body)
	}

	// No trace of the session: not in the log, not in any file.
	if strings.Contains(dev.logs(), session) {
		t.Errorf("the process log holds the session")
	}
	n := 0
	filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		n++
		if bytes.Contains(b, []byte(session)) {
			t.Errorf("%s holds the session", p)
		}
		return nil
	})
	if n < 10 {
		t.Errorf("only %d files under the data directory", n)
	}

	// trawl recipe new, then run, locally.
	work := t.TempDir()
	out, err := exec.Command(trawlBin, "recipe", "new", "--kind", "script", filepath.Join(work, "heads")).CombinedOutput()
	if err != nil {
		t.Fatalf("recipe new: %v %s", err, out)
	}
	cmd := exec.Command(trawlBin, "recipe", "run", filepath.Join(work, "heads"), "--input", "url="+site.URL+"/tables.html", "--allow-private-networks")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || !strings.Contains(stdout.String(), `"text": "Tea tables"`) || !strings.Contains(stdout.String(), `"level": 1`) {
		t.Errorf("recipe run: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	out, err = exec.Command(trawlBin, "recipe", "run", "page-links", "--input", "url="+site.URL+"/article.html").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not public") {
		t.Errorf("a local run without --allow-private-networks fetched loopback: %v %s", err, out)
	}
}

// Every region checks every recipe; any region's address gives another
// region's health with ?region= (no key needed).
func TestRecipeHealthOfEachRegion(t *testing.T) {
	recipes := t.TempDir()
	site := recipeTestSite(t, "unused")
	os.MkdirAll(filepath.Join(recipes, "heading"), 0o755)
	os.WriteFile(filepath.Join(recipes, "heading", "recipe.json"), []byte(`{"name":"heading","version":1,"title":"Heading","kind":"json","outputs":["text"],
		"hosts":["127.0.0.1"],"health":{"inputs":{}},"json":{"urls":["`+site.URL+`/article.html"],"rows":{"baseSelector":"h1","fields":[{"name":"text","type":"text"}]}}}`), 0o644)
	gp, rp := freeRun(t, 3), freeRun(t, 3)
	launch(t, []string{"TRAWL_DEV_KEY=" + e2eKey}, "dev serving", "dev", "--regions", "eu,sin,us",
		"--listen", fmt.Sprintf("127.0.0.1:%d", gp), "--ledger-raft", fmt.Sprintf("127.0.0.1:%d", rp),
		"--data", t.TempDir(), "--allow-private-networks", "--browsers", "0", "--prices", pricesFile(t, 100),
		"--recipes", recipes, "--recipe-health", `page-links={"url":"`+site.URL+`/article.html"}`)
	eu := fmt.Sprintf("http://127.0.0.1:%d", gp)
	for _, region := range []string{"eu", "sin", "us"} {
		testwait.Until(t, 20*time.Second, region+"'s checks through eu", func() bool {
			resp, err := http.Get(eu + "/recipes/health?region=" + region)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var rep struct {
				Region  string
				Recipes []struct {
					Name   string
					Health struct{ Status string }
					Checks []struct{ Region string }
				}
			}
			json.NewDecoder(resp.Body).Decode(&rep)
			ok := 0
			for _, e := range rep.Recipes {
				if (e.Name == "heading" || e.Name == "page-links") && e.Health.Status == "ok" && len(e.Checks) > 0 && e.Checks[0].Region == region {
					ok++
				}
			}
			return resp.StatusCode == 200 && rep.Region == region && ok == 2
		})

	}
}

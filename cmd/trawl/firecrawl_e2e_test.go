package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/internal/fcclient"
)

// Firecrawl's official JS SDK (npm's @mendable/firecrawl-js, pinned in
// internal/fcclient, installed by scripts/deps.sh) against `trawl dev`,
// with only its base URL and key changed: every v2 method trawl serves,
// on a site on loopback. docs/firecrawl.md lists what is served.

type fcCall struct {
	Method string `json:"method"`
	Args   []any  `json:"args"`
}

type fcResult struct {
	Method string          `json:"method"`
	Value  json.RawMessage `json:"value"`
	Thrown string          `json:"thrown"`
	Status *int            `json:"status"`
	Code   *string         `json:"code"`
}

func firecrawlSDK(t *testing.T, base, key string, calls ...fcCall) []fcResult {
	t.Helper()
	dir, err := fcclient.Find()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not on PATH: the Firecrawl SDK tests need Node 18+")
	}
	in, _ := json.Marshal(map[string]any{"apiUrl": base, "apiKey": key, "calls": calls})
	cmd := exec.Command("node", "testdata/firecrawl_client.mjs")
	cmd.Env = append(cmd.Environ(), "FIRECRAWL_JS_DIR="+dir)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node firecrawl_client.mjs: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var out struct{ Results []fcResult }
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("firecrawl_client.mjs output: %v\n%s", err, stdout.String())
	}
	return out.Results
}

const fcPage = `<!DOCTYPE html><html lang="en"><head><title>Steeping times</title>
<meta name="description" content="How long to steep each tea."></head><body>
<nav><a href="/">Home</a> <a href="/shop">Shop</a></nav>
<main><h1>Steeping times</h1>
<p>Green tea wants two to three minutes in water just off the boil, black tea four to five minutes at a full boil.</p>
<p>Oolong sits between them: three to four minutes, and it can be steeped again several times over.</p>
<p>See <a href="/black">black tea</a> and <a href="/green">green tea</a>.</p></main>
<footer>Tea notes, all rights reserved.</footer></body></html>`

func TestFirecrawlSDKAgainstDev(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, fcPage)
	}))
	defer site.Close()
	dev := startMCPDev(t)
	page := site.URL + "/steeping"

	res := firecrawlSDK(t, dev.base, e2eKey,
		fcCall{"scrape", []any{page}},
		fcCall{"scrape", []any{page, map[string]any{"formats": []any{"markdown", "html", "links", "rawHtml"}, "onlyMainContent": false, "maxAge": 0}}},
		fcCall{"scrape", []any{page, map[string]any{"formats": []any{map[string]any{"type": "json", "schema": map[string]any{
			"type": "object", "properties": map[string]any{"title": map[string]any{"type": "string"}}}}}}}},
		fcCall{"scrape", []any{page, map[string]any{"formats": []any{"changeTracking"}}}},
		fcCall{"scrape", []any{"not a url"}},
	)
	if len(res) != 5 {
		t.Fatalf("results: %+v", res)
	}
	type doc struct {
		Markdown string         `json:"markdown"`
		HTML     string         `json:"html"`
		RawHTML  string         `json:"rawHtml"`
		Links    []string       `json:"links"`
		JSON     map[string]any `json:"json"`
		Metadata map[string]any `json:"metadata"`
	}
	get := func(i int) doc {
		t.Helper()
		r := res[i]
		if r.Thrown != "" {
			t.Fatalf("call %d (%s) threw: %s (status %v)", i, r.Method, r.Thrown, deref(r.Status))
		}
		var d doc
		if err := json.Unmarshal(r.Value, &d); err != nil {
			t.Fatalf("call %d: %v: %s", i, err, r.Value)
		}
		return d
	}
	d := get(0)
	if !strings.Contains(d.Markdown, "Oolong sits between them") || strings.Contains(d.Markdown, "all rights reserved") {
		t.Errorf("scrape markdown:\n%s", d.Markdown)
	}
	if d.Metadata["title"] != "Steeping times" || d.Metadata["statusCode"] != 200.0 || d.Metadata["sourceURL"] != page {
		t.Errorf("scrape metadata %v", d.Metadata)
	}
	d = get(1)
	if !strings.Contains(d.Markdown, "all rights reserved") || d.RawHTML != fcPage || !strings.Contains(d.HTML, "Oolong") {
		t.Errorf("full page: %+v", d)
	}
	if !slices.Contains(d.Links, site.URL+"/black") {
		t.Errorf("links %v", d.Links)
	}
	if d = get(2); d.JSON["title"] == nil {
		t.Errorf("json format: %+v", d)
	}
	for i, want := range []int{400, 400} {
		r := res[3+i]
		if r.Thrown == "" || r.Status == nil || *r.Status != want {
			t.Errorf("call %d: want a thrown %d, got %+v", 3+i, want, r)
		}
	}
	if !strings.Contains(res[3].Thrown, "changeTracking") {
		t.Errorf("unsupported format message: %q", res[3].Thrown)
	}

	// The team's credit, from the ledger.
	res = firecrawlSDK(t, dev.base, e2eKey, fcCall{"getCreditUsage", nil}, fcCall{"getTokenUsage", nil})
	var cu struct {
		RemainingCredits   float64 `json:"remainingCredits"`
		BillingPeriodStart string  `json:"billingPeriodStart"`
	}
	var tu struct {
		RemainingTokens int64 `json:"remainingTokens"`
	}
	if res[0].Thrown != "" || json.Unmarshal(res[0].Value, &cu) != nil || cu.RemainingCredits <= 0 || cu.BillingPeriodStart == "" {
		t.Errorf("getCreditUsage: %+v %s", res[0], res[0].Value)
	}
	if res[1].Thrown != "" || json.Unmarshal(res[1].Value, &tu) != nil || tu.RemainingTokens <= 0 {
		t.Errorf("getTokenUsage: %+v %s", res[1], res[1].Value)
	}

	// The gate's own refusals on a v2 route are in Firecrawl's envelope
	// too: the SDK shows the message, the status and trawl's code.
	res = firecrawlSDK(t, dev.base, "fc-not-a-trawl-key", fcCall{"scrape", []any{page}})
	if r := res[0]; r.Status == nil || *r.Status != 401 || !strings.Contains(r.Thrown, "key") || r.Code == nil || *r.Code != "unauthorized" {
		t.Errorf("a wrong key: %+v (code %v)", r, r.Code)
	}
	resp, err := http.Post(dev.base+"/v2/scrape", "application/json", strings.NewReader(`{"url":"`+page+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var env struct {
		Success *bool  `json:"success"`
		Error   string `json:"error"`
		Code    string `json:"code"`
	}
	if json.Unmarshal(b, &env) != nil || env.Success == nil || *env.Success || env.Error == "" || env.Code != "unauthorized" {
		t.Errorf("no key on /v2/scrape: %d %s", resp.StatusCode, b)
	}
}

func deref(p *int) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}

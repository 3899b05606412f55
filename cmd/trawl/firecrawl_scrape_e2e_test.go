package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/internal/browsertest"
)

// Issue 30's parts of POST /v2/scrape through Firecrawl's SDK against
// `trawl dev` with a browser: the caller's headers, page actions, a PDF,
// and an action whose element never appears.
func TestFirecrawlSDKScrapeHeadersActionsPDF(t *testing.T) {
	browsertest.Require(t)
	pdf, err := os.ReadFile("../../cell/content/pdftext/testdata/kettles.pdf")
	if err != nil {
		t.Fatal(err)
	}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/report.pdf":
			w.Header().Set("Content-Type", "application/pdf")
			w.Write(pdf)
			return
		case "/favicon.ico":
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!DOCTYPE html><html><head><title>Tea search</title></head><body><main><h1>Tea search</h1>
<p>Green tea wants two to three minutes in water just off the boil, black tea four to five minutes at a full boil.
Oolong sits between them: three to four minutes, and it can be steeped again several times over, each steep a little longer.</p>
<p>Request traced as %s.</p>
<input id="q"><button id="go" onclick="document.getElementById('out').textContent = 'You searched for ' + document.getElementById('q').value">Search</button>
<p id="out">Nothing searched yet.</p></main></body></html>`, r.Header.Get("X-Trace"))
	}))
	defer site.Close()
	dev := startDev(t, "--browsers", "1")

	res := firecrawlSDK(t, dev.base, e2eKey,
		fcCall{"scrape", []any{site.URL + "/traced", map[string]any{"headers": map[string]any{"X-Trace": "sdk-42"}}}},
		fcCall{"scrape", []any{site.URL + "/search", map[string]any{"actions": []any{
			map[string]any{"type": "click", "selector": "#q"},
			map[string]any{"type": "write", "text": "oolong"},
			map[string]any{"type": "click", "selector": "#go"},
			map[string]any{"type": "executeJavascript", "script": "return document.getElementById('out').textContent"},
			map[string]any{"type": "screenshot"},
		}}}},
		fcCall{"scrape", []any{site.URL + "/report.pdf"}},
		fcCall{"scrape", []any{site.URL + "/search", map[string]any{"timeout": 8000, "actions": []any{
			map[string]any{"type": "wait", "selector": "#never"},
		}}}},
		fcCall{"scrape", []any{site.URL + "/traced", map[string]any{"headers": map[string]any{"Host": "other.example"}}}},
	)
	if len(res) != 5 {
		t.Fatalf("results: %+v", res)
	}
	type doc struct {
		Markdown string         `json:"markdown"`
		Metadata map[string]any `json:"metadata"`
		Actions  *struct {
			Screenshots       []string `json:"screenshots"`
			Scrapes           []any    `json:"scrapes"`
			JavascriptReturns []struct {
				Type  string `json:"type"`
				Value any    `json:"value"`
			} `json:"javascriptReturns"`
			PDFs []string `json:"pdfs"`
		} `json:"actions"`
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

	if d := get(0); !strings.Contains(d.Markdown, "Request traced as sdk-42") || d.Metadata["cacheState"] != "miss" {
		t.Errorf("headers: %s %v", d.Markdown, d.Metadata)
	}
	d := get(1)
	if !strings.Contains(d.Markdown, "You searched for oolong") || d.Actions == nil {
		t.Fatalf("actions: %+v", d)
	}
	a := d.Actions
	if len(a.JavascriptReturns) != 1 || a.JavascriptReturns[0].Type != "string" || a.JavascriptReturns[0].Value != "You searched for oolong" {
		t.Errorf("javascriptReturns %+v", a.JavascriptReturns)
	}
	if len(a.Screenshots) != 1 || !strings.HasPrefix(a.Screenshots[0], "data:image/png;base64,") || a.Scrapes == nil || a.PDFs == nil {
		t.Errorf("actions: %d screenshots, scrapes %v, pdfs %v", len(a.Screenshots), a.Scrapes, a.PDFs)
	}
	d = get(2)
	if !strings.Contains(d.Markdown, "The glass kettle took six and a half minutes.") || d.Metadata["numPages"] != 2.0 ||
		d.Metadata["contentType"] != "application/pdf" || d.Metadata["title"] != "Kettle Report" {
		t.Errorf("PDF: %s %v", d.Markdown, d.Metadata)
	}
	if r := res[3]; r.Status == nil || *r.Status != 500 || r.Code == nil || *r.Code != "SCRAPE_ACTION_ERROR" || !strings.Contains(r.Thrown, "#never") {
		t.Errorf("a missing selector: %+v (status %s)", r, deref(r.Status))
	}
	if r := res[4]; r.Status == nil || *r.Status != 400 || r.Code == nil || *r.Code != "BAD_REQUEST" || !strings.Contains(r.Thrown, "Host") {
		t.Errorf("a Host header: %+v (status %s)", r, deref(r.Status))
	}

	// Billed as a browser scrape: the receipt of an actions scrape costs
	// the browser level's price, more than the same page's plain scrape.
	cost := func(body string) float64 {
		t.Helper()
		a := gateCall(t, "POST", dev.base+"/v2/scrape", body)
		c, err := strconv.ParseFloat(a.header.Get("X-Svc-Cost"), 64)
		if a.status != 200 || err != nil || a.header.Get("X-Svc-Receipt") == "" {
			t.Fatalf("%s: %d cost %q: %s", body, a.status, a.header.Get("X-Svc-Cost"), a.body)
		}
		return c
	}
	plain := cost(`{"url":"` + site.URL + `/plain","maxAge":0}`)
	acted := cost(`{"url":"` + site.URL + `/acted","actions":[{"type":"scrape"}]}`)
	if plain <= 0 || acted <= plain {
		t.Errorf("an actions scrape cost %.3f, a plain one %.3f: want the browser level's higher price", acted, plain)
	}
}

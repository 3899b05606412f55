package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/llm/llmtest"
	"github.com/trawlhq/trawl/internal/testwait"
)

// Firecrawl's extract through its JS SDK against `trawl dev`: the
// extraction is a job of the cell, free to start; each page extracted is
// charged in the background (the gate collects the cell's charges), and
// the status the SDK waits for is completed once they are: its
// creditsUsed is what the usage history charged, its tokensUsed the
// model tokens of those charges.

// fcTentPage is a product page whose JSON-LD the default extractor reads.
func fcTentPage(name, price, availability string) string {
	return `<!DOCTYPE html><html lang="en"><head><title>` + name + ` | Tent Shop</title>
<script type="application/ld+json">{"@context":"https://schema.org","@type":"Product","name":"` + name + `",
"offers":{"@type":"Offer","price":"` + price + `","priceCurrency":"EUR","availability":"https://schema.org/` + availability + `"}}</script>
</head><body><main><h1>` + name + `</h1><p>A tent from the Tent Shop, pitched in minutes.</p></main></body></html>`
}

func fcTentSite(t *testing.T) *httptest.Server {
	t.Helper()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		switch r.URL.Path {
		case "/ridge":
			io.WriteString(w, fcTentPage("Ridge Tent", "199.00", "InStock"))
		case "/dome":
			io.WriteString(w, fcTentPage("Dome Tent", "149.00", "OutOfStock"))
		default:
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `<html><body><main><h1>Not found</h1></main></body></html>`)
		}
	}))
	t.Cleanup(site.Close)
	return site
}

type fcExtractStatus struct {
	Success     bool                `json:"success"`
	ID          string              `json:"id"`
	Status      string              `json:"status"`
	Data        json.RawMessage     `json:"data"`
	Error       string              `json:"error"`
	Warning     string              `json:"warning"`
	ExpiresAt   string              `json:"expiresAt"`
	TokensUsed  int                 `json:"tokensUsed"`
	CreditsUsed float64             `json:"creditsUsed"`
	Sources     map[string][]string `json:"sources"`
	InvalidURLs []string            `json:"invalidURLs"`
}

// fcValue decodes an SDK call's value into v, failing the test if the
// call threw.
func fcValue(t *testing.T, r fcResult, v any) {
	t.Helper()
	if r.Thrown != "" {
		t.Fatalf("%s threw: %s (status %v)", r.Method, r.Thrown, deref(r.Status))
	}
	if err := json.Unmarshal(r.Value, v); err != nil {
		t.Fatalf("%s: %v: %s", r.Method, err, r.Value)
	}
}

// extractCharged is the usage history's extract lines of the pages
// (background charges name their page): the credits and tokens charged.
func extractCharged(t *testing.T, dev *proc, pages ...string) (credits float64, tokens int, lines int) {
	t.Helper()
	a := gateCall(t, "GET", dev.base+"/v1/billing/usage", "")
	var h struct {
		Lines []struct {
			Call      string `json:"call"`
			URL       string `json:"url"`
			Units     string `json:"units"`
			Receipt   string `json:"receipt"`
			LLMTokens struct {
				In  int `json:"in"`
				Out int `json:"out"`
			} `json:"llm_tokens"`
		} `json:"lines"`
	}
	if err := json.Unmarshal(a.body, &h); a.status != 200 || err != nil {
		t.Fatalf("usage: %d %v %s", a.status, err, a.body)
	}
	for _, l := range h.Lines {
		for _, p := range pages {
			if l.Call == "extract" && l.URL == p {
				var u float64
				fmt.Sscanf(l.Units, "%g", &u)
				credits += u
				tokens += l.LLMTokens.In + l.LLMTokens.Out
				lines++
			}
		}
	}
	return credits, tokens, lines
}

// fcBalance is the account's balance as the gate answers it (what is
// spent is taken from it at once).
func fcBalance(t *testing.T, dev *proc) float64 {
	t.Helper()
	a := gateCall(t, "GET", dev.base+"/v1/billing/balance", "")
	var b struct{ Balance string }
	if err := json.Unmarshal(a.body, &b); a.status != 200 || err != nil {
		t.Fatalf("balance: %d %v %s", a.status, err, a.body)
	}
	var v float64
	fmt.Sscanf(b.Balance, "%g", &v)
	return v
}

func TestFirecrawlExtractSDK(t *testing.T) {
	site := fcTentSite(t)
	dev := startMCPDev(t)
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"name": map[string]any{"type": "string"}, "price": map[string]any{"type": "number"},
		"currency": map[string]any{"type": "string"}, "in_stock": map[string]any{"type": "boolean"}}}
	ridge, dome := site.URL+"/ridge", site.URL+"/dome"

	// extract: start, then poll until completed; the first page's values
	// win, sources name where each came from.
	before := fcBalance(t, dev)
	res := firecrawlSDK(t, dev.base, e2eKey, fcCall{"extract", []any{map[string]any{
		"urls": []string{ridge, dome, site.URL + "/gone", "not a url"}, "schema": schema, "showSources": true,
		"pollInterval": 1, "timeout": 120}}})
	var x fcExtractStatus
	fcValue(t, res[0], &x)
	if x.Status != "completed" || !x.Success || x.ExpiresAt == "" || x.TokensUsed != 0 {
		t.Fatalf("extract: %s", res[0].Value)
	}
	// (The schema went as a Go map, its keys in sorted order: the
	// data's members come in the schema's order.)
	if string(x.Data) != `{"currency":"EUR","in_stock":true,"name":"Ridge Tent","price":199}` {
		t.Errorf("data %s", x.Data)
	}
	if fmt.Sprint(x.Sources["name"]) != fmt.Sprint([]string{ridge}) || len(x.Sources["currency"]) != 2 {
		t.Errorf("sources %v", x.Sources)
	}
	if !strings.Contains(x.Warning, site.URL+"/gone") {
		t.Errorf("warning %q", x.Warning)
	}
	// Charged: one extract line per page extracted (the 404 page is
	// free), their credits the answer's creditsUsed, taken from the
	// balance.
	credits, _, n := extractCharged(t, dev, ridge, dome, site.URL+"/gone")
	if n != 2 || credits != 2 || x.CreditsUsed != credits {
		t.Errorf("charged %g credits in %d lines; the answer says %g", credits, n, x.CreditsUsed)
	}
	if after := fcBalance(t, dev); before-after != 2 {
		t.Errorf("balance %g → %g", before, after)
	}

	// startExtract and getExtractStatus: processing, then completed.
	res = firecrawlSDK(t, dev.base, e2eKey, fcCall{"startExtract", []any{map[string]any{
		"urls": []string{dome}, "prompt": "the name and the price", "ignoreInvalidURLs": true}}})
	var started fcExtractStatus
	fcValue(t, res[0], &started)
	if !started.Success || !strings.HasPrefix(started.ID, "j_eu.") {
		t.Fatalf("startExtract: %s", res[0].Value)
	}
	var last fcExtractStatus
	testwait.Until(t, 60*time.Second, "the extraction done", func() bool {
		fcValue(t, firecrawlSDK(t, dev.base, e2eKey, fcCall{"getExtractStatus", []any{started.ID}})[0], &last)
		if last.Status == "processing" && string(last.Data) != "[]" {
			t.Errorf("data while processing: %s", last.Data)
		}
		return last.Status != "processing"
	})
	// The page was extracted a minute ago: it is read from trawl's
	// archive, charged at the archive's price (50 %), as POST /v2/scrape
	// would charge it.
	if last.Status != "completed" || !strings.Contains(string(last.Data), `"name":"Dome Tent"`) || !strings.Contains(string(last.Data), `"price":149`) || last.CreditsUsed != 0.5 {
		t.Errorf("getExtractStatus: %+v %s", last, last.Data)
	}
	if credits, _, n := extractCharged(t, dev, dome); n != 2 || credits != 1.5 {
		t.Errorf("the page charged %g credits in %d lines", credits, n)
	}

	// Refusals reach the SDK as its errors; another id is a 404.
	res = firecrawlSDK(t, dev.base, e2eKey,
		fcCall{"extract", []any{map[string]any{"urls": []string{ridge}, "prompt": "the price", "enableWebSearch": true}}},
		fcCall{"startExtract", []any{map[string]any{"prompt": "the cheapest tent on the web"}}},
		fcCall{"startExtract", []any{map[string]any{"urls": []string{ridge}, "schema": schema, "agent": map[string]any{"model": "FIRE-1"}}}},
		fcCall{"getExtractStatus", []any{"j_eu.c1.00000000000000000000"}},
	)
	for i, r := range res[:3] {
		if r.Thrown == "" || r.Status == nil || *r.Status != 400 || r.Code == nil || *r.Code != "UNSUPPORTED_FEATURE" {
			t.Errorf("call %d: want a thrown 400 UNSUPPORTED_FEATURE, got %+v", i, r)
		}
	}
	if r := res[3]; r.Thrown == "" || r.Status == nil || *r.Status != 404 {
		t.Errorf("an unknown extraction: %+v", r)
	}
}

// With the operator's model (`trawl dev --llm-provider` on a scripted
// model server): the tokens of every page are charged with it, and the
// answer's tokensUsed and creditsUsed are what the usage history says.
func TestFirecrawlExtractModelSDK(t *testing.T) {
	site := fcTentSite(t)
	srv := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) {
		name := "Dome Tent"
		if strings.Contains(r.Body.Messages[len(r.Body.Messages)-1].Content, "Ridge Tent") {
			name = "Ridge Tent"
		}
		llmtest.CompletionUsage(w, `{"data":{"tents":[{"name":"`+name+`"}]}}`, 6000, 100)
	})
	dev := startDev(t, "--llm-provider", "test/tiny-1", "--llm-base-url", "test="+srv.URL+"/v1")
	ridge, dome := site.URL+"/ridge", site.URL+"/dome"
	res := firecrawlSDK(t, dev.base, e2eKey, fcCall{"extract", []any{map[string]any{
		"urls": []string{ridge, dome}, "prompt": "every tent's name", "systemPrompt": "Names as the page writes them.",
		"schema": map[string]any{"type": "object", "properties": map[string]any{"tents": map[string]any{"type": "array",
			"items": map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}}}},
		"pollInterval": 1, "timeout": 120}}})
	var x fcExtractStatus
	fcValue(t, res[0], &x)
	if x.Status != "completed" || string(x.Data) != `{"tents":[{"name":"Ridge Tent"},{"name":"Dome Tent"}]}` || x.TokensUsed != 2*6100 {
		t.Fatalf("extract: %s", res[0].Value)
	}
	if srv.Calls() != 2 || !strings.Contains(srv.Requests()[0].Body.Messages[1].Content, "Names as the page writes them.") {
		t.Errorf("%d model calls; first %+v", srv.Calls(), srv.Requests()[0].Body.Messages)
	}
	// Each page: 1 (the page, light) + 2 × 0.5 (6,000 input tokens) + 2
	// (100 output tokens) = 4 credits.
	credits, tokens, n := extractCharged(t, dev, ridge, dome)
	if n != 2 || credits != 8 || tokens != x.TokensUsed || x.CreditsUsed != credits {
		t.Errorf("charged %g credits and %d tokens in %d lines; the answer says %g and %d", credits, tokens, n, x.CreditsUsed, x.TokensUsed)
	}
}

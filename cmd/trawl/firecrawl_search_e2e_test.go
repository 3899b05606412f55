package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Firecrawl's JS SDK's search against `trawl dev`: the SDK reads trawl's
// POST /v2/search answer and its refusals, and the gate bills the call as
// one GET /search. The index of a fresh `trawl dev` is empty here: pages
// scraped through it were not found by GET /search either within 30 s
// (to be looked into), so this test checks the shape on an empty result
// and gate/search's test checks results, limit and news.
func TestFirecrawlSearchAgainstDev(t *testing.T) {
	dev := startMCPDev(t)

	res := firecrawlSDK(t, dev.base, e2eKey,
		fcCall{"search", []any{"query words", map[string]any{"limit": 3}}},
		fcCall{"search", []any{"query words", map[string]any{"sources": []any{"images"}}}},
		fcCall{"search", []any{"query words", map[string]any{"tbs": "qdr:d"}}},
		fcCall{"search", []any{"query words", map[string]any{"limit": 101}}},
	)
	if len(res) != 4 {
		t.Fatalf("results: %+v", res)
	}
	if r := res[0]; r.Thrown != "" {
		t.Fatalf("search threw: %s (status %v)", r.Thrown, deref(r.Status))
	}
	var v struct{ Web []any }
	if err := json.Unmarshal(res[0].Value, &v); err != nil || v.Web == nil {
		t.Errorf("search: want web: [], got %s (%v)", res[0].Value, err)
	}
	for i, code := range []string{"UNSUPPORTED_FEATURE", "UNSUPPORTED_FEATURE", "BAD_REQUEST"} {
		r := res[1+i]
		if r.Thrown == "" || r.Status == nil || *r.Status != 400 || r.Code == nil || *r.Code != code {
			t.Errorf("call %d: want a thrown 400 %s, got %+v", 1+i, code, r)
		}
	}

	// The price is GET /search's: a new query each, both searched live.
	cost := func(method, path, body string) string {
		t.Helper()
		req, _ := http.NewRequest(method, dev.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e2eKey)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return resp.Header.Get("X-Svc-Cost")
	}
	native := cost("GET", "/search?q="+url.QueryEscape("kettle spout"), "")
	v2 := cost("POST", "/v2/search", `{"query":"kettle water"}`)
	if native == "" || v2 != native {
		t.Errorf("POST /v2/search costs %q, GET /search %q", v2, native)
	}
}

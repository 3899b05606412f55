package firecrawl

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func compileExtract(t *testing.T, body string) (*ExtractPlan, error) {
	t.Helper()
	var x ExtractRequest
	if err := json.Unmarshal([]byte(body), &x); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return x.Compile()
}

// The SDK's startExtract body as it sends it: Firecrawl's defaults where
// the caller set nothing, the keys trawl does not know ignored.
func TestExtractCompileDefaults(t *testing.T) {
	p, err := compileExtract(t, `{"urls":["https://a.example/x","https://b.example/*"],"prompt":"the price",
		"origin":"js-sdk@4.42.0","integration":"test","urlTrace":false,"__experimental_cacheMode":"direct","threatProtection":{"mode":"off"}}`)
	if err != nil {
		t.Fatal(err)
	}
	if p.Limit != ExtractWildcardPages || !p.Subdomains || !p.Sitemap || !p.Ignore || p.Sources || p.Prompt != "the price" || p.Schema != nil {
		t.Errorf("defaults: %+v", p)
	}
	want := []ExtractURL{{0, "https://a.example/x", "https://a.example/x", false}, {1, "https://b.example/*", "https://b.example", true}}
	if !slices.Equal(p.URLs, want) {
		t.Errorf("urls %+v", p.URLs)
	}
	// Firecrawl's scrapeOptions default for an extraction: the whole page.
	if p.Plan.MainOnly || !p.Plan.Markdown || p.Options.OnlyMainContent == nil || *p.Options.OnlyMainContent {
		t.Errorf("scrape options %+v", p.Plan)
	}
}

func TestExtractCompileFields(t *testing.T) {
	tests := []struct {
		body  string
		check func(p *ExtractPlan) bool
	}{
		{`{"urls":["http://a/"],"schema":{"type":"object"}}`, func(p *ExtractPlan) bool { return string(p.Schema) == `{"type":"object"}` }},
		{`{"urls":["http://a/"],"prompt":"x","schema":null}`, func(p *ExtractPlan) bool { return p.Schema == nil }},
		{`{"urls":["http://a/"],"prompt":"x","showSources":true}`, func(p *ExtractPlan) bool { return p.Sources }},
		{`{"urls":["http://a/"],"prompt":"x","__experimental_showSources":true}`, func(p *ExtractPlan) bool { return p.Sources }},
		{`{"urls":["http://a/"],"prompt":"x","limit":3,"includeSubdomains":false,"ignoreSitemap":true}`, func(p *ExtractPlan) bool {
			return p.Limit == 3 && !p.Subdomains && !p.Sitemap
		}},
		{`{"urls":["http://a/"],"prompt":"x","ignoreInvalidURLs":false}`, func(p *ExtractPlan) bool { return !p.Ignore }},
		{`{"urls":["http://a/"],"prompt":"x","systemPrompt":"  be terse "}`, func(p *ExtractPlan) bool { return p.SystemPrompt == "be terse" }},
		{`{"urls":["http://a/"],"prompt":"x","scrapeOptions":{"onlyMainContent":true,"formats":["screenshot","changeTracking"]}}`, func(p *ExtractPlan) bool {
			// formats have no effect (and are not refused); the rest is honoured
			return p.Plan.MainOnly && !p.Plan.Screenshot && len(p.Options.Formats) == 1 && p.Options.Formats[0].Type == "markdown"
		}},
		{`{"urls":["http://a/"],"prompt":"x","scrapeOptions":{"proxy":"stealth","timeout":5000}}`, func(p *ExtractPlan) bool {
			return p.Plan.Options.Proxy == "residential" && p.Plan.Timeout.Seconds() == 5
		}},
		{`{"urls":["http://a/"],"prompt":"x","allowExternalLinks":false,"enableWebSearch":false,"agent":null,"webhook":null,"timeout":60}`, func(p *ExtractPlan) bool { return true }},
	}
	for _, tt := range tests {
		p, err := compileExtract(t, tt.body)
		if err != nil {
			t.Errorf("%s: %v", tt.body, err)
			continue
		}
		if !tt.check(p) {
			t.Errorf("%s: %+v", tt.body, p)
		}
	}
}

// What Firecrawl refuses is BAD_REQUEST naming the field; what trawl
// cannot honour is UNSUPPORTED_FEATURE naming it.
func TestExtractCompileRefusals(t *testing.T) {
	ok := `"urls":["http://a/"],"prompt":"x"`
	long := strings.Repeat("é", extractMaxPrompt+1)
	tests := []struct{ body, code, path string }{
		{`{}`, CodeBadRequest, "urls"},
		{`{"prompt":"the prices of tents"}`, CodeUnsupported, "urls"},
		{`{"urls":[` + strings.Repeat(`"http://a/",`, ExtractMaxURLs) + `"http://a/"],"prompt":"x"}`, CodeBadRequest, "urls"},
		{`{"urls":["http://a/"]}`, CodeUnsupported, "schema"},
		{`{"urls":["http://a/"],"schema":[1]}`, CodeBadRequest, "schema"},
		{`{"urls":["http://a/"],"prompt":"` + long + `"}`, CodeBadRequest, "prompt"},
		{`{` + ok + `,"systemPrompt":"` + long + `"}`, CodeBadRequest, "systemPrompt"},
		{`{` + ok + `,"limit":0}`, CodeBadRequest, "limit"},
		{`{` + ok + `,"limit":101}`, CodeBadRequest, "limit"},
		{`{` + ok + `,"timeout":0}`, CodeBadRequest, "timeout"},
		{`{` + ok + `,"enableWebSearch":true}`, CodeUnsupported, "enableWebSearch"},
		{`{` + ok + `,"allowExternalLinks":true}`, CodeUnsupported, "allowExternalLinks"},
		{`{` + ok + `,"agent":{"model":"FIRE-1"}}`, CodeUnsupported, "agent"},
		{`{` + ok + `,"webhook":"https://hooks.example/x"}`, CodeUnsupported, "webhook"},
		{`{` + ok + `,"threatProtection":{"mode":"normal"}}`, CodeUnsupported, "threatProtection.mode"},
		{`{` + ok + `,"__experimental_streamSteps":true}`, CodeUnsupported, "__experimental_streamSteps"},
		{`{` + ok + `,"__experimental_llmUsage":true}`, CodeUnsupported, "__experimental_llmUsage"},
		{`{` + ok + `,"__experimental_showCostTracking":true}`, CodeUnsupported, "__experimental_showCostTracking"},
		{`{` + ok + `,"__experimental_cacheKey":"k"}`, CodeUnsupported, "__experimental_cacheKey"},
		{`{` + ok + `,"__experimental_cacheMode":"load"}`, CodeUnsupported, "__experimental_cacheMode"},
		{`{` + ok + `,"scrapeOptions":{"lockdown":true}}`, CodeUnsupported, "scrapeOptions.lockdown"},
		{`{` + ok + `,"scrapeOptions":{"proxy":"carrier-pigeon"}}`, CodeBadRequest, "scrapeOptions.proxy"},
	}
	for _, tt := range tests {
		_, err := compileExtract(t, tt.body)
		var fe *Error
		if !errors.As(err, &fe) {
			t.Errorf("%.80s: %v, want %s", tt.body, err, tt.code)
			continue
		}
		path := strings.Join(fe.Details.([]map[string]any)[0]["path"].([]string), ".")
		if fe.Status != 400 || fe.Code != tt.code || path != tt.path {
			t.Errorf("%.80s: %d %s at %q (%s), want %s at %q", tt.body, fe.Status, fe.Code, path, fe.Message, tt.code, tt.path)
		}
	}
}

// The merge rule on the fixtures of testdata/extract_merge: each case's
// parts (in the order of the request's URLs) and the data and sources
// they merge into.
func TestMergeExtract(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "extract_merge.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name    string              `json:"name"`
		Parts   []ExtractPart       `json:"parts"`
		Data    json.RawMessage     `json:"data"`
		Sources map[string][]string `json:"sources"`
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			data, sources, err := MergeExtract(c.Parts)
			if err != nil {
				t.Fatal(err)
			}
			var want any
			json.Unmarshal(c.Data, &want)
			if !sameJSON(data, want) {
				got, _ := json.Marshal(data)
				t.Errorf("data %s, want %s", got, c.Data)
			}
			if c.Sources == nil {
				c.Sources = map[string][]string{}
			}
			if fmt.Sprint(sources) != fmt.Sprint(c.Sources) {
				t.Errorf("sources %v, want %v", sources, c.Sources)
			}
			// The parts are not changed by the merge.
			again, _, _ := MergeExtract(c.Parts)
			if !sameJSON(again, data) {
				t.Errorf("a second merge differs")
			}
		})
	}
}

func TestMergeExtractBadPart(t *testing.T) {
	if _, _, err := MergeExtract([]ExtractPart{{URL: "http://a/", Data: json.RawMessage(`{"a":`)}}); err == nil {
		t.Error("a part that is not JSON merged")
	}
}

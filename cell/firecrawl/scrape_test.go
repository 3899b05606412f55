package firecrawl

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"
)

func compile(t *testing.T, body string) (*Plan, error) {
	t.Helper()
	var o ScrapeOptions
	if err := json.Unmarshal([]byte(body), &o); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return o.Compile("")
}

func TestCompileDefaults(t *testing.T) {
	p, err := compile(t, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Markdown || p.HTML || p.RawHTML || !p.MainOnly || !p.Store || p.MaxAge != DefaultMaxAge || p.Reprocess() {
		t.Errorf("defaults: %+v", p)
	}
	if p.Options.BypassCache || p.Options.NoStore || p.Options.NeedsBrowser() || !p.Options.Parse.Metadata {
		t.Errorf("native defaults: %+v", p.Options)
	}
}

func TestCompileTranslates(t *testing.T) {
	tests := []struct {
		body  string
		check func(p *Plan) bool
	}{
		{`{"formats":["html",{"type":"rawHtml"},"links","images"]}`, func(p *Plan) bool {
			return !p.Markdown && p.HTML && p.RawHTML && p.Links && p.Images && p.Options.Parse.Links && p.Options.Parse.Media && p.Reprocess()
		}},
		{`{"formats":[{"type":"screenshot","fullPage":true}]}`, func(p *Plan) bool { return p.Screenshot && p.Options.Screenshot }},
		{`{"formats":[{"type":"json","prompt":"the price"}]}`, func(p *Plan) bool { return p.JSON != nil && p.JSON.Prompt == "the price" }},
		{`{"onlyMainContent":false}`, func(p *Plan) bool { return !p.MainOnly && p.Reprocess() }},
		{`{"waitFor":1500}`, func(p *Plan) bool { return p.Options.WaitFor == "js:performance.now() >= 1500" }},
		{`{"timeout":5000}`, func(p *Plan) bool { return p.Timeout == 5*time.Second }},
		{`{"mobile":true}`, func(p *Plan) bool { return p.Options.Viewport.Width == 390 }},
		{`{"proxy":"stealth"}`, func(p *Plan) bool { return p.Options.Proxy == "residential" }},
		{`{"location":{"country":"DE"}}`, func(p *Plan) bool { return p.Options.Country == "de" && p.Options.Proxy == "residential" }},
		{`{"location":{"country":"US"}}`, func(p *Plan) bool { return p.Options.Country == "" }},
		{`{"maxAge":0}`, func(p *Plan) bool { return p.MaxAge == 0 && p.Options.BypassCache }},
		{`{"storeInCache":false}`, func(p *Plan) bool { return !p.Store && p.Options.NoStore }},
		{`{"parsers":["pdf",{"type":"image"}],"blockAds":true,"origin":"sdk"}`, func(p *Plan) bool { return p.Markdown }},
	}
	for _, tt := range tests {
		p, err := compile(t, tt.body)
		if err != nil {
			t.Errorf("%s: %v", tt.body, err)
			continue
		}
		if !tt.check(p) {
			t.Errorf("%s: %+v (options %+v)", tt.body, p, p.Options)
		}
	}
}

func TestCompileRefuses(t *testing.T) {
	tests := []struct{ body, code string }{
		{`{"formats":["markdown","markdown"]}`, CodeBadRequest},
		{`{"formats":["nope"]}`, CodeBadRequest},
		{`{"formats":[{"type":"json"}]}`, CodeBadRequest},
		{`{"formats":[{"type":"screenshot","fullPage":false}]}`, CodeUnsupported},
		{`{"formats":["branding"]}`, CodeUnsupported},
		{`{"includeTags":["a[["]}`, CodeBadRequest},
		{`{"timeout":10}`, CodeBadRequest},
		{`{"waitFor":-1}`, CodeBadRequest},
		{`{"proxy":"teleport"}`, CodeBadRequest},
		{`{"location":{"country":"Germany"}}`, CodeBadRequest},
		{`{"location":{"languages":["de"]}}`, CodeUnsupported},
		{`{"headers":{"A":"b"}}`, CodeUnsupported},
		{`{"actions":[{"type":"click","selector":"a"}]}`, CodeUnsupported},
		{`{"skipTlsVerification":true}`, CodeUnsupported},
		{`{"maxAge":-5}`, CodeBadRequest},
		{`{"parsers":["ocr-magic"]}`, CodeBadRequest},
	}
	for _, tt := range tests {
		_, err := compile(t, tt.body)
		var fe *Error
		if !errors.As(err, &fe) || fe.Code != tt.code || fe.Status != http.StatusBadRequest || fe.Message == "" {
			t.Errorf("%s: %v, want %s", tt.body, err, tt.code)
		}
	}
}

func TestOgName(t *testing.T) {
	for in, want := range map[string]string{"og:title": "ogTitle", "og:site_name": "ogSiteName", "og:locale:alternate": "ogLocaleAlternate", "og:image": "ogImage"} {
		if got := ogName(in); got != want {
			t.Errorf("ogName(%q) = %q, want %q", in, got, want)
		}
	}
}

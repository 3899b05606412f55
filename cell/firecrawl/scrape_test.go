package firecrawl

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/scrape"
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
		{`{"parsers":["pdf",{"type":"image"}],"blockAds":true,"origin":"sdk"}`, func(p *Plan) bool { return p.Markdown && !p.Options.PDF.Skip }},
		{`{}`, func(p *Plan) bool { return !p.Options.PDF.Skip && p.Options.Shared() }},
		{`{"parsers":[]}`, func(p *Plan) bool { return p.Options.PDF.Skip }},
		{`{"parsers":["image"]}`, func(p *Plan) bool { return p.Options.PDF.Skip }},
		{`{"parsers":[{"type":"pdf","mode":"fast","maxPages":3,"pageMarkers":true}]}`, func(p *Plan) bool {
			return p.Options.PDF == scrape.PDFOptions{MaxPages: 3, PageMarkers: true}
		}},
		// Headers: sent by the engines, and the page is the caller's own
		// (neither served from nor written to the cache or the archive).
		{`{"headers":{"x-trace":"abc","Authorization":"Bearer t"},"storeInCache":true}`, func(p *Plan) bool {
			return p.Options.Header.Get("X-Trace") == "abc" && p.Options.Header.Get("Authorization") == "Bearer t" &&
				!p.Store && p.Options.NoStore && !p.Options.Shared() && !p.Options.NeedsBrowser()
		}},
		{`{"actions":[{"type":"wait","milliseconds":500},{"type":"wait","selector":"#a"},{"type":"click","selector":".more","all":true},
			{"type":"write","text":"tea"},{"type":"press","key":"Enter"},{"type":"scroll","direction":"up","selector":"main"},{"type":"scroll"},
			{"type":"screenshot","fullPage":true,"quality":80},{"type":"executeJavascript","script":"return 1"},{"type":"scrape"}]}`, func(p *Plan) bool {
			a := p.Options.Actions
			return p.Actions && len(a) == 10 && p.Options.NeedsBrowser() && !p.Store && !p.Options.Shared() &&
				a[0] == fetch.Action{Type: "wait", Wait: 500 * time.Millisecond} && a[1] == fetch.Action{Type: "wait", Selector: "#a"} &&
				a[2] == fetch.Action{Type: "click", Selector: ".more", All: true} && a[3].Text == "tea" && a[4].Key == "Enter" &&
				a[5] == fetch.Action{Type: "scroll", Up: true, Selector: "main"} && a[6] == fetch.Action{Type: "scroll"} &&
				a[7] == fetch.Action{Type: "screenshot", FullPage: true, Quality: 80} && a[8].Script == "return 1" && a[9].Type == "scrape"
		}},
		{`{"waitFor":1000,"timeout":5000,"actions":[{"type":"wait","milliseconds":3000}]}`, func(p *Plan) bool { return len(p.Options.Actions) == 1 }},
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

// A refusal names the field at fault by its path, as the client wrote it.
func TestCompileRefusesHeadersActionsParsers(t *testing.T) {
	tests := []struct {
		body, code string
		path       []string
	}{
		{`{"headers":{"Host":"evil.example"}}`, CodeBadRequest, []string{"headers", "Host"}},
		{`{"headers":{"content-length":"5"}}`, CodeBadRequest, []string{"headers", "content-length"}},
		{`{"headers":{"Transfer-Encoding":"chunked"}}`, CodeBadRequest, []string{"headers", "Transfer-Encoding"}},
		{`{"headers":{"Connection":"close"}}`, CodeBadRequest, []string{"headers", "Connection"}},
		{`{"headers":{"Proxy-Authorization":"Basic x"}}`, CodeBadRequest, []string{"headers", "Proxy-Authorization"}},
		{`{"headers":{"Upgrade":"h2c"}}`, CodeBadRequest, []string{"headers", "Upgrade"}},
		{`{"headers":{"TE":"trailers"}}`, CodeBadRequest, []string{"headers", "TE"}},
		{`{"headers":{"Trailer":"x"}}`, CodeBadRequest, []string{"headers", "Trailer"}},
		{`{"headers":{"Keep-Alive":"300"}}`, CodeBadRequest, []string{"headers", "Keep-Alive"}},
		{`{"headers":{"Accept-Encoding":"gzip"}}`, CodeBadRequest, []string{"headers", "Accept-Encoding"}},
		{`{"headers":{"bad name":"x"}}`, CodeBadRequest, []string{"headers", "bad name"}},
		{`{"headers":{"X-A":"line\r\nX-Injected: 1"}}`, CodeBadRequest, []string{"headers", "X-A"}},
		{`{"headers":{"X-A":"1","x-a":"2"}}`, CodeBadRequest, []string{"headers", "x-a"}},
		{`{"headers":{"X-Big":"` + strings.Repeat("a", 17<<10) + `"}}`, CodeBadRequest, []string{"headers"}},
		{`{"headers":` + manyHeaders(51) + `}`, CodeBadRequest, []string{"headers"}},
		{`{"actions":[{"type":"teleport"}]}`, CodeBadRequest, []string{"actions", "0", "type"}},
		{`{"actions":[{"milliseconds":5}]}`, CodeBadRequest, []string{"actions", "0", "type"}},
		{`{"actions":["click"]}`, CodeBadRequest, []string{"actions", "0"}},
		{`{"actions":[{"type":"scrape"},{"type":"click"}]}`, CodeBadRequest, []string{"actions", "1", "selector"}},
		{`{"actions":[{"type":"click","selector":7}]}`, CodeBadRequest, []string{"actions", "0", "selector"}},
		{`{"actions":[{"type":"wait"}]}`, CodeBadRequest, []string{"actions", "0"}},
		{`{"actions":[{"type":"wait","milliseconds":10,"selector":"p"}]}`, CodeBadRequest, []string{"actions", "0"}},
		{`{"actions":[{"type":"wait","milliseconds":-1}]}`, CodeBadRequest, []string{"actions", "0", "milliseconds"}},
		{`{"actions":[{"type":"write"}]}`, CodeBadRequest, []string{"actions", "0", "text"}},
		{`{"actions":[{"type":"press","key":""}]}`, CodeBadRequest, []string{"actions", "0", "key"}},
		{`{"actions":[{"type":"scroll","direction":"left"}]}`, CodeBadRequest, []string{"actions", "0", "direction"}},
		{`{"actions":[{"type":"screenshot","quality":0}]}`, CodeBadRequest, []string{"actions", "0", "quality"}},
		{`{"actions":[{"type":"screenshot","viewport":{"width":800,"height":600}}]}`, CodeUnsupported, []string{"actions", "0", "viewport"}},
		{`{"actions":[{"type":"executeJavascript"}]}`, CodeBadRequest, []string{"actions", "0", "script"}},
		{`{"actions":[{"type":"pdf","format":"A4"}]}`, CodeUnsupported, []string{"actions", "0"}},
		{`{"actions":` + manyActions(51) + `}`, CodeBadRequest, []string{"actions"}},
		{`{"waitFor":30000,"actions":[{"type":"wait","milliseconds":30001}]}`, CodeBadRequest, []string{"actions"}},
		{`{"timeout":2000,"actions":[{"type":"wait","milliseconds":2000}]}`, CodeBadRequest, []string{"actions"}},
		{`{"parsers":[{"type":"pdf","mode":"ocr"}]}`, CodeUnsupported, []string{"parsers", "0", "mode"}},
		{`{"parsers":[{"type":"pdf","maxPages":0}]}`, CodeBadRequest, []string{"parsers", "0", "maxPages"}},
		{`{"parsers":[{"type":"pdf","blocks":true}]}`, CodeUnsupported, []string{"parsers", "0", "blocks"}},
		{`{"parsers":[7]}`, CodeBadRequest, []string{"parsers", "0"}},
	}
	for _, tt := range tests {
		_, err := compile(t, tt.body)
		var fe *Error
		if !errors.As(err, &fe) || fe.Code != tt.code || fe.Status != http.StatusBadRequest {
			t.Errorf("%.120s: %v, want %s", tt.body, err, tt.code)
			continue
		}
		d, _ := fe.Details.([]map[string]any)
		if len(d) != 1 || !slices.Equal(d[0]["path"].([]string), tt.path) {
			t.Errorf("%.120s: details %v, want path %v", tt.body, fe.Details, tt.path)
		}
	}
}

func manyHeaders(n int) string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("X-H%d", i)] = "v"
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func manyActions(n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat(`{"type":"scrape"},`, n), ",") + "]"
}

func TestOgName(t *testing.T) {
	for in, want := range map[string]string{"og:title": "ogTitle", "og:site_name": "ogSiteName", "og:locale:alternate": "ogLocaleAlternate", "og:image": "ogImage"} {
		if got := ogName(in); got != want {
			t.Errorf("ogName(%q) = %q, want %q", in, got, want)
		}
	}
}

// A batch refuses headers (its job would keep them) and actions (it is
// charged at the light level before it runs).
func TestBatchRefusesHeadersAndActions(t *testing.T) {
	for _, body := range []string{
		`{"urls":["http://a.example/"],"headers":{"Cookie":"sid=1"}}`,
		`{"urls":["http://a.example/"],"actions":[{"type":"scrape"}]}`,
	} {
		var b BatchRequest
		if err := json.Unmarshal([]byte(body), &b); err != nil {
			t.Fatal(err)
		}
		_, err := b.Compile(10)
		var fe *Error
		if !errors.As(err, &fe) || fe.Code != CodeUnsupported {
			t.Errorf("%s: %v", body, err)
		}
	}
}

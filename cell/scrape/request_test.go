package scrape

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/fetch"
)

func TestRequestDecoding(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Options
		wantErr string
	}{
		{`{"url":"http://a/"}`, Options{Format: "both", Proxy: "none"}, ""},
		{`{"url":"http://a/","parse":true}`, Options{Format: "both", Proxy: "none", Parse: ParseField{true, true, true, true}}, ""},
		{`{"url":"http://a/","parse":false}`, Options{Format: "both", Proxy: "none"}, ""},
		{`{"url":"http://a/","parse":{"links":true,"tables":true}}`, Options{Format: "both", Proxy: "none", Parse: ParseField{Links: true, Tables: true}}, ""},
		{`{"url":"http://a/","format":"md","country":"US"}`, Options{Format: "md", Proxy: "none", Country: "us"}, ""},
		{`{"url":"http://a/","parse":{"links":"yes"}}`, Options{}, "parse"},
		{`{"url":"http://a/","parse":{"pdf":true}}`, Options{}, "pdf"},
		{`{"url":"http://a/","parse":1}`, Options{}, "parse must be"},
		{`{"url":"http://a/","format":"text"}`, Options{}, "format must be"},
		{`{"url":"http://a/","proxy":"isp","country":"DE"}`, Options{Format: "both", Proxy: "isp", Country: "de"}, ""},
		{`{"url":"http://a/","proxy":"residential"}`, Options{Format: "both", Proxy: "residential"}, ""},
		{`{"url":"http://a/","proxy":"datacenter"}`, Options{}, "proxy must be one of none, isp, residential"},
		{`{"url":"http://a/","country":"u1"}`, Options{}, "country"},
		{`{"url":"http://a/","wait_for":"#main","js":"window.scrollTo(0, 1e6)","screenshot":true,"viewport":{"width":800,"height":600}}`,
			Options{Format: "both", Proxy: "none", WaitFor: "#main", JS: "window.scrollTo(0, 1e6)", Screenshot: true, Viewport: Viewport{800, 600}}, ""},
		{`{"url":"http://a/","wait_for":"js:"}`, Options{}, "wait_for must be a CSS selector"},
		{`{"url":"http://a/","wait_for":"` + strings.Repeat("a", 4097) + `"}`, Options{}, "wait_for must be at most 4096 bytes"},
		{`{"url":"http://a/","js":"` + strings.Repeat("a", 64<<10+1) + `"}`, Options{}, "js must be at most 65536 bytes"},
		{`{"url":"http://a/","viewport":{"width":100,"height":600}}`, Options{}, "viewport must have width 320 to 3840"},
		{`{"url":"http://a/","viewport":{"width":800}}`, Options{}, "viewport must have"},
		{`{"url":"http://a/","headers":{"x-trace":"1","Cookie":"sid=s"}}`, Options{Format: "both", Proxy: "none", Header: http.Header{"X-Trace": {"1"}, "Cookie": {"sid=s"}}}, ""},
		{`{"url":"http://a/","headers":{"Host":"b"}}`, Options{}, `headers: header "Host": set by trawl's engines`},
		{`{"url":"http://a/","headers":{"X":1}}`, Options{}, "cannot unmarshal"},
	} {
		var r Request
		err := json.Unmarshal([]byte(tc.in), &r)
		if err == nil {
			err = r.Normalize()
		}
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(r.Options, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.in, r.Options, tc.want)
		}
	}
}

func TestCacheKeyCoversEveryOption(t *testing.T) {
	base := Options{Format: "both", Proxy: "none"}
	seen := map[string]bool{base.cacheKey("http://a/"): true}
	for _, o := range []Options{
		{Format: "md", Proxy: "none"},
		{Format: "both", Proxy: "none", Country: "us"},
		{Format: "both", Proxy: "none", Parse: ParseField{Links: true}},
		{Format: "both", Proxy: "none", Parse: ParseField{Tables: true}},
		{Format: "both", Proxy: "isp"},
		{Format: "both", Proxy: "none", WaitFor: "h1"},
		{Format: "both", Proxy: "none", JS: "1"},
		{Format: "both", Proxy: "none", Screenshot: true},
		{Format: "both", Proxy: "none", Viewport: Viewport{800, 600}},
		{Format: "both", Proxy: "none", Viewport: Viewport{600, 800}},
		{Format: "both", Proxy: "none", Header: http.Header{"X-A": {"1"}}},
		{Format: "both", Proxy: "none", Header: http.Header{"X-A": {"2"}}},
		{Format: "both", Proxy: "none", Actions: []fetch.Action{{Type: fetch.ActionScrape}}},
		{Format: "both", Proxy: "none", Actions: []fetch.Action{{Type: fetch.ActionWait, Wait: time.Second}}},
		{Format: "both", Proxy: "none", PDF: PDFOptions{Skip: true}},
		{Format: "both", Proxy: "none", PDF: PDFOptions{MaxPages: 2}},
	} {
		k := o.cacheKey("http://a/")
		if seen[k] {
			t.Errorf("options %+v share a cache key", o)
		}
		seen[k] = true
	}
	if base.cacheKey("http://a/") == base.cacheKey("http://a/b") {
		t.Error("URLs share a cache key")
	}
	// Keys of requests without browser fields are those they always were,
	// so an upgrade keeps the cache.
	if got := base.cacheKey("http://a/"); got != "http://a/\x00both\x00none\x00\x00falsefalsefalsefalse" {
		t.Errorf("key changed: %q", got)
	}
}

// A scrape with the caller's headers or actions is never shared through
// the cache or the archive.
func TestShared(t *testing.T) {
	for _, tt := range []struct {
		o    Options
		want bool
	}{
		{Options{}, true},
		{Options{JS: "1", Screenshot: true}, true},
		{Options{NoStore: true}, false},
		{Options{Header: http.Header{"Cookie": {"a=b"}}}, false},
		{Options{Actions: []fetch.Action{{Type: fetch.ActionScrape}}}, false},
	} {
		if got := tt.o.Shared(); got != tt.want {
			t.Errorf("%+v: Shared %v", tt.o, got)
		}
	}
	if !(&Options{Actions: []fetch.Action{{Type: fetch.ActionScrape}}}).NeedsBrowser() {
		t.Error("actions do not send the page to the browser")
	}
}

func TestUsageString(t *testing.T) {
	if got := (Usage{Engine: "cache", Cache: "hit"}).String(); got != `{"engine":"cache","cache":"hit","units":0}` {
		t.Errorf("cache hit: %s", got)
	}
	if got := (Usage{Engine: "browser", Level: "browser_proxy", Proxy: "isp", Cache: "miss", Units: 1}).String(); got != `{"engine":"browser","level":"browser_proxy","proxy":"isp","cache":"miss","units":1}` {
		t.Errorf("browser through a proxy: %s", got)
	}
	for _, u := range []Usage{{Engine: "cache", Cache: "hit"}, {Engine: "http", Level: "light", Cache: "miss", Units: 1}} {
		want, _ := json.Marshal(u)
		if u.String() != string(want) {
			t.Errorf("%+v: %s, want %s", u, u.String(), want)
		}
	}
}

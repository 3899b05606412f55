package scrape

import (
	"encoding/json"
	"strings"
	"testing"
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
		{`{"url":"http://a/","proxy":"isp"}`, Options{}, "no isp proxy pool"},
		{`{"url":"http://a/","country":"u1"}`, Options{}, "country"},
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
		if r.Options != tc.want {
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
}

func TestUsageString(t *testing.T) {
	for _, u := range []Usage{{Engine: "cache", Cache: "hit"}, {Engine: "http", Cache: "miss", Units: 1}} {
		want, _ := json.Marshal(u)
		if u.String() != string(want) {
			t.Errorf("%+v: %s, want %s", u, u.String(), want)
		}
	}
}

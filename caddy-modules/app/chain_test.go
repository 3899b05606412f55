package app_test

import (
	"strings"
	"testing"

	"github.com/trawlhq/trawl/caddy-modules/internal/adapttest"
)

// A hand-written Caddyfile whose chain would run out of the gate's order is
// refused when it is adapted; the orders that are right adapt.
func TestChainOrder(t *testing.T) {
	site := func(body string) string { return ":8080 {\n" + body + "\n}\n" }
	tests := []struct {
		name, caddyfile, err string
	}{
		{"the gate's chain", site("\troute {\n\t\ttrawl_trace\n\t\ttrawl_auth\n\t\ttrawl_ratelimit\n\t\ttrawl_meter\n\t\ttrawl_api\n\t\ttrawl_route\n\t\treverse_proxy {\n\t\t\tdynamic trawl_cells\n\t\t}\n\t}"), ""},
		{"a shorter chain", site("\troute {\n\t\ttrawl_auth\n\t\ttrawl_api\n\t\trespond \"ok\"\n\t}"), ""},
		{"two sites, each with a rate limit at the top", ":8080 {\n\ttrawl_ratelimit\n\trespond \"a\"\n}\n\n:8081 {\n\ttrawl_ratelimit\n\trespond \"b\"\n}\n", ""},
		{"auth and route at the top", site("\ttrawl_auth\n\ttrawl_route\n\treverse_proxy {\n\t\tdynamic trawl_cells\n\t}"), ""},
		{"meter before auth", site("\troute {\n\t\ttrawl_meter\n\t\ttrawl_auth\n\t\trespond \"ok\"\n\t}"), "trawl_meter needs trawl_auth before it"},
		{"api before ratelimit", site("\troute {\n\t\ttrawl_auth\n\t\ttrawl_api\n\t\ttrawl_ratelimit\n\t\trespond \"ok\"\n\t}"), "trawl_ratelimit must come before trawl_api"},
		{"trace after auth", site("\troute {\n\t\ttrawl_auth\n\t\ttrawl_trace\n\t\trespond \"ok\"\n\t}"), "trawl_trace must come before trawl_auth"},
		{"auth twice", site("\troute {\n\t\ttrawl_auth\n\t\ttrawl_auth\n\t\trespond \"ok\"\n\t}"), "trawl_auth is given twice"},
		{"meter at the top", site("\ttrawl_auth\n\ttrawl_meter\n\trespond \"ok\""), "trawl_meter must be inside a route { } block"},
		{"api at the top", site("\ttrawl_api\n\trespond \"ok\""), "trawl_api must be inside a route { } block"},
		{"trace at the top", site("\ttrawl_trace\n\trespond \"ok\""), "trawl_trace must be inside a route { } block"},
		{"a bad public path", site("\troute {\n\t\ttrawl_auth {\n\t\t\tpublic demo\n\t\t}\n\t\trespond \"ok\"\n\t}"), `public path "demo"`},
		{"a global block without a region", "{\n\ttrawl {\n\t\tdata ./d\n\t\taddr 127.0.0.1:1\n\t\tledger_raft 127.0.0.1:2\n\t}\n}\n\n" + site("\trespond \"ok\""), "region is required"},
		{"a global block with a bad region", "{\n\ttrawl {\n\t\tregion EU\n\t\tdata ./d\n\t\taddr 127.0.0.1:1\n\t\tledger_raft 127.0.0.1:2\n\t}\n}\n\n" + site("\trespond \"ok\""), `region "EU"`},
		{"a global block without data", "{\n\ttrawl {\n\t\tregion eu\n\t\taddr 127.0.0.1:1\n\t\tledger_raft 127.0.0.1:2\n\t}\n}\n\n" + site("\trespond \"ok\""), "data is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := adapttest.Adapt(tt.caddyfile)
			if tt.err == "" {
				if err != nil {
					t.Fatalf("refused: %v\n%s", err, tt.caddyfile)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("error %v, want %q\n%s", err, tt.err, tt.caddyfile)
			}
		})
	}
}

package ratelimit

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/trawlhq/trawl/caddy-modules/internal/adapttest"
)

// TestCaddyfileAdapt adapts each testdata/*.caddyfiletest's Caddyfile (above
// the dashes) and compares the JSON with the one below them.
func TestCaddyfileAdapt(t *testing.T) { adapttest.Run(t) }

func TestUnmarshalCaddyfile(t *testing.T) {
	tests := []struct {
		in   string
		want Handler
		err  string
	}{
		{in: `trawl_ratelimit`},
		{in: "trawl_ratelimit {\n}"},
		{in: "trawl_ratelimit {\n zone api\n plan free 30 3\n plan supporter 0 20\n}",
			want: Handler{Zone: "api", Plans: map[string]Limits{"free": {RatePerMinute: 30, Concurrency: 3}, "supporter": {Concurrency: 20}}}},
		{in: "trawl_ratelimit extra", err: "wrong argument count"},
		{in: "trawl_ratelimit {\n zone\n}", err: "wrong argument count"},
		{in: "trawl_ratelimit {\n zone a b\n}", err: "wrong argument count"},
		{in: "trawl_ratelimit {\n plan free 30\n}", err: "plan wants: <name> <rate_per_minute> <concurrency>"},
		{in: "trawl_ratelimit {\n plan free 30 3 4\n}", err: "plan wants"},
		{in: "trawl_ratelimit {\n plan free thirty 3\n}", err: `plan free: rate_per_minute "thirty" is not a whole number of at least 0`},
		{in: "trawl_ratelimit {\n plan free 30 -1\n}", err: `plan free: concurrency "-1" is not a whole number of at least 0`},
		{in: "trawl_ratelimit {\n plan free 1 1\n plan free 2 2\n}", err: "plan free is given twice"},
		{in: "trawl_ratelimit {\n burst 5\n}", err: `unknown trawl_ratelimit option "burst"`},
	}
	for _, tt := range tests {
		var h Handler
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.in))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: error %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		if h.Zone != tt.want.Zone || len(h.Plans) != len(tt.want.Plans) {
			t.Errorf("%q: got %+v, want %+v", tt.in, h, tt.want)
			continue
		}
		for name, l := range tt.want.Plans {
			if h.Plans[name] != l {
				t.Errorf("%q: plan %s %+v, want %+v", tt.in, name, h.Plans[name], l)
			}
		}
	}
}

// Package all registers Caddy's standard modules, the Caddyfile adapter and
// every trawl module: a program that runs a gate imports it once.
package all

import (
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile" // the Caddyfile adapter
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/trawlhq/trawl/caddy-modules/api"
	_ "github.com/trawlhq/trawl/caddy-modules/app"
	_ "github.com/trawlhq/trawl/caddy-modules/auth"
	_ "github.com/trawlhq/trawl/caddy-modules/body"
	_ "github.com/trawlhq/trawl/caddy-modules/meter"
	_ "github.com/trawlhq/trawl/caddy-modules/ratelimit"
	_ "github.com/trawlhq/trawl/caddy-modules/refusal"
	_ "github.com/trawlhq/trawl/caddy-modules/route"
	_ "github.com/trawlhq/trawl/caddy-modules/trace"
)

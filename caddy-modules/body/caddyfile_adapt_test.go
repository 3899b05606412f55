package body_test

import (
	"testing"

	_ "github.com/trawlhq/trawl/caddy-modules/all"
	"github.com/trawlhq/trawl/caddy-modules/internal/adapttest"
)

// TestCaddyfileAdapt checks testdata/*.caddyfiletest (go test -update
// rewrites their JSON).
func TestCaddyfileAdapt(t *testing.T) { adapttest.Run(t) }

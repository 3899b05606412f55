package gate_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"

	_ "github.com/trawlhq/trawl/caddy-modules/all"
	"github.com/trawlhq/trawl/gate"
	"github.com/trawlhq/trawl/internal/golden"
	"github.com/trawlhq/trawl/internal/members"
)

// The generated Caddyfile of a region, and the JSON Caddy adapts it to, are
// golden files: a change to either shows in review.
func TestRegionCaddyfileGolden(t *testing.T) {
	site := gate.Site{
		Listen: "127.0.0.1:8082",
		Gate: gate.Config{
			Region: "sin", DataDir: "./data/sin/gate", LedgerRaft: "127.0.0.1:7002", Bootstrap: true,
			Peers:   []gate.Peer{{Region: "eu", Raft: "127.0.0.1:7001", Gate: "127.0.0.1:8081"}, {Region: "us", Raft: "127.0.0.1:7003", Gate: "127.0.0.1:8083"}},
			Members: members.Config{Bind: "127.0.0.1:7947"},
		},
		Public: []string{"/demo/*"},
		SMTP:   "127.0.0.1:2525", SMTPFrom: "trawl <noreply@localhost>",
	}
	text, err := site.Caddyfile()
	if err != nil {
		t.Fatal(err)
	}
	cfg, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(text), nil)
	if err != nil {
		t.Fatalf("adapt: %v\n%s", err, text)
	}
	if len(warnings) > 0 {
		t.Errorf("warnings: %v", warnings)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, cfg, "", "\t"); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/sin.caddyfile", []byte(text))
	golden.Check(t, "testdata/sin.json", append(pretty.Bytes(), '\n'))
}

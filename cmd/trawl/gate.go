package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	_ "github.com/trawlhq/trawl/caddy-modules/all"
	"github.com/trawlhq/trawl/gate"
)

const gateUsage = `usage:
  trawl gate --config FILE [--region R]   run a region's gate (Caddy with trawl's modules) from a Caddyfile
  trawl gate config [flags]                print the Caddyfile of a region's gate
`

func runGate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "config" {
		return runGateConfig(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("gate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, gateUsage); fs.PrintDefaults() }
	region := fs.String("region", "", "the region the config must be for (checked)")
	config := fs.String("config", "", "the gate's Caddyfile")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	metricsFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *config == "" {
		fs.Usage()
		return errors.New("--config is required")
	}
	logger, err := newLogger(stderr, *logLevel)
	if err != nil {
		return err
	}
	body, err := os.ReadFile(*config)
	if err != nil {
		return err
	}
	shutdown, err := setupTelemetry(ctx, "trawl-gate", logger)
	if err != nil {
		return err
	}
	defer shutdown(context.Background())
	g, err := startGate(body, *config, *region)
	if err != nil {
		return err
	}
	logger.Info("gate serving", "addr", g.addr, "region", g.region)
	<-ctx.Done()
	return stopGate(logger)
}

// gateInfo is what a started gate's config says about it.
type gateInfo struct {
	region, addr, data string
}

// startGate adapts a Caddyfile and runs it: the trawl app opens the
// region's runtime (voter, holds, membership), the HTTP app serves.
func startGate(caddyfile []byte, name, wantRegion string) (*gateInfo, error) {
	adapter := caddyconfig.GetAdapter("caddyfile")
	cfgJSON, warnings, err := adapter.Adapt(caddyfile, map[string]any{"filename": name})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for _, w := range warnings {
		slog.Warn("caddyfile", "file", w.File, "line", w.Line, "msg", w.Message)
	}
	var parsed struct {
		Apps struct {
			Trawl struct {
				Region string `json:"region"`
				Addr   string `json:"addr"`
				Data   string `json:"data"`
			} `json:"trawl"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(cfgJSON, &parsed); err != nil {
		return nil, err
	}
	t := parsed.Apps.Trawl
	if t.Region == "" {
		return nil, fmt.Errorf("%s: no trawl global block with a region", name)
	}
	if wantRegion != "" && wantRegion != t.Region {
		return nil, fmt.Errorf("%s is the gate of region %s, not %s", name, t.Region, wantRegion)
	}
	if err := caddy.Load(cfgJSON, true); err != nil {
		return nil, fmt.Errorf("start gate: %w", err)
	}
	return &gateInfo{region: t.Region, addr: t.Addr, data: t.Data}, nil
}

func stopGate(logger *slog.Logger) error {
	err := caddy.Stop()
	logger.Info("gate stopped")
	return err
}

// runGateConfig prints a region's Caddyfile.
func runGateConfig(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gate config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var site gate.Site
	fs.StringVar(&site.Gate.Region, "region", "eu", "the gate's region")
	fs.StringVar(&site.Listen, "listen", "127.0.0.1:8081", "address the gate serves on")
	fs.StringVar(&site.Gate.DataDir, "data", "", "gate data directory (default ./data/REGION/gate)")
	fs.StringVar(&site.Gate.PublicURL, "public-url", "", "the region's public base URL")
	fs.StringVar(&site.Gate.LedgerRaft, "ledger-raft", "127.0.0.1:7001", "this region's ledger voter's Raft address")
	peers := fs.String("peers", "", "the other regions: region=raft_addr/gate_addr,…")
	fs.BoolVar(&site.Gate.Bootstrap, "bootstrap", true, "form the ledger group if the data directory is new")
	fs.StringVar(&site.Gate.Members.Bind, "members-bind", "127.0.0.1:7946", "memberlist address cells join")
	join := fs.String("members-join", "", "memberlist seeds, comma-separated")
	fs.StringVar(&site.PricesFile, "prices", "", "price table file")
	fs.StringVar(&site.Admin, "admin", "", "Caddy admin address (default off)")
	fs.StringVar(&site.SMTP, "smtp", "", "SMTP server of sign-up mail, host:port (login from TRAWL_SMTP_USERNAME/TRAWL_SMTP_PASSWORD)")
	fs.StringVar(&site.SMTPFrom, "smtp-from", "trawl <noreply@localhost>", "sender of sign-up mail")
	fs.BoolVar(&site.Gate.AllowPrivateNetworks, "allow-private-networks", false, "let the region's cells fetch loopback and private addresses (development only)")
	pay := fs.String("payments", "off", "top-up payments: stripe (TRAWL_STRIPE_SECRET_KEY), local (an operator confirms each checkout; TRAWL_PAYMENTS_CONFIRM_TOKEN) or off")
	stripeURL := fs.String("stripe-api-url", "", "Stripe API base URL (default Stripe's)")
	trusted := fs.String("trusted-proxies", "", "front proxies whose X-Forwarded-For names the client, CIDRs comma-separated (e.g. 10.0.0.0/8)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if site.Gate.DataDir == "" {
		site.Gate.DataDir = "./data/" + site.Gate.Region + "/gate"
	}
	var err error
	if site.Gate.Payments, err = paymentsFlag(*pay, *stripeURL); err != nil {
		return err
	}
	ps, err := parseGatePeers(*peers)
	if err != nil {
		return err
	}
	site.Gate.Peers = ps
	site.Gate.Members.Join = splitList(*join)
	site.TrustedProxies = splitList(*trusted)
	text, err := site.Caddyfile()
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, text)
	return err
}

// parseGatePeers reads "sin=127.0.0.1:7002/127.0.0.1:8082,…".
func parseGatePeers(s string) ([]gate.Peer, error) {
	lp, err := parsePeers(s)
	if err != nil {
		return nil, err
	}
	out := make([]gate.Peer, len(lp))
	for i, p := range lp {
		out[i] = gate.Peer{Region: p.ID, Raft: p.RaftAddr, Gate: p.APIAddr}
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// paymentsFlag reads --payments and --stripe-api-url.
func paymentsFlag(provider, stripeURL string) (gate.Payments, error) {
	switch provider {
	case "off", "":
		return gate.Payments{}, nil
	case "local":
		return gate.Payments{Provider: "local"}, nil
	case "stripe":
		return gate.Payments{Provider: "stripe", StripeURL: stripeURL}, nil
	}
	return gate.Payments{}, fmt.Errorf("--payments %q: want stripe, local or off", provider)
}

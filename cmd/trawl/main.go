// Command trawl runs every part of the service from one binary.
//
// Commands (each prints its flags with -h):
//
//	trawl dev [--regions eu,sin,us]
//	    The embedded default for local use: a region's gate, a cell and a
//	    one-voter ledger in one process on 127.0.0.1:8080, data in ./data,
//	    a dev API key printed at start (`make run`). With --regions, one
//	    `trawl dev --region R` process per region, supervised, with a
//	    three-voter ledger (gates on 8081–8083). --crawl-listen adds the
//	    crawl server beside the first region's cell.
//
//	trawl gate --config FILE [--region R]
//	    A region's gate: Caddy v2 embedded with trawl's modules
//	    (caddy-modules/), which holds the region's ledger voter, meters
//	    against credit holds and routes to the region's cells.
//
//	trawl gate config [flags]
//	    Prints a region's gate Caddyfile (gate.Site) for the flags given.
//
//	trawl cell [flags]
//	    A cell: the work (scrape, batch, jobs; fetch engines, content) on its
//	    own Pebble store, joined to its region by memberlist
//	    (--members-join). --crawl-listen ADDR also serves the crawl server.
//
//	trawl crawl [--listen 127.0.0.1:11235] [--data DIR]
//	    The self-hosted crawl-task server alone (docs/spec/crawl-server.md):
//	    task API, browser pool, operations monitor and dashboard.
//
//	trawl ledger serve|audit|join|remove|status
//	    serve: a ledger voter with no gate. audit: checks a stopped node's
//	    state (--data) or a live gate's journal (--url, --key): chain,
//	    double entry, balances. join/remove/status: membership of the Raft
//	    group through its leader's API.
//
//	trawl scrape|batch|job|crawl URL|search|answer|extract|monitor|recipe|
//	      balance|estimate|keys|login|completion
//	    The client of a gate (package cli, docs/cli.md): the public API
//	    with the caller's key, JSON when piped, progress on a terminal.
//
// Configuration enters through flags and the few environment variables
// the docs name (TRAWL_LEDGER_SECRET, SERVICE_API_TOKEN, …); see
// docs/operations.md.
package main

import (
	"context"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/trawlhq/trawl/cell"
	"github.com/trawlhq/trawl/cell/crawl"
	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/monitor"
	"github.com/trawlhq/trawl/cmd/trawl/cli"
	"github.com/trawlhq/trawl/internal/members"
	"github.com/trawlhq/trawl/internal/regionauth"
)

const usage = `trawl: a self-hostable web data service

usage:
  trawl dev  [flags]   the embedded default: gate, cell and ledger for region eu on
                       127.0.0.1:8080, data in ./data; --regions eu,sin,us for three
  trawl gate --config FILE   a region's gate (Caddy with trawl's modules)
  trawl gate config [flags]  print a region's gate Caddyfile
  trawl cell [flags]   serve the cell API (scrape, batch, jobs) and join the region
  trawl crawl [flags]  the self-hosted crawl server alone (task API, browser pool,
                       monitor and dashboard) on 127.0.0.1:11235 (with a URL: the
                       client's site crawl, below)
  trawl ledger serve|audit|join|remove|status   a ledger voter with no gate; audits
  trawl health URL     exit 0 when URL answers 2xx within 5 s (container health checks)
  trawl index crawl [flags] SEED...  the operator's index crawler: pages scraped
                       through a gate (so its cells index them), robots.txt honoured
  trawl recipe new|run DIR --input k=v|list --local   run a recipe locally, start a new
                       one (docs/recipes.md)
  trawl mcp --url GATE --key KEY   a stdio bridge to a gate's /mcp tool server
  trawl issues --url GATE   the problems customers reported (operators; an
                       operator key: --key or TRAWL_OPERATOR_KEY)

client of a gate (docs/cli.md; --url/--key, TRAWL_URL/TRAWL_API_KEY, or trawl login):
  trawl login                     check a key and save it with the gate's URL (mode 0600)
  trawl scrape URL [--format md|html|both] [-o FILE]
  trawl batch FILE                the URLs of FILE now, NDJSON lines as they finish
  trawl job submit FILE [--wait]  a background job; progress with --wait
  trawl job status|results|retry ID
  trawl crawl URL -o DIR [--limit N]   a site as Markdown files, paths mirrored
  trawl search Q [--rich] | answer Q | extract URL --schema FILE [--instruction T]
  trawl monitor create URL|list|events ID [--follow]
  trawl recipe list | recipe run NAME key=value...
  trawl balance | estimate ENDPOINT [URL|FILE] | keys
  trawl completion bash|zsh|fish
  JSON (NDJSON for lists) when piped, tables on a terminal; exit codes: 2 usage,
  3 auth, 4 payment (402), 5 not found, 6 rate limited, 7 server, 8 partial

Run "trawl <command> -h" for the flags of a command.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if isClient(os.Args[1], os.Args[2:]) {
		code := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, serverCommands)
		stop()
		os.Exit(code)
	}
	if os.Args[1] == "recipe" {
		os.Args = append(os.Args[:2], cli.LocalRecipeArgs(os.Args[2:])...)
	}
	var err error
	switch os.Args[1] {
	case "cell":
		err = runCell(ctx, os.Args[2:], os.Stderr)
	case "dev":
		err = runDev(ctx, os.Args[2:], os.Stderr)
	case "crawl":
		err = runCrawl(ctx, os.Args[2:], os.Stderr)
	case "gate":
		err = runGate(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "ledger":
		err = runLedger(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "health":
		err = runHealth(ctx, os.Args[2:])
	case "index":
		err = runIndex(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "recipe":
		err = runRecipeCmd(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "mcp":
		err = runMCP(ctx, os.Args[2:], os.Stdin, os.Stdout, os.Stderr)
	case "issues":
		err = runIssues(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "-h", "-help", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "trawl: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if errors.Is(err, errAuditFailed) {
		os.Exit(1)
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "trawl %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// serverCommands are the commands main serves itself, for the client's
// shell completion.
var serverCommands = []cli.ServerCommand{
	{Name: "dev", Short: "the embedded default: gate, cell and ledger on 127.0.0.1:8080"},
	{Name: "gate", Short: "a region's gate"},
	{Name: "cell", Short: "a cell"},
	{Name: "ledger", Short: "a ledger voter; audits"},
	{Name: "health", Short: "exit 0 when a URL answers 2xx"},
	{Name: "index", Short: "the operator's index crawler"},
	{Name: "mcp", Short: "a stdio bridge to a gate's /mcp"},
	{Name: "issues", Short: "the problems customers reported (operators)"},
}

// isClient reports whether the command is the client's (package cli):
// its own names, `crawl URL` (without a URL, the crawl server) and the
// gate's side of `recipe list|run` (the local runner keeps its forms).
func isClient(name string, args []string) bool {
	switch name {
	case "crawl":
		return cli.IsClientCrawl(args)
	case "recipe":
		return cli.IsClientRecipe(args)
	}
	for _, c := range cli.Commands {
		if c == name {
			return true
		}
	}
	return false
}

// cellFlags registers the cell's flags on fs; dev and cell share them.
func cellFlags(fs *flag.FlagSet, cfg *cell.Config, listen *string, logLevel *string, mcfg *members.Config, co *crawlOpts) {
	crawlFlags(fs, co, "crawl-listen", "", "also serve the self-hosted crawl server (docs/crawl-server.md) on this address, e.g. 127.0.0.1:11235 (default: off)")
	fs.StringVar(listen, "listen", "127.0.0.1:8080", "address to serve on (dev: the gate's)")
	fs.StringVar(&cfg.DataDir, "data", "./data", "data directory (the Pebble store lives in DATA/store)")
	fs.BoolVar(&cfg.AllowPrivateNetworks, "allow-private-networks", false, "allow fetching loopback and private addresses (local use and tests only)")
	fs.DurationVar(&cfg.FreshFor, "fresh-for", 10*time.Minute, "serve repeat scrapes of the same URL and options from cache for this long (negative: no cache)")
	fs.DurationVar(&cfg.FetchTimeout, "fetch-timeout", 30*time.Second, "deadline of one page fetch")
	fs.Int64Var(&cfg.MaxPageBytes, "max-page-bytes", 10<<20, "largest page accepted, after decompression")
	fs.IntVar(&cfg.BatchConcurrency, "batch-concurrency", 8, "parallel fetches of one batch")
	fs.IntVar(&cfg.JobConcurrency, "job-concurrency", 16, "parallel fetches across all background jobs")
	fs.DurationVar(&cfg.JobRetention, "job-retention", 7*24*time.Hour, "how long jobs and their results are kept")
	fs.StringVar(&cfg.Name, "name", "c1", "the cell's name in its region, [a-z0-9]{1,16}; job ids carry it")
	fs.StringVar(&mcfg.Bind, "members-bind", "127.0.0.1:0", "memberlist address of the cell (port 0: any free port)")
	fs.Func("members-join", "memberlist seeds of the region, comma-separated (usually the gate's members address)", func(s string) error {
		mcfg.Join = splitList(s)
		return nil
	})
	fs.StringVar(logLevel, "log-level", "info", "debug, info, warn or error")
	metricsFlag(fs)
	// The embedded JetStream node (docs/jetstream-design.md §1, §8).
	fs.StringVar(&cfg.JetStream.RouteListen, "route-listen", "", "host:port of the JetStream cluster (route) listener, reachable by the region's other cells; port 0: any free port. Default off: a standalone node that can never grow (one cell alone). Routes use TLS from the region key on any non-loopback address")
	fs.BoolVar(&cfg.JetStream.TLS, "route-tls", false, "use TLS on the routes even on loopback (always on for other addresses)")
	fs.Int64Var(&cfg.JetStream.MaxStore, "js-max-store", 0, "bytes of JetStream file storage at most (0: the server's choice from the volume's free space)")
	fs.BoolVar(&cfg.JetStream.SyncAlways, "js-sync-always", false, "fsync every JetStream write (default: the OS writes at once, fsync every 2 minutes)")

	// The browser engine and the engine ladder (docs/api.md, "Engines").
	cfg.Browsers = -1
	fs.Var((*browsersFlag)(&cfg.Browsers), "browsers", "Chromium processes of the browser pool: auto (1 when Chromium and the Playwright driver are installed, else 0 with a warning), or a number (0: no browser)")
	fs.IntVar(&cfg.BrowserPages, "browser-pages", 4, "pages each browser renders at once; more wait up to 5 s, then get 503 fleet-busy")
	fs.DurationVar(&cfg.StepDown, "step-down", 24*time.Hour, "a site that needed the browser goes straight to it for this long, then one request tries plain HTTP again (negative: never)")
	fs.Var(&proxiesFlag{dst: &cfg.Proxies}, "proxy", "an upstream proxy, KIND[:COUNTRY]=URL, e.g. isp:us=http://user:pass@host:port (kind isp or residential; no country: any exit); repeat it, or separate several with spaces. Command lines are visible to other users: prefer --proxies-file for credentials")
	fs.Var(&proxiesFileFlag{dst: &cfg.Proxies}, "proxies-file", "a file of upstream proxies, one KIND[:COUNTRY]=URL a line (# comments)")
	// Monitors (docs/monitors.md): the spec's values by default; shorter
	// ones let tests and small deployments run fast.
	fs.DurationVar(&cfg.Monitor.MinEvery, "monitor-min-every", monitor.DefaultMinEvery, "shortest `every` a monitor may ask for")
	fs.DurationVar(&cfg.Monitor.ConfirmAfter, "monitor-confirm-after", monitor.DefaultConfirmAfter, "how long after first sight a change is checked again and, still there, confirmed, charged and delivered")
	fs.Var((*retriesFlag)(&cfg.Monitor.WebhookRetries), "webhook-retries", "the webhook retry ladder of monitors and Firecrawl's batch scrapes and crawls, comma-separated waits (default 1m,5m,30m,2h,12h)")
	fs.Var((*limitsFlag)(&cfg.Monitor.Limits), "monitor-limits", "monitor limits: account=N (monitors per account), fast=N (of them checked more often than hourly), host=N (per host across accounts); default account=100,fast=20,host=500")
	recipeFlags(fs, &cfg.Recipes)
	fs.Var((*escalateFlag)(&cfg.EscalateProxy), "escalate-proxy", "proxy kind (isp or residential) the ladder may use, the browser through such a proxy, for requests that ask for no proxy when the browser alone is blocked; needs a pool of that kind (default none)")
}

// retriesFlag is --webhook-retries: comma-separated durations.
type retriesFlag []time.Duration

func (r *retriesFlag) String() string {
	if r == nil || len(*r) == 0 {
		return "1m,5m,30m,2h,12h"
	}
	parts := make([]string, len(*r))
	for i, d := range *r {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

func (r *retriesFlag) Set(s string) error {
	var out []time.Duration
	for _, p := range splitList(s) {
		d, err := time.ParseDuration(p)
		if err != nil || d <= 0 {
			return fmt.Errorf("want positive durations such as 1m,5m,30m, not %q", p)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return errors.New("want at least one wait")
	}
	*r = out
	return nil
}

// limitsFlag is --monitor-limits: account=N,fast=N,host=N (any subset).
type limitsFlag monitor.Limits

func (l *limitsFlag) String() string {
	if l == nil || *l == (limitsFlag{}) {
		return "account=100,fast=20,host=500"
	}
	return fmt.Sprintf("account=%d,fast=%d,host=%d", l.Account, l.Fast, l.Host)
}

func (l *limitsFlag) Set(s string) error {
	v := monitor.DefaultLimits
	for _, p := range splitList(s) {
		k, n, ok := strings.Cut(p, "=")
		num, err := strconv.Atoi(n)
		if !ok || err != nil || num < 1 {
			return fmt.Errorf("want account=N,fast=N,host=N with N ≥ 1, not %q", p)
		}
		switch k {
		case "account":
			v.Account = num
		case "fast":
			v.Fast = num
		case "host":
			v.Host = num
		default:
			return fmt.Errorf("unknown limit %q (account, fast, host)", k)
		}
	}
	*l = limitsFlag(v)
	return nil
}

// browsersFlag is --browsers: "auto" (stored as -1) or a count.
type browsersFlag int

func (b *browsersFlag) String() string {
	if b == nil || *b < 0 {
		return "auto"
	}
	return strconv.Itoa(int(*b))
}

func (b *browsersFlag) Set(s string) error {
	if s == "auto" {
		*b = -1
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 64 {
		return fmt.Errorf("want auto or 0 to 64, not %q", s)
	}
	*b = browsersFlag(n)
	return nil
}

// proxiesFlag is --proxy, repeatable. String joins the proxies given with
// it by spaces (which no URL holds), so dev can pass them on to its region
// processes; it shows credentials, as the command line that set them did.
type proxiesFlag struct {
	dst *[]fetch.ProxySpec
	own []fetch.ProxySpec
}

func (p *proxiesFlag) String() string {
	if p == nil {
		return ""
	}
	parts := make([]string, len(p.own))
	for i, s := range p.own {
		parts[i] = s.Label() + "=" + s.URL.String()
	}
	return strings.Join(parts, " ")
}

func (p *proxiesFlag) Set(s string) error {
	for _, f := range strings.Fields(s) {
		spec, err := fetch.ParseProxySpec(f)
		if err != nil {
			return err
		}
		p.own = append(p.own, spec)
		*p.dst = append(*p.dst, spec)
	}
	return nil
}

// proxiesFileFlag is --proxies-file.
type proxiesFileFlag struct {
	dst  *[]fetch.ProxySpec
	path string
}

func (p *proxiesFileFlag) String() string {
	if p == nil {
		return ""
	}
	return p.path
}

func (p *proxiesFileFlag) Set(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		spec, err := fetch.ParseProxySpec(line)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		*p.dst = append(*p.dst, spec)
	}
	p.path = path
	return nil
}

// escalateFlag is --escalate-proxy.
type escalateFlag string

func (e *escalateFlag) String() string {
	if e == nil || *e == "" {
		return "none"
	}
	return string(*e)
}

func (e *escalateFlag) Set(s string) error {
	switch s {
	case "none":
		*e = ""
	case fetch.ProxyISP, fetch.ProxyResidential:
		*e = escalateFlag(s)
	default:
		return fmt.Errorf("want isp, residential or none, not %q", s)
	}
	return nil
}

func runCell(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("cell", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg cell.Config
	var listen, logLevel string
	var mcfg members.Config
	var co crawlOpts
	cellFlags(fs, &cfg, &listen, &logLevel, &mcfg, &co)
	fs.StringVar(&cfg.Region, "region", "eu", "the cell's region")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	logger, err := newLogger(stderr, logLevel)
	if err != nil {
		return err
	}
	cfg.Logger = logger
	if cfg.RegionKeys, err = regionKeys(false); err != nil {
		return err
	}
	shutdown, err := setupTelemetry(ctx, "trawl-cell", logger)
	if err != nil {
		return err
	}
	defer shutdown(context.Background())
	if cfg.Model, err = co.model(); err != nil {
		return err
	}
	c, err := startCell(cfg, listen, mcfg, logger, nil)
	if err != nil {
		return err
	}
	cr, err := startCrawlBeside(ctx, &co, cfg, logger)
	if err != nil {
		c.stop(logger)
		return err
	}
	shareCrawl(c.cell, cr, cfg.Name, logger)
	<-ctx.Done()
	return errors.Join(cr.stop(logger), c.stop(logger))
}

// regionKeys reads the region's keys from TRAWL_REGION_KEYS. With
// generate, an unset variable gets a new random key, set in the
// environment so the gate's Caddyfile ({env.TRAWL_REGION_KEYS}) and child
// processes see the same one (trawl dev).
func regionKeys(generate bool) (*regionauth.Keys, error) {
	v := os.Getenv(regionauth.EnvKeys)
	if v == "" && generate {
		v = regionauth.NewKey()
		os.Setenv(regionauth.EnvKeys, v)
	}
	if v == "" {
		return nil, fmt.Errorf("set %s to the region's keys (the same as its gate's; a new one: openssl rand -hex 32)", regionauth.EnvKeys)
	}
	return regionauth.ParseKeys(v)
}

// runningCell is a cell serving HTTP, and its membership.
type runningCell struct {
	cell    *cell.Cell
	addr    string
	members *members.Cluster
	errc    chan error
	cancel  context.CancelFunc
}

// startCell opens the cell, serves it on listen and, with seeds to join,
// joins its region's membership so the gate routes to it. wrap, when set,
// wraps the cell's handler (dev serves the demo site beside it).
func startCell(cfg cell.Config, listen string, mcfg members.Config, logger *slog.Logger, wrap func(http.Handler) http.Handler) (*runningCell, error) {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	var cluster atomic.Pointer[members.Cluster]
	if len(mcfg.Join) > 0 {
		regionGateStores(&cfg, &cluster) // cmd/trawl/monitorstore.go
	}
	c, err := cell.New(cfg)
	if err != nil {
		l.Close()
		return nil, err
	}
	rc := &runningCell{cell: c, addr: l.Addr().String(), errc: make(chan error, 1)}
	h := c.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	sctx, cancel := context.WithCancel(context.Background())
	rc.cancel = cancel
	go func() { rc.errc <- serve(sctx, l, h, logger) }()
	if len(mcfg.Join) > 0 {
		mcfg.Meta = members.Meta{Role: "cell", Region: c.Region(), Name: c.Name(), API: rc.addr,
			Routes: c.RouteURL(), JS: c.JetStreamState()}
		mcfg.Keys = cfg.RegionKeys.All()
		mcfg.Logger = logger
		if rc.members, err = members.Start(mcfg); err != nil {
			rc.stop(logger)
			return nil, err
		}
		cluster.Store(rc.members)
	}
	// A clustered node joins its region once membership has found it
	// (cell/jetstream.go); without membership it starts alone.
	c.JoinRegion(rc.members)
	logger.Info("cell serving", "addr", rc.addr, "region", c.Region(), "name", c.Name(), "data", cfg.DataDir,
		"allow_private_networks", cfg.AllowPrivateNetworks, "route", c.RouteURL())
	return rc, nil
}

// stop leaves the region first (the gate stops sending), then drains the
// HTTP server and closes the cell.
func (rc *runningCell) stop(logger *slog.Logger) error {
	var errs []error
	if rc.members != nil {
		errs = append(errs, rc.members.Close())
	}
	rc.cancel()
	errs = append(errs, <-rc.errc)
	errs = append(errs, rc.cell.Close())
	logger.Info("cell stopped")
	return errors.Join(errs...)
}

func newLogger(w io.Writer, levelName string) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(levelName)); err != nil {
		return nil, fmt.Errorf("-log-level: %w", err)
	}
	logger := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(logger)
	return logger, nil
}

// serve runs an HTTP server on l until ctx is cancelled, then shuts down
// gracefully (requests in flight get up to 10 s).
func serve(ctx context.Context, l net.Listener, h http.Handler, logger *slog.Logger) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

//go:embed demo
var demoFS embed.FS

// demoPages is a small sample site at /demo/, served by the cell through
// its gate like every route (so its answers are signed), so the README's
// first request works on a machine without internet access.
func demoPages() map[string]http.Handler {
	sub, _ := fs.Sub(demoFS, "demo")
	return map[string]http.Handler{"GET /demo/": http.StripPrefix("/demo/", http.FileServerFS(sub))}
}

// startCrawlBeside starts the crawl server next to a cell when
// --crawl-listen is set: it takes the cell's data directory and fetch flags.
func startCrawlBeside(ctx context.Context, co *crawlOpts, cfg cell.Config, logger *slog.Logger) (*runningCrawl, error) {
	if co.listen == "" {
		return nil, nil
	}
	ccfg, err := co.config(cfg.DataDir, cfg.AllowPrivateNetworks, cfg.MaxPageBytes, cfg.BrowserPages, logger)
	if err != nil {
		return nil, err
	}
	// The cell's proxy pools and escalation serve the crawl server's
	// engine ladder too.
	ccfg.Proxies, ccfg.EscalateProxy = cfg.Proxies, cfg.EscalateProxy
	if cfg.JetStream.RouteListen != "" {
		// Beside a clustered cell the region runs its tasks (shareCrawl):
		// those of before a restart wait for it rather than run twice.
		ccfg.AwaitShare = time.Minute
	}
	return startCrawl(ctx, ccfg, co.listen, logger)
}

// shareCrawl makes a crawl server beside a clustered cell share its tasks
// with the region's other crawl servers once the cell shares work
// (cell/crawl/share.go); a standalone cell's keeps its own queue.
func shareCrawl(c *cell.Cell, cr *runningCrawl, name string, logger *slog.Logger) {
	if cr == nil {
		return
	}
	cr.srv.SetPaused(c.Drained)
	c.OnShared(func(js jetstream.JetStream) {
		for wait := time.Second; ; wait = min(2*wait, 30*time.Second) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := cr.srv.Share(ctx, js, name)
			cancel()
			if err == nil || errors.Is(err, crawl.ErrClosed) {
				return
			}
			logger.Warn("crawl: tasks not shared yet; retrying", "err", err, "in", wait)
			time.Sleep(wait)
		}
	})
}

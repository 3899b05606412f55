package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/trawlhq/trawl/caddy-modules/app"
	"github.com/trawlhq/trawl/cell"
	"github.com/trawlhq/trawl/gate"
	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/members"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/ledger"
)

// devFlags are the dev command's own flags; the cell's come from cellFlags.
type devFlags struct {
	regions    string
	region     string
	ledgerRaft string
	peers      string
	cellListen string
	cells      int
	devAccount bool
	prices     string
	smtp       string
	smtpFrom   string
	payments   string
	stripeURL  string
	crawl      crawlOpts
}

// runDev starts the embedded default: for one region, a gate (Caddy with
// trawl's modules and the region's ledger voter), a cell and the dev
// account in this process; for several (--regions eu,sin,us), one such
// process per region, supervised by this one.
func runDev(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg cell.Config
	var listen, logLevel string
	var mcfg members.Config
	var df devFlags
	cellFlags(fs, &cfg, &listen, &logLevel, &mcfg, &df.crawl)
	fs.StringVar(&df.regions, "regions", "eu", "regions to run, comma-separated (eu,sin,us: three gates, three cells, a three-voter ledger)")
	fs.StringVar(&df.region, "region", "", "run this one region of a multi-region topology (used by --regions)")
	fs.StringVar(&df.ledgerRaft, "ledger-raft", "127.0.0.1:7001", "Raft address of the first region's voter (the others follow)")
	fs.StringVar(&df.peers, "peers", "", "the other regions: region=raft_addr/gate_addr,… (used by --regions)")
	fs.StringVar(&df.cellListen, "cell-listen", "127.0.0.1:0", "address of the region's cell")
	fs.IntVar(&df.cells, "cells", 1, "cells in each region (more than one: c1…cN, their JetStream nodes clustered over loopback routes)")
	fs.BoolVar(&df.devAccount, "dev-account", true, "create the dev account and print its key")
	fs.StringVar(&df.prices, "prices", "", "price table file (default: the built-in launch table)")
	fs.StringVar(&df.smtp, "smtp", "", "SMTP server for sign-up mail, host:port (default: mail is written to the log)")
	fs.StringVar(&df.smtpFrom, "smtp-from", "trawl <noreply@localhost>", "sender of sign-up mail")
	fs.StringVar(&df.payments, "payments", "local", "top-up payments: local (confirm each checkout on its page; TRAWL_PAYMENTS_CONFIRM_TOKEN guards it), stripe (TRAWL_STRIPE_SECRET_KEY) or off")
	fs.StringVar(&df.stripeURL, "stripe-api-url", "", "Stripe API base URL (stripe-mock for a trial; default Stripe's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if df.cells < 1 || df.cells > 9 {
		return fmt.Errorf("--cells %d: want 1 to 9", df.cells)
	}
	logger, err := newLogger(stderr, logLevel)
	if err != nil {
		return err
	}
	regions := splitList(df.regions)
	if df.region == "" && len(regions) > 1 {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["listen"] {
			listen = "127.0.0.1:8081"
		}
		return superviseRegions(ctx, fs, regions, listen, df.ledgerRaft, cfg.DataDir, stderr, logger)
	}
	region := df.region
	if region == "" {
		region = regions[0]
	}
	return runDevRegion(ctx, region, listen, df, cfg, mcfg, stderr, logger)
}

// runDevRegion runs one region in this process.
func runDevRegion(ctx context.Context, region, listen string, df devFlags, cfg cell.Config, mcfg members.Config,
	stderr io.Writer, logger *slog.Logger) error {
	dataRoot := cfg.DataDir
	if os.Getenv("TRAWL_LEDGER_SECRET") == "" {
		os.Setenv("TRAWL_LEDGER_SECRET", randomHex(16))
	}
	keys, err := regionKeys(true)
	if err != nil {
		return err
	}
	cfg.RegionKeys = keys
	peers, err := parseGatePeers(df.peers)
	if err != nil {
		return err
	}
	sites, err := gate.Topology([]string{region}, listen, df.ledgerRaft, dataRoot)
	if err != nil {
		return err
	}
	site := sites[0]
	site.Gate.Peers = peers
	// dev's gate allows what its cell was told to: the cell serves only
	// requests of a gate that allows private networks too.
	site.Gate.AllowPrivateNetworks = cfg.AllowPrivateNetworks
	site.PricesFile, site.SMTP, site.SMTPFrom = df.prices, df.smtp, df.smtpFrom
	if site.Gate.Payments, err = paymentsFlag(df.payments, df.stripeURL); err != nil {
		return err
	}
	text, err := site.Caddyfile()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dataRoot, region), 0o755); err != nil {
		return err
	}
	cfPath := filepath.Join(dataRoot, region, "Caddyfile")
	if err := os.WriteFile(cfPath, []byte(text), 0o644); err != nil {
		return err
	}
	shutdown, err := setupTelemetry(ctx, "trawl-dev", logger)
	if err != nil {
		return err
	}
	defer shutdown(context.Background())
	if _, err := startGate([]byte(text), cfPath, region); err != nil {
		return err
	}
	defer stopGate(logger)
	rt, ok := app.Running(site.Gate.DataDir)
	if !ok {
		return errors.New("the gate's runtime did not start")
	}
	if err := waitLeader(ctx, rt.Node(), 60*time.Second); err != nil {
		return err
	}
	var key, opKey string
	if df.devAccount {
		if key, err = devKey(dataRoot); err != nil {
			return err
		}
		if err = devAccount(ctx, rt.Node(), rt.Prices(), key); err != nil {
			return err
		}
		if opKey, err = devOperatorKey(dataRoot); err != nil { // cmd/trawl/devoperator.go
			return err
		}
		if err = gate.EnsureOperatorKey(ctx, rt.Node(), opKey, time.Now); err != nil {
			return fmt.Errorf("dev operator key: %w", err)
		}
	}

	cfg.DataDir = filepath.Join(dataRoot, region, "cell")
	cfg.Region = region
	cfg.Logger = logger
	mcfg.Join = []string{rt.MembersAddr()}
	if cfg.Model, err = df.crawl.model(); err != nil {
		return err
	}
	cfg.Pages = demoPages()
	first := cfg
	cells, err := startDevCells(cfg, df, mcfg, dataRoot, logger)
	if err != nil {
		return err
	}
	defer func() {
		for _, c := range cells {
			c.stop(logger)
		}
	}()
	c := cells[0]
	if len(cells) > 1 {
		first.DataDir = filepath.Join(dataRoot, region, "c1")
	}
	cr, err := startCrawlBeside(ctx, &df.crawl, first, logger)
	if err != nil {
		return err
	}
	defer cr.stop(logger)
	shareCrawl(c.cell, cr, c.cell.Name(), logger)
	// Serve once the gate sees its cell.
	deadline := time.Now().Add(60 * time.Second)
	for len(rt.Cells()) == 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	logger.Info("gate serving", "addr", listen, "region", region, "cell", c.addr, "members", rt.MembersAddr())
	if key != "" && df.region == "" { // a supervisor prints its own
		fmt.Fprintf(stderr, "\ntrawl dev: region %s at http://%s  (data in %s)\n  dev API key: %s\n  try: curl -s http://%s/scrape -H 'Authorization: Bearer %s' -d '{\"url\":\"http://%s/demo/\"}'\n\n",
			region, listen, dataRoot, key, listen, key, listen)
		fmt.Fprintf(stderr, "  operator key: %s  (the operator API: docs/operations.md)\n\n", opKey)
	}
	<-ctx.Done()
	return nil
}

// startDevCells starts the region's cells: one as always (in
// <data>/<region>/cell, its JetStream node standalone unless --route-listen
// is given), or with --cells N, c1…cN in <data>/<region>/cN, each on its
// own loopback ports, their nodes clustered over loopback routes.
func startDevCells(cfg cell.Config, df devFlags, mcfg members.Config, dataRoot string, logger *slog.Logger) ([]*runningCell, error) {
	if df.cells == 1 {
		c, err := startCell(cfg, df.cellListen, mcfg, logger, nil)
		if err != nil {
			return nil, err
		}
		return []*runningCell{c}, nil
	}
	var cells []*runningCell
	for i := 1; i <= df.cells; i++ {
		ccfg, cm := cfg, mcfg
		ccfg.Name = fmt.Sprintf("c%d", i)
		ccfg.DataDir = filepath.Join(dataRoot, cfg.Region, ccfg.Name)
		if ccfg.JetStream.RouteListen == "" {
			ccfg.JetStream.RouteListen = "127.0.0.1:0"
		}
		listen := df.cellListen
		if i > 1 {
			// Ports given for one cell go to the first.
			listen, cm.Bind = "127.0.0.1:0", "127.0.0.1:0"
			ccfg.JetStream.RouteListen = "127.0.0.1:0"
		}
		ccfg.Logger = logger.With("cell", ccfg.Name)
		c, err := startCell(ccfg, listen, cm, ccfg.Logger, nil)
		if err != nil {
			for _, c := range cells {
				c.stop(logger)
			}
			return nil, err
		}
		cells = append(cells, c)
	}
	return cells, nil
}

func waitLeader(ctx context.Context, n *ledger.Node, within time.Duration) error {
	deadline := time.Now().Add(within)
	for n.Status().Leader == "" {
		if time.Now().After(deadline) {
			return errors.New("the ledger has no leader; are the other regions' voters running?")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// devKey is the dev API key: TRAWL_DEV_KEY, else the one kept in
// <data>/dev-key, else a new random one kept there, so restarting dev on
// the same data reuses its key instead of adding one more.
func devKey(dataRoot string) (string, error) {
	return keptKey(dataRoot, "TRAWL_DEV_KEY", "dev-key", "trawl_dev_", "dev key")
}

// keptKey is a key trawl dev hands out: the environment's env, else the
// one kept in <data>/file, else a new random one (prefix + 48 hex) kept
// there with mode 0600. The file is written whole or not at all (a
// script reading it while dev starts never sees half a key).
func keptKey(dataRoot, env, file, prefix, what string) (string, error) {
	key := os.Getenv(env)
	path := filepath.Join(dataRoot, file)
	if key == "" {
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			key = strings.TrimSpace(string(b))
		case errors.Is(err, fs.ErrNotExist):
			key = prefix + randomHex(24)
			if err := os.MkdirAll(dataRoot, 0o755); err != nil {
				return "", err
			}
			tmp := path + ".tmp"
			if err := os.WriteFile(tmp, []byte(key+"\n"), 0o600); err != nil {
				return "", fmt.Errorf("keep the %s: %w", what, err)
			}
			if err := os.Rename(tmp, path); err != nil {
				return "", fmt.Errorf("keep the %s: %w", what, err)
			}
		default:
			return "", fmt.Errorf("read the %s: %w", what, err)
		}
	}
	if len(key) < 16 || len(key) > 256 {
		return "", fmt.Errorf("%s must be 16 to 256 characters", env)
	}
	return key, nil
}

// devAccount creates the dev account holding the sign-up credit and its
// key. Repeating it changes nothing: the commands' ids are fixed.
func devAccount(ctx context.Context, n *ledger.Node, prices *billing.Prices, key string) error {
	now := time.Now().UTC()
	hash := billing.HashKey(key)
	cmds := []*ledger.Command{
		{ID: "dev/account", Type: ledger.CmdCreateAccount, Time: now, CreateAccount: &ledger.CreateAccount{Account: "dev", Plan: ledger.PlanFree}},
		{ID: "dev/signup", Type: ledger.CmdGrant, Time: now, Grant: &ledger.Grant{Account: "dev", Bucket: ledger.BucketSignup, Amount: prices.Grants.Signup.MC()}},
		{ID: "dev/key/" + hash[:16], Type: ledger.CmdAddKey, Time: now, AddKey: &ledger.Key{ID: "key_dev_" + hash[:12], Account: "dev", Hash: hash, Prefix: key[:14], Role: ledger.RoleUser, Kind: "permanent"}},
	}
	for _, c := range cmds {
		var res *ledger.Result
		var err error
		for try := 0; try < 50; try++ { // a new group may still be settling its leader
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			res, err = n.Submit(sctx, c)
			cancel()
			if err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("dev account: %s: %w", c.ID, err)
		}
		if res.Error != "" && res.Error != ledger.ErrCodeExists {
			return fmt.Errorf("dev account: %s: %s", c.ID, res.Message)
		}
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// superviseRegions runs one `trawl dev --region R` process per region and
// stops them all when ctx ends or one of them exits.
func superviseRegions(ctx context.Context, fs *flag.FlagSet, regions []string, listen, raft, dataRoot string,
	stderr io.Writer, logger *slog.Logger) error {
	sites, err := gate.Topology(regions, listen, raft, dataRoot)
	if err != nil {
		return err
	}
	gateAddrs := make([]string, len(sites))
	for i, s := range sites {
		gateAddrs[i] = s.Listen
	}
	// Flags the user gave are passed on, except those set per region here.
	var pass []string
	crawlListen := ""
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "regions", "region", "listen", "ledger-raft", "peers", "dev-account", "cell-listen", "metrics-listen":
			return
		case "crawl-listen": // one crawl server, beside the first region's cell
			crawlListen = f.Value.String()
			return
		}
		pass = append(pass, "--"+f.Name+"="+f.Value.String())
	})
	env := os.Environ()
	if os.Getenv("TRAWL_LEDGER_SECRET") == "" {
		env = append(env, "TRAWL_LEDGER_SECRET="+randomHex(16))
	}
	if os.Getenv(regionauth.EnvKeys) == "" {
		// One key for the dev regions; each region's members use it.
		env = append(env, regionauth.EnvKeys+"="+regionauth.NewKey())
	}
	key, err := devKey(dataRoot)
	if err != nil {
		return err
	}
	env = append(env, "TRAWL_DEV_KEY="+key)
	opKey, err := devOperatorKey(dataRoot)
	if err != nil {
		return err
	}
	env = append(env, "TRAWL_OPERATOR_KEY="+opKey)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var procs []*exec.Cmd
	exited := make(chan error, len(regions))
	var wg sync.WaitGroup
	stopAll := func() {
		for _, p := range procs {
			p.Process.Signal(syscall.SIGTERM)
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			for _, p := range procs {
				p.Process.Kill()
			}
			<-done
		}
	}
	for i, site := range sites {
		region := site.Gate.Region
		var peers []string
		for _, p := range site.Gate.Peers {
			peers = append(peers, fmt.Sprintf("%s=%s/%s", p.Region, p.Raft, p.Gate))
		}
		args := append([]string{"dev", "--region", region, "--listen", site.Listen, "--ledger-raft", site.Gate.LedgerRaft,
			"--peers", strings.Join(peers, ","), "--dev-account=" + strconv.FormatBool(i == 0)}, pass...)
		if i == 0 && crawlListen != "" {
			args = append(args, "--crawl-listen="+crawlListen)
		}
		cmd := exec.Command(self, args...)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, stderr, stderr
		// A region outlives no supervisor, even one killed with SIGKILL.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		if err := cmd.Start(); err != nil {
			stopAll()
			return err
		}
		procs = append(procs, cmd)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := cmd.Wait()
			exited <- fmt.Errorf("region %s exited: %v", region, err)
		}()
	}
	// Ready when every gate is healthy (a ledger leader, a live cell) and
	// answers the dev key and the operator key (both have reached every
	// replica: they are made by separate ledger commands).
	ready := make(chan struct{})
	go func() {
		client := &http.Client{Timeout: 2 * time.Second}
		get := func(url string, auth string) (int, []byte) {
			req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
			if auth != "" {
				req.Header.Set("Authorization", "Bearer "+auth)
			}
			resp, err := client.Do(req)
			if err != nil {
				return 0, nil
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, b
		}
		for _, addr := range gateAddrs {
			for ctx.Err() == nil {
				var h gate.Health
				if code, b := get("http://"+addr+"/health", ""); code == http.StatusOK && json.Unmarshal(b, &h) == nil && h.Status == "ok" {
					if code, _ := get("http://"+addr+"/v1/billing/balance", key); code == http.StatusOK {
						if code, _ := get("http://"+addr+"/operator/v1/prices", opKey); code == http.StatusOK {
							break
						}
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		close(ready)
	}()
	select {
	case <-ready:
		logger.Info("dev serving", "addr", gateAddrs[0], "regions", strings.Join(regions, ","), "gates", strings.Join(gateAddrs, ","))
		fmt.Fprintf(stderr, "\ntrawl dev: %d regions (data in %s)\n", len(regions), dataRoot)
		for i, r := range regions {
			fmt.Fprintf(stderr, "  %-4s http://%s\n", r, gateAddrs[i])
		}
		fmt.Fprintf(stderr, "  dev API key: %s\n  try: curl -s http://%s/v1/billing/balance -H 'Authorization: Bearer %s'\n\n", key, gateAddrs[0], key)
		fmt.Fprintf(stderr, "  operator key: %s  (the operator API: docs/operations.md)\n\n", opKey)
	case err := <-exited:
		stopAll()
		return err
	case <-ctx.Done():
	}
	select {
	case err := <-exited:
		stopAll()
		return err
	case <-ctx.Done():
		stopAll()
		return nil
	}
}

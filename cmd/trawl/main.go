// Command trawl runs the parts of the service: a cell, or the embedded
// default for local use (dev).
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
	"path/filepath"
	"syscall"
	"time"

	"github.com/trawlhq/trawl/cell"
)

const usage = `trawl: a self-hostable web data service

usage:
  trawl cell [flags]   serve the cell API (scrape, batch, jobs)
  trawl dev  [flags]   start the embedded default on 127.0.0.1:8080, data in ./data
  trawl ledger serve|audit   a ledger voter with no gate; audit a journal

Run "trawl <command> -h" for the flags of a command.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "cell":
		err = runCell(ctx, "cell", os.Args[2:], os.Stderr)
	case "dev":
		err = runCell(ctx, "dev", os.Args[2:], os.Stderr)
	case "ledger":
		err = runLedger(ctx, os.Args[2:], os.Stdout, os.Stderr)
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

// cellFlags registers the cell's flags on fs; dev and cell share them.
func cellFlags(fs *flag.FlagSet, cfg *cell.Config, listen *string, logLevel *string) {
	fs.StringVar(listen, "listen", "127.0.0.1:8080", "address to serve the cell API on")
	fs.StringVar(&cfg.DataDir, "data", "./data", "data directory (the Pebble store lives in DATA/store)")
	fs.BoolVar(&cfg.AllowPrivateNetworks, "allow-private-networks", false, "allow fetching loopback and private addresses (local use and tests only)")
	fs.DurationVar(&cfg.FreshFor, "fresh-for", 10*time.Minute, "serve repeat scrapes of the same URL and options from cache for this long (negative: no cache)")
	fs.DurationVar(&cfg.FetchTimeout, "fetch-timeout", 30*time.Second, "deadline of one page fetch")
	fs.Int64Var(&cfg.MaxPageBytes, "max-page-bytes", 10<<20, "largest page accepted, after decompression")
	fs.IntVar(&cfg.BatchConcurrency, "batch-concurrency", 8, "parallel fetches of one batch")
	fs.IntVar(&cfg.JobConcurrency, "job-concurrency", 16, "parallel fetches across all background jobs")
	fs.DurationVar(&cfg.JobRetention, "job-retention", 7*24*time.Hour, "how long jobs and their results are kept")
	fs.StringVar(logLevel, "log-level", "info", "debug, info, warn or error")
}

func runCell(ctx context.Context, name string, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg cell.Config
	var listen, logLevel string
	cellFlags(fs, &cfg, &listen, &logLevel)
	ledgerRaft := "127.0.0.1:7001"
	if name == "dev" {
		fs.StringVar(&ledgerRaft, "ledger-raft", ledgerRaft, "Raft address of the dev ledger's one voter")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	dataRoot := cfg.DataDir
	if name == "dev" {
		// The embedded default keeps each region's parts apart:
		// DATA/eu/cell and DATA/eu/ledger.
		cfg.DataDir = filepath.Join(dataRoot, "eu", "cell")
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	logger, err := newLogger(stderr, logLevel)
	if err != nil {
		return err
	}
	cfg.Logger = logger

	l, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	c, err := cell.New(cfg)
	if err != nil {
		l.Close()
		return err
	}
	logger.Info("cell serving", "addr", l.Addr().String(), "data", cfg.DataDir,
		"allow_private_networks", cfg.AllowPrivateNetworks)
	var h http.Handler = c.Handler()
	var dev *devLedger
	if name == "dev" {
		var billingH http.Handler
		dev, billingH, err = startDevLedger(ctx, dataRoot, ledgerRaft, l.Addr().String(), logger)
		if err != nil {
			c.Close()
			l.Close()
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("/v1/", billingH)
		mux.Handle("/", withDemo(h))
		h = mux
		fmt.Fprintf(stderr, "\ntrawl dev: http://%s  (data in %s)\n  dev API key: %s\n  try: curl -s http://%s/v1/billing/balance -H 'Authorization: Bearer %s'\n\n",
			l.Addr(), dataRoot, dev.key, l.Addr(), dev.key)
	}
	serveErr := serve(ctx, l, h, logger)
	if dev != nil {
		if err := dev.node.Close(); err != nil && serveErr == nil {
			serveErr = err
		}
	}
	if err := c.Close(); err != nil && serveErr == nil {
		serveErr = err
	}
	logger.Info("cell stopped")
	return serveErr
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

// withDemo serves a small sample site at /demo/ next to the API, so the
// README's first request works on a machine without internet access.
func withDemo(api http.Handler) http.Handler {
	sub, _ := fs.Sub(demoFS, "demo")
	mux := http.NewServeMux()
	mux.Handle("GET /demo/", http.StripPrefix("/demo/", http.FileServerFS(sub)))
	mux.Handle("/", api)
	return mux
}

// Command cellfront is "direct at the cell" for `make bench`: a trawl cell
// (cell.New with the flag defaults of `trawl cell --allow-private-networks`)
// served by this process on its listen port, behind a handler that signs
// each request for the region (bench/internal/benchsign) before the cell
// checks it. A cell answers only requests its region's gate signed
// (internal/regionauth), so wrk and curl cannot talk to `trawl cell`
// itself; in production its client is the gate, which signs. Here the
// signature is made and checked in the cell's process, with no proxy hop:
// a figure taken against cellfront is the cell plus the signature's cost.
//
//	cellfront -listen 127.0.0.1:0 -addr-file F -data DIR [-browsers 0] [-job-concurrency 16] [-fresh-for 10m]
//
// Keys: TRAWL_REGION_KEYS when set (so a client may sign too), else a
// random key of its own. It serves until SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/trawlhq/trawl/bench/internal/benchsign"
	"github.com/trawlhq/trawl/bench/internal/signedcell"
	"github.com/trawlhq/trawl/internal/regionauth"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "host:port to serve on (port 0: any free port; see -addr-file)")
	addrFile := flag.String("addr-file", "", "write the address served to this file once listening")
	data := flag.String("data", "", "the cell's data directory")
	browsers := flag.Int("browsers", 0, "Chromium processes of the browser pool (0: none)")
	jobConc := flag.Int("job-concurrency", 16, "parallel fetches across all background jobs")
	freshFor := flag.Duration("fresh-for", 10*time.Minute, "cache freshness (negative: no cache)")
	flag.Parse()
	if *data == "" {
		fmt.Fprintln(os.Stderr, "usage: cellfront -data DIR [-listen HOST:PORT] [-addr-file F] [-browsers N] [-job-concurrency N] [-fresh-for D]")
		os.Exit(2)
	}
	if err := run(*listen, *addrFile, *data, *browsers, *jobConc, *freshFor); err != nil {
		fmt.Fprintf(os.Stderr, "cellfront: %v\n", err)
		os.Exit(1)
	}
}

func run(listen, addrFile, data string, browsers, jobConc int, freshFor time.Duration) error {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	keys, err := benchsign.KeysFromEnv()
	if err != nil {
		return err
	}
	if keys == nil {
		keys, _ = regionauth.ParseKeys(regionauth.NewKey())
	}
	cfg := signedcell.Config(data, keys, logger)
	cfg.Browsers, cfg.JobConcurrency, cfg.FreshFor = browsers, jobConc, freshFor
	addr, stop, err := signedcell.Start(listen, cfg)
	if err != nil {
		return err
	}
	defer stop()
	if addrFile != "" {
		if err := os.WriteFile(addrFile, []byte(addr), 0o644); err != nil {
			return err
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	return nil
}

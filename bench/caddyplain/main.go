// Command caddyplain is the baseline of the gate part of `make bench`: the
// same Caddy the gate embeds (github.com/caddyserver/caddy/v2 at go.mod's
// version, the standard modules), serving one site whose only handler is a
// reverse_proxy to a fixed upstream — none of trawl's modules. Its proxy
// settings copy the gate's (gate/caddyfile.go) so the comparison is module
// cost, not tuning:
//
//	caddyplain -listen 127.0.0.1:PORT -upstream 127.0.0.1:CELLPORT [-storage DIR] [-print]
//	caddyplain -listen 127.0.0.1:PORT -cell-listen 127.0.0.1:CELLPORT -cell-data DIR [-storage DIR]
//
// The second form also runs a trawl cell (cell.New, the defaults of `trawl
// cell`, a ServeMux in front like `trawl dev`'s) in this process and
// proxies to it over loopback TCP: the shape of `trawl dev`, where the gate
// and its cell share one Go runtime, so plain Caddy and the gate can be
// compared without the cost of a second process on the same cores.
//
// -flush-interval changes the gate's `flush_interval -1` ("" leaves Caddy's
// default), for experiments. It serves until SIGINT or SIGTERM. -print
// writes the Caddyfile and exits.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile" // the Caddyfile adapter
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/trawlhq/trawl/bench/internal/signedcell"
	"github.com/trawlhq/trawl/internal/regionauth"
)

func main() {
	listen := flag.String("listen", "", "host:port to serve on (loopback; a fixed port)")
	upstream := flag.String("upstream", "", "host:port of the cell to proxy to")
	storage := flag.String("storage", "", "Caddy's storage directory (default: Caddy's own, under $HOME)")
	printOnly := flag.Bool("print", false, "print the Caddyfile and exit")
	cellListen := flag.String("cell-listen", "", "run a trawl cell in this process on this host:port and proxy to it")
	cellData := flag.String("cell-data", "", "data directory of that cell")
	flush := flag.String("flush-interval", "-1", "reverse_proxy flush_interval, as the gate's (\"\": leave Caddy's default)")
	flag.Parse()
	if *cellListen != "" {
		*upstream = *cellListen
	}
	if *listen == "" || *upstream == "" || (*cellListen != "") != (*cellData != "") {
		fmt.Fprintln(os.Stderr, "usage: caddyplain -listen 127.0.0.1:PORT (-upstream HOST:PORT | -cell-listen HOST:PORT -cell-data DIR) [-storage DIR] [-print]")
		os.Exit(2)
	}
	text, err := caddyfile(*listen, *upstream, *storage, *flush)
	if err == nil && *printOnly {
		fmt.Print(text)
		return
	}
	var stopCell func()
	if err == nil && *cellListen != "" {
		stopCell, err = startCell(*cellListen, *cellData)
	}
	if err == nil {
		err = run(text)
	}
	if stopCell != nil {
		stopCell()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "caddyplain: %v\n", err)
		os.Exit(1)
	}
}

// caddyfile is the plain proxy: the gate's global options (admin off, no
// automatic HTTPS) and its reverse_proxy block, with a static upstream in
// place of `dynamic trawl_cells` and no route/handle_errors chain.
func caddyfile(listen, upstream, storage, flush string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("listen %q: %w", listen, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p == 0 {
		return "", fmt.Errorf("listen %q: want a fixed port", listen)
	}
	st := ""
	if storage != "" {
		st = fmt.Sprintf("\tstorage file_system %s\n", strconv.Quote(storage))
	}
	fl := ""
	if flush != "" {
		fl = fmt.Sprintf("\t\tflush_interval %s\n", flush)
	}
	return fmt.Sprintf(`{
	admin off
	auto_https off
	persist_config off
	grace_period 10s
%s}

http://:%s {
	bind %s
	reverse_proxy %s {
		lb_policy round_robin
		lb_try_duration 5s
		lb_try_interval 50ms
		fail_duration 5s
%s		transport http {
			dial_timeout 2s
			response_header_timeout 125s
			keepalive_idle_conns_per_host 256
		}
	}
}
`, st, port, host, upstream, fl), nil
}

func run(text string) error {
	cfgJSON, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(text), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		return err
	}
	for _, w := range warnings {
		fmt.Fprintf(os.Stderr, "caddyfile: line %d: %s\n", w.Line, w.Message)
	}
	if err := caddy.Load(cfgJSON, true); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	return caddy.Stop()
}

// startCell runs a cell as `trawl cell --allow-private-networks` would
// (its flag defaults) on addr, behind a ServeMux like `trawl dev`'s whose
// handler signs each request for the region first (bench/internal/signedcell,
// the same cell as bench/cellfront): what the gate does before a request
// reaches a cell, so the cell does the same work as behind a gate and the
// signature's check is part of the baseline.
func startCell(addr, dataDir string) (stop func(), err error) {
	keys, err := regionauth.ParseKeys(regionauth.NewKey())
	if err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	_, stop, err = signedcell.Start(addr, signedcell.Config(dataDir, keys, logger))
	return stop, err
}

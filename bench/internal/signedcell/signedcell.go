// Package signedcell runs a trawl cell in the bench's own process, served
// on its listen port behind benchsign.Handler: every request is signed for
// the region on arrival, then checked by the cell (signature, time window,
// nonce), as it would be behind the gate, with no proxy hop in between.
// It is the "direct at the cell" of `make bench` (bench/cellfront) and the
// cell of bench/caddyplain -cell-listen.
package signedcell

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/trawlhq/trawl/bench/internal/benchsign"
	"github.com/trawlhq/trawl/cell"
	"github.com/trawlhq/trawl/internal/regionauth"
)

// Config is a cell as `trawl cell --allow-private-networks --browsers 0`
// configures it (the flags' defaults, cmd/trawl), on dataDir, with keys.
func Config(dataDir string, keys *regionauth.Keys, logger *slog.Logger) cell.Config {
	return cell.Config{
		DataDir:              dataDir,
		AllowPrivateNetworks: true,
		FreshFor:             10 * time.Minute,
		FetchTimeout:         30 * time.Second,
		MaxPageBytes:         10 << 20,
		BatchConcurrency:     8,
		JobConcurrency:       16,
		JobRetention:         7 * 24 * time.Hour,
		BrowserPages:         4,
		StepDown:             24 * time.Hour,
		RegionKeys:           keys,
		Logger:               logger,
	}
}

// Start serves cfg's cell on addr, behind a ServeMux (like `trawl dev`'s)
// whose handler signs each request with cfg.RegionKeys before the cell
// checks it. It returns the address served and a func that stops both.
func Start(addr string, cfg cell.Config) (string, func(), error) {
	c, err := cell.New(cfg)
	if err != nil {
		return "", nil, err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		c.Close()
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/", benchsign.Handler(cfg.RegionKeys, c.Handler()))
	// The server settings of `trawl cell` (cmd/trawl serve).
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	go srv.Serve(l)
	cfg.Logger.Info("cell serving", "addr", l.Addr().String(), "data", cfg.DataDir, "signing", benchsign.Claims.Account)
	return l.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		c.Close()
	}, nil
}

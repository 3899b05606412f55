// Command fileserver serves a directory raw with Go's own http.FileServer on
// loopback. In `make bench` it is both the origin the trawl cell fetches
// from and the baseline it is measured against: the same pages, the same
// machine, nothing but net/http and the page cache.
//
//	fileserver -root DIR [-addr 127.0.0.1:0] [-addr-file FILE]
//
// With port 0 the kernel picks a free port; -addr-file receives the address
// actually bound (host:port), written after the listener is open, so a
// caller can poll for the file and then for a 200.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	root := flag.String("root", "", "directory to serve")
	addr := flag.String("addr", "127.0.0.1:0", "listen address (loopback only)")
	addrFile := flag.String("addr-file", "", "write the bound host:port here once listening")
	flag.Parse()
	if *root == "" {
		fmt.Fprintln(os.Stderr, "usage: fileserver -root DIR [-addr 127.0.0.1:0] [-addr-file FILE]")
		os.Exit(2)
	}
	if err := run(*root, *addr, *addrFile); err != nil {
		fmt.Fprintf(os.Stderr, "fileserver: %v\n", err)
		os.Exit(1)
	}
}

func run(root, addr, addrFile string) error {
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return fmt.Errorf("root %q is not a directory", root)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("addr %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("addr %q: only loopback addresses are allowed", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if addrFile != "" {
		// Write then rename, so a poller never reads a half-written address.
		tmp := addrFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(ln.Addr().String()+"\n"), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, addrFile); err != nil {
			return err
		}
	}
	srv := &http.Server{
		Handler:           http.FileServer(http.Dir(root)),
		ReadHeaderTimeout: 10 * time.Second,
	}
	err = srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) || strings.Contains(fmt.Sprint(err), "use of closed") {
		return nil
	}
	return err
}

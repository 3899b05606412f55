// Package proxytest runs a real HTTP proxy for tests: Debian's tinyproxy,
// on a free loopback port, with its own configuration and log in the
// test's temp dir, stopped when the test ends.
//
// tinyproxy is installed by `scripts/deps.sh test` (run by `make test`),
// which also stops the system instance the package starts. When it is
// missing, Start skips the test, unless TRAWL_REQUIRE_BROWSER is set (to
// anything but "0"; `make test` sets it and installs both), when it fails
// the test instead.
package proxytest

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Path is where Debian's tinyproxy package puts the binary.
const Path = "/usr/bin/tinyproxy"

// RequireEnv turns a missing tinyproxy from a skip into a failure.
const RequireEnv = "TRAWL_REQUIRE_BROWSER"

// Proxy is a running tinyproxy.
type Proxy struct {
	// Addr is host:port of the proxy.
	Addr string
	// User and Password are the credentials it demands (Options.Auth).
	User, Password string
	logFile        string
}

// Options configure Start.
type Options struct {
	// Auth makes the proxy demand basic credentials (User "trawl" and a
	// random password), which URL then carries.
	Auth bool
}

// Start runs tinyproxy on 127.0.0.1, allowing only 127.0.0.1 as a client,
// in the foreground (-d), killed (SIGKILL, its own process only) when the
// test ends.
func Start(t testing.TB, opts Options) *Proxy {
	t.Helper()
	if fi, err := os.Stat(Path); err != nil || fi.IsDir() {
		if v := os.Getenv(RequireEnv); v != "" && v != "0" {
			t.Fatalf("tinyproxy required (%s is set) but %s is missing (run: bash scripts/deps.sh test)", RequireEnv, Path)
		}
		t.Skipf("tinyproxy not installed at %s (run: bash scripts/deps.sh test)", Path)
	}
	dir := t.TempDir()
	p := &Proxy{logFile: filepath.Join(dir, "tinyproxy.log")}
	if opts.Auth {
		p.User = "trawl"
		p.Password = "pw" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	var lastErr error
	for range 5 { // a free port may be taken between picking and binding
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		conf := fmt.Sprintf(`Port %d
Listen 127.0.0.1
Timeout 30
LogFile %q
LogLevel Info
MaxClients 200
Allow 127.0.0.1
`, port, p.logFile)
		if opts.Auth {
			conf += fmt.Sprintf("BasicAuth %s %s\n", p.User, p.Password)
		}
		confFile := filepath.Join(dir, "tinyproxy.conf")
		if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		// The log must be writable by whichever user tinyproxy ends up as.
		if err := os.WriteFile(p.logFile, nil, 0o666); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p.logFile, 0o666)
		os.Chmod(dir, 0o755)
		cmd := exec.Command(Path, "-d", "-c", confFile)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start tinyproxy: %v", err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if err := waitListening(addr, exited, 10*time.Second); err != nil {
			cmd.Process.Kill()
			<-exited
			lastErr = fmt.Errorf("%v\n%s\nlog:\n%s", err, out.String(), p.Log())
			continue
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-exited
			if t.Failed() {
				t.Logf("tinyproxy log:\n%s", p.Log())
			}
		})
		p.Addr = addr
		return p
	}
	t.Fatalf("tinyproxy did not start: %v", lastErr)
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitListening(addr string, exited <-chan error, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("tinyproxy exited: %v", err)
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("tinyproxy not listening on %s after %s", addr, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// URL is the proxy's URL, with its credentials when it demands them.
func (p *Proxy) URL() string {
	u := &url.URL{Scheme: "http", Host: p.Addr}
	if p.User != "" {
		u.User = url.UserPassword(p.User, p.Password)
	}
	return u.String()
}

// Log is the proxy's log so far.
func (p *Proxy) Log() string {
	b, _ := os.ReadFile(p.logFile)
	return string(b)
}

// Requests are the request lines the proxy logged, in order: "GET
// http://127.0.0.1:41234/page HTTP/1.1", "CONNECT 127.0.0.1:41235
// HTTP/1.1".
func (p *Proxy) Requests() []string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(p.Log()))
	for sc.Scan() {
		// tinyproxy: "INFO      Nov 22 12:00:00.000 [123]: Request (file descriptor 6): GET http://… HTTP/1.1"
		if _, req, ok := strings.Cut(sc.Text(), "Request (file descriptor "); ok {
			if _, line, ok := strings.Cut(req, "): "); ok {
				lines = append(lines, line)
			}
		}
	}
	return lines
}

// Saw reports whether the proxy logged a request line containing s.
func (p *Proxy) Saw(s string) bool {
	for _, r := range p.Requests() {
		if strings.Contains(r, s) {
			return true
		}
	}
	return false
}

// WaitSaw polls the log until a request line contains s (tinyproxy writes
// the line as it starts the request, so it may lag the answer slightly).
func (p *Proxy) WaitSaw(s string, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		if p.Saw(s) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

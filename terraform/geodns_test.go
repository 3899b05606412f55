package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// pdnsServer finds PowerDNS's pdns_server (Debian: pdns-server and
// pdns-backend-bind, installed by scripts/deps.sh test).
func pdnsServer(t *testing.T) string {
	bind, _ := filepath.Glob("/usr/lib/*/pdns/libbindbackend.so")
	for _, p := range []string{"pdns_server", "/usr/sbin/pdns_server"} {
		if path, err := exec.LookPath(p); err == nil && len(bind) > 0 {
			return path
		}
	}
	t.Fatalf("no PowerDNS (pdns_server with its bind backend): run `bash scripts/deps.sh test` (it installs Debian's pdns-server and pdns-backend-bind)")
	return ""
}

// A fake gate: GET /health answers as a gate does, ok, degraded (200,
// "degraded") or down (503).
type fakeGate struct {
	region string
	ip     string
	state  atomic.Value // "ok", "degraded", "down"
	mu     sync.Mutex
	srv    *http.Server // nil while stopped (the machine is dead)
}

func (g *fakeGate) serve(l net.Listener) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.srv = &http.Server{Handler: g}
	go g.srv.Serve(l)
}

// stop closes the gate's listener: its port refuses connections.
func (g *fakeGate) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.srv != nil {
		g.srv.Close()
		g.srv = nil
	}
}

// restart serves again on the same address.
func (g *fakeGate) restart(t *testing.T, port int) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(g.ip, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	g.serve(l)
}

func (g *fakeGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/health" {
		http.NotFound(w, r)
		return
	}
	st := g.state.Load().(string)
	if st == "down" {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"status":%q,"region":%q,"cells":2,"ledger_leader":"eu","ledger_index":7,"unsettled_charges":0}`+"\n", st, g.region)
}

// startGates serves three fake gates on 127.0.0.11, .12 and .13, all on one
// port (a health URL names one port for every address).
func startGates(t *testing.T) (map[string]*fakeGate, int) {
	gates := map[string]*fakeGate{"eu": {region: "eu", ip: "127.0.0.11"}, "sin": {region: "sin", ip: "127.0.0.12"}, "us": {region: "us", ip: "127.0.0.13"}}
	for try := 0; try < 50; try++ {
		first, err := net.Listen("tcp", "127.0.0.11:0")
		if err != nil {
			t.Fatal(err)
		}
		port := first.Addr().(*net.TCPAddr).Port
		ls := []net.Listener{first}
		for _, ip := range []string{"127.0.0.12", "127.0.0.13"} {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				break
			}
			ls = append(ls, l)
		}
		if len(ls) < 3 {
			for _, l := range ls {
				l.Close()
			}
			continue
		}
		for _, l := range ls {
			ip := l.Addr().(*net.TCPAddr).IP.String()
			for _, g := range gates {
				if g.ip == ip {
					g.state.Store("ok")
					g.serve(l)
					t.Cleanup(g.stop)
				}
			}
		}
		return gates, port
	}
	t.Fatal("no port free on 127.0.0.11, .12 and .13")
	return nil, 0
}

// freeDNSPort is a port free for both UDP and TCP on ip.
func freeDNSPort(t *testing.T, ip string) int {
	for try := 0; try < 50; try++ {
		u, err := net.ListenPacket("udp", ip+":0")
		if err != nil {
			t.Fatal(err)
		}
		port := u.LocalAddr().(*net.UDPAddr).Port
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		u.Close()
		if err == nil {
			l.Close()
			return port
		}
	}
	t.Fatalf("no free DNS port on %s", ip)
	return 0
}

// geodns is a PowerDNS serving what the geodns module rendered, on
// loopback.
type geodns struct {
	t       *testing.T
	server  string // host:port
	exited  chan struct{}
	waitErr error
	out     struct {
		Files       struct{ Value map[string]string } `json:"files"`
		PdnsConf    struct{ Value map[string]string } `json:"pdns_conf"`
		NameServers struct{ Value map[string]string } `json:"name_servers"`
	}
}

// startGeoDNS applies root (a root module calling ../geodns with
// var.health_port and var.config_dir, and outputting its files, pdns_conf
// and name_servers) with OpenTofu, writes the files as a gate's cloud-init
// does (../region), and runs pdns_server as the unit pdns@trawl runs it
// (--config-name=trawl) with eu's pdns-trawl.conf: on a free port of the eu
// gate's address instead of 53, health checks every second instead of 5,
// no security poll (a DNS query to the Internet).
func startGeoDNS(t *testing.T, root string, healthPort int) *geodns {
	pdns := pdnsServer(t)
	tofu := tofuPath(t)
	work := t.TempDir()
	etc := filepath.Join(work, "etc")
	copyDir(t, filepath.Join("cloud", "openstack", "geodns"), filepath.Join(work, "geodns"))
	dir := filepath.Join(work, "root")
	for _, d := range []string{dir, etc} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(root), 0o644); err != nil {
		t.Fatal(err)
	}
	rc := filepath.Join(work, "tofurc") // no provider to install: tofu reaches no registry
	if err := os.WriteFile(rc, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_PLUGIN_CACHE_DIR=",
		"TF_VAR_health_port="+strconv.Itoa(healthPort), "TF_VAR_config_dir="+etc)
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, tofu, args...)
		cmd.Dir, cmd.Env = dir, env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("tofu %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
		}
		return string(out)
	}
	run("init", "-input=false", "-no-color")
	run("apply", "-input=false", "-no-color", "-auto-approve")
	g := &geodns{t: t, exited: make(chan struct{})}
	if err := json.Unmarshal([]byte(run("output", "-json")), &g.out); err != nil {
		t.Fatal(err)
	}
	for path, content := range g.out.Files.Value {
		if !strings.HasPrefix(path, etc+"/") {
			t.Fatalf("a file outside config_dir: %s", path)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	conf := g.out.PdnsConf.Value["eu"]
	if !strings.Contains(conf, "local-address=127.0.0.11\n") || !strings.Contains(conf, "edns-subnet-processing=yes\n") || !strings.Contains(conf, "disable-axfr=yes\n") {
		t.Fatalf("eu's pdns-trawl.conf:\n%s", conf)
	}
	if err := os.WriteFile(filepath.Join(etc, "pdns-trawl.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}

	g.server = net.JoinHostPort("127.0.0.11", strconv.Itoa(freeDNSPort(t, "127.0.0.11")))
	_, port, _ := net.SplitHostPort(g.server)
	cmd := exec.Command(pdns, "--config-dir="+etc, "--config-name=trawl", "--local-port="+port,
		"--socket-dir="+work, "--daemon=no", "--guardian=no", "--write-pid=no", "--disable-syslog",
		"--lua-health-checks-interval=1", "--security-poll-suffix=")
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { g.waitErr = cmd.Wait(); close(g.exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-g.exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-g.exited
		}
		if t.Failed() {
			t.Logf("pdns_server:\n%s", logs.String())
		}
	})
	// It answers once the zone is loaded.
	g.steadily("the zone is served", "eu.api.trawl.example.", "", is("127.0.0.11"))
	return g
}

// query asks the server; subnet, when set, is the EDNS Client Subnet.
func (g *geodns) query(name string, qtype uint16, subnet string) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.RecursionDesired = false
	if subnet != "" {
		_, n, err := net.ParseCIDR(subnet)
		if err != nil {
			g.t.Fatal(err)
		}
		ones, _ := n.Mask.Size()
		ecs := &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: uint8(ones), Address: n.IP}
		if n.IP.To4() == nil {
			ecs.Family = 2
		}
		o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		o.SetUDPSize(1232)
		o.Option = append(o.Option, ecs)
		m.Extra = append(m.Extra, o)
	}
	c := &dns.Client{Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, g.server)
	return r, err
}

// a is the A answer for a client (its ECS; "" for none: the query's own
// address, 127.0.0.1).
func (g *geodns) a(name, subnet string) ([]string, error) {
	r, err := g.query(name, dns.TypeA, subnet)
	if err != nil {
		return nil, err
	}
	if r.Rcode != dns.RcodeSuccess || !r.Authoritative {
		return nil, fmt.Errorf("%s for %s: rcode %s, aa %v", name, subnet, dns.RcodeToString[r.Rcode], r.Authoritative)
	}
	var ips []string
	for _, rr := range r.Answer {
		if rec, ok := rr.(*dns.A); ok {
			ips = append(ips, rec.A.String())
		}
	}
	slices.Sort(ips)
	return ips, nil
}

// steadily polls until ok holds for 20 answers in a row (30 s at most):
// health checks run in the background (every second here), a check's
// first state is down, and the answer for a region with every gate down
// is any gate at random, which may be the right one by chance.
func (g *geodns) steadily(what, name, subnet string, ok func([]string) bool) {
	g.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last []string
	var err error
	for n := 0; n < 20; {
		select {
		case <-g.exited:
			g.t.Fatalf("pdns_server exited: %v", g.waitErr)
		default:
		}
		if last, err = g.a(name, subnet); err == nil && ok(last) {
			n++
			continue
		}
		n = 0
		if time.Now().After(deadline) {
			g.t.Fatalf("%s: %s for a client in %q: %v (err %v)", what, name, subnet, last, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// is: the answer is ip alone.
func is(ip string) func([]string) bool {
	return func(got []string) bool { return len(got) == 1 && got[0] == ip }
}

// elsewhere: the answer is one gate, of the three, but not bad.
func elsewhere(bad string) func([]string) bool {
	return func(got []string) bool {
		return len(got) == 1 && got[0] != bad && slices.Contains([]string{"127.0.0.11", "127.0.0.12", "127.0.0.13"}, got[0])
	}
}

// The root module TestGeoDNS applies: only the geodns module (no provider,
// no cloud).
const geodnsRoot = `
variable "health_port" { type = number }
variable "config_dir" { type = string }

module "geodns" {
  source      = "../geodns"
  zone        = "trawl.example."
  email       = "ops@trawl.example"
  gates       = { eu = "127.0.0.11", sin = "127.0.0.12", us = "127.0.0.13" }
  health_port = var.health_port
  config_dir  = var.config_dir
  client_cidrs = {
    eu  = ["10.1.0.0/16", "2001:db8:1::/48"]
    sin = ["10.2.0.0/16", "192.0.2.128/25"]
    us  = ["10.3.0.0/16", "0.0.0.0/0", "::/0"]
  }
}

output "files" { value = module.geodns.files }
output "pdns_conf" { value = module.geodns.pdns_conf }
output "name_servers" { value = module.geodns.name_servers }
`

// The geodns module's configuration and zone, rendered by OpenTofu and
// served by a real PowerDNS on loopback (startGeoDNS): each client, by its
// EDNS Client Subnet or else its own address, is answered its region's
// gate; the most specific CIDR wins; a region's gate whose /health fails
// (503) or says degraded is left out and comes back when healthy, and so
// is a dead gate (its port closed); the region names answer their gates;
// no recursion, no AXFR. The gates are fake /health servers on
// 127.0.0.11-13. Nothing leaves loopback.
func TestGeoDNS(t *testing.T) {
	gates, healthPort := startGates(t)
	g := startGeoDNS(t, geodnsRoot, healthPort)
	if ns := g.out.NameServers.Value; ns["sin"] != "sin.api.trawl.example." || len(ns) != 3 {
		t.Fatalf("name_servers: %v", ns)
	}

	const api = "api.trawl.example."
	clients := map[string][]string{ // region -> client subnets
		"eu":  {"10.1.7.0/24", "2001:db8:1:5::/64"},
		"sin": {"10.2.200.0/24", "192.0.2.130/32"},
		"us":  {"10.3.0.0/24", "198.51.100.0/24", "192.0.2.0/25", "2001:db8:99::/56", ""},
	}
	for region, subnets := range clients {
		for _, s := range subnets {
			g.steadily("a client is sent to its region's gate", api, s, is(gates[region].ip))
		}
	}

	// Pinning by name: each region's gate, whoever asks.
	for region, gate := range gates {
		for _, s := range []string{"", "10.1.7.0/24", "10.2.200.0/24"} {
			if got, err := g.a(region+".api.trawl.example.", s); err != nil || !slices.Equal(got, []string{gate.ip}) {
				t.Fatalf("%s.api.trawl.example for %q: %v %v", region, s, got, err)
			}
		}
	}
	if r, err := g.query(api, dns.TypeNS, ""); err != nil || len(r.Answer) != 3 {
		t.Fatalf("NS %s: %v %v", api, r, err)
	}

	// sin's gate fails its health check (503): its clients get another live
	// gate (eu or us, picked at random), never sin; then it heals.
	gates["sin"].state.Store("down")
	g.steadily("sin is down: its clients go elsewhere", api, "10.2.200.0/24", elsewhere(gates["sin"].ip))
	g.steadily("sin is down: eu's clients still get eu", api, "10.1.7.0/24", is(gates["eu"].ip))
	gates["sin"].state.Store("ok")
	g.steadily("sin is back", api, "10.2.200.0/24", is(gates["sin"].ip))

	// eu's gate says degraded (no live cell or no ledger leader): left out
	// as well; its IPv6 clients too.
	gates["eu"].state.Store("degraded")
	g.steadily("eu is degraded: its clients go elsewhere", api, "10.1.7.0/24", elsewhere(gates["eu"].ip))
	g.steadily("eu is degraded: its IPv6 clients go elsewhere", api, "2001:db8:1:5::/64", elsewhere(gates["eu"].ip))
	g.steadily("eu is degraded: us's clients still get us", api, "198.51.100.0/24", is(gates["us"].ip))
	gates["eu"].state.Store("ok")
	g.steadily("eu is back", api, "10.1.7.0/24", is(gates["eu"].ip))

	// us's gate is dead (its port refuses connections): its clients, and
	// the clients of no other region, go to eu or sin; then it is back.
	gates["us"].stop()
	g.steadily("us is dead: its clients go elsewhere", api, "198.51.100.0/24", elsewhere(gates["us"].ip))
	g.steadily("us is dead: a client without ECS goes elsewhere", api, "", elsewhere(gates["us"].ip))
	g.steadily("us is dead: sin's clients still get sin", api, "10.2.200.0/24", is(gates["sin"].ip))
	gates["us"].restart(t, healthPort)
	g.steadily("us is back", api, "198.51.100.0/24", is(gates["us"].ip))

	// An authoritative server only: a name of another zone is refused (no
	// recursion), and so is a zone transfer.
	r, err := g.query("example.org.", dns.TypeA, "")
	if err != nil || r.Rcode != dns.RcodeRefused || r.RecursionAvailable || len(r.Answer) != 0 {
		t.Fatalf("a name of another zone: %v %v", r, err)
	}
	tr := &dns.Transfer{}
	axfr := new(dns.Msg)
	axfr.SetAxfr(api)
	if ch, err := tr.In(axfr, g.server); err == nil {
		for env := range ch {
			if env.Error == nil && len(env.RR) > 0 {
				t.Fatalf("AXFR of %s answered %d records", api, len(env.RR))
			}
		}
	}
}

// syncBuffer is a bytes.Buffer a process writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

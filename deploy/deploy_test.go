// Package deploy holds the container images, the three-region compose
// setup and the systemd units (docs/deploy.md). There is no container
// engine on the build machine, so its tests read the files with the
// parsers the Docker ecosystem itself uses (BuildKit's Dockerfile parser,
// the compose-spec loader) and check what an operator relies on; the
// systemd units are checked with systemd-analyze verify.
package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"

	"github.com/trawlhq/trawl/internal/pwdriver"
)

var update = flag.Bool("update", false, "rewrite compose/gates/*.Caddyfile from `trawl gate config`")

// stages parses a Dockerfile into its stages and the ARGs before the first
// FROM.
func stages(t *testing.T, path string) ([]instructions.Stage, []instructions.ArgCommand) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := parser.Parse(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	st, metaArgs, err := instructions.Parse(res.AST, nil)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return st, metaArgs
}

func argDefault(args []instructions.ArgCommand, name string) string {
	for _, a := range args {
		for _, kv := range a.Args {
			if kv.Key == name && kv.Value != nil {
				return *kv.Value
			}
		}
	}
	return ""
}

// runtimeChecks are what every runtime stage of an image must have.
type runtimeChecks struct {
	user       string
	volumes    []string
	ports      []string
	health     []string
	entrypoint []string
	env        map[string]string
	fromStage  string
}

func inspect(st instructions.Stage, byName map[string]instructions.Stage) runtimeChecks {
	var rc runtimeChecks
	rc.env = map[string]string{}
	var walk func(s instructions.Stage)
	walk = func(s instructions.Stage) {
		if parent, ok := byName[strings.ToLower(s.BaseName)]; ok {
			walk(parent)
			rc.fromStage = parent.Name
		}
		for _, c := range s.Commands {
			switch c := c.(type) {
			case *instructions.UserCommand:
				rc.user = c.User
			case *instructions.VolumeCommand:
				rc.volumes = append(rc.volumes, c.Volumes...)
			case *instructions.ExposeCommand:
				rc.ports = append(rc.ports, c.Ports...)
			case *instructions.HealthCheckCommand:
				rc.health = c.Health.Test
			case *instructions.EntrypointCommand:
				rc.entrypoint = c.CmdLine
			case *instructions.EnvCommand:
				for _, kv := range c.Env {
					rc.env[kv.Key] = kv.Value
				}
			}
		}
	}
	walk(st)
	return rc
}

func goVersion(t *testing.T) string {
	raw, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "go "); ok {
			parts := strings.Split(strings.TrimSpace(v), ".")
			return parts[0] + "." + parts[1]
		}
	}
	t.Fatal("no go line in go.mod")
	return ""
}

func TestTrawlImage(t *testing.T) {
	st, meta := stages(t, "Dockerfile")
	if got := argDefault(meta, "GO_VERSION"); got != goVersion(t) {
		t.Errorf("GO_VERSION %q, go.mod says %s", got, goVersion(t))
	}
	if got := argDefault(meta, "PLAYWRIGHT_VERSION"); got != pwdriver.Version {
		t.Errorf("PLAYWRIGHT_VERSION %q, the driver the code expects is %s", got, pwdriver.Version)
	}
	byName := map[string]instructions.Stage{}
	for _, s := range st {
		byName[strings.ToLower(s.Name)] = s
	}
	rc := inspect(st[len(st)-1], byName)
	checkRuntime(t, rc, "8080")
	if !slices.Contains(rc.ports, "8081") || !slices.Contains(rc.ports, "7001") {
		t.Errorf("ports %v: the gate (8081) and the Raft voter (7001) are not exposed", rc.ports)
	}
	if !slices.Contains(rc.ports, routePort) {
		t.Errorf("ports %v: a clustered cell's NATS routes (%s) are not exposed", rc.ports, routePort)
	}
}

func TestCrawlImages(t *testing.T) {
	st, meta := stages(t, "crawl/Dockerfile")
	if got := argDefault(meta, "PLAYWRIGHT_VERSION"); got != pwdriver.Version {
		t.Errorf("PLAYWRIGHT_VERSION %q, want %s", got, pwdriver.Version)
	}
	if got := argDefault(meta, "VARIANT"); got != "all" {
		t.Errorf("default VARIANT %q, want all (latest)", got)
	}
	if last := st[len(st)-1]; last.BaseName != "${VARIANT}" {
		t.Errorf("the last stage is FROM %s, not the chosen variant", last.BaseName)
	}
	byName := map[string]instructions.Stage{}
	for _, s := range st {
		byName[strings.ToLower(s.Name)] = s
	}
	for _, v := range []string{"basic", "all", "gpu"} {
		s, ok := byName[v]
		if !ok {
			t.Fatalf("no %s stage", v)
		}
		rc := inspect(s, byName)
		checkRuntime(t, rc, "11235")
		if !slices.Equal(rc.entrypoint, []string{"tini", "--", "trawl", "crawl"}) {
			t.Errorf("%s: entrypoint %v", v, rc.entrypoint)
		}
		if gpu := rc.env["TRAWL_CRAWL_GPU"] == "1"; gpu != (v == "gpu") {
			t.Errorf("%s: TRAWL_CRAWL_GPU=%q", v, rc.env["TRAWL_CRAWL_GPU"])
		}
	}
}

func checkRuntime(t *testing.T, rc runtimeChecks, port string) {
	t.Helper()
	if rc.user == "" || rc.user == "root" || rc.user == "0" {
		t.Errorf("runs as %q: want a non-root user", rc.user)
	}
	if !slices.Contains(rc.volumes, "/data") {
		t.Errorf("volumes %v: no /data", rc.volumes)
	}
	if !slices.Contains(rc.ports, port) {
		t.Errorf("ports %v: %s not exposed", rc.ports, port)
	}
	want := []string{"CMD", "trawl", "health", "http://127.0.0.1:" + port + "/health"}
	if !slices.Equal(rc.health, want) {
		t.Errorf("health check %v, want %v", rc.health, want)
	}
	if rc.env["PLAYWRIGHT_DRIVER_PATH"] == "" || rc.env["PLAYWRIGHT_NODEJS_PATH"] == "" {
		t.Errorf("the Playwright driver is not configured: %v", rc.env)
	}
}

// regions: every gate serves on 8081 and its voter on 7001 inside the
// compose network; published is the host port.
var regions = []struct{ name, gatePort, raftPort, published string }{
	{"eu", "8081", "7001", "8081"}, {"sin", "8081", "7001", "8082"}, {"us", "8081", "7001", "8083"},
}

func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	env := map[string]string{"TRAWL_LEDGER_SECRET": "s", "TRAWL_REGION_KEYS_EU": "k1", "TRAWL_REGION_KEYS_SIN": "k2", "TRAWL_REGION_KEYS_US": "k3"}
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  "compose",
		ConfigFiles: []types.ConfigFile{{Filename: "compose/compose.yaml"}},
		Environment: env,
	}, func(o *loader.Options) { o.SetProjectName("trawl", true) })
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCompose(t *testing.T) {
	p := loadCompose(t)
	for i, r := range regions {
		g, err := p.GetService("gate-" + r.name)
		if err != nil {
			t.Fatal(err)
		}
		if len(g.Ports) != 1 || g.Ports[0].Published != r.published || g.Ports[0].Target != mustAtoi(t, r.gatePort) {
			t.Errorf("gate-%s ports %+v", r.name, g.Ports)
		}
		if !slices.Equal(g.Command, []string{"gate", "--config", "/etc/trawl/gate.Caddyfile", "--region", r.name}) {
			t.Errorf("gate-%s command %v", r.name, g.Command)
		}
		keys := *g.Environment["TRAWL_REGION_KEYS"]
		if want := []string{"k1", "k2", "k3"}[i]; keys != want {
			t.Errorf("gate-%s region keys %q, want its region's %q", r.name, keys, want)
		}
		if *g.Environment["TRAWL_LEDGER_SECRET"] != "s" {
			t.Errorf("gate-%s has no ledger secret", r.name)
		}
		checkService(t, g, r.gatePort)
		mounted := false
		for _, v := range g.Volumes {
			mounted = mounted || (v.Target == "/etc/trawl/gate.Caddyfile" && strings.HasSuffix(v.Source, "gates/"+r.name+".Caddyfile") && v.ReadOnly)
		}
		if !mounted {
			t.Errorf("gate-%s does not mount its generated Caddyfile read-only: %+v", r.name, g.Volumes)
		}
		for _, n := range []string{"1", "2", "3"} {
			c, err := p.GetService("cell-" + r.name + "-" + n)
			if err != nil {
				t.Fatal(err)
			}
			checkService(t, c, "8080")
			if *c.Environment["TRAWL_REGION_KEYS"] != keys {
				t.Errorf("cell-%s-%s has another region's keys", r.name, n)
			}
			cmd := strings.Join(c.Command, " ")
			if !strings.Contains(cmd, "--region "+r.name) || !strings.Contains(cmd, "--members-join gate-"+r.name+":7946") || !strings.Contains(cmd, "--name c"+n) {
				t.Errorf("cell-%s-%s command %q", r.name, n, cmd)
			}
			if _, ok := c.Environment["TRAWL_LEDGER_SECRET"]; ok {
				t.Errorf("cell-%s-%s is given the ledger secret; only gates hold it", r.name, n)
			}
		}
	}
	checkClusteredCells(t, p)
	for _, s := range []string{"otel-collector", "prometheus"} {
		if _, err := p.GetService(s); err != nil {
			t.Error(err)
		}
	}
	// Every trawl service exports to the collector.
	for _, s := range p.Services {
		if strings.HasPrefix(s.Name, "gate-") || strings.HasPrefix(s.Name, "cell-") {
			if v := s.Environment["OTEL_EXPORTER_OTLP_ENDPOINT"]; v == nil || *v != "http://otel-collector:4318" {
				t.Errorf("%s does not export to the collector", s.Name)
			}
		}
	}
}

// routePort is the NATS route port of a clustered cell in the deployment
// files (docs/jetstream-design.md §8).
const routePort = "7422"

// cellFlags reads a cell's command ("cell" then --flag value pairs) into
// its flags; a flag given twice or without a value is an error.
func cellFlags(cmd []string) (map[string]string, error) {
	if len(cmd) == 0 || cmd[0] != "cell" {
		return nil, fmt.Errorf("not a cell command: %q", cmd)
	}
	flags := map[string]string{}
	for i := 1; i < len(cmd); i += 2 {
		name, ok := strings.CutPrefix(cmd[i], "--")
		if !ok || i+1 >= len(cmd) || strings.HasPrefix(cmd[i+1], "--") {
			return nil, fmt.Errorf("argument %q: want --flag value pairs", cmd[i])
		}
		if _, dup := flags[name]; dup {
			return nil, fmt.Errorf("--%s given twice", name)
		}
		flags[name] = cmd[i+1]
	}
	return flags, nil
}

// checkClusteredCells: every cell service in compose is a clustered cell
// of its region (docs/operations.md, "Deploying clustered cells"), and
// every region has at least three of them, so it survives a dead cell.
// Each cell routes on its own hostname and 7422 (the address it
// advertises: 0.0.0.0 or loopback would send its peers to themselves),
// joins its gate's membership, keeps its data (JetStream's in DATA/nats)
// in a volume of its own, and has a name no other cell of the region has.
func checkClusteredCells(t *testing.T, p *types.Project) {
	t.Helper()
	perRegion := map[string][]string{}
	volumes := map[string]string{}
	names := map[string]string{}
	for _, s := range p.Services {
		if !strings.HasPrefix(s.Name, "cell-") {
			continue
		}
		f, err := cellFlags(s.Command)
		if err != nil {
			t.Errorf("%s: %v", s.Name, err)
			continue
		}
		region := f["region"]
		perRegion[region] = append(perRegion[region], s.Name)
		if s.Hostname != s.Name {
			t.Errorf("%s: hostname %q, want its service name (its peers dial it)", s.Name, s.Hostname)
		}
		switch want := s.Name + ":" + routePort; f["route-listen"] {
		case want:
		case "":
			t.Errorf("%s: no --route-listen (want %s): the cell would run a standalone node and share no work", s.Name, want)
		default:
			t.Errorf("%s: --route-listen %q, want %q: the cell advertises that address to its peers", s.Name, f["route-listen"], want)
		}
		if want := "gate-" + region + ":7946"; f["members-join"] != want {
			t.Errorf("%s: --members-join %q, want its gate's %q (a clustered cell finds its peers' routes there)", s.Name, f["members-join"], want)
		}
		if f["data"] != "/data" {
			t.Errorf("%s: --data %q, want /data (the volume; JetStream's files go in /data/nats)", s.Name, f["data"])
		}
		if other, ok := names[region+"/"+f["name"]]; ok {
			t.Errorf("%s and %s are both %s in %s", other, s.Name, f["name"], region)
		}
		names[region+"/"+f["name"]] = s.Name
		for _, v := range s.Volumes {
			if v.Target != "/data" {
				continue
			}
			if other, ok := volumes[v.Source]; ok {
				t.Errorf("%s and %s share the volume %s: each cell needs its own data", other, s.Name, v.Source)
			}
			volumes[v.Source] = s.Name
		}
	}
	for _, r := range regions {
		if n := len(perRegion[r.name]); n < 3 {
			t.Errorf("region %s has %d cells %v, want at least 3 (a region of two loses its streams' quorum when one dies)", r.name, n, perRegion[r.name])
		}
		delete(perRegion, r.name)
	}
	for region, cells := range perRegion {
		t.Errorf("cells %v are in region %q, which has no gate", cells, region)
	}
}

func checkService(t *testing.T, s types.ServiceConfig, port string) {
	t.Helper()
	if s.ShmSize != 1<<30 {
		t.Errorf("%s: shm_size %d, want 1g (the spec's reference run)", s.Name, s.ShmSize)
	}
	if s.HealthCheck == nil || !slices.Equal([]string(s.HealthCheck.Test), []string{"CMD", "trawl", "health", "http://127.0.0.1:" + port + "/health"}) {
		t.Errorf("%s: health check %+v", s.Name, s.HealthCheck)
	}
	data := false
	for _, v := range s.Volumes {
		data = data || (v.Target == "/data" && v.Type == types.VolumeTypeVolume)
	}
	if !data {
		t.Errorf("%s: no named volume at /data: %+v", s.Name, s.Volumes)
	}
}

func mustAtoi(t *testing.T, s string) uint32 {
	var n uint32
	for _, c := range s {
		n = n*10 + uint32(c-'0')
	}
	return n
}

// trawlBin is the trawl binary: $TRAWL_BIN (make test builds it) or one
// built for the test.
func trawlBin(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("TRAWL_BIN"); b != "" {
		if _, err := os.Stat(b); err == nil {
			return b
		}
	}
	bin := filepath.Join(t.TempDir(), "trawl")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/trawl")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build trawl: %v\n%s", err, out)
	}
	return bin
}

// gateConfigArgs are the flags each region's Caddyfile is generated with.
func gateConfigArgs(region, gatePort, raftPort string) []string {
	var peers []string
	for _, r := range regions {
		if r.name != region {
			peers = append(peers, r.name+"=gate-"+r.name+":"+r.raftPort+"/gate-"+r.name+":"+r.gatePort)
		}
	}
	return []string{"gate", "config", "--region", region, "--listen", "gate-" + region + ":" + gatePort,
		"--data", "/data", "--public-url", "https://" + region + ".trawl.example",
		"--ledger-raft", "gate-" + region + ":" + raftPort, "--peers", strings.Join(peers, ","),
		"--members-bind", "0.0.0.0:7946", "--payments", "stripe"}
}

// The gates' Caddyfiles are what `trawl gate config` prints for them, to
// the byte: compose and the generator never disagree.
func TestGateCaddyfilesAreGenerated(t *testing.T) {
	bin := trawlBin(t)
	for _, r := range regions {
		args := gateConfigArgs(r.name, r.gatePort, r.raftPort)
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			t.Fatalf("trawl %v: %v", args, err)
		}
		want := "# generated by: trawl " + strings.Join(args, " ") + "\n" + string(out)
		path := filepath.Join("compose", "gates", r.name+".Caddyfile")
		if *update {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("%s differs from `trawl %s` (go test ./ -run TestGateCaddyfiles -update rewrites it): %v", path, strings.Join(args, " "), err)
		}
	}
}

// The systemd units pass systemd-analyze verify (with ExecStart pointed at
// a real trawl binary: verify checks that it exists).
func TestSystemdUnits(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze is needed (apt-get install systemd; scripts/deps.sh test does)")
	}
	bin := trawlBin(t)
	dir := t.TempDir()
	units, _ := filepath.Glob("systemd/*.service")
	if len(units) < 3 {
		t.Fatalf("units %v", units)
	}
	var args []string
	for _, u := range units {
		raw, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(u)
		if strings.HasSuffix(name, "@.service") {
			name = strings.TrimSuffix(name, "@.service") + "@c1.service"
		}
		dst := filepath.Join(dir, name)
		if err := os.WriteFile(dst, bytes.ReplaceAll(raw, []byte("/usr/local/bin/trawl"), []byte(bin)), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, dst)
	}
	out, err := exec.Command(analyze, append([]string{"verify", "--man=no"}, args...)...).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// unitDirectives are a unit file's Key=value lines (comments and section
// headers left out), each key's values in order.
func unitDirectives(t *testing.T, path string) (map[string][]string, string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := map[string][]string{}
	for _, l := range strings.Split(string(raw), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "[") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Fatalf("%s: %q is not Key=value", path, l)
		}
		d[k] = append(d[k], v)
	}
	return d, string(raw)
}

// The cell unit starts a clustered cell: --route-listen from
// TRAWL_ROUTE_LISTEN in the instance's environment file (where its other
// flags and its keys are), and a cell without it does not start (it would
// run a standalone node that never joins its region). The refusal is run
// here with sh as systemd would run it ($$ is a literal $, %i the
// instance).
func TestCellUnitIsClustered(t *testing.T) {
	d, raw := unitDirectives(t, "systemd/trawl-cell@.service")
	if !slices.Equal(d["EnvironmentFile"], []string{"/etc/trawl/cell-%i.env"}) {
		t.Errorf("EnvironmentFile %q", d["EnvironmentFile"])
	}
	if len(d["ExecStart"]) != 1 {
		t.Fatalf("ExecStart %q", d["ExecStart"])
	}
	words := strings.Fields(d["ExecStart"][0])
	if i := slices.Index(words, "--route-listen"); i < 0 || i+1 >= len(words) || words[i+1] != "${TRAWL_ROUTE_LISTEN}" {
		// ${VAR} (braces) is one argument even when empty; $VAR would
		// vanish and hand --route-listen the next flag.
		t.Errorf("ExecStart %q: want --route-listen ${TRAWL_ROUTE_LISTEN}", d["ExecStart"][0])
	}
	if !strings.Contains(raw, routePort+"/tcp between the region's") || !strings.Contains(raw, "TRAWL_ROUTE_LISTEN") {
		t.Errorf("the unit's comment does not say which port to open between the cells and where the route address goes")
	}
	if len(d["ExecStartPre"]) != 1 {
		t.Fatalf("ExecStartPre %q: want the one check of TRAWL_ROUTE_LISTEN", d["ExecStartPre"])
	}
	pre := strings.ReplaceAll(strings.ReplaceAll(d["ExecStartPre"][0], "$$", "$"), "%i", "c1")
	script, ok := strings.CutPrefix(pre, "/bin/sh -c '")
	if !ok || !strings.HasSuffix(script, "'") || strings.Count(script, "'") != 1 {
		t.Fatalf("ExecStartPre %q: want /bin/sh -c '…'", d["ExecStartPre"][0])
	}
	script = strings.TrimSuffix(script, "'")
	for _, c := range []struct {
		env  string
		fail bool
	}{{"", true}, {"TRAWL_ROUTE_LISTEN=", true}, {"TRAWL_ROUTE_LISTEN=10.0.0.5:7422", false}} {
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		if c.env != "" {
			cmd.Env = append(cmd.Env, c.env)
		}
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != c.fail {
			t.Errorf("ExecStartPre with %q: err %v, want failure %v\n%s", c.env, err, c.fail, out)
		}
		if c.fail && !strings.Contains(string(out), "set TRAWL_ROUTE_LISTEN") {
			t.Errorf("ExecStartPre with %q says %q, not what to set", c.env, out)
		}
	}
}

// exported are the series the code exports (gate/metrics.go, cell/metrics.go,
// as Prometheus names them); regiontest TestMetricsEndpoint reads them
// from a running gate.
var exported = []string{
	"trawl_gate_requests_total", "trawl_gate_request_duration_seconds_bucket", "trawl_gate_credits_charged_total",
	"trawl_ledger_raft_leader", "trawl_ledger_raft_applied_index", "trawl_ledger_raft_commit_lag",
	"trawl_ledger_holds_unsettled", "trawl_ledger_charges_parked", "trawl_gate_cells_live",
	"trawl_cell_store_disk_bytes", "trawl_cell_pages_total", "trawl_cell_browser_browsers", "trawl_cell_browser_pages_in_use",
	"trawl_cell_browser_crashes_total", "trawl_cell_browser_driver_restarts_total", "trawl_cell_browser_fleet_busy_total",
	// Backlogs and lags (regiontest TestMetricsEndpoint; the crawl
	// server's in cell/crawl TestQueueLimitAndPriority).
	"trawl_ledger_settlement_lag_seconds", "trawl_gate_cells_drained", "trawl_cell_jobs_backlog", "trawl_cell_jobs_backlog_urls",
	"trawl_cell_jobs_oldest_age_seconds", "trawl_monitor_check_lag_seconds", "trawl_monitor_webhook_failed_attempts_total",
	"trawl_monitor_webhook_given_up_total", "trawl_crawl_tasks_queued", "trawl_crawl_tasks_running", "trawl_crawl_tasks_refused_total",
}

// labels are the series' trawl_ labels (not series).
var labels = []string{"trawl_region", "trawl_cell", "trawl_kind", "trawl_level", "trawl_cache", "trawl_engine"}

// The Grafana dashboard is valid JSON and every query names series the
// code exports.
func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile("grafana/trawl.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil || len(d.Panels) < 10 {
		t.Fatalf("dashboard: %v, %d panels", err, len(d.Panels))
	}
	seriesRE := regexp.MustCompile(`trawl_[a-z_]+`)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			names := seriesRE.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("%s: %q names no trawl series", p.Title, tg.Expr)
			}
			for _, n := range names {
				if slices.Contains(labels, n) {
					continue
				}
				if !slices.Contains(exported, n) {
					t.Errorf("%s: %s is not exported", p.Title, n)
				}
			}
		}
	}
}

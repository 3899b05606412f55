package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TofuVersion is the OpenTofu CLI the acceptance test runs; scripts/deps.sh
// builds it from the Go module proxy into ~/.cache/trawl/tofu-<version>/.
const TofuVersion = "1.10.10"

const operatorKey = "trawl_op_acceptance_0123456789abcdef"

// tofuPath finds the OpenTofu CLI: $TRAWL_TOFU, else deps.sh's cache.
func tofuPath(t *testing.T) string {
	if p := os.Getenv("TRAWL_TOFU"); p != "" {
		return p
	}
	home, _ := os.UserHomeDir()
	p := filepath.Join(home, ".cache", "trawl", "tofu-"+TofuVersion, "tofu")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no OpenTofu CLI at %s: run `bash scripts/deps.sh test` (it builds it once from the Go module proxy) or set TRAWL_TOFU", p)
	}
	return p
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func build(t *testing.T, dir, out, pkg string, ldflags ...string) {
	t.Helper()
	args := []string{"build", "-o", out}
	if len(ldflags) > 0 {
		args = append(args, "-ldflags", strings.Join(ldflags, " "))
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
}

// startDev runs `trawl dev` (one region: gate, ledger voter, cell c1) with
// the operator key and returns its gate's URL.
func startDev(t *testing.T, trawl string) string {
	t.Helper()
	listen := freeAddr(t)
	data := t.TempDir()
	cmd := exec.Command(trawl, "dev", "--listen", listen, "--ledger-raft", freeAddr(t), "--data", data)
	cmd.Env = append(os.Environ(), "TRAWL_OPERATOR_KEY="+operatorKey, "TRAWL_METRICS_LISTEN=")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("trawl dev:\n%s", logs.String())
		}
	})
	url := "http://" + listen
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case err := <-done:
			t.Fatalf("trawl dev exited: %v\n%s", err, logs.String())
		default:
		}
		if st, body := get(url+"/operator/v1/cells", operatorKey); st == 200 && strings.Contains(body, `"live":true`) {
			return url
		}
		if time.Now().After(deadline) {
			t.Fatalf("trawl dev did not serve the operator API with a live cell\n%s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitBody waits until GET url (no key) answers a body holding want.
func waitBody(t *testing.T, url, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body := get(url, "")
		if strings.Contains(body, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s never held %s: %s", url, want, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitGone waits until GET url (no key) answers a body without gone.
func waitGone(t *testing.T, url, gone string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, body := get(url, "")
		if st == 200 && !strings.Contains(body, gone) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s still holds %s: %s", url, gone, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func get(url, key string) (int, string) {
	req, _ := http.NewRequest("GET", url, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const config = `
terraform {
  required_providers {
    trawl = {
      source  = "trawlhq/trawl"
      version = "0.1.0"
    }
  }
}

variable "endpoint" { type = string }

provider "trawl" {
  endpoint = var.endpoint
  # operator_key from TRAWL_OPERATOR_KEY
}

resource "trawl_cell" "c1" {
  name    = "c1"
  drained = true
}

resource "trawl_api_key" "ci" {
  account = "dev"
  name    = "ci"
}

resource "trawl_account" "team" {
  id    = "team"
  email = "team@example.com"
  plan  = "supporter"
}

resource "trawl_api_key" "team_ops" {
  account = trawl_account.team.id
  role    = "auditor"
}

resource "trawl_call_price" "scrape" {
  kind = "scrape"
  base = "2.000"
}

resource "trawl_plan" "free" {
  name            = "free"
  rate_per_minute = 30
  concurrency     = 3
  keys            = 4
  monthly_cap     = "200.000"
  monthly_credits = "150.000"
}

resource "trawl_recipe" "headings" {
  name = "doc-headings"
  manifest = jsonencode({
    name        = "doc-headings"
    version     = 1
    title       = "Headings of a page"
    kind        = "script"
    inputs      = [{ name = "url", type = "string", required = true }]
    outputs     = ["heading"]
    hosts       = ["{url}"]
    page_budget = 1
  })
  script = <<-EOT
    function run(input) {
      return select(fetch(input.url), "h2").map(function (h) { return {heading: h.text}; });
    }
  EOT
}

data "trawl_cells" "all" {
  depends_on = [trawl_cell.c1]
}

data "trawl_prices" "now" {
  depends_on = [trawl_call_price.scrape]
}

output "key" {
  value     = trawl_api_key.ci.key
  sensitive = true
}

output "team_key" {
  value     = trawl_api_key.team_ops.key
  sensitive = true
}

output "drained" {
  value = [for c in data.trawl_cells.all.cells : c.name if c.drained]
}

output "scrape_base" {
  value = jsondecode(data.trawl_prices.now.table_json).calls.scrape.base
}
`

// The provider, installed from a filesystem mirror, against trawl dev:
// init, apply (drain a cell, create a key, change a price and a plan), a
// second plan with no change, destroy (undrain, revoke).
func TestAcceptance(t *testing.T) {
	tofu := tofuPath(t)
	work := t.TempDir()
	bin := filepath.Join(work, "bin")
	trawl := filepath.Join(bin, "trawl")
	build(t, "..", trawl, "./cmd/trawl")
	mirror := filepath.Join(work, "mirror")
	platform := runtime.GOOS + "_" + runtime.GOARCH
	build(t, ".", filepath.Join(mirror, "registry.opentofu.org", "trawlhq", "trawl", "0.1.0", platform, "terraform-provider-trawl_v0.1.0"), ".",
		"-X main.Version=0.1.0")
	cliConfig := filepath.Join(work, "tofurc")
	// The mirror only: tofu never reaches a registry.
	if err := os.WriteFile(cliConfig, fmt.Appendf(nil, "provider_installation {\n  filesystem_mirror {\n    path = %q\n  }\n}\n", mirror), 0o644); err != nil {
		t.Fatal(err)
	}
	url := startDev(t, trawl)

	dir := filepath.Join(work, "cfg")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "TF_CLI_CONFIG_FILE="+cliConfig, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
		"TF_VAR_endpoint="+url, "TRAWL_OPERATOR_KEY="+operatorKey, "TF_DATA_DIR="+filepath.Join(work, "tfdata"))
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, tofu, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("tofu %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	must("init", "-input=false", "-no-color")
	must("apply", "-input=false", "-no-color", "-auto-approve")

	// What apply did, seen through the gate.
	st, body := get(url+"/operator/v1/cells", operatorKey)
	if st != 200 || !strings.Contains(body, `"name":"c1"`) || !strings.Contains(body, `"drained":true`) {
		t.Fatalf("cells after apply: %d %s", st, body)
	}
	key := strings.TrimSpace(must("output", "-raw", "key"))
	if st, body := get(url+"/v1/billing/balance", key); st != 200 {
		t.Fatalf("the key tofu made: %d %s", st, body)
	}
	teamKey := strings.TrimSpace(must("output", "-raw", "team_key"))
	if st, body := get(url+"/operator/v1/accounts/team", operatorKey); st != 200 || !strings.Contains(body, `"plan":"supporter"`) {
		t.Fatalf("the account tofu made: %d %s", st, body)
	}
	if st, body := get(url+"/v1/ledger/journal", teamKey); st != 200 { // an auditor key reads the journal
		t.Fatalf("the team's auditor key: %d %s", st, body)
	}
	if _, body := get(url+"/v1/prices", ""); !strings.Contains(body, `"scrape":{"base":"2.000"`) || !strings.Contains(body, `"free":{"rate_per_minute":30,"concurrency":3,"keys":4`) {
		t.Fatalf("public prices after apply: %s", body)
	}
	if out := must("output", "-json", "drained"); !strings.Contains(out, `"c1"`) {
		t.Fatalf("output drained: %s", out)
	}
	if out := must("output", "-raw", "scrape_base"); out != "2.000" {
		t.Fatalf("output scrape_base: %q", out)
	}
	// The recipe is in the ledger, and the region's cell loads it, staged.
	if st, body := get(url+"/operator/v1/recipes/doc-headings", operatorKey); st != 200 || !strings.Contains(body, `"script":"function run(input)`) {
		t.Fatalf("the recipe tofu made: %d %s", st, body)
	}
	waitBody(t, url+"/recipes/health", `"name":"doc-headings","version":1,"stage":"staged"`)

	// A second plan finds nothing to change (exit 0; 2 would be changes).
	if out, err := run("plan", "-input=false", "-no-color", "-detailed-exitcode"); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 2 {
			t.Fatalf("the second plan has changes:\n%s", out)
		}
		t.Fatalf("second plan: %v\n%s", err, out)
	}

	// A change made outside tofu is seen and put back.
	var pt struct {
		Version uint64         `json:"version"`
		Table   map[string]any `json:"table"`
	}
	_, body = get(url+"/operator/v1/prices", operatorKey)
	if err := json.Unmarshal([]byte(body), &pt); err != nil {
		t.Fatal(err)
	}
	pt.Table["calls"].(map[string]any)["scrape"].(map[string]any)["base"] = "3.000"
	b, _ := json.Marshal(pt)
	req, _ := http.NewRequest("PUT", url+"/operator/v1/prices", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+operatorKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("change the price by hand: %v %v", err, resp)
	}
	resp.Body.Close()
	if out, err := run("plan", "-input=false", "-no-color", "-detailed-exitcode"); err == nil || !strings.Contains(out, `"3.000" -> "2.000"`) {
		t.Fatalf("plan after a change by hand: %v\n%s", err, out)
	}
	must("apply", "-input=false", "-no-color", "-auto-approve")
	if _, body := get(url+"/v1/prices", ""); !strings.Contains(body, `"scrape":{"base":"2.000"`) {
		t.Fatalf("prices after the second apply: %s", body)
	}

	// The recipe changed by hand (a version 2) is seen and put back.
	var rb map[string]any
	_, body = get(url+"/operator/v1/recipes/doc-headings", operatorKey)
	if err := json.Unmarshal([]byte(body), &rb); err != nil {
		t.Fatal(err)
	}
	rb["manifest"].(map[string]any)["version"] = 2
	b, _ = json.Marshal(map[string]any{"manifest": rb["manifest"], "script": rb["script"]})
	req, _ = http.NewRequest("PUT", url+"/operator/v1/recipes/doc-headings", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+operatorKey)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("change the recipe by hand: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}
	if out, err := run("plan", "-input=false", "-no-color", "-detailed-exitcode"); err == nil || !strings.Contains(out, "trawl_recipe.headings will be updated in-place") {
		t.Fatalf("plan after a recipe change by hand: %v\n%s", err, out)
	}
	must("apply", "-input=false", "-no-color", "-auto-approve")
	if _, body := get(url+"/operator/v1/recipes/doc-headings", operatorKey); !strings.Contains(body, `"version":1`) {
		t.Fatalf("the recipe after the third apply: %s", body)
	}

	must("destroy", "-input=false", "-no-color", "-auto-approve")
	if st, body := get(url+"/operator/v1/recipes/doc-headings", operatorKey); st != 404 {
		t.Fatalf("the recipe after destroy: %d %s", st, body)
	}
	waitGone(t, url+"/recipes/health", `"name":"doc-headings"`)
	if _, body := get(url+"/operator/v1/cells", operatorKey); !strings.Contains(body, `"drained":false`) {
		t.Fatalf("cells after destroy: %s", body)
	}
	if st, body := get(url+"/v1/billing/balance", key); st != 401 {
		t.Fatalf("the key after destroy: %d %s", st, body)
	}
	if st, body := get(url+"/v1/billing/balance", teamKey); st != 401 {
		t.Fatalf("the team's key after destroy: %d %s", st, body)
	}
	// Accounts are never deleted: the account stays.
	if st, body := get(url+"/operator/v1/accounts/team", operatorKey); st != 200 {
		t.Fatalf("the account after destroy: %d %s", st, body)
	}
}

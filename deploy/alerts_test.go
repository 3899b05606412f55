package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The alert rules (compose/alerts.yml, loaded by the compose Prometheus)
// pass promtool's check, their unit tests (compose/alerts_test.yml) pass,
// and every series they name is one the code exports.
func TestAlertRules(t *testing.T) {
	home, _ := os.UserHomeDir()
	promtool := filepath.Join(home, ".cache", "trawl", "promtool", "promtool")
	if _, err := os.Stat(promtool); err != nil {
		t.Fatalf("no promtool at %s: run `bash scripts/deps.sh test`", promtool)
	}
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "compose"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	raw, err := os.ReadFile("compose/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	exprRE := regexp.MustCompile(`(?m)^\s+expr: (.*)$`)
	seriesRE := regexp.MustCompile(`trawl_[a-z_]+`)
	exprs := exprRE.FindAllStringSubmatch(string(raw), -1)
	if len(exprs) < 10 {
		t.Fatalf("only %d alert expressions", len(exprs))
	}
	for _, e := range exprs {
		for _, n := range seriesRE.FindAllString(e[1], -1) {
			if !slices.Contains(labels, n) && !slices.Contains(exported, n) {
				t.Errorf("alert %q names %s, which the code does not export", e[1], n)
			}
		}
	}
	prom, err := os.ReadFile("compose/prometheus.yml")
	if err != nil || !strings.Contains(string(prom), "/etc/prometheus/alerts.yml") {
		t.Fatalf("prometheus.yml does not load the alert rules: %v", err)
	}
}

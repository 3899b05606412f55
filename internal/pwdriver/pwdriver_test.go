package pwdriver

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDepsScriptReadsVersion runs scripts/deps.sh the way `make` does and
// checks it installs the driver this package declares.
func TestDepsScriptReadsVersion(t *testing.T) {
	out, err := exec.Command("bash", "../../scripts/deps.sh", "driver-version").CombinedOutput()
	if err != nil {
		t.Fatalf("deps.sh driver-version: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != Version {
		t.Errorf("scripts/deps.sh would install playwright-core %q; Version is %q", got, Version)
	}
}

// TestMatchesPlaywrightGo checks Version against the playwright-go that
// go.mod requires: v0.XXYY.z speaks to playwright-core 1.XX.
func TestMatchesPlaywrightGo(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(mod)) {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "github.com/playwright-community/playwright-go" {
			continue
		}
		parts := strings.Split(f[1], ".") // v0, 5200, 1
		if len(parts) != 3 || len(parts[1]) < 3 {
			t.Fatalf("cannot read playwright-go version %q", f[1])
		}
		if want := "1." + parts[1][:len(parts[1])-2] + "."; !strings.HasPrefix(Version, want) {
			t.Errorf("playwright-go %s speaks to playwright-core %sx, not %s", f[1], want, Version)
		}
		return
	}
	t.Fatal("go.mod does not require playwright-go")
}

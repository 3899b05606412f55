// Package browsertest starts a real headless Chromium for tests, driven by
// playwright-go.
//
// Nothing is downloaded at run time: the browser is Debian's chromium
// (/usr/bin/chromium) and the driver is playwright-core DriverVersion
// (declared in internal/pwdriver) unpacked from the npm registry by
// `scripts/deps.sh browser` (also run by `make test`) into DriverDir, or wherever PLAYWRIGHT_DRIVER_PATH points. The machine's
// node runs the driver (PLAYWRIGHT_NODEJS_PATH, else node on PATH).
//
// When either is missing, Launch skips the test, unless TRAWL_REQUIRE_BROWSER
// is set (to anything but "0"; CI sets it), when it fails the test instead.
//
// Tests that use it wait on conditions (Locator.WaitFor, Page.WaitForFunction,
// the auto-waiting of Locator actions), never on fixed sleeps.
package browsertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/trawlhq/trawl/internal/syncbuf"

	"github.com/playwright-community/playwright-go"

	"github.com/trawlhq/trawl/internal/pwdriver"
)

// DriverVersion is the playwright-core release playwright-go speaks to,
// declared once in internal/pwdriver.
const DriverVersion = pwdriver.Version

// ChromiumPath is where Debian's chromium package puts the browser.
const ChromiumPath = "/usr/bin/chromium"

// RequireEnv names the variable that turns a missing browser from a skip into
// a failure.
const RequireEnv = "TRAWL_REQUIRE_BROWSER"

// DriverDir is where scripts/deps.sh unpacks the driver: the directory that
// holds package/cli.js. PLAYWRIGHT_DRIVER_PATH overrides it.
func DriverDir() string {
	if d := os.Getenv("PLAYWRIGHT_DRIVER_PATH"); d != "" {
		return d
	}
	return pwdriver.DefaultDir()
}

// nodePath is the node that runs the driver.
func nodePath() (string, error) {
	if p := os.Getenv("PLAYWRIGHT_NODEJS_PATH"); p != "" {
		return p, nil
	}
	return exec.LookPath("node")
}

// Available reports whether Launch can start a browser here, and if not,
// why (a sentence naming what is missing and how to install it).
func Available() (bool, string) {
	if fi, err := os.Stat(ChromiumPath); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return false, fmt.Sprintf("no browser at %s (run: bash scripts/deps.sh browser)", ChromiumPath)
	}
	dir := DriverDir()
	if dir == "" {
		return false, "no home directory to find the playwright driver in; set PLAYWRIGHT_DRIVER_PATH"
	}
	if _, err := os.Stat(filepath.Join(dir, "package", "cli.js")); err != nil {
		return false, fmt.Sprintf("no playwright driver %s in %s (run: bash scripts/deps.sh browser)", DriverVersion, dir)
	}
	var pkg struct{ Version string }
	if b, err := os.ReadFile(filepath.Join(dir, "package", "package.json")); err != nil || json.Unmarshal(b, &pkg) != nil || pkg.Version != DriverVersion {
		return false, fmt.Sprintf("the playwright driver in %s is not version %s (found %q; run: bash scripts/deps.sh browser)", dir, DriverVersion, pkg.Version)
	}
	if _, err := nodePath(); err != nil {
		return false, "no node to run the playwright driver (set PLAYWRIGHT_NODEJS_PATH)"
	}
	return true, ""
}

// Browser is a running headless Chromium with its driver.
type Browser struct {
	playwright.Browser
	t testing.TB
}

// envMu guards the process environment playwright-go reads the node from.
var envMu sync.Mutex

// Launch starts the playwright driver and a headless Chromium, closed when
// the test ends. Without a browser it skips t, or fails it when
// TRAWL_REQUIRE_BROWSER is set.
func Launch(t testing.TB) *Browser {
	t.Helper()
	if ok, why := Available(); !ok {
		if v := os.Getenv(RequireEnv); v != "" && v != "0" {
			t.Fatalf("browser required (%s is set) but not available: %s", RequireEnv, why)
		}
		t.Skipf("browser not available: %s", why)
	}
	node, _ := nodePath()
	envMu.Lock()
	// playwright-go reads the node only from the environment.
	if os.Getenv("PLAYWRIGHT_NODEJS_PATH") == "" {
		os.Setenv("PLAYWRIGHT_NODEJS_PATH", node)
	}
	envMu.Unlock()

	stderr := &syncbuf.Buffer{Max: 64 << 10}
	pw, err := playwright.Run(&playwright.RunOptions{
		DriverDirectory:     DriverDir(),
		SkipInstallBrowsers: true,
		Verbose:             false,
		Stdout:              io.Discard,
		Stderr:              stderr,
		// Without a Logger, a Stderr makes playwright-go redirect the
		// standard logger for the whole process.
		Logger: slog.New(slog.NewTextHandler(stderr, nil)),
	})
	if err != nil {
		t.Fatalf("start playwright driver: %v\n%s", err, stderr)
	}
	b, err := pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String(ChromiumPath),
		Headless:       playwright.Bool(true),
		// Root in a container: no sandbox; /dev/shm is often tiny.
		ChromiumSandbox: playwright.Bool(false),
		Args:            []string{"--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run"},
	})
	if err != nil {
		pw.Stop()
		t.Fatalf("launch %s: %v\n%s", ChromiumPath, err, stderr)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil && !errors.Is(err, playwright.ErrTargetClosed) {
			t.Logf("close browser: %v", err)
		}
		if err := pw.Stop(); err != nil {
			t.Logf("stop playwright driver: %v", err)
		}
		if t.Failed() {
			if s := stderr.String(); s != "" {
				t.Logf("playwright driver stderr:\n%s", s)
			}
		}
	})
	return &Browser{Browser: b, t: t}
}

// NewPage opens a page in a fresh context (its own cookies and storage),
// closed when the test ends. Actions and waits time out after 30 s, so a
// stuck page fails the test rather than hanging it.
func (b *Browser) NewPage() playwright.Page {
	b.t.Helper()
	ctx, err := b.NewContext()
	if err != nil {
		b.t.Fatalf("new browser context: %v", err)
	}
	b.t.Cleanup(func() { ctx.Close() })
	ctx.SetDefaultTimeout(30_000)
	ctx.SetDefaultNavigationTimeout(30_000)
	p, err := ctx.NewPage()
	if err != nil {
		b.t.Fatalf("new page: %v", err)
	}
	return p
}

// Require skips t when no browser is installed here, or fails it when
// RequireEnv is set (make test sets it: a missing browser must not pass
// as a skipped test).
func Require(t testing.TB) {
	t.Helper()
	if ok, why := Available(); !ok {
		if v := os.Getenv(RequireEnv); v != "" && v != "0" {
			t.Fatalf("browser required (%s is set) but not available: %s", RequireEnv, why)
		}
		t.Skipf("browser not available: %s", why)
	}
}

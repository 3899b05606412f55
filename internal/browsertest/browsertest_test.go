package browsertest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/trawlhq/trawl/internal/browsertest"
)

// TestLaunchRendersAndRunsScripts loads a loopback page whose text a script
// writes late, waits for it on the condition, and posts a form.
func TestLaunchRendersAndRunsScripts(t *testing.T) {
	b := browsertest.Launch(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if r.Method == http.MethodPost {
			fmt.Fprintf(w, `<!doctype html><p id="got">%s</p>`, r.PostFormValue("q"))
			return
		}
		fmt.Fprint(w, `<!doctype html><title>t</title>
<form method="post"><input name="q" id="q"><button>go</button></form>
<p id="late"></p>
<script>setTimeout(() => { document.getElementById("late").textContent = "ready" }, 200)</script>`)
	}))
	defer srv.Close()

	p := b.NewPage()
	if _, err := p.Goto(srv.URL); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitForFunction(`() => document.getElementById("late").textContent === "ready"`, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Locator("#q").Fill("héllo"); err != nil {
		t.Fatal(err)
	}
	if err := p.Locator("button").Click(); err != nil {
		t.Fatal(err)
	}
	got := p.Locator("#got")
	if err := got.WaitFor(); err != nil {
		t.Fatal(err)
	}
	if s, err := got.TextContent(); err != nil || s != "héllo" {
		t.Fatalf("posted text = %q, %v", s, err)
	}
	shot := filepath.Join(t.TempDir(), "page.png")
	if _, err := p.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(shot)}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(shot); err != nil || fi.Size() == 0 {
		t.Fatalf("screenshot: %v", err)
	}
}

func TestAvailableNamesWhatIsMissing(t *testing.T) {
	t.Setenv("PLAYWRIGHT_DRIVER_PATH", t.TempDir())
	ok, why := browsertest.Available()
	if ok || !strings.Contains(why, "scripts/deps.sh") {
		t.Fatalf("Available() = %v, %q; want false naming scripts/deps.sh", ok, why)
	}
}

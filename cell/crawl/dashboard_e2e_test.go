package crawl

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/trawlhq/trawl/internal/browsertest"
)

// TestDashboardInChromium loads the real server's dashboard in headless
// Chromium, after real crawls have given it a permanent and a cold browser
// and an error: the values on screen are those of /monitor/health, the
// browsers table lists both browsers, the error log shows the 404, and the
// Cleanup button removes the cold browser, which the janitor log on screen
// and /monitor/browsers confirm. The page's screenshot is kept (its path is
// logged; $DASHBOARD_SCREENSHOT_DIR chooses the directory).
func TestDashboardInChromium(t *testing.T) {
	const token = "dash token/+" // needs escaping in the page's URL
	st := startSite(t)
	ts := startServer(t, Config{Token: token, PushEvery: 500 * time.Millisecond})

	// A default page (permanent browser: wait_for asks for one), a page in
	// an 800x600 viewport (a cold browser) and a missing page (an error log
	// line).
	crawl := func(req map[string]any) *taskAnswer {
		t.Helper()
		return poll(t, ts.URL, token, submit(t, ts.URL, token, req), 50*time.Millisecond, 2*time.Minute)
	}
	if a := crawl(map[string]any{"urls": st.URL + "/article.html", "wait_for": "main"}); a.Result == nil || !a.Result.Success {
		t.Fatalf("default page: %+v", a)
	}
	if a := crawl(map[string]any{"urls": st.URL + "/products.html",
		"browser_config": map[string]any{"viewport": map[string]int{"width": 800, "height": 600}}}); a.Result == nil || !a.Result.Success {
		t.Fatalf("page in 800x600: %+v", a)
	}
	if a := crawl(map[string]any{"urls": st.URL + "/missing.html", "wait_for": "body"}); a.Result == nil || a.Result.Success || a.Result.StatusCode != 404 {
		t.Fatalf("missing page: %+v", a)
	}

	var before BrowsersPayload
	call(t, "GET", ts.URL+"/monitor/browsers", token, nil, &before)
	if len(before.Permanent) != 1 || len(before.Cold) != 1 || len(before.Hot) != 0 {
		t.Fatalf("pool before the page: %+v", before)
	}
	permID, coldID := before.Permanent[0].BrowserID, before.Cold[0].BrowserID
	// The crawls are over: from here the request counters stand still (the
	// monitor's own routes are not counted), so the page must show exactly
	// what /monitor/health says.
	var h healthPayload
	call(t, "GET", ts.URL+"/monitor/health", token, nil, &h)
	if !h.Pool.Permanent.Active || h.Pool.Cold.Count != 1 || h.Stats.TotalRequests == 0 || h.Stats.SuccessRatePercent >= 100 {
		t.Fatalf("/monitor/health before the page: %+v", h)
	}

	// What a browser loading the page fetches without any header: the page
	// (token in its URL) and its script and style sheet (plain URLs in the
	// page). If these are refused, the dashboard is a blank page.
	for _, p := range []string{"/dashboard?token=" + url.QueryEscape(token), "/dashboard/dashboard.js", "/dashboard/dashboard.css"} {
		resp, err := http.Get(ts.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s as the browser asks for it (no Authorization header): %d %s", p, resp.StatusCode, body)
		}
	}

	b := browsertest.Launch(t)
	p := b.NewPage()
	if err := p.SetViewportSize(1280, 1500); err != nil {
		t.Fatal(err)
	}
	console := &pageConsole{}
	p.OnConsole(func(m playwright.ConsoleMessage) {
		if m.Type() == "error" || m.Type() == "warning" {
			console.add(m.Type() + ": " + m.Text())
		}
	})
	p.OnPageError(func(err error) { console.add("uncaught: " + err.Error()) })
	p.OnResponse(func(r playwright.Response) {
		if r.Status() >= 400 {
			console.add(fmt.Sprintf("HTTP %d for %s", r.Status(), r.URL()))
		}
	})
	if _, err := p.Goto(ts.URL + "/dashboard?token=" + url.QueryEscape(token)); err != nil {
		t.Fatal(err)
	}
	if t.Failed() {
		// The assets were refused: say what the page looks like and stop.
		shoot(t, p, "dashboard-blank.png")
		t.FailNow()
	}

	waitOn(t, p, "the socket connects", `#ws-status:text-is("connected")`)
	waitOn(t, p, "the first message is rendered", `#last-update:not([data-value=""])`)

	// Values on screen against /monitor/health at the same moment.
	want := map[string]string{
		"#pool-permanent": strconv.FormatBool(h.Pool.Permanent.Active),
		"#pool-cold":      strconv.Itoa(h.Pool.Cold.Count),
		"#pool-hot":       strconv.Itoa(h.Pool.Hot.Count),
		"#total-requests": strconv.FormatInt(h.Stats.TotalRequests, 10),
		"#success-rate":   jsNumber(h.Stats.SuccessRatePercent),
		"#avg-latency":    jsNumber(h.Stats.AvgLatencyMS),
	}
	for sel, v := range want {
		waitOn(t, p, fmt.Sprintf("%s shows %s as /monitor/health does", sel, v), fmt.Sprintf(`%s[data-value=%q]`, sel, v))
	}
	if s := textOf(t, p, "#pool-permanent"); s != "active" {
		t.Errorf("#pool-permanent text = %q, want active", s)
	}
	if s := textOf(t, p, "#pool-permanent-id"); s != h.Pool.Permanent.BrowserID {
		t.Errorf("#pool-permanent-id = %q, want %q", s, h.Pool.Permanent.BrowserID)
	}
	if s := textOf(t, p, "#success-rate"); s != fmt.Sprintf("%.1f%%", h.Stats.SuccessRatePercent) {
		t.Errorf("#success-rate text = %q, want %.1f%%", s, h.Stats.SuccessRatePercent)
	}
	// Memory and CPU move between two samples: the same order of magnitude
	// as /monitor/health's, not the same figure.
	var now healthPayload
	call(t, "GET", ts.URL+"/monitor/health", token, nil, &now)
	if mb, err := strconv.ParseFloat(attrOf(t, p, "#memory-mb", "data-value"), 64); err != nil || mb <= 0 ||
		math.Abs(mb-float64(now.Container.MemoryMB)) > 0.5*float64(now.Container.MemoryMB) {
		t.Errorf("#memory-mb = %v (%v), /monitor/health says %.1f MB", mb, err, now.Container.MemoryMB)
	}
	if lim := attrOf(t, p, "#memory-limit-mb", "data-value"); lim != jsNumber(now.Container.MemoryLimitMB) {
		t.Errorf("#memory-limit-mb = %q, /monitor/health says %v", lim, now.Container.MemoryLimitMB)
	}

	// The browsers table: the permanent browser and the cold one.
	waitOn(t, p, "2 browsers in the table", `#browsers[data-count="2"]`)
	waitOn(t, p, "the permanent browser's row", fmt.Sprintf(`#browsers-permanent tr[data-key=%q]`, permID))
	waitOn(t, p, "the cold browser's row", fmt.Sprintf(`#browsers-cold tr[data-key=%q]`, coldID))
	if s := textOf(t, p, fmt.Sprintf(`#browsers-cold tr[data-key=%q] td[data-field="config"]`, coldID)); s != "viewport=800x600" {
		t.Errorf("cold browser's config on screen = %q", s)
	}
	if s := attrOf(t, p, fmt.Sprintf(`#browsers-permanent tr[data-key=%q] td[data-field="request_count"]`, permID), "data-value"); s != "2" {
		t.Errorf("permanent browser's request_count on screen = %q, want 2 (article and missing page)", s)
	}

	// The error log: the 404 page.
	waitOn(t, p, "the 404 in the error log", `#error-log > li:has-text("404"):has-text("/missing.html")`)

	// The endpoint statistics and the recent requests came from the server.
	waitOn(t, p, "endpoint statistics", `#endpoint-stats tr[data-key="/crawl"]`)
	waitOn(t, p, "recent requests", `#completed-requests tr[data-key]`)

	// Cleanup: the cold browser goes, and the janitor log on screen says so.
	janitorBefore, _ := p.Locator(fmt.Sprintf(`#janitor-log > li[data-browser-id=%q]`, coldID)).Count()
	if janitorBefore != 0 {
		t.Errorf("janitor log mentions %s before the cleanup", coldID)
	}
	if err := p.Locator("#btn-cleanup").Click(); err != nil {
		t.Fatal(err)
	}
	waitOn(t, p, "cleanup result", `#cleanup-result[data-cleaned-count]`)
	if n, err := strconv.Atoi(attrOf(t, p, "#cleanup-result", "data-cleaned-count")); err != nil || n < 1 {
		t.Errorf("#cleanup-result data-cleaned-count = %d (%v), want ≥ 1; text %q", n, err, textOf(t, p, "#cleanup-result"))
	}
	if s := textOf(t, p, "#cleanup-result"); !strings.Contains(s, "1 browser removed") {
		t.Errorf("#cleanup-result = %q", s)
	}
	waitOn(t, p, "the janitor log line about the removed browser",
		fmt.Sprintf(`#janitor-log > li[data-browser-id=%q][data-action="remove_idle"]:has-text(%q)`, coldID, coldID))
	waitOn(t, p, "the cleanup's own janitor line", `#janitor-log > li[data-action="cleanup"]`)
	var after BrowsersPayload
	call(t, "GET", ts.URL+"/monitor/browsers", token, nil, &after)
	if len(after.Cold) != 0 || len(after.Hot) != 0 || len(after.Permanent) != 1 || after.Permanent[0].BrowserID != permID {
		t.Errorf("/monitor/browsers after the cleanup: %+v", after)
	}
	// The next push shows the pool without it.
	waitOn(t, p, "cold count 0", `#pool-cold[data-value="0"]`)
	waitOn(t, p, "the cold browser's row gone", fmt.Sprintf(`#browsers tr[data-key=%q]`, coldID), true)
	waitOn(t, p, "1 browser in the table", `#browsers[data-count="1"]`)
	// The cleanup POST is a counted request: the screen follows.
	call(t, "GET", ts.URL+"/monitor/health", token, nil, &now)
	waitOn(t, p, "total requests after the cleanup", fmt.Sprintf(`#total-requests[data-value="%d"]`, now.Stats.TotalRequests))

	shoot(t, p, "dashboard-real-server.png")
	if errs := console.take(); len(errs) != 0 {
		t.Errorf("console errors on the page:\n%s", strings.Join(errs, "\n"))
	}
}

// pageConsole collects a page's console errors, uncaught exceptions and
// failed responses.
type pageConsole struct {
	mu   sync.Mutex
	errs []string
}

func (c *pageConsole) add(s string) { c.mu.Lock(); c.errs = append(c.errs, s); c.mu.Unlock() }

func (c *pageConsole) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.errs
	c.errs = nil
	return out
}

// waitOn waits until an element matches selector (or, with gone, until none
// does). The page's CSP forbids eval, so no WaitForFunction: conditions are
// selectors on data-value and friends.
func waitOn(t *testing.T, p playwright.Page, what, selector string, gone ...bool) {
	t.Helper()
	state := playwright.WaitForSelectorStateAttached
	if len(gone) > 0 && gone[0] {
		state = playwright.WaitForSelectorStateDetached
	}
	if err := p.Locator(selector).First().WaitFor(playwright.LocatorWaitForOptions{State: state, Timeout: playwright.Float(20_000)}); err != nil {
		body, _ := p.Locator("body").InnerText()
		t.Fatalf("waiting until %s (%s): %v\npage text:\n%s", what, selector, err, body)
	}
}

func attrOf(t *testing.T, p playwright.Page, sel, name string) string {
	t.Helper()
	v, err := p.Locator(sel).First().GetAttribute(name)
	if err != nil {
		t.Fatalf("%s %s: %v", sel, name, err)
	}
	return v
}

func textOf(t *testing.T, p playwright.Page, sel string) string {
	t.Helper()
	s, err := p.Locator(sel).First().TextContent()
	if err != nil {
		t.Fatalf("%s text: %v", sel, err)
	}
	return s
}

// jsNumber is String(v) in JavaScript for the payload's one-decimal
// numbers: Go's shortest formatting agrees for them.
func jsNumber(v Number) string { return strconv.FormatFloat(float64(v), 'f', -1, 64) }

// shoot keeps a full-page screenshot in $DASHBOARD_SCREENSHOT_DIR, else in
// the test's temporary directory, and logs where.
func shoot(t *testing.T, p playwright.Page, name string) {
	t.Helper()
	dir := os.Getenv("DASHBOARD_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if _, err := p.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(path), FullPage: playwright.Bool(true)}); err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Size() == 0 {
		t.Fatalf("screenshot %s not written: %v", path, err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, fi.Size())
}

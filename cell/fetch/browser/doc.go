// Package browser is trawl's browser fetch engine: pages rendered by
// headless Chromium (Debian's chromium, driven through playwright-go and the
// playwright-core driver), in a pool that bounds what they cost and never
// leaves a process behind.
//
// # Use
//
//	pool, err := browser.NewPool(ctx, browser.Config{})   // starts the driver and the browsers
//	defer pool.Close()
//	eng := browser.NewEngine(pool, browser.EngineConfig{})
//	resp, err := eng.Fetch(ctx, &fetch.Request{URL: u, Browser: &fetch.BrowserOptions{WaitFor: "#app li"}})
//
// Engine implements fetch.Engine. Response.Body is the DOM after the page's
// scripts, the request's JS, WaitFor and Delay, serialised by the browser
// (always UTF-8 text/html). Status and Header are those of the document
// captured: the main frame's last navigation response, so a challenge
// page that answers 503, sets a cookie and reloads reports the 200 of the
// page it reloads to (redirect hops and 204/205 answers, which replace no
// document, are skipped; Redirects counts the hops of that last
// navigation). A capture that meets the page mid-navigation waits for the
// new document and tries again. Response.Proto is empty: the browser does
// not report it. A document that is a PDF shows as Chromium's viewer,
// whose DOM holds none of its text: the engine then reads the page's URL
// again with fetch() from the page (through the guard, with its cookies
// and headers) and returns those bytes as application/pdf.
//
// BrowserOptions.Actions run after JS, WaitFor and Delay, in order
// (actions.go): waits, clicks, typing, key presses, scrolls, screenshots,
// scripts whose values come back, copies of the page; then the page is
// captured. An action waits for its element at most
// EngineConfig.ElementWait and never more than half the time left before
// the page deadline, so a missing element fails as an *ActionError
// (ErrAction) in time to say so; the actions' pauses extend the default
// page deadline. Their results are Response.Actions, at most four times
// MaxBodyBytes together.
//
// # Pool
//
// A Pool runs Config.Browsers browsers (default 1, which suits 2 cores)
// and lends out at most Browsers × PagesPerBrowser pages (default 4) at a
// time. A request waits for a page slot at most AcquireTimeout (default 5
// s), first come first served, and then fails with fetch.ErrFleetBusy (the
// API's 503 fleet-busy, not charged). It then goes to the serving browser
// with the fewest pages open. A single /scrape answers that 503 at once;
// batches and jobs, which run more fetches than there are pages (16 job
// workers by default), wait it out instead: their URLs ask again with
// jittered, doubling pauses (from 1 s, at most 15 s) for up to 2 minutes
// per URL (cell.Config.FleetBusyWait, jobs.BusyRetry), and only then
// record fleet-busy. Closing the cell ends the wait and leaves a job's URL
// pending.
//
// Every request gets a browser context of its own, created for it with its
// user agent, viewport, extra headers, cookies and proxy route, and closed
// after it: no cookie, storage or cache passes between callers. Cookies
// (a recipe's session) live only in that context and are never logged; a
// cookie the browser refuses is reported without its value.
//
// The exception is a Session (Engine.NewSession), what the crawl server
// keeps per session_id: a context kept between the session's requests, so
// cookies and storage stay. It is created by the session's first request
// (with its options), each request gets a new page in it, one at a time,
// and a page deadline closes that page, not the context. The context lives
// in one browser: when that browser dies, is recycled or its pool closes,
// the session's next request starts an empty one. Session.Close closes it.
//
// # Deadlines
//
// Each page has a deadline (BrowserOptions.Timeout, else
// EngineConfig.Timeout, default 60 s), bounded by the caller's context.
// Every playwright call that takes a timeout gets the time left. Calls
// that take none (evaluate, content, new context or page) are covered by a
// watchdog: when the deadline passes or the caller gives up, the page's
// context is closed, which fails whatever call is pending on it, a script
// stuck in `new Promise(() => {})` or `while (true) {}` included. If even
// that does not end the request within CloseGrace (default 5 s), the
// browser is killed and handled as crashed. The same bound applies to
// closing a context after a page: a browser that cannot close one dies.
//
// # Recycling
//
// A browser is replaced after RecycleAfterPages pages (default 200) or
// when its memory passes RecycleAboveMB (default 1024 MiB), read every
// MemoryCheckInterval (default 5 s) as the PSS of all its processes (from
// /proc/<pid>/smaps_rollup). The replacement is started first; then new
// pages go to it while the old browser drains: it finishes the pages it
// has and is closed when the last one ends. Pool.Stats counts browsers,
// pages in use and served, launches, recycles, crashes, retries and
// fleet-busy refusals; Pool.PSS measures memory now.
//
// # Crashes
//
// A browser that dies (its process killed, its connection lost) is
// removed at once, what is left of its processes is killed, and a
// replacement is started. Each request that was on it runs once more, on
// the replacement, keeping its page slot; a second crash fails it with
// ErrCrashed. A browser that does not start is retried with backoff;
// requests waiting for it fail with the launch error.
//
// The playwright driver (the node process every browser hangs on) is
// watched too: its process is found among this process's children by its
// private directory and looked at every 200 ms (and a launch that fails
// on a closed connection says the same when it could not be found). When
// it dies, every browser died with it: each is reaped and handled as
// crashed (its requests retried once), then a new driver is started and
// browsers on it, with the same backoff (500 ms doubling to 30 s) while
// that fails. Stats.DriverRestarts counts the restarts.
//
// A pool starts a driver of its own, unless Config.Driver gives it one
// to share (NewDriver): the crawl server runs all its pool browsers, each
// a Pool of one Chromium, on one driver (one node process of about 45 MB
// instead of one per browser). When a shared driver dies, every pool on
// it handles its own browsers as above, and the first to need a driver
// starts one, once, for all: the others wait for that start and use it.
// The pools are closed before the driver.
//
// # Health
//
// Stats.Healthy is false while no browser serves and the last attempt to
// start one, or the driver, failed: browser requests then fail at once
// with that error instead of waiting. A pool between a crash and its
// replacement is healthy. The cell's /health shows the pool under
// "browser" (browsers, pages_in_use, launch_failures, crashes, retries,
// fleet_busy, driver_restarts, healthy...). An unhealthy pool makes the
// cell's status "degraded", still with 200: plain pages, cache hits and
// jobs' bookkeeping work, and the pool recovers by itself, so the cell
// must not be taken out of service for it; the field is for operators and
// alerts.
//
// # Processes
//
// Playwright starts each browser as the leader of a process group, and
// Chromium's zygotes, renderers, GPU and utility processes stay in it.
// Debian's build also starts two crashpad handlers that daemonise out of
// the group; each browser gets its own dump directory
// (BREAKPAD_DUMP_LOCATION), which names them on their command line. A
// browser's processes are its group plus those handlers: that is what
// PSS sums and what is killed when a browser is closed, recycled or dead,
// with a check of the executable so that a reused group id never hits an
// unrelated process. Close closes every browser, kills what is left,
// stops the driver and removes the pool's temporary directory; when it
// returns nothing of the pool runs. If the process owning the pool is
// killed, the driver sees its input close and closes the browsers itself,
// and the next pool on the machine removes the directory it left.
//
// The driver runs from a private directory of two symbolic links (node and
// the unpacked playwright-core package), so the pool needs no environment
// variable; it never installs anything (no playwright.Install). CheckInstall
// says what is missing: `bash scripts/deps.sh browser` installs it all.
//
// # Network guard
//
// The browser must never reach a non-public address, on any hop:
// redirects, subresources, fetch and XHR, frames, WebSockets. Chromium is
// therefore launched with the pool's own forward proxy as its proxy
// server (loopback included, <-loopback>), and no name resolution of its
// own (--host-resolver-rules maps every name to nothing) nor WebRTC UDP
// outside the proxy. The proxy (package cell/fetch/guardproxy), in this
// process, speaks HTTP forward proxying and CONNECT (TLS, WebSockets),
// checks every target's host like
// urlpolicy.Validate, resolves names itself and checks every address it
// dials with urlpolicy.IsPublic at connect time, exactly as the HTTP engine's
// dialer does; so DNS rebinding and redirects to private addresses are
// refused wherever they occur. Config.AllowPrivateNetworks turns the guard
// off (tests, local use), like the HTTP engine's flag. A main document the
// guard refused fails with fetch.ErrNotPublic; refused subresources fail
// inside the page (a 403 from the proxy, or a failed tunnel).
//
// Each browser context gets a route of the proxy: a listener on its own
// loopback port, passed to the context as its proxy server. The route
// carries the context's upstream proxy (BrowserOptions.Proxy: an http,
// https or socks5 URL with credentials, from the cell's proxy pools), so
// one browser serves pages through different upstreams at once, and a
// page cannot choose or forge its route: the port it reaches is fixed by
// the browser per context. With an upstream, the guard still checks the
// target's host, and refuses a name that resolves here to a private
// address, before handing it to the upstream, which resolves and dials
// it on its own network.
//
// A main document the upstream proxy itself failed (nothing listens, it
// refuses the credentials with 407, 401 or 403, or answers CONNECT with
// 502 Bad Gateway) fails with fetch.ErrProxy, as in the HTTP engine
// (fetch.ProxyRefusedConnect), so the ladder tries the next proxy of the
// pool; other refusals of CONNECT (500, 503, 504: what proxies answer for
// a site that does not answer) are fetch.ErrUnreachable. These errors
// never name the proxy's address or credentials.
//
// # Tests and their cost
//
// Every page gets a fresh context, hence a fresh renderer process, and
// costs Chromium about a second of CPU even when it is tiny
// (docs/performance.md, "What a fresh-context page costs"). So
// TestFiveHundredPagesLeaveNoProcesses runs 60 pages by default and the
// full 500 with TRAWL_BROWSER_LEAK_PAGES=500: 500 pages within the suite's
// budget would take sharing renderers between requests, which the
// isolation above forbids.
package browser

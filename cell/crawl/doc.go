// Package crawl is the self-hosted crawl server: the crawl-task API of
// docs/spec/crawl-server.md, which Crawl4AI-style clients talk to unchanged
// (`trawl crawl`, port 11235). A Server is created with New, serves
// Handler and is stopped with Close; cmd/trawl fills its Config from flags
// and the spec's environment variables (Config.FromEnv).
//
// # Parts
//
//   - Tasks: POST /crawl validates a request, stores it as a task and
//     queues it; a fixed set of workers (MAX_CONCURRENT_TASKS) runs the
//     queue by priority, and GET /task/{task_id} answers the task with its
//     result or results until its ttl runs out. Tasks survive a restart:
//     those accepted and not finished run again at the next start.
//   - Streams: POST /crawl/stream runs a crawl in a slot of the same
//     workers and writes one NDJSON line per URL as it completes.
//   - Legacy routes: POST /crawl_sync (a task, waited for up to 60 s) and
//     POST /crawl_direct (a crawl outside the queue), as Crawl4AI v0.4.
//   - Crawl4AI 0.5+'s API (issue 32): a /crawl or /crawl/stream body with
//     typed browser_config/crawler_config is answered synchronously in
//     CrawlResult's shape; /crawl/job (a task of that API), /md, /html,
//     /screenshot, /pdf, /execute_js, /llm/{url}, /token, /schema, /ask,
//     /config/dump; BFS, DFS and best-first deep crawls.
//   - Crawling: a URL whose request needs a browser (a script, a wait, a
//     screenshot, a viewport...) is rendered by a pool browser; any other
//     is served by the page cache or the cell's engine ladder (plain HTTP
//     first). Either way it is turned into Markdown, links, media and
//     metadata, and passed through the request's extraction strategy
//     (package extract). Result.Engine says what served it.
//   - Webhooks: a task's webhook_config is delivered by package
//     internal/webhook when the task finishes.
//   - Browser pool: one permanent browser, hot and cold ones started on
//     demand, shed under memory pressure and swept when idle by the
//     janitor (docs/spec/crawl-server.md §3), all on one Playwright driver
//     (browser.Driver, restarted once for all when it dies). A request's
//     session_id keeps its browser context between requests (bounded,
//     least recently used closed first, expired by the janitor).
//   - Operations monitor: /monitor/* (health, requests, browsers, endpoint
//     statistics, timeline, janitor and error logs, actions), the
//     WebSocket /monitor/ws and the dashboard (package dashboard). CPU and
//     memory come from internal/sysstat.
//   - Access: with SERVICE_API_TOKEN set, every route but /health and /
//     needs it; cross-origin calls are answered as v0.4 did (CORS).
//
// # Files
//
//   - server.go: Config, New, Close; the janitor and the system samples.
//   - routes.go: the route table and the HTTP plumbing every route shares
//     (token check, method check, request tracking, JSON answers).
//   - task_handlers.go: /crawl, /crawl/stream and /task/{task_id}.
//   - monitor_handlers.go: /health, /monitor/* and /monitor/ws.
//   - request.go: the request body and its validation into a plan.
//   - tasks.go: the task store and the priority scheduler.
//   - crawl.go: crawling one URL into a Result.
//   - engines.go: the page cache and the engine ladder for pages that
//     need no browser.
//   - jsonvalues.go: JSON forms v0.4 clients expect (floats that stay
//     floats, null for empty fields).
//   - pool.go: the browser pool tiers and the sessions.
//   - c4a_config.go: Crawl4AI's serialized configurations, parsed
//     against an allow-list; c4a_plan.go: a body of that API into a plan
//     (and bodyShape, which API a body is); c4a_result.go: CrawlResult,
//     citations, the BM25 filter; c4a_deep.go: deep crawls;
//     c4a_handlers.go and c4a_dump.go: that API's routes.
//   - monitor.go: the monitor's counters, rings and timeline.
package crawl

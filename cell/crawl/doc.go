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
//   - Crawling: each URL is rendered by a pool browser, turned into
//     Markdown, links, media and metadata, and passed through the
//     request's extraction strategy (package extract).
//   - Browser pool: one permanent browser, hot and cold ones started on
//     demand, shed under memory pressure and swept when idle by the
//     janitor (spec section 3).
//   - Operations monitor: /monitor/* (health, requests, browsers, endpoint
//     statistics, timeline, janitor and error logs, actions), the
//     WebSocket /monitor/ws and the dashboard (package dashboard). CPU and
//     memory come from internal/sysstat.
//   - Access: with SERVICE_API_TOKEN set, every route but /health needs it.
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
//   - pool.go: the browser pool tiers.
//   - monitor.go: the monitor's counters, rings and timeline.
package crawl

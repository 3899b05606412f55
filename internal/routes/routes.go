// Package routes is the gate's route table: every route the public address
// of a region serves, in one list, with what the gate must know of each —
// whether it needs a key, the call kind it bills, who answers it (the gate,
// any cell of the region, or the cell or region that owns the object it
// names), the grammar of that object's id, and the body it accepts. The
// gate's modules read it (caddy-modules/trace, auth, body, meter, api and
// route in Provision, ratelimit for the rows that relay), the gate registers its
// own handlers from it, and the cell registers its handlers from it: a new
// service is a row here and a handler there (docs/architecture.md).
//
// Patterns are net/http.ServeMux patterns ("POST /scrape/jobs/{id}/retry")
// and matching is ServeMux's: the most specific path wins, and a request
// whose method a path does not take still belongs to that path's route (its
// server answers 405 with Allow).
//
// The package imports nothing heavy, so the cell links it without Caddy.
package routes

import (
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/trawlhq/trawl/internal/jobid"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/monid"
)

// Server is who answers a route.
type Server uint8

// Servers.
const (
	// Gate: the gate answers it itself, with the handler the row's Service
	// names (search, answer and recipe health among them, which it
	// gathers from every live cell of the region).
	Gate Server = iota + 1
	// Cell: any live cell of the region.
	Cell
	// Owner: the cell that owns the object the route's {id} names, in this
	// region, or the gate of the region that owns it.
	Owner
)

func (s Server) String() string {
	switch s {
	case Gate:
		return "gate"
	case Cell:
		return "cell"
	case Owner:
		return "owner"
	}
	return fmt.Sprintf("Server(%d)", s)
}

// Grammar is the grammar of an owned object's id: Parse names the region
// and cell that own it.
type Grammar struct {
	// Name is the object ("job"), for messages.
	Name string
	// Parse returns the owner of id, or false when id is not of this
	// grammar (the object cannot exist; a cell answers 404).
	Parse func(id string) (region, cell string, ok bool)
	// Placed: an id that names no cell (Parse's cell "") goes to the
	// cell the region's ready cells place it on (members.Rendezvous over
	// the id), not to any live cell.
	Placed bool
}

// Jobs is the grammar of job ids (internal/jobid).
var Jobs = &Grammar{Name: "job", Parse: jobid.Parse, Placed: true}

// Monitors is the grammar of monitor ids (internal/monid).
var Monitors = &Grammar{Name: "monitor", Parse: monid.Parse}

// EnvelopeFirecrawl is the error envelope of Firecrawl's v2 API.
const EnvelopeFirecrawl = "firecrawl"

// RoleOperator is the key role of the operator routes (ledger.RoleOperator).
const RoleOperator = "operator"

// Body limits.
const (
	// KiB and MiB are units of BodyLimit.
	KiB = 1 << 10
	MiB = 1 << 20
	// ScrapeBody bounds a scrape or batch request.
	ScrapeBody = 1 * MiB
	// JobBody bounds a job submission: 10,000 long URLs fit.
	JobBody = 32 * MiB
	// FormBody bounds the gate's small JSON and form bodies (settings,
	// keys, sign-up).
	FormBody = 16 * KiB
	// ExtractBody bounds an extract request: 2 MiB of pasted content
	// (cell/extract.MaxContent, JSON-escaped) with its schema and example.
	ExtractBody = 4 * MiB
	// MonitorBody bounds a monitor's create or patch body (a schema of
	// up to 64 KiB with the other fields).
	MonitorBody = 128 * KiB
	// RecipeBody bounds a recipe run's inputs (a session is at most 8 KiB).
	RecipeBody = 64 * KiB
	// MCPBody bounds one message to the tool server: an extract call's
	// pasted content (ExtractBody) inside its JSON-RPC envelope.
	MCPBody = ExtractBody + 1*MiB
)

// Route is one row of the table.
type Route struct {
	// Pattern is a ServeMux pattern: "METHOD /path/{wildcard}", or a path
	// alone for a route that takes every method. A path ending in "/" is a
	// prefix: it holds every path below it that no other row names.
	Pattern string
	// Public routes need no API key (the handler may still check one, as
	// the checkout completion does).
	Public bool
	// Envelope is the error body the route's clients read: "" is trawl's
	// {"error": code, "message": …}; EnvelopeFirecrawl is Firecrawl's
	// {"success": false, "error": message, "code": code, "details": …},
	// which the gate's refusals on the row take too (trawl_errors).
	Envelope string
	// Role is the key role the route needs ("operator"); "" takes any
	// key. trawl_auth refuses a key of another role with 403 before the
	// body is read, as it refuses a missing key with 401.
	Role string
	// Kind is the call kind the gate bills (internal/metering); "" is free.
	Kind string
	// PerURL: the call's count is the number of urls in its body (a batch,
	// a job); otherwise it is one.
	PerURL bool
	// Server answers the route.
	Server Server
	// Service names the gate's handler for a Gate row (see gate.Runtime's
	// Handler): health, ledger, monstore, recipestore, signup, billing,
	// estimate, usage, search, mcp, issues, operator, recipes.
	Service string
	// Owner is the grammar of {id} on an Owner row.
	Owner *Grammar
	// AnyCell: while the owner of {id} is not live, another clustered
	// cell of its region answers from the region's job log (a read, or a
	// cancel sent to the owner through it: cell/jobs/logread.go), the
	// one gate.Runtime.StandIn picks; otherwise the gate answers 503
	// cell_unavailable until the owner is back.
	AnyCell bool
	// RegionQuery: ?region=<r> names the region whose gate answers; this
	// gate when absent or its own.
	RegionQuery bool
	// Relay: the route's requests are counted by the calls they make
	// through the gate's own pipeline, not themselves (the tool server,
	// whose tool calls each go through the gate as the route they stand
	// for): the rate limiter lets them pass, so a tool call never holds a
	// place in flight that its own inner call would need.
	Relay bool
	// BodyLimit is the largest body the route accepts, in bytes; 0 takes
	// no body. The gate enforces it before reading a body (trawl_body);
	// the handler decodes within it.
	BodyLimit int64
	// Doc says what the route is, with the spec section.
	Doc string
}

// Method is the route's method; "" for every method.
func (r *Route) Method() string {
	m, _, ok := strings.Cut(r.Pattern, " ")
	if !ok {
		return ""
	}
	return m
}

// Path is the route's path pattern.
func (r *Route) Path() string {
	if _, p, ok := strings.Cut(r.Pattern, " "); ok {
		return p
	}
	return r.Pattern
}

// Prefix reports whether the route holds every path below its own.
func (r *Route) Prefix() bool { return strings.HasSuffix(r.Path(), "/") }

// Rows is the table. Keep it in the order of docs/architecture.md.
var Rows = []Route{
	// The gate's own.
	{Pattern: "GET /health", Public: true, Server: Gate, Service: "health", Doc: "the gate's health: ledger voter and the region's cells"},
	{Pattern: "/internal/", Public: true, Server: Gate, Service: "ledger", BodyLimit: 64 * MiB, Doc: "the ledger voters' internal routes (they check the ledger secret)"},
	{Pattern: "/monitor-store/", Public: true, Server: Gate, Service: "monstore", BodyLimit: 64 * MiB, Doc: "the region's monitor store, for its cells (they sign with the region's keys; docs/monitors.md)"},
	{Pattern: "/recipe-store/", Public: true, Server: Gate, Service: "recipestore", BodyLimit: 64 * KiB, Doc: "the operator recipes, for the region's cells (they sign with the region's keys; docs/operations.md)"},
	{Pattern: "POST /webhook-secret", Public: true, Server: Gate, Service: "hooksecret", BodyLimit: 4 * KiB, Doc: "an account's webhook secret, made on its first use, for the region's cells (they sign with the region's keys; docs/firecrawl.md)"},
	{Pattern: "GET /signup", Public: true, Server: Gate, Service: "signup", Doc: "sign-up page"},
	{Pattern: "POST /signup", Public: true, Server: Gate, Service: "signup", BodyLimit: FormBody, Doc: "sign-up form"},
	{Pattern: "GET /signup/verify", Public: true, Server: Gate, Service: "signup", Doc: "e-mail verification page"},
	{Pattern: "POST /signup/verify", Public: true, Server: Gate, Service: "signup", BodyLimit: FormBody, Doc: "e-mail verification form"},
	{Pattern: "/signup/", Public: true, Server: Gate, Service: "signup", Doc: "other sign-up pages: 404 page"},
	{Pattern: "GET /v1/prices", Public: true, Server: Gate, Service: "billing", Doc: "the price table (§7)"},
	{Pattern: "GET /v1/keys", Server: Gate, Service: "signup", Doc: "list API keys"},
	{Pattern: "POST /v1/keys", Server: Gate, Service: "signup", BodyLimit: FormBody, Doc: "create an API key"},
	{Pattern: "DELETE /v1/keys/{id}", Server: Gate, Service: "signup", Doc: "revoke an API key"},
	{Pattern: "POST /v1/estimate", Server: Gate, Service: "estimate", BodyLimit: 32 * MiB, Doc: "price estimate of a call (§2.10)"},
	{Pattern: "GET /v1/billing/usage", Server: Gate, Service: "usage", RegionQuery: true, Doc: "usage history of a region (?region=, §2.8)"},
	{Pattern: "GET /v1/billing/balance", Server: Gate, Service: "billing", Doc: "balance"},
	{Pattern: "POST /v1/billing/settings", Server: Gate, Service: "billing", BodyLimit: FormBody, Doc: "spend cap and auto-recharge"},
	{Pattern: "POST /v1/billing/topup", Server: Gate, Service: "billing", Doc: "buy credits (§2.10)"},
	{Pattern: "GET /v1/billing/checkout/{session}/complete", Public: true, Server: Gate, Service: "billing", Doc: "return from a checkout page"},
	{Pattern: "POST /v1/billing/checkout/{session}/complete", Public: true, Server: Gate, Service: "billing", Doc: "complete a checkout (the handler checks the key)"},
	{Pattern: "/v1/billing/checkout/", Public: true, Server: Gate, Service: "billing", BodyLimit: 4 * KiB, Doc: "the local payment provider's checkout pages (GET, POST /v1/billing/checkout/{session}) when one is configured; 404 otherwise"},
	{Pattern: "GET /v1/ledger/journal", Server: Gate, Service: "billing", Doc: "the account's journal entries"},
	{Pattern: "/v1/", Server: Gate, Service: "billing", Doc: "other /v1/ paths: 404"},
	{Pattern: "GET /v2/team/credit-usage", Server: Gate, Service: "billing", Envelope: EnvelopeFirecrawl, Doc: "Firecrawl v2: the account's remaining credits and its plan's monthly grant (docs/firecrawl.md)"},
	{Pattern: "GET /v2/team/token-usage", Server: Gate, Service: "billing", Envelope: EnvelopeFirecrawl, Doc: "Firecrawl v2: the model tokens the balance buys (docs/firecrawl.md)"},
	{Pattern: "GET /search", Kind: metering.KindSearch, Server: Gate, Service: "search", Doc: "search the region's index: the gate merges its live cells' results (§2.3, docs/search.md)"},
	{Pattern: "GET /answer", Kind: metering.KindAnswer, Server: Gate, Service: "search", Doc: "answer from the region's index, experimental (§2.4, docs/search.md)"},
	{Pattern: "POST /mcp", Server: Gate, Service: "mcp", Relay: true, BodyLimit: MCPBody, Doc: "the tool server for MCP clients, streamable HTTP; each tool call goes through this gate as the route it stands for, limited and billed as that route (§4.1, docs/mcp.md)"},
	{Pattern: "POST /v1/issues", Server: Gate, Service: "issues", BodyLimit: FormBody, Doc: "report a problem to the operators; answers its reference (the report_issue tool, docs/mcp.md)"},
	{Pattern: "GET /operator/v1/issues", Server: Gate, Service: "issues", Role: RoleOperator, Doc: "operator: the reported problems, newest first (an operator key only; docs/mcp.md)"},
	// The operator API (an operator key only; docs/operations.md).
	{Pattern: "GET /operator/v1/cells", Server: Gate, Service: "operator", Role: RoleOperator, Doc: "operator: the region's cells, live or known, and which are drained"},
	{Pattern: "POST /operator/v1/cells/{name}/drain", Server: Gate, Service: "operator", Role: RoleOperator, Doc: "operator: send a cell no new work (its own jobs and monitors stay with it)"},
	{Pattern: "DELETE /operator/v1/cells/{name}/drain", Server: Gate, Service: "operator", Role: RoleOperator, Doc: "operator: undo a drain"},
	{Pattern: "DELETE /operator/v1/cells/{name}", Server: Gate, Service: "operator", Role: RoleOperator, Doc: "operator: forget a cell that is down for good (its ids answer 404)"},
	{Pattern: "POST /operator/v1/accounts", Server: Gate, Service: "operator", Role: RoleOperator, BodyLimit: FormBody, Doc: "operator: create an account"},
	{Pattern: "GET /operator/v1/accounts/{account}", Server: Gate, Service: "operator", Role: RoleOperator, Doc: "operator: an account"},
	{Pattern: "POST /operator/v1/accounts/{account}/grants", Server: Gate, Service: "operator", Role: RoleOperator, BodyLimit: FormBody, Doc: "operator: grant an account free credit (a refund; idempotent by id)"},
	{Pattern: "GET /operator/v1/accounts/{account}/keys", Server: Gate, Service: "operator", Role: RoleOperator, Doc: "operator: an account's keys"},
	{Pattern: "POST /operator/v1/accounts/{account}/keys", Server: Gate, Service: "operator", Role: RoleOperator, BodyLimit: FormBody, Doc: "operator: create a key of any role for an account"},
	{Pattern: "DELETE /operator/v1/accounts/{account}/keys/{id}", Server: Gate, Service: "operator", Role: RoleOperator, Doc: "operator: revoke an account's key"},
	{Pattern: "GET /operator/v1/prices", Server: Gate, Service: "operator", Role: RoleOperator, Doc: "operator: the price table in force and its version"},
	{Pattern: "PUT /operator/v1/prices", Server: Gate, Service: "operator", Role: RoleOperator, BodyLimit: MiB, Doc: "operator: replace the price table, replicated to every region through the ledger"},
	{Pattern: "GET /operator/v1/plans", Server: Gate, Service: "operator", Role: RoleOperator, Doc: "operator: the plans' limits and monthly credits"},
	{Pattern: "PUT /operator/v1/plans/{plan}", Server: Gate, Service: "operator", Role: RoleOperator, BodyLimit: FormBody, Doc: "operator: change a plan (a change of the price table)"},
	{Pattern: "GET /operator/v1/recipes", Server: Gate, Service: "operator", Role: RoleOperator, Doc: "operator: the operator recipes kept in the ledger (every region's)"},
	{Pattern: "GET /operator/v1/recipes/{name}", Server: Gate, Service: "operator", Role: RoleOperator, Doc: "operator: one operator recipe, manifest and body"},
	{Pattern: "PUT /operator/v1/recipes/{name}", Server: Gate, Service: "operator", Role: RoleOperator, BodyLimit: 24 * MiB, Doc: "operator: add or replace a recipe, replicated to every region's cells through the ledger (staged until two checks pass)"},
	{Pattern: "DELETE /operator/v1/recipes/{name}", Server: Gate, Service: "operator", Role: RoleOperator, Doc: "operator: remove an operator recipe from every region"},
	{Pattern: "/operator/", Server: Gate, Service: "operator", Role: RoleOperator, Doc: "operator: other paths: 404 (403 without an operator key)"},

	// The cells'.
	{Pattern: "POST /scrape", Kind: metering.KindScrape, Server: Cell, BodyLimit: ScrapeBody, Doc: "scrape one page (§4)"},
	{Pattern: "POST /scrape/batch", Kind: metering.KindBatch, PerURL: true, Server: Cell, BodyLimit: ScrapeBody, Doc: "scrape up to 100 pages, NDJSON (§4)"},
	{Pattern: "POST /scrape/jobs", Kind: metering.KindJob, PerURL: true, Server: Cell, BodyLimit: JobBody, Doc: "submit a background job (§4)"},
	{Pattern: "POST /extract", Kind: metering.KindExtract, Server: Cell, BodyLimit: ExtractBody, Doc: "typed JSON from a page or pasted content, by schema and/or instruction (§2.4a)"},
	{Pattern: "GET /scrape/jobs/{id}", Server: Owner, Owner: Jobs, AnyCell: true, Doc: "a job's status"},
	{Pattern: "GET /scrape/jobs/{id}/results", Server: Owner, Owner: Jobs, AnyCell: true, Doc: "a job's results, NDJSON"},
	{Pattern: "POST /scrape/jobs/{id}/retry", Kind: metering.KindJob, Server: Owner, Owner: Jobs, AnyCell: true, Doc: "retry a job's failed URLs"},
	{Pattern: "POST /monitors", Server: Cell, BodyLimit: MonitorBody, Doc: "create a monitor, or find the account's one with that url and watch (§2.9); checks and changes bill in the background (docs/api.md)"},
	{Pattern: "GET /monitors", Server: Cell, Doc: "the account's monitors, newest first (§4)"},
	{Pattern: "GET /monitors/{id}", Server: Owner, Owner: Monitors, Doc: "one monitor (§2.9)"},
	{Pattern: "PATCH /monitors/{id}", Server: Owner, Owner: Monitors, BodyLimit: MonitorBody, Doc: "change watch, every, notify, schema, name or paused (§4)"},
	{Pattern: "DELETE /monitors/{id}", Server: Owner, Owner: Monitors, Doc: "remove a monitor with its history (§4)"},
	{Pattern: "GET /monitors/{id}/events", Server: Owner, Owner: Monitors, Doc: "a monitor's timeline, oldest first (?since=, ?limit=, §2.9)"},
	{Pattern: "GET /monitors/{id}/versions/{version}", Server: Owner, Owner: Monitors, Doc: "the page at a version, as Markdown (the evidence links, §2.9)"},
	{Pattern: "GET /recipes", Server: Cell, Doc: "the recipe catalog: every field of §2.7 with stage and health; free (docs/recipes.md)"},
	{Pattern: "GET /recipes/health", Public: true, Server: Gate, Service: "recipes", RegionQuery: true, Doc: "the region's recipe health checks, per recipe: the gate merges its live cells' (?region=, §4, docs/recipes.md)"},
	{Pattern: "POST /recipes/{name}", Kind: metering.KindRecipe, Server: Cell, BodyLimit: RecipeBody, Doc: "run a recipe: inputs and bypass_cache → rows, usage, meta (§2.7); per unit of a run, a cache hit 0"},
	{Pattern: "GET /recipes/jobs/{id}", Server: Owner, Owner: Jobs, AnyCell: true, Doc: "a background recipe run (run: job): status, then rows; its units are charged when it ends (docs/recipes.md)"},
	// Firecrawl's v2 API (docs/firecrawl.md): its SDKs work by changing the base URL.
	{Pattern: "POST /v2/scrape", Kind: metering.KindScrape, Server: Cell, Envelope: EnvelopeFirecrawl, BodyLimit: ScrapeBody, Doc: "Firecrawl v2: scrape one page (formats, onlyMainContent, tags, maxAge, json; docs/firecrawl.md)"},
	{Pattern: "POST /v2/map", Kind: metering.KindMap, Server: Cell, Envelope: EnvelopeFirecrawl, BodyLimit: 64 * KiB, Doc: "Firecrawl v2: the URLs of a site from its sitemaps and links (search, limit, includeSubdomains, sitemap; docs/firecrawl.md)"},
	{Pattern: "POST /v2/batch/scrape", Kind: metering.KindJob, PerURL: true, Server: Cell, Envelope: EnvelopeFirecrawl, BodyLimit: JobBody, Doc: "Firecrawl v2: start a batch scrape, a background job charged per fetchable URL before it runs (docs/firecrawl.md)"},
	{Pattern: "GET /v2/batch/scrape/{id}", Server: Owner, Owner: Jobs, AnyCell: true, Envelope: EnvelopeFirecrawl, Doc: "Firecrawl v2: a batch scrape's status and documents, 10 MiB a page (?skip=, next; docs/firecrawl.md)"},
	{Pattern: "DELETE /v2/batch/scrape/{id}", Server: Owner, Owner: Jobs, AnyCell: true, Envelope: EnvelopeFirecrawl, Doc: "Firecrawl v2: cancel a batch scrape: its URLs not yet fetched never are (docs/firecrawl.md)"},
	{Pattern: "GET /v2/batch/scrape/{id}/errors", Server: Owner, Owner: Jobs, AnyCell: true, Envelope: EnvelopeFirecrawl, Doc: "Firecrawl v2: a batch scrape's failed URLs (docs/firecrawl.md)"},
	{Pattern: "POST /v2/crawl", Kind: metering.KindCrawl, Server: Cell, Envelope: EnvelopeFirecrawl, BodyLimit: 64 * KiB, Doc: "Firecrawl v2: start a site crawl from one URL, a growing background job; each page is charged as it is scraped (docs/firecrawl.md)"},
	{Pattern: "GET /v2/concurrency-check", Server: Gate, Service: "firecrawl", Envelope: EnvelopeFirecrawl, Doc: "Firecrawl v2: the account's requests in flight at this gate and its plan's bound (docs/firecrawl.md)"},
	{Pattern: "GET /v2/team/queue-status", Server: Gate, Service: "firecrawl", Envelope: EnvelopeFirecrawl, Doc: "Firecrawl v2: the account's job URLs being fetched and waiting, from every live cell of the region (docs/firecrawl.md)"},
	{Pattern: "GET /v2/crawl/active", Server: Gate, Service: "firecrawl", Envelope: EnvelopeFirecrawl, Doc: "Firecrawl v2: the account's crawls still running, from every live cell of the region (docs/firecrawl.md)"},
	{Pattern: "GET /v2/crawl/{id}", Server: Owner, Owner: Jobs, AnyCell: true, Envelope: EnvelopeFirecrawl, Doc: "Firecrawl v2: a crawl's status and documents, 10 MiB a page (?skip=, next); with Upgrade: websocket, its documents as they come (docs/firecrawl.md)"},
	{Pattern: "DELETE /v2/crawl/{id}", Server: Owner, Owner: Jobs, AnyCell: true, Envelope: EnvelopeFirecrawl, Doc: "Firecrawl v2: cancel a crawl: nothing more is fetched or charged (docs/firecrawl.md)"},
	{Pattern: "GET /v2/crawl/{id}/errors", Server: Owner, Owner: Jobs, AnyCell: true, Envelope: EnvelopeFirecrawl, Doc: "Firecrawl v2: a crawl's failed URLs and those robots.txt kept it from (docs/firecrawl.md)"},
	{Pattern: "POST /v2/extract", Kind: metering.KindExtract, PerURL: true, Server: Cell, Envelope: EnvelopeFirecrawl, BodyLimit: JobBody, Doc: "Firecrawl v2: start an extraction of typed data from pages, a background job; each page is charged as it is extracted (docs/firecrawl.md)"},
	{Pattern: "GET /v2/extract/{id}", Server: Owner, Owner: Jobs, AnyCell: true, Envelope: EnvelopeFirecrawl, Doc: "Firecrawl v2: an extraction's status and data (docs/firecrawl.md)"},
	{Pattern: "POST /v2/search", Kind: metering.KindSearch, Server: Gate, Service: "search", Envelope: EnvelopeFirecrawl, BodyLimit: 64 * KiB, Doc: "Firecrawl v2: search the region's index, billed as GET /search (limit, sources web and news); scrapeOptions scrapes the hits, each a /v2/scrape of the caller (docs/firecrawl.md)"},
	{Pattern: "/", Server: Cell, Doc: "everything else: a cell (trawl dev's /demo/ site) or its 404"},
}

// CellLocal are routes a cell serves to its own region only: its gate
// (health, a search's and an answer's parts, releasing held jobs, the
// background charges, recipe health), operators and benchmarks; the gate
// never sends a client there.
var CellLocal = []Route{
	{Pattern: "GET /health", Server: Cell, Doc: "the cell's health: store and browser pool"},
	{Pattern: "GET /search/local", Server: Cell, Doc: "the cell's own best pages for a query, with scores, passages and its parts of the rich block: the gate merges every live cell's (docs/search.md)"},
	{Pattern: "POST /search/generate", Server: Cell, BodyLimit: 1 * MiB, Doc: "the operator's model (--llm-provider) writes an answer from the passages the gate sends for GET /answer, its tokens in the signed usage report; 501 without a model (docs/search.md)"},
	{Pattern: "POST /scrape/jobs/{id}/release", Server: Cell, Doc: "the gate's meter starts a held job or retry it has charged (the hold's token in Trawl-Hold), or with ?drop=1 ends one it could not charge"},
	{Pattern: "GET /monitor-charges", Server: Cell, Doc: "the monitors' background charges (checks, confirmed matched changes) and finished recipe jobs' charges waiting for the gate; only a request the gate signs without an account"},
	{Pattern: "GET /jobs/queue", Server: Cell, Doc: "the account's job URLs on this cell being fetched and waiting: the gate merges every live cell's for GET /v2/team/queue-status"},
	{Pattern: "GET /crawls/active", Server: Cell, Doc: "the account's Firecrawl crawls running on this cell: the gate merges every live cell's for GET /v2/crawl/active"},
	{Pattern: "GET /recipes/health/local", Server: Cell, Doc: "this cell's recipe health checks and stages: the gate merges every live cell's (docs/recipes.md)"},
	{Pattern: "POST /monitor-charges/ack", Server: Cell, BodyLimit: 1 * MiB, Doc: "the gate has charged these (ids): the cell forgets them"},
}

// Table matches requests to rows.
type Table struct {
	rows   []Route
	mux    *http.ServeMux      // paths only
	byPath map[string][]*Route // path pattern → its rows, in table order
}

// New checks rows and builds their table.
func New(rows []Route) (t *Table, err error) {
	t = &Table{rows: rows, mux: http.NewServeMux(), byPath: map[string][]*Route{}}
	seen := map[string]bool{}
	for i := range rows {
		r := &rows[i]
		if seen[r.Pattern] {
			return nil, fmt.Errorf("routes: %q is in the table twice", r.Pattern)
		}
		seen[r.Pattern] = true
		if err := r.check(); err != nil {
			return nil, err
		}
		p := r.Path()
		if prev := t.byPath[p]; len(prev) > 0 {
			first := prev[0]
			if first.Public != r.Public || first.Server != r.Server || first.Service != r.Service || first.Owner != r.Owner || first.RegionQuery != r.RegionQuery || first.Role != r.Role || first.Envelope != r.Envelope {
				return nil, fmt.Errorf("routes: %q and %q share a path but not its access, server or owner", first.Pattern, r.Pattern)
			}
			if first.Method() == "" || r.Method() == "" {
				return nil, fmt.Errorf("routes: %q and %q: a route of every method cannot share its path", first.Pattern, r.Pattern)
			}
		} else {
			if err := register(t.mux, p); err != nil {
				return nil, fmt.Errorf("routes: %q: %w", r.Pattern, err)
			}
		}
		t.byPath[p] = append(t.byPath[p], r)
	}
	return t, nil
}

func register(mux *http.ServeMux, pattern string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%v", v)
		}
	}()
	mux.Handle(pattern, http.NotFoundHandler())
	return nil
}

func (r *Route) check() error {
	switch {
	case r.Server < Gate || r.Server > Owner:
		return fmt.Errorf("routes: %q: no server", r.Pattern)
	case r.Server == Gate && r.Service == "":
		return fmt.Errorf("routes: %q: a gate route names its service", r.Pattern)
	case r.Server != Gate && r.Service != "":
		return fmt.Errorf("routes: %q: only gate routes name a service", r.Pattern)
	case (r.Server == Owner) != (r.Owner != nil):
		return fmt.Errorf("routes: %q: an owner route, and only one, has an id grammar", r.Pattern)
	case r.Server == Owner && !strings.Contains(r.Path(), "/{id}"):
		return fmt.Errorf("routes: %q: an owner route names its object with {id}", r.Pattern)
	case r.RegionQuery && r.Server != Gate:
		return fmt.Errorf("routes: %q: only a gate route can be sent to another region's gate", r.Pattern)
	case r.Relay && (r.Server != Gate || r.Public || r.Kind != ""):
		return fmt.Errorf("routes: %q: only a keyed, free gate route relays its calls through the gate", r.Pattern)
	case r.Kind != "" && r.Method() != http.MethodPost && r.Method() != http.MethodGet:
		return fmt.Errorf("routes: %q: a billed route is a POST or a GET", r.Pattern)
	case r.PerURL && r.Kind == "":
		return fmt.Errorf("routes: %q: PerURL on a free route", r.Pattern)
	case r.BodyLimit < 0:
		return fmt.Errorf("routes: %q: negative body limit", r.Pattern)
	case r.Envelope != "" && r.Envelope != EnvelopeFirecrawl:
		return fmt.Errorf("routes: %q: unknown error envelope %q", r.Pattern, r.Envelope)
	case r.Role != "" && (r.Public || r.Kind != ""):
		return fmt.Errorf("routes: %q: a route that needs a role is keyed and free", r.Pattern)
	}
	return nil
}

// Default is the table of Rows.
func Default() *Table { return defaultTable }

var defaultTable = must(New(Rows))

func must(t *Table, err error) *Table {
	if err != nil {
		panic(err)
	}
	return t
}

// Rows returns the table's rows; the caller must not modify them.
func (t *Table) Rows() []Route { return t.rows }

// Row returns the row of pattern, or nil; the caller must not modify it.
func (t *Table) Row(pattern string) *Route {
	for i := range t.rows {
		if t.rows[i].Pattern == pattern {
			return &t.rows[i]
		}
	}
	return nil
}

// Service returns a copy of the Gate rows of the named service, in table
// order: what a server of that service alone (a test, trawl ledger serve)
// gives Mux with the service's Handlers.
func (t *Table) Service(name string) []Route {
	var out []Route
	for _, r := range t.rows {
		if r.Server == Gate && r.Service == name {
			out = append(out, r)
		}
	}
	return out
}

// Match is a request's row.
type Match struct {
	// Route is the request's row: the one of its method, or the first row
	// of its path when the path does not take the method.
	*Route
	// Allowed reports whether the route takes the request's method.
	Allowed bool
	path    string // the request's path
}

// Match returns the row of r. Every request has one: the table ends with
// the prefix "/". A path that is not clean matches as it will after the
// redirect its server answers.
func (t *Table) Match(r *http.Request) Match {
	pattern := t.pattern(r)
	rows := t.byPath[pattern]
	if len(rows) == 0 {
		rows = t.byPath["/"] // a CONNECT, or a table without "/"
		if len(rows) == 0 {
			return Match{Route: &Route{Pattern: "/", Server: Cell}, Allowed: true, path: r.URL.Path}
		}
	}
	m := Match{Route: rows[0], path: r.URL.Path}
	for _, row := range rows {
		switch row.Method() {
		case "", r.Method:
			m.Route, m.Allowed = row, true
			return m
		case http.MethodGet:
			if r.Method == http.MethodHead {
				m.Route, m.Allowed = row, true
				return m
			}
		}
	}
	return m
}

// pattern is the path pattern of r. ServeMux matches "/v1" to the prefix
// "/v1/" (it answers with a redirect there); the table does not: a path
// belongs to a prefix only when it is below it, so "/v1" is the next
// shorter prefix's, as "/v1/" does not name it.
func (t *Table) pattern(r *http.Request) string {
	_, pattern := t.mux.Handler(r)
	if !strings.HasSuffix(pattern, "/") || r.Method == http.MethodConnect {
		return pattern
	}
	p := r.URL.Path
	if c := path.Clean(p); c != "/" {
		p = c
		if strings.HasSuffix(r.URL.Path, "/") {
			p += "/"
		}
	}
	for p != "/" && !strings.HasPrefix(p, pattern) {
		p = path.Dir(strings.TrimSuffix(p, "/"))
		if p != "/" {
			p += "/"
		}
		u := *r.URL
		u.Path, u.RawPath = p, ""
		_, pattern = t.mux.Handler(&http.Request{Method: r.Method, Host: r.Host, URL: &u})
	}
	return pattern
}

// Value is the path segment the route's {name} matched, or "".
func (m Match) Value(name string) string {
	want := "{" + name + "}"
	segs := strings.Split(m.Path(), "/")
	got := strings.Split(m.path, "/")
	for i, s := range segs {
		if s == want && i < len(got) {
			return got[i]
		}
	}
	return ""
}

// Place is where a request goes.
type Place struct {
	// Local: this gate answers it.
	Local bool
	// Region answers it: this region, the owner's, or the one ?region=
	// names.
	Region string
	// Cell is the owning cell, when the owner is in this region; "" is any
	// live cell.
	Cell string
	// Owner is the object's id on an Owner route; NoOwner is set when it is
	// not of the route's grammar (any cell of this region answers 404).
	Owner   string
	NoOwner bool
	// Placed: the id names no cell and its grammar is Placed; the cell
	// the region's ready cells place it on answers.
	Placed bool
}

// Place says where a request with row m goes, from the gate of region own.
// This is the one rule of routing: caddy-modules/api answers the Local
// ones and caddy-modules/route sends the rest.
func (m Match) Place(r *http.Request, own string) Place {
	switch m.Server {
	case Gate:
		if m.RegionQuery {
			if q := r.URL.Query().Get("region"); q != "" && q != own {
				return Place{Region: q}
			}
		}
		return Place{Local: true, Region: own}
	case Owner:
		id := m.Value("id")
		region, cell, ok := m.Owner.Parse(id)
		if !ok {
			return Place{Region: own, Owner: id, NoOwner: true}
		}
		if region != own {
			return Place{Region: region, Owner: id}
		}
		return Place{Region: own, Cell: cell, Owner: id, Placed: cell == "" && m.Owner.Placed}
	}
	return Place{Region: own}
}
